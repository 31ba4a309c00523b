package timeseries

import (
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// TestCountOptions: Count's skip and limit on both kinds of collection,
// as MongoDB's count applies them (skip first, then the limit).
func TestCountOptions(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var ms []model.Measurement
	for i := range 100 {
		ms = append(ms, model.Measurement{Time: base + int64(i)*1e9, Meta: sensor([]string{"a", "b"}[i%2]),
			Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "p", CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	var docs []document.Doc
	for i := range 7 {
		docs = append(docs, document.Doc{"_id": int64(i), "v": int64(i)})
	}
	if _, err := db.Insert(ctx, "p", Batch{Documents: docs}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	parse := func(s map[string]any) *partialfilter.Filter {
		f, err := partialfilter.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	lt := func(n int64) *partialfilter.Filter { return parse(map[string]any{"v": map[string]any{"$lt": n}}) }
	for _, tc := range []struct {
		coll string
		f    *partialfilter.Filter
		o    CountOptions
		want int64
	}{
		{"m", nil, CountOptions{}, 100},
		{"m", nil, CountOptions{Skip: 30}, 70},
		{"m", nil, CountOptions{Limit: 10}, 10},
		{"m", nil, CountOptions{Skip: 95, Limit: 10}, 5},
		{"m", nil, CountOptions{Skip: 200}, 0},
		{"m", lt(40), CountOptions{}, 40},
		{"m", lt(40), CountOptions{Skip: 5, Limit: 100}, 35},
		{"m", parse(map[string]any{"s.id": "a"}), CountOptions{Skip: 10}, 40},
		{"p", nil, CountOptions{}, 7},
		{"p", lt(5), CountOptions{}, 5},
		{"p", lt(5), CountOptions{Skip: 2, Limit: 2}, 2},
		{"p", nil, CountOptions{Skip: 6, Limit: 3}, 1},
	} {
		got, err := db.Count(ctx, tc.coll, tc.f, tc.o)
		if err != nil || got != tc.want {
			t.Errorf("count %s %v %+v = %d, %v; want %d", tc.coll, tc.f, tc.o, got, err, tc.want)
		}
	}
	if _, err := db.Count(ctx, "m", nil, CountOptions{Skip: -1}); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Errorf("negative skip: %v", err)
	}
	if _, err := db.Count(ctx, "missing", nil, CountOptions{}); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Errorf("missing collection: %v", err)
	}
}
