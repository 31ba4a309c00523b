package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/timeseries"
)

// BenchmarkIngest loads the peers workload (one day of 100 hosts, 8.64M
// points) through timeseries.DB.Insert, durably, and reports points/s and
// the settled bytes/point on disk. Run it once per variant:
//
//	go test ./bench -run '^$' -bench Ingest -benchtime 1x
//
// HOURGLASS_BENCH_SCALE and HOURGLASS_BENCH_HOURS shrink the workload.
func BenchmarkIngest(b *testing.B) {
	for _, v := range []ValueKind{ValuesInt, ValuesFloat} {
		b.Run(v.String(), func(b *testing.B) {
			w := Workload{Values: v, Scale: envInt("HOURGLASS_BENCH_SCALE", 100)}
			w.EnsureDefaults()
			w.End = w.Start.Add(time.Duration(envInt("HOURGLASS_BENCH_HOURS", 24)) * time.Hour)
			var last IngestResult
			for i := 0; i < b.N; i++ {
				dir := filepath.Join(b.TempDir(), "data")
				res, err := Ingest(context.Background(), IngestConfig{Workload: w, Dir: dir})
				if err != nil {
					b.Fatal(err)
				}
				last = res
				os.RemoveAll(dir)
			}
			b.ReportMetric(last.PointsPerSecond(), "points/s")
			b.ReportMetric(last.BytesPerPoint(), "bytes/point")
			b.ReportMetric(last.FlushElapsed.Seconds(), "flush-s")
		})
	}
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		var n int
		for _, c := range v {
			if c < '0' || c > '9' {
				return def
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	return def
}

// TestIngestSmall runs a small ingest end to end and checks what the store
// holds afterwards.
func TestIngestSmall(t *testing.T) {
	w := Workload{Scale: 3}
	w.EnsureDefaults()
	w.End = w.Start.Add(2 * time.Hour)
	dir := filepath.Join(t.TempDir(), "data")
	res, err := Ingest(context.Background(), IngestConfig{Workload: w, Dir: dir, BatchRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 3*720 || res.Points != res.Rows*NumFields || res.DiskBytes <= 0 {
		t.Fatalf("result %+v", res)
	}
}

// TestIngestDuration stops an in-process ingest by time and checks that
// the store holds exactly the rows the result counts.
func TestIngestDuration(t *testing.T) {
	w := Workload{Scale: 10}
	w.EnsureDefaults()
	w.End = w.Start.Add(6 * time.Hour) // 21,600 rows in 2,160 fsynced batches
	dir := filepath.Join(t.TempDir(), "data")
	var last Progress
	res, err := Ingest(context.Background(), IngestConfig{Workload: w, Dir: dir, BatchRows: 10, Duration: 50 * time.Millisecond,
		Progress: func(p Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.Rows == 0 || res.Rows >= w.Rows() || res.Points != res.Rows*NumFields || res.DiskBytes <= 0 {
		t.Fatalf("result %+v of %d rows", res, w.Rows())
	}
	if last.Rows != int64(res.Rows) || last.Batches == 0 || last.Latency.Max <= 0 {
		t.Fatalf("last progress %+v", last)
	}
	db, err := timeseries.Open(timeseries.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cur, err := db.Find(context.Background(), Collection, timeseries.FindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var n int64
	for cur.Next() {
		n += cur.Record().NumRows()
	}
	if cur.Err() != nil || n != int64(res.Rows) {
		t.Fatalf("the store holds %d rows, the result says %d (%v)", n, res.Rows, cur.Err())
	}
}
