package command

import (
	"context"

	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// newTestService opens an engine in a temporary directory and a Service
// over it; the engine closes with the test.
func newTestService(t *testing.T) (*timeseries.DB, *Service) {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	return db, s
}

// TestFind: one typed find for both kinds; a MongoDB projection is read as
// each kind reads it (a time series' columns, a plain collection's
// document projection); sort, skip and limit apply in the engine.
func TestFind(t *testing.T) {
	db, s := newTestService(t)
	ctx := context.Background()
	if _, err := db.CreateCollection(ctx, "m", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "s"}}); err != nil {
		t.Fatal(err)
	}
	var ms []model.Measurement
	for i := range 20 {
		ms = append(ms, model.Measurement{Time: int64(i+1) * 1e9, Meta: fmt.Sprint(i % 2),
			Fields: []model.Field{{Name: "a", Value: model.Int(int64(i))}, {Name: "b", Value: model.Float(0.5)}}})
	}
	if _, err := db.Insert(ctx, "m", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "p", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	var docs []document.Doc
	for i := range 10 {
		docs = append(docs, document.Doc{"_id": int64(i), "a": int64(10 - i), "b": "x"})
	}
	if _, err := db.Insert(ctx, "p", timeseries.Batch{Documents: docs}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}

	columns := func(f Find) ([]string, int64, []int64) {
		t.Helper()
		cur, err := s.Find(ctx, f)
		if err != nil {
			t.Fatalf("find %+v: %v", f, err)
		}
		defer cur.Close()
		if cur.Documents() {
			t.Fatal("a time series' find yields documents")
		}
		var names []string
		for _, fd := range cur.Schema().Fields() {
			names = append(names, fd.Name)
		}
		var rows int64
		var times []int64
		for cur.Next() {
			rows += cur.Record().NumRows()
			if cur.Schema().Field(0).Name == "t" {
				for i := range cur.Record().NumRows() {
					times = append(times, int64(cur.Record().Column(0).(*array.Timestamp).Value(int(i))))
				}
			}
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		return names, rows, times
	}
	if names, rows, _ := columns(Find{Collection: "m", Projection: map[string]any{"a": int64(1)}}); !slices.Equal(names, []string{"_id", "a"}) || rows != 20 {
		t.Errorf("inclusion projection: %v, %d rows", names, rows)
	}
	if names, _, _ := columns(Find{Collection: "m", Projection: map[string]any{"b": int64(0), "s": false}}); !slices.Equal(names, []string{"t", "_id", "a"}) {
		t.Errorf("exclusion projection: %v", names)
	}
	_, rows, times := columns(Find{Collection: "m", Projection: map[string]any{"t": true}, Sort: []timeseries.SortKey{{Field: "t", Desc: true}}, Skip: 3, Limit: 4})
	if rows != 4 || len(times) != 4 || times[0] != 17e9 || times[3] != 14e9 {
		t.Errorf("sorted, skipped, limited: %d rows, times %v", rows, times)
	}

	cur, err := s.Find(ctx, Find{Collection: "p", Projection: map[string]any{"_id": false, "a": true},
		Sort: []timeseries.SortKey{{Field: "a"}}, Skip: 1, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for cur.Next() {
		got = append(got, fmt.Sprint(cur.Doc()))
	}
	cur.Close()
	if err := cur.Err(); err != nil || !slices.Equal(got, []string{"map[a:2]", "map[a:3]"}) {
		t.Errorf("plain find: %v, %v", got, err)
	}

	for _, f := range []Find{
		{Collection: "m", Projection: map[string]any{"a": int64(1), "b": int64(0)}},
		{Collection: "p", Projection: map[string]any{"a": int64(1), "b": int64(0)}},
	} {
		if _, err := s.Find(ctx, f); err == nil {
			t.Errorf("a projection mixing inclusion and exclusion on %s was accepted", f.Collection)
		}
	}
	if _, err := s.Find(ctx, Find{Collection: "m", Sort: []timeseries.SortKey{{Field: "a"}}}); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Errorf("a time series sorted by a field: %v, want BadValue", err)
	}
	if _, err := s.Find(ctx, Find{Collection: "nosuch"}); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Errorf("a missing collection: %v", err)
	}
}
