package timeseries

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// oracleCell is one (group, window, field) cell computed by the oracle.
type oracleCell struct {
	count         int64
	sum           float64
	min, max      float64 // NaN until a value that is not NaN
	firstT, lastT int64
	first, last   float64
}

// aggregateOracle computes an aggregate with a plain loop over the raw
// measurements (calendarOracle): every row the filter matches, one cell
// per group, window and field. The result maps "window group" to the
// cells of fields.
func aggregateOracle(ms []model.Measurement, ts model.TimeSeriesOptions, o AggregateOptions, fields []string) map[string][]oracleCell {
	out := map[string][]oracleCell{}
	for k, row := range calendarOracle(ms, ts, o, fields) {
		out[k] = row.cells
	}
	return out
}

// sameFloat is equality that holds for NaN and NaN.
func sameFloat(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

// TestAggregateOracle checks every aggregate function against a plain loop
// over the measurements inserted: several series, fields with gaps, ints,
// floats, NaN and a field of both, times before and after 1970 (unique, so
// first and last have one answer), windows smaller and larger than
// buckets, an origin, every kind of grouping, filters on time, meta and
// fields, data in memory and on disk (open buckets' snapshots, then
// sealed buckets in Pebble).
func TestAggregateOracle(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	ts := model.TimeSeriesOptions{TimeField: "ts", MetaField: "s", Granularity: model.GranularityMinutes}
	mustCreate(t, db, "m", ts)
	rng := rand.New(rand.NewSource(7))
	metas := []any{
		map[string]any{"host": "h0", "rack": int64(1)},
		map[string]any{"host": "h1", "rack": int64(1)},
		map[string]any{"host": "h2", "rack": int64(2)},
		map[string]any{"host": "h3"},
		"bare",
		nil,
	}
	// Values are multiples of 1/8 of small size: sums are exact in any
	// order, so they compare with ==.
	val := func() float64 { return float64(rng.Intn(1601)-800) / 8 }
	used := map[int64]bool{}
	var all []model.Measurement
	for round := 0; round < 3; round++ {
		var ms []model.Measurement
		for i := 0; i < 1500; i++ {
			tm := int64(rng.Intn(8*3600)-3*3600)*1e9 + int64(rng.Intn(1000))
			if used[tm] {
				continue
			}
			used[tm] = true
			var fs []model.Field
			if rng.Intn(4) != 0 {
				v := val()
				if rng.Intn(25) == 0 {
					v = math.NaN()
				}
				fs = append(fs, model.Field{Name: "a", Value: model.Float(v)})
			}
			if rng.Intn(3) == 0 {
				fs = append(fs, model.Field{Name: "b", Value: model.Int(int64(rng.Intn(200) - 100))})
			}
			if rng.Intn(2) == 0 {
				if rng.Intn(2) == 0 {
					fs = append(fs, model.Field{Name: "c", Value: model.Int(int64(rng.Intn(50)))})
				} else {
					fs = append(fs, model.Field{Name: "c", Value: model.Float(val())})
				}
			}
			if rng.Intn(5) == 0 {
				fs = append(fs, model.Field{Name: "note", Value: model.String(fmt.Sprint("n", rng.Intn(3)))})
			}
			ms = append(ms, model.Measurement{Time: tm, Meta: metas[rng.Intn(len(metas))], Fields: fs})
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		all = append(all, ms...)
		if round < 2 {
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}

	type grouping struct {
		by        string
		ungrouped bool
	}
	groupings := []grouping{{by: ""}, {by: "s"}, {by: "s.host"}, {by: "s.rack"}, {ungrouped: true}}
	filters := []string{
		"",
		`{"ts": {"$gte": {"$date": "1969-12-31T23:10:00Z"}, "$lt": {"$date": "1970-01-01T03:30:00Z"}}}`,
		`{"s.host": {"$in": ["h1", "h3"]}}`,
		`{"a": {"$gt": 10}}`,
		`{"$or": [{"b": {"$lt": 0}}, {"note": "n1"}]}`,
	}
	funcSets := [][]AggFunc{nil, {AggFirst}, {AggLast}, {AggFirst, AggLast}, {AggLast, AggCount}, {AggCount}}
	windows := []struct {
		width  time.Duration
		origin time.Time
	}{
		{7 * time.Minute, time.Time{}},
		{time.Hour, time.Unix(0, 1234567890123).UTC()},
		{24 * time.Hour, time.Time{}},
		{30 * 24 * time.Hour, time.Unix(-10*3600, 0).UTC()}, // one window: every bucket folded whole
	}
	checked := 0
	// Twice: with the buckets open in memory (each checkpoint kept them
	// open), then sealed and written to Pebble.
	for pass := 0; pass < 2; pass++ {
		if pass == 1 {
			db.mu.Lock()
			for _, s := range db.coll.byName["m"].series.byOrd {
				for _, b := range s.buckets {
					db.seal(b)
				}
			}
			db.mu.Unlock()
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			db.mu.RLock()
			inMem := 0
			for _, s := range db.coll.byName["m"].series.byOrd {
				inMem += len(s.buckets)
			}
			db.mu.RUnlock()
			if inMem != 0 {
				t.Fatalf("%d buckets still in memory after sealing and a checkpoint", inMem)
			}
		}
		for _, g := range groupings {
			for _, fsrc := range filters {
				var filter *partialfilter.Filter
				if fsrc != "" {
					filter = mustFilter(t, fsrc)
				}
				for _, funcs := range funcSets {
					for _, w := range windows {
						for _, fields := range [][]string{nil, {"c", "a"}} {
							if fields != nil && funcs != nil {
								continue
							}
							o := AggregateOptions{Filter: filter, Window: w.width, Origin: w.origin, GroupBy: g.by,
								Ungrouped: g.ungrouped, Fields: fields, Funcs: funcs}
							name := fmt.Sprintf("groupBy %q ungrouped %v filter %s funcs %v window %v fields %v", g.by, g.ungrouped, fsrc, funcs, w.width, fields)
							checked += checkAggregate(t, db, all, ts, o, fmt.Sprintf("pass %d: %s", pass, name))
						}
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no value checked")
	}
}

// checkAggregate runs one aggregate and compares every value with the
// oracle's; it returns the number of values compared.
func checkAggregate(t *testing.T, db *DB, ms []model.Measurement, ts model.TimeSeriesOptions, o AggregateOptions, name string) int {
	t.Helper()
	rec, err := db.Aggregate(ctx, "m", o)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer rec.Release()
	fields := o.Fields
	if fields == nil {
		fields = []string{"a", "b", "c"} // the numeric fields, sorted; not "note"
	}
	funcs := o.Funcs
	if funcs == nil {
		funcs = AllAggFuncs
	}
	want := aggregateOracle(ms, ts, o, fields)
	base := 2
	if o.Ungrouped {
		base = 1
	}
	if got := int(rec.NumCols()); got != base+len(fields)*len(funcs) {
		t.Fatalf("%s: %d columns, want %d", name, got, base+len(fields)*len(funcs))
	}
	for fi, f := range fields {
		for gi, fn := range funcs {
			col := base + fi*len(funcs) + gi
			if got, want := rec.Schema().Field(col).Name, f+"_"+string(fn); got != want {
				t.Fatalf("%s: column %d is %s, want %s", name, col, got, want)
			}
		}
	}
	if int(rec.NumRows()) != len(want) {
		t.Fatalf("%s: %d rows, want %d", name, rec.NumRows(), len(want))
	}
	var keys []string
	n := 0
	for i := 0; i < int(rec.NumRows()); i++ {
		w := int64(rec.Column(0).(*array.Timestamp).Value(i))
		group := ""
		if !o.Ungrouped {
			group = rec.Column(1).(*array.String).Value(i)
		}
		key := fmt.Sprint(w, " ", group)
		keys = append(keys, group+"\x00"+fmt.Sprintf("%020d", uint64(w)^1<<63))
		cells, ok := want[key]
		if !ok {
			t.Fatalf("%s: row %d (%s) is not in the oracle", name, i, key)
		}
		for fi, f := range fields {
			c := cells[fi]
			for gi, fn := range funcs {
				arr := rec.Column(base + fi*len(funcs) + gi)
				if fn == AggCount {
					if got := arr.(*array.Int64).Value(i); got != c.count {
						t.Fatalf("%s: %s %s_count %d, want %d", name, key, f, got, c.count)
					}
					n++
					continue
				}
				if c.count == 0 {
					if !arr.IsNull(i) {
						t.Fatalf("%s: %s %s_%s %s, want null", name, key, f, fn, arr.ValueStr(i))
					}
					n++
					continue
				}
				if arr.IsNull(i) {
					t.Fatalf("%s: %s %s_%s null, want a value", name, key, f, fn)
				}
				var wv float64
				switch fn {
				case AggSum:
					wv = c.sum
				case AggAvg:
					wv = c.sum / float64(c.count)
				case AggMin:
					wv = c.min
				case AggMax:
					wv = c.max
				case AggFirst:
					wv = c.first
				case AggLast:
					wv = c.last
				default:
					t.Fatalf("no oracle for %s", fn)
				}
				if got := arr.(*array.Float64).Value(i); !sameFloat(got, wv) {
					t.Fatalf("%s: %s %s_%s %v, want %v", name, key, f, fn, got, wv)
				}
				n++
			}
		}
	}
	if !sort.StringsAreSorted(keys) {
		t.Fatalf("%s: rows not in order of group, then window", name)
	}
	if rec.Schema().Field(0).Type.ID() != arrow.TIMESTAMP {
		t.Fatalf("%s: schema %v", name, rec.Schema())
	}
	return n
}

// TestAggregateUnorderedOpenBuckets checks that aggregates over open
// buckets whose rows came out of time order, read unsorted, answer what
// the same buckets answer once sealed (sorted, stably): ties in time
// included, where first is the earliest row inserted and last the latest.
func TestAggregateUnorderedOpenBuckets(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	rng := rand.New(rand.NewSource(5))
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	// A first row at the earliest time makes each series' one bucket
	// start there: every later row fits in it.
	var ms []model.Measurement
	for h := 0; h < 3; h++ {
		ms = append(ms, model.Measurement{Time: base, Meta: fmt.Sprint("h", h), Fields: []model.Field{{Name: "v", Value: model.Int(int64(h - 3))}}})
	}
	for i := 0; i < 1500; i++ {
		// Times on a coarse grid within one bucket span: many ties.
		tm := base + int64(rng.Intn(300))*int64(10*time.Second)
		fs := []model.Field{{Name: "v", Value: model.Int(int64(i))}} // the insert order, to tell ties apart
		if rng.Intn(4) == 0 {
			fs = append(fs, model.Field{Name: "w", Value: model.Float(float64(rng.Intn(100)))})
		}
		ms = append(ms, model.Measurement{Time: tm, Meta: fmt.Sprint("h", rng.Intn(3)), Fields: fs})
	}
	for len(ms) > 0 {
		n := min(1+rng.Intn(50), len(ms))
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms[:n]}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		ms = ms[n:]
	}
	// One bucket a series: between buckets, ties have no order to keep.
	unordered := 0
	db.mu.RLock()
	buckets := 0
	for _, s := range db.coll.byName["m"].series.byOrd {
		buckets += len(s.buckets)
		if b := s.buckets[0]; b.unordered && !b.sealed {
			unordered++
		}
	}
	db.mu.RUnlock()
	if buckets != 3 {
		t.Fatalf("%d buckets for 3 series, want 3", buckets)
	}
	if unordered != 3 {
		t.Fatalf("%d open buckets hold rows out of order, want 3", unordered)
	}
	date := func(sec int) string {
		return `{"$date": "` + time.Unix(0, base+int64(sec)*1e9).UTC().Format(time.RFC3339) + `"}`
	}
	filters := []string{"", `{"ts": {"$gte": ` + date(700) + `, "$lt": ` + date(2300) + `}}`,
		`{"w": {"$gte": 50}}`, `{"s": "h1", "ts": {"$gt": ` + date(1000) + `}}`}
	funcSets := [][]AggFunc{{AggLast}, {AggFirst}, {AggFirst, AggLast}, {AggCount}, nil}
	type query struct {
		name string
		o    AggregateOptions
	}
	var queries []query
	for _, fsrc := range filters {
		var f *partialfilter.Filter
		if fsrc != "" {
			f = mustFilter(t, fsrc)
		}
		for _, funcs := range funcSets {
			for _, w := range []time.Duration{time.Minute, 10 * time.Minute, time.Hour} {
				queries = append(queries, query{fmt.Sprintf("filter %s funcs %v window %v", fsrc, funcs, w),
					AggregateOptions{Filter: f, Window: w, Fields: []string{"v", "w"}, Funcs: funcs}})
			}
		}
	}
	render := func(o AggregateOptions) string {
		rec, err := db.Aggregate(ctx, "m", o)
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		var b strings.Builder
		for i := 0; i < int(rec.NumRows()); i++ {
			for c := 0; c < int(rec.NumCols()); c++ {
				b.WriteString(rec.Column(c).ValueStr(i) + " ")
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	before := make([]string, len(queries))
	for i, q := range queries {
		before[i] = render(q.o)
	}
	// Sealing sorts every bucket's rows, stably.
	db.mu.Lock()
	for _, s := range db.coll.byName["m"].series.byOrd {
		for _, b := range s.buckets {
			db.seal(b)
		}
	}
	db.mu.Unlock()
	for i, q := range queries {
		got, want := strings.Split(render(q.o), "\n"), strings.Split(before[i], "\n")
		if len(got) != len(want) {
			t.Errorf("%s: %d rows from unsorted open buckets, %d sealed", q.name, len(want), len(got))
			continue
		}
		for r := range got {
			if got[r] != want[r] {
				t.Errorf("%s: unsorted open buckets answer %s, sealed ones %s", q.name, want[r], got[r])
				break
			}
		}
	}
}

// TestAggregateOutOfOrderNoneInRange: an open bucket whose rows came out of
// time order, with rows on both sides of the filter's range and none in
// it, gives no window (it gave one of count 0).
func TestAggregateOutOfOrderNoneInRange(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}
	if _, err := db.CreateCollection(ctx, "m", CollectionOptions{TimeSeries: ts}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, s := range []int64{9, 1} { // out of order, one batch each
		ms := []model.Measurement{{Time: t0 + s*int64(time.Second), Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Float(float64(s))}}}}
		if res, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Fatal(err, res.Errors)
		}
	}
	for _, funcs := range [][]AggFunc{{AggCount, AggAvg}, {AggFirst, AggLast}} {
		f := mustFilter(t, fmt.Sprintf(`{"t": {"$gte": {"$date": {"$numberLong": "%d"}}, "$lt": {"$date": {"$numberLong": "%d"}}}}`, t0/1e6+3000, t0/1e6+7000))
		rec, err := db.Aggregate(ctx, "m", AggregateOptions{Filter: f, Window: 10 * time.Second, Fields: []string{"v"}, Funcs: funcs})
		if err != nil {
			t.Fatal(err)
		}
		if n := rec.NumRows(); n != 0 {
			t.Errorf("%v: %d windows, want none", funcs, n)
		}
		rec.Release()
	}
}
