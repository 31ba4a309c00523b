package backup_test

import (
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/backup"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/timeseries"
)

// BenchmarkBackup measures, on a durable store of ~256 MB (documents of
// random hex, which Snappy does not shrink, and a time series): a full backup into
// a directory, an incremental one after 1% more data, a restore (MB/s of
// the backup's size); and the p50/p99 of two writers' 1000-measurement
// inserts without a backup and while backups run back to back (full ones,
// incremental ones, full ones paced at 50 MB/s of reads), in alternating
// 5 s phases, twice each.
//
//	go test -run XXX -bench Backup -benchtime 1x ./backup/
func BenchmarkBackup(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := timeseries.Open(timeseries.Options{Dir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.CreateCollection(ctx, "m", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "s"}}); err != nil {
		b.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "p", timeseries.CollectionOptions{}); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	docs := func(from, n int) {
		for k := from; k < from+n; k += 256 {
			ds := make([]document.Doc, 256)
			for i := range ds {
				buf := make([]byte, 2048)
				for j := 0; j < len(buf); j += 8 {
					v := rng.Uint64()
					for x := range 8 {
						buf[j+x] = byte(v >> (8 * x))
					}
				}
				ds[i] = document.Doc{"_id": int64(k + i), "b": hex.EncodeToString(buf)}
			}
			if res, err := db.Insert(ctx, "p", timeseries.Batch{Documents: ds}, timeseries.InsertOptions{}); err != nil || len(res.Errors) > 0 {
				b.Fatal(err, res.Errors)
			}
		}
	}
	docs(0, 64<<10) // 256 MiB
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	o := backup.Options{Logger: quiet}
	st := openTarget(b, b.TempDir())
	full, err := backup.Create(ctx, db, st, o)
	if err != nil {
		b.Fatal(err)
	}
	docs(64<<10, 640) // 1%
	if err := db.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	incr, err := backup.Create(ctx, db, st, o)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := backup.Restore(ctx, st, "", filepath.Join(b.TempDir(), "r"), o); err != nil {
		b.Fatal(err)
	}
	restore := time.Since(start)
	mbps := func(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(full.Bytes, full.Took), "full-MB/s")
	b.ReportMetric(mbps(incr.Bytes, incr.Took), "incr-MB/s")
	b.ReportMetric(float64(incr.CopiedBytes)/1e6, "incr-copied-MB")
	b.ReportMetric(mbps(incr.Bytes, restore), "restore-MB/s")
	b.Logf("full %+v; incremental %+v; restore %v", full, incr, restore)

	// Writers' latency, without and with backups, in alternating phases.
	const phase = 5 * time.Second
	var mu sync.Mutex
	lat := map[string][]time.Duration{}
	var seq int64
	backups := map[string]int{}
	modes := []string{"none", "full", "incremental", "full-paced"}
	for round := range 2 * len(modes) {
		mode := modes[round%len(modes)]
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					base := seq
					seq += 1000
					mu.Unlock()
					ms := make([]model.Measurement, 1000)
					for i := range ms {
						ms[i] = model.Measurement{Time: (base + int64(i)) * 1e6, Meta: fmt.Sprintf(`{"id":"w%d-%d"}`, w, i%50),
							Fields: []model.Field{{Name: "v", Value: model.Float(float64(i))}}}
					}
					t0 := time.Now()
					if res, err := db.Insert(ctx, "m", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{}); err != nil || len(res.Errors) > 0 {
						b.Error(err, res.Errors)
						return
					}
					d := time.Since(t0)
					mu.Lock()
					lat[mode] = append(lat[mode], d)
					mu.Unlock()
				}
			}()
		}
		deadline := time.Now().Add(phase)
		switch mode {
		case "none":
			time.Sleep(time.Until(deadline))
		default:
			for time.Now().Before(deadline) {
				// A full backup goes into a new target each time: the most
				// a backup reads and writes. An incremental one goes where
				// the others went.
				to, o := st, o
				if mode != "incremental" {
					to = openTarget(b, b.TempDir())
				}
				if mode == "full-paced" {
					o.MaxBytesPerSecond = 50e6
				}
				if _, err := backup.Create(ctx, db, to, o); err != nil {
					b.Fatal(err)
				}
				backups[mode]++
			}
		}
		close(stop)
		wg.Wait()
	}
	pct := func(ds []time.Duration, p float64) time.Duration {
		slices.Sort(ds)
		return ds[int(float64(len(ds)-1)*p)]
	}
	none := pct(lat["none"], 0.99)
	b.ReportMetric(float64(none.Microseconds())/1e3, "p99-ms-without")
	for _, mode := range modes[1:] {
		p99 := pct(lat[mode], 0.99)
		b.ReportMetric(float64(p99.Microseconds())/1e3, "p99-ms-"+mode)
		b.ReportMetric(float64(p99)/float64(none), "p99-ratio-"+mode)
	}
	for _, mode := range modes {
		b.Logf("inserts, %s backups running back to back (%d backups): %d, p50 %v p99 %v max %v", mode, backups[mode],
			len(lat[mode]), pct(lat[mode], 0.5), pct(lat[mode], 0.99), pct(lat[mode], 1))
	}
}
