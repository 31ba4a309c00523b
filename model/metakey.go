package model

import (
	"strconv"
	"strings"
)

// decodeMetaKey returns the value a series' canonical meta key encodes,
// as DecodeMeta does, for a key CanonicalMeta wrote. Series do not keep
// their meta decoded (a small map per series is most of what a sparse
// series costs); readers decode it when they need it. Strings of the
// result share the key's memory. The common shapes (objects, arrays,
// plain strings, numbers, booleans, null) are parsed here in one pass;
// escapes and Extended JSON wrappers go to DecodeMeta.
func DecodeMetaKey(key string) (any, error) {
	d := metaKeyDecoder{s: key}
	v, ok := d.value(0)
	if ok && d.i == len(key) {
		return v, nil
	}
	return DecodeMeta(key)
}

// metaOfKey is the value a series' canonical meta key encodes, nil for
// none.
func MetaOfKey(key string) any {
	if key == "" {
		return nil
	}
	v, err := DecodeMetaKey(key)
	if err != nil {
		return nil // keys are validated before a series is made
	}
	return v
}

// metaKeyDecoder parses canonical meta keys; ok false means "not the
// plain canonical form", and the caller falls back to DecodeMeta.
type metaKeyDecoder struct {
	s string
	i int
}

func (d *metaKeyDecoder) value(depth int) (any, bool) {
	if d.i >= len(d.s) || depth > maxMetaDepth {
		return nil, false
	}
	switch c := d.s[d.i]; {
	case c == '"':
		return d.str()
	case c == '{':
		d.i++
		if d.i < len(d.s) && d.s[d.i] == '}' {
			d.i++
			return map[string]any{}, true
		}
		m := make(map[string]any, 4)
		for {
			k, ok := d.str()
			if !ok || k == "" || k[0] == '$' || d.i >= len(d.s) || d.s[d.i] != ':' {
				return nil, false // Extended JSON wrapper, or not canonical
			}
			d.i++
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			m[k] = v
			if d.i >= len(d.s) {
				return nil, false
			}
			switch d.s[d.i] {
			case ',':
				d.i++
			case '}':
				d.i++
				return m, true
			default:
				return nil, false
			}
		}
	case c == '[':
		d.i++
		out := []any{}
		if d.i < len(d.s) && d.s[d.i] == ']' {
			d.i++
			return out, true
		}
		for {
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			out = append(out, v)
			if d.i >= len(d.s) {
				return nil, false
			}
			switch d.s[d.i] {
			case ',':
				d.i++
			case ']':
				d.i++
				return out, true
			default:
				return nil, false
			}
		}
	case c == 't' && strings.HasPrefix(d.s[d.i:], "true"):
		d.i += 4
		return true, true
	case c == 'f' && strings.HasPrefix(d.s[d.i:], "false"):
		d.i += 5
		return false, true
	case c == 'n' && strings.HasPrefix(d.s[d.i:], "null"):
		d.i += 4
		return nil, true
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	return nil, false
}

// str parses a string with no escapes.
func (d *metaKeyDecoder) str() (string, bool) {
	if d.i >= len(d.s) || d.s[d.i] != '"' {
		return "", false
	}
	j := d.i + 1
	for ; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			v := d.s[d.i+1 : j]
			d.i = j + 1
			return v, true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

func (d *metaKeyDecoder) number() (any, bool) {
	j, isFloat := d.i, false
	for ; j < len(d.s); j++ {
		c := d.s[j]
		if c == '.' || c == 'e' || c == 'E' || c == '+' {
			isFloat = true
		} else if c != '-' && (c < '0' || c > '9') {
			break
		}
	}
	tok := d.s[d.i:j]
	if !isFloat {
		if n, err := strconv.ParseInt(tok, 10, 64); err == nil {
			d.i = j
			return n, true
		}
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return nil, false
	}
	d.i = j
	return f, true
}

// metaKeyField returns the canonical JSON of the value at path inside the
// meta value that canonical key encodes, cut from the key without decoding
// it (canonical JSON is made value by value, so a value's text inside the
// key is its own canonical form): "null" when a step of the path is not
// an object or lacks the field, as groupOf answers. ok is false for a key
// this does not read (escapes, Extended JSON), which the caller decodes.
func MetaKeyField(key string, path []string) (raw string, ok bool) {
	d := metaKeyDecoder{s: key}
	for _, part := range path {
		if d.i >= len(d.s) || d.s[d.i] != '{' {
			if d.i < len(d.s) && !d.skip(0) {
				return "", false
			}
			return "null", true
		}
		d.i++
		if d.i < len(d.s) && d.s[d.i] == '}' {
			return "null", true
		}
		for {
			k, ok := d.str()
			if !ok || k == "" || k[0] == '$' || d.i >= len(d.s) || d.s[d.i] != ':' {
				return "", false // Extended JSON wrapper, or not canonical
			}
			d.i++
			if k == part {
				break
			}
			if !d.skip(1) || d.i >= len(d.s) {
				return "", false
			}
			if d.s[d.i] == '}' {
				return "null", true
			}
			if d.s[d.i] != ',' {
				return "", false
			}
			d.i++
		}
	}
	start := d.i
	if !d.skip(0) {
		return "", false
	}
	return d.s[start:d.i], true
}

// MetaKeyFields calls fn with the name and canonical JSON of each field
// of the document that canonical key encodes, in key order, cut from the
// key without decoding it (as MetaKeyField cuts one). ok is false, and fn
// may have been called for some fields, for a key that is not a document
// or that this does not read (escapes, Extended JSON), which the caller
// decodes.
func MetaKeyFields(key string, fn func(name, raw string)) (ok bool) {
	d := metaKeyDecoder{s: key}
	if d.i >= len(d.s) || d.s[d.i] != '{' {
		return false
	}
	d.i++
	if d.i < len(d.s) && d.s[d.i] == '}' {
		return d.i+1 == len(d.s)
	}
	for {
		k, ok := d.str()
		if !ok || k == "" || k[0] == '$' || d.i >= len(d.s) || d.s[d.i] != ':' {
			return false
		}
		d.i++
		start := d.i
		if !d.skip(1) || d.i >= len(d.s) {
			return false
		}
		fn(k, d.s[start:d.i])
		switch d.s[d.i] {
		case ',':
			d.i++
		case '}':
			return d.i+1 == len(d.s)
		default:
			return false
		}
	}
}

// skip moves past one value of the plain canonical form, as value reads
// it, without making it.
func (d *metaKeyDecoder) skip(depth int) bool {
	if d.i >= len(d.s) || depth > maxMetaDepth {
		return false
	}
	switch c := d.s[d.i]; {
	case c == '"':
		_, ok := d.str()
		return ok
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		if d.i < len(d.s) && d.s[d.i] == end {
			d.i++
			return true
		}
		for {
			if c == '{' {
				k, ok := d.str()
				if !ok || k == "" || k[0] == '$' || d.i >= len(d.s) || d.s[d.i] != ':' {
					return false
				}
				d.i++
			}
			if !d.skip(depth+1) || d.i >= len(d.s) {
				return false
			}
			switch d.s[d.i] {
			case ',':
				d.i++
			case end:
				d.i++
				return true
			default:
				return false
			}
		}
	case c == 't' && strings.HasPrefix(d.s[d.i:], "true"):
		d.i += 4
	case c == 'f' && strings.HasPrefix(d.s[d.i:], "false"):
		d.i += 5
	case c == 'n' && strings.HasPrefix(d.s[d.i:], "null"):
		d.i += 4
	case c == '-' || c >= '0' && c <= '9':
		j := d.i + 1
		for j < len(d.s) && (d.s[j] >= '0' && d.s[j] <= '9' || d.s[j] == '.' || d.s[j] == 'e' || d.s[j] == 'E' || d.s[j] == '+' || d.s[j] == '-') {
			j++
		}
		d.i = j
	default:
		return false
	}
	return true
}
