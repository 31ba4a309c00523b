package lineproto

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hourglassdb/hourglass/internal/keep"
)

// BenchmarkFleet decodes a fleet of iot sensors written in turn, bodies of
// 5,000 lines, by two goroutines taking decoders from one keeper of four,
// as the server's line-protocol handler does. hit% is the share of lines
// whose series a cache answered.
func BenchmarkFleet(b *testing.B) {
	kinds := []string{"temperature", "humidity", "pressure", "vibration"}
	const perBody = 5000
	for _, sensors := range []int{10_000, 100_000, 1_000_000} {
		bodies := make([][]byte, sensors/perBody)
		for i := range bodies {
			var buf []byte
			for j := range perBody {
				s := i*perBody + j
				buf = fmt.Appendf(buf, "iot,sensor=s%06d,site=site-%d,kind=%s value=21.375,battery=87i 1704067200123456789\n",
					s, s%100, kinds[s%len(kinds)])
			}
			bodies[i] = buf
		}
		b.Run(fmt.Sprint(sensors), func(b *testing.B) {
			decoders := fleetKeeper()
			var next atomic.Int64
			decode := func(n int64) {
				var res Result
				for {
					i := next.Add(1) - 1
					if i >= n {
						return
					}
					d := decoders.Get()
					res.Reset()
					d.Decode(bodies[i%int64(len(bodies))], Nanosecond, testNow, &res)
					decoders.Put(d)
					if len(res.Measurements) != perBody {
						panic(res.First)
					}
				}
			}
			// Two rounds of the fleet fill the caches.
			decode(int64(2 * len(bodies)))
			next.Store(0)
			hits0 := fleetHits(decoders)
			b.ResetTimer()
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() { defer wg.Done(); decode(int64(b.N)) }()
			}
			wg.Wait()
			lines := float64(b.N) * perBody
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/lines, "ns/line")
			b.ReportMetric(100*float64(fleetHits(decoders)-hits0)/lines, "hit%")
		})
	}
}

func fleetKeeper() *keep.Keeper[*Decoder] {
	c := NewSeriesCache(DefaultSeriesCacheBytes)
	return keep.New(4, func() *Decoder { return NewDecoderSharing(c) })
}

// fleetHits counts the cache hits of the decoders the keeper holds.
func fleetHits(k *keep.Keeper[*Decoder]) int {
	var ds []*Decoder
	n := 0
	for range 4 {
		d := k.Get()
		ds = append(ds, d)
		n += d.seriesHits
	}
	for _, d := range ds {
		k.Put(d)
	}
	return n
}
