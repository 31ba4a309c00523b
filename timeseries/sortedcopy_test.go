package timeseries

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hourglassdb/hourglass/model"
)

// Reads share the sorted copy of an open bucket whose rows came out of
// order, until a write, a seal or a drop lets it go; the copies stay
// within MemoryBudget/8, and every read returns what the bucket holds.
func TestSortedCopiesShared(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.MemoryBudget = 1 << 20 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s", Granularity: model.GranularityHours})
	base := int64(1_700_000_000) * 1e9
	insert1 := func(series, from, n int) {
		var ms []model.Measurement
		for k := from; k < from+n; k++ {
			ms = append(ms, model.Measurement{Time: base + int64(k)*1e9, Meta: fmt.Sprintf("s%d", series), Fields: []model.Field{{Name: "v", Value: model.Int(int64(k))}}})
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// With late, two batches, the second older: its rows go after the
	// first's in the open bucket (a batch's own rows are sorted first).
	insert := func(series, from, n int, late bool) {
		if late {
			insert1(series, from+n/2, n-n/2)
			n /= 2
		}
		insert1(series, from, n)
	}
	check := func(series, want int) {
		t.Helper()
		rows := findRows(t, db, "m", FindOptions{Filter: mustFilter(t, fmt.Sprintf(`{"s": "s%d"}`, series)), Order: SortAscending})
		if len(rows) != want || !slices.IsSortedFunc(rows, func(a, b row) int { return int(a.t - b.t) }) {
			t.Fatalf("series %d: %d rows (want %d), sorted %v", series, len(rows), want, slices.IsSortedFunc(rows, func(a, b row) int { return int(a.t - b.t) }))
		}
	}
	insert(0, 0, 100, true) // out of order in the open bucket
	check(0, 100)
	copied := db.sortedMem.Load()
	if copied <= 0 {
		t.Fatalf("no sorted copy kept (%d bytes)", copied)
	}
	check(0, 100)
	if db.sortedMem.Load() != copied {
		t.Fatalf("a second read made another copy: %d bytes, then %d", copied, db.sortedMem.Load())
	}
	insert(0, 100, 10, false) // a write drops the copy
	if n := db.sortedMem.Load(); n != 0 {
		t.Fatalf("%d bytes of sorted copies after a write", n)
	}
	check(0, 110)
	if _, err := db.Delete(ctx, "m", mustFilter(t, `{"s": "s0", "t": {"$lt": {"$date": "2023-11-14T22:14:00Z"}}}`), DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := db.sortedMem.Load(); n != 0 {
		t.Fatalf("%d bytes of sorted copies after a delete", n)
	}
	// Many out-of-order buckets: the copies stay under the bound.
	for s := 1; s <= 200; s++ {
		insert(s, 0, 200, true)
	}
	for s := 1; s <= 200; s++ {
		check(s, 200)
	}
	if n, max := db.sortedMem.Load(), db.opts.MemoryBudget/8; n <= 0 || n > max {
		t.Fatalf("%d bytes of sorted copies, want some and at most %d", n, max)
	}
	if err := db.DropCollection(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if n := db.sortedMem.Load(); n != 0 {
		t.Fatalf("%d bytes of sorted copies after the drop", n)
	}
}
