package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

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
	// The store holds the workload: as many rows, with the same times and
	// values (compared as per-host sums).
	var want storedSums
	g := w.NewGenerator()
	var row Row
	for g.Next(&row) {
		want.add(row.Host, row.Time, row.Ints)
	}
	got := readStored(t, dir, g.Hosts())
	if got != want {
		t.Fatalf("the store holds %+v, the workload is %+v", got, want)
	}
}

// storedSums sums up rows: their count, times and values, and a hash of
// each whole row (host, time and values), so that a row given to the wrong
// host, or values moved between rows, shows whatever the order of rows.
type storedSums struct {
	rows, times int64
	values      [NumFields]int64
	hashes      uint64
}

func (s *storedSums) add(host int, time int64, values [NumFields]int64) {
	s.rows++
	s.times += time
	h := mix(uint64(host)) ^ mix(uint64(time))
	for k, v := range values {
		s.values[k] += v
		h = mix(h ^ uint64(v))
	}
	s.hashes += h
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// readStored reopens the store in dir and sums up the rows of its
// collection, reading the host from each row's meta.
func readStored(t *testing.T, dir string, hosts []Host) storedSums {
	t.Helper()
	metas, err := hostMetas(hosts)
	if err != nil {
		t.Fatal(err)
	}
	hostOf := map[string]int{}
	for i, m := range metas {
		hostOf[string(m)] = i
	}
	db, err := timeseries.Open(timeseries.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cur, err := db.Find(context.Background(), Collection, timeseries.FindOptions{Fields: FieldNames[:]})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var s storedSums
	for cur.Next() {
		rec := cur.Record()
		sc := rec.Schema()
		col := func(name string) arrow.Array {
			idx := sc.FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("result columns %v: no %q", sc, name)
			}
			return rec.Column(idx[0])
		}
		times := col("time").(*array.Timestamp)
		meta := col("tags").(*array.String)
		var vals [NumFields]*array.Int64
		for k, name := range FieldNames {
			vals[k] = col(name).(*array.Int64)
		}
		for i := range int(rec.NumRows()) {
			host, ok := hostOf[meta.Value(i)]
			if !ok {
				t.Fatalf("row with meta %s, no host's", meta.Value(i))
			}
			var v [NumFields]int64
			for k := range vals {
				v[k] = vals[k].Value(i)
			}
			s.add(host, int64(times.Value(i)), v)
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return s
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
	if got := readStored(t, dir, w.NewGenerator().Hosts()); got.rows != int64(res.Rows) {
		t.Fatalf("the store holds %d rows, the result says %d", got.rows, res.Rows)
	}
}
