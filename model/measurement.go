package model

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Kind is the type of a measurement field's value. The values equal the
// bucket column types they are stored in.
type Kind = bucket.Type

// The kinds of field values.
const (
	KindFloat  = bucket.TypeFloat
	KindInt    = bucket.TypeInt
	KindString = bucket.TypeString
	KindBool   = bucket.TypeBool
	KindDate   = bucket.TypeDate
	// KindInt32 is BSON's 32-bit integer, in I.
	KindInt32 = bucket.TypeInt32
	// KindBSON is a value of any other BSON type (Decimal128, binary, an
	// array, a sub-document, null, ...): in S, its BSON type byte then
	// its BSON bytes (BSONValue).
	KindBSON = bucket.TypeBSON
	// KindObjectID is an ObjectId: its 12 bytes in S.
	KindObjectID = bucket.TypeObjectID
)

// Value is one field value. Only the member selected by Kind is meaningful;
// dates are nanoseconds since the epoch in I.
type Value struct {
	Kind Kind
	F    float64
	I    int64
	S    string
	B    bool
}

// Float returns a float Value.
func Float(f float64) Value { return Value{Kind: KindFloat, F: f} }

// Int returns an integer Value.
func Int(i int64) Value { return Value{Kind: KindInt, I: i} }

// String returns a string Value.
func String(s string) Value { return Value{Kind: KindString, S: s} }

// Bool returns a boolean Value.
func Bool(b bool) Value { return Value{Kind: KindBool, B: b} }

// Date returns a date Value from nanoseconds since the epoch.
func Date(ns int64) Value { return Value{Kind: KindDate, I: ns} }

// Int32 returns a 32-bit integer Value.
func Int32(i int32) Value { return Value{Kind: KindInt32, I: int64(i)} }

// ObjectID returns an ObjectId Value.
func ObjectID(id [12]byte) Value { return Value{Kind: KindObjectID, S: string(id[:])} }

// BSONValue returns a Value of BSON type t (one with no kind of its own)
// with BSON bytes data.
func BSONValue(t bsoncore.Type, data []byte) Value {
	b := make([]byte, 1+len(data))
	b[0] = byte(t)
	copy(b[1:], data)
	return Value{Kind: KindBSON, S: string(b)}
}

// nullValue is a null field: a measurement keeps it, as MongoDB does
// ({f: null} reads back so and exists for $exists).
var nullValue = Value{Kind: KindBSON, S: string([]byte{byte(bsoncore.TypeNull)})}

// Null returns the Value of a null field.
func Null() Value { return nullValue }

// BSON returns a KindBSON value's BSON type and bytes; ok is false for a
// malformed one.
func (v Value) BSON() (bv bsoncore.Value, ok bool) {
	if len(v.S) == 0 {
		return bv, false
	}
	bv = bsoncore.Value{Type: bsoncore.Type(v.S[0]), Data: []byte(v.S[1:])}
	return bv, bv.Validate() == nil
}

// Interface returns v as a partialfilter value: float64, int64, int32,
// string, bool, time.Time, partialfilter.ObjectID, or what
// ValueFromBSON makes of a KindBSON value (nil when malformed).
func (v Value) Interface() any {
	switch v.Kind {
	case KindInt32:
		return int32(v.I)
	case KindObjectID:
		var id partialfilter.ObjectID
		copy(id[:], v.S)
		return id
	case KindBSON:
		bv, ok := v.BSON()
		if !ok {
			return nil
		}
		x, err := ValueFromBSON("", bv, 0)
		if err != nil {
			return nil
		}
		return x
	case KindFloat:
		return v.F
	case KindInt:
		return v.I
	case KindString:
		return v.S
	case KindBool:
		return v.B
	case KindDate:
		return time.Unix(0, v.I).UTC()
	}
	return nil
}

// Field is a named field value of a measurement.
type Field struct {
	Name  string
	Value Value
}

// Measurement is one document of a time-series collection: its time, its
// meta value and its other fields.
type Measurement struct {
	// Time is nanoseconds since the epoch (negative before 1970).
	Time int64
	// Meta is the metaField value, nil when the document has none. It is a
	// value of the set partialfilter works on: nil, bool, int64, float64,
	// string, time.Time, []any, map[string]any.
	Meta any
	// Fields are the measurement's other fields, at most one per name.
	Fields []Field
	// Slot, when not nil, is where a writer that names the same series
	// again and again (a decoder's cache entry for one meta key) lets the
	// engine remember where the series of Meta is, so that the next insert
	// finds it without looking the key up. The engine takes what it
	// finds there only for the series of the measurement's meta key.
	Slot *SeriesSlot
}

// SeriesSlot holds what the engine remembers for one meta key (see
// Measurement.Slot): a number, no pointer, so that a slot keeps nothing
// of a collection alive; 0 is empty.
type SeriesSlot struct{ atomic.Uint64 }

// Limits on one measurement, so that a single document cannot exhaust memory.
const (
	// MaxFieldsPerMeasurement bounds the fields of one document.
	MaxFieldsPerMeasurement = 1000
	// MaxFieldNameBytes bounds a field name.
	MaxFieldNameBytes = 1024
	// MaxStringBytes bounds one string value (MongoDB's document limit is
	// 16 MiB; a bucket is sealed at 128000 bytes, so larger strings would
	// each make a bucket of their own).
	MaxStringBytes = 1 << 20
	// MaxMetaBytes bounds the canonical encoding of a meta value.
	MaxMetaBytes = 64 << 10
)

// Validate checks m against the collection's options as Insert does,
// without storing anything: the refusals MeasurementFromDocument makes
// after converting the fields.
func (m *Measurement) Validate(ts *TimeSeriesOptions) error { return m.ValidateAfter(ts, nil) }

// validate checks m against the collection's options without storing
// anything. The index in errors is filled in by the caller. prev, when not
// nil, is a measurement validated before against the same options: if m
// has the same field names in the same order (the rows of a batch mostly
// do, often as the very same strings), the names are not checked again.
func (m *Measurement) ValidateAfter(ts *TimeSeriesOptions, prev *Measurement) error {
	if len(m.Fields) > MaxFieldsPerMeasurement {
		return mongoerr.New(mongoerr.BadValue, "a measurement may have at most %d fields; got %d", MaxFieldsPerMeasurement, len(m.Fields))
	}
	if m.Meta != nil && ts.MetaField == "" {
		return mongoerr.New(mongoerr.BadValue, "the collection has no metaField; the measurement carries a meta value")
	}
	if _, isKey := m.Meta.(MetaKey); !isKey {
		if err := validMetaValue(m.Meta, 0); err != nil {
			return err
		}
	}
	namesChecked := prev != nil && SameFieldNames(m.Fields, prev.Fields)
	for i := range m.Fields {
		if err := m.fieldError(ts, i, namesChecked); err != nil {
			// The refusal of the bad field first in name order, as a
			// document's fields are checked whatever order they come in.
			name := m.Fields[i].Name
			for j := i + 1; j < len(m.Fields); j++ {
				if m.Fields[j].Name < name {
					if e := m.fieldError(ts, j, namesChecked); e != nil {
						err, name = e, m.Fields[j].Name
					}
				}
			}
			return err
		}
	}
	return nil
}

// fieldError checks field i of m: its name (unless namesChecked), its
// value, and that no field before it has its name.
func (m *Measurement) fieldError(ts *TimeSeriesOptions, i int, namesChecked bool) error {
	f := &m.Fields[i]
	switch {
	case namesChecked:
	case f.Name == "":
		return mongoerr.New(mongoerr.BadValue, "field names cannot be empty")
	case len(f.Name) > MaxFieldNameBytes:
		return mongoerr.New(mongoerr.BadValue, "field name of %d bytes exceeds the limit of %d", len(f.Name), MaxFieldNameBytes)
	case f.Name[0] == '$':
		return mongoerr.New(mongoerr.BadValue, "field name %q cannot start with '$'", f.Name)
	case strings.IndexByte(f.Name, 0) >= 0:
		return mongoerr.New(mongoerr.BadValue, "field name %q cannot contain a NUL byte", f.Name)
	case !utf8.ValidString(f.Name):
		return mongoerr.New(mongoerr.BadValue, "field name %q is not valid UTF-8", f.Name)
	case f.Name == ts.TimeField || (ts.MetaField != "" && f.Name == ts.MetaField):
		return mongoerr.New(mongoerr.BadValue, "field %q is the collection's timeField or metaField and cannot be a measurement field", f.Name)
	}
	switch f.Value.Kind {
	case KindFloat, KindInt, KindBool, KindDate, KindInt32:
	case KindString, KindBSON:
		if len(f.Value.S) > MaxStringBytes {
			return mongoerr.New(mongoerr.BadValue, "field %q: %s of %d bytes exceeds the limit of %d", f.Name, valueNoun(f.Value.Kind), len(f.Value.S), MaxStringBytes)
		}
		if f.Value.Kind == KindBSON {
			bv, ok := f.Value.BSON()
			if !ok {
				return mongoerr.New(mongoerr.BadValue, "field %q: malformed BSON value", f.Name)
			}
			if f.Name == "_id" && bv.Type == bsoncore.TypeArray {
				return mongoerr.New(mongoerr.BadValue, "can't use an array for _id")
			}
		}
	case KindObjectID:
		if len(f.Value.S) != 12 {
			return mongoerr.New(mongoerr.BadValue, "field %q: an ObjectId has 12 bytes; got %d", f.Name, len(f.Value.S))
		}
	default:
		return mongoerr.New(mongoerr.BadValue, "field %q has no value type", f.Name)
	}
	if namesChecked {
		return nil
	}
	for j := 0; j < i; j++ {
		if m.Fields[j].Name == f.Name {
			return mongoerr.New(mongoerr.BadValue, "field %q appears twice in one measurement", f.Name)
		}
	}
	return nil
}

func valueNoun(k Kind) string {
	if k == KindString {
		return "string"
	}
	return "value"
}

// SameFieldNames reports whether a and b have the same field names in
// order.
func SameFieldNames(a, b []Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}

// MetaKey is a meta value already in its canonical encoding
// (CanonicalMeta). A Measurement whose Meta is a MetaKey skips the encoding;
// writers that see the same meta value many times (one per line-protocol tag
// set, say) encode it once.
type MetaKey string

// validMetaKey checks that k is a canonical encoding.
func ValidMetaKey(k MetaKey) error {
	v, err := DecodeMetaKey(string(k))
	if err != nil {
		return mongoerr.New(mongoerr.BadValue, "invalid meta key: %v", err)
	}
	if err := validMetaValue(v, 0); err != nil {
		return err
	}
	if c, err := CanonicalMeta(v); err != nil || c != string(k) {
		return mongoerr.New(mongoerr.BadValue, "meta key %.40q is not in canonical form", string(k))
	}
	return nil
}

// CanonicalMeta returns the canonical encoding of a meta value: Extended
// JSON with object fields sorted by name, so that equal meta values written
// with fields in any order group into the same series. Integers print as
// integers and floats always carry a decimal point or exponent, so that
// DecodeMeta restores the same types.
func CanonicalMeta(v any) (string, error) {
	b, err := appendCanonical(nil, v, 0, false)
	if err != nil {
		return "", err
	}
	if len(b) > MaxMetaBytes {
		return "", mongoerr.New(mongoerr.BadValue, "meta value of %d bytes exceeds the limit of %d", len(b), MaxMetaBytes)
	}
	return string(b), nil
}

// GroupMeta is CanonicalMeta for grouping by value, as $group and
// distinct compare: an int32 prints as the int64 of the same value, so
// that equal numbers written as either type make one group.
func GroupMeta(v any) (string, error) {
	b, err := appendCanonical(nil, v, 0, true)
	return string(b), err
}

// GroupMetaKey is GroupMeta of the value canonical key encodes: the key
// itself unless it holds an int32.
func GroupMetaKey(key string) string {
	if strings.IndexByte(key, '$') < 0 || !strings.Contains(key, `{"$numberInt":`) {
		return key
	}
	v, err := DecodeMeta(key)
	if err != nil {
		return key
	}
	g, err := GroupMeta(v)
	if err != nil {
		return key
	}
	return g
}

// AppendRelaxedMeta appends the canonical meta text key as relaxed
// Extended JSON: an int32, canonically {"$numberInt": "5"}, as 5. The
// other wrappers of canonical keys are the relaxed forms already.
func AppendRelaxedMeta(dst []byte, key string) []byte {
	const wrap = `{"$numberInt":"`
	if strings.IndexByte(key, '$') < 0 {
		return append(dst, key...) // most keys: one scan for a byte
	}
	for {
		i := strings.Index(key, wrap)
		if i < 0 {
			return append(dst, key...)
		}
		// Inside a string the wrapper's quotes are escaped, so an
		// unescaped match is always the wrapper itself.
		dst = append(dst, key[:i]...)
		key = key[i+len(wrap):]
		j := strings.IndexByte(key, '"')
		if j < 0 || len(key) < j+2 || key[j+1] != '}' {
			return append(append(dst, wrap...), key...) // not a canonical key
		}
		dst = append(dst, key[:j]...)
		key = key[j+2:]
	}
}

const maxMetaDepth = 32

// appendCanonical appends the canonical encoding of v; loose writes an
// int32 as the int64 of the same value (GroupMeta).
func appendCanonical(dst []byte, v any, depth int, loose bool) ([]byte, error) {
	if depth > maxMetaDepth {
		return nil, mongoerr.New(mongoerr.BadValue, "meta value nests deeper than %d levels", maxMetaDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int32:
		if loose {
			return strconv.AppendInt(dst, int64(x), 10), nil
		}
		// Its own type, as MongoDB groups measurements into buckets by
		// the meta value's bytes: an int32 meta value is a series of its
		// own and reads back an int32.
		dst = strconv.AppendInt(append(dst, `{"$numberInt":"`...), int64(x), 10)
		return append(dst, `"}`...), nil
	case float64:
		return appendCanonicalFloat(dst, x), nil
	case partialfilter.ObjectID:
		return append(append(append(dst, `{"$oid":"`...), x.Hex()...), `"}`...), nil
	case partialfilter.Decimal128:
		return append(strconv.AppendQuote(append(dst, `{"$numberDecimal":`...), x.String()), '}'), nil
	case partialfilter.Binary:
		b, _ := x.MarshalJSON() // never fails
		return append(dst, b...), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return strconv.AppendInt(dst, i, 10), nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, mongoerr.New(mongoerr.BadValue, "invalid number %q in meta value", x.String())
		}
		return appendCanonicalFloat(dst, f), nil
	case string:
		return appendJSONString(dst, x), nil
	case time.Time:
		dst = append(dst, `{"$date":"`...)
		dst = x.UTC().AppendFormat(dst, time.RFC3339Nano)
		return append(dst, `"}`...), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendCanonical(dst, e, depth+1, loose); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = appendCanonical(dst, x[k], depth+1, loose); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, mongoerr.New(mongoerr.BadValue, "unsupported meta value of type %T", v)
}

func appendCanonicalFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `{"$numberDouble":"NaN"}`...)
	case math.IsInf(f, 1):
		return append(dst, `{"$numberDouble":"Infinity"}`...)
	case math.IsInf(f, -1):
		return append(dst, `{"$numberDouble":"-Infinity"}`...)
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, 'g', -1, 64)
	if !strings.ContainsAny(string(dst[n:]), ".eEn") {
		dst = append(dst, ".0"...)
	}
	return dst
}

// AppendMetaString appends s as CanonicalMeta encodes a string, for
// writers that build canonical keys of string-valued meta documents
// themselves (the line-protocol decoder's tag sets).
func AppendMetaString(dst []byte, s string) []byte { return appendJSONString(dst, s) }

func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			// What json.Marshal escapes (HTML characters too): its
			// encoding is the canonical one, kept byte for byte.
			b, _ := json.Marshal(s) // never fails for a string
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// DecodeMeta parses a canonical meta encoding back into a value: integers
// become int64, other numbers float64, {"$date": ...} time.Time.
func DecodeMeta(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("timeseries: decode meta %q: %w", s, err)
	}
	return normalizeJSON(v)
}

// normalizeJSON converts a value decoded with UseNumber into the value set
// of partialfilter, resolving Extended JSON wrappers.
func normalizeJSON(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil && !strings.ContainsAny(x.String(), ".eE") {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, mongoerr.New(mongoerr.BadValue, "invalid number %q", x.String())
		}
		return f, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalizeJSON(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			if d, ok := x["$date"]; ok {
				ns, err := parseDate(d)
				if err != nil {
					return nil, err
				}
				return time.Unix(0, ns).UTC(), nil
			}
			if d, ok := x["$numberDouble"].(string); ok {
				switch d {
				case "NaN":
					return math.NaN(), nil
				case "Infinity":
					return math.Inf(1), nil
				case "-Infinity":
					return math.Inf(-1), nil
				}
				f, err := strconv.ParseFloat(d, 64)
				if err != nil {
					return nil, mongoerr.New(mongoerr.BadValue, "invalid $numberDouble %q", d)
				}
				return f, nil
			}
			if d, ok := x["$numberLong"].(string); ok {
				i, err := strconv.ParseInt(d, 10, 64)
				if err != nil {
					return nil, mongoerr.New(mongoerr.BadValue, "invalid $numberLong %q", d)
				}
				return i, nil
			}
			for _, w := range [...]string{"$numberInt", "$oid", "$numberDecimal", "$binary"} {
				if _, ok := x[w]; ok {
					return partialfilter.FromExtJSON(x)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalizeJSON(e)
			if err != nil {
				// Report the first refusal in name order, not the map's.
				for _, k := range slices.Sorted(maps.Keys(x)) {
					if _, err := normalizeJSON(x[k]); err != nil {
						return nil, err
					}
				}
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	}
	return v, nil
}

// parseDate converts the argument of {"$date": ...} to nanoseconds since the
// epoch: an RFC 3339 string or {"$numberLong": "<ms>"} or a number of ms.
func parseDate(v any) (int64, error) {
	switch d := v.(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, d)
		if err != nil {
			return 0, mongoerr.New(mongoerr.BadValue, "invalid date %q: want RFC 3339, e.g. 2024-05-01T12:00:00.123Z", d)
		}
		return timeToNanos(t)
	case map[string]any:
		if s, ok := d["$numberLong"].(string); ok && len(d) == 1 {
			ms, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, mongoerr.New(mongoerr.BadValue, "invalid date: $numberLong %q is not an integer", s)
			}
			return msToNanos(ms)
		}
	case json.Number:
		ms, err := d.Int64()
		if err != nil {
			return 0, mongoerr.New(mongoerr.BadValue, "invalid date: %s is not an integer number of milliseconds", d)
		}
		return msToNanos(ms)
	case float64:
		if d != math.Trunc(d) || math.Abs(d) > 9.2e15 {
			return 0, mongoerr.New(mongoerr.BadValue, "invalid date: %v is not an integer number of milliseconds", d)
		}
		return msToNanos(int64(d))
	case int64:
		return msToNanos(d)
	}
	return 0, mongoerr.New(mongoerr.BadValue, "invalid date: want {\"$date\": \"<RFC 3339>\"} or {\"$date\": {\"$numberLong\": \"<ms>\"}}")
}

// Dates are stored as int64 nanoseconds (1677-09-21 to 2262-04-11); the
// range accepted is the whole years inside: 1678-01-01T00:00:00Z to
// 2261-12-31T23:59:59.999999999Z.
const (
	MinDateYear = 1678
	MaxDateYear = 2261
)

var (
	minDateMillis = time.Date(MinDateYear, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxDateMillis = time.Date(MaxDateYear+1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() - 1
)

// dateRangeError is a date outside [MinDateYear, MaxDateYear], so that a
// timeField holding one is refused with the range rather than as missing.
type dateRangeError struct{ err *mongoerr.Error }

func (e *dateRangeError) Error() string { return e.err.Message }
func (e *dateRangeError) Unwrap() error { return e.err }

func outOfDateRange(date string) error {
	return &dateRangeError{mongoerr.New(mongoerr.BadValue, "date %s is outside the supported range (years %d to %d)", date, MinDateYear, MaxDateYear)}
}

func msToNanos(ms int64) (int64, error) {
	if ms < minDateMillis || ms > maxDateMillis {
		return 0, outOfDateRange(fmt.Sprintf("%d ms", ms))
	}
	return ms * 1e6, nil
}

func timeToNanos(t time.Time) (int64, error) {
	if t.Year() < MinDateYear || t.Year() > MaxDateYear {
		return 0, outOfDateRange(t.Format(time.RFC3339Nano))
	}
	return t.UnixNano(), nil
}

// validMetaValue checks the field names of a meta value at every depth:
// not starting with '$' (a filter would read them as operators; Extended
// JSON wrappers are resolved before this) and without NUL.
func validMetaValue(v any, depth int) error {
	if depth > maxMetaDepth {
		return nil // CanonicalMeta refuses the depth
	}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if err := validMetaValue(e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, e := range x {
			if validMetaName(k) != nil || validMetaValue(e, depth+1) != nil {
				// Report the first refusal in name order, not the map's.
				for _, k := range slices.Sorted(maps.Keys(x)) {
					if err := validMetaName(k); err != nil {
						return err
					}
					if err := validMetaValue(x[k], depth+1); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func validMetaName(k string) error {
	switch {
	case strings.HasPrefix(k, "$"):
		return mongoerr.New(mongoerr.BadValue, "field name %q in the meta value cannot start with '$'", k)
	case strings.IndexByte(k, 0) >= 0:
		return mongoerr.New(mongoerr.BadValue, "field name %q in the meta value cannot contain a NUL byte", k)
	}
	return nil
}
