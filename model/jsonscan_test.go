package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// scanSeeds are documents of every shape MeasurementFromDocument handles
// or refuses.
var scanSeeds = []string{
	`{"time":{"$date":"2024-01-01T00:00:00.123456789Z"},"sensor":{"id":"s000042","site":"site-42","kind":"humidity","floor":2},"value":21.375,"battery":87}`,
	`{"time": {"$date": "2024-05-01T12:00:00.123Z"}, "sensor": "a", "v": 1}`,
	`{"time": {"$date": {"$numberLong": "1714564800123"}}, "v": 1.5}`,
	`{"time": {"$date": 1714564800123}, "v": 1.5}`,
	`{"time": "2024-05-01T12:00:00.123Z", "v": true, "s": "x", "f": false}`,
	`{"time": 1714564800123, "n": null, "sensor": null}`,
	`{"time": "2024-05-01T12:00:00.123456789+02:00", "big": 12345678901234567890, "neg": -12, "e": 1e3, "x": -0.5E-2}`,
	`{"time": {"$date": "1900-01-01T00:00:00Z"}, "_id": {"$oid": "x"}}`,
	`{"time": {"$date": "2024-05-01T12:00:00Z"}, "d": {"$date": "2024-05-01T12:00:00Z"}, "l": {"$numberLong": "7"}, "nd": {"$numberDouble": "NaN"}}`,
	`{"v": 1}`,
	`{"time": "yesterday"}`,
	`{"time": 1.5}`,
	`{"time": true}`,
	`{"time": [1]}`,
	`{"time": {"$date": "nope"}}`,
	`{"time": {"$date": "3000-01-01T00:00:00Z"}}`,
	`{"time": {"$date": {"$numberLong": "9223372036854"}}}`,
	`{"time": -9214560000001}`,
	`{"time": 1, "d": {"$date": "2262-01-01T00:00:00Z"}}`,
	`{"time": 1, "v\u0000x": 1}`,
	`{"time": 1, "sensor": {"$site": "a"}}`,
	`{"time": 1, "sensor": {"a": [{"b": {"$gt": 1}}]}}`,
	`{"time": 1, "sensor": {"a": {"$date": "2024-05-01T12:00:00Z"}, "n": {"$numberLong": "5"}, "s$": 1}}`,
	`{"time": 1, "v": [1,2], "a": {"b": 1}}`,
	`{"time": 1, "$v": 1, "w": [1]}`,
	`{"time": 1, "": 1}`,
	`{"ti\u006de": 1, "s": "a\"b\\c\u00e9", "sensor": {"k": "\u003c"}}`,
	`{"time": 1, "big": 1e400}`,
	`{"time": 1, "sensor": 1e400}`,
	`{"time": 1, "sensor": [1, 2.5, "x", {"b": 2, "a": 1}]}`,
	`{ "time" : { "$date" : "2024-01-01T00:00:00Z" } , "sensor" : { "b" : 1 , "a" : 2 } , "v" : 3 }`,
	`{"time": {"$date": "2024-01-01T00:00:00Z", "x": 1}}`,
	`{"time": {"$date": "2024-01-01T00:00:00\u005a"}}`,
	// A name holding a backslash, then one whose text is the same bytes
	// as an escape: the decoder's recent names must not confuse them.
	`{"time": 1, "a\\nb": 1}`,
	`{"time": 1, "a\nb": 1}`,
}

var scanOptions = []*TimeSeriesOptions{
	{TimeField: "time", MetaField: "sensor", Granularity: GranularitySeconds},
	{TimeField: "time", Granularity: GranularitySeconds},
	{TimeField: "time", MetaField: "v", Granularity: GranularitySeconds},
}

// checkDecoderAgrees checks that MeasurementDecoder.Decode of raw gives
// what MeasurementFromDocument gives on raw decoded into a map, for each
// of scanOptions, twice (the second time from the decoder's caches).
func checkDecoderAgrees(t *testing.T, d *MeasurementDecoder, raw []byte) {
	t.Helper()
	if !json.Valid(raw) || !utf8.Valid(raw) {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return
	}
	doc, ok := v.(map[string]any)
	if !ok || topLevelMembers(raw) != len(doc) {
		return // not an object, or a name twice: refused before decoding
	}
	for _, ts := range scanOptions {
		want, wantErr := MeasurementFromDocument(ts, doc)
		if wantErr == nil && want.Meta != nil {
			var k string
			if k, wantErr = CanonicalMeta(want.Meta); wantErr == nil {
				want.Meta = MetaKey(k)
			}
		}
		for round := range 2 {
			got, gotErr := d.Decode(ts, raw)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("%s, meta %q, round %d: error %v, want %v", raw, ts.MetaField, round, gotErr, wantErr)
			}
			if wantErr != nil {
				continue
			}
			if got.Time != want.Time || got.Meta != want.Meta || !sameFields(got.Fields, want.Fields) {
				t.Fatalf("%s, meta %q, round %d:\n got %+v\nwant %+v", raw, ts.MetaField, round, got, want)
			}
			if !slices.IsSortedFunc(got.Fields, memberOrder(raw)) {
				t.Fatalf("%s: fields %+v not in the document's order", raw, got.Fields)
			}
		}
	}
	d.Reset()
}

// sameFields compares fields by name: a decoder keeps the document's
// order, the conversion of a map has the names in order.
func sameFields(a, b []Field) bool {
	if len(a) != len(b) {
		return false
	}
	byName := func(x, y Field) int { return strings.Compare(x.Name, y.Name) }
	a, b = slices.SortedFunc(slices.Values(a), byName), slices.SortedFunc(slices.Values(b), byName)
	for i := range a {
		x, y := a[i].Value, b[i].Value
		if x.Kind == KindBSON && y.Kind == KindBSON && a[i].Name == b[i].Name {
			// A map's conversion has its sub-documents' fields in name
			// order: the same values?
			if !reflect.DeepEqual(x.Interface(), y.Interface()) {
				return false
			}
			continue
		}
		if a[i].Name != b[i].Name || x.Kind != y.Kind || x.S != y.S || x.I != y.I || x.B != y.B ||
			math.Float64bits(x.F) != math.Float64bits(y.F) {
			return false
		}
	}
	return true
}

// topLevelMembers counts the members of the JSON object raw.
// memberOrder compares fields by the place of their names among the
// object raw's members.
func memberOrder(raw []byte) func(a, b Field) int {
	place := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.Token()
	for i := 0; dec.More(); i++ {
		tok, _ := dec.Token()
		if k, ok := tok.(string); ok {
			place[k] = i
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	return func(a, b Field) int { return place[a.Name] - place[b.Name] }
}

func topLevelMembers(raw []byte) int {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return -1
	}
	n := 0
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return -1
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return -1
		}
		n++
	}
	return n
}

func TestMeasurementDecoderAgrees(t *testing.T) {
	d := NewMeasurementDecoder()
	for _, s := range scanSeeds {
		checkDecoderAgrees(t, d, []byte(s))
	}
	// Random documents of the shapes sensors send, with the odd refusal.
	r := rand.New(rand.NewPCG(1, 2))
	vals := []string{`1`, `-7`, `2.5`, `1e2`, `"x"`, `"a\nb"`, `true`, `false`, `null`, `[1]`, `{"a":1}`,
		`{"$date":"2024-01-01T00:00:01Z"}`, `{"$numberLong":"9"}`, `99999999999999999999`, `9999999999999999999`, `-9223372036854775808`, `123456789012345678`}
	metas := []string{`"s1"`, `{"id":"s1","site":"a"}`, `{"site":"a","id":"s1"}`, `{"id":"s2","floor":3}`,
		`null`, `7`, `[1,"a"]`, `{"$bad":1}`, `{"id":{"$date":"2024-01-01T00:00:00Z"}}`}
	names := []string{"v", "b", "a", "temp", "_id", "$x", "sensor"}
	for range 3000 {
		var b strings.Builder
		b.WriteString(`{"time":{"$date":"2024-01-01T00:00:00.5Z"}`)
		if r.IntN(4) > 0 {
			fmt.Fprintf(&b, `,"sensor":%s`, metas[r.IntN(len(metas))])
		}
		seen := map[string]bool{"sensor": true}
		for range r.IntN(4) {
			n := names[r.IntN(len(names))]
			if seen[n] {
				continue
			}
			seen[n] = true
			fmt.Fprintf(&b, `,%q:%s`, n, vals[r.IntN(len(vals))])
		}
		b.WriteString("}")
		checkDecoderAgrees(t, d, []byte(b.String()))
	}
}

// Decode reuses its field memory after Reset: measurements decoded before
// keep their fields until then.
func TestMeasurementDecoderFieldsStable(t *testing.T) {
	d := NewMeasurementDecoder()
	ts := scanOptions[0]
	var ms []Measurement
	for i := range 1000 {
		m, err := d.Decode(ts, fmt.Appendf(nil, `{"time":%d,"sensor":"s%d","v":%d,"w":"x%d"}`, i+1, i%7, i, i))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	for i, m := range ms {
		if m.Time != int64(i+1)*1e6 || len(m.Fields) != 2 || m.Fields[0].Value.I != int64(i) || m.Fields[1].Value.S != fmt.Sprint("x", i) ||
			m.Meta != MetaKey(fmt.Sprintf(`"s%d"`, i%7)) {
			t.Fatalf("measurement %d: %+v", i, m)
		}
	}
}

func FuzzMeasurementDecoder(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	d := NewMeasurementDecoder()
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkDecoderAgrees(t, d, raw)
	})
}

func checkUTCDate(t *testing.T, s string) {
	t.Helper()
	got, ok := parseUTCDate(s)
	if !ok {
		return
	}
	want, err := time.Parse(time.RFC3339Nano, s)
	if err == nil {
		var ns int64
		if ns, err = timeToNanos(want); err == nil && ns == got {
			return
		}
	}
	t.Fatalf("parseUTCDate(%q) = %d, time.Parse: %v (%d), %v", s, got, want, want.UnixNano(), err)
}

func TestParseUTCDate(t *testing.T) {
	for _, s := range []string{"2024-01-01T00:00:00Z", "2024-02-29T23:59:59.123456789Z", "2023-02-29T00:00:00Z",
		"2024-04-31T00:00:00Z", "2024-13-01T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01T00:60:00Z",
		"2024-01-01T00:00:60Z", "2024-01-01T00:00:00.Z", "2024-01-01T00:00:00.1234567890Z", "0000-01-01T00:00:00.5Z",
		"1678-01-01T00:00:00Z", "1677-12-31T23:59:59Z", "2261-12-31T23:59:59.999999999Z", "2262-01-01T00:00:00Z",
		"1900-02-29T00:00:00Z", "2000-02-29T00:00:00Z", "1969-12-31T23:59:59.999Z", "1700-03-01T00:00:00Z",
		"2024-01-01t00:00:00Z", "2024-01-01T00:00:00+00:00", "2024-1-01T00:00:00Z", "+024-01-01T00:00:00Z"} {
		checkUTCDate(t, s)
	}
	for _, s := range []string{"2024-01-01T00:00:00Z", "2024-02-29T23:59:59.123456789Z", "1970-01-01T00:00:00.5Z",
		"1678-01-01T00:00:00Z", "2261-12-31T23:59:59.999999999Z", "1969-12-31T23:59:59.999Z", "2000-02-29T00:00:00Z"} {
		if _, ok := parseUTCDate(s); !ok {
			t.Errorf("parseUTCDate(%q) leaves it to time.Parse", s)
		}
	}
}

func FuzzParseUTCDate(f *testing.F) {
	f.Add("2024-02-29T23:59:59.123456789Z")
	f.Add("2023-02-29T00:00:00Z")
	f.Fuzz(checkUTCDate)
}

// appendJSONString writes what json.Marshal writes for every string: meta
// keys stored before it took its short cut must stay byte for byte.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "s000042", "site-7", `a"b`, `a\b`, "<&>", "\u2028", "é", "\x00\x1f\x7f", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("appendJSONString(%q) = %s, json.Marshal %s", s, got, want)
		}
	})
}

// After Reset the next document's fields reuse the memory of the last
// one's: its names are checked whole, not compared with themselves.
func TestMeasurementDecoderChecksAfterReset(t *testing.T) {
	d := NewMeasurementDecoder()
	ts := scanOptions[0]
	if _, err := d.Decode(ts, []byte(`{"time":1,"a":1}`)); err != nil {
		t.Fatal(err)
	}
	d.Reset()
	if _, err := d.Decode(ts, []byte(`{"time":2,"$a":1}`)); err == nil || !strings.Contains(err.Error(), "cannot start with '$'") {
		t.Fatalf("a field named $a after Reset: %v", err)
	}
}

// BenchmarkMeasurementDecoder decodes iot documents of 10,000 sensors in
// batches of 5,000, as the documents endpoint does with the load
// generator's NDJSON: the meta cache holds every sensor and each batch
// visits half of them.
func BenchmarkMeasurementDecoder(b *testing.B) {
	const sensors, batch = 10000, 5000
	kinds := []string{"temperature", "humidity", "pressure", "vibration"}
	docs := make([][]byte, 2*sensors)
	for i := range docs {
		s := i % sensors
		docs[i] = fmt.Appendf(nil, `{"time":{"$date":"2024-01-01T00:%02d:%02d.%09dZ"},"sensor":{"id":"s%06d","site":"site-%d","kind":"%s","floor":%d},"value":%g,"battery":%d}`,
			i/sensors, s%60, s*7919%1000000000, s, s%100, kinds[s%len(kinds)], s%5, 20+float64(s%997)/64, 100-s%7)
	}
	ts := &TimeSeriesOptions{TimeField: "time", MetaField: "sensor"}
	d := NewMeasurementDecoder()
	b.ReportAllocs()
	for i := range b.N {
		if i%batch == 0 {
			d.Reset()
		}
		if _, err := d.Decode(ts, docs[i%len(docs)]); err != nil {
			b.Fatal(err)
		}
	}
}
