package timeseries

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestSeriesSlab checks that series and meta keys handed out of chunks stay
// what they were made as while more are handed out, and that a fleet's
// series cost a few allocations a chunk rather than two a series.
func TestSeriesSlab(t *testing.T) {
	c := &collection{}
	keys := []string{"", "a", strings.Repeat("k", maxChunkedKey), strings.Repeat("x", maxChunkedKey+1)}
	for i := range 5000 {
		keys = append(keys, fmt.Sprintf(`{"sensor":"s-%06d","site":"site-%d"}`, i, i%97))
	}
	made := make([]*series, len(keys))
	for i, k := range keys {
		buf := []byte(k)
		made[i] = c.newSeries(uint64(i), bytesView(buf))
		clear(buf) // the series holds a copy
		if cap(c.slab.series) > maxSlabSeries || cap(c.slab.keys) > maxKeyChunk {
			t.Fatalf("chunks of %d series, %d key bytes", cap(c.slab.series), cap(c.slab.keys))
		}
	}
	for i, s := range made {
		if s.id != uint64(i) || s.metaKey != keys[i] || s.coll != c || s.storedMax != math.MinInt64 || s.lastT != math.MinInt64 {
			t.Fatalf("series %d: id %d, key %q, stored max %d, last %d", i, s.id, s.metaKey, s.storedMax, s.lastT)
		}
		for _, o := range made[:i] {
			if o == s {
				t.Fatalf("series %d handed out twice", i)
			}
		}
		if i > 200 {
			break // the pointers' distinctness is checked on the first chunks
		}
	}

	// Allocations: a chunk of series and a chunk of keys now and then.
	const n = 4096
	fleet := make([]string, n)
	for i := range fleet {
		fleet[i] = fmt.Sprintf(`{"sensor":"s-%06d"}`, i)
	}
	allocs := testing.AllocsPerRun(3, func() {
		c := &collection{}
		for i, k := range fleet {
			c.newSeries(uint64(i), k)
		}
	})
	if allocs > n/64 {
		t.Fatalf("%.0f allocations for %d series", allocs, n)
	}
}
