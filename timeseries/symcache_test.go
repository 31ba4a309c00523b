package timeseries

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

func TestSymbolCacheLRU(t *testing.T) {
	c := newSymbolCache(4 * (100 + 200 + 96))
	block := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 100) }
	syms := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, 200) }
	for i := 0; i < 4; i++ {
		c.Put(block(i), syms(i))
	}
	if got := c.Get(block(0)); !bytes.Equal(got, syms(0)) { // 0 is now the most recent
		t.Fatalf("block 0: %v", got)
	}
	c.Put(block(4), syms(4)) // evicts 1, the least recently used
	if c.Get(block(1)) != nil {
		t.Fatal("block 1 not evicted")
	}
	for _, i := range []int{0, 2, 3, 4} {
		if got := c.Get(block(i)); !bytes.Equal(got, syms(i)) {
			t.Fatalf("block %d: %v", i, got)
		}
	}
	// Found by the exact bytes only.
	b := block(2)
	b[99] = 9
	if c.Get(b) != nil || c.Get(block(2)[:99]) != nil {
		t.Fatal("a different block found")
	}
	// Put keeps copies.
	s := syms(5)
	c.Put(block(5), s)
	s[0] = 0
	if got := c.Get(block(5)); got[0] != 6 {
		t.Fatal("the cache shares the caller's slice")
	}
	entries, size, hits, misses := c.stats()
	if entries != 4 || size > c.max || hits != 6 || misses != 3 {
		t.Fatalf("entries %d size %d hits %d misses %d", entries, size, hits, misses)
	}
	// Too large for the budget: not kept.
	c.Put(bytes.Repeat([]byte{7}, 1000), syms(7))
	if c.Get(bytes.Repeat([]byte{7}, 1000)) != nil {
		t.Fatal("an entry over a quarter of the budget was kept")
	}
}

// TestSymbolCacheReads checks that reads through the cache, cold and warm,
// return what reads without it return.
func TestSymbolCacheReads(t *testing.T) {
	var results []string
	for _, cacheBytes := range []int64{-1, 16 << 20} {
		db := openTest(t, t.TempDir(), func(o *Options) { o.SymbolCacheBytes = cacheBytes })
		mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
		var ms []model.Measurement
		for i := 0; i < 3000; i++ {
			m := model.Measurement{Time: int64(i) * 10e9, Meta: fmt.Sprint(i % 2)}
			for f := 0; f < 6; f++ {
				m.Fields = append(m.Fields, model.Field{Name: fmt.Sprint("f", f), Value: model.Int(int64((i*7+f*13)%11 - 5))})
			}
			ms = append(ms, m)
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		for run := 0; run < 2; run++ {
			rec, err := db.Aggregate(ctx, "m", AggregateOptions{Window: 5 * time.Minute, Fields: []string{"f3"}})
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, fmt.Sprint(rec))
			rec.Release()
			results = append(results, fmt.Sprint(findRows(t, db, "m", FindOptions{Fields: []string{"f1", "f5"}})))
		}
		if db.symbols != nil {
			if n, _, hits, _ := db.symbols.stats(); n == 0 || hits == 0 {
				t.Fatalf("cache: %d entries, %d hits", n, hits)
			}
		}
		db.Close()
	}
	for i := range results {
		if results[i] != results[i%2] {
			t.Fatalf("result %d differs from the uncached read", i)
		}
	}
}
