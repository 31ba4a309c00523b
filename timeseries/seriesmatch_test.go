package timeseries

import (
	"testing"
)

// TestSeriesMatchCache checks finds through the cache of the series meta
// filters select: distinct filters, and new series after an entry was made.
func TestSeriesMatchCache(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	put := func(meta string, n int) {
		t.Helper()
		var ms []Measurement
		for i := 0; i < n; i++ {
			ms = append(ms, Measurement{Time: int64(i) * 1e9, Meta: meta, Fields: []Field{{"v", Int(int64(i))}}})
		}
		if _, err := db.Insert(ctx, "m", ms, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(filter string) int {
		t.Helper()
		return len(findRows(t, db, "m", FindOptions{Filter: mustFilter(t, filter)}))
	}
	put("a", 3)
	put("b", 5)
	ac := `{"s": {"$in": ["a", "c"]}}`
	for range 2 { // the second time from the cache
		if n := count(ac); n != 3 {
			t.Fatalf("a or c: %d rows, want 3", n)
		}
		if n := count(`{"s": "b"}`); n != 5 {
			t.Fatalf("b: %d rows, want 5", n)
		}
	}
	db.mu.RLock()
	entries := len(db.collections["m"].matches.entries)
	db.mu.RUnlock()
	if entries != 2 {
		t.Fatalf("%d cache entries, want 2", entries)
	}
	put("c", 7) // a new series: the entries no longer hold
	if n := count(ac); n != 10 {
		t.Fatalf("a or c after c arrived: %d rows, want 10", n)
	}
	put("a", 2) // more of an existing series: the entry holds
	if n := count(ac); n != 12 {
		t.Fatalf("a or c: %d rows, want 12", n)
	}
}
