package document

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// TestAppendDate checks the written-out date against time.RFC3339Nano on
// boundary and random instants, before 1970 and at both ends of int64.
func TestAppendDate(t *testing.T) {
	cases := []int64{0, 1, -1, 999, 1000, 1e9 - 1, 1e9, -1e9, 1451606400e9, 1451606400e9 + 5e8, 2147483647e9, 2147483648e9,
		math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 100000; i++ {
		cases = append(cases, rng.Int63()-rng.Int63(), rng.Int63n(4e18), rng.Int63n(4e18)/1e6*1e6)
	}
	for _, ns := range cases {
		want := time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
		if got := string(AppendDate(nil, ns)); got != want {
			t.Fatalf("%d: %s, want %s", ns, got, want)
		}
	}
}
