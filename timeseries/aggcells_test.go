package timeseries

import (
	"context"
	"math"
	"math/rand"
	"testing"
)

// TestAggCells checks the cells' index (dense per group while windows stay
// close, a map once they spread) against a plain map, on windows in order,
// in reverse, and scattered far apart.
func TestAggCells(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const width = 60
	for round := 0; round < 50; round++ {
		a := newAggCells(2, 16, width, newScanGuard(context.Background(), math.MaxInt64), MaxAggregateCells)
		ref := map[aggKey][]aggCell{}
		groups := 1 + rng.Intn(4)
		for g := 0; g < groups; g++ {
			a.groupID(string(rune('a' + g)))
		}
		origin := int64(rng.Intn(width))
		for i := 0; i < 3000; i++ {
			var w int64
			switch round % 3 {
			case 0:
				w = int64(i/3) + int64(rng.Intn(5))
			case 1:
				w = int64(3000-i) / 2
			default:
				w = rng.Int63n(1 << 40) // far apart: the map
			}
			if rng.Intn(20) == 0 {
				w = -w
			}
			k := aggKey{group: int32(rng.Intn(groups)), window: w*width + origin}
			if got, want := a.get(k), ref[k]; (got == nil) != (want == nil) || got != nil && &got[0] != &want[0] {
				t.Fatalf("round %d step %d: get %v: %p, want %p", round, i, k, got, want)
			}
			row, err := a.row(k)
			if err != nil {
				t.Fatal(err)
			}
			if want := ref[k]; want != nil && &want[0] != &row[0] {
				t.Fatalf("round %d step %d: row %v is another row", round, i, k)
			}
			ref[k] = row
			row[0].count++
		}
		if len(a.keys) != len(ref) {
			t.Fatalf("round %d: %d keys, want %d", round, len(a.keys), len(ref))
		}
		for i, k := range a.keys {
			if &a.rows[i][0] != &ref[k][0] {
				t.Fatalf("round %d: keys and rows out of step at %d", round, i)
			}
		}
	}
}
