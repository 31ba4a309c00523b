package timeseries

import (
	"testing"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// TestInsertRefusesBadNames: field names with a NUL byte, and meta values
// with a field name starting with '$' or holding NUL at any depth, are
// refused with BadValue, whether the meta value comes as a value or as a
// MetaKey; nothing of them is stored.
func TestInsertRefusesBadNames(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "meta"})
	ok := []model.Field{{Name: "v", Value: model.Int(1)}}
	for _, m := range []model.Measurement{
		{Time: 1, Fields: []model.Field{{Name: "a\x00b", Value: model.Int(1)}}},
		{Time: 1, Meta: map[string]any{"$site": "x"}, Fields: ok},
		{Time: 1, Meta: map[string]any{"a": []any{map[string]any{"$in": int64(1)}}}, Fields: ok},
		{Time: 1, Meta: map[string]any{"a\x00": int64(1)}, Fields: ok},
		{Time: 1, Meta: model.MetaKey(`{"$site":"x"}`), Fields: ok},
		{Time: 1, Meta: model.MetaKey(`{"a":{"$b":1}}`), Fields: ok},
	} {
		res, err := db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{m}}, InsertOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) != 1 || mongoerr.CodeOf(res.Errors[0].Err) != mongoerr.BadValue {
			t.Errorf("%+v: errors %v, want one BadValue", m, res.Errors)
		}
	}
	if _, err := db.CreateCollection(ctx, "n", CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "a\x00"}}); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Errorf("metaField with NUL: %v, want BadValue", err)
	}
	checkCount(t, db, "m", 0)
}

// TestInsertBadKeyInBatch: a batch of series keys (as the line protocol
// sends them) with an invalid key among valid ones, new and known,
// reports that row alone; an ordered insert stores the rows before it and
// none after, an unordered one every other row.
func TestInsertBadKeyInBatch(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "meta"})
	ok := []model.Field{{Name: "v", Value: model.Int(1)}}
	known := model.MetaKey(`{"s":"known"}`)
	if _, err := db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{{Time: 1, Meta: known, Fields: ok}}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	batch := []model.Measurement{
		{Time: 2, Meta: known, Fields: ok},
		{Time: 2, Meta: model.MetaKey(`{"s":"new1"}`), Fields: ok},
		{Time: 2, Meta: model.MetaKey(`{"$s":"bad"}`), Fields: ok},
		{Time: 3, Meta: known, Fields: ok},
		{Time: 2, Meta: model.MetaKey(`{"s":"new2"}`), Fields: ok},
	}
	for _, c := range []struct {
		unordered bool
		inserted  int
		count     int
	}{{false, 2, 3}, {true, 4, 7}} {
		res, err := db.Insert(ctx, "m", Batch{Measurements: batch}, InsertOptions{Unordered: c.unordered})
		if err != nil {
			t.Fatal(err)
		}
		if res.Inserted != c.inserted || len(res.Errors) != 1 || res.Errors[0].Index != 2 ||
			mongoerr.CodeOf(res.Errors[0].Err) != mongoerr.BadValue {
			t.Fatalf("unordered %v: inserted %d, errors %v; want %d and one BadValue at 2", c.unordered, res.Inserted, res.Errors, c.inserted)
		}
		checkCount(t, db, "m", c.count)
	}
}
