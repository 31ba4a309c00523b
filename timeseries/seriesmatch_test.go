package timeseries

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/ttl"
)

// TestSeriesMatchCache checks finds through the cache of the series meta
// filters select: distinct filters, and new series after an entry was made.
func TestSeriesMatchCache(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	put := func(meta string, n int) {
		t.Helper()
		var ms []model.Measurement
		for i := 0; i < n; i++ {
			ms = append(ms, model.Measurement{Time: int64(i) * 1e9, Meta: meta, Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
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
	entries := len(db.coll.byName["m"].matches.entries)
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

// TestMatchingSeriesProperty compares the series meta filters select
// (through the key prefilter and the cache brought up to date as series
// arrive) with the filter evaluated on every series' decoded meta value,
// on random fleets and filters: equalities, $in, $ne, numbers, arrays,
// nested values, strings that need escaping.
func TestMatchingSeriesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	words := []string{"s1", "s2", "site-1", `q"uote`, "é", "<&>"}
	word := func() string { return words[rng.IntN(len(words))] }
	metaOf := func() any {
		m := map[string]any{"sensor": word(), "site": word()}
		switch rng.IntN(4) {
		case 0:
			m["kind"] = []any{word(), int64(rng.IntN(3))}
		case 1:
			m["kind"] = map[string]any{"sub": word()}
		case 2:
			m["kind"] = int64(rng.IntN(3))
		}
		return m
	}
	filters := []func() string{
		func() string { return fmt.Sprintf(`{"m.sensor": %q}`, word()) },
		func() string { return fmt.Sprintf(`{"m.site": {"$in": [%q, %q]}}`, word(), word()) },
		func() string { return fmt.Sprintf(`{"m.kind": %q, "m.sensor": {"$ne": %q}}`, word(), word()) },
		func() string { return fmt.Sprintf(`{"m.kind.sub": %q}`, word()) },
		func() string { return fmt.Sprintf(`{"m.kind": %d}`, rng.IntN(3)) },
		func() string { return fmt.Sprintf(`{"m.site": {"$in": [%q, 1]}, "m.sensor": %q}`, word(), word()) },
		func() string { return fmt.Sprintf(`{"m": {"sensor": %q, "site": %q}}`, word(), word()) },
	}
	for round := 0; round < 20; round++ {
		db := openTest(t, t.TempDir(), nil)
		mustCreate(t, db, "p", model.TimeSeriesOptions{TimeField: "ts", MetaField: "m"})
		c := db.coll.byName["p"]
		ts := c.opts.TimeSeries
		for step := 0; step < 6; step++ {
			var ms []model.Measurement
			for i := rng.IntN(40); i > 0; i-- {
				ms = append(ms, model.Measurement{Time: int64(i) * 1e9, Meta: metaOf(), Fields: []model.Field{{Name: "v", Value: model.Int(1)}}})
			}
			if len(ms) > 0 {
				if _, err := db.Insert(ctx, "p", Batch{Measurements: ms}, InsertOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for q := 0; q < 10; q++ {
				src := filters[rng.IntN(len(filters))]()
				f := mustFilter(t, src)
				plan := planFilter(f, ts)
				db.mu.RLock()
				got := map[uint64]bool{}
				for _, s := range c.matchingSeries(&plan, ts) {
					got[s.id] = true
				}
				want := map[uint64]bool{}
				for _, s := range c.byID {
					if f.Match(map[string]any{"m": seriesMeta(s)}) {
						want[s.id] = true
					}
				}
				db.mu.RUnlock()
				if !maps.Equal(got, want) {
					t.Fatalf("round %d: %s selects %d series, a full scan %d", round, src, len(got), len(want))
				}
				// The same filter as a partial TTL rule.
				db.mu.Lock()
				saved, savedQ := c.rules, c.ruleQuoted
				c.rules = ttl.Rules{{Index: "r", ExpireAfterSeconds: 60, Filter: f}}
				rp := filterPlan{meta: f}
				c.ruleQuoted = [][][]string{rp.requiredQuoted()}
				for _, s := range c.byID {
					if c.ruleMatches(0, s, &seriesMetaDoc{}) != want[s.id] {
						t.Fatalf("round %d: rule %s on %s: %v", round, src, s.metaKey, !want[s.id])
					}
				}
				c.rules, c.ruleQuoted = saved, savedQ
				db.mu.Unlock()
			}
		}
		db.Close()
	}
}
