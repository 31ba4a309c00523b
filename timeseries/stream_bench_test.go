package timeseries

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// BenchmarkReadsManySeries times the reads that take their series a
// chunk at a time on a fleet of 100,000 series (1,000,000 with
// HOURGLASS_FLEET_1M=1) of two points each, loaded as loadFleet loads
// them, with the buckets open in memory ("open") or all written out as
// idle ("stored"), under the default query memory (100 MiB, which the
// series alone pass at a million when held at once): a find by series
// with a limit of one, counts (of everything, from the catalog; of a
// site; of a time range, by scanning), distinct values of meta paths. It
// reports the query memory the read held at most (query-B).
//
//	HOURGLASS_FLEET_1M=1 go test ./timeseries -run '^$' -bench ReadsManySeries -benchtime 5x
func BenchmarkReadsManySeries(b *testing.B) {
	n := 100_000
	if os.Getenv("HOURGLASS_FLEET_1M") != "" {
		n = 1_000_000
	}
	for _, stored := range []bool{false, true} {
		name := "open"
		if stored {
			name = "stored"
		}
		b.Run(fmt.Sprintf("series=%d/%s", n, name), func(b *testing.B) {
			benchmarkReadsManySeries(b, n, stored)
		})
	}
}

func benchmarkReadsManySeries(b *testing.B, n int, stored bool) {
	clock := newTestClock(t0)
	db := openTest(b, b.TempDir(), func(o *Options) {
		o.Now = clock.Now
		o.MemoryBudget = 64 << 30
		o.CheckpointLogBytes = 64 << 30
	})
	defer db.Close()
	start := time.Now()
	loadFleet(b, db, n, 2, "")
	if stored {
		idleFleet(b, db, func() { clock.Advance(time.Hour) }, n, 0)
	}
	b.Logf("loaded %d series in %v", n, time.Since(start))
	f := func(s string) *partialfilter.Filter { return mustFilter(b, s) }
	site7 := f(`{"sensor.site": "site-7"}`)
	reads := []struct {
		name string
		run  func() (int64, error)
		want int64
	}{
		{"find-limit-1", func() (int64, error) {
			cur, err := db.Find(ctx, "iot", FindOptions{Limit: 1})
			if err != nil {
				return 0, err
			}
			defer cur.Close()
			rows := int64(0)
			for cur.Next() {
				rows += cur.Record().NumRows()
			}
			return rows, cur.Err()
		}, 1},
		{"count-all", func() (int64, error) { return db.Count(ctx, "iot", nil, CountOptions{}) }, int64(2 * n)},
		{"count-site", func() (int64, error) { return db.Count(ctx, "iot", site7, CountOptions{}) }, int64(2 * n / 100)},
		{"count-range", func() (int64, error) {
			return db.Count(ctx, "iot", f(`{"time": {"$gte": {"$date": "2024-01-01T00:00:05Z"}}}`), CountOptions{})
		}, int64(n)},
		{"distinct-site", func() (int64, error) {
			vs, err := db.DistinctMeta(ctx, "iot", "sensor.site", nil)
			return int64(len(vs)), err
		}, 100},
		{"distinct-kind-of-site", func() (int64, error) {
			vs, err := db.DistinctMeta(ctx, "iot", "sensor.kind", site7)
			return int64(len(vs)), err
		}, 1},
	}
	for _, r := range reads {
		b.Run(r.name, func(b *testing.B) {
			readStats.maxHeld.Store(0)
			for i := 0; i < b.N; i++ {
				got, err := r.run()
				if err != nil {
					b.Fatal(err)
				}
				if got != r.want {
					b.Fatalf("%d, want %d", got, r.want)
				}
			}
			b.ReportMetric(float64(readStats.maxHeld.Load()), "query-B")
		})
	}
}
