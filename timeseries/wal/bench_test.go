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
//
// go test -run XXX -bench Append -benchtime 3s -count 2 ./timeseries/wal/
// on 2 cores (AMD EPYC, ext4), MB/s:
//
//	sync=true  writers=1   655-748   (19-22M points/s)
//	sync=true  writers=8   875-1251  (26-37M points/s)
//	sync=false writers=1  1047-1098
//	sync=false writers=8  1088-1208
//
// The generated lines repeat their tags more than TSBS does, so they
// compress better (disk-B/B 0.17); S2, not fdatasync, is the limit.
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
