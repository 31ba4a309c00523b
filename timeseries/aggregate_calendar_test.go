package timeseries

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// insertMeasurements inserts ms into collection name.
func insertMeasurements(tb testing.TB, db *DB, name string, ms []model.Measurement) {
	tb.Helper()
	if _, err := db.Insert(ctx, name, Batch{Measurements: ms}, InsertOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// doorMonthWindow is how the MongoDB door re-folded day windows into
// $dateTrunc's bins of months months (counted from January 2000) before
// the engine had calendar windows: the oracle of their starts.
func doorMonthWindow(ns int64, months int64) int64 {
	t := time.Unix(0, ns).UTC()
	m := int64(t.Year()-2000)*12 + int64(t.Month()-1)
	m -= ((m % months) + months) % months
	y := 2000 + (m-((m%12+12)%12))/12
	return time.Date(int(y), time.Month((m%12+12)%12+1), 1, 0, 0, 0, 0, time.UTC).UnixNano()
}

// windowOracle returns the time the result gives the window of o holding
// t, computed with the time package alone.
func windowOracle(o AggregateOptions, t int64) int64 {
	switch {
	case o.WholeRange:
		return 0
	case o.Months > 0:
		origin := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
		if !o.Origin.IsZero() {
			origin = o.Origin
		}
		tm := time.Unix(0, t).UTC()
		diff := int64(tm.Year()-origin.Year())*12 + int64(tm.Month()-origin.Month())
		bin := diff / int64(o.Months)
		if diff%int64(o.Months) < 0 {
			bin--
		}
		start := time.Date(origin.Year(), origin.Month()+time.Month(bin*int64(o.Months)), 1, 0, 0, 0, 0, time.UTC)
		if start.Before(time.Unix(0, math.MinInt64)) {
			return math.MinInt64
		}
		return start.UnixNano()
	}
	width, origin := int64(o.Window), int64(0)
	if !o.Origin.IsZero() {
		origin = o.Origin.UnixNano()
	}
	return t - floorMod(floorMod(t, width)-floorMod(origin, width), width)
}

// floorMod is a modulo b in [0, b).
func floorMod(a, b int64) int64 { return (a%b + b) % b }

// calendarRow is the oracle's row of one (group, window): the documents
// the filter matched and a cell per field.
type calendarRow struct {
	docs  int64
	cells []oracleCell
}

// calendarOracle computes an aggregate with a plain loop over ms, keyed
// "window group".
func calendarOracle(ms []model.Measurement, ts model.TimeSeriesOptions, o AggregateOptions, fields []string) map[string]*calendarRow {
	out := map[string]*calendarRow{}
	doc := map[string]any{}
	for _, m := range ms {
		clear(doc)
		doc[ts.TimeField] = time.Unix(0, m.Time).UTC()
		if m.Meta != nil {
			doc[ts.MetaField] = m.Meta
		}
		for _, f := range m.Fields {
			doc[f.Name] = f.Value.Interface()
		}
		if o.Filter != nil && !o.Filter.Match(doc) {
			continue
		}
		group := ""
		if !o.Ungrouped {
			var v any = m.Meta
			if o.GroupBy != "" && o.GroupBy != ts.MetaField {
				for _, part := range strings.Split(strings.TrimPrefix(o.GroupBy, ts.MetaField+"."), ".") {
					mm, _ := v.(map[string]any)
					v = mm[part]
				}
			}
			s, err := model.CanonicalMeta(v)
			if err != nil {
				panic(err)
			}
			group = s
		}
		key := fmt.Sprint(windowOracle(o, m.Time), " ", group)
		row := out[key]
		if row == nil {
			row = &calendarRow{cells: make([]oracleCell, len(fields))}
			for i := range row.cells {
				row.cells[i].min, row.cells[i].max = math.NaN(), math.NaN()
			}
			out[key] = row
		}
		row.docs++
		for i, name := range fields {
			for _, f := range m.Fields {
				if f.Name != name || f.Value.Kind != model.KindFloat && f.Value.Kind != model.KindInt {
					continue
				}
				v := f.Value.F
				if f.Value.Kind == model.KindInt {
					v = float64(f.Value.I)
				}
				c := &row.cells[i]
				if c.count == 0 || m.Time < c.firstT {
					c.firstT, c.first = m.Time, v
				}
				if c.count == 0 || m.Time > c.lastT {
					c.lastT, c.last = m.Time, v
				}
				c.count++
				c.sum += v
				if !math.IsNaN(v) {
					if math.IsNaN(c.min) || v < c.min {
						c.min = v
					}
					if math.IsNaN(c.max) || v > c.max {
						c.max = v
					}
				}
			}
		}
	}
	return out
}

// checkCalendar runs one aggregate and compares every row and value with
// the oracle's; it returns the number of values compared.
func checkCalendar(t *testing.T, db *DB, ms []model.Measurement, ts model.TimeSeriesOptions, o AggregateOptions, name string) int {
	t.Helper()
	rec, err := db.Aggregate(ctx, "m", o)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer rec.Release()
	fields := o.Fields
	if fields == nil {
		fields = []string{"a", "b"}
	}
	funcs := o.Funcs
	if funcs == nil {
		funcs = AllAggFuncs
	}
	want := calendarOracle(ms, ts, o, fields)
	base := 2
	if o.Ungrouped {
		base = 1
	}
	if o.CountDocs {
		if got := rec.Schema().Field(base).Name; got != AggregateDocsColumn {
			t.Fatalf("%s: column %d is %q, want %q", name, base, got, AggregateDocsColumn)
		}
		base++
	}
	if got := int(rec.NumCols()); got != base+len(fields)*len(funcs) {
		t.Fatalf("%s: %d columns, want %d", name, got, base+len(fields)*len(funcs))
	}
	if int(rec.NumRows()) != len(want) {
		t.Fatalf("%s: %d rows, want %d", name, rec.NumRows(), len(want))
	}
	n := 0
	prev := ""
	for i := 0; i < int(rec.NumRows()); i++ {
		w := int64(rec.Column(0).(*array.Timestamp).Value(i))
		group := ""
		if !o.Ungrouped {
			group = rec.Column(1).(*array.String).Value(i)
		}
		// Sorted by group, then window.
		order := group + "\x00" + fmt.Sprintf("%020d", uint64(w)^1<<63)
		if order <= prev {
			t.Fatalf("%s: row %d (%d %s) out of order", name, i, w, group)
		}
		prev = order
		key := fmt.Sprint(w, " ", group)
		row, ok := want[key]
		if !ok {
			t.Fatalf("%s: row %d (%s) is not in the oracle", name, i, key)
		}
		if o.CountDocs {
			if got := rec.Column(base - 1).(*array.Int64).Value(i); got != row.docs {
				t.Fatalf("%s: %s: %d documents, want %d", name, key, got, row.docs)
			}
			n++
		}
		for fi, f := range fields {
			c := row.cells[fi]
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
				var wantV float64
				switch fn {
				case AggSum:
					wantV = c.sum
				case AggAvg:
					wantV = c.sum / float64(c.count)
				case AggMin:
					wantV = c.min
				case AggMax:
					wantV = c.max
				case AggFirst:
					wantV = c.first
				case AggLast:
					wantV = c.last
				}
				if got := arr.(*array.Float64).Value(i); !sameFloat(got, wantV) {
					t.Fatalf("%s: %s %s_%s %v, want %v", name, key, f, fn, got, wantV)
				}
				n++
			}
		}
	}
	return n
}

// calendarData is measurements for the calendar tests: times clustered
// around month and year ends (months of 28 to 31 days, February of leap
// years 2000, 2024 and 1968 and of 1900 and 2100, which are not, the
// turn of 1970, the first and last years of dates) and spread over
// 1900-2100, in unique times, on six series, with fields that come and
// go: some measurements hold none of the aggregated fields.
func calendarData(rng *rand.Rand, n int) []model.Measurement {
	edges := []time.Time{
		time.Date(1678, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(1900, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1968, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1999, 10, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2000, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2023, 5, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2024, 7, 1, 0, 0, 0, 0, time.UTC), time.Date(2100, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2261, 3, 1, 0, 0, 0, 0, time.UTC),
	}
	metas := []any{
		map[string]any{"host": "h0", "rack": int64(1)},
		map[string]any{"host": "h1", "rack": int64(1)},
		map[string]any{"host": "h2", "rack": int64(2)},
		map[string]any{"host": "h3"},
		"bare",
		nil,
	}
	lo, hi := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	used := map[int64]bool{}
	var ms []model.Measurement
	for len(ms) < n {
		var tm int64
		switch rng.Intn(8) {
		case 0, 1:
			tm = lo + rng.Int63n(hi-lo)
		case 2:
			// The first or the last instant of a month.
			e := edges[rng.Intn(len(edges))]
			tm = e.AddDate(0, rng.Intn(3)-1, 0).UnixNano() - int64(rng.Intn(2))
		default:
			e := edges[rng.Intn(len(edges))].UnixNano()
			tm = e + rng.Int63n(int64(6*24*time.Hour)) - int64(3*24*time.Hour)
		}
		if used[tm] {
			continue
		}
		used[tm] = true
		var fs []model.Field
		if rng.Intn(3) != 0 {
			v := float64(rng.Intn(1601)-800) / 8
			if rng.Intn(30) == 0 {
				v = math.NaN()
			}
			fs = append(fs, model.Field{Name: "a", Value: model.Float(v)})
		}
		if rng.Intn(3) == 0 {
			fs = append(fs, model.Field{Name: "b", Value: model.Int(int64(rng.Intn(200) - 100))})
		}
		if rng.Intn(4) == 0 {
			fs = append(fs, model.Field{Name: "note", Value: model.String(fmt.Sprint("n", rng.Intn(3)))})
		}
		ms = append(ms, model.Measurement{Time: tm, Meta: metas[rng.Intn(len(metas))], Fields: fs})
	}
	return ms
}

// TestAggregateCalendarOracle checks calendar windows (months, quarters,
// years, bins of 5 and 7 months, from January 1970 and from other
// origins), one window over the whole range and the documents counted per
// cell against a plain loop over the measurements, with the buckets open
// in memory (rows out of time order among them), half stored, then all
// stored: buckets of 30 days straddle month ends, times reach from 1678
// to 2261.
func TestAggregateCalendarOracle(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	ts := model.TimeSeriesOptions{TimeField: "ts", MetaField: "s", Granularity: model.GranularityHours}
	mustCreate(t, db, "m", ts)
	rng := rand.New(rand.NewSource(11))
	all := calendarData(rng, 4000)
	// Batches in random order: later batches bring rows older than the
	// open buckets' newest.
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for i := 0; i < len(all); i += 500 {
		insertMeasurements(t, db, "m", all[i:min(i+500, len(all))])
	}
	// Open buckets whose rows are out of time order across the filter's
	// upper bound, 2024-02-29T12:00Z: a batch after it, then one before.
	bound := time.Date(2024, 2, 29, 12, 0, 0, 7, time.UTC).UnixNano()
	for _, dir := range []int64{1, -1} {
		var ms []model.Measurement
		for k := int64(1); k <= 20; k++ {
			for _, meta := range []any{"bare", map[string]any{"host": "h1", "rack": int64(1)}} {
				ms = append(ms, model.Measurement{Time: bound + dir*k*int64(time.Minute), Meta: meta,
					Fields: []model.Field{{Name: "a", Value: model.Float(float64(k))}}})
			}
		}
		insertMeasurements(t, db, "m", ms)
		all = append(all, ms...)
	}
	y2000 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	windows := []AggregateOptions{
		{Months: 1}, {Months: 1, Origin: y2000}, {Months: 3, Origin: y2000}, {Months: 12, Origin: y2000},
		{Months: 5}, {Months: 7, Origin: time.Date(1999, 11, 1, 0, 0, 0, 0, time.UTC)},
		{Months: 12 * 150, Origin: y2000}, {WholeRange: true}, {Window: 24 * time.Hour, Origin: y2000},
	}
	filters := []string{
		"",
		`{"ts": {"$gte": {"$date": "1969-12-15T00:00:00Z"}, "$lt": {"$date": "2024-02-29T12:00:00Z"}}}`,
		`{"s.host": {"$in": ["h1", "h3"]}}`,
		`{"a": {"$gt": 10}}`,
	}
	type shape struct {
		fields    []string
		funcs     []AggFunc
		by        string
		ungrouped bool
	}
	shapes := []shape{
		{},
		{funcs: []AggFunc{AggFirst, AggLast}, by: "s.host"},
		{funcs: []AggFunc{AggLast}, fields: []string{"a"}},
		{funcs: []AggFunc{AggCount}, by: "s.rack"},
		{fields: []string{}, ungrouped: true},
		{fields: []string{}},
		{funcs: []AggFunc{AggCount, AggSum}, fields: []string{"b"}, ungrouped: true},
	}
	checked := 0
	check := func(pass string) {
		for _, w := range windows {
			for _, fsrc := range filters {
				var filter *partialfilter.Filter
				if fsrc != "" {
					filter = mustFilter(t, fsrc)
				}
				for _, sh := range shapes {
					for _, docs := range []bool{false, true} {
						if sh.fields != nil && len(sh.fields) == 0 && !docs {
							continue
						}
						o := w
						o.Filter, o.Fields, o.Funcs, o.GroupBy, o.Ungrouped, o.CountDocs = filter, sh.fields, sh.funcs, sh.by, sh.ungrouped, docs
						name := fmt.Sprintf("%s: months %d origin %s whole %v window %v filter %s fields %v funcs %v by %q ungrouped %v docs %v",
							pass, o.Months, o.Origin.Format("2006-01"), o.WholeRange, o.Window, fsrc, o.Fields, o.Funcs, o.GroupBy, o.Ungrouped, o.CountDocs)
						checked += checkCalendar(t, db, all, ts, o, name)
					}
				}
			}
		}
	}
	check("open")
	// Half the buckets sealed and stored, the rest open.
	db.mu.Lock()
	i := 0
	for _, s := range db.coll.byName["m"].series.byOrd {
		for _, b := range s.buckets {
			if i++; i%2 == 0 {
				db.seal(b)
			}
		}
	}
	db.mu.Unlock()
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	check("half stored")
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
	whole := readStats.wholeBuckets.Load()
	check("stored")
	if readStats.wholeBuckets.Load() == whole {
		t.Error("no stored bucket was counted from its header")
	}
	if checked == 0 {
		t.Fatal("no value checked")
	}
}

// TestAggregateMonthsAsTheDoor checks that calendar windows from 2000-01-01
// start where the MongoDB door's re-fold of day windows put them.
func TestAggregateMonthsAsTheDoor(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	y2000 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, months := range []int{1, 2, 3, 5, 6, 7, 12, 24} {
		win, err := aggWindowing(&AggregateOptions{Months: months, Origin: y2000})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20000; i++ {
			// 1700 to 2250: the door's day windows are in range.
			lo, hi := time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), time.Date(2250, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			tm := int64(uint64(lo) + rng.Uint64()%(uint64(hi)-uint64(lo)))
			day := windowOracle(AggregateOptions{Window: 24 * time.Hour, Origin: y2000}, tm)
			got, want := win.startTime(win.key(tm)), doorMonthWindow(day, int64(months))
			if got != want {
				t.Fatalf("%d months: %s in the window of %s, want %s", months, time.Unix(0, tm).UTC(), time.Unix(0, got).UTC(), time.Unix(0, want).UTC())
			}
			lo, hi, ok := win.bounds(win.key(tm))
			if !ok || tm < lo || tm > hi || lo != got {
				t.Fatalf("%d months: %s outside its window's bounds [%d, %d] (%v)", months, time.Unix(0, tm).UTC(), lo, hi, ok)
			}
			if hi < math.MaxInt64 && win.key(hi+1) != win.key(tm)+1 {
				t.Fatalf("%d months: the instant after the window of %s is not in the next", months, time.Unix(0, tm).UTC())
			}
		}
	}
}

// TestAggregateWindowOptions checks the refusals of windows that make no
// sense.
func TestAggregateWindowOptions(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	insertMeasurements(t, db, "m", []model.Measurement{{Time: 1, Meta: "x", Fields: []model.Field{{Name: "a", Value: model.Int(1)}}}})
	for _, o := range []AggregateOptions{
		{}, {Window: -time.Second}, {Months: -1}, {Months: 1, WholeRange: true}, {Months: 1, Window: time.Hour},
		{WholeRange: true, Window: time.Hour}, {Months: 1, Origin: time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC)},
		{Months: 1, Origin: time.Date(2000, 1, 1, 0, 0, 0, 1, time.UTC)}, {Months: maxWindowMonths + 1},
	} {
		if _, err := db.Aggregate(ctx, "m", o); mongoerr.CodeOf(err) != mongoerr.BadValue {
			t.Errorf("%+v: err %v, want BadValue", o, err)
		}
	}
}
