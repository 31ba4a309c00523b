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
// BSONObjectTooLarge.
func TestDistinct(t *testing.T) {
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := New(Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := db.CreateCollection(ctx, "p", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	docs := []document.Doc{
		{"_id": int64(1), "tags": []any{"b", "a"}, "o": []any{map[string]any{"k": int64(2)}, map[string]any{"k": 1.0}}},
		{"_id": int64(2), "tags": "c", "o": map[string]any{"k": int64(1)}},
		{"_id": int64(3), "tags": []any{"a"}},
	}
	if _, err := db.Insert(ctx, "p", timeseries.Batch{Documents: docs}, timeseries.InsertOptions{}); err != nil {
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
		{"p", "missing", nil, `[]`},
	} {
		got, err := s.Distinct(ctx, c.coll, c.key, c.f)
		if err != nil {
			t.Fatalf("distinct %s %s: %v", c.coll, c.key, err)
		}
		if s := fmt.Sprint(got); s != c.want {
			t.Errorf("distinct %s %s = %s, want %s", c.coll, c.key, s, c.want)
		}
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
	if _, err := s.Distinct(ctx, "p", "tags", nil); mongoerr.CodeOf(err) != mongoerr.BSONObjectTooLarge {
		t.Errorf("past the cap: %v, want BSONObjectTooLarge", err)
	}
}
