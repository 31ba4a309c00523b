package timeseries

import (
	"testing"
	"time"
)

// BenchmarkReadNumbers reads, as Prometheus' engine asks of the door, the
// field value of the 100 sensors of one site over the whole load (about
// 108,000 numbers at 10,000 sensors and 3 hours) and of one sensor, from
// the iot fleet of BenchmarkFleetQueries, stored:
//
//	go test ./timeseries -run '^$' -bench ReadNumbers -benchtime 200x
func BenchmarkReadNumbers(b *testing.B) {
	clock := newTestClock(t0)
	db := openTest(b, b.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	iotFleet(b, db, 10000, 3*time.Hour)
	for range 2 { // the closed hours, then the open one sealed as idle
		if err := db.Checkpoint(); err != nil {
			b.Fatal(err)
		}
		clock.Advance(time.Hour)
	}
	for _, q := range []struct{ name, filter string }{
		{"site", `{"tags.site": "site-7"}`},
		{"sensor", `{"tags.sensor": "s000042"}`},
	} {
		b.Run(q.name, func(b *testing.B) {
			f := mustFilter(b, q.filter)
			read := func() int {
				n := 0
				if err := db.ReadNumbers(ctx, "iot", f, []string{"value"}, func(_, _ string, ts []int64, _ []float64) error {
					n += len(ts)
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				return n
			}
			n := read()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				read()
			}
			b.ReportMetric(float64(n), "numbers")
			b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds(), "numbers/s")
		})
	}
}
