package model

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

func TestMeasurementFromDocument(t *testing.T) {
	ts := &TimeSeriesOptions{TimeField: "ts", MetaField: "sensor", Granularity: GranularitySeconds}
	at := time.Date(2024, 5, 1, 12, 0, 0, 123000000, time.UTC).UnixNano()
	for _, tc := range []struct {
		doc    string
		time   int64
		fields int
		err    string
	}{
		{`{"ts": {"$date": "2024-05-01T12:00:00.123Z"}, "sensor": "a", "v": 1}`, at, 1, ""},
		{`{"ts": {"$date": {"$numberLong": "1714564800123"}}, "v": 1.5}`, at, 1, ""},
		{`{"ts": {"$date": 1714564800123}, "v": 1.5}`, at, 1, ""},
		{`{"ts": "2024-05-01T12:00:00.123Z", "v": true, "s": "x"}`, at, 2, ""},
		{`{"ts": 1714564800123, "n": null}`, at, 1, ""}, // a null field is kept
		{`{"ts": "2024-05-01T12:00:00.123456789+02:00"}`, at - 2*3600e9 + 456789, 0, ""},
		{`{"ts": {"$date": "1900-01-01T00:00:00Z"}}`, time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), 0, ""},
		{`{"ts": {"$date": "2024-05-01T12:00:00Z"}, "d": {"$date": "2024-05-01T12:00:00Z"}}`, at - 123e6, 1, ""},
		{`{"v": 1}`, 0, 0, "'ts' must be present and contain a valid date"},
		{`{"ts": "yesterday"}`, 0, 0, "'ts' must be present and contain a valid date"},
		{`{"ts": 1.5}`, 0, 0, "'ts' must be present and contain a valid date"},
		{`{"ts": true}`, 0, 0, "'ts' must be present and contain a valid date"},
		{`{"ts": {"$date": "nope"}}`, 0, 0, "'ts' must be present and contain a valid date"},
		{`{"ts": {"$date": "3000-01-01T00:00:00Z"}}`, 0, 0, "'ts': date 3000-01-01T00:00:00Z is outside the supported range (years 1678 to 2261)"},
		{`{"ts": "1677-12-31T23:59:59Z"}`, 0, 0, "'ts': date 1677-12-31T23:59:59Z is outside the supported range (years 1678 to 2261)"},
		{`{"ts": {"$date": {"$numberLong": "9223372036854"}}}`, 0, 0, "'ts': date 9223372036854 ms is outside the supported range (years 1678 to 2261)"},
		{`{"ts": -9214560000001}`, 0, 0, "outside the supported range (years 1678 to 2261)"},
		{`{"ts": -9214560000000}`, -9214560000000 * 1e6, 0, ""},
		{`{"ts": {"$date": "2261-12-31T23:59:59.999999999Z"}}`, time.Date(2261, 12, 31, 23, 59, 59, 999999999, time.UTC).UnixNano(), 0, ""},
		{`{"ts": 1, "d": {"$date": "2262-01-01T00:00:00Z"}}`, 0, 0, "outside the supported range (years 1678 to 2261)"},
		{`{"ts": 1, "v\u0000x": 1}`, 0, 0, "cannot contain a NUL byte"},
		{`{"ts": 1, "sensor": {"$site": "a"}}`, 0, 0, "field name \"$site\" in the meta value cannot start with '$'"},
		{`{"ts": 1, "sensor": {"a": [{"b": {"$gt": 1}}]}}`, 0, 0, "field name \"$gt\" in the meta value cannot start with '$'"},
		{`{"ts": 1, "sensor": {"a\u0000": 1}}`, 0, 0, "in the meta value cannot contain a NUL byte"},
		{`{"ts": 1, "sensor": {"a": {"$date": "2024-05-01T12:00:00Z"}, "n": {"$numberLong": "5"}, "s$": 1}}`, 1e6, 0, ""},
		// Arrays, sub-documents, decimals, binary: kept as BSON values.
		{`{"ts": 1, "v": [1,2], "w": {"a": 1}, "d": {"$numberDecimal": "1.10"}, "b": {"$binary": {"base64": "AQI=", "subType": "00"}}}`, 1e6, 4, ""},
		{`{"ts": 1, "v": {"a": {"$x": 1}}}`, 0, 0, "is not allowed"},
		{`{"ts": 1, "_id": {"$oid": "0123456789abcdef01234567"}, "v": 1}`, 1e6, 2, ""},
		{`{"ts": 1, "_id": [1]}`, 0, 0, "can't use an array for _id"},
		{`{"ts": 1, "$v": 1}`, 0, 0, "cannot start with '$'"},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			m, err := MeasurementFromDocument(ts, decodeJSON(t, tc.doc))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || mongoerr.CodeOf(err) != mongoerr.BadValue {
					t.Fatalf("err = %v, want BadValue containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Time != tc.time || len(m.Fields) != tc.fields {
				t.Fatalf("got time %d fields %d, want %d %d", m.Time, len(m.Fields), tc.time, tc.fields)
			}
		})
	}
}

func TestCanonicalMeta(t *testing.T) {
	a, err := CanonicalMeta(map[string]any{"b": int64(1), "a": map[string]any{"y": "s", "x": 2.5}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := CanonicalMeta(map[string]any{"a": map[string]any{"x": 2.5, "y": "s"}, "b": int64(1)})
	if a != b {
		t.Fatalf("field order changed the key: %s vs %s", a, b)
	}
	if want := `{"a":{"x":2.5,"y":"s"},"b":1}`; a != want {
		t.Fatalf("got %s, want %s", a, want)
	}
	for _, v := range []any{nil, true, int64(-7), 3.0, -0.5, math.Inf(1), math.NaN(), "x\"y", time.Unix(5, 7).UTC(),
		[]any{int64(1), "a", nil}, map[string]any{"k": []any{map[string]any{"z": 1.5}}}} {
		s, err := CanonicalMeta(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeMeta(s)
		if err != nil {
			t.Fatalf("DecodeMeta(%s): %v", s, err)
		}
		s2, _ := CanonicalMeta(back)
		if s2 != s {
			t.Fatalf("round trip of %v: %s -> %s", v, s, s2)
		}
	}
	if one, _ := CanonicalMeta(int64(1)); one == func() string { s, _ := CanonicalMeta(1.0); return s }() {
		t.Fatalf("int 1 and float 1.0 share the key %s", one)
	}
}

// TestCanonicalMetaTypes checks that the meta values of BSON types beyond
// JSON's have keys of their own that decode to the same type and value:
// an int32 is not the int64 of its value (MongoDB buckets by the value's
// bytes and reads back the type written), an ObjectId, a Decimal128 and
// binary data round-trip; grouping and the relaxed output see an int32
// as the number it is.
func TestCanonicalMetaTypes(t *testing.T) {
	oid := partialfilter.ObjectID{0x65, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	meta := map[string]any{"id": int32(5578), "long": int64(5578), "oid": oid, "dec": mustDecimal("1.10"),
		"bin": partialfilter.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}, "arr": []any{int32(-1), int64(2)}}
	key, err := CanonicalMeta(meta)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"arr":[{"$numberInt":"-1"},2],"bin":{"$binary":{"base64":"MDEyMzQ1Njc4OWFiY2RlZg==","subType":"04"}},` +
		`"dec":{"$numberDecimal":"1.10"},"id":{"$numberInt":"5578"},"long":5578,"oid":{"$oid":"650102030405060708090a0b"}}`
	if key != want {
		t.Fatalf("key %s\nwant %s", key, want)
	}
	if err := ValidMetaKey(MetaKey(key)); err != nil {
		t.Fatalf("ValidMetaKey: %v", err)
	}
	back, err := DecodeMetaKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, meta) {
		t.Fatalf("decoded %#v\nwant %#v", back, meta)
	}
	i32, _ := CanonicalMeta(int32(5))
	i64, _ := CanonicalMeta(int64(5))
	if i32 == i64 {
		t.Fatalf("int32 5 and int64 5 share the key %s", i32)
	}
	if g32, g64 := GroupMetaKey(i32), GroupMetaKey(i64); g32 != g64 || g64 != "5" {
		t.Fatalf("group keys %s and %s, want 5 for both", g32, g64)
	}
	if g, _ := GroupMeta(meta); g != strings.NewReplacer(`{"$numberInt":"-1"}`, "-1", `{"$numberInt":"5578"}`, "5578").Replace(want) {
		t.Fatalf("group key %s", g)
	}
	relaxed := string(AppendRelaxedMeta(nil, key))
	if relaxed != `{"arr":[-1,2],"bin":{"$binary":{"base64":"MDEyMzQ1Njc4OWFiY2RlZg==","subType":"04"}},`+
		`"dec":{"$numberDecimal":"1.10"},"id":5578,"long":5578,"oid":{"$oid":"650102030405060708090a0b"}}` {
		t.Fatalf("relaxed %s", relaxed)
	}
	// A string that spells the wrapper is escaped in a key: left alone.
	s, _ := CanonicalMeta(map[string]any{"s": `{"$numberInt":"1"}`})
	if got := string(AppendRelaxedMeta(nil, s)); got != s {
		t.Fatalf("relaxed %s, want %s", got, s)
	}
}

func mustDecimal(s string) partialfilter.Decimal128 {
	d, err := partialfilter.ParseDecimal128(s)
	if err != nil {
		panic(err)
	}
	return d
}

func decodeJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return m
}
