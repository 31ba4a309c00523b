package document

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// FromJSON converts a document decoded by encoding/json (UseNumber or
// not) into a stored document: Extended JSON wrappers become values
// ({"$date": ...} a date, {"$oid": ...} an ObjectId, {"$numberLong": ...}
// an integer); integers stay int64. Field names may not start with '$' or
// be empty, an _id may not be an array, and regular expressions cannot be
// stored: each is BadValue (2).
func FromJSON(raw map[string]any) (Doc, error) {
	v, err := partialfilter.FromExtJSON(raw)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "a document must be a JSON object")
	}
	if err := checkValue(doc, 0); err != nil {
		return nil, err
	}
	if _, isArr := doc["_id"].([]any); isArr {
		return nil, mongoerr.New(mongoerr.BadValue, "can't use an array for _id")
	}
	return doc, nil
}

func checkValue(v any, depth int) error {
	if depth > MaxDepth {
		return mongoerr.New(mongoerr.BadValue, "document nesting exceeds %d levels", MaxDepth)
	}
	switch t := v.(type) {
	case map[string]any:
		// The refusal of the first bad field in name order, so that a
		// document is refused with the same message every time.
		var first error
		firstKey := ""
		for k, e := range t {
			if first != nil && k > firstKey {
				continue
			}
			if err := checkField(k, e, depth); err != nil {
				first, firstKey = err, k
			}
		}
		return first
	case []any:
		for _, e := range t {
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
	case partialfilter.Regex:
		return mongoerr.New(mongoerr.BadValue, "regular expressions cannot be stored in documents")
	}
	return nil
}

func checkField(k string, v any, depth int) error {
	if k == "" || strings.HasPrefix(k, "$") || strings.IndexByte(k, 0) >= 0 {
		return mongoerr.New(mongoerr.BadValue, "field name %.40q is not allowed: names may not be empty, start with '$' or hold a NUL byte", k)
	}
	return checkValue(v, depth+1)
}

// AppendJSON appends doc as relaxed Extended JSON that reads back (FromJSON)
// to the same values and types: _id first, then the other fields in name
// order; int32 values as plain numbers, int64 values as plain numbers
// only where one reads back as an int64 (beyond 32 bits, within 53),
// {"$numberLong": "..."} otherwise; doubles with a fraction or exponent
// (1.0, not 1) and NaN or infinities as {"$numberDouble": "..."}; dates as
// {"$date": "<RFC 3339, UTC>"}, ObjectIds as {"$oid": "..."}, decimals as
// {"$numberDecimal": "..."}, binary as {"$binary": {"base64": "...",
// "subType": "<hex>"}}.
func AppendJSON(dst []byte, doc Doc) []byte {
	return AppendJSONOrdered(dst, doc, nil)
}

// AppendJSONOrdered is AppendJSON with the fields in order o (see Order),
// at every depth; with a nil order, _id first, then the others in name
// order.
func AppendJSONOrdered(dst []byte, doc Doc, o *Order) []byte {
	if o == nil {
		o = &Order{Keys: []string{"_id"}}
	}
	return appendJSONObject(dst, doc, o)
}

// AppendJSONValue appends one value as AppendJSON writes it in a
// document, the fields of documents inside it in order o.
func AppendJSONValue(dst []byte, v any, o *Order) []byte {
	return appendJSONValue(dst, v, o)
}

func appendJSONObject(dst []byte, m map[string]any, o *Order) []byte {
	dst = append(dst, '{')
	for i, k := range o.FieldsOf(m) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = appendJSONValue(append(dst, ':'), m[k], o.Child(k))
	}
	return append(dst, '}')
}

func appendJSONValue(dst []byte, v any, o *Order) []byte {
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, t)
	case int32:
		return strconv.AppendInt(dst, int64(t), 10)
	case int64:
		// {"$numberLong": "..."} where a plain number would not read
		// back as the same int64: within 32 bits (it would be an int32)
		// and beyond 2^53 (JSON readers keep 53 bits).
		if t > 1<<53 || t < -(1<<53) || (t >= math.MinInt32 && t <= math.MaxInt32) {
			dst = strconv.AppendInt(append(dst, `{"$numberLong":"`...), t, 10)
			return append(dst, `"}`...)
		}
		return strconv.AppendInt(dst, t, 10)
	case partialfilter.Decimal128:
		dst = strconv.AppendQuote(append(dst, `{"$numberDecimal":`...), t.String())
		return append(dst, '}')
	case partialfilter.Binary:
		b, _ := t.MarshalJSON()
		return append(dst, b...)
	case float64:
		switch {
		case math.IsNaN(t):
			return append(dst, `{"$numberDouble":"NaN"}`...)
		case math.IsInf(t, 1):
			return append(dst, `{"$numberDouble":"Infinity"}`...)
		case math.IsInf(t, -1):
			return append(dst, `{"$numberDouble":"-Infinity"}`...)
		}
		n := len(dst)
		dst = strconv.AppendFloat(dst, t, 'g', -1, 64)
		if !strings.ContainsAny(string(dst[n:]), ".eE") {
			dst = append(dst, ".0"...)
		}
		return dst
	case string:
		return appendJSONString(dst, t)
	case time.Time:
		dst = append(dst, `{"$date":"`...)
		dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
		return append(dst, `"}`...)
	case partialfilter.ObjectID:
		return append(append(append(dst, `{"$oid":"`...), t.Hex()...), `"}`...)
	case partialfilter.Regex:
		// A measurement field written over the wire may hold one.
		dst = appendJSONString(append(dst, `{"$regularExpression":{"pattern":`...), t.Pattern)
		dst = appendJSONString(append(dst, `,"options":`...), t.Options)
		return append(dst, "}}"...)
	case map[string]any:
		return appendJSONObject(dst, t, o)
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONValue(dst, e, o.Elem(i))
		}
		return append(dst, ']')
	}
	return append(dst, "null"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does: control characters, <,
// > and & as \u escapes, invalid UTF-8 as U+FFFD.
func appendJSONString(dst []byte, s string) []byte { return AppendJSONString(dst, s, true) }

// AppendJSONString appends s quoted as a JSON string, as encoding/json
// writes it: invalid UTF-8 becomes U+FFFD, U+2028 and U+2029 are escaped
// (so the output is valid JavaScript too), and with escapeHTML so are <, >
// and & (encoding/json's default; an Encoder with SetEscapeHTML(false)
// leaves them).
func AppendJSONString(dst []byte, s string, escapeHTML bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!escapeHTML || b != '<' && b != '>' && b != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(dst, s[start:]...), '"')
}

// AppendJSONEncoded appends the stored encoding enc (Encode,
// EncodeOrdered) of a document as AppendJSONOrdered writes it with its
// stored order, without decoding it into a map: what a find without a
// projection answers over HTTP.
func AppendJSONEncoded(dst, enc []byte) ([]byte, error) {
	if len(enc) == 0 || enc[0] != tagObject {
		return dst, fmt.Errorf("%w: top level is not a document", ErrCorrupt)
	}
	d := decoder{b: enc}
	dst = d.json(dst, 0)
	if d.err == nil && d.i != len(enc) {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(enc)-d.i)
	}
	return dst, d.err
}

// json appends the next value as JSON: objects and arrays walked in place,
// other values decoded and written as appendJSONValue writes them.
func (d *decoder) json(dst []byte, depth int) []byte {
	if d.err != nil || d.i >= len(d.b) || depth > MaxDepth {
		d.fail("value")
		return dst
	}
	switch d.b[d.i] {
	case tagObject:
		d.i++
		n := d.count("document length")
		dst = append(dst, '{')
		for j := 0; j < n && d.err == nil; j++ {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, string(d.bytes(d.uvarint("key length"), "key")))
			dst = d.json(append(dst, ':'), depth+1)
		}
		return append(dst, '}')
	case tagArray:
		d.i++
		n := d.count("array length")
		dst = append(dst, '[')
		for j := 0; j < n && d.err == nil; j++ {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = d.json(dst, depth+1)
		}
		return append(dst, ']')
	}
	return appendJSONValue(dst, d.value(depth), nil)
}
