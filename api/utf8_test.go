package api_test

import (
	"bytes"
	"context"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"

	"github.com/hourglassdb/hourglass/timeseries"
)

// TestInvalidUTF8StoredReadable: strings stored before they were checked
// on the way in (written here through the engine, which the doors stand
// in front of) are read back with U+FFFD in place of the bytes that are
// not UTF-8, in every output format.
func TestInvalidUTF8StoredReadable(t *testing.T) {
	s := newTestServer(t, nil)
	ctx := context.Background()
	if _, err := s.db.CreateCollection(ctx, "u", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	if _, err := s.db.Insert(ctx, "u", timeseries.Batch{Measurements: []model.Measurement{{Time: at, Meta: "s\xff",
		Fields: []model.Field{{Name: "s", Value: model.String("caf\xe9")}}}}}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, accept := range []string{"application/json", "application/x-ndjson", "text/csv"} {
		r := s.mustDo(200, "POST", "/v1/collections/u/find", `{}`, "Accept", accept)
		// JSON writes the replacement as encoding/json does, escaped.
		if !utf8.Valid(r.body) || !bytes.Contains(r.body, []byte("caf\ufffd")) && !bytes.Contains(r.body, []byte(`caf\ufffd`)) {
			t.Errorf("%s: %q, want UTF-8 with caf\\ufffd", accept, r.body)
		}
	}
	r := s.mustDo(200, "POST", "/v1/collections/u/find", `{}`, "Accept", "application/vnd.apache.arrow.stream")
	rd, err := ipc.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	found := false
	for rd.Next() {
		rec := rd.Record()
		for _, col := range rec.Columns() {
			if c, ok := col.(*array.String); ok {
				if !utf8.Valid(c.ValueBytes()) {
					t.Errorf("Arrow column holds %q", c.ValueBytes())
				}
				found = found || bytes.Contains(c.ValueBytes(), []byte("caf\ufffd"))
			}
		}
	}
	if !found {
		t.Error("Arrow reply lacks caf\\ufffd")
	}
}
