package render

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

var tsType = &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}

func testSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: tsType},
		{Name: "sensor", Type: arrow.BinaryTypes.String, Nullable: true,
			Metadata: arrow.NewMetadata([]string{model.MetaColumnMetadataKey}, []string{"json"})},
		{Name: "temp", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "when", Type: tsType, Nullable: true},
		{Name: "mix", Type: arrow.BinaryTypes.String, Nullable: true,
			Metadata: arrow.NewMetadata([]string{model.MixedColumnMetadataKey}, []string{"json"})},
	}, nil)
}

// testRecord has three rows: full, sparse (nulls), and special values.
func testRecord(t testing.TB) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema())
	defer b.Release()
	const t0 = 1714564800_000000000 // 2024-05-01T12:00:00Z
	b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{t0, t0 + 1_500_000_000, t0 + 1}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{`"a"`, `{"site":"north","id":7}`, ""}, []bool{true, true, false})
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{20.5, 0, math.NaN()}, []bool{true, false, true})
	b.Field(3).(*array.Int64Builder).AppendValues([]int64{-3, 0, math.MaxInt64}, []bool{true, false, true})
	b.Field(4).(*array.BooleanBuilder).AppendValues([]bool{true, false, false}, []bool{true, false, true})
	b.Field(5).(*array.StringBuilder).AppendValues([]string{"x, \"y\"\nz", "", "\u2028\x01é"}, []bool{true, false, true})
	b.Field(6).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{0, -1, 0}, []bool{true, true, false})
	b.Field(7).(*array.StringBuilder).AppendValues([]string{`"s"`, `12`, `true`}, nil)
	return b.NewRecord()
}

func render(t *testing.T, f Format, opts Options, recs ...arrow.Record) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, f, testSchema(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestJSON(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	got := render(t, JSON, Options{}, rec)
	want := `[
{"ts":{"$date":"2024-05-01T12:00:00Z"},"sensor":"a","temp":20.5,"n":-3,"ok":true,"note":"x, \"y\"\nz","when":{"$date":"1970-01-01T00:00:00Z"},"mix":"s"},
{"ts":{"$date":"2024-05-01T12:00:01.5Z"},"sensor":{"site":"north","id":7},"when":{"$date":"1969-12-31T23:59:59.999999999Z"},"mix":12},
{"ts":{"$date":"2024-05-01T12:00:00.000000001Z"},"temp":{"$numberDouble":"NaN"},"n":9223372036854775807,"ok":false,"note":"\u2028\u0001é","mix":true}
]
`
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	var v []map[string]any
	if err := json.Unmarshal([]byte(got), &v); err != nil || len(v) != 3 {
		t.Fatalf("output is not a JSON array of 3: %v", err)
	}
	if v[0]["note"] != "x, \"y\"\nz" || v[2]["note"] != "\u2028\x01é" {
		t.Fatalf("strings do not round-trip: %q %q", v[0]["note"], v[2]["note"])
	}
}

func TestJSONFlatDatesAndSeveralRecords(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	got := render(t, JSON, Options{FlatDates: true}, rec, rec)
	var v []map[string]any
	if err := json.Unmarshal([]byte(got), &v); err != nil || len(v) != 6 {
		t.Fatalf("output is not a JSON array of 6: %v\n%s", err, got)
	}
	if v[4]["ts"] != "2024-05-01T12:00:01.5Z" {
		t.Fatalf("flat date: %v", v[4]["ts"])
	}
}

func TestEmpty(t *testing.T) {
	for f, want := range map[Format]string{JSON: "[\n]\n", NDJSON: "", CSV: "ts,sensor,temp,n,ok,note,when,mix\n"} {
		if got := render(t, f, Options{}); got != want {
			t.Errorf("%s: %q, want %q", f, got, want)
		}
	}
}

func TestNDJSON(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	got := render(t, NDJSON, Options{}, rec)
	lines := strings.Split(got, "\n")
	if len(lines) != 4 || lines[3] != "" {
		t.Fatalf("want 3 newline-terminated lines: %q", got)
	}
	for _, l := range lines[:3] {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
	}
	if lines[1] != `{"ts":{"$date":"2024-05-01T12:00:01.5Z"},"sensor":{"site":"north","id":7},"when":{"$date":"1969-12-31T23:59:59.999999999Z"},"mix":12}` {
		t.Fatalf("line 2: %s", lines[1])
	}
}

func TestCSV(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	got := render(t, CSV, Options{}, rec)
	want := "ts,sensor,temp,n,ok,note,when,mix\n" +
		"2024-05-01T12:00:00Z,a,20.5,-3,true,\"x, \"\"y\"\"\nz\",1970-01-01T00:00:00Z,s\n" +
		"2024-05-01T12:00:01.5Z,\"{\"\"site\"\":\"\"north\"\",\"\"id\"\":7}\",,,,,1969-12-31T23:59:59.999999999Z,12\n" +
		"2024-05-01T12:00:00.000000001Z,,NaN,9223372036854775807,false,\u2028\x01é,,true\n"
	if got != want {
		t.Fatalf("got:\n%q\nwant:\n%q", got, want)
	}
	rows, err := csv.NewReader(strings.NewReader(got)).ReadAll()
	if err != nil || len(rows) != 4 {
		t.Fatalf("encoding/csv reads %d rows: %v", len(rows), err)
	}
	if rows[1][5] != "x, \"y\"\nz" || rows[2][1] != `{"site":"north","id":7}` {
		t.Fatalf("cells do not round-trip: %q", rows)
	}
}

func TestArrowRoundTrip(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Arrow, testSchema(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Schema().Equal(testSchema()) {
		t.Fatalf("schema %s", r.Schema())
	}
	n := 0
	for r.Next() {
		if !array.RecordApproxEqual(r.Record(), rec, array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
			t.Fatalf("record %d differs", n)
		}
		n++
	}
	if r.Err() != nil || n != 2 {
		t.Fatalf("read %d records: %v", n, r.Err())
	}
}

func TestArrowBatches(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	const n = 2*ArrowBatchRows + 7
	for i := 0; i < n; i++ {
		b.Append(int64(i))
	}
	col := b.NewArray()
	rec := array.NewRecord(schema, []arrow.Array{col}, n)
	col.Release()
	defer rec.Release()
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Arrow, schema, Options{})
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := ipc.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	next := int64(0)
	for r.Next() {
		xs := r.Record().Column(0).(*array.Int64).Int64Values()
		for _, x := range xs {
			if x != next {
				t.Fatalf("value %d, want %d", x, next)
			}
			next++
		}
		sizes = append(sizes, r.Record().NumRows())
	}
	if len(sizes) != 3 || sizes[0] != ArrowBatchRows || sizes[2] != 7 {
		t.Fatalf("batches %v", sizes)
	}
}

func TestUnsupportedAndMismatched(t *testing.T) {
	bad := arrow.NewSchema([]arrow.Field{{Name: "u", Type: arrow.PrimitiveTypes.Uint32}}, nil)
	for _, f := range []Format{JSON, CSV, Arrow} {
		if _, err := NewWriter(&bytes.Buffer{}, f, bad, Options{}); err == nil {
			t.Errorf("%s: uint32 column accepted", f)
		}
	}
	rec := testRecord(t)
	defer rec.Release()
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, f := range []Format{JSON, CSV, Arrow} {
		w, err := NewWriter(&bytes.Buffer{}, f, other, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err == nil {
			t.Errorf("%s: record of another schema accepted", f)
		}
	}
}

type flushCounter struct {
	bytes.Buffer
	flushes, writes int
	length          int // given by SetLength; -1: not given
}

func (f *flushCounter) Flush()          { f.flushes++ }
func (f *flushCounter) SetLength(n int) { f.length = n }
func (f *flushCounter) Write(p []byte) (int, error) {
	f.writes++
	return f.Buffer.Write(p)
}

// lastFlush returns the writer's record of when it last flushed, for the
// test to read or move.
func lastFlush(t *testing.T, w Writer) *time.Time {
	t.Helper()
	switch w := w.(type) {
	case *textWriter:
		return &w.flushed
	case *arrowWriter:
		return &w.flushed
	}
	t.Fatalf("writer of type %T", w)
	return nil
}

// TestFlushes: a text writer keeps its output until flushEvery has passed
// since it was made or last flushed (looked at after each record), then
// writes and flushes it, so a long reply streams; Arrow writes every
// record through and flushes on the same clock. The test moves the
// writer's last flush instead of waiting, so that a slow machine cannot
// stretch a "short" reply past flushEvery.
func TestFlushes(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	for _, f := range []Format{JSON, NDJSON, CSV, Arrow} {
		fc := flushCounter{length: -1}
		before := time.Now()
		w, _ := NewWriter(&fc, f, testSchema(), Options{})
		last := lastFlush(t, w)
		if last.Before(before) || last.After(time.Now()) {
			t.Errorf("%s: a new writer's last flush is %v, not when it was made", f, *last)
		}
		// Less than flushEvery since the last flush: kept (text) or
		// written (Arrow), not flushed.
		*last = time.Now().Add(time.Hour)
		w.Write(rec)
		if fc.flushes != 0 || (f == Arrow) != (fc.Len() > 0) {
			t.Errorf("%s: %d flushes, %d bytes after one record", f, fc.flushes, fc.Len())
		}
		// flushEvery since the last flush: written and flushed.
		*last = time.Now().Add(-flushEvery)
		n := fc.Len()
		at := time.Now()
		w.Write(rec)
		if fc.flushes != 1 || fc.Len() == n {
			t.Errorf("%s: %d flushes, %d more bytes after a record %v later", f, fc.flushes, fc.Len()-n, flushEvery)
		}
		if last.Before(at) {
			t.Errorf("%s: flushing left the last flush at %v, before the write", f, *last)
		}
		// The next record soon after: not flushed.
		*last = time.Now().Add(time.Hour)
		w.Write(rec)
		if fc.flushes != 1 {
			t.Errorf("%s: %d flushes after a record at once", f, fc.flushes)
		}
		w.Close()
		if fc.length != -1 {
			t.Errorf("%s: a length of %d given for a reply written in parts", f, fc.length)
		}
	}
}

// TestShortReplyWhole: a text reply shorter than flushBytes and quicker
// than flushEvery is one write at Close, its length given first.
func TestShortReplyWhole(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	for _, f := range []Format{JSON, NDJSON, CSV} {
		fc := flushCounter{length: -1}
		w, _ := NewWriter(&fc, f, testSchema(), Options{})
		*lastFlush(t, w) = time.Now().Add(time.Hour)
		w.Write(rec)
		w.Write(rec)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if fc.writes != 1 || fc.length != fc.Len() || fc.Len() == 0 {
			t.Errorf("%s: %d writes of %d bytes, length given %d; want one write of the length given", f, fc.writes, fc.Len(), fc.length)
		}
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("client gone")
}

func TestWriteErrorSticks(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	fw := &failWriter{}
	w, _ := NewWriter(fw, NDJSON, testSchema(), Options{})
	*lastFlush(t, w) = time.Now().Add(-flushEvery) // written through
	if err := w.Write(rec); err == nil {
		t.Fatal("write error lost")
	}
	if err := w.Write(rec); err == nil || fw.n != 1 {
		t.Fatalf("wrote again after an error: %d writes, %v", fw.n, err)
	}
}

func TestFloats(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0", math.Copysign(0, -1): "-0", 21: "21", 20.5: "20.5", 1e21: "1e+21", 1e20: "100000000000000000000",
		1e-7: "1e-7", 0.000001: "0.000001", -2.5e-300: "-2.5e-300", math.MaxFloat64: "1.7976931348623157e+308",
		math.SmallestNonzeroFloat64: "5e-324", math.Inf(1): `{"$numberDouble":"Infinity"}`, math.Inf(-1): `{"$numberDouble":"-Infinity"}`,
	} {
		if got := string(appendJSONFloat(nil, f)); got != want {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
	}
	if got := string(appendCSVFloat(nil, math.Inf(-1))); got != "-Inf" {
		t.Errorf("csv -Inf: %s", got)
	}
}

func TestNegotiate(t *testing.T) {
	for accept, want := range map[string]Format{
		"":                                    JSON,
		"*/*":                                 JSON,
		"application/json":                    JSON,
		"application/x-ndjson":                NDJSON,
		"application/jsonl":                   NDJSON,
		"text/csv":                            CSV,
		"text/csv; charset=utf-8":             CSV,
		"text/*":                              CSV,
		"application/vnd.apache.arrow.stream": Arrow,
		"text/html, text/csv;q=0.5, application/json;q=0.4": CSV,
		"application/json;q=0.2, application/x-ndjson":      NDJSON,
		"application/json, text/csv":                        JSON,
		"text/csv;q=0, */*;q=0.1":                           JSON,
		"bogus, text/csv;q=abc, application/x-ndjson;q=0.3": NDJSON,
	} {
		got, err := Negotiate(accept)
		if err != nil || got != want {
			t.Errorf("Negotiate(%q) = %s, %v; want %s", accept, got, err, want)
		}
	}
	for _, accept := range []string{"text/html", "image/png, text/xml", "text/csv;q=0", "application/json;q=2", ";;;"} {
		if _, err := Negotiate(accept); !errors.Is(err, ErrNotAcceptable) {
			t.Errorf("Negotiate(%q): %v, want ErrNotAcceptable", accept, err)
		}
	}
}

// TestNegotiateAmong: an endpoint offering JSON alone takes it where a
// range names it, among others or as a wildcard, and refuses a header
// whose ranges name only formats it does not offer.
func TestNegotiateAmong(t *testing.T) {
	for _, accept := range []string{"", "*/*", "application/*", "application/json", "text/csv, application/json;q=0.5", "text/html, */*;q=0.1"} {
		if got, err := NegotiateAmong(accept, JSON); err != nil || got != JSON {
			t.Errorf("NegotiateAmong(%q, JSON) = %s, %v; want JSON", accept, got, err)
		}
	}
	for _, accept := range []string{"text/csv", "text/*", "application/json;q=0", "application/x-ndjson, application/vnd.apache.arrow.stream"} {
		_, err := NegotiateAmong(accept, JSON)
		if !errors.Is(err, ErrNotAcceptable) || !strings.Contains(err.Error(), "supported: application/json") || strings.Contains(err.Error(), "text/csv,") {
			t.Errorf("NegotiateAmong(%q, JSON): %v, want ErrNotAcceptable naming JSON alone", accept, err)
		}
	}
	if got, _ := NegotiateAmong("text/csv, application/x-ndjson;q=0.9", JSON, NDJSON); got != NDJSON {
		t.Errorf("CSV not offered: %s, want NDJSON", got)
	}
}

func TestNoAllocsPerRow(t *testing.T) {
	rec := bigRecord(4096)
	defer rec.Release()
	for _, f := range []Format{JSON, NDJSON, CSV} {
		w, _ := NewWriter(discard{}, f, rec.Schema(), Options{})
		w.Write(rec) // grow the buffer
		allocs := testing.AllocsPerRun(10, func() { w.Write(rec) })
		if allocs > 2 {
			t.Errorf("%s: %.0f allocations per 4096-row record", f, allocs)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// bigRecord is n rows shaped like a find result: time, meta, two floats, an int.
func bigRecord(n int) arrow.Record {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: tsType},
		{Name: "tags", Type: arrow.BinaryTypes.String, Nullable: true,
			Metadata: arrow.NewMetadata([]string{model.MetaColumnMetadataKey}, []string{"json"})},
		{Name: "usage_user", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "usage_system", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "count", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(1714564800_000000000 + int64(i)*10_000_000_000))
		b.Field(1).(*array.StringBuilder).Append(`{"_measurement":"cpu","hostname":"host_1"}`)
		b.Field(2).(*array.Float64Builder).Append(float64(i%100) + 0.25)
		b.Field(3).(*array.Float64Builder).Append(float64(i%7) * 1.5)
		b.Field(4).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecord()
}

func BenchmarkWrite(b *testing.B) {
	rec := bigRecord(4096)
	defer rec.Release()
	for _, f := range []Format{JSON, NDJSON, CSV, Arrow} {
		b.Run(f.String(), func(b *testing.B) {
			w, _ := NewWriter(discard{}, f, rec.Schema(), Options{})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := w.Write(rec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*4096/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\x00\x1f", "\u2028\u2029", "\xff\xfe", "é漢字", "a\nb\tc\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q renders as invalid JSON %s: %v", s, out, err)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("%q renders as %s which reads back as %q", s, out, got)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if utf8.ValidString(s) && string(out) != strings.TrimSuffix(want.String(), "\n") {
			t.Fatalf("%q renders as %s, encoding/json as %s", s, out, want.String())
		}
		cell := appendCSVString(nil, s)
		rows, err := csv.NewReader(bytes.NewReader(append(append([]byte("x,"), cell...), '\n'))).ReadAll()
		if strings.ContainsAny(s, "\r") || s == "" {
			return // encoding/csv normalises \r\n and drops empty records
		}
		// Bytes that are not UTF-8 (stored before strings were checked on
		// the way in) are written as U+FFFD.
		if err != nil || len(rows) != 1 || rows[0][1] != strings.ToValidUTF8(s, "\uFFFD") {
			t.Fatalf("%q renders as CSV %q, reads back %q: %v", s, cell, rows, err)
		}
	})
}

func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{"", "*/*", "text/csv;q=0.5, application/json", "a/b;q=0.x", ",,,", "text/csv;q=1;q=0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		got, err := Negotiate(accept)
		if err != nil {
			if !errors.Is(err, ErrNotAcceptable) {
				t.Fatalf("%q: error %v does not wrap ErrNotAcceptable", accept, err)
			}
			return
		}
		if got < JSON || got > Arrow {
			t.Fatalf("%q: format %d", accept, got)
		}
	})
}
