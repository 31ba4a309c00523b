package api

import (
	"bytes"
	"unicode/utf8"

	"github.com/hourglassdb/hourglass/model"
)

// Limits of the one-pass check; text past them is checked by the full path.
const (
	fastMaxDepth   = 64 // nesting
	fastMaxMembers = 32 // members of one object (names compared pairwise)
)

// fastValid reports whether b is one JSON value of the kind top ('{' or
// '[') that the full checks (json.Valid, then checkJSONText) would accept:
// valid UTF-8, valid syntax, no object naming a field twice, no NUL in a
// name. It checks all of that in one pass over the text and allocates
// nothing. false does not mean the text is refused: text it does not
// handle (escapes in member names, deep nesting, objects of many members)
// is left to the full checks, which also say what is wrong.
func fastValid(b []byte, top byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	i := model.SkipJSONSpace(b, 0)
	if i >= len(b) || b[i] != top {
		return false
	}
	i, ok := fastValue(b, i, 0)
	return ok && model.SkipJSONSpace(b, i) == len(b)
}

// fastValue checks the value at b[i] and returns the index past it.
func fastValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '{':
		return fastObject(b, i, depth+1)
	case c == '[':
		return fastArray(b, i, depth+1)
	case c == '"':
		return fastString(b, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return fastNumber(b, i)
	case c == 't':
		return fastLiteral(b, i, "true")
	case c == 'f':
		return fastLiteral(b, i, "false")
	case c == 'n':
		return fastLiteral(b, i, "null")
	}
	return i, false
}

func fastObject(b []byte, i, depth int) (int, bool) {
	if depth > fastMaxDepth {
		return i, false
	}
	var names [fastMaxMembers][]byte
	n := 0
	i = model.SkipJSONSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' || n == fastMaxMembers {
			return i, false
		}
		end, ok := fastString(b, i)
		if !ok {
			return i, false
		}
		name := b[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			return i, false // an escaped name: the full check unescapes it
		}
		for _, prev := range names[:n] {
			if bytes.Equal(prev, name) {
				return i, false
			}
		}
		names[n] = name
		n++
		i = model.SkipJSONSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return i, false
		}
		if i, ok = fastValue(b, model.SkipJSONSpace(b, i+1), depth); !ok {
			return i, false
		}
		i = model.SkipJSONSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i = model.SkipJSONSpace(b, i+1)
		default:
			return i, false
		}
	}
}

func fastArray(b []byte, i, depth int) (int, bool) {
	if depth > fastMaxDepth {
		return i, false
	}
	i = model.SkipJSONSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = fastValue(b, i, depth); !ok {
			return i, false
		}
		i = model.SkipJSONSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ']':
			return i + 1, true
		case ',':
			i = model.SkipJSONSpace(b, i+1)
		default:
			return i, false
		}
	}
}

// fastString checks the string at b[i] (UTF-8 is checked for the whole
// text beforehand) and returns the index past its closing quote.
func fastString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return i, false
					}
				}
				if h := b[i+1] | 0x20; h == 'd' && b[i+2] >= '8' {
					// A surrogate (\ud800-\udfff): the full checks pair it.
					return i, false
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// fastNumber checks a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func fastNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func fastLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}
