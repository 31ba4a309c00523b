package api_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
)

// TestFindArrow reads a find result back with arrow's IPC reader and checks
// the column types and every value.
func TestFindArrow(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	// 5000 measurements of one sensor: more than one record batch.
	const n = 5000
	var b strings.Builder
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"timestamp": {"$date": %q}, "sensor": "a", "temp": %d.25, "n": %d, "ok": %t}`+"\n",
			t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i, i, i%2 == 0)
	}
	s.mustDo(200, "POST", "/v1/collections/s/documents", b.String(), "Content-Type", "application/x-ndjson")

	r := s.mustDo(200, "POST", "/v1/collections/s/find", `{"sort": {"timestamp": 1}}`, "Accept", "application/vnd.apache.arrow.stream")
	if ct := r.header.Get("Content-Type"); ct != "application/vnd.apache.arrow.stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	rd, err := ipc.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	sc := rd.Schema()
	want := map[string]arrow.DataType{
		"timestamp": &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"},
		"sensor":    arrow.BinaryTypes.String,
		"temp":      arrow.PrimitiveTypes.Float64,
		"n":         arrow.PrimitiveTypes.Int64,
		"ok":        arrow.FixedWidthTypes.Boolean,
		"_id":       &arrow.FixedSizeBinaryType{ByteWidth: 12}, // made of the series and time
	}
	if sc.NumFields() != len(want) {
		t.Fatalf("schema %s", sc)
	}
	for name, typ := range want {
		fs, ok := sc.FieldsByName(name)
		if !ok || !arrow.TypeEqual(fs[0].Type, typ) {
			t.Fatalf("column %q: %v, want %s (schema %s)", name, fs, typ, sc)
		}
	}
	if fs, _ := sc.FieldsByName("sensor"); fs[0].Metadata.FindKey(model.MetaColumnMetadataKey) < 0 {
		t.Fatalf("meta column not marked: %s", sc)
	}
	idx := func(name string) int { return sc.FieldIndices(name)[0] }
	i, batches := 0, 0
	for rd.Next() {
		rec := rd.Record()
		batches++
		ts := rec.Column(idx("timestamp")).(*array.Timestamp)
		meta := rec.Column(idx("sensor")).(*array.String)
		temp := rec.Column(idx("temp")).(*array.Float64)
		nn := rec.Column(idx("n")).(*array.Int64)
		ok := rec.Column(idx("ok")).(*array.Boolean)
		for j := 0; j < int(rec.NumRows()); j++ {
			if got, want := int64(ts.Value(j)), t0.Add(time.Duration(i)*time.Second).UnixNano(); got != want {
				t.Fatalf("row %d: time %d, want %d", i, got, want)
			}
			if meta.Value(j) != `"a"` || temp.Value(j) != float64(i)+0.25 || nn.Value(j) != int64(i) || ok.Value(j) != (i%2 == 0) {
				t.Fatalf("row %d: %s %v %d %v", i, meta.Value(j), temp.Value(j), nn.Value(j), ok.Value(j))
			}
			i++
		}
	}
	if rd.Err() != nil || i != n || batches < 2 {
		t.Fatalf("read %d rows in %d batches: %v", i, batches, rd.Err())
	}
}
