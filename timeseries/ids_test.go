package timeseries

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/hourglassdb/hourglass/model"
)

// idsOf returns each measurement's _id as a find returns it, by "n".
func idsOf(t *testing.T, db *DB) map[int64]string {
	t.Helper()
	cur, err := db.Find(ctx, "m", FindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	out := map[int64]string{}
	for cur.Next() {
		rec := cur.Record()
		var ids *array.FixedSizeBinary
		var ns *array.Int64
		for i, f := range rec.Schema().Fields() {
			switch f.Name {
			case "_id":
				ids = rec.Column(i).(*array.FixedSizeBinary)
			case "n":
				ns = rec.Column(i).(*array.Int64)
			}
		}
		if ids == nil || ns == nil {
			t.Fatalf("no _id or n column: %s", rec.Schema())
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			if ids.IsNull(r) {
				t.Fatalf("measurement %d has no _id", ns.Value(r))
			}
			out[ns.Value(r)] = fmt.Sprintf("%x", ids.Value(r))
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMadeIDs: a measurement written without an _id has one made of its
// series and time, with no byte stored: the same on every read, after a
// checkpoint, a merge and a reopen, in a filter and a delete; a meta
// update, which moves measurements to another series, keeps theirs.
func TestMadeIDs(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, func(o *Options) { o.BucketMaxCount = 50 })
	defer func() { db.Close() }()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ms []model.Measurement
	for i := range 300 {
		ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(i) * 1500 * time.Millisecond).UnixNano(), Meta: sensor(fmt.Sprint("s", i%3)),
			Fields: []model.Field{{Name: "n", Value: model.Int(int64(i))}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	want := idsOf(t, db)
	if len(want) != 300 {
		t.Fatalf("%d ids", len(want))
	}
	seen := map[string]bool{}
	for n, id := range want {
		if seen[id] {
			t.Fatalf("id %s twice (measurement %d)", id, n)
		}
		seen[id] = true
	}
	if info, _ := db.Describe(ctx, "m"); info.Fields["_id"] != nil {
		t.Fatalf("made ids stored: fields %v", info.Fields)
	}
	same := func(when string) {
		t.Helper()
		got := idsOf(t, db)
		for n, id := range want {
			if got[n] != id {
				t.Fatalf("%s: measurement %d id %s, want %s", when, n, got[n], id)
			}
		}
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	same("after a checkpoint")
	if err := db.MergeBuckets(ctx); err != nil {
		t.Fatal(err)
	}
	same("after a merge")
	db.Close()
	db = openTest(t, dir, nil)
	same("after a reopen")

	// A filter and a delete by a made id.
	oid := func(n int64) string { return fmt.Sprintf(`{"_id": {"$oid": %q}}`, want[n]) }
	if n, err := db.Count(ctx, "m", mustFilter(t, oid(7)), CountOptions{}); err != nil || n != 1 {
		t.Fatalf("count by the made id of 7: %d, %v", n, err)
	}
	if n, err := db.Delete(ctx, "m", mustFilter(t, oid(7)), DeleteOptions{}); err != nil || n != 1 {
		t.Fatalf("delete by the made id of 7: %d, %v", n, err)
	}
	delete(want, 7)
	same("after the delete")

	// Measurements in memory: written, one deleted by its made id.
	ms = ms[:0]
	for i := 300; i < 330; i++ {
		ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(i) * 1500 * time.Millisecond).UnixNano(), Meta: sensor(fmt.Sprint("s", i%3)),
			Fields: []model.Field{{Name: "n", Value: model.Int(int64(i))}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	for n, id := range idsOf(t, db) {
		if n >= 300 {
			want[n] = id
		}
	}
	if n, err := db.Delete(ctx, "m", mustFilter(t, oid(301)), DeleteOptions{}); err != nil || n != 1 {
		t.Fatalf("delete by the made id of 301, in memory: %d, %v", n, err)
	}
	delete(want, 301)
	same("after the delete in memory")

	// A meta update moves s1's measurements to s9: their ids stay.
	if _, err := db.Update(ctx, "m", Update{Filter: mustFilter(t, `{"s.id": "s1"}`), Operators: mustUpdate(t, `{"$set": {"s.id": "s9"}}`), Multi: true}); err != nil {
		t.Fatal(err)
	}
	same("after a meta update")
	db.Close()
	db = openTest(t, dir, nil)
	same("after a meta update and a reopen")
}
