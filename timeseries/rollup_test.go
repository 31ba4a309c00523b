package timeseries

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/ttl"
)

// rollupRows reads a rollup collection: per "<meta key> <window start>",
// its fields.
func rollupRows(t testing.TB, db *DB, name, metaField string) map[string]map[string]float64 {
	t.Helper()
	cur, err := db.Find(ctx, name, FindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	out := map[string]map[string]float64{}
	for cur.Next() {
		rec := cur.Record()
		sch := rec.Schema()
		for i := 0; i < int(rec.NumRows()); i++ {
			var ts int64
			meta := "-"
			vals := map[string]float64{}
			for c := 0; c < int(rec.NumCols()); c++ {
				col := rec.Column(c)
				if col.IsNull(i) {
					continue
				}
				name := sch.Field(c).Name
				switch a := col.(type) {
				case *array.Timestamp:
					ts = int64(a.Value(i))
				case *array.String:
					if name == metaField {
						meta = a.Value(i)
					}
				case *array.Float64:
					vals[name] = a.Value(i)
				case *array.Int64:
					vals[name] = float64(a.Value(i))
				}
			}
			k := fmt.Sprintf("%s %d", meta, ts)
			if out[k] != nil {
				t.Fatalf("%s: two measurements of %s", name, k)
			}
			out[k] = vals
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// loopRowOf makes a measurement of meta at t with v, and the row a plain
// loop sees.
func loopRowOf(meta string, t int64, v float64) (loopRow, model.Measurement) {
	k, _ := model.CanonicalMeta(meta)
	return loopRow{meta: k, t: t, v: v}, model.Measurement{Time: t, Meta: meta, Fields: []model.Field{{Name: "v", Value: model.Float(v)}}}
}

// randomLoopRow makes a measurement of meta (canonical key) at t of a
// random v and, two times in three, w, and the row a plain loop sees.
func randomLoopRow(rng *rand.Rand, meta any, key string, t int64) (loopRow, model.Measurement) {
	r := loopRow{meta: key, t: t, v: math.Round(rng.NormFloat64()*1000) / 8}
	m := model.Measurement{Time: t, Meta: meta, Fields: []model.Field{{Name: "v", Value: model.Float(r.v)}}}
	if rng.IntN(3) > 0 {
		w := rng.Int64N(100)
		r.w = &w
		m.Fields = append(m.Fields, model.Field{Name: "w", Value: model.Int(w)})
	}
	return r, m
}

// insertSource inserts ms into collection src.
func insertSource(t *testing.T, db *DB, ms []model.Measurement) {
	t.Helper()
	res, err := db.Insert(ctx, "src", Batch{Measurements: ms}, InsertOptions{})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("insert: %v %v", err, res.Errors)
	}
}

// deleteSource deletes what filter selects from collection src, and from
// rows those keep refuses.
func deleteSource(t *testing.T, db *DB, filter string, rows []loopRow, keep func(loopRow) bool) []loopRow {
	t.Helper()
	if _, err := db.Delete(ctx, "src", mustFilter(t, filter), DeleteOptions{}); err != nil {
		t.Fatalf("delete %s: %v", filter, err)
	}
	return slices.DeleteFunc(rows, func(r loopRow) bool { return !keep(r) })
}

// rollupOfSource opens a store with a time-series collection src (time
// t, meta m) and its rollup r of window, fields and funcs; manual stops
// the background passes (Options.ManualRollups).
func rollupOfSource(t *testing.T, manual bool, window string, fields, funcs []string) *DB {
	t.Helper()
	db := openTest(t, t.TempDir(), func(o *Options) { o.ManualRollups = manual })
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m", Granularity: model.GranularitySeconds}
	if _, err := db.CreateCollection(ctx, "src", CollectionOptions{TimeSeries: ts}); err != nil {
		t.Fatal(err)
	}
	opts, err := RollupOptions(ts, RollupSpec{Source: "src", Window: window, Fields: fields, Funcs: funcs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "r", opts); err != nil {
		t.Fatal(err)
	}
	return db
}

// loopRollup computes what a rollup of rows must hold, with a plain loop.
type loopRow struct {
	meta string // canonical key, "-" for none
	t    int64
	v    float64
	w    *int64
}

func loopRollup(rows []loopRow, window int64, fields, funcs []string) map[string]map[string]float64 {
	type cell struct {
		n             int
		sum, min, max float64
		firstT, lastT int64
		first, last   float64
	}
	cells := map[string]map[string]*cell{}
	for _, r := range rows {
		k := fmt.Sprintf("%s %d", r.meta, floorWindow(r.t, window))
		if cells[k] == nil {
			cells[k] = map[string]*cell{}
		}
		for _, f := range fields {
			var x float64
			switch {
			case f == "v":
				x = r.v
			case r.w != nil:
				x = float64(*r.w)
			default:
				if cells[k][f] == nil {
					cells[k][f] = &cell{}
				}
				continue
			}
			c := cells[k][f]
			if c == nil {
				c = &cell{}
				cells[k][f] = c
			}
			if c.n == 0 || x < c.min {
				c.min = x
			}
			if c.n == 0 || x > c.max {
				c.max = x
			}
			if c.n == 0 || r.t < c.firstT {
				c.firstT, c.first = r.t, x
			}
			if c.n == 0 || r.t > c.lastT {
				c.lastT, c.last = r.t, x
			}
			c.n++
			c.sum += x
		}
	}
	out := map[string]map[string]float64{}
	for k, fs := range cells {
		vals := map[string]float64{}
		for f, c := range fs {
			for _, fn := range funcs {
				name := f + "_" + fn
				if fn == "count" {
					vals[name] = float64(c.n)
					continue
				}
				if c.n == 0 {
					continue
				}
				vals[name] = map[string]float64{"sum": c.sum, "avg": c.sum / float64(c.n), "min": c.min, "max": c.max,
					"first": c.first, "last": c.last}[fn]
			}
		}
		out[k] = vals
	}
	return out
}

func sameRollup(t testing.TB, when string, got, want map[string]map[string]float64) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Fatalf("%s: rollup lacks %s (want %v)", when, k, w)
		}
		for f, x := range w {
			y, ok := g[f]
			if !ok || math.Abs(x-y) > 1e-9*max(1, math.Abs(x)) {
				t.Fatalf("%s: %s %s = %v (present %v), want %v", when, k, f, y, ok, x)
			}
		}
		if len(g) != len(w) {
			t.Fatalf("%s: %s holds %v, want %v", when, k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Fatalf("%s: rollup holds %s = %v, which the source does not", when, k, got[k])
		}
	}
}

// TestRollupMatchesLoop checks a rollup against a plain loop over the
// source's rows, on random data: late and out-of-order measurements,
// deletes by series, by time and by value, series without a meta value
// and an int32 meta value beside the int64 of the same number, the
// rollup created over existing data, caught up at random moments, and
// after a checkpoint and a restart.
func TestRollupMatchesLoop(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testRollupMatchesLoop(t, seed) })
	}
}

func testRollupMatchesLoop(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	defer func() { db.Close() }()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m", Granularity: model.GranularitySeconds}
	if _, err := db.CreateCollection(ctx, "src", CollectionOptions{TimeSeries: ts}); err != nil {
		t.Fatal(err)
	}
	metas := []any{"a", "b", map[string]any{"site": "n", "id": int64(3)}, int32(5), int64(5), nil}
	keys := make([]string, len(metas))
	for i, m := range metas {
		keys[i] = "-"
		if m != nil {
			k, err := model.CanonicalMeta(m)
			if err != nil {
				t.Fatal(err)
			}
			keys[i] = k
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	const window = int64(10 * time.Second)
	var rows []loopRow
	used := map[string]bool{}
	insert := func(n int) {
		var ms []model.Measurement
		for range n {
			i := rng.IntN(len(metas))
			var tt int64
			for {
				tt = t0 + rng.Int64N(int64(300*time.Second))/int64(time.Millisecond)*int64(time.Millisecond)
				if k := fmt.Sprint(i, tt); !used[k] {
					used[k] = true
					break
				}
			}
			r, m := randomLoopRow(rng, metas[i], keys[i], tt)
			rows = append(rows, r)
			ms = append(ms, m)
		}
		insertSource(t, db, ms)
	}
	del := func() {
		var filter string
		var keep func(r loopRow) bool
		switch rng.IntN(3) {
		case 0: // a series
			i := rng.IntN(3)
			filter = fmt.Sprintf(`{"m": %s}`, keys[i])
			keep = func(r loopRow) bool { return r.meta != keys[i] }
		case 1: // a time range
			lo := t0 + rng.Int64N(int64(300*time.Second))
			hi := lo + rng.Int64N(int64(30*time.Second))
			filter = fmt.Sprintf(`{"t": {"$gte": {"$date": {"$numberLong": "%d"}}, "$lt": {"$date": {"$numberLong": "%d"}}}}`, lo/1e6, hi/1e6)
			keep = func(r loopRow) bool { return r.t < lo/1e6*1e6 || r.t >= hi/1e6*1e6 }
		default: // by value
			x := math.Round(rng.NormFloat64() * 200)
			filter = fmt.Sprintf(`{"v": {"$gt": %v}}`, x+1000)
			keep = func(r loopRow) bool { return r.v <= x+1000 }
		}
		rows = deleteSource(t, db, filter, rows, keep)
	}
	fields, funcs := []string{"v", "w"}, []string{"count", "sum", "avg", "min", "max", "first", "last"}
	check := func(when string) {
		t.Helper()
		if err := db.CatchUpRollups(ctx); err != nil {
			t.Fatalf("%s: catch up: %v", when, err)
		}
		sameRollup(t, when, rollupRows(t, db, "r10s", "m"), loopRollup(rows, window, fields, funcs))
	}

	insert(200)
	opts, err := RollupOptions(ts, RollupSpec{Source: "src", Window: "10s", Fields: fields, Funcs: funcs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if created, err := db.CreateCollection(ctx, "r10s", opts); err != nil || !created {
		t.Fatalf("create rollup: %v, %v", created, err)
	}
	check("existing data")
	for step := range 30 {
		switch rng.IntN(4) {
		case 0:
			del()
		default:
			insert(1 + rng.IntN(40))
		}
		if rng.IntN(3) == 0 {
			check(fmt.Sprintf("step %d", step))
		}
		if rng.IntN(8) == 0 {
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	check("the end")
	// Marks not yet recomputed survive a restart: written, then closed
	// before the rollup loop can run.
	insert(30)
	del()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	check("after a restart")
}

// TestRollupRefusals: bad input is BadValue (2) and creates nothing; a
// name taken by another collection is 48; the same rollup again is no
// change.
func TestRollupRefusals(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}
	if _, err := db.CreateCollection(ctx, "src", CollectionOptions{TimeSeries: ts}); err != nil {
		t.Fatal(err)
	}
	res, err := db.Insert(ctx, "src", Batch{Measurements: []model.Measurement{{Time: 1e18, Meta: "a", Fields: []model.Field{{Name: "temp", Value: model.Float(1)}}}}}, InsertOptions{})
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	if _, err := db.CreateCollection(ctx, "plain", CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	good := RollupSpec{Source: "src", Window: "1h", Fields: []string{"temp"}, Funcs: []string{"avg"}}
	for _, c := range []struct {
		name string
		spec RollupSpec
		code mongoerr.Code
		msg  string
	}{
		{"r", RollupSpec{Source: "src", Window: "1x", Fields: []string{"temp"}, Funcs: []string{"avg"}}, mongoerr.BadValue, "invalid rollup window"},
		{"r", RollupSpec{Source: "src", Window: "500ms", Fields: []string{"temp"}, Funcs: []string{"avg"}}, mongoerr.BadValue, "whole seconds"},
		{"r", RollupSpec{Source: "src", Window: "400d", Fields: []string{"temp"}, Funcs: []string{"avg"}}, mongoerr.BadValue, "invalid rollup window"},
		{"r", RollupSpec{Source: "src", Window: "1h", Fields: []string{"temp"}, Funcs: []string{"median"}}, mongoerr.BadValue, "unknown rollup func"},
		{"r", RollupSpec{Source: "src", Window: "1h", Fields: []string{"pressure"}, Funcs: []string{"avg"}}, mongoerr.BadValue, "unknown rollup field"},
		{"r", RollupSpec{Source: "src", Window: "1h", Fields: []string{"t"}, Funcs: []string{"avg"}}, mongoerr.BadValue, "not aggregated"},
		{"r", RollupSpec{Source: "src", Window: "1h", Fields: nil, Funcs: []string{"avg"}}, mongoerr.BadValue, "at least one field"},
		{"r", RollupSpec{Source: "src", Window: "1h", Fields: []string{"temp"}, Funcs: []string{"avg"},
			PartialFilterExpression: map[string]any{"temp": map[string]any{"$gt": 1.0}}}, mongoerr.BadValue, "only refer to the metaField"},
		{"r", RollupSpec{Source: "missing", Window: "1h", Fields: []string{"temp"}, Funcs: []string{"avg"}}, mongoerr.NamespaceNotFound, "does not exist"},
		{"plain", good, mongoerr.NamespaceExists, "already exists"},
		{"src", good, mongoerr.NamespaceExists, "already exists"},
	} {
		opts, err := RollupOptions(ts, c.spec, nil)
		if err == nil {
			_, err = db.CreateCollection(ctx, c.name, opts)
		}
		if mongoerr.CodeOf(err) != c.code || !strings.Contains(mongoerr.MessageOf(err), c.msg) {
			t.Errorf("%s %+v: %v, want code %d with %q", c.name, c.spec, err, c.code, c.msg)
		}
		if c.name == "r" {
			if _, err := db.Describe(ctx, "r"); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
				t.Fatalf("%+v: a refused rollup made a collection: %v", c.spec, err)
			}
		}
	}
	opts, err := RollupOptions(ts, good, nil)
	if err != nil {
		t.Fatal(err)
	}
	if created, err := db.CreateCollection(ctx, "r", opts); !created || err != nil {
		t.Fatal(created, err)
	}
	if created, err := db.CreateCollection(ctx, "r", opts); created || err != nil {
		t.Fatalf("the same rollup again: %v, %v", created, err)
	}
	other := good
	other.Funcs = []string{"max"}
	opts2, _ := RollupOptions(ts, other, nil)
	if _, err := db.CreateCollection(ctx, "r", opts2); mongoerr.CodeOf(err) != mongoerr.NamespaceExists {
		t.Fatalf("another rollup of the same name: %v", err)
	}
	// A source dropped and made again is another collection: the old
	// rollup is not its rollup, and keeps its name.
	if err := db.DropCollection(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "src", CollectionOptions{TimeSeries: ts}); err != nil {
		t.Fatal(err)
	}
	if rs, err := db.ListRollups(ctx, "src"); err != nil || len(rs) != 0 {
		t.Fatalf("rollups of the new source: %v, %v", rs, err)
	}
	if _, err := db.CreateCollection(ctx, "r", opts); mongoerr.CodeOf(err) != mongoerr.NamespaceExists {
		t.Fatalf("the old rollup's name for the new source: %v", err)
	}
}

// TestRollupMarksPersist: a checkpoint writes the windows still to
// recompute, and a restart takes them up, those and no others; a rollup
// with no marks written yet (created, then a crash) is filled whole.
func TestRollupMarksPersist(t *testing.T) {
	dir := t.TempDir()
	manual := func(o *Options) { o.ManualRollups = true }
	db := openTest(t, dir, manual)
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}
	if _, err := db.CreateCollection(ctx, "src", CollectionOptions{TimeSeries: ts}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	write := func(db *DB, meta string, at int64) {
		t.Helper()
		res, err := db.Insert(ctx, "src", Batch{Measurements: []model.Measurement{{Time: at, Meta: meta, Fields: []model.Field{{Name: "v", Value: model.Float(1)}}}}}, InsertOptions{})
		if err != nil || len(res.Errors) > 0 {
			t.Fatal(err, res.Errors)
		}
	}
	for i, m := range []string{"a", "b", "c"} {
		write(db, m, t0+int64(i)*int64(time.Minute))
	}
	opts, err := RollupOptions(ts, RollupSpec{Source: "src", Window: "1m", Fields: []string{"v"}, Funcs: []string{"count"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "r", opts); err != nil {
		t.Fatal(err)
	}
	pending := func(db *DB) int {
		t.Helper()
		rs, err := db.ListRollups(ctx, "src")
		if err != nil || len(rs) != 1 {
			t.Fatal(rs, err)
		}
		return rs[0].PendingSeries
	}
	if n := pending(db); n != 3 {
		t.Fatalf("a new rollup has %d series to fill, want 3", n)
	}
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	write(db, "b", t0+int64(90*time.Second))
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rc, err := db.lookup("r")
	if err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.pdb.Get(rollupMarksKey(rc.id))
	if err != nil {
		t.Fatalf("no marks written by the checkpoint: %v", err)
	}
	marks, err := decodeRollupMarks(v)
	closer.Close()
	if err != nil || len(marks) != 1 {
		t.Fatalf("marks %v, %v; want b's", marks, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, manual)
	defer db.Close()
	if n := pending(db); n != 1 {
		t.Fatalf("after a restart %d series to recompute, want 1", n)
	}
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	got := rollupRows(t, db, "r", "m")
	if len(got) != 3 || got[fmt.Sprintf(`"b" %d`, t0+int64(time.Minute))]["v_count"] != 2 {
		t.Fatalf("rollup %v", got)
	}
}

// TestRollupOutlivesExpiry: the source's expiry never changes a rollup.
// Once the raw data is gone the rollup still holds its windows, a delete
// of the expired range and a late measurement into it leave them as they
// are, and the rollup's own TTL expires it on its own schedule.
func TestRollupOutlivesExpiry(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := newTestClock(t0.Add(2 * time.Hour))
	dir := t.TempDir()
	db := openTTL(t, dir, clock, int64p(3*3600))
	defer db.Close()
	insertMinutes(t, db, t0, 120, "a", "b") // two hours a sensor, a minute apart
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor"}
	opts, err := RollupOptions(ts, RollupSpec{Source: "s", Window: "1h", Fields: []string{"v"}, Funcs: []string{"count", "sum"}}, int64p(30*86400))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "hourly", opts); err != nil {
		t.Fatal(err)
	}
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]float64{}
	for _, s := range []string{`"a"`, `"b"`} {
		want[fmt.Sprintf("%s %d", s, t0.UnixNano())] = map[string]float64{"v_count": 60, "v_sum": 59 * 60 / 2}
		want[fmt.Sprintf("%s %d", s, t0.Add(time.Hour).UnixNano())] = map[string]float64{"v_count": 60, "v_sum": (60 + 119) * 60 / 2}
	}
	sameRollup(t, "filled", rollupRows(t, db, "hourly", "sensor"), want)

	// A day later the raw data is gone; the dry run says which rollup
	// keeps it.
	clock.Advance(24 * time.Hour)
	p, err := db.PreviewTTL(ctx, "s", TTLProposal{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rollups) != 1 || p.Rollups[0].Name != "hourly" || p.Rollups[0].Sensors != 2 || p.Rollups[0].Window != "1h" ||
		*p.Rollups[0].ExpireAfterSeconds != 30*86400 {
		t.Fatalf("dry run rollups: %+v", p.Rollups)
	}
	if b := expireAll(t, db, clock.Now()); b.Docs == 0 {
		t.Fatal("nothing expired")
	}
	if n := countRows(t, db, `{}`); n != 0 {
		t.Fatalf("%d raw measurements left", n)
	}
	// A delete of the expired range, and a late measurement into it.
	if _, err := db.Delete(ctx, "s", mustFilter(t, `{"sensor": "a"}`), DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	insertMinutes(t, db, t0.Add(30*time.Minute), 1, "b")
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	sameRollup(t, "after the source expired", rollupRows(t, db, "hourly", "sensor"), want)
	// The rollup's own TTL: 30 days.
	clock.Advance(31 * 24 * time.Hour)
	for _, tg := range mustTargets(t, db) {
		if tg.Collection != "hourly" {
			continue
		}
		if _, err := db.Expire(ctx, tg, clock.Now(), ttl.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := rollupRows(t, db, "hourly", "sensor"); len(got) != 0 {
		t.Fatalf("the rollup's TTL left %v", got)
	}
}

func mustTargets(t *testing.T, db *DB) []ttl.Target {
	t.Helper()
	tg, err := db.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestRollupPowerLoss cuts the power at random points of a rollup's life
// (during its recomputations too: the rollup loop runs in the background,
// and during inserts), and checks after each restart that the rollup,
// once caught up, holds exactly the aggregates of what the source holds:
// no window lost, none counted twice.
// createMinuteRollup creates the time series "src" (timeField t,
// metaField m) and "r", its rollup of fields by funcs in 1 m windows.
func createMinuteRollup(t *testing.T, db *DB, fields, funcs []string) {
	t.Helper()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m", Granularity: model.GranularitySeconds}
	if _, err := db.CreateCollection(ctx, "src", CollectionOptions{TimeSeries: ts}); err != nil {
		t.Fatal(err)
	}
	opts, err := RollupOptions(ts, RollupSpec{Source: "src", Window: "1m", Fields: fields, Funcs: funcs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "r", opts); err != nil {
		t.Fatal(err)
	}
}

func TestRollupPowerLoss(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testRollupPowerLoss(t, seed) })
	}
}

func testRollupPowerLoss(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	fs := vfs.NewStrictMem()
	open := func() *DB {
		db, err := Open(Options{Dir: "/data", FS: fs, CheckpointInterval: time.Hour, LogSegmentSize: 16 << 10, BucketMaxCount: 16})
		if err != nil {
			t.Fatalf("seed %d: open: %v", seed, err)
		}
		return db
	}
	db := open()
	defer func() { db.Close() }()
	fields, funcs := []string{"v"}, []string{"count", "sum", "min", "max", "first", "last"}
	createMinuteRollup(t, db, fields, funcs)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	next := int64(0)
	batch := func() []model.Measurement {
		ms := make([]model.Measurement, 1+rng.IntN(60))
		for i := range ms {
			next++
			ms[i] = model.Measurement{Time: t0 + rng.Int64N(int64(20*time.Minute))/1e6*1e6 + next, Meta: fmt.Sprintf("s%d", rng.IntN(5)),
				Fields: []model.Field{{Name: "v", Value: model.Float(float64(next % 97))}}}
		}
		return ms
	}
	// source reads the source back as loop rows.
	source := func() []loopRow {
		var rows []loopRow
		cur, err := db.Find(ctx, "src", FindOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer cur.Close()
		for cur.Next() {
			rec := cur.Record()
			tcol, mcol := rec.Column(0).(*array.Timestamp), rec.Column(1).(*array.String)
			var vcol *array.Float64
			for c := range int(rec.NumCols()) {
				if rec.Schema().Field(c).Name == "v" {
					vcol = rec.Column(c).(*array.Float64)
				}
			}
			for i := range int(rec.NumRows()) {
				rows = append(rows, loopRow{meta: mcol.Value(i), t: int64(tcol.Value(i)), v: vcol.Value(i)})
			}
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	for step := range 40 {
		switch op := rng.IntN(10); {
		case op < 6:
			if _, err := db.Insert(ctx, "src", Batch{Measurements: batch()}, InsertOptions{}); err != nil {
				t.Fatal(err)
			}
		case op < 7:
			filter := fmt.Sprintf(`{"m": "s%d", "v": {"$lt": %d}}`, rng.IntN(5), rng.IntN(97))
			if _, err := db.Delete(ctx, "src", mustFilter(t, filter), DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		case op < 8:
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		default:
			// The power goes: perhaps during an insert, with the rollup
			// loop perhaps recomputing.
			done := make(chan struct{})
			if rng.IntN(2) == 0 {
				ms, d := batch(), db
				go func() { d.Insert(ctx, "src", Batch{Measurements: ms}, InsertOptions{}); close(done) }()
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			} else {
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				close(done)
			}
			fs.SetIgnoreSyncs(true)
			<-done
			db.Close()
			fs.ResetToSyncedState()
			fs.SetIgnoreSyncs(false)
			db = open()
			if err := db.CatchUpRollups(ctx); err != nil {
				t.Fatal(err)
			}
			sameRollup(t, fmt.Sprintf("seed %d step %d, after a power cut", seed, step),
				rollupRows(t, db, "r", "m"), loopRollup(source(), int64(time.Minute), fields, funcs))
		}
	}
}

// TestRollupCutBetweenDeleteAndInsert cuts the power after a pass has
// logged the delete of a range and before it inserts the range's new
// measurements. The pass's range spans its group: s0 and s1 written in
// turn to adjacent windows are marked together (the bulk), so s0's range
// holds window 2, which its own new rows do not reach and whose rollup
// measurement the delete removes. Replayed, the same writes mark s0 alone
// (s1's earlier write began a bulk that s0's window is before), so only
// the replayed delete can say window 2 is to be recomputed
// (remarkRollup); without it the rollup lacked s0's window 2.
func TestRollupCutBetweenDeleteAndInsert(t *testing.T) {
	fs := vfs.NewStrictMem()
	open := func() *DB {
		db, err := Open(Options{Dir: "/data", FS: fs, CheckpointInterval: time.Hour, ManualRollups: true})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	defer func() { db.Close() }()
	fields, funcs := []string{"v"}, []string{"count", "sum"}
	createMinuteRollup(t, db, fields, funcs)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rows []loopRow
	insert := func(meta string, window, sec int64) {
		t.Helper()
		tm := t0 + window*int64(time.Minute) + sec*int64(time.Second)
		v := float64(len(rows) + 1)
		if _, err := db.Insert(ctx, "src", Batch{Measurements: []model.Measurement{{Time: tm, Meta: meta,
			Fields: []model.Field{{Name: "v", Value: model.Float(v)}}}}}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		k, _ := model.CanonicalMeta(meta)
		rows = append(rows, loopRow{meta: k, t: tm, v: v})
	}
	catchUp := func() {
		t.Helper()
		if err := db.CatchUpRollups(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for w := range int64(3) {
		insert("s0", w, 10)
	}
	catchUp()
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	insert("s1", 2, 20)
	catchUp()
	insert("s0", 1, 30)
	insert("s1", 2, 40)
	cut := false
	db.hooks.rollupDeleted = func() {
		if !cut {
			cut = true
			fs.SetIgnoreSyncs(true)
		}
	}
	catchUp()
	if !cut {
		t.Fatal("no pass deleted a range")
	}
	db.Close()
	fs.ResetToSyncedState()
	fs.SetIgnoreSyncs(false)
	db = open()
	catchUp()
	sameRollup(t, "after a cut between a pass's delete and insert", rollupRows(t, db, "r", "m"), loopRollup(rows, int64(time.Minute), fields, funcs))
}

// BenchmarkRollup loads 30 days of a minute-by-minute fleet (b.N is
// ignored by the load: 200 sensors, 8.6M measurements), then times a
// rollup's first fill (catch-up, in source points per second) and the
// 30-day hourly chart read from the raw data (aggregate) against the same
// read from the rollup (find):
//
//	go test -run x -bench BenchmarkRollup -benchtime 10x ./timeseries
func BenchmarkRollup(b *testing.B) {
	const sensors, days = 200, 30
	db := openTest(b, b.TempDir(), func(o *Options) { o.ManualRollups = true })
	defer db.Close()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m", Granularity: model.GranularityMinutes}
	if _, err := db.CreateCollection(ctx, "src", CollectionOptions{TimeSeries: ts}); err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	minutes := days * 24 * 60
	rng := rand.New(rand.NewPCG(1, 2))
	for day := range days {
		ms := make([]model.Measurement, 0, sensors*24*60)
		for m := day * 24 * 60; m < (day+1)*24*60; m++ {
			for s := range sensors {
				ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(m) * time.Minute).UnixNano(), Meta: fmt.Sprintf("s%03d", s),
					Fields: []model.Field{{Name: "temp", Value: model.Float(20 + rng.NormFloat64())}}})
			}
		}
		if res, err := db.Insert(ctx, "src", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
			b.Fatal(err, res.Errors)
		}
	}
	if err := db.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	points := float64(sensors * minutes)
	funcs := []string{"min", "avg", "max"}
	opts, err := RollupOptions(ts, RollupSpec{Source: "src", Window: "1h", Fields: []string{"temp"}, Funcs: funcs}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "hourly", opts); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := db.CatchUpRollups(ctx); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	b.Logf("first fill of %.0f points: %v, %.2fM points/s", points, took, points/took.Seconds()/1e6)
	rows := func(cur *Cursor, err error) int {
		if err != nil {
			b.Fatal(err)
		}
		defer cur.Close()
		n := 0
		for cur.Next() {
			n += int(cur.Record().NumRows())
		}
		if err := cur.Err(); err != nil {
			b.Fatal(err)
		}
		return n
	}
	b.Run("raw aggregate", func(b *testing.B) {
		for range b.N {
			rec, err := db.Aggregate(ctx, "src", AggregateOptions{Window: time.Hour, Fields: []string{"temp"}, Funcs: []AggFunc{AggMin, AggAvg, AggMax}})
			if err != nil {
				b.Fatal(err)
			}
			if n := rec.NumRows(); n != sensors*days*24 {
				b.Fatalf("%d rows", n)
			}
			rec.Release()
		}
	})
	b.Run("rollup find", func(b *testing.B) {
		for range b.N {
			if n := rows(db.Find(ctx, "hourly", FindOptions{})); n != sensors*days*24 {
				b.Fatalf("%d rows", n)
			}
		}
	})
}

// TestRollupDeleteReplayedFindsNothing: a delete whose rewrite of the
// stored buckets reached the disk (another collection's create flushed
// the store) before the power went, its marks lost with memory, finds
// nothing to delete when the log replays it; the rollup must still learn
// of it.
func TestRollupDeleteReplayedFindsNothing(t *testing.T) {
	fs := vfs.NewStrictMem()
	open := func() *DB {
		db, err := Open(Options{Dir: "/data", FS: fs, CheckpointInterval: time.Hour, ManualRollups: true, BucketMaxCount: 4})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}
	if _, err := db.CreateCollection(ctx, "src", CollectionOptions{TimeSeries: ts}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var ms []model.Measurement
	for i := range 10 {
		ms = append(ms, model.Measurement{Time: t0 + int64(i)*int64(time.Second), Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Float(float64(i))}}})
	}
	if _, err := db.Insert(ctx, "src", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	opts, err := RollupOptions(ts, RollupSpec{Source: "src", Window: "1m", Fields: []string{"v"}, Funcs: []string{"count"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "r", opts); err != nil {
		t.Fatal(err)
	}
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "src", mustFilter(t, `{"v": {"$lt": 4}}`), DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "other", CollectionOptions{}); err != nil { // flushes the store
		t.Fatal(err)
	}
	fs.SetIgnoreSyncs(true)
	db.Close()
	fs.ResetToSyncedState()
	fs.SetIgnoreSyncs(false)
	db = open()
	defer db.Close()
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rollupRows(t, db, "r", "m")[fmt.Sprintf(`"a" %d`, t0)]["v_count"]; got != 6 {
		t.Fatalf("the rollup counts %v, want the 6 left", got)
	}
}

// BenchmarkIngestWithRollups times inserts of a 10,000-sensor fleet (a
// batch of 5,000 rows an op, a row per sensor every 10 s, in time order)
// into a collection without rollups and into one with a 1m and a 1h
// rollup kept current in the background, for the ingest cost of rollups
// as a ratio in one run:
//
//	go test -run x -bench BenchmarkIngestWithRollups -count 4 ./timeseries
func BenchmarkIngestWithRollups(b *testing.B) {
	const sensors = 10000
	for _, n := range []int{0, 2} {
		b.Run(fmt.Sprintf("rollups=%d", n), func(b *testing.B) {
			db := openTest(b, b.TempDir(), nil)
			defer db.Close()
			ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}
			if _, err := db.CreateCollection(ctx, "src", CollectionOptions{TimeSeries: ts}); err != nil {
				b.Fatal(err)
			}
			for _, w := range []string{"1m", "1h"}[:n] {
				opts, err := RollupOptions(ts, RollupSpec{Source: "src", Window: w, Fields: []string{"v"}, Funcs: []string{"min", "avg", "max", "count"}}, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := db.CreateCollection(ctx, "r"+w, opts); err != nil {
					b.Fatal(err)
				}
			}
			metas := make([]model.MetaKey, sensors)
			for i := range metas {
				k, _ := model.CanonicalMeta(fmt.Sprintf("s%05d", i))
				metas[i] = model.MetaKey(k)
			}
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			ms := make([]model.Measurement, 5000)
			row := 0
			b.ResetTimer()
			for range b.N {
				for i := range ms {
					s := row % sensors
					ms[i] = model.Measurement{Time: t0 + int64(row/sensors)*int64(10*time.Second) + int64(s), Meta: metas[s],
						Fields: []model.Field{{Name: "v", Value: model.Float(float64(row % 1000))}}}
					row++
				}
				if _, err := db.Insert(ctx, "src", Batch{Measurements: ms}, InsertOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*len(ms))/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// TestRollupFoldsMatchLoop checks the rollups a pass keeps by folding new
// rows into each series' newest window (rollupTail) against a plain loop:
// sensors writing in time order with late rows among them, deletes of
// recent and old times, a meta update merging one sensor into another,
// checkpoints and a restart, caught up after most steps. Three rollups of
// one source: every func, first and last alone (read by the ends only),
// and count alone (which keeps no tails).
func TestRollupFoldsMatchLoop(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testRollupFoldsMatchLoop(t, seed) })
	}
}

func testRollupFoldsMatchLoop(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	defer func() { db.Close() }()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m", Granularity: model.GranularitySeconds}
	if _, err := db.CreateCollection(ctx, "src", CollectionOptions{TimeSeries: ts}); err != nil {
		t.Fatal(err)
	}
	metas := []string{"a", "b", "c", "d", "e"}
	keys := make([]string, len(metas))
	for i, m := range metas {
		k, err := model.CanonicalMeta(m)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	const window = int64(10 * time.Second)
	clock := make([]int64, len(metas))
	for i := range clock {
		clock[i] = t0
	}
	var rows []loopRow
	used := map[int64]bool{}
	insert := func(n int) {
		var ms []model.Measurement
		for range n {
			i := rng.IntN(len(metas))
			var tt int64
			for {
				if rng.IntN(10) == 0 && clock[i] > t0 {
					// A late row: up to a minute back.
					tt = max(t0, clock[i]-rng.Int64N(int64(time.Minute)))
				} else {
					clock[i] += rng.Int64N(int64(3 * time.Second))
					tt = clock[i]
				}
				tt = tt / int64(time.Millisecond) * int64(time.Millisecond)
				// Times unique over all sensors: a meta update merging
				// two makes no two rows of one time (first and last
				// would be ambiguous).
				if !used[tt] {
					used[tt] = true
					break
				}
			}
			r, m := randomLoopRow(rng, metas[i], keys[i], tt)
			rows = append(rows, r)
			ms = append(ms, m)
		}
		insertSource(t, db, ms)
	}
	del := func() {
		var filter string
		var keep func(r loopRow) bool
		now := slices.Max(clock)
		switch rng.IntN(3) {
		case 0: // the last seconds of one sensor
			i := rng.IntN(len(metas))
			lo := clock[i] - rng.Int64N(int64(5*time.Second))
			filter = fmt.Sprintf(`{"m": %s, "t": {"$gte": {"$date": {"$numberLong": "%d"}}}}`, keys[i], lo/1e6)
			keep = func(r loopRow) bool { return r.meta != keys[i] || r.t < lo/1e6*1e6 }
		case 1: // a range of time
			lo := t0 + rng.Int64N(max(1, now-t0))
			hi := lo + rng.Int64N(int64(20*time.Second))
			filter = fmt.Sprintf(`{"t": {"$gte": {"$date": {"$numberLong": "%d"}}, "$lt": {"$date": {"$numberLong": "%d"}}}}`, lo/1e6, hi/1e6)
			keep = func(r loopRow) bool { return r.t < lo/1e6*1e6 || r.t >= hi/1e6*1e6 }
		default: // by value
			x := math.Round(rng.NormFloat64() * 200)
			filter = fmt.Sprintf(`{"v": {"$gt": %v}}`, x+600)
			keep = func(r loopRow) bool { return r.v <= x+600 }
		}
		rows = deleteSource(t, db, filter, rows, keep)
	}
	merge := func() {
		// Sensor i's rows become sensor j's; i starts again after j's clock.
		i, j := rng.IntN(len(metas)), rng.IntN(len(metas))
		if i == j {
			return
		}
		u := Update{Filter: mustFilter(t, fmt.Sprintf(`{"m": %s}`, keys[i])), Operators: mustUpdate(t, fmt.Sprintf(`{"$set": {"m": %s}}`, keys[j])), Multi: true}
		if _, err := db.Update(ctx, "src", u); err != nil {
			t.Fatalf("meta update: %v", err)
		}
		for k := range rows {
			if rows[k].meta == keys[i] {
				rows[k].meta = keys[j]
			}
		}
		clock[j] = max(clock[i], clock[j])
		clock[i] = clock[j]
	}
	type spec struct {
		name   string
		funcs  []string
		fields []string
	}
	specs := []spec{
		{"rall", []string{"count", "sum", "avg", "min", "max", "first", "last"}, []string{"v", "w"}},
		{"rends", []string{"first", "last"}, []string{"v"}},
		{"rcount", []string{"count"}, []string{"v", "w"}},
	}
	check := func(when string) {
		t.Helper()
		// Sometimes passes out of time first: each does its first group
		// and leaves the others.
		for range rng.IntN(3) {
			if _, err := db.rollupPasses(ctx, time.Now().Add(-time.Second)); err != nil {
				t.Fatalf("%s: a pass out of time: %v", when, err)
			}
		}
		if err := db.CatchUpRollups(ctx); err != nil {
			t.Fatalf("%s: catch up: %v", when, err)
		}
		for _, sp := range specs {
			sameRollup(t, when+" "+sp.name, rollupRows(t, db, sp.name, "m"), loopRollup(rows, window, sp.fields, sp.funcs))
		}
	}
	insert(50)
	for _, sp := range specs {
		opts, err := RollupOptions(ts, RollupSpec{Source: "src", Window: "10s", Fields: sp.fields, Funcs: sp.funcs}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateCollection(ctx, sp.name, opts); err != nil {
			t.Fatal(err)
		}
	}
	check("existing data")
	for step := range 120 {
		switch x := rng.IntN(20); {
		case x == 0:
			merge()
		case x < 3:
			del()
		default:
			insert(1 + rng.IntN(12))
		}
		if rng.IntN(4) > 0 {
			check(fmt.Sprintf("step %d", step))
		}
		if rng.IntN(16) == 0 {
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
		if step == 60 {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openTest(t, dir, nil)
		}
	}
	check("the end")
	if n := db.stats.rollupFolds.Load(); n < 20 {
		t.Fatalf("%d series folded: the test no longer reaches the fold", n)
	}
}

// TestRollupFoldLateRowDuringPass: a late row written while a pass
// aggregates (after its read, before the next) reaches the window of the
// tail that pass leaves; the next pass must read that window whole, not
// fold into the tail, or the row is lost. Then writes racing passes.
func TestRollupFoldLateRowDuringPass(t *testing.T) {
	fields, funcs := []string{"v"}, []string{"count", "sum", "first", "last"}
	db := rollupOfSource(t, false, "1m", fields, funcs)
	defer db.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var mu sync.Mutex
	var rows []loopRow
	insert := func(meta string, s int64) {
		tt := t0 + s*int64(time.Millisecond)
		v := float64(s % 1000)
		res, err := db.Insert(ctx, "src", Batch{Measurements: []model.Measurement{{Time: tt, Meta: meta, Fields: []model.Field{{Name: "v", Value: model.Float(v)}}}}}, InsertOptions{})
		if err != nil || len(res.Errors) > 0 {
			t.Errorf("insert: %v %v", err, res.Errors)
			return
		}
		k, _ := model.CanonicalMeta(meta)
		mu.Lock()
		rows = append(rows, loopRow{meta: k, t: tt, v: v})
		mu.Unlock()
	}
	check := func(when string) {
		t.Helper()
		if err := db.CatchUpRollups(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		sameRollup(t, when, rollupRows(t, db, "r", "m"), loopRollup(rows, int64(time.Minute), fields, funcs))
	}
	for s := int64(0); s < 20; s++ {
		insert("a", s*1000)
	}
	check("in order")
	insert("a", 25_000)
	late := true
	db.hooks.rollupAggregated = func() {
		if late {
			late = false
			insert("a", 22_500) // before the newest value the pass saw
		}
	}
	check("a late row during a pass")
	db.hooks.rollupAggregated = nil
	if late {
		t.Fatal("no pass aggregated")
	}
	folds := db.stats.rollupFolds.Load()

	// Writes racing the passes: in order, with late rows among them.
	var wg sync.WaitGroup
	for g, meta := range []string{"b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); i < 400; i++ {
				s := 30_000 + i*500 + int64(g)
				if i%7 == 3 {
					s -= 4_000 // late
				}
				insert(meta, s)
			}
		}()
	}
	stop := make(chan struct{})
	passes := make(chan struct{})
	go func() {
		defer close(passes)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.CatchUpRollups(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-passes
	check("writes racing passes")
	// Whether the racing passes folded depends on where the late rows
	// fell; one more row in order after them folds.
	insert("b", 30_000+400*500+250)
	check("a row in order after the race")
	if db.stats.rollupFolds.Load() == folds {
		t.Fatal("no fold after the race")
	}
}

// TestRollupPassDeadline: a pass of the background loop past its deadline
// recomputes a chunk of series and leaves the others' marks for the next
// (whose tails it keeps); passes after it finish the work, and the rollup
// matches the loop.
func TestRollupPassDeadline(t *testing.T) {
	fields, funcs := []string{"v", "w"}, []string{"count", "avg", "max"}
	db := rollupOfSource(t, true, "1m", fields, funcs)
	defer db.Close()
	const sensors = 3 * rollupDeadlineChunk / 2
	rng := rand.New(rand.NewPCG(3, 3))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rows []loopRow
	insert := func(tick int64) {
		var ms []model.Measurement
		for i := range sensors {
			meta := fmt.Sprintf("s%04d", i)
			k, _ := model.CanonicalMeta(meta)
			r, m := randomLoopRow(rng, meta, k, t0+tick*int64(10*time.Second))
			rows = append(rows, r)
			ms = append(ms, m)
		}
		insertSource(t, db, ms)
	}
	pending := func() int {
		infos, err := db.ListRollups(ctx, "src")
		if err != nil || len(infos) != 1 {
			t.Fatal(infos, err)
		}
		return infos[0].PendingSeries
	}
	for tick := range int64(3) {
		insert(tick)
		passes := 0
		for ; pending() > 0; passes++ {
			n, err := db.rollupPasses(ctx, time.Now().Add(-time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if passes == 0 && (n != rollupDeadlineChunk || pending() != sensors-rollupDeadlineChunk) {
				t.Fatalf("tick %d: a pass past its deadline recomputed %d series and left %d; want %d and %d", tick, n, pending(), rollupDeadlineChunk, sensors-rollupDeadlineChunk)
			}
		}
		if passes != 2 {
			t.Fatalf("tick %d: %d passes, want 2", tick, passes)
		}
		sameRollup(t, fmt.Sprintf("tick %d", tick), rollupRows(t, db, "r", "m"), loopRollup(rows, int64(time.Minute), fields, funcs))
	}
	// Every series folds at the second and third ticks, those a pass left
	// too.
	if n := db.stats.rollupFolds.Load(); n != 2*sensors {
		t.Fatalf("%d folds, want %d: the series left by a pass lost their tails", n, 2*sensors)
	}
	// Rows in two windows far apart: every series is in two groups, and a
	// pass out of time after its first chunk leaves the rest of the first
	// group and all of the second, whose first series too. (The later
	// rows first: the earlier ones, behind the bulk's range, are marked
	// apart from it.)
	insert(100)
	insert(3)
	for passes := 0; pending() > 0; passes++ {
		if passes > 4 {
			t.Fatalf("%d series still pending after %d passes", pending(), passes)
		}
		if _, err := db.rollupPasses(ctx, time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	sameRollup(t, "two groups", rollupRows(t, db, "r", "m"), loopRollup(rows, int64(time.Minute), fields, funcs))
}

// TestRollupFoldAfterFailedReplace: a pass that aggregated a range and
// then failed to replace the rollup's measurements (its context ended,
// a disk error) must not leave a tail: the marks go back, and the next
// pass must recompute every window of them, not fold from the tail of
// the newest window alone.
func TestRollupFoldAfterFailedReplace(t *testing.T) {
	fields, funcs := []string{"v"}, []string{"count", "sum"}
	db := rollupOfSource(t, true, "1m", fields, funcs)
	defer db.Close()
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rows []loopRow
	var ms []model.Measurement
	for s := int64(0); s < 180; s += 10 { // windows 0, 1 and 2
		tt := t0 + s*int64(time.Second)
		r, m := loopRowOf("a", tt, float64(s))
		rows, ms = append(rows, r), append(ms, m)
	}
	insertSource(t, db, ms)
	// The pass aggregates, then its context ends before it replaces.
	cctx, cancel := context.WithCancel(ctx)
	db.hooks.rollupAggregated = cancel
	if err := db.CatchUpRollups(cctx); err == nil {
		t.Fatal("the pass did not fail")
	}
	db.hooks.rollupAggregated = nil
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	k, _ := model.CanonicalMeta("a")
	for i := range rows {
		rows[i].meta = k
	}
	sameRollup(t, "after a failed pass", rollupRows(t, db, "r", "m"), loopRollup(rows, int64(time.Minute), fields, funcs))
}

// TestRollupFoldAfterTTLRaised: a fill reads the newest window of a
// series while the TTL hides part of it, and leaves its tail; the TTL is
// raised (the rows were never deleted: they are visible again) and a row
// comes into that window after the tail's newest. The pass recomputes
// the window (the horizon no longer cuts it) but folds into the tail,
// which lacks the rows visible again: the rollup must hold the source's
// aggregate of the window, as it did before tails.
func TestRollupFoldAfterTTLRaised(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := newTestClock(t0.Add(90 * time.Minute))
	db := openTTL(t, t.TempDir(), clock, int64p(3600)) // cutoff t0+30m
	defer db.Close()
	insertMinutes(t, db, t0, 60, "a") // window t0: v = 0..59
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor"}
	opts, err := RollupOptions(ts, RollupSpec{Source: "s", Window: "1h", Fields: []string{"v"}, Funcs: []string{"count", "sum"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "hourly", opts); err != nil {
		t.Fatal(err)
	}
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	// The TTL raised to 2 h: every row of the window is visible again.
	if _, err := db.CollMod(ctx, "s", CollModOptions{ExpireAfterSeconds: int64p(7200)}); err != nil {
		t.Fatal(err)
	}
	// A row after the window's newest: the window is marked.
	ms := []model.Measurement{{Time: t0.Add(59*time.Minute + 30*time.Second).UnixNano(), Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(100)}}}}
	if res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
		t.Fatalf("insert: %v %v", err, res.Errors)
	}
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, db, `{}`); n != 61 {
		t.Fatalf("the source holds %d rows, want 61", n)
	}
	want := map[string]map[string]float64{
		fmt.Sprintf(`"a" %d`, t0.UnixNano()): {"v_count": 61, "v_sum": 59*60/2 + 100},
	}
	sameRollup(t, "after the TTL was raised", rollupRows(t, db, "hourly", "sensor"), want)
}

// TestRollupDeadlineProgress: passes that run out of time after their
// first chunk of series (as TestRollupPassDeadline makes them) must still
// finish the work in a few passes. Series with two spans (rows in two
// windows apart) are in two groups: a pass recomputes the first, is out
// of time, and leaves the second; the series left get back every span,
// the one recomputed too, so the next pass finds the same work in the
// same order, forever.
func TestRollupDeadlineProgress(t *testing.T) {
	fields, funcs := []string{"v"}, []string{"count", "sum"}
	db := rollupOfSource(t, true, "1m", fields, funcs)
	defer db.Close()
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rows []loopRow
	for _, at := range []int64{0, 5} { // minutes 0 and 5: two spans a series
		var ms []model.Measurement
		for _, m := range []string{"a", "b"} {
			r, row := loopRowOf(m, t0+at*int64(time.Minute), float64(at+1))
			rows, ms = append(rows, r), append(ms, row)
		}
		insertSource(t, db, ms)
	}
	pending := func() int {
		infos, err := db.ListRollups(ctx, "src")
		if err != nil || len(infos) != 1 {
			t.Fatal(infos, err)
		}
		return infos[0].PendingSeries
	}
	passes := 0
	for ; pending() > 0; passes++ {
		if passes == 20 {
			t.Fatalf("%d passes past their deadline and %d series still pending", passes, pending())
		}
		if _, err := db.rollupPasses(ctx, time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	sameRollup(t, "after deadline passes", rollupRows(t, db, "r", "m"), loopRollup(rows, int64(time.Minute), fields, funcs))
}

// TestRollupMarkedRanges: in-order writes skip the rollups' marks where
// the collection remembers them made (collection.marked). A row at the
// very end of the remembered range (the next window), a late row before
// it in the same window (a tail must not be folded into), and a pass
// taking the marks between two writes must each still reach both
// rollups, of windows 10s and 1m.
func TestRollupMarkedRanges(t *testing.T) {
	fields, funcs := []string{"v"}, []string{"count", "sum", "first", "last"}
	db := rollupOfSource(t, true, "1m", fields, funcs)
	defer db.Close()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m", Granularity: model.GranularitySeconds}
	opts, err := RollupOptions(ts, RollupSpec{Source: "src", Window: "10s", Fields: fields, Funcs: funcs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "r10", opts); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rows []loopRow
	insert := func(secs ...float64) {
		t.Helper()
		for _, s := range secs {
			r, m := loopRowOf("a", t0+int64(s*float64(time.Second)), s)
			insertSource(t, db, []model.Measurement{m})
			rows = append(rows, r)
		}
	}
	check := func(when string) {
		t.Helper()
		if err := db.CatchUpRollups(ctx); err != nil {
			t.Fatal(err)
		}
		sameRollup(t, when+" (1m)", rollupRows(t, db, "r", "m"), loopRollup(rows, int64(time.Minute), fields, funcs))
		sameRollup(t, when+" (10s)", rollupRows(t, db, "r10", "m"), loopRollup(rows, int64(10*time.Second), fields, funcs))
	}
	insert(3)
	check("first")
	insert(5, 7, 10) // the pass took the marks; 10 s starts the 10s rollup's next window
	insert(19.5, 20) // 20 s: the end of what the 10s rollup marked for 19.5
	check("window ends")
	insert(30, 45) // the tails of both rollups hold 20 s as their newest value
	insert(25)     // late, before the remembered range, after the tails' newest value
	insert(15)     // late, before the tails' newest value: no fold
	insert(21)     // late again, in windows both marked already
	check("late rows")
	insert(59, 60, 61) // the 1m rollup's next window
	check("next minute")
}
