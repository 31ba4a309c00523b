package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/timeseries"
)

// BenchmarkDocuments inserts session documents durably into a plain
// collection with one and with three secondary indexes, then reads single
// documents by _id and by an indexed field:
//
//	go test ./bench -run '^$' -bench Documents -benchtime 1x -timeout 30m
//
// HOURGLASS_BENCH_DOCS sets the documents (200,000).
func BenchmarkDocuments(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(map[int]string{1: "indexes=1", 3: "indexes=3"}[n], func(b *testing.B) {
			var res DocResult
			for i := 0; i < b.N; i++ {
				var err error
				res, err = Documents(context.Background(), DocConfig{Dir: filepath.Join(b.TempDir(), "data"),
					Docs: envInt("HOURGLASS_BENCH_DOCS", 200000), Indexes: n, Progress: func(s string) { b.Log(s) }})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(res.InsertsPerSecond(), "inserts/s")
			b.ReportMetric(float64(res.IDReads)/res.IDReadElapsed.Seconds(), "id-reads/s")
			b.ReportMetric(float64(res.UserReads)/res.UserElapsed.Seconds(), "user-reads/s")
			b.ReportMetric(float64(res.StorageBytes)/float64(res.Inserted), "B/doc")
		})
	}
}

// BenchmarkSessionTTL expires 1M session documents with one TTL pass while
// two writers insert live sessions durably, and reports the pass time and
// the writers' p99 latency with and without it:
//
//	go test ./bench -run '^$' -bench SessionTTL -benchtime 1x -timeout 30m
//
// HOURGLASS_BENCH_SESSIONS sets the sessions (1,000,000).
func BenchmarkSessionTTL(b *testing.B) {
	var res SessionTTLResult
	for i := 0; i < b.N; i++ {
		var err error
		res, err = SessionTTL(context.Background(), SessionTTLConfig{Dir: filepath.Join(b.TempDir(), "data"),
			Sessions: envInt("HOURGLASS_BENCH_SESSIONS", 1000000), Progress: func(s string) { b.Log(s) }})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(res.PassElapsed.Seconds(), "pass-s")
	b.ReportMetric(float64(res.Pass.DeletedDocuments)/res.PassElapsed.Seconds(), "deleted/s")
	b.ReportMetric(float64(res.BaselineP99.Microseconds())/1000, "baseline-p99-ms")
	b.ReportMetric(float64(res.SweepP99.Microseconds())/1000, "sweep-p99-ms")
	b.ReportMetric(float64(res.SweepP99)/float64(res.BaselineP99), "p99-ratio")
	b.ReportMetric(float64(res.DiskBefore)/(1<<20), "disk-before-MiB")
	b.ReportMetric(float64(res.DiskAfter)/(1<<20), "disk-after-MiB")
}

// Small runs of both: the counts add up and the space comes back.
func TestDocumentsSmall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	res, err := Documents(context.Background(), DocConfig{Dir: dir, Docs: 3000, Reads: 200, Indexes: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Inserted != 3000 || res.IDReads != 200 || res.StorageBytes <= 0 {
		t.Fatalf("%+v", res)
	}
	// The store holds the 3000 sessions, each once.
	ips := map[string]int{}
	for _, d := range storedSessions(t, dir) {
		ips[d["ip"].(string)]++
	}
	for i := range 3000 {
		ip := sessionDoc(i, 1, 1, time.Time{})["ip"].(string)
		if ips[ip] != 1 {
			t.Fatalf("session %d (%s) stored %d times", i, ip, ips[ip])
		}
		delete(ips, ip)
	}
	if len(ips) != 0 {
		t.Fatalf("%d sessions stored that were never inserted", len(ips))
	}

	dir = filepath.Join(t.TempDir(), "data")
	sres, err := SessionTTL(context.Background(), SessionTTLConfig{Dir: dir, Sessions: 20000,
		WriteBatch: 10, Baseline: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if sres.Pass.DeletedDocuments != 20000 || sres.BaselineWrites == 0 || sres.DiskAfter >= sres.DiskBefore {
		t.Fatalf("%+v", sres)
	}
	// What is left in the store is the live sessions, written three hours
	// after the loaded ones (modified in the hour before 2024-05-01): no
	// loaded session survived the pass.
	left := storedSessions(t, dir)
	if len(left) == 0 || int64(len(left)) != sres.LiveAfter {
		t.Fatalf("the store holds %d sessions, the result says %d live", len(left), sres.LiveAfter)
	}
	for _, d := range left {
		if at := d["lastModifiedDate"].(time.Time); at.Before(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("a loaded session (last modified %v) is still stored", at)
		}
	}
}

// storedSessions reopens the store in dir and returns every document of
// its sessions collection, expired or not.
func storedSessions(t *testing.T, dir string) []document.Doc {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: dir, Now: func() time.Time { return time.Unix(0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var docs []document.Doc
	if _, err := timeseries.EachDoc(db.Find(context.Background(), "sessions", timeseries.FindOptions{}))(func(d document.Doc) error {
		docs = append(docs, d)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return docs
}
