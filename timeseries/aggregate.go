package timeseries

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// AggFunc is a windowed aggregate function.
type AggFunc string

// The aggregate functions.
const (
	AggCount AggFunc = "count"
	AggSum   AggFunc = "sum"
	AggAvg   AggFunc = "avg"
	AggMin   AggFunc = "min"
	AggMax   AggFunc = "max"
	AggFirst AggFunc = "first"
	AggLast  AggFunc = "last"
)

// AllAggFuncs lists every aggregate function in output order.
var AllAggFuncs = []AggFunc{AggCount, AggSum, AggAvg, AggMin, AggMax, AggFirst, AggLast}

// AggregateDocsColumn names the column of the measurements counted per
// (group, window) (AggregateOptions.CountDocs). No other column can take
// the name: field names, the timeField and the metaField do not start
// with '$'.
const AggregateDocsColumn = "$docs"

// MaxAggregateCells is the default of Options.AggregateMaxCells: the
// (group, window) cells one aggregate may hold, so that a query with a tiny
// window over a long range cannot exhaust memory.
const MaxAggregateCells = 1 << 20

// AggregateOptions describe a windowed aggregate.
type AggregateOptions struct {
	// Filter selects measurements; nil matches all.
	Filter *partialfilter.Filter
	// Window is the width of the time windows. Required, but for
	// calendar windows (Months) and a window over the whole range
	// (WholeRange), which take none.
	Window time.Duration
	// Origin aligns windows: they start at Origin + k*Window, or, for
	// calendar windows, at the month of Origin + k*Months. Zero: the
	// epoch.
	Origin time.Time
	// Months, above zero, makes the windows calendar months in UTC,
	// Months months long each (1 a month, 3 a quarter, 12 a year),
	// counted from the month of Origin, which must then be the first
	// instant of a month: with Origin 2000-01-01 they are the bins of
	// MongoDB's $dateTrunc with unit month and binSize Months. A window's
	// time in the result is its first instant (math.MinInt64 when that
	// lies before 1677, the range of int64 nanoseconds). Window must be
	// zero. Zero: fixed windows of Window.
	Months int
	// WholeRange makes one window per group over all time, which the
	// result gives the time 0 (the epoch): it has no start. Window must
	// be zero. False: windows of Window or Months.
	WholeRange bool
	// Archive reads archived data too (docs/archive.md).
	Archive bool
	// GroupBy is a path into the meta value ("" groups by the whole meta
	// value, "sensor.region" by that sub-field). Ignored when Ungrouped.
	GroupBy string
	// Ungrouped aggregates all series together.
	Ungrouped bool
	// Fields are the numeric fields to aggregate; nil: every field the
	// collection holds as numbers.
	Fields []string
	// Funcs are the functions to compute for every field; nil: all.
	Funcs []AggFunc
	// CountDocs adds, after the group column, the int64 column
	// AggregateDocsColumn: the number of measurements of each (group,
	// window) that the filter matched, whichever fields they hold. Every
	// (group, window) holding such a measurement has a row, also when
	// none of them holds one of Fields; Fields may then be empty (a
	// non-nil empty slice): a count of documents per group and window.
	// False: no such column.
	CountDocs bool
	// Allocator allocates the records' memory; nil means the Go allocator.
	Allocator memory.Allocator

	// exactGroups groups by series (each series' own meta key, an int32
	// apart from the int64 of its value) and only, when set, restricts
	// the aggregate to those series: a rollup's recomputation.
	exactGroups bool
	only        map[uint64]bool
	// from raises, per series id, the time the series is read from, and
	// seed puts cells in before the scan: a rollup's pass folds the new
	// rows of a window into the cells the last pass left.
	from map[uint64]int64
	seed func(*aggregator) error
	// thaw, when set, recycles the columns the aggregate decodes open
	// buckets' frozen rows into (scanPlan.thaw).
	thaw *thawFree
	// cells, when set, are the aggregate's cells, emptied (reset): a
	// rollup's pass reuses them from one chunk of series to the next.
	cells *aggCells
}

type aggCell struct {
	count         int64
	sum           float64
	min, max      float64
	firstT, lastT int64
	first, last   float64
	hasMin        bool
}

// value is the result of fn (not count) over a cell holding values.
func (a *aggCell) value(fn AggFunc) float64 {
	switch fn {
	case AggSum:
		return a.sum
	case AggAvg:
		return a.sum / float64(a.count)
	case AggMin:
		if !a.hasMin {
			return math.NaN()
		}
		return a.min
	case AggMax:
		if !a.hasMin {
			return math.NaN()
		}
		return a.max
	case AggFirst:
		return a.first
	case AggLast:
		return a.last
	}
	return math.NaN()
}

func (a *aggCell) add(t int64, v float64) {
	if a.count == 0 || t < a.firstT {
		a.firstT, a.first = t, v
	}
	if a.count == 0 || t >= a.lastT {
		a.lastT, a.last = t, v
	}
	a.count++
	a.sum += v
	if !math.IsNaN(v) {
		if !a.hasMin || v < a.min {
			a.min = v
		}
		if !a.hasMin || v > a.max {
			a.max = v
		}
		a.hasMin = true
	}
}

// aggKey is a cell's group, by its index in aggCells.groups, and window.
type aggKey struct {
	group  int32
	window int64
}

// aggCells holds the cells of an aggregate: a row of one cell per field
// for every (group, window) with data. Rows come from slabs, and the keys
// are kept in the order made: series are scanned in group order, windows
// in time order, so they are usually sorted already. A group's windows are
// found through a dense index of window offsets while they stay close
// together, through a map once they spread.
type aggCells struct {
	keys []aggKey
	rows [][]aggCell // the cells of keys[i]
	slab []aggCell
	// slabs are the slabs made, slabAt the next to take again after a
	// reset.
	slabs  [][]aggCell
	slabAt int
	n      int      // cells in a row: the fields, and the documents (CountDocs)
	step   int64    // between the keys of consecutive windows (windowing.step)
	groups []string // group values (canonical JSON) by index
	gids   map[string]int32
	dense  []denseWindows // by group
	m      map[aggKey]int32

	guard    *scanGuard // the query's memory account
	maxCells int        // Options.AggregateMaxCells
}

// denseWindows indexes the windows of one group: idx[(w - base) / step]
// is the index of window w in keys and rows, -1 for none. sparse groups
// use the map instead.
type denseWindows struct {
	base   int64
	idx    []int32
	sparse bool
}

// maxDenseSlack bounds how many empty slots a group's dense index may hold
// beyond the cells made: sparse windows go to the map.
const maxDenseSlack = 4096

// groupID returns the index of group value g, adding it if new within the
// query's memory.
func (a *aggCells) groupID(g string) (int32, error) {
	id, ok := a.gids[g]
	if !ok {
		if err := a.guard.charge(aggGroupBytes+2*int64(len(g)), "the groups of an aggregate"); err != nil {
			return 0, err
		}
		id = int32(len(a.groups))
		a.groups = append(a.groups, g)
		a.gids[g] = id
		if n := len(a.dense); n < cap(a.dense) {
			// A reset's: its index's array is reused.
			a.dense = a.dense[:n+1]
			a.dense[n] = denseWindows{idx: a.dense[n].idx[:0]}
		} else {
			a.dense = append(a.dense, denseWindows{})
		}
	}
	return id, nil
}

// newAggCells makes the cells of an aggregate of n cells a row (a field
// each, and the documents) over windows whose keys are step apart, with
// room for hint rows; guard is charged their memory and maxCells bounds
// them.
func newAggCells(n, hint int, step int64, guard *scanGuard, maxCells int) *aggCells {
	return &aggCells{keys: make([]aggKey, 0, hint), rows: make([][]aggCell, 0, hint), n: n, step: step,
		gids: map[string]int32{}, m: map[aggKey]int32{}, guard: guard, maxCells: maxCells}
}

// reset empties a for another aggregate, as newAggCells makes one, and
// keeps the arrays it grew: a rollup's pass aggregates chunk after chunk
// of series (rollupScratch). Its memory is charged to guard again as it
// is taken.
func (a *aggCells) reset(n int, step int64, guard *scanGuard, maxCells int) {
	clear(a.groups)
	clear(a.gids)
	clear(a.m)
	if a.gids == nil {
		a.gids, a.m = map[string]int32{}, map[aggKey]int32{}
	}
	*a = aggCells{keys: a.keys[:0], rows: a.rows[:0], slabs: a.slabs, n: n, step: step,
		groups: a.groups[:0], gids: a.gids, dense: a.dense[:0], m: a.m, guard: guard, maxCells: maxCells}
}

// slot returns where window k is indexed, growing a dense index to reach
// it, or nil when k's group is sparse.
func (a *aggCells) slot(k aggKey) *int32 {
	d := &a.dense[k.group]
	if d.sparse {
		return nil
	}
	if len(d.idx) == 0 {
		d.base = k.window
	}
	diff, ok := subInt64(k.window, d.base)
	off := diff / a.step
	if !ok {
		off = math.MaxInt64 // centuries apart: sparse
	}
	limit := int64(len(a.keys) + maxDenseSlack)
	switch {
	case off < 0 && int64(len(d.idx))-off <= limit:
		grown := make([]int32, int64(len(d.idx))-off)
		for i := range grown[:-off] {
			grown[i] = -1
		}
		copy(grown[-off:], d.idx)
		d.idx, d.base, off = grown, k.window, 0
	case off >= int64(len(d.idx)) && off < limit:
		for int64(len(d.idx)) <= off {
			d.idx = append(d.idx, -1)
		}
	case off < 0 || off >= int64(len(d.idx)):
		// Spread out: move the group to the map.
		for i, x := range d.idx {
			if x >= 0 {
				a.m[aggKey{group: k.group, window: d.base + int64(i)*a.step}] = x
			}
		}
		d.idx, d.sparse = nil, true
		return nil
	}
	return &d.idx[off]
}

// subInt64 returns x-y and whether it fits in an int64.
func subInt64(x, y int64) (int64, bool) {
	d := x - y
	return d, (x^y)&(x^d) >= 0
}

// get returns the cells of k, nil when it has none.
func (a *aggCells) get(k aggKey) []aggCell {
	d := &a.dense[k.group]
	if !d.sparse {
		diff, ok := subInt64(k.window, d.base)
		off := diff / a.step
		if !ok || off < 0 || off >= int64(len(d.idx)) || d.idx[off] < 0 {
			return nil
		}
		return a.rows[d.idx[off]]
	}
	if i, ok := a.m[k]; ok {
		return a.rows[i]
	}
	return nil
}

// row returns the cells of k, making them if needed within the limit.
func (a *aggCells) row(k aggKey) ([]aggCell, error) {
	sl := a.slot(k)
	if sl != nil && *sl >= 0 {
		return a.rows[*sl], nil
	}
	if sl == nil {
		if i, ok := a.m[k]; ok {
			return a.rows[i], nil
		}
	}
	if len(a.keys) >= a.maxCells {
		return nil, mongoerr.New(mongoerr.ExceededMemoryLimit,
			"aggregate needs more than %d (group, window) cells (AggregateMaxCells); use a larger window or a narrower time range", a.maxCells)
	}
	if len(a.slab) < a.n {
		if err := a.takeSlab(); err != nil {
			return nil, err
		}
	}
	if err := a.guard.charge(aggKeyBytes, "the cells of an aggregate"); err != nil {
		return nil, err
	}
	row := a.slab[:a.n:a.n]
	a.slab = a.slab[a.n:]
	i := int32(len(a.keys))
	if sl != nil {
		*sl = i
	} else {
		a.m[k] = i
	}
	a.keys = append(a.keys, k)
	a.rows = append(a.rows, row)
	return row, nil
}

// takeSlab charges and makes the next slab of cells, or takes one made
// before a reset, cleared.
func (a *aggCells) takeSlab() error {
	reuse := a.slabAt < len(a.slabs) && len(a.slabs[a.slabAt]) >= a.n
	n := a.n * min(max(len(a.keys), 16), 1024)
	if reuse {
		n = len(a.slabs[a.slabAt])
	}
	if err := a.guard.charge(int64(n)*int64(unsafe.Sizeof(aggCell{})), "the cells of an aggregate"); err != nil {
		return err
	}
	var s []aggCell
	switch {
	case reuse:
		s = a.slabs[a.slabAt]
		clear(s)
	case a.slabAt < len(a.slabs):
		s = make([]aggCell, n)
		a.slabs[a.slabAt] = s
	default:
		s = make([]aggCell, n)
		a.slabs = append(a.slabs, s)
	}
	a.slabAt++
	a.slab = s[:len(s)/a.n*a.n]
	return nil
}

// sort puts keys and rows in order of group value, then window.
func (a *aggCells) sort() {
	compare := func(x, y aggKey) int {
		if x.group != y.group {
			return strings.Compare(a.groups[x.group], a.groups[y.group])
		}
		return cmp.Compare(x.window, y.window)
	}
	if slices.IsSortedFunc(a.keys, compare) {
		return
	}
	// A newest-first scan makes each group's windows in reverse.
	perm := make([]int, len(a.keys))
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(i, j int) int { return compare(a.keys[i], a.keys[j]) })
	keys := make([]aggKey, len(perm))
	rows := make([][]aggCell, len(perm))
	for i, p := range perm {
		keys[i], rows[i] = a.keys[p], a.rows[p]
	}
	a.keys, a.rows = keys, rows
}

// Aggregate computes windowed aggregates over a time-series collection. The
// result is one row per (group, window) that holds data, sorted by group and
// then window start: the window start in the time column, the group value
// (Extended JSON text) in the meta column, the documents counted
// (AggregateDocsColumn, with CountDocs), then <field>_<func> columns.
// count columns are int64, the others float64.
func (db *DB) Aggregate(ctx context.Context, name string, opts AggregateOptions) (arrow.Record, error) {
	funcs := opts.Funcs
	if funcs == nil {
		funcs = AllAggFuncs
	}
	for _, f := range funcs {
		if !slices.Contains(AllAggFuncs, f) {
			return nil, mongoerr.New(mongoerr.BadValue, "unknown aggregate function %q; want one of count, sum, avg, min, max, first, last", string(f))
		}
	}
	win, err := aggWindowing(&opts)
	if err != nil {
		return nil, err
	}
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		return nil, err
	}
	defer end() // also when planning fails
	a, err := db.aggregate(ctx, c, name, opts, funcs, win, guard)
	if err != nil {
		return nil, err
	}
	return buildAggRecord(opts.Allocator, a.plan.ts, a.fields, funcs, a.cells, a.win, opts.Ungrouped, opts.CountDocs), nil
}

// aggregate folds the rows of an aggregate of collection c into cells,
// which it returns in the aggregator; its plan is closed.
func (db *DB) aggregate(ctx context.Context, c *collection, name string, opts AggregateOptions, funcs []AggFunc, win windowing, guard *scanGuard) (*aggregator, error) {
	// Cells fold rows in any order: open buckets are read unsorted.
	plan := &scanPlan{unordered: true, from: opts.from, thaw: opts.thaw, lazyThaw: true}
	defer plan.close()
	if opts.Archive {
		// The fields to read: those asked for, or all (the numeric ones
		// are known once the archive's types are).
		var err error
		if plan.archive, err = db.loadArchive(ctx, c, opts.Filter, opts.Fields, guard); err != nil {
			return nil, err
		}
	}
	fields, st, err := db.planAggregate(plan, c, name, opts, guard)
	if err != nil {
		return nil, err
	}
	defer st.close()
	ts := plan.ts
	// Counts alone, and no filter on values: which rows hold a field is
	// all an aggregate reads.
	countOnly := plan.filter.residual == nil && (len(funcs) > 0 || len(fields) == 0)
	for _, f := range funcs {
		countOnly = countOnly && (f == AggCount || len(fields) == 0)
	}
	plan.presenceOnly = countOnly

	hint := 16
	if p := &plan.filter; p.minTime > math.MinInt64 && p.maxTime < math.MaxInt64 {
		// The windows in unsigned arithmetic: they may exceed int64's range.
		if n := (uint64(win.key(p.maxTime)) - uint64(win.key(p.minTime))) / uint64(win.step()); n < 4096 {
			hint = int(n) + 1
		}
	}
	n, docs := len(fields), -1
	if opts.CountDocs {
		n, docs = n+1, n
	}
	cells := opts.cells
	if cells != nil {
		cells.reset(n, win.step(), guard, db.opts.AggregateMaxCells)
	} else {
		cells = newAggCells(n, hint, win.step(), guard, db.opts.AggregateMaxCells)
	}
	a := &aggregator{db: db, plan: plan, guard: guard, fields: fields, cells: cells,
		win: win, fieldIdx: map[string]int{}, countOnly: countOnly, docs: docs}
	for i, f := range fields {
		a.fieldIdx[f] = i
	}
	if opts.seed != nil {
		if err := opts.seed(a); err != nil {
			return nil, err
		}
	}
	// Only first and/or last of every field, and no per-row filter: a
	// bucket wholly inside one window whose cell already holds values at
	// or beyond both its time bounds cannot change the result, and is
	// passed over without decoding (unless its rows are counted).
	// Scanning newest first (last only) or oldest first (first only)
	// makes that the common case: lastpoint reads one bucket per series.
	a.wantFirst, a.wantLast = slices.Contains(funcs, AggFirst), slices.Contains(funcs, AggLast)
	a.endsOnly = plan.filter.residual == nil && len(fields) > 0
	for _, f := range funcs {
		a.endsOnly = a.endsOnly && (f == AggFirst || f == AggLast)
	}
	desc := a.endsOnly && a.wantLast && !a.wantFirst
	path := groupPath(ts.MetaField, opts)
	// Walk each series' buckets, row runs at a time: folding is order-
	// insensitive, so no merge of overlapping buckets is needed. The
	// series come a chunk at a time.
	for {
		more, err := st.next()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		for _, s := range plan.series {
			if opts.only != nil && !opts.only[s.id] {
				continue
			}
			plan.thawPending(s)
			g, err := a.cells.groupID(snapGroup(s, ts.MetaField, opts, path))
			if err != nil {
				return nil, err
			}
			if err := a.series(s, g, desc); err != nil {
				return nil, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return a, nil
}

// series folds the buckets of series s, of group g, into the cells.
func (a *aggregator) series(s *seriesSnap, g int32, desc bool) error {
	sc, err := a.plan.seriesScan(s, desc)
	if err != nil {
		return err
	}
	a.group = g
	if a.endsOnly && a.docs < 0 {
		sc.skip = a.skip
	}
	if a.countOnly && a.plan.filter.residual == nil {
		count := func(r *bucket.Reader) (bool, error) { return a.countBucket(r, sc.minTime, sc.maxTime) }
		sc.whole, sc.part = count, count
	}
	err = sc.eachBucket(func(cols *bucket.Columns, lo, hi int, loose *looseCols) error {
		a.db.stats.aggBuckets.Add(1)
		if loose != nil {
			return a.foldUnordered(s, g, loose)
		}
		return a.fold(s, g, cols, lo, hi)
	})
	if cerr := sc.Close(); err == nil {
		err = cerr
	}
	return err
}

// aggregator folds the buckets of an aggregate's scan into its cells.
type aggregator struct {
	db       *DB
	plan     *scanPlan
	guard    *scanGuard
	fields   []string // the fields aggregated, in cell order
	cells    *aggCells
	win      windowing
	fieldIdx map[string]int // aggregated field -> index in a cell row
	// docs is the index in a cell row of the documents counted
	// (CountDocs), -1 for none.
	docs int
	// endsOnly: only first and/or last are asked for, and no residual
	// filter (see Aggregate).
	endsOnly, wantFirst, wantLast bool
	// countOnly: count is the only function (or no field is
	// aggregated); stored columns hold no values (scanPlan.presenceOnly)
	// and rows are only counted.
	countOnly bool
	group     int32 // the group of the series being folded

	presence       bucket.Column // a bucket's presence, countBucket's scratch
	lastKey        aggKey
	lastRow        []aggCell
	lastLo, lastHi int64     // the window of lastKey: [lastLo, lastHi]
	colField       []int     // aggregated field of each column of the bucket folded, -1 for none
	rc             rowCursor // the current row, for the residual filter
}

// countBucket folds, when the aggregate only counts, a stored bucket
// from its header and time index, when its rows in the scan's range [lo,
// hi] lie in one window: they are the documents, and each field's count
// is its rows present among them. A bucket wholly in range takes its
// counts from the control block; one the range cuts finds its rows in
// range through the time index (bucket.Reader.RowRange, which decodes at
// most two blocks of times) and counts each field's presence bits among
// them, with no time column decoded whole. Rows out of order (never
// stored, but RowRange would say so) are left to the decode. It reports
// whether it folded the bucket.
func (a *aggregator) countBucket(r *bucket.Reader, lo, hi int64) (bool, error) {
	whole := lo <= r.MinTime() && r.MaxTime() <= hi
	lo, hi = max(lo, r.MinTime()), min(hi, r.MaxTime())
	k := a.win.key(lo)
	if a.win.key(hi) != k {
		return false, nil
	}
	first, last := 0, r.Rows()
	if !whole {
		var err error
		if first, last, err = r.RowRange(lo, hi); errors.Is(err, bucket.ErrUnsorted) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		if first == last {
			return true, nil // none in range: no cell for the window
		}
	}
	if err := a.guard.rowsN(last - first); err != nil {
		return false, err
	}
	row, err := a.cells.row(aggKey{group: a.group, window: k})
	if err != nil {
		return false, err
	}
	if a.docs >= 0 {
		row[a.docs].count += int64(last - first)
	}
	for i := 0; i < r.NumFields() && len(a.fields) > 0; i++ {
		f := r.Field(i)
		fi, ok := a.fieldIdx[f.Name]
		switch {
		case !ok:
		case whole:
			row[fi].count += int64(f.Count)
		default:
			if err := r.Presence(i, &a.presence); err != nil {
				return false, err
			}
			row[fi].count += presentIn(a.presence.Present, first, last)
		}
	}
	if whole {
		readStats.wholeBuckets.Add(1)
	} else {
		readStats.partBuckets.Add(1)
	}
	return true, nil
}

// presentIn counts the rows of [first, last) a presence bitmap holds (nil:
// every row).
func presentIn(present []uint64, first, last int) int64 {
	if present == nil {
		return int64(last - first)
	}
	n := 0
	for i := first; i < last; {
		w := present[i>>6] >> (uint(i) & 63)
		take := min(64-i&63, last-i)
		if take < 64 {
			w &= 1<<take - 1
		}
		n += bits.OnesCount64(w)
		i += take
	}
	return int64(n)
}

// skip reports whether a bucket of the current group with rows from minT
// to maxT cannot change the first and last the cells hold.
func (a *aggregator) skip(minT, maxT int64) bool {
	w := a.win.key(minT)
	if a.win.key(maxT) != w {
		return false
	}
	row := a.cells.get(aggKey{group: a.group, window: w})
	if row == nil {
		return false
	}
	for i := range row {
		c := &row[i]
		if c.count == 0 || a.wantFirst && c.firstT > minT || a.wantLast && c.lastT < maxT {
			return false
		}
	}
	return true
}

// fold adds rows [lo, hi) of cols, a bucket of series s in group g, to
// the cells.
func (a *aggregator) fold(s *seriesSnap, g int32, cols *bucket.Columns, lo, hi int) error {
	a.mapColumns(cols)
	win := &a.win
	if a.endsOnly && win.key(cols.Times[lo]) == win.key(cols.Times[hi-1]) {
		// One window: only the rows at its ends can matter.
		row, err := a.cells.row(aggKey{group: g, window: win.key(cols.Times[lo])})
		if err != nil {
			return err
		}
		if a.docs >= 0 {
			row[a.docs].count += int64(hi - lo)
		}
		foldEnds(cols, lo, hi, a.colField, a.wantFirst, a.wantLast, row)
		return nil
	}
	residual := a.plan.filter.residual
	if residual == nil {
		if w := win.key(cols.Times[lo]); w == win.key(cols.Times[hi-1]) {
			return a.foldWindow(g, cols, lo, hi, math.MinInt64, math.MaxInt64, w)
		}
		return a.foldRuns(g, cols, lo, hi, math.MinInt64, math.MaxInt64)
	}
	for r := lo; r < hi; r++ {
		if err := a.foldRow(s, g, cols, r); err != nil {
			return err
		}
	}
	return nil
}

// foldRuns adds the rows [lo, hi) of cols (mapped by mapColumns) with
// times in [tlo, thi] to the cells of group g when no residual filter
// applies and they span windows (a bucket straddling their edges): each
// run of rows in one window, as rows in time order make them, at once
// (foldWindow); the rows of short runs one by one.
func (a *aggregator) foldRuns(g int32, cols *bucket.Columns, lo, hi int, tlo, thi int64) error {
	win := &a.win
	for r := lo; r < hi; {
		t := cols.Times[r]
		if t < tlo || t > thi {
			r++
			continue
		}
		w, wlo, whi := win.window(t)
		e := r + 1
		for e < hi && cols.Times[e] >= wlo && cols.Times[e] <= whi {
			e++
		}
		if e-r < minWindowRun {
			if err := a.guard.rowsN(e - r); err != nil {
				return err
			}
			for ; r < e; r++ {
				if t := cols.Times[r]; t >= tlo && t <= thi {
					if err := a.addRow(g, cols, r); err != nil {
						return err
					}
				}
			}
			continue
		}
		if err := a.foldWindow(g, cols, r, e, tlo, thi, w); err != nil {
			return err
		}
		r = e
	}
	return nil
}

// minWindowRun is the fewest rows in one window that fold passes to
// foldWindow at once; shorter runs (rows out of time order) are added
// row by row, through the cell of the row before.
const minWindowRun = 8

// foldRow adds row r of cols, of series s in group g, to its cells if
// the residual filter matches it.
func (a *aggregator) foldRow(s *seriesSnap, g int32, cols *bucket.Columns, r int) error {
	if err := a.guard.row(); err != nil {
		return err
	}
	if residual := a.plan.filter.residual; residual != nil {
		a.rc.i = r
		if !residual.Match(a.plan.rowDoc(s, &a.rc)) {
			return nil
		}
	}
	return a.addRow(g, cols, r)
}

// mapColumns maps the columns of cols to the aggregated fields, once per
// bucket (stored buckets are decoded into the same columns one after
// another), and points the row cursor at it.
func (a *aggregator) mapColumns(cols *bucket.Columns) {
	a.rc.cols = cols
	a.colField = a.colField[:0]
	for i := range cols.Fields {
		fi, ok := a.fieldIdx[cols.Fields[i].Name]
		if !ok {
			fi = -1
		}
		a.colField = append(a.colField, fi)
	}
}

// addRow adds row r of cols (mapped by mapColumns), of group g, to its
// cells.
func (a *aggregator) addRow(g int32, cols *bucket.Columns, r int) error {
	t := cols.Times[r]
	// Rows of a bucket are mostly in time order: most fall in the cell
	// of the row before, whose window [lastLo, lastHi] is known.
	row := a.lastRow
	if row == nil || g != a.lastKey.group || t < a.lastLo || t > a.lastHi {
		w, lo, hi := a.win.window(t) // lo > hi: no shortcut
		k := aggKey{group: g, window: w}
		var err error
		if row, err = a.cells.row(k); err != nil {
			return err
		}
		a.lastKey, a.lastRow, a.lastLo, a.lastHi = k, row, lo, hi
	}
	if a.docs >= 0 {
		row[a.docs].count++
	}
	for i := range cols.Fields {
		fi := a.colField[i]
		col := &cols.Fields[i]
		if fi < 0 || !col.IsPresent(r) {
			continue
		}
		switch {
		case a.countOnly:
			row[fi].count++
		case col.Type == model.KindFloat:
			row[fi].add(t, col.Floats[r])
		case col.Type == model.KindInt || col.Type == model.KindInt32:
			row[fi].add(t, float64(col.Ints[r]))
		}
	}
	return nil
}

// foldUnordered adds the rows of l, an open bucket of series s in group g
// whose rows are not in time order, that lie in the scan's range.
func (a *aggregator) foldUnordered(s *seriesSnap, g int32, l *looseCols) error {
	cols := l.cols
	a.mapColumns(cols)
	lo, hi := s.minTime, a.plan.filter.maxTime
	if a.endsOnly {
		// All in one window (the common case of a last point): only the
		// rows at its ends can matter.
		if w := a.win.key(max(l.minT, lo)); w == a.win.key(min(l.maxT, hi)) {
			n := countIn(cols.Times, lo, hi)
			if n == 0 {
				return nil // none in range: no cell for the window
			}
			row, err := a.cells.row(aggKey{group: g, window: w})
			if err != nil {
				return err
			}
			if a.docs >= 0 {
				row[a.docs].count += n
			}
			foldEndsUnordered(cols, lo, hi, a.colField, a.wantFirst, a.wantLast, row)
			return nil
		}
	}
	residual := a.plan.filter.residual
	if residual == nil {
		if w := a.win.key(max(l.minT, lo)); w == a.win.key(min(l.maxT, hi)) {
			return a.foldWindow(g, cols, 0, len(cols.Times), lo, hi, w)
		}
		return a.foldRuns(g, cols, 0, len(cols.Times), lo, hi)
	}
	for r, t := range cols.Times {
		if t < lo || t > hi {
			continue
		}
		if err := a.foldRow(s, g, cols, r); err != nil {
			return err
		}
	}
	return nil
}

// foldWindow adds the rows [lo, hi) of cols (mapped by mapColumns) with
// times in [tlo, thi], all of them in window w of group g, to that one
// cell row: no residual filter, so no row is looked at but its time and
// values.
func (a *aggregator) foldWindow(g int32, cols *bucket.Columns, lo, hi int, tlo, thi int64, w int64) error {
	if err := a.guard.rowsN(hi - lo); err != nil {
		return err
	}
	times := cols.Times[lo:hi]
	if (tlo != math.MinInt64 || thi != math.MaxInt64) && countIn(times, tlo, thi) == 0 {
		// Rows out of order, none in range: no cell for the window.
		return nil
	}
	row, err := a.cells.row(aggKey{group: g, window: w})
	if err != nil {
		return err
	}
	if a.docs >= 0 {
		if tlo == math.MinInt64 && thi == math.MaxInt64 {
			row[a.docs].count += int64(hi - lo)
		} else {
			row[a.docs].count += countIn(times, tlo, thi)
		}
	}
	for i := range cols.Fields {
		fi := a.colField[i]
		if fi < 0 {
			continue
		}
		col, c := &cols.Fields[i], &row[fi]
		switch {
		case a.countOnly:
			for j, t := range times {
				if t >= tlo && t <= thi && col.IsPresent(lo+j) {
					c.count++
				}
			}
		case col.Type == model.KindFloat:
			vs := col.Floats[lo:hi]
			for j, t := range times {
				if t >= tlo && t <= thi && col.IsPresent(lo+j) {
					c.add(t, vs[j])
				}
			}
		case col.Type == model.KindInt || col.Type == model.KindInt32:
			vs := col.Ints[lo:hi]
			for j, t := range times {
				if t >= tlo && t <= thi && col.IsPresent(lo+j) {
					c.add(t, float64(vs[j]))
				}
			}
		}
	}
	return nil
}

// foldEndsUnordered is foldEnds for rows not in time order: for every
// aggregated field, the present value with the earliest time in [lo, hi]
// (the first such row among equal times, as a stable sort would give)
// and the one with the latest (the last among equal times).
func foldEndsUnordered(cols *bucket.Columns, lo, hi int64, colField []int, wantFirst, wantLast bool, row []aggCell) {
	for i := range cols.Fields {
		fi := colField[i]
		col := &cols.Fields[i]
		if fi < 0 {
			continue
		}
		first, last := -1, -1
		var firstT, lastT int64
		for r, t := range cols.Times {
			if t < lo || t > hi || !col.IsPresent(r) {
				continue
			}
			if first < 0 || t < firstT {
				first, firstT = r, t
			}
			if last < 0 || t >= lastT {
				last, lastT = r, t
			}
		}
		add := func(r int) {
			switch col.Type {
			case model.KindFloat:
				row[fi].add(cols.Times[r], col.Floats[r])
			case model.KindInt, model.KindInt32:
				row[fi].add(cols.Times[r], float64(col.Ints[r]))
			}
		}
		if first < 0 {
			continue
		}
		if wantFirst {
			add(first)
		}
		if wantLast && (!wantFirst || last != first) {
			add(last)
		}
	}
}

// planAggregate checks an aggregate's fields and grouping against
// collection c and sets its scan up in plan. It returns the fields to
// aggregate (opts.Fields, or every field that holds only numbers) and the
// stream of the series to read.
func (db *DB) planAggregate(plan *scanPlan, c *collection, name string, opts AggregateOptions, guard *scanGuard) ([]string, *seriesStream, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	ts := c.opts.TimeSeries
	if ts == nil {
		return nil, nil, mongoerr.New(mongoerr.IllegalOperation, "collection %q is not a time-series collection", name)
	}
	types := func(f string) typeSet {
		t := c.fieldTypes[f]
		if plan.archive != nil {
			t |= plan.archive.types[f]
		}
		return t
	}
	fields := opts.Fields
	if fields == nil {
		seen := map[string]bool{}
		for f := range c.fieldTypes {
			seen[f] = true
		}
		if plan.archive != nil {
			for f := range plan.archive.types {
				seen[f] = true
			}
		}
		for f := range seen {
			if t := types(f); t&^numberTypeSet == 0 {
				fields = append(fields, f)
			}
		}
		sort.Strings(fields)
	}
	for _, f := range fields {
		if t := types(f); t&^numberTypeSet != 0 {
			return nil, nil, mongoerr.New(mongoerr.TypeMismatch, "field %q holds values that are not numbers; aggregates need numbers", f)
		}
	}
	if opts.GroupBy != "" && ts.MetaField != "" && opts.GroupBy != ts.MetaField && !strings.HasPrefix(opts.GroupBy, ts.MetaField+".") {
		return nil, nil, mongoerr.New(mongoerr.BadValue, "'groupBy' must be the metaField %q or a path inside it; got %q", ts.MetaField, opts.GroupBy)
	}
	if c.dropped {
		return nil, nil, notFound(name)
	}
	st, err := db.newSeriesStream(plan, c, opts.Filter, fields, guard, false)
	if err != nil {
		return nil, nil, err
	}
	if opts.only != nil {
		// Only those series are snapshotted and read.
		kept := make([]*series, 0, len(opts.only))
		for _, s := range st.list {
			if opts.only[s.id] {
				kept = append(kept, s)
			}
		}
		st.list = kept
	}
	st.sortChunks = !opts.Ungrouped && groupPath(ts.MetaField, opts) == nil
	return fields, st, nil
}

// snapGroup is groupOf for a scan's series: the whole meta value's group
// is the series' canonical key itself, with nothing decoded.
func snapGroup(s *seriesSnap, metaField string, opts AggregateOptions, path []string) string {
	switch {
	case opts.Ungrouped:
		return ""
	case opts.GroupBy == "" || opts.GroupBy == metaField:
		if !s.hasMeta() {
			return "null"
		}
		if opts.exactGroups {
			return s.metaKey
		}
		return model.GroupMetaKey(s.metaKey)
	}
	// Cut from the key, or decoded for the key alone: a fleet's million
	// series do not keep their meta values for the length of the query.
	if g, ok := model.MetaKeyField(s.metaKey, path); ok {
		return g
	}
	return groupOf(model.MetaOfKey(s.metaKey), metaField, opts)
}

// groupPath is the path of opts.GroupBy inside the meta field, nil when
// it groups by the whole meta value.
func groupPath(metaField string, opts AggregateOptions) []string {
	if opts.GroupBy == "" || opts.GroupBy == metaField {
		return nil
	}
	return strings.Split(strings.TrimPrefix(opts.GroupBy, metaField+"."), ".")
}

// groupOf returns the group key of a series: canonical JSON, an int32 as
// the int64 of its value (model.GroupMeta).
func groupOf(meta any, metaField string, opts AggregateOptions) string {
	if opts.Ungrouped {
		return ""
	}
	v := meta
	if opts.GroupBy != "" && opts.GroupBy != metaField {
		for _, part := range strings.Split(strings.TrimPrefix(opts.GroupBy, metaField+"."), ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[part]
		}
	}
	s, err := model.GroupMeta(v)
	if err != nil {
		return "null"
	}
	return s
}

// buildAggRecord makes the result of an aggregate from its cells (see
// Aggregate), windows named by win's keys; docs adds the documents
// counted, the last cell of each row.
func buildAggRecord(mem memory.Allocator, ts *model.TimeSeriesOptions, fields []string, funcs []AggFunc, cells *aggCells, win windowing, ungrouped, docs bool) arrow.Record {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	fs := []arrow.Field{{Name: ts.TimeField, Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}}}
	groupName := ts.MetaField
	if groupName == "" {
		groupName = "group"
	}
	if !ungrouped {
		fs = append(fs, arrow.Field{Name: groupName, Type: arrow.BinaryTypes.String, Nullable: true,
			Metadata: arrow.NewMetadata([]string{model.MetaColumnMetadataKey}, []string{"json"})})
	}
	if docs {
		fs = append(fs, arrow.Field{Name: AggregateDocsColumn, Type: arrow.PrimitiveTypes.Int64})
	}
	for _, f := range fields {
		for _, fn := range funcs {
			typ := arrow.DataType(arrow.PrimitiveTypes.Float64)
			if fn == AggCount {
				typ = arrow.PrimitiveTypes.Int64
			}
			fs = append(fs, arrow.Field{Name: fmt.Sprintf("%s_%s", f, fn), Type: typ, Nullable: true})
		}
	}
	schema := arrow.NewSchema(fs, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	cells.sort()
	keys := cells.keys
	b.Reserve(len(keys))
	for ki, k := range keys {
		col := 0
		b.Field(col).(*array.TimestampBuilder).Append(arrow.Timestamp(win.startTime(k.window)))
		col++
		if !ungrouped {
			b.Field(col).(*array.StringBuilder).Append(cells.groups[k.group])
			col++
		}
		row := cells.rows[ki]
		if docs {
			b.Field(col).(*array.Int64Builder).Append(row[len(fields)].count)
			col++
		}
		for _, cell := range row[:len(fields)] {
			for _, fn := range funcs {
				fb := b.Field(col)
				col++
				if fn == AggCount {
					fb.(*array.Int64Builder).Append(cell.count)
					continue
				}
				if cell.count == 0 {
					fb.AppendNull()
					continue
				}
				fb.(*array.Float64Builder).Append(cell.value(fn))
			}
		}
	}
	return b.NewRecord()
}

// countIn returns how many of times lie in [lo, hi].
func countIn(times []int64, lo, hi int64) int64 {
	n := int64(0)
	for _, t := range times {
		if t >= lo && t <= hi {
			n++
		}
	}
	return n
}

// foldEnds adds to row, the cells of one window, from rows [lo, hi) of
// cols, the first row (wantFirst) and the last row (wantLast) that hold
// each field: all first and last need. Rows are in time order.
func foldEnds(cols *bucket.Columns, lo, hi int, colField []int, wantFirst, wantLast bool, row []aggCell) {
	for i := range cols.Fields {
		fi := colField[i]
		col := &cols.Fields[i]
		if fi < 0 {
			continue
		}
		add := func(r int) bool {
			if !col.IsPresent(r) {
				return false
			}
			switch col.Type {
			case model.KindFloat:
				row[fi].add(cols.Times[r], col.Floats[r])
			case model.KindInt, model.KindInt32:
				row[fi].add(cols.Times[r], float64(col.Ints[r]))
			}
			return true
		}
		if wantFirst {
			for r := lo; r < hi && !add(r); r++ {
			}
		}
		if wantLast {
			for r := hi - 1; r >= lo && !add(r); r-- {
			}
		}
	}
}
