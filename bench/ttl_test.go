package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkTTLSweep expires 10M measurements across 10k series with one TTL
// pass while two writers keep ingesting, durably, and reports the pass
// time, the writers' p99 latency with and without the sweep, and the disk
// space before and after:
//
//	go test ./bench -run '^$' -bench TTLSweep -benchtime 1x -timeout 30m
//
// HOURGLASS_BENCH_SERIES and HOURGLASS_BENCH_PER_SERIES shrink it.
func BenchmarkTTLSweep(b *testing.B) {
	cfg := TTLConfig{Series: envInt("HOURGLASS_BENCH_SERIES", 10000), PerSeries: envInt("HOURGLASS_BENCH_PER_SERIES", 1000),
		Progress: func(s string) { b.Log(s) }}
	var res TTLResult
	for i := 0; i < b.N; i++ {
		cfg.Dir = filepath.Join(b.TempDir(), "data")
		var err error
		if res, err = TTLSweep(context.Background(), cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(res.PassElapsed.Seconds(), "pass-s")
	b.ReportMetric(float64(res.Pass.DeletedDocuments)/res.PassElapsed.Seconds(), "deleted/s")
	b.ReportMetric(float64(res.BaselineP99.Microseconds())/1000, "baseline-p99-ms")
	b.ReportMetric(float64(res.SweepP99.Microseconds())/1000, "sweep-p99-ms")
	b.ReportMetric(float64(res.SweepP99)/float64(res.BaselineP99), "p99-ratio")
	b.ReportMetric(float64(res.WindowP99.Microseconds())/1000, "window-p99-ms")
	b.ReportMetric(float64(res.WindowP99)/float64(res.BaselineP99), "window-p99-ratio")
	b.ReportMetric(float64(res.DiskBefore)/(1<<20), "disk-before-MiB")
	b.ReportMetric(float64(res.DiskAfter)/(1<<20), "disk-after-MiB")
}

// TestTTLSweepSmall runs the expiry benchmark small: everything loaded is
// deleted by one pass, writers keep going, and the space comes back.
func TestTTLSweepSmall(t *testing.T) {
	res, err := TTLSweep(context.Background(), TTLConfig{Dir: filepath.Join(t.TempDir(), "data"),
		Series: 200, PerSeries: 500, WriteBatch: 100, Baseline: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loaded != 100000 || res.Pass.DeletedDocuments != 100000 || res.Pass.DeletedBuckets != 200 {
		t.Fatalf("%+v", res)
	}
	if res.BaselineWrites == 0 { // a pass this small may end before any write does
		t.Fatalf("no writes measured: %+v", res)
	}
	t.Logf("disk %d bytes before the sweep, %d after", res.DiskBefore, res.DiskAfter)
	if res.DiskAfter >= res.DiskBefore {
		t.Fatalf("disk %d bytes after the sweep, %d before", res.DiskAfter, res.DiskBefore)
	}
}
