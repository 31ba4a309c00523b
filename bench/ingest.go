package bench

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/timeseries"
)

// IngestConfig describes an in-process ingest run: the workload written
// through timeseries.DB.Insert by Workers goroutines in batches of
// BatchRows rows, durable (every batch is fsynced before it is
// acknowledged) unless NoSync.
type IngestConfig struct {
	Workload  Workload
	Dir       string // data directory; must be empty or missing
	Workers   int    // 0 = 2, as the peers harness loads
	BatchRows int    // 0 = 5000, as the peers harness loads
	NoSync    bool
	// Order is the order of each series' rows inside a batch (the rows of
	// each batch are reordered before the load starts); the zero value is
	// time order.
	Order Order
	// Duration, if positive, stops handing out batches this long after the
	// first; the batches being written are finished, and the result counts
	// the rows written.
	Duration time.Duration
	// Progress, if set, is called about once a second (when a batch
	// completes) with the rows written so far and the latencies of the
	// batches written since the previous call.
	Progress func(Progress)
	// Settle, after the load and its flush and with the DB still open,
	// waits for the size of Dir to stay the same this long (SettleUsage,
	// read every second, 5 minutes at most) and reports it as
	// SettledBytes, as "bench ingest" measures a server's data directory;
	// 0 takes it at once.
	Settle time.Duration
}

// IngestResult reports an ingest run.
type IngestResult struct {
	Rows, Points int
	Stopped      bool          // Duration ended the run before the workload was written
	Elapsed      time.Duration // first insert to last acknowledgement
	FlushElapsed time.Duration // checkpoint and compaction after the load
	DiskBytes    int64         // allocated bytes of the data directory after the flush and Close
	Buckets      int64         // buckets of the collection after the flush
	// SettledBytes is the allocated size of the data directory after the
	// flush, the DB still open, once it stayed the same for Settle;
	// SettleWaited the wait, SettleTimedOut set if it was still changing
	// after 5 minutes.
	SettledBytes   int64
	SettleWaited   time.Duration
	SettleTimedOut bool
	// CPU is the CPU time this process spent during the load (Elapsed),
	// the workload's batches being turned into measurements included;
	// SettleCPU the CPU time spent on the flush and the settle. Both are
	// zero where /proc/self/stat cannot be read.
	CPU, SettleCPU time.Duration
}

// PointsPerSecond is the ingest rate.
func (r IngestResult) PointsPerSecond() float64 { return float64(r.Points) / r.Elapsed.Seconds() }

// BucketsPer1000 is the number of buckets per 1000 rows (measurements).
func (r IngestResult) BucketsPer1000() float64 { return 1000 * float64(r.Buckets) / float64(r.Rows) }

// BytesPerPoint is the settled size on disk per point, everything included.
func (r IngestResult) BytesPerPoint() float64 { return float64(r.DiskBytes) / float64(r.Points) }

// Collection is the name of the collection the benchmarks write.
const Collection = "cpu"

// Ingest generates the workload in memory, then writes it into a fresh DB in
// cfg.Dir and flushes it, timing both. The DB is closed on return.
func Ingest(ctx context.Context, cfg IngestConfig) (IngestResult, error) {
	w := cfg.Workload
	w.EnsureDefaults()
	if err := w.Validate(); err != nil {
		return IngestResult{}, err
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = 5000
	}
	g := w.NewGenerator()
	rows := make([]Row, 0, w.Rows())
	var r Row
	for g.Next(&r) {
		rows = append(rows, r)
	}
	rng := rand.New(rand.NewSource(orderSeed))
	for i := 0; i < len(rows); i += cfg.BatchRows {
		b := rows[i:min(i+cfg.BatchRows, len(rows))]
		cfg.Order.reorder(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] }, rng)
	}
	metas, err := hostMetas(g.Hosts())
	if err != nil {
		return IngestResult{}, err
	}
	db, err := timeseries.Open(timeseries.Options{Dir: cfg.Dir, NoSync: cfg.NoSync})
	if err != nil {
		return IngestResult{}, err
	}
	defer db.Close()
	if _, err := db.CreateCollection(ctx, Collection, timeseries.CollectionOptions{
		TimeSeries: &model.TimeSeriesOptions{TimeField: "time", MetaField: "tags"}}); err != nil {
		return IngestResult{}, err
	}

	var res IngestResult
	cpu0, cpuErr := ProcessCPU(os.Getpid())
	batches := make(chan []Row, cfg.Workers)
	window := newLatencyWindow()
	errs := make(chan error, cfg.Workers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	start := time.Now()
	lastReport := start
	for i := 0; i < cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ms := make([]model.Measurement, cfg.BatchRows)
			fields := make([]model.Field, cfg.BatchRows*NumFields)
			for batch := range batches {
				t0 := time.Now()
				if cfg.Duration > 0 && t0.Sub(start) >= cfg.Duration {
					continue // time is up: drop the batches not started
				}
				ms = ms[:len(batch)]
				for j := range batch {
					row := &batch[j]
					fs := fields[j*NumFields : (j+1)*NumFields : (j+1)*NumFields]
					for k := range fs {
						fs[k].Name = FieldNames[k]
						if w.Values == ValuesFloat {
							fs[k].Value = model.Float(row.Floats[k])
						} else {
							fs[k].Value = model.Int(row.Ints[k])
						}
					}
					ms[j] = model.Measurement{Time: row.Time, Meta: metas[row.Host], Fields: fs}
				}
				ir, err := db.Insert(ctx, Collection, timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{})
				if err == nil && ir.Inserted != len(ms) {
					err = fmt.Errorf("bench: %d of %d measurements refused: %v", len(ms)-ir.Inserted, len(ms), ir.Errors[0].Err)
				}
				if err != nil {
					errs <- err
					return
				}
				window.add(time.Since(t0))
				mu.Lock()
				done += len(batch)
				if cfg.Progress != nil && time.Since(lastReport) >= time.Second {
					lastReport = time.Now()
					n, lat := window.take()
					cfg.Progress(Progress{Rows: int64(done), Points: int64(done) * NumFields, TotalRows: int64(len(rows)),
						Elapsed: lastReport.Sub(start), Batches: n, Latency: lat})
				}
				mu.Unlock()
			}
		}()
	}
	var timeUp <-chan time.Time
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		timeUp = t.C
	}
feed:
	for i := 0; i < len(rows); i += cfg.BatchRows {
		select {
		case <-timeUp:
			break feed
		default:
		}
		select {
		case batches <- rows[i:min(i+cfg.BatchRows, len(rows))]:
		case err := <-errs:
			close(batches)
			wg.Wait()
			return res, err
		case <-timeUp:
			break feed
		case <-ctx.Done():
			break feed
		}
	}
	close(batches)
	wg.Wait()
	res.Rows, res.Points = done, done*NumFields
	select {
	case err := <-errs:
		return res, err
	default:
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	res.Stopped = done < len(rows)
	var cpu1 time.Duration
	if cpuErr == nil {
		cpu1, cpuErr = ProcessCPU(os.Getpid())
		res.CPU = cpu1 - cpu0
	}
	if cfg.Progress != nil {
		n, lat := window.take()
		cfg.Progress(Progress{Rows: int64(done), Points: int64(done) * NumFields, TotalRows: int64(len(rows)),
			Elapsed: res.Elapsed, Batches: n, Latency: lat})
	}
	t := time.Now()
	if err := db.Flush(); err != nil {
		return res, err
	}
	res.FlushElapsed = time.Since(t)
	info, err := db.Describe(ctx, Collection)
	if err != nil {
		return res, err
	}
	res.Buckets = info.Buckets
	settled, err := SettleUsage(ctx, []string{cfg.Dir}, SettleConfig{Quiet: cfg.Settle})
	if err != nil {
		return res, err
	}
	res.SettledBytes, res.SettleWaited, res.SettleTimedOut = settled.Bytes, settled.Waited, settled.TimedOut
	if cpuErr == nil {
		if cpu2, err := ProcessCPU(os.Getpid()); err == nil {
			res.SettleCPU = cpu2 - cpu1
		}
	}
	if err := db.Close(); err != nil {
		return res, err
	}
	res.DiskBytes, err = DiskUsage(cfg.Dir)
	return res, err
}

// hostMetas returns each host's meta value, the line-protocol tags as
// the InfluxDB endpoints store them, in canonical form.
func hostMetas(hosts []Host) ([]model.MetaKey, error) {
	out := make([]model.MetaKey, len(hosts))
	for i, h := range hosts {
		tags := map[string]any{"_measurement": Measurement}
		for _, kv := range h.Tags {
			tags[kv[0]] = kv[1]
		}
		k, err := model.CanonicalMeta(tags)
		if err != nil {
			return nil, err
		}
		out[i] = model.MetaKey(k)
	}
	return out, nil
}

// DiskUsage returns the bytes allocated on disk by the files under dir, as
// `du -sB1` counts them.
func DiskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	return total, err
}
