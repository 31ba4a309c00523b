package timeseries

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/model"
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
		made[i] = c.newSeries(uint64(i), model.StringView(buf))
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

// TestSeriesIndex checks that every series is found by its key, keys that
// share the 32 hash bits a slot keeps included, and that an absent key,
// one sharing a present key's bits too, finds nothing.
func TestSeriesIndex(t *testing.T) {
	c := &collection{}
	var x seriesIndex
	const n = 300_000 // about ten pairs of keys share their slot's hash bits
	tags := make(map[uint32]int, n)
	shared := 0
	tagOf := x.hash
	for i := range n {
		s := c.newSeries(uint64(i), fmt.Sprintf(`{"sensor":"s-%d"}`, i))
		s.ord = uint32(i)
		x.add(s)
	}
	// Every table within its load, and none much larger than its share:
	// growing one moves no more than a shard's slots.
	for sh, tab := range x.shards {
		if 4*x.counts[sh] > 3*uint32(len(tab)) || len(tab) > 4*n/indexShards {
			t.Fatalf("shard %d: %d series in %d slots", sh, x.counts[sh], len(tab))
		}
	}
	for i, s := range x.byOrd {
		if got := x.get(s.metaKey); got != s {
			t.Fatalf("series %d (%s): found %v", i, s.metaKey, got)
		}
		if _, ok := tags[tagOf(s.metaKey)]; ok {
			shared++
		}
		tags[tagOf(s.metaKey)] = i
	}
	if shared == 0 {
		t.Fatalf("no two of %d keys share their hash bits: nothing checked the keys are compared", n)
	}
	for i, found := 0, 0; found < 3; i++ {
		k := fmt.Sprintf(`{"sensor":"absent-%d"}`, i)
		if _, ok := tags[tagOf(k)]; ok {
			found++
		} else if i%64 != 0 {
			continue
		}
		if s := x.get(k); s != nil {
			t.Fatalf("absent key %s found %s", k, s.metaKey)
		}
	}
	if (&seriesIndex{}).get("x") != nil {
		t.Fatal("an empty index found a series")
	}
}
