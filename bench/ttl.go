package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// TTLConfig shapes the expiry benchmark: Series x PerSeries measurements
// that have all expired, deleted by one TTL pass while Writers keep
// ingesting live data.
type TTLConfig struct {
	Dir string
	// Series and PerSeries: 10,000 x 1,000 = 10M expired measurements by
	// default, one hourly bucket per series.
	Series, PerSeries int
	// Writers ingest batches of WriteBatch live measurements, durably,
	// before and during the sweep. Defaults 2 and 1000.
	Writers, WriteBatch int
	// Baseline is how long the writers run without a sweep, to measure
	// their latency alone. Default 3 s.
	Baseline time.Duration
	// Progress, if set, is called with a line on each phase.
	Progress func(string)
}

func (c *TTLConfig) ensureDefaults() {
	if c.Series == 0 {
		c.Series = 10000
	}
	if c.PerSeries == 0 {
		c.PerSeries = 1000
	}
	if c.Writers == 0 {
		c.Writers = 2
	}
	if c.WriteBatch == 0 {
		c.WriteBatch = 1000
	}
	if c.Baseline == 0 {
		c.Baseline = 3 * time.Second
	}
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
}

// TTLResult is what the expiry benchmark measured.
type TTLResult struct {
	Loaded         int64
	LoadElapsed    time.Duration
	Pass           ttl.PassResult
	PassElapsed    time.Duration
	BaselineP99    time.Duration // write latency without a sweep
	SweepP99       time.Duration // latency of the writes that started during the pass
	WindowP99      time.Duration // latency over a window as long as the baseline's, starting with the pass
	BaselineWrites int
	SweepWrites    int
	WindowWrites   int
	// DiskBefore and DiskAfter are the expired collection's bytes on disk
	// (Pebble's estimate) after loading and after the sweep, each time
	// flushed and compacted. The live writes go to another collection.
	DiskBefore, DiskAfter int64
}

// TTLSweep runs the expiry benchmark in cfg.Dir.
func TTLSweep(ctx context.Context, cfg TTLConfig) (TTLResult, error) {
	cfg.ensureDefaults()
	var res TTLResult
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(t0.Add(time.Hour).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	db, err := timeseries.Open(timeseries.Options{Dir: cfg.Dir, Now: clock})
	if err != nil {
		return res, err
	}
	defer db.Close()
	e := int64(3600)
	if _, err := db.CreateCollection(ctx, "ttl", timeseries.CollectionOptions{
		TimeSeries:         &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor", Granularity: model.GranularitySeconds},
		ExpireAfterSeconds: &e,
	}); err != nil {
		return res, err
	}
	if _, err := db.CreateCollection(ctx, "live", timeseries.CollectionOptions{
		TimeSeries:         &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor", Granularity: model.GranularitySeconds},
		ExpireAfterSeconds: &e,
	}); err != nil {
		return res, err
	}

	// Load: every series one measurement every 3 s from t0.
	start := time.Now()
	step := time.Hour / time.Duration(cfg.PerSeries+1)
	const seriesPerBatch = 50
	ms := make([]model.Measurement, 0, seriesPerBatch*cfg.PerSeries)
	for s0 := 0; s0 < cfg.Series; s0 += seriesPerBatch {
		ms = ms[:0]
		for s := s0; s < min(s0+seriesPerBatch, cfg.Series); s++ {
			meta := fmt.Sprintf("sensor-%05d", s)
			// Readings of three decimals, different in every series, so
			// that buckets neither repeat one another nor compress to
			// nothing in the store's blocks.
			rng := rand.New(rand.NewPCG(uint64(s), 1))
			for i := 0; i < cfg.PerSeries; i++ {
				v := math.Round((15+10*rng.Float64())*1000) / 1000
				ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(i) * step).UnixNano(), Meta: meta,
					Fields: []model.Field{{Name: "v", Value: model.Float(v)}}})
			}
		}
		r, err := db.Insert(ctx, "ttl", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{})
		if err != nil {
			return res, err
		}
		if len(r.Errors) > 0 {
			return res, fmt.Errorf("load: %v", r.Errors[0].Err)
		}
		res.Loaded += int64(r.Inserted)
	}
	res.LoadElapsed = time.Since(start)
	cfg.Progress(fmt.Sprintf("loaded %d measurements in %d series in %v", res.Loaded, cfg.Series, res.LoadElapsed.Round(time.Millisecond)))
	if res.DiskBefore, err = collectionBytes(ctx, db, "ttl"); err != nil {
		return res, err
	}

	// Everything loaded has expired three hours later.
	now.Store(t0.Add(3 * time.Hour).UnixNano())

	// Baseline: the writers alone.
	samples, err := writeLive(ctx, db, cfg, clock, func(stop <-chan struct{}) error {
		select {
		case <-time.After(cfg.Baseline):
		case <-ctx.Done():
		}
		return ctx.Err()
	})
	if err != nil {
		return res, err
	}
	lat := latencies(samples, time.Time{}, time.Now())
	res.BaselineWrites, res.BaselineP99 = len(lat), summarize(lat).P99
	cfg.Progress(fmt.Sprintf("baseline: %d writes, p99 %v", res.BaselineWrites, res.BaselineP99))

	// The sweep, with the writers going on.
	mon, err := ttl.New(ttl.Options{Store: db, Disabled: true, Clock: fixedClock{clock}})
	if err != nil {
		return res, err
	}
	defer mon.Close()
	var passStart time.Time
	samples, err = writeLive(ctx, db, cfg, clock, func(stop <-chan struct{}) error {
		passStart = time.Now()
		pass, err := mon.RunPass(ctx)
		res.PassElapsed = time.Since(passStart)
		res.Pass = pass
		if rest := cfg.Baseline - res.PassElapsed; rest > 0 && err == nil {
			time.Sleep(rest) // the writers go on to the end of the window
		}
		return err
	})
	if err != nil {
		return res, err
	}
	lat = latencies(samples, passStart, passStart.Add(res.PassElapsed))
	res.SweepWrites, res.SweepP99 = len(lat), summarize(lat).P99
	lat = latencies(samples, passStart, passStart.Add(max(cfg.Baseline, res.PassElapsed)))
	res.WindowWrites, res.WindowP99 = len(lat), summarize(lat).P99
	cfg.Progress(fmt.Sprintf("sweep: %d measurements in %d buckets in %v; %d writes started during it, p99 %v; %d in the %v window, p99 %v",
		res.Pass.DeletedDocuments, res.Pass.DeletedBuckets, res.PassElapsed.Round(time.Millisecond), res.SweepWrites, res.SweepP99,
		res.WindowWrites, max(cfg.Baseline, res.PassElapsed), res.WindowP99))
	if res.Pass.DeletedDocuments != res.Loaded {
		return res, fmt.Errorf("the pass deleted %d measurements, want %d", res.Pass.DeletedDocuments, res.Loaded)
	}
	if res.DiskAfter, err = collectionBytes(ctx, db, "ttl"); err != nil {
		return res, err
	}
	return res, nil
}

// collectionBytes flushes and compacts the store and returns the bytes on
// disk of one collection.
func collectionBytes(ctx context.Context, db *timeseries.DB, name string) (int64, error) {
	if err := db.Flush(); err != nil {
		return 0, err
	}
	info, err := db.Describe(ctx, name)
	return info.StorageBytes, err
}

// fixedClock is the monitor's clock on the benchmark's time.
type fixedClock struct{ now func() time.Time }

func (c fixedClock) Now() time.Time                         { return c.now() }
func (c fixedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// sample is one write: when it started and how long it took.
type sample struct {
	start time.Time
	took  time.Duration
}

// latencies returns the latencies of the writes that started in [from, to).
func latencies(ss []sample, from, to time.Time) []time.Duration {
	var out []time.Duration
	for _, s := range ss {
		if !s.start.Before(from) && s.start.Before(to) {
			out = append(out, s.took)
		}
	}
	return out
}

// writeLive runs cfg.Writers writers of live measurements (100 series) until
// during returns, and returns every write.
func writeLive(ctx context.Context, db *timeseries.DB, cfg TTLConfig, clock func() time.Time, during func(stop <-chan struct{}) error) ([]sample, error) {
	return runWriters(cfg.Writers, func(w int) func(n int) error {
		ms := make([]model.Measurement, cfg.WriteBatch)
		return func(n int) error {
			base := clock().UnixNano()
			for i := range ms {
				ms[i] = model.Measurement{Time: base + int64(i), Meta: fmt.Sprintf("live-%d-%d", w, i%100),
					Fields: []model.Field{{Name: "v", Value: model.Float(float64(n))}}}
			}
			_, err := db.Insert(ctx, "live", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{})
			return err
		}
	}, during)
}

// runWriters runs writers goroutines, each calling its write function
// (made by newWriter) with 0, 1, 2, ... until during returns, and returns
// the time and latency of every write.
func runWriters(writers int, newWriter func(w int) func(n int) error, during func(stop <-chan struct{}) error) ([]sample, error) {
	stop := make(chan struct{})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		lats []sample
		errs []error
	)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			write := newWriter(w)
			var mine []sample
			for n := 0; ; n++ {
				select {
				case <-stop:
					mu.Lock()
					lats = append(lats, mine...)
					mu.Unlock()
					return
				default:
				}
				start := time.Now()
				if err := write(n); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mine = append(mine, sample{start, time.Since(start)})
			}
		}(w)
	}
	err := during(stop)
	close(stop)
	wg.Wait()
	return lats, errors.Join(append(errs, err)...)
}
