package timeseries

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/hourglassdb/hourglass/model"
)

// recordText prints a record column by column, for comparing two.
func recordText(rec arrow.Record) string {
	var b strings.Builder
	for i := 0; i < int(rec.NumCols()); i++ {
		fmt.Fprintf(&b, "%s=%v\n", rec.ColumnName(i), rec.Column(i))
	}
	return b.String()
}

// thawLoad writes series of four shapes (a float; a string, an int and a
// float; a float in two rows of three, a bool and a constant; an int with
// a float every 7th row), some with late rows and some writing to two
// open buckets by turns, so that open buckets of different columns freeze
// and thaw into the same recycled columns.
func thawLoad(t *testing.T, db *DB, series, rows int, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	base := int64(1_735_689_600e9)
	var batch []model.Measurement
	for r := 0; r < rows; r++ {
		for s := 0; s < series; s++ {
			tm := base + int64(r)*10e9 + int64(s)
			if s%5 == 0 && rng.Intn(20) == 0 {
				tm -= rng.Int63n(300e9)
			}
			if s%6 == 5 && r%2 == 1 {
				tm += 3600e9 // two open buckets, both frozen in part
			}
			var fs []model.Field
			switch s % 4 {
			case 0:
				fs = []model.Field{{Name: "v", Value: model.Float(float64(r) + float64(s)/10)}}
			case 1:
				fs = []model.Field{{Name: "note", Value: model.String(strings.Repeat("x", r%13))}, {Name: "n", Value: model.Int(int64(r * s))}, {Name: "v", Value: model.Float(float64(r))}}
			case 2:
				if r%3 != 0 {
					fs = append(fs, model.Field{Name: "v", Value: model.Float(float64(-r))})
				}
				fs = append(fs, model.Field{Name: "ok", Value: model.Bool(r%2 == 0)}, model.Field{Name: "w", Value: model.Float(1)})
			case 3:
				fs = []model.Field{{Name: "n", Value: model.Int(int64(r))}}
				if r%7 == 0 {
					fs = append(fs, model.Field{Name: "v", Value: model.Float(math.Sqrt(float64(r)))})
				}
			}
			batch = append(batch, model.Measurement{Time: tm, Meta: sensor(fmt.Sprintf("s%d", s)), Fields: fs})
		}
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: batch}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestAggregateThawRecycled: aggregates that decode open buckets' frozen
// rows into columns recycled from chunk to chunk and from one aggregate to
// the next (a rollup pass' thawFree), with chunks of three series, give
// what a store whose buckets never freeze gives, for filters, fields and
// functions of every kind.
func TestAggregateThawRecycled(t *testing.T) {
	defer func(n int) { planYieldEvery = n }(planYieldEvery)
	planYieldEvery = 3
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	plain := openTest(t, t.TempDir(), nil)
	defer plain.Close()
	plain.lim.freezeAt = math.MaxInt
	for _, d := range []*DB{db, plain} {
		mustCreate(t, d, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
		thawLoad(t, d, 23, 300, 1)
	}
	filters := []string{`{}`, `{"note": {"$gte": "xxx"}}`, `{"n": {"$gt": 50}}`, `{"ok": true}`}
	for _, fs := range filters {
		for _, fields := range [][]string{{"v"}, {"v", "n"}, {"n"}, {"w"}} {
			for _, funcs := range [][]AggFunc{{AggSum, AggCount, AggMin, AggMax}, {AggFirst, AggLast}, {AggCount}, {AggLast}} {
				opts := AggregateOptions{Filter: mustFilter(t, fs), Window: 600e9, Fields: fields, Funcs: funcs}
				want, err := plain.Aggregate(ctx, "m", opts)
				if err != nil {
					t.Fatal(err)
				}
				tf := &thawFree{}
				for i := 0; i < 3; i++ {
					o := opts
					o.thaw = tf
					got, err := db.Aggregate(ctx, "m", o)
					if err != nil {
						t.Fatal(err)
					}
					if g, w := recordText(got), recordText(want); g != w {
						t.Fatalf("filter %s fields %v funcs %v pass %d:\n got %s\nwant %s", fs, fields, funcs, i, g, w)
					}
					got.Release()
				}
				want.Release()
				if len(tf.cols) == 0 {
					t.Errorf("nothing recycled")
				}
			}
		}
	}
}

// TestAggregateThawRacesWrites: aggregates decoding frozen rows after
// letting go of DB.mu, into recycled columns, while writes freeze and
// grow the same buckets (past frozenExact, where they grow by append),
// deletes rewrite them and checkpoints snapshot them (run with -race).
func TestAggregateThawRacesWrites(t *testing.T) {
	defer func(n int) { planYieldEvery = n }(planYieldEvery)
	planYieldEvery = 2
	db := openTest(t, t.TempDir(), func(o *Options) { o.BucketMaxBytes = 64 << 20 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	thawLoad(t, db, 8, 100, 1)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		base := int64(1_735_689_600e9)
		for r := 100; r < 2100; r++ {
			var batch []model.Measurement
			for s := 0; s < 8; s++ {
				batch = append(batch, model.Measurement{Time: base + int64(r)*1e9, Meta: sensor(fmt.Sprintf("s%d", s)),
					Fields: []model.Field{{Name: "v", Value: model.Float(float64(r))}, {Name: "note", Value: model.String(strings.Repeat("abc", 100))}, {Name: "n", Value: model.Int(int64(r))}}})
			}
			if _, err := db.Insert(ctx, "m", Batch{Measurements: batch}, InsertOptions{}); err != nil {
				t.Error(err)
				return
			}
			switch r % 97 {
			case 13:
				if _, err := db.Delete(ctx, "m", mustFilter(t, fmt.Sprintf(`{"n": {"$lt": %d}}`, r-300)), DeleteOptions{}); err != nil {
					t.Error(err)
					return
				}
			case 50:
				if err := db.Checkpoint(); err != nil {
					t.Error(err)
					return
				}
			}
		}
		close(stop)
	}()
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			tf := &thawFree{}
			filter := `{}`
			if g == 1 {
				filter = `{"note": {"$gte": "abc"}}`
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				rec, err := db.Aggregate(ctx, "m", AggregateOptions{Filter: mustFilter(t, filter), Window: 600e9, Fields: []string{"v", "n"}, Funcs: []AggFunc{AggSum, AggCount, AggLast}, thaw: tf})
				if err != nil {
					t.Error(err)
					return
				}
				rec.Release()
			}
		}(g)
	}
	wg.Wait()
}

// TestPendingThawCharged: a chunk holds every open bucket's captured
// rows since its last freeze (a column header per field of the bucket,
// copied presence words, and the values of open rows decoded) until its
// series is read; the charge made at the capture
// (pendingThaw.bytes) covers them, however few of the bucket's fields the
// aggregate decodes.
func TestPendingThawCharged(t *testing.T) {
	const series, fields, rows = 20, 300, 70
	db := openTest(t, t.TempDir(), func(o *Options) { o.BucketMaxBytes = 64 << 20 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	base := int64(1_735_689_600e9)
	var batch []model.Measurement
	for r := 0; r < rows; r++ {
		for s := 0; s < series; s++ {
			fs := make([]model.Field, 0, fields)
			for f := 0; f < fields; f++ {
				if f > 0 && (r+f)%2 == 0 {
					continue // absent: presence bitmaps
				}
				fs = append(fs, model.Field{Name: fmt.Sprintf("f%d", f), Value: model.Float(float64(r))})
			}
			batch = append(batch, model.Measurement{Time: base + int64(r)*1e9, Meta: sensor(fmt.Sprintf("s%d", s)), Fields: fs})
		}
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: batch}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	plan := &scanPlan{unordered: true, lazyThaw: true}
	defer plan.close()
	c := db.coll.byName["m"]
	_, st, err := db.planAggregate(plan, c, "m", AggregateOptions{Window: 3600e9, Fields: []string{"f0"}, Funcs: []AggFunc{AggSum}}, guard)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if more, err := st.next(); err != nil || !more {
		t.Fatal(more, err)
	}
	var held, charged int64
	pending := 0
	for _, s := range plan.series {
		for i := range s.thaws {
			th := &s.thaws[i]
			pending++
			held += capturedBytes(&th.tail, false)
			if th.tailDecoded {
				held += columnsBytes(&th.tail) // open rows decoded: their values too
			}
			charged += th.bytes()
		}
	}
	t.Logf("%d series, %d pending thaws: tails held %d bytes (capturedBytes), pendingThaw.bytes charged %d; guard used %d of %d",
		len(plan.series), pending, held, charged, guard.used, guard.limit)
	if pending == 0 {
		t.Fatal("no pending thaw")
	}
	if held > charged {
		t.Errorf("the tails the chunk holds until read, %d bytes, are charged %d", held, charged)
	}
}

// TestRollupMarksEncoded: the marks a checkpoint writes (encodeMarks:
// the map marks, sorted, merged with the bulk's as they are encoded) decode
// to one entry for each series marked in pending, inflight or the bulk,
// and cover every span marked, fills as fills, for random marks (series
// in the maps that the collection does not list among them).
func TestRollupMarksEncoded(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	thawLoad(t, db, 40, 2, 1)
	c := db.coll.byName["m"]
	rng := rand.New(rand.NewSource(3))
	for iter := 0; iter < 3000; iter++ {
		r := &rollup{src: c, pending: map[uint64][]span{}}
		if rng.Intn(2) == 0 {
			r.inflight = map[uint64][]span{}
		}
		randSpans := func(m map[uint64][]span) {
			for k := rng.Intn(10); k > 0; k-- {
				id := uint64(rng.Intn(60)) // some not in byID
				for j := rng.Intn(12); j >= 0; j-- {
					lo := int64(rng.Intn(100))
					m[id] = addSpan(m[id], span{lo, lo + 1 + int64(rng.Intn(10)), rng.Intn(3) == 0})
				}
			}
		}
		randSpans(r.pending)
		if r.inflight != nil {
			randSpans(r.inflight)
		}
		bulk := map[uint64][]span{}
		if rng.Intn(2) == 0 {
			lo := int64(rng.Intn(100))
			r.bulk.span = span{lo, lo + 1 + int64(rng.Intn(30)), rng.Intn(2) == 0}
			for _, s := range c.byID {
				if rng.Intn(3) == 0 {
					r.bulk.bits.set(s.ord)
					r.bulk.n++
				}
			}
			r.addBulk(bulk)
		}
		gm, err := decodeRollupMarks(r.encodeMarks())
		if err != nil {
			t.Fatal(err)
		}
		ids := map[uint64]bool{}
		for _, m := range []map[uint64][]span{r.pending, r.inflight, bulk} {
			for id := range m {
				ids[id] = true
			}
		}
		if len(gm) != len(ids) {
			t.Fatalf("%d series decoded, %d marked", len(gm), len(ids))
		}
		check := func(m map[uint64][]span) {
			for id, ss := range m {
				for _, w := range ss {
					for x := w.lo; x < w.hi; x++ {
						ok := false
						for _, g := range gm[id] {
							if g.lo <= x && x < g.hi && (g.fill || !w.fill) {
								ok = true
							}
						}
						if !ok {
							t.Fatalf("id %d: point %d of input span %v not covered by %v", id, x, w, gm[id])
						}
					}
				}
			}
		}
		check(r.pending)
		check(r.inflight)
		check(bulk)
	}
}
