package document

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// Order is the field order of a document and of the documents inside it:
// what a Doc, a map, does not keep. Keys lists the fields in order, each
// once (of a name given twice, the first place counts); Sub
// holds the order of a sub-document field, or of an array field's
// elements (in its Elems). A nil *Order, or a field it does not name,
// means name order; a field it names that the document lacks is skipped
// (a projection took it out).
type Order struct {
	Keys  []string
	Sub   map[string]*Order
	Elems []*Order
}

// Child returns the order of the field k's sub-document or array.
func (o *Order) Child(k string) *Order {
	if o == nil || o.Sub == nil {
		return nil
	}
	return o.Sub[k]
}

// Elem returns the order of an array's element i.
func (o *Order) Elem(i int) *Order {
	if o == nil || i >= len(o.Elems) {
		return nil
	}
	return o.Elems[i]
}

// FieldsOf returns m's keys: those o names, in its order, then the
// others in name order.
func (o *Order) FieldsOf(m map[string]any) []string {
	if o == nil || len(o.Keys) == 0 {
		return slices.Sorted(maps.Keys(m))
	}
	// Commonly the order names exactly the document's fields.
	all := len(o.Keys) == len(m)
	for _, k := range o.Keys {
		if _, ok := m[k]; !ok {
			all = false
			break
		}
	}
	if all { // Keys are distinct
		return o.Keys
	}
	out := make([]string, 0, len(m))
	taken := make(map[string]bool, len(m))
	for _, k := range o.Keys {
		if _, ok := m[k]; ok && !taken[k] {
			out = append(out, k)
			taken[k] = true
		}
	}
	n := len(out)
	for k := range m {
		if !taken[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out[n:])
	return out
}

// IDFirst returns o with _id moved to the front, as MongoDB stores a
// document's _id first whatever the order it was written in; o itself is
// not changed.
func (o *Order) IDFirst() *Order {
	if o == nil {
		return &Order{Keys: []string{"_id"}}
	}
	if len(o.Keys) > 0 && o.Keys[0] == "_id" {
		return o
	}
	c := *o
	c.Keys = append([]string{"_id"}, slices.DeleteFunc(slices.Clone(o.Keys), func(k string) bool { return k == "_id" })...)
	return &c
}

// EncodeOrdered appends the binary form of doc with its fields in order o
// (see Order); Encode is EncodeOrdered with a nil order.
func EncodeOrdered(dst []byte, doc Doc, o *Order) ([]byte, error) {
	return appendValue(dst, doc, 0, o)
}

// DecodeOrder reads the field order of a document written by Encode or
// EncodeOrdered, without its values.
func DecodeOrder(b []byte) (*Order, error) {
	if len(b) == 0 || b[0] != tagObject {
		return nil, fmt.Errorf("%w: top level is not a document", ErrCorrupt)
	}
	d := decoder{b: b}
	_, o := d.valueOrder(0, false)
	if d.err == nil && d.i != len(b) {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(b)-d.i)
	}
	if d.err != nil {
		return nil, d.err
	}
	return o, nil
}

// valueOrder is value, also returning the order of a document or array;
// without values it only skips them (and returns no value).
func (d *decoder) valueOrder(depth int, values bool) (any, *Order) {
	if d.err != nil || d.i >= len(d.b) {
		return d.value(depth), nil
	}
	if !values && d.b[d.i] != tagObject && d.b[d.i] != tagArray {
		d.skipValue()
		return nil, nil
	}
	switch d.b[d.i] {
	case tagObject:
		if depth > MaxDepth {
			return d.value(depth), nil
		}
		d.i++
		n := d.count("document length")
		var m map[string]any
		if values {
			m = make(map[string]any, n)
		}
		o := &Order{Keys: make([]string, 0, n)}
		for j := 0; j < n && d.err == nil; j++ {
			k := string(d.bytes(d.uvarint("key length"), "key"))
			if _, dup := m[k]; dup {
				d.fail("duplicate key")
			}
			v, so := d.valueOrder(depth+1, values)
			if values {
				m[k] = v
			}
			o.Keys = append(o.Keys, k)
			if so != nil {
				if o.Sub == nil {
					o.Sub = map[string]*Order{}
				}
				o.Sub[k] = so
			}
		}
		return m, o
	case tagArray:
		if depth > MaxDepth {
			return d.value(depth), nil
		}
		d.i++
		n := d.count("array length")
		var a []any
		if values {
			a = make([]any, n)
		}
		var o *Order
		for j := 0; j < n && d.err == nil; j++ {
			v, so := d.valueOrder(depth+1, values)
			if values {
				a[j] = v
			}
			if so != nil {
				if o == nil {
					o = &Order{Elems: make([]*Order, n)}
				}
				o.Elems[j] = so
			}
		}
		return a, o
	}
	return d.value(depth), nil
}

// DecodeWithOrder reads a document and its field order.
func DecodeWithOrder(b []byte) (Doc, *Order, error) {
	d := decoder{b: b}
	v, o := d.valueOrder(0, true)
	if d.err == nil && d.i != len(b) {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(b)-d.i)
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("%w: top level is not a document", ErrCorrupt)
	}
	return doc, o, nil
}

// jsonScanner walks valid JSON text for object keys.
type jsonScanner struct {
	b   []byte
	i   int
	err error
}

func (s *jsonScanner) fail(what string) {
	if s.err == nil {
		s.err = mongoerr.New(mongoerr.BadValue, "malformed JSON at byte %d: %s", s.i, what)
	}
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func isJSONDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// str reads a string, unescaping it when it holds escapes.
func (s *jsonScanner) str() string {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.fail("string expected")
		return ""
	}
	start := s.i
	s.i++
	escaped := false
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			s.fail("unterminated string")
			return ""
		}
		s.i += j
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		k := s.i
		for k > start+1 && s.b[k-1] == '\\' {
			k--
		}
		if (s.i-k)%2 == 0 {
			escaped = escaped || s.i > k || bytes.IndexByte(s.b[start+1:s.i], '\\') >= 0
			break
		}
		escaped = true
		s.i++
	}
	s.i++
	raw := s.b[start:s.i]
	if !escaped && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	// As encoding/json reads it: escapes resolved, invalid UTF-8 as U+FFFD.
	var out string
	if err := json.Unmarshal(raw, &out); err != nil {
		s.fail("bad string")
	}
	return out
}

// appendKeyName appends an object's key as the codec writes it: its
// length, then its bytes.
func appendKeyName(dst []byte, k string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(k))), k...)
}

// skipValue moves past one value that is not a document or an array.
func (d *decoder) skipValue() {
	tag := d.b[d.i]
	d.i++
	switch tag {
	case tagNull, tagFalse, tagTrue:
	case tagInt, tagInt32:
		d.varint("integer")
	case tagFloat:
		d.bytes(8, "double")
	case tagString:
		d.bytes(d.uvarint("string length"), "string")
	case tagDate:
		d.varint("date")
		d.uvarint("date")
	case tagOID:
		d.bytes(12, "ObjectId")
	case tagDec128:
		d.bytes(16, "decimal")
	case tagBinary:
		d.bytes(1, "binary subtype")
		d.bytes(d.uvarint("binary length"), "binary")
	default:
		d.i--
		d.fail("tag")
	}
}

// DistinctKeys returns keys with each name once, in the place it first
// has (of a key given twice, BSON and encoding/json keep the last value);
// keys itself when no name repeats.
func DistinctKeys(keys []string) []string {
	if len(keys) <= 16 { // pairwise, without a map
		dup := false
		for i := 1; i < len(keys) && !dup; i++ {
			dup = slices.Contains(keys[:i], keys[i])
		}
		if !dup {
			return keys
		}
	}
	seen := make(map[string]bool, len(keys))
	var out []string
	for i, k := range keys {
		if seen[k] {
			if out == nil {
				out = slices.Clone(keys[:i])
			}
			continue
		}
		seen[k] = true
		if out != nil {
			out = append(out, k)
		}
	}
	if out == nil {
		return keys
	}
	return out
}

// StartsWithID reports whether an encoded document's first field is _id,
// as every document stored in its order is (documents stored in name
// order by earlier versions may have fields before it).
func StartsWithID(enc []byte) bool {
	if len(enc) == 0 || enc[0] != tagObject {
		return false
	}
	_, n := binary.Uvarint(enc[1:])
	if n <= 0 {
		return false
	}
	k, m := binary.Uvarint(enc[1+n:])
	return m > 0 && k == 3 && len(enc) >= 1+n+m+3 && string(enc[1+n+m:1+n+m+3]) == "_id"
}

// ParseJSONOrdered decodes the text of one JSON object, which must be valid
// JSON (the caller checked it), into the map encoding/json with UseNumber
// makes of it (numbers as json.Number, the last of a key given twice) and
// the object's field order, at every depth (which encoding/json, decoding
// into a map, loses), in one walk. An Extended JSON wrapper's order is read
// like any object's and ignored when the wrapper is a value.
func ParseJSONOrdered(text []byte) (map[string]any, *Order, error) {
	s := jsonScanner{b: text}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, nil, mongoerr.New(mongoerr.BadValue, "a document must be a JSON object")
	}
	v, o := s.parse(0)
	if s.err != nil {
		return nil, nil, s.err
	}
	return v.(map[string]any), o, nil
}

// parse decodes one value and returns the order of an object or array.
func (s *jsonScanner) parse(depth int) (any, *Order) {
	s.space()
	if s.err != nil || s.i >= len(s.b) {
		s.fail("value expected")
		return nil, nil
	}
	if depth > 2*MaxDepth {
		s.fail("nesting too deep")
		return nil, nil
	}
	switch c := s.b[s.i]; c {
	case '{':
		s.i++
		m := map[string]any{}
		o := &Order{Keys: make([]string, 0, 8)}
		for s.space(); s.err == nil && s.i < len(s.b) && s.b[s.i] != '}'; s.space() {
			k := s.str()
			s.space()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				s.fail("':' expected")
				return nil, nil
			}
			s.i++
			v, so := s.parse(depth + 1)
			m[k] = v
			o.Keys = append(o.Keys, k)
			switch { // of a key given twice, the last value counts
			case so != nil:
				if o.Sub == nil {
					o.Sub = map[string]*Order{}
				}
				o.Sub[k] = so
			case o.Sub != nil:
				delete(o.Sub, k)
			}
			s.space()
			if s.i < len(s.b) && s.b[s.i] == ',' {
				s.i++
			}
		}
		s.i++
		o.Keys = DistinctKeys(o.Keys)
		if len(o.Keys) == 0 {
			o.Keys = nil
		}
		if len(o.Sub) == 0 {
			o.Sub = nil
		}
		return m, o
	case '[':
		s.i++
		a := []any{}
		var o *Order
		for j := 0; ; j++ {
			s.space()
			if s.err != nil || s.i >= len(s.b) || s.b[s.i] == ']' {
				break
			}
			v, so := s.parse(depth + 1)
			a = append(a, v)
			if so != nil {
				if o == nil {
					o = &Order{}
				}
				for len(o.Elems) < j {
					o.Elems = append(o.Elems, nil)
				}
				o.Elems = append(o.Elems, so)
			}
			s.space()
			if s.i < len(s.b) && s.b[s.i] == ',' {
				s.i++
			}
		}
		s.i++
		return a, o
	case '"':
		return s.str(), nil
	case 't', 'f', 'n':
		start := s.i
		for s.i < len(s.b) && !isJSONDelim(s.b[s.i]) {
			s.i++
		}
		switch string(s.b[start:s.i]) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		case "null":
			return nil, nil
		}
		s.fail("literal")
		return nil, nil
	}
	start := s.i
	for s.i < len(s.b) && !isJSONDelim(s.b[s.i]) {
		s.i++
	}
	return json.Number(s.b[start:s.i]), nil
}
