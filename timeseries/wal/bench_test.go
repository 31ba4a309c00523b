package wal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// BenchmarkAppend appends 1 MB records of TSBS cpu-only line protocol from
// 1 and 8 goroutines, with and without fdatasync. MB/s is record bytes
// before compression; points/s counts 10 fields per line; disk-B/B is the
// log's bytes per record byte.
func BenchmarkAppend(b *testing.B) {
	const recSize = 1 << 20
	rng := rand.New(rand.NewPCG(1, 1))
	recs := make([][]byte, 8)
	for i := range recs {
		recs[i] = lineProtocol(rng, recSize)
	}
	points := float64(10 * bytes.Count(recs[0], []byte{'\n'}))
	for _, sync := range []bool{true, false} {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("sync=%v/writers=%d", sync, writers), func(b *testing.B) {
				benchAppend(b, recs, writers, !sync, points)
			})
		}
	}
}

func benchAppend(b *testing.B, recs [][]byte, writers int, noSync bool, points float64) {
	l := openT(b, Options{Dir: b.TempDir(), NoSync: noSync})
	defer l.Close()
	start := l.Size()
	b.SetBytes(int64(len(recs[0])))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		n := b.N / writers
		if w < b.N%writers {
			n++
		}
		wg.Go(func() {
			for i := range n {
				if _, err := l.Append(recs[(w+i)%len(recs)]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(points*float64(b.N)/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(l.Size()-start)/float64(b.N*len(recs[0])), "disk-B/B")
}
