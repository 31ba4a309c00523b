package command

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// TestDistinct: the values of a meta path from the series index, of a
// measurement field and of a plain collection's field from a find, each
// once (1 and 1.0 one value), arrays unwound, in MongoDB's order; a filter
// applies; an unknown collection is NamespaceNotFound; past the cap,
// QueryExceededMemoryLimit.
func TestDistinct(t *testing.T) {
	db, s := newTestService(t)
	ctx := context.Background()
	if _, err := db.CreateCollection(ctx, "m", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "s"}}); err != nil {
		t.Fatal(err)
	}
	re := func(p string) model.Value {
		return model.BSONValue(bsoncore.TypeRegex, bsoncore.AppendRegex(nil, p, "i"))
	}
	vals := []model.Value{model.Int(2), model.Float(1), model.Int(1), model.String("x"), model.Float(2.5), re("^a"), re("^b")}
	var ms []model.Measurement
	for i := range 14 {
		ms = append(ms, model.Measurement{Time: int64(i+1) * 1e9, Meta: map[string]any{"site": fmt.Sprint("s", i%3), "n": int64(i)},
			Fields: []model.Field{{Name: "v", Value: vals[i%len(vals)]}}})
	}
	if _, err := db.Insert(ctx, "m", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	dec := func(s string) partialfilter.Decimal128 {
		t.Helper()
		d, err := partialfilter.ParseDecimal128(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if _, err := db.CreateCollection(ctx, "p", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	docs := []document.Doc{
		{"_id": int64(1), "tags": []any{"b", "a"}, "o": []any{map[string]any{"k": int64(2)}, map[string]any{"k": 1.0}}},
		{"_id": int64(2), "tags": "c", "o": map[string]any{"k": int64(1)}},
		{"_id": int64(3), "tags": []any{"a"}},
		// Decimals: 0.3 and 0.30000000000000001 round to one double and
		// are two values; 1.10 is 1.1, and 2 is the int 2; 2^53 + 1 is
		// not 2^53 (a double).
		{"_id": int64(4), "d": []any{dec("0.3"), dec("0.30000000000000001"), dec("1.10"), dec("1.1"), dec("2"), int64(2)}},
		{"_id": int64(5), "d": []any{int64(1<<53 + 1), float64(1 << 53), int64(1 << 53), map[string]any{"x": dec("0.3")}, map[string]any{"x": dec("0.30000000000000001")}}},
	}
	if _, err := db.Insert(ctx, "p", timeseries.Batch{Documents: docs}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	// Meta values that are one number are one value, from the series
	// index too.
	if _, err := db.CreateCollection(ctx, "k", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "s"}}); err != nil {
		t.Fatal(err)
	}
	ms = ms[:0]
	for i, meta := range []any{int64(1), 1.0, int32(1), dec("1"), dec("0.3"), dec("0.30000000000000001"), 0.3} {
		ms = append(ms, model.Measurement{Time: int64(i+1) * 1e9, Meta: meta, Fields: []model.Field{{Name: "v", Value: model.Int(1)}}})
	}
	if _, err := db.Insert(ctx, "k", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	filter := func(s string) *partialfilter.Filter {
		t.Helper()
		f, err := partialfilter.ParseJSON([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, c := range []struct {
		coll, key string
		f         *partialfilter.Filter
		want      string
	}{
		{"m", "s.site", nil, `[s0 s1 s2]`},
		{"m", "s.site", filter(`{"s.n": {"$lt": 2}}`), `[s0 s1]`},
		// Regular expressions (each twice) have no key form: they
		// are told apart by their text.
		{"m", "v", nil, `[1 2 2.5 x {^a i} {^b i}]`},
		{"m", "v", filter(`{"s.site": "s1"}`), `[1 2 2.5 x {^b i}]`},
		{"p", "tags", nil, `[a b c]`},
		{"p", "o.k", nil, `[1 2]`},
		{"k", "s", nil, `[0.3 0.3 0.30000000000000001 1]`}, // the double 0.3, then the decimal,
		{"p", "missing", nil, `[]`},
		{"p", "d", nil, `[0.3 0.30000000000000001 1.10 2 9.007199254740992e+15 9007199254740993 map[x:0.3] map[x:0.30000000000000001]]`},
	} {
		got, err := s.Distinct(ctx, c.coll, c.key, c.f)
		if err != nil {
			t.Fatalf("distinct %s %s: %v", c.coll, c.key, err)
		}
		if s := fmt.Sprint(got); s != c.want {
			t.Errorf("distinct %s %s = %s, want %s", c.coll, c.key, s, c.want)
		}
	}
	// A meta path is answered from the series index, any other from a
	// find.
	before := db.Stats().DistinctsFromSeries
	if _, err := s.Distinct(ctx, "m", "s.site", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Distinct(ctx, "m", "v", nil); err != nil {
		t.Fatal(err)
	}
	if n := db.Stats().DistinctsFromSeries - before; n != 1 {
		t.Errorf("%d distincts from the series index, want the meta path's alone", n)
	}
	if _, err := s.Distinct(ctx, "nope", "a", nil); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Errorf("unknown collection: %v, want NamespaceNotFound", err)
	}
	defer func(n int) { maxDistinctBytes = n }(maxDistinctBytes)
	maxDistinctBytes = 20
	if _, err := s.Distinct(ctx, "p", "tags", nil); err != nil {
		t.Errorf("three short values within 20 bytes: %v", err)
	}
	maxDistinctBytes = 8
	if _, err := s.Distinct(ctx, "p", "tags", nil); mongoerr.CodeOf(err) != mongoerr.QueryExceededMemoryLimit {
		t.Errorf("past the cap: %v, want QueryExceededMemoryLimit", err)
	}
}
