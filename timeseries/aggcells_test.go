package timeseries

import (
	"context"
	"math"
	"math/rand"
	"testing"
)

// TestAggCells checks the cells' index (dense per group while windows stay
// close, a map once they spread) against a plain map, on windows in order,
// in reverse, and scattered far apart. Every other round reuses the
// cells of the round before (reset, as a rollup's pass does), with rows of
// two or three cells: a new key's cells are empty either way.
func TestAggCells(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const width = 60
	var a *aggCells
	for round := 0; round < 50; round++ {
		n := 2 + rng.Intn(2)
		guard := newScanGuard(context.Background(), math.MaxInt64)
		if round%2 == 0 {
			a = newAggCells(n, 16, width, guard, MaxAggregateCells)
		} else {
			a.reset(n, width, guard, MaxAggregateCells)
		}
		ref := map[aggKey][]aggCell{}
		counts := map[aggKey]int64{}
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
			if len(row) != n || row[0].count != counts[k] || row[n-1].count != 0 {
				t.Fatalf("round %d step %d: row %v holds %d cells, count %d, want %d cells, count %d", round, i, k, len(row), row[0].count, n, counts[k])
			}
			ref[k] = row
			row[0].count++
			counts[k]++
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
