package partialfilter

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// Regex is a regular-expression literal inside a filter, written in Extended
// JSON as {"$regularExpression": {"pattern": "...", "options": "..."}}. It is
// a filter value only: documents never hold one. As an implicit equality or
// an element of $in, $nin or $all it matches strings by pattern.
type Regex struct {
	Pattern string
	Options string
}

// ObjectID is MongoDB's 12-byte document identifier, written in Extended
// JSON as {"$oid": "<24 hexadecimal digits>"}. Its bytes compare in order.
type ObjectID [12]byte

// ParseObjectID reads 24 hexadecimal digits; anything else is BadValue.
func ParseObjectID(s string) (ObjectID, error) {
	var id ObjectID
	if len(s) != 24 {
		return id, mongoerr.New(mongoerr.BadValue, "invalid ObjectId %.40q: want 24 hexadecimal digits", s)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, mongoerr.New(mongoerr.BadValue, "invalid ObjectId %.40q: want 24 hexadecimal digits", s)
	}
	return id, nil
}

// Hex returns the 24 lower-case hexadecimal digits of id.
func (id ObjectID) Hex() string { return hex.EncodeToString(id[:]) }

// MarshalJSON writes id as Extended JSON.
func (id ObjectID) MarshalJSON() ([]byte, error) {
	return []byte(`{"$oid":"` + id.Hex() + `"}`), nil
}

// Canonical type brackets in MongoDB's BSON order. Values of different
// brackets never compare in a query; Compare orders brackets by these
// numbers. Only the order matters; the values are not persisted.
const (
	rankNull   = 1 // null and missing
	rankNumber = 2
	rankString = 3
	rankObject = 4
	rankArray  = 5
	rankBinary = 6
	rankOID    = 7
	rankBool   = 8
	rankDate   = 9
	rankRegex  = 10
	rankOther  = 11 // a Go type outside the value set: sorts last, never matches
)

func rank(v any) int {
	switch v.(type) {
	case nil:
		return rankNull
	case int64, float64, int, int32, int16, int8, uint8, uint16, uint32, uint, uint64, float32, json.Number, Decimal128:
		return rankNumber
	case string:
		return rankString
	case map[string]any:
		return rankObject
	case []any:
		return rankArray
	case Binary:
		return rankBinary
	case ObjectID:
		return rankOID
	case bool:
		return rankBool
	case time.Time:
		return rankDate
	case Regex:
		return rankRegex
	}
	return rankOther
}

// number returns v as an int64 (isInt) or a float64 (a Decimal128 as the
// nearest double: compareNumbers compares decimals exactly). v must have
// rankNumber.
func number(v any) (i int64, f float64, isInt bool) {
	switch t := v.(type) {
	case int64:
		return t, 0, true
	case Decimal128:
		return 0, t.Float64(), false
	case float64:
		return 0, t, false
	case int:
		return int64(t), 0, true
	case int32:
		return int64(t), 0, true
	case int16:
		return int64(t), 0, true
	case int8:
		return int64(t), 0, true
	case uint8:
		return int64(t), 0, true
	case uint16:
		return int64(t), 0, true
	case uint32:
		return int64(t), 0, true
	case uint:
		if uint64(t) <= math.MaxInt64 {
			return int64(t), 0, true
		}
		return 0, float64(t), false
	case uint64:
		if t <= math.MaxInt64 {
			return int64(t), 0, true
		}
		return 0, float64(t), false
	case float32:
		return 0, float64(t), false
	case json.Number:
		if n, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return n, 0, true
		}
		x, _ := strconv.ParseFloat(string(t), 64)
		return 0, x, false
	}
	return 0, 0, true
}

func isNaN(v any) bool {
	switch t := v.(type) {
	case float64:
		return t != t
	case float32:
		return t != t
	case Decimal128:
		return t.Float64() != t.Float64()
	case json.Number:
		if rank(v) == rankNumber {
			_, f, isInt := number(v)
			return !isInt && f != f
		}
	}
	return false
}

func cmpInt[T int | int64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// twoTo63 is 2^63 as a float64, the first float above every int64.
const twoTo63 = 9223372036854775808.0

// compareIntFloat compares i with f exactly (no rounding of i), NaN lowest.
func compareIntFloat(i int64, f float64) int {
	switch {
	case f != f:
		return 1
	case f >= twoTo63:
		return -1
	case f < -twoTo63:
		return 1
	}
	t := int64(f) // truncates toward zero, exact for |f| < 2^63
	if c := cmpInt(i, t); c != 0 {
		return c
	}
	frac := f - float64(t)
	switch {
	case frac > 0:
		return -1
	case frac < 0:
		return 1
	}
	return 0
}

func compareFloats(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	}
	// At least one NaN: NaN equals NaN and sorts below every number.
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return 0
	case an:
		return -1
	}
	return 1
}

func compareNumbers(a, b any) int {
	_, ad := a.(Decimal128)
	_, bd := b.(Decimal128)
	if ad || bd {
		return compareExact(a, b)
	}
	ai, af, aInt := number(a)
	bi, bf, bInt := number(b)
	switch {
	case aInt && bInt:
		return cmpInt(ai, bi)
	case aInt:
		return compareIntFloat(ai, bf)
	case bInt:
		return -compareIntFloat(bi, af)
	}
	return compareFloats(af, bf)
}

// Compare orders a and b as MongoDB's BSON order does: first by type
// bracket (null < numbers < strings < objects < arrays < booleans < dates <
// regexes), then by value within the bracket. Numbers compare by value across
// int64 and float64 (exactly, also beyond 2^53); NaN equals NaN and is below
// every other number. Strings compare bytewise. Objects compare field by field
// in key order (Go maps keep no insertion order, so keys are sorted first;
// MongoDB uses stored order), arrays element by element, a prefix being
// smaller. Pass nil for a missing value: it sorts as null.
func Compare(a, b any) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return cmpInt(ra, rb)
	}
	switch ra {
	case rankNumber:
		return compareNumbers(a, b)
	case rankString:
		return strings.Compare(a.(string), b.(string))
	case rankObject:
		return compareObjects(a.(map[string]any), b.(map[string]any))
	case rankArray:
		x, y := a.([]any), b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := Compare(x[i], y[i]); c != 0 {
				return c
			}
		}
		return cmpInt(len(x), len(y))
	case rankBinary:
		return compareBinary(a.(Binary), b.(Binary))
	case rankOID:
		x, y := a.(ObjectID), b.(ObjectID)
		return bytes.Compare(x[:], y[:])
	case rankBool:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case rankDate:
		return a.(time.Time).Compare(b.(time.Time))
	case rankRegex:
		x, y := a.(Regex), b.(Regex)
		if c := strings.Compare(x.Pattern, y.Pattern); c != 0 {
			return c
		}
		return strings.Compare(x.Options, y.Options)
	}
	return 0
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func compareObjects(a, b map[string]any) int {
	ka, kb := sortedKeys(a), sortedKeys(b)
	for i := 0; i < len(ka) && i < len(kb); i++ {
		va, vb := a[ka[i]], b[kb[i]]
		if c := cmpInt(rank(va), rank(vb)); c != 0 {
			return c
		}
		if c := strings.Compare(ka[i], kb[i]); c != 0 {
			return c
		}
		if c := Compare(va, vb); c != 0 {
			return c
		}
	}
	return cmpInt(len(ka), len(kb))
}

// maxValueDepth bounds the nesting of arrays and sub-documents FromExtJSON
// accepts. A filter nested MaxDepth deep takes two value levels per filter
// level ({"$and": [{...}]}); twice that again leaves room for literals, while
// keeping recursive comparisons far from the stack limit (encoding/json
// alone would allow 10000).
const maxValueDepth = 4 * MaxDepth

// FromExtJSON converts a value decoded by encoding/json (with or without
// UseNumber) into the value set of this package, resolving MongoDB Extended
// JSON wrappers:
//
//	{"$date": "<RFC 3339>"}, {"$date": {"$numberLong": "<ms>"}}, {"$date": <ms>} -> time.Time (UTC)
//	{"$numberLong": "<n>"}                                                      -> int64
//	{"$numberInt": "<n>"}                                                       -> int32
//	{"$numberDouble": "<x>"} (also "NaN", "Infinity", "-Infinity")              -> float64
//	{"$numberDecimal": "<x>"}                                                   -> Decimal128
//	{"$binary": {"base64": "...", "subType": "<hex>"}}                          -> Binary
//	{"$regularExpression": {"pattern": "...", "options": "..."}}                -> Regex
//
// JSON integers (json.Number without fraction or exponent) become int32
// when they fit, int64 otherwise, as MongoDB's Extended JSON parser reads
// them; Go int types other than int32 become int64; other numbers
// float64. Arrays and sub-documents are converted
// recursively into new values; v itself is not modified. Any other
// $-prefixed object is returned as an object (the filter parser decides what
// it means). A malformed wrapper or an unsupported Go type is a BadValue
// error.
func FromExtJSON(v any) (any, error) {
	return fromExtJSON(v, 0)
}

func fromExtJSON(v any, depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, mongoerr.New(mongoerr.BadValue, "value nesting exceeds %d levels", maxValueDepth)
	}
	switch t := v.(type) {
	case nil, bool, string, int32, int64, time.Time, Regex, ObjectID, Decimal128, Binary:
		return v, nil
	case float64:
		return t, nil
	case json.Number:
		return parseNumber(string(t))
	case int, int16, int8, uint8, uint16, uint32, uint, uint64, float32:
		i, f, isInt := number(v)
		if isInt {
			return i, nil
		}
		return f, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			c, err := fromExtJSON(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		if len(t) == 1 {
			for k, w := range t {
				if strings.HasPrefix(k, "$") {
					if c, ok, err := fromWrapper(k, w); ok || err != nil {
						return c, err
					}
				}
			}
		}
		out := make(map[string]any, len(t))
		var first error
		firstKey := ""
		for k, e := range t {
			if first != nil && k > firstKey {
				continue
			}
			c, err := fromExtJSON(e, depth+1)
			if err != nil {
				// The refusal of the first bad field in name order: the
				// same value is refused with the same message every time.
				first, firstKey = err, k
			}
			out[k] = c
		}
		if first != nil {
			return nil, first
		}
		return out, nil
	}
	return nil, mongoerr.New(mongoerr.BadValue, "unsupported value type %T", v)
}

// parseNumber reads a JSON number as MongoDB's Extended JSON parser does:
// an integer that fits 32 bits is an int32, a larger one an int64, any
// other number a double.
func parseNumber(s string) (any, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			return int32(n), nil
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return nil, mongoerr.New(mongoerr.BadValue, "invalid number %q", s)
	}
	return f, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// fromWrapper resolves a one-key Extended JSON wrapper. ok is false when k is
// not a wrapper this package knows.
func fromWrapper(k string, w any) (v any, ok bool, err error) {
	switch k {
	case "$date":
		t, err := parseDate(w)
		return t, true, err
	case "$numberLong", "$numberInt":
		s, isStr := w.(string)
		if !isStr {
			return nil, true, mongoerr.New(mongoerr.BadValue, "%s must be a string", k)
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || (k == "$numberInt" && (n > math.MaxInt32 || n < math.MinInt32)) {
			return nil, true, mongoerr.New(mongoerr.BadValue, "invalid %s %q", k, s)
		}
		if k == "$numberInt" {
			return int32(n), true, nil
		}
		return n, true, nil
	case "$numberDecimal":
		s, isStr := w.(string)
		if !isStr {
			return nil, true, mongoerr.New(mongoerr.BadValue, "$numberDecimal must be a string")
		}
		d, err := ParseDecimal128(s)
		return d, true, err
	case "$binary":
		b, err := parseBinary(w)
		return b, true, err
	case "$numberDouble":
		s, isStr := w.(string)
		if !isStr {
			return nil, true, mongoerr.New(mongoerr.BadValue, "$numberDouble must be a string")
		}
		var f float64
		switch s {
		case "NaN":
			f = math.NaN()
		case "Infinity":
			f = math.Inf(1)
		case "-Infinity":
			f = math.Inf(-1)
		default:
			var err error
			f, err = strconv.ParseFloat(s, 64)
			if err != nil && !isRangeErr(err) || strings.ContainsAny(s, "nN") {
				return nil, true, mongoerr.New(mongoerr.BadValue, "invalid $numberDouble %q", s)
			}
		}
		return f, true, nil
	case "$oid":
		s, isStr := w.(string)
		if !isStr {
			return nil, true, mongoerr.New(mongoerr.BadValue, "$oid must be a string of 24 hexadecimal digits")
		}
		id, err := ParseObjectID(s)
		return id, true, err
	case "$regularExpression":
		m, isMap := w.(map[string]any)
		if !isMap {
			return nil, true, mongoerr.New(mongoerr.BadValue, "$regularExpression must be an object")
		}
		p, pok := m["pattern"].(string)
		o, keys := "", 1
		if ov, hasOpts := m["options"]; hasOpts {
			s, sok := ov.(string)
			pok = pok && sok
			o, keys = s, 2
		}
		if !pok || len(m) != keys {
			return nil, true, mongoerr.New(mongoerr.BadValue, "$regularExpression needs a string pattern and string options")
		}
		return Regex{Pattern: p, Options: o}, true, nil
	}
	return nil, false, nil
}

func parseDate(w any) (time.Time, error) {
	switch t := w.(type) {
	case string:
		d, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return time.Time{}, mongoerr.New(mongoerr.BadValue, "invalid $date %q: want RFC 3339", t)
		}
		return d.UTC(), nil
	case map[string]any:
		if len(t) == 1 {
			if s, ok := t["$numberLong"].(string); ok {
				ms, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return time.Time{}, mongoerr.New(mongoerr.BadValue, "invalid $date $numberLong %q", s)
				}
				return time.UnixMilli(ms).UTC(), nil
			}
		}
	case json.Number, float64, int64, int, int32:
		n, err := fromExtJSON(w, 0)
		if err != nil {
			return time.Time{}, err
		}
		switch x := n.(type) {
		case int32:
			return time.UnixMilli(int64(x)).UTC(), nil
		case int64:
			return time.UnixMilli(x).UTC(), nil
		case float64:
			if x == math.Trunc(x) && x >= -twoTo63 && x < twoTo63 {
				return time.UnixMilli(int64(x)).UTC(), nil
			}
		}
	}
	return time.Time{}, mongoerr.New(mongoerr.BadValue, "$date needs an RFC 3339 string or milliseconds since the epoch")
}
