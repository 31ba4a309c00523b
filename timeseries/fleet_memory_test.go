package timeseries

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// fleetHeap is the Go heap a load of many sensors leaves in use after a
// collection.
type fleetHeap struct {
	bytes, objects float64 // per series, over the heap after Open
	headMem        float64 // per series: what the budget accounts for
	seconds        float64 // the load's wall time
	base           uint64  // HeapAlloc after Open
}

// loadFleet inserts points measurements into each of n series of an
// iot-shaped collection (meta {sensor, site, kind}, a float and an int
// field, 10 s apart), time-major in batches of 5,000 like line-protocol
// writers, and returns the heap in use after a collection. When profile is
// set, a heap profile is written there.
func loadFleet(tb testing.TB, db *DB, n, points int, profile string) fleetHeap {
	tb.Helper()
	mustCreate(tb, db, "iot", model.TimeSeriesOptions{TimeField: "time", MetaField: "sensor"})
	kinds := []string{"temperature", "humidity", "pressure", "vibration"}
	metas := make([]any, n)
	for i := range metas {
		k, err := model.CanonicalMeta(map[string]any{"sensor": fmt.Sprintf("s%06d", i),
			"site": "site-" + strconv.Itoa(i%100), "kind": kinds[i%len(kinds)]})
		if err != nil {
			tb.Fatal(err)
		}
		metas[i] = model.MetaKey(k)
	}
	before := heapInUse()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	start := time.Now()
	batch := make([]model.Measurement, 0, 5000)
	fields := make([]model.Field, 0, 2*cap(batch))
	flush := func() {
		if _, err := db.Insert(ctx, "iot", Batch{Measurements: batch}, InsertOptions{}); err != nil {
			tb.Fatal(err)
		}
		batch, fields = batch[:0], fields[:0]
	}
	for p := 0; p < points; p++ {
		for i := 0; i < n; i++ {
			fields = append(fields, model.Field{Name: "value", Value: model.Float(20 + float64(i%1000)/100)}, model.Field{Name: "battery", Value: model.Int(int64(100 - p))})
			batch = append(batch, model.Measurement{Time: t0 + int64(p)*10e9 + int64(i%1000)*1e6, Meta: metas[i],
				Fields: fields[len(fields)-2 : len(fields) : len(fields)]})
			if len(batch) == cap(batch) {
				flush()
			}
		}
	}
	if len(batch) > 0 {
		flush()
	}
	secs := time.Since(start).Seconds()
	metas = nil
	after := heapInUse()
	if profile != "" {
		writeHeapProfile(tb, profile)
	}
	return fleetHeap{
		bytes:   float64(after.HeapAlloc-before.HeapAlloc) / float64(n),
		objects: float64(after.HeapObjects-before.HeapObjects) / float64(n),
		headMem: float64(db.headMem.Load()+db.seriesMem.Load()) / float64(n),
		seconds: secs,
		base:    before.HeapAlloc,
	}
}

// idleFleet checkpoints db, moves its clock (advance) past the checkpoint
// interval and checkpoints again, so that every open bucket is written out
// as idle, and returns the heap in use per series over base.
func idleFleet(tb testing.TB, db *DB, advance func(), n int, base uint64) float64 {
	tb.Helper()
	for i := 0; i < 2; i++ {
		if err := db.Checkpoint(); err != nil {
			tb.Fatal(err)
		}
		advance()
	}
	return float64(int64(heapInUse().HeapAlloc)-int64(base)) / float64(n)
}

func writeHeapProfile(tb testing.TB, path string) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		tb.Fatal(err)
	}
}

func heapInUse() runtime.MemStats {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms
}

// BenchmarkFleetMemory loads 10k and 100k series of 4 points each (and 1M
// with HOURGLASS_FLEET_1M=1) and reports the Go heap in use per series
// after a collection, with the checkpoint that would write the buckets out
// held off, so that it counts the series and their open buckets; then,
// after two checkpoints an hour apart on the injected clock, what an idle
// series holds (its buckets written out). With
// HOURGLASS_FLEET_PROFILE=dir it writes dir/heap-N.pprof for
//
//	go tool pprof -sample_index=inuse_space -top heap-N.pprof
//
// Run it alone:
//
//	go test ./timeseries -run '^$' -bench FleetMemory -benchtime 1x
func BenchmarkFleetMemory(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if os.Getenv("HOURGLASS_FLEET_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				clock := newTestClock(t0)
				db := openTest(b, b.TempDir(), func(o *Options) {
					o.MemoryBudget = 64 << 30
					o.CheckpointLogBytes = 64 << 30
					o.Now = clock.Now
				})
				profile := ""
				if d := os.Getenv("HOURGLASS_FLEET_PROFILE"); d != "" {
					profile = fmt.Sprintf("%s/heap-%d.pprof", d, n)
				}
				h := loadFleet(b, db, n, 4, profile)
				b.ReportMetric(h.bytes, "heap-B/series")
				b.ReportMetric(h.objects, "objects/series")
				b.ReportMetric(h.headMem, "budgeted-B/series")
				b.ReportMetric(float64(n*4*2)/h.seconds, "points/s")
				idle := idleFleet(b, db, func() { clock.Advance(time.Hour) }, n, h.base)
				b.ReportMetric(idle, "idle-heap-B/series")
				if profile != "" {
					writeHeapProfile(b, strings.Replace(profile, "heap-", "heap-idle-", 1))
				}
				b.ReportMetric(float64(db.headMem.Load()+db.seriesMem.Load())/float64(n), "idle-budgeted-B/series")
				db.Close()
			}
		})
	}
}

// maxHeapPerSeries bounds the Go heap a series with one open bucket of one
// row holds (its struct and map entries, its meta key, the bucket and two
// columns): about 620 bytes measured, with room for allocator and runtime
// noise.
const maxHeapPerSeries = 900

// maxIdleHeapPerSeries bounds the Go heap a series holds once its buckets
// were written out as idle (its struct, map entry, meta key, and its merge
// mark until the next merge pass): about 140 bytes measured. A decoded
// meta value kept per series (a small map, ~320 bytes) would not fit.
const maxIdleHeapPerSeries = 260

// minBudgetedShare is the least part of a series' heap the memory budget
// must account for: the rest is allocator rounding and garbage.
const minBudgetedShare = 0.8

// TestFleetMemoryPerSeries loads 20,000 series of one point each and fails
// if the heap in use after a collection grows past maxHeapPerSeries bytes
// per series, or if the columns of a one-row bucket are made with room
// for more than minColumnRows rows: a sparse sensor must not pay for rows
// it does not write.
func TestFleetMemoryPerSeries(t *testing.T) {
	clock := newTestClock(t0)
	db := openTest(t, t.TempDir(), func(o *Options) { o.CheckpointLogBytes = 1 << 30; o.Now = clock.Now })
	defer db.Close()
	const n = 20_000
	h := loadFleet(t, db, n, 1, "")
	t.Logf("%.0f heap bytes, %.1f objects, %.0f budgeted bytes per series", h.bytes, h.objects, h.headMem)
	if h.bytes > maxHeapPerSeries {
		t.Errorf("heap in use per series = %.0f bytes; want <= %d", h.bytes, maxHeapPerSeries)
	}
	// The budget counts the series and their buckets, not only the
	// column values.
	if h.headMem < minBudgetedShare*h.bytes {
		t.Errorf("the budget accounts for %.0f bytes per series of %.0f in use; want >= %.0f%%",
			h.headMem, h.bytes, 100*minBudgetedShare)
	}
	checkColumnRoom(t, db, n)
	buckets := float64(db.headMem.Load()) / n
	idle := idleFleet(t, db, func() { clock.Advance(time.Hour) }, n, h.base)
	perSeries := float64(db.seriesMem.Load()) / n
	t.Logf("idle: %.0f heap bytes, %.0f budgeted bytes per series", idle, perSeries)
	if m := db.headMem.Load(); m != 0 {
		t.Errorf("idle series hold %d bytes of buckets; want 0", m)
	}
	if idle > maxIdleHeapPerSeries {
		t.Errorf("heap in use per idle series = %.0f bytes; want <= %d", idle, maxIdleHeapPerSeries)
	}
	if perSeries < minBudgetedShare*idle {
		t.Errorf("the budget accounts for %.0f bytes per idle series of %.0f in use; want >= %.0f%%",
			perSeries, idle, 100*minBudgetedShare)
	}
	// What writing the buckets out freed is what they were accounted for.
	if freed := h.bytes - idle; buckets < minBudgetedShare*freed {
		t.Errorf("the budget accounted for %.0f bytes of buckets per series; writing them out freed %.0f; want >= %.0f%%",
			buckets, freed, 100*minBudgetedShare)
	}
}

// checkColumnRoom fails if the columns of the one-row buckets of the n
// series of "iot" have room for more than minColumnRows rows.
func checkColumnRoom(t *testing.T, db *DB, n int) {
	t.Helper()
	db.mu.RLock()
	defer db.mu.RUnlock()
	c := db.coll.byName["iot"]
	rows, room := 0, 0
	for _, s := range c.series.byOrd {
		for _, b := range s.buckets {
			rows += b.rows()
			room += cap(b.cols.Times)
			for i := range b.cols.Fields {
				f := &b.cols.Fields[i]
				room += cap(f.Floats) + cap(f.Ints) + cap(f.Strings) + cap(f.Bools)
			}
		}
	}
	if c.series.len() != n || rows != n {
		t.Fatalf("%d series, %d rows; want %d of each", c.series.len(), rows, n)
	}
	// A time column and two field columns per series.
	if want := 3 * n * (1 + minColumnRows); room > want {
		t.Errorf("columns have room for %d values (%.1f per series); want <= %d", room, float64(room)/float64(n), want/n)
	}
}

// BenchmarkCheckpointIdleFleet times a checkpoint of a fleet whose series
// are all idle but ten: 100k series (1M with HOURGLASS_FLEET_1M=1) of one
// point each are loaded and checkpointed twice, an hour apart on the
// injected clock, then each iteration writes one point to ten series,
// moves the clock a minute and checkpoints. It reports the checkpoint's
// time; the store's flush is part of it.
//
//	go test ./timeseries -run '^$' -bench CheckpointIdleFleet -benchtime 20x
func BenchmarkCheckpointIdleFleet(b *testing.B) {
	n := 100_000
	if os.Getenv("HOURGLASS_FLEET_1M") != "" {
		n = 1_000_000
	}
	clock := newTestClock(t0)
	advance := clock.Advance
	db := openTest(b, b.TempDir(), func(o *Options) {
		o.MemoryBudget = 64 << 30
		o.CheckpointLogBytes = 64 << 30
		o.CheckpointInterval = time.Hour
		o.Now = clock.Now
	})
	defer db.Close()
	loadFleet(b, db, n, 1, "")
	for i := 0; i < 2; i++ {
		if err := db.Checkpoint(); err != nil {
			b.Fatal(err)
		}
		advance(time.Hour)
	}
	if err := db.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2024, 1, 1, 1, 0, 0, 0, time.UTC).UnixNano()
	var spent time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ms := make([]model.Measurement, 10)
		for j := range ms {
			meta, err := model.CanonicalMeta(map[string]any{"sensor": fmt.Sprintf("s%06d", j*7919%n),
				"site": "site-" + strconv.Itoa(j*7919%n%100), "kind": []string{"temperature", "humidity", "pressure", "vibration"}[j*7919%n%4]})
			if err != nil {
				b.Fatal(err)
			}
			ms[j] = model.Measurement{Time: t0 + int64(i)*1e9, Meta: model.MetaKey(meta), Fields: []model.Field{{Name: "value", Value: model.Float(1)}}}
		}
		if _, err := db.Insert(ctx, "iot", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			b.Fatal(err)
		}
		advance(time.Minute)
		start := time.Now()
		if err := db.Checkpoint(); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
	}
	b.ReportMetric(float64(spent.Microseconds())/1000/float64(b.N), "ms/checkpoint")
	db.mu.RLock()
	b.ReportMetric(float64(len(db.coll.byName["iot"].hot)), "hot-series")
	db.mu.RUnlock()
}

// TestIdleBucketsSealedLoseNothing: open buckets not written for a
// checkpoint interval are sealed by the next checkpoint, written out and
// dropped from memory, and the series leave the checkpoint's list; points
// written later open new buckets. A crash after that recovers every
// acknowledged measurement, before and after the merge pass.
func TestIdleBucketsSealedLoseNothing(t *testing.T) {
	clock := newTestClock(t0)
	advance := func() { clock.Advance(time.Hour) }
	dir := t.TempDir()
	db := openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	const n = 200
	inserted := 0
	write := func(from, to, k int) {
		t.Helper()
		var ms []model.Measurement
		for i := from; i < to; i++ {
			ms = append(ms, model.Measurement{Time: int64(k) * 10e9, Meta: fmt.Sprintf("s%03d", i),
				Fields: []model.Field{{Name: "v", Value: model.Int(int64(i*1000 + k))}}})
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		inserted += len(ms)
	}
	checkpoint := func() {
		t.Helper()
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	inMemory := func() (series, buckets, hot int) {
		db.mu.RLock()
		defer db.mu.RUnlock()
		c := db.coll.byName["m"]
		for _, s := range c.series.byOrd {
			if len(s.buckets) > 0 {
				series++
			}
			buckets += len(s.buckets)
		}
		return series, buckets, len(c.hot)
	}
	for k := 0; k < 3; k++ {
		write(0, n, k)
	}
	checkpoint() // snapshots of n open buckets
	advance()
	write(0, n/2, 3) // half the series stay busy
	checkpoint()
	if got := db.stats.sealedIdle.Load(); got != n/2 {
		t.Fatalf("%d buckets sealed as idle; want %d", got, n/2)
	}
	if s, b, hot := inMemory(); s != n/2 || b != n/2 || hot != n/2 {
		t.Fatalf("%d series hold %d buckets, %d in the checkpoint's list; want %d of each", s, b, hot, n/2)
	}
	write(n/2, n, 4) // the idle half wakes up: new buckets
	advance()
	checkpoint()
	advance()
	checkpoint()
	if s, b, hot := inMemory(); s != 0 || b != 0 || hot != 0 || db.headMem.Load() != 0 {
		t.Fatalf("after idle checkpoints: %d series hold %d buckets (%d bytes), %d in the list; want none",
			s, b, db.headMem.Load(), hot)
	}
	write(0, n, 5) // in the log only
	want := findRows(t, db, "m", FindOptions{})
	if len(want) != inserted {
		t.Fatalf("%d rows found; %d inserted", len(want), inserted)
	}
	crashed := crashCopy(t, db, dir)
	db2 := openTest(t, crashed, nil)
	defer db2.Close()
	check := func(when string) {
		t.Helper()
		got := findRows(t, db2, "m", FindOptions{})
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %d rows, want %d: %v", when, len(got), len(want), got)
		}
		checkCount(t, db2, "m", inserted)
	}
	check("after the crash")
	if err := db2.Flush(); err != nil {
		t.Fatal(err)
	}
	check("after a checkpoint and a merge pass")
}

// BenchmarkOpenHourMemory loads an hour of an iot fleet with the
// checkpoint held off: 10,000 series of a reading (a random walk with two
// decimals) and a battery level every 10 s, times jittered by up to a
// second in nanoseconds, 3.6M rows written time-major in batches of
// 5,000 (with HG_OPEN_HOURS=N, N hours: the buckets of the hours before
// the last stay open for late rows; with HG_MS=1, times in whole
// milliseconds, as Prometheus and BSON dates give them). It reports the Go heap in use per
// row after a collection (the open buckets' cost), what the memory budget
// counts, the insert rate, and the time of a checkpoint that writes every
// open bucket.
//
//	go test ./timeseries -run '^$' -bench OpenHourMemory -benchtime 1x
func BenchmarkOpenHourMemory(b *testing.B) {
	const n = 10_000
	points := 360
	if h, err := strconv.Atoi(os.Getenv("HG_OPEN_HOURS")); err == nil && h > 0 {
		points *= h // the hours before the last left open for late rows
	}
	jitterUnit := int64(1)
	if os.Getenv("HG_MS") == "1" {
		jitterUnit = 1e6
	}
	for i := 0; i < b.N; i++ {
		db := openTest(b, b.TempDir(), func(o *Options) {
			o.MemoryBudget = 64 << 30
			o.CheckpointLogBytes = 64 << 30
			o.CheckpointInterval = time.Hour
		})
		mustCreate(b, db, "iot", model.TimeSeriesOptions{TimeField: "time", MetaField: "sensor"})
		rng := rand.New(rand.NewSource(1))
		values := make([]float64, n)
		for s := range values {
			values[s] = 20 + float64(rng.Intn(1000))/100
		}
		before := heapInUse()
		start := time.Now()
		batch := make([]model.Measurement, 0, 5000)
		fields := make([]model.Field, 0, 2*cap(batch))
		for p := 0; p < points; p++ {
			for s := 0; s < n; s++ {
				values[s] = math.Round((values[s]+rng.Float64()-0.5)*100) / 100
				fields = append(fields, model.Field{Name: "value", Value: model.Float(values[s])},
					model.Field{Name: "battery", Value: model.Int(int64(100 - p/10))})
				batch = append(batch, model.Measurement{Time: t0.UnixNano() + int64(p)*10e9 + rng.Int63n(1e9)/jitterUnit*jitterUnit, Meta: int64(s),
					Fields: fields[len(fields)-2 : len(fields) : len(fields)]})
				if len(batch) == cap(batch) {
					if _, err := db.Insert(ctx, "iot", Batch{Measurements: batch}, InsertOptions{}); err != nil {
						b.Fatal(err)
					}
					batch, fields = batch[:0], fields[:0]
				}
			}
		}
		secs := time.Since(start).Seconds()
		after := heapInUse()
		rows := float64(n * points)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/rows, "heap-B/row")
		b.ReportMetric(float64(db.headMem.Load())/rows, "budgeted-B/row")
		b.ReportMetric(rows/secs, "rows/s")
		// A checkpoint writes every open bucket's snapshot, as the
		// checkpoints during a load rewrite those written since the last.
		start = time.Now()
		if err := db.Checkpoint(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "checkpoint-ms")
		db.Close()
	}
}
