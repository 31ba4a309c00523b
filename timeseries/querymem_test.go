package timeseries

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// TestQueryMemoryTotal checks the bound on what all queries hold at once:
// an open find holds its series' memory, a second query that would pass
// the total is refused with IngressRequestRateLimitExceeded (and a query
// over its own limit still with 292), and once the find is closed the
// second runs; every query gives all its memory back, refused ones too.
func TestQueryMemoryTotal(t *testing.T) {
	const series = 100
	db := openTest(t, t.TempDir(), func(o *Options) {
		o.QueryMemoryBytes = 1 << 20
		o.QueryMemoryTotalBytes = 1 << 20 // set below: one find over the series, not two
	})
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	var ms []model.Measurement
	for i := 0; i < series; i++ {
		ms = append(ms, model.Measurement{Time: int64(i) * 1e9, Meta: fmt.Sprint("s", i), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	one := planCharge(db, "m")
	db.opts.QueryMemoryTotalBytes = one * 3 / 2
	held, err := db.Find(ctx, "m", FindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := db.queryMem.Load(); got < one {
		t.Fatalf("an open find over %d series holds %d bytes of the total", series, got)
	}
	agg := AggregateOptions{Window: 3600e9, Fields: []string{"v"}, Funcs: []AggFunc{AggAvg}}
	if _, err := db.Aggregate(ctx, "m", agg); mongoerr.CodeOf(err) != mongoerr.IngressRequestRateLimitExceeded {
		t.Fatalf("a second query past the total: %v, want code %d", err, mongoerr.IngressRequestRateLimitExceeded)
	}
	if _, err := db.Find(ctx, "m", FindOptions{}); mongoerr.CodeOf(err) != mongoerr.IngressRequestRateLimitExceeded {
		t.Fatalf("a second find past the total: %v", err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if got := db.queryMem.Load(); got != 0 {
		t.Fatalf("%d bytes held after every query closed", got)
	}
	if n := len(findRows(t, db, "m", FindOptions{})); n != series {
		t.Fatalf("%d rows", n)
	}
	// A query over its own limit: 292, and nothing kept.
	db.opts.QueryMemoryBytes = 10 * seriesSnapBytes
	if _, err := db.Aggregate(ctx, "m", agg); mongoerr.CodeOf(err) != mongoerr.QueryExceededMemoryLimit {
		t.Fatalf("over its own limit: %v", err)
	}
	if got := db.queryMem.Load(); got != 0 {
		t.Fatalf("%d bytes held after the queries ended", got)
	}
}

// TestPlanYieldsToWriters runs finds whose plans release DB.mu every few
// series (sorted finds), or which take their series a few at a time (finds
// by series), while writers add series and rows: each read returns every
// row written before it started, and each series once.
func TestPlanYieldsToWriters(t *testing.T) {
	defer func(n int) { planYieldEvery = n }(planYieldEvery)
	planYieldEvery = 8
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	insert := func(from, n int) {
		var ms []model.Measurement
		for i := from; i < from+n; i++ {
			ms = append(ms, model.Measurement{Time: int64(i) * 1e6, Meta: fmt.Sprint("s", i), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Error(err)
		}
	}
	insert(0, 500)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 40; i++ {
			insert(500+i*10, 10)
		}
	}()
	for i := 0; i < 20; i++ {
		rows := findRows(t, db, "m", FindOptions{Fields: []string{"v"}, Order: []int{SortSeries, SortAscending}[i%2]})
		seen := map[string]bool{}
		for _, r := range rows {
			k := r.meta
			if seen[k] {
				t.Fatalf("series %s read twice", k)
			}
			seen[k] = true
		}
		if len(rows) < 500 {
			t.Fatalf("%d rows read, want the 500 written before at least", len(rows))
		}
	}
	<-done
	if n := len(findRows(t, db, "m", FindOptions{})); n != 900 {
		t.Fatalf("%d rows, want 900", n)
	}
}

// TestPlanRefusedBeforeWalk checks that a sorted find whose series alone
// pass its memory limit is refused before the plan allocates for them: the
// refusal costs the same few allocations whatever the number of series.
func TestPlanRefusedBeforeWalk(t *testing.T) {
	const series = 2000
	db := openTest(t, t.TempDir(), func(o *Options) { o.QueryMemoryBytes = series / 2 * seriesSnapBytes })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	var ms []model.Measurement
	for i := 0; i < series; i++ {
		ms = append(ms, model.Measurement{Time: int64(i) * 1e6, Meta: fmt.Sprint("s", i), Fields: []model.Field{{Name: "v", Value: model.Int(1)}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := db.Find(ctx, "m", FindOptions{Order: SortDescending}); mongoerr.CodeOf(err) != mongoerr.QueryExceededMemoryLimit {
			t.Fatalf("find over the limit: %v", err)
		}
	})
	if allocs > 100 {
		t.Fatalf("a refused find allocated %v times over %d series", allocs, series)
	}
}

// TestQuerySlots checks that finds and aggregates wait for a query slot:
// with the one slot taken, a find and an aggregate wait until their
// context ends, and a cursor's next batch waits too; once it is given
// back, all run.
func TestQuerySlots(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.QueryConcurrency = 1 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	if _, err := db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{{Time: 1e9, Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := db.Find(ctx, "m", FindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if err := db.acquireQuery(ctx); err != nil {
		t.Fatal(err)
	}
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	if _, err := db.Find(short(), "m", FindOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("find with the slot taken: %v", err)
	}
	if _, err := db.Aggregate(short(), "m", AggregateOptions{Window: time.Hour}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("aggregate with the slot taken: %v", err)
	}
	waited := make(chan bool)
	go func() { waited <- cur.Next() }()
	select {
	case <-waited:
		t.Fatal("a cursor's batch ran with the slot taken")
	case <-time.After(50 * time.Millisecond):
	}
	db.releaseQuery()
	if !<-waited {
		t.Fatalf("the batch after the slot came back: %v", cur.Err())
	}
	if db.stats.queryWaits.Load() < 3 {
		t.Fatalf("%d waits counted", db.stats.queryWaits.Load())
	}
	if n := len(findRows(t, db, "m", FindOptions{})); n != 1 {
		t.Fatalf("%d rows", n)
	}
}

// TestPlanRetriesAfterMerge checks that a sorted find's plan whose walk
// let go of DB.mu while a merge batch was applied walks again without
// letting go, releasing what the first walk charged, and reads every row
// once.
func TestPlanRetriesAfterMerge(t *testing.T) {
	defer func(n int) { planYieldEvery = n }(planYieldEvery)
	planYieldEvery = 4
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	var ms []model.Measurement
	for i := 0; i < 50; i++ {
		ms = append(ms, model.Measurement{Time: int64(i) * 1e9, Meta: fmt.Sprint("s", i), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	merged := false
	db.hooks.planYielded = func() {
		if !merged {
			merged = true
			db.mergeGen.Add(1) // as commitMerge does
		}
	}
	rows := findRows(t, db, "m", FindOptions{Order: SortAscending})
	db.hooks.planYielded = nil
	if db.stats.planRetries.Load() != 1 {
		t.Fatalf("%d plan retries, want 1", db.stats.planRetries.Load())
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.meta] {
			t.Fatalf("series %s read twice", r.meta)
		}
		seen[r.meta] = true
	}
	if len(rows) != 50 || db.queryMem.Load() != 0 {
		t.Fatalf("%d rows, %d bytes still charged", len(rows), db.queryMem.Load())
	}
}

// TestGuardRowsN checks that rows counted in bulk check the context as
// often as rows counted one by one: once a multiple of guardEvery*64 is
// passed.
func TestGuardRowsN(t *testing.T) {
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := newScanGuard(cctx, 0)
	const every = guardEvery * 64
	if err := g.rowsN(every - 1); err != nil {
		t.Fatalf("%d rows: %v, want no check yet", every-1, err)
	}
	if err := g.rowsN(2); err == nil {
		t.Fatalf("%d rows passed a check of a cancelled context without an error", every+1)
	}
	if g.rows != every+1 {
		t.Fatalf("%d rows counted, want %d", g.rows, every+1)
	}
	if err := g.rowsN(5 * every); err == nil {
		t.Fatal("a bulk count past several checks did not check")
	}
}

// TestAggregateChargesFrozenRows: an aggregate decodes open buckets'
// frozen rows after the capture (pendingThaw), and charges what they will
// hold at the capture: a read whose limit they pass is refused with 292
// and holds nothing after, one with room gives the aggregate.
func TestAggregateChargesFrozenRows(t *testing.T) {
	const rows = 900 // one open bucket, its rows frozen every freezeRows
	db := openTest(t, t.TempDir(), func(o *Options) { o.CheckpointInterval = time.Hour })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	var ms []model.Measurement
	for i := range rows {
		ms = append(ms, model.Measurement{Time: int64(i) * 1e9, Meta: "s", Fields: []model.Field{{Name: "v", Value: model.Float(float64(i) / 4)}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	db.mu.RLock()
	frozen := 0
	for _, b := range db.coll.byName["m"].series.get(`"s"`).buckets {
		frozen += b.frozenRows
	}
	db.mu.RUnlock()
	if frozen < rows/2 {
		t.Fatalf("%d of %d rows frozen", frozen, rows)
	}
	agg := AggregateOptions{Window: 3600e9, Fields: []string{"v"}, Funcs: []AggFunc{AggAvg}}
	// The rows decoded hold 16 bytes each (time and value): a limit of
	// half that passes everything else the read holds.
	db.opts.QueryMemoryBytes = rows * 8
	if _, err := db.Aggregate(ctx, "m", agg); mongoerr.CodeOf(err) != mongoerr.QueryExceededMemoryLimit {
		t.Fatalf("frozen rows past the read's limit: %v, want code %d", err, mongoerr.QueryExceededMemoryLimit)
	}
	if got := db.queryMem.Load(); got != 0 {
		t.Fatalf("%d bytes held after the refused read", got)
	}
	db.opts.QueryMemoryBytes = 1 << 20
	rec, err := db.Aggregate(ctx, "m", agg)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	idx := rec.Schema().FieldIndices("v_avg")
	if len(idx) != 1 || rec.NumRows() != 1 {
		t.Fatalf("%d rows, schema %v", rec.NumRows(), rec.Schema())
	}
	if got, want := rec.Column(idx[0]).(*array.Float64).Value(0), float64(rows-1)/8; got != want {
		t.Fatalf("avg %v, want %v", got, want)
	}
}
