package model

import (
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// MeasurementFromDocument converts a JSON document (decoded with
// json.Decoder.UseNumber, or with plain float64 numbers) into a measurement
// of a collection with options ts.
//
// The timeField must hold a date: {"$date": ...} Extended JSON, or, as a
// convenience, a bare RFC 3339 string or an integer of epoch milliseconds.
// Otherwise the error is BadValue (2) "'<timeField>' must be present and
// contain a valid date", or, for a date outside years MinDateYear to
// MaxDateYear, BadValue naming the range. Field values are numbers (integers stay int64,
// others float64), strings, booleans, dates, null and the other BSON values.
// Sub-documents and arrays are accepted only in the metaField.
func MeasurementFromDocument(ts *TimeSeriesOptions, doc map[string]any) (Measurement, error) {
	var m Measurement
	tv, ok := doc[ts.TimeField]
	if !ok {
		return m, timeFieldError(ts.TimeField)
	}
	t, err := timeFieldValue(tv)
	if err != nil {
		return m, timeValueError(ts.TimeField, err)
	}
	m.Time = t
	m.Fields = make([]Field, 0, len(doc))
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		v := doc[k]
		switch {
		case k == ts.TimeField:
			continue
		case ts.MetaField != "" && k == ts.MetaField:
			meta, err := normalizeJSON(v)
			if err != nil {
				return m, err
			}
			m.Meta = meta
			continue
		}
		fv, present, err := fieldValue(k, v)
		if err != nil {
			return m, err
		}
		if present {
			m.Fields = append(m.Fields, Field{Name: k, Value: fv})
		}
	}
	if err := m.ValidateAfter(ts, nil); err != nil {
		return m, err
	}
	return m, nil
}

// timeValueError is the refusal of a time field whose value err refused:
// the date range named when the date is out of it.
func timeValueError(name string, err error) error {
	var re *dateRangeError
	if errors.As(err, &re) {
		return mongoerr.New(mongoerr.BadValue, "'%s': %s", name, re.err.Message)
	}
	return timeFieldError(name)
}

func timeFieldError(name string) error {
	return mongoerr.New(mongoerr.BadValue, "'%s' must be present and contain a valid date", name)
}

func timeFieldValue(v any) (int64, error) {
	switch x := v.(type) {
	case map[string]any:
		d, ok := x["$date"]
		if !ok || len(x) != 1 {
			return 0, errNotDate
		}
		return parseDate(d)
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return 0, errNotDate
		}
		return timeToNanos(t)
	case json.Number:
		if strings.ContainsAny(x.String(), ".eE") {
			return 0, errNotDate
		}
		ms, err := x.Int64()
		if err != nil {
			return 0, errNotDate
		}
		return msToNanos(ms)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 9.2e15 {
			return 0, errNotDate
		}
		return msToNanos(int64(x))
	case int64:
		return msToNanos(x)
	case time.Time:
		return timeToNanos(x)
	}
	return 0, errNotDate
}

var errNotDate = mongoerr.New(mongoerr.BadValue, "not a date")

func fieldValue(name string, v any) (Value, bool, error) {
	return fieldValueOrdered(name, v, nil)
}

// fieldValueOrdered is fieldValue with the order o of a sub-document or
// array value's fields (nil: by name).
func fieldValueOrdered(name string, v any, o *document.Order) (Value, bool, error) {
	switch x := v.(type) {
	case nil:
		return Null(), true, nil
	case bool:
		return Bool(x), true, nil
	case string:
		return String(x), true, nil
	case float64:
		return Float(x), true, nil
	case int64:
		return Int(x), true, nil
	case int32:
		return Int32(x), true, nil
	case int:
		return Int(int64(x)), true, nil
	case partialfilter.ObjectID:
		return ObjectID(x), true, nil
	case partialfilter.Decimal128, partialfilter.Binary:
		return bsonFieldValue(name, x, o)
	case []any:
		y, err := partialfilter.FromExtJSON(x)
		if err != nil {
			return Value{}, false, mongoerr.New(mongoerr.BadValue, "field %q: %v", name, err)
		}
		return bsonFieldValue(name, y, o)
	case json.Number:
		s := x.String()
		if !strings.ContainsAny(s, ".eE") {
			if i, err := x.Int64(); err == nil {
				return Int(i), true, nil
			}
		}
		f, err := x.Float64()
		if err != nil {
			return Value{}, false, mongoerr.New(mongoerr.BadValue, "field %q: number %s is out of range", name, s)
		}
		return Float(f), true, nil
	case time.Time:
		ns, err := timeToNanos(x)
		if err != nil {
			return bsonFieldValue(name, x, nil) // kept as written
		}
		return Date(ns), true, nil
	case map[string]any:
		if len(x) == 1 {
			if d, ok := x["$date"]; ok {
				ns, err := parseDate(d)
				if err != nil {
					return Value{}, false, err
				}
				return Date(ns), true, nil
			}
		}
		// Extended JSON wrappers become their values, other objects
		// sub-documents.
		y, err := partialfilter.FromExtJSON(x)
		if err != nil {
			return Value{}, false, mongoerr.New(mongoerr.BadValue, "field %q: %v", name, err)
		}
		if _, still := y.(map[string]any); still {
			return bsonFieldValue(name, y, o)
		}
		return fieldValueOrdered(name, y, o)
	}
	return Value{}, false, mongoerr.New(mongoerr.BadValue, "field %q: values of type %T are not supported", name, v)
}

// bsonFieldValue keeps v, of no column type of its own, as its BSON bytes.
func bsonFieldValue(name string, v any, o *document.Order) (Value, bool, error) {
	if m, ok := v.(map[string]any); ok {
		if _, err := document.FromJSON(m); err != nil { // the checks of a stored document
			return Value{}, false, mongoerr.New(mongoerr.BadValue, "field %q: %v", name, err)
		}
	}
	bv, err := document.BSONValue(v, o)
	if err != nil {
		return Value{}, false, mongoerr.New(mongoerr.BadValue, "field %q: %v", name, err)
	}
	return BSONValue(bv.Type, bv.Data), true, nil
}

func bsonTypeName(v any) string {
	if _, ok := v.(partialfilter.Decimal128); ok {
		return "decimal128"
	}
	return "binary"
}
