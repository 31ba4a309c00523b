package timeseries

import (
	"testing"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// TestInsertRefusesBadNames: field names with a NUL byte, and meta values
// with a field name starting with '$' or holding NUL at any depth, are
// refused with BadValue, whether the meta value comes as a value or as a
// MetaKey; nothing of them is stored.
func TestInsertRefusesBadNames(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", TimeSeriesOptions{TimeField: "t", MetaField: "meta"})
	ok := []Field{{"v", Int(1)}}
	for _, m := range []Measurement{
		{Time: 1, Fields: []Field{{"a\x00b", Int(1)}}},
		{Time: 1, Meta: map[string]any{"$site": "x"}, Fields: ok},
		{Time: 1, Meta: map[string]any{"a": []any{map[string]any{"$in": int64(1)}}}, Fields: ok},
		{Time: 1, Meta: map[string]any{"a\x00": int64(1)}, Fields: ok},
		{Time: 1, Meta: MetaKey(`{"$site":"x"}`), Fields: ok},
		{Time: 1, Meta: MetaKey(`{"a":{"$b":1}}`), Fields: ok},
	} {
		res, err := db.Insert(ctx, "m", []Measurement{m}, InsertOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) != 1 || mongoerr.CodeOf(res.Errors[0].Err) != mongoerr.BadValue {
			t.Errorf("%+v: errors %v, want one BadValue", m, res.Errors)
		}
	}
	if _, err := db.CreateCollection(ctx, "n", CollectionOptions{TimeSeries: &TimeSeriesOptions{TimeField: "t", MetaField: "a\x00"}}); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Errorf("metaField with NUL: %v, want BadValue", err)
	}
	checkCount(t, db, "m", 0)
}
