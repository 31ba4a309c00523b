package timeseries

import (
	"errors"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// filterPlan is a filter split for a time-series collection: conditions on
// the meta field select series, a time range prunes buckets and rows, and
// the rest is evaluated per measurement.
type filterPlan struct {
	meta     *partialfilter.Filter // nil: every series
	minTime  int64                 // inclusive
	maxTime  int64                 // inclusive
	residual *partialfilter.Filter // nil: none
	empty    bool                  // the filter matches nothing
	doc      map[string]any        // scratch: the document matchesSeries matches
	// quoted is meta's required strings as canonical keys quote them
	// (filterPlan.requiredQuoted), made on first use.
	quoted [][]string
}

// planFilter splits f for a collection with options ts.
func planFilter(f *partialfilter.Filter, ts *model.TimeSeriesOptions) filterPlan {
	p := filterPlan{minTime: math.MinInt64, maxTime: math.MaxInt64}
	if f == nil || f.IsEmpty() {
		return p
	}
	var metaTerms, timeTerms, rest []*partialfilter.Filter
	for _, t := range f.Conjuncts() {
		switch {
		case ts.MetaField != "" && t.RefersOnlyTo(ts.MetaField):
			metaTerms = append(metaTerms, t)
		case t.RefersOnlyTo(ts.TimeField):
			timeTerms = append(timeTerms, t)
		default:
			rest = append(rest, t)
		}
	}
	if len(metaTerms) > 0 {
		p.meta = partialfilter.And(metaTerms...)
	}
	if len(timeTerms) > 0 {
		tf := partialfilter.And(timeTerms...)
		r, exact := tf.Range(ts.TimeField)
		if !exact {
			rest = append(rest, timeTerms...)
		}
		if r.Empty {
			p.empty = true
		}
		if r.HasMin {
			if t, ok := r.Min.(time.Time); ok {
				p.minTime = clampNanos(t)
				if !r.MinInclusive {
					if p.minTime == math.MaxInt64 {
						p.empty = true
					}
					p.minTime++
				}
			} else if exact {
				// A time compared with a non-date matches nothing.
				p.empty = true
			}
		}
		if r.HasMax {
			if t, ok := r.Max.(time.Time); ok {
				p.maxTime = clampNanos(t)
				if !r.MaxInclusive {
					if p.maxTime == math.MinInt64 {
						p.empty = true
					}
					p.maxTime--
				}
			} else if exact {
				p.empty = true
			}
		}
		if p.minTime > p.maxTime {
			p.empty = true
		}
	}
	if len(rest) > 0 {
		p.residual = partialfilter.And(rest...)
	}
	return p
}

// clampNanos converts t to nanoseconds, clamping outside int64's range.
func clampNanos(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// matchesSeries reports whether a series' meta value passes the plan.
func (p *filterPlan) matchesSeries(ts *model.TimeSeriesOptions, meta any) bool {
	if p.meta == nil {
		return true
	}
	if p.doc == nil {
		p.doc = make(map[string]any, 1)
	}
	clear(p.doc)
	if meta != nil {
		p.doc[ts.MetaField] = meta
	}
	return p.meta.Match(p.doc)
}

// scanPlan is what a find or an aggregate reads from a time-series
// collection: the series the filter selects, each with its buckets in
// memory captured, a Pebble snapshot taken after them, the filter's plan
// with its residual, and the fields to decode. planScan builds it; close
// releases the snapshot.
type scanPlan struct {
	ts      *model.TimeSeriesOptions
	coll    uint32
	filter  filterPlan
	fields  []string // fields to decode: the projection and what the residual names; nil: all
	maxSpan int64    // how far before its first row a bucket may start
	series  []*seriesSnap
	snap    *pebble.Snapshot
	// lastForgets is the collection's lastForgets when snap was taken.
	lastForgets uint64
	guard       *scanGuard // the query's context and memory account
	// spare is an iterator of snap a closed series scan left, which the
	// next takes with new bounds instead of opening one: opening an
	// iterator per series dominated reads of many series.
	spare *pebble.Iterator
	// unordered: the plan is read only by seriesScan.eachBucket, which
	// folds rows in any order (aggregates): an open bucket whose rows came
	// out of time order is taken as it is (seriesSnap.loose) instead of
	// sorted.
	unordered bool
	// presenceOnly: the plan's reads need which rows hold each field, not
	// the values (an aggregate of counts alone, no residual filter):
	// stored buckets' values are not decoded.
	presenceOnly bool
	// scratch holds the columns of the bucket seriesScan.eachBucket is
	// folding: one bucket at a time, its slices reused from bucket to
	// bucket and series to series.
	scratch bucket.Columns
	// spareScan is the last closed scan of an unordered plan, whose
	// slices the next reuses. lower and upper are the key bounds of the
	// last scan made. seqKey is the upper key of the last scan that gave
	// spare back, seqAt set when spare is at that key or before it
	// (newSeriesScan).
	spareScan    *seriesScan
	lower, upper []byte
	seqKey       []byte
	seqAt        bool
	// snaps is the slab the series of a stream's chunk are taken into.
	snaps []seriesSnap
	// from raises, per series id, the time a series is read from
	// (AggregateOptions.from).
	from map[uint64]int64
	// thaw, when set, takes back the columns the plan thawed from open
	// buckets once the chunk that read them is done, for the next thaw to
	// decode into (AggregateOptions.thaw); thawed lists those the current
	// chunk holds.
	thaw   *thawFree
	thawed []*bucket.Columns
	// lazyThaw: captures leave the decoding of open buckets' frozen rows
	// to the read (pendingThaw), which calls thawPending for each series
	// before reading it.
	lazyThaw bool

	// archive holds the archived rows of a read with the archive
	// (archive_read.go); nil for other reads.
	archive *archiveView

	// doc is the row document the residual filter is evaluated on, reused
	// row after row; docPaths are the top-level fields the filter names.
	doc      map[string]any
	docPaths map[string]bool
}

// planYieldEvery is how many series a plan walks between two releases of
// DB.mu.
var planYieldEvery = 4096

// planScan fills p for a read of collection c with filter and the
// projection fields (nil: all). DB.mu is held for reading, and released
// and taken again every planYieldEvery series, so that writers are not
// held off by a walk over a fleet: each series' buckets in memory and the
// snapshot are one state of the store; the series are in meta order. The series matched and the buckets
// copied to sort them are charged to guard, whose limit they must fit;
// on an error p holds no snapshot.
func (db *DB) planScan(p *scanPlan, c *collection, filter *partialfilter.Filter, fields []string, guard *scanGuard) error {
	p.setup(c, filter, fields, guard)
	if !p.filter.empty {
		now := db.opts.Now()
		ranges := pruneRanges(p.filter.residual)
		list := c.matchingSeries(&p.filter, p.ts)
		// The least the walk will charge, checked before it allocates: a
		// query over a fleet too large for its memory is refused at once,
		// not after holding its limit.
		var least int64
		for _, s := range list {
			if p.lowerBound(c, s, now) <= p.filter.maxTime {
				least += seriesSnapBytes + 8*int64(len(s.buckets))
			}
		}
		if err := guard.fits(least, "the series it matches"); err != nil {
			return err
		}
		// A merge pass that commits while the walk has let go of DB.mu
		// may move the rows of a bucket the walk took from memory into a
		// new stored bucket the snapshot would hold too: the walk is then
		// made again without letting go (merges are rare; walks many).
		for attempt := 0; ; attempt++ {
			gen := db.mergeGen.Load()
			charged, err := db.planWalk(p, c, list, now, ranges, attempt == 0)
			if err != nil {
				return err
			}
			if db.mergeGen.Load() == gen {
				break
			}
			guard.release(charged)
			clear(p.series)
			p.series = p.series[:0]
			db.stats.planRetries.Add(1)
		}
	}
	// Pebble's view is taken after memory's, so that a bucket leaving
	// memory for Pebble in between is seen (once, thanks to memIDs).
	p.snap = db.pdb.NewSnapshot()
	if err := p.archive.check(db, c); err != nil {
		return err
	}
	sort.Slice(p.series, func(i, j int) bool { return p.series[i].metaKey < p.series[j].metaKey })
	return nil
}

// setup fills what p holds for a read of collection c with filter and
// the projection fields (nil: all), before it takes any series: the
// filter's plan, the fields to decode. DB.mu is held for reading.
func (p *scanPlan) setup(c *collection, filter *partialfilter.Filter, fields []string, guard *scanGuard) {
	ts := c.opts.TimeSeries
	p.ts, p.coll, p.guard = ts, c.id, guard
	p.maxSpan = max(c.maxSpan, ts.Span())
	p.filter = planFilter(filter, ts)
	p.fields = fields
	if p.filter.residual != nil && p.fields != nil {
		// The residual filter needs the fields it names.
		p.fields = slices.Clip(p.fields)
		for _, path := range p.filter.residual.Paths() {
			if !contains(p.fields, path) {
				p.fields = append(p.fields, path)
			}
		}
	}
}

// planWalk takes, for planScan, the series of list into p.series with
// their buckets in memory, charging them to p.guard; it returns what it
// charged. With yield, it lets go of DB.mu (held for reading) every
// planYieldEvery series.
func (db *DB) planWalk(p *scanPlan, c *collection, list []*series, now time.Time, ranges []columnRange, yield bool) (charged int64, err error) {
	guard := p.guard
	charge := func(n int64, what string) error {
		if err := guard.charge(n, what); err != nil {
			return err
		}
		charged += n
		return nil
	}
	reorders := c.reorders
	for i, s := range list {
		if yield && i > 0 && i%planYieldEvery == 0 {
			// Let writers in: a plan over a million series must not
			// hold them off for its whole walk. What the walk took so
			// far stays valid (series are only added, and a bucket
			// leaving memory meanwhile is read from the snapshot taken
			// after the walk).
			db.mu.RUnlock()
			if db.hooks.planYielded != nil {
				db.hooks.planYielded()
			}
			db.mu.RLock()
			if c.dropped {
				return charged, notFound(c.name)
			}
			if c.reorders != reorders {
				return charged, mongoerr.New(mongoerr.QueryPlanKilled, "the series index of %q changed during the query; retry it", c.name)
			}
		}
		// Expired measurements are never returned (SPEC 4.5).
		lo := p.lowerBound(c, s, now)
		if lo > p.filter.maxTime {
			continue
		}
		snap, err := db.captureSeries(p, c, s, lo, ranges, charge)
		if err != nil {
			return charged, err
		}
		p.series = append(p.series, snap)
	}
	return charged, nil
}

// captureSeries takes series s of collection c for a read of p from time
// lo: its buckets in memory that hold rows in range, captured (sorted
// unless p is unordered), what they hold charged with charge. DB.mu is
// held for reading.
func (db *DB) captureSeries(p *scanPlan, c *collection, s *series, lo int64, ranges []columnRange, charge func(int64, string) error) (*seriesSnap, error) {
	if err := charge(seriesSnapBytes+8*int64(len(s.buckets)), "the series it matches"); err != nil {
		return nil, err
	}
	var snap *seriesSnap
	if n := len(p.snaps); n < cap(p.snaps) {
		// A stream's chunk: into the slab, which the next chunk reuses.
		p.snaps = p.snaps[:n+1]
		snap = &p.snaps[n]
	} else {
		snap = new(seriesSnap)
	}
	*snap = seriesSnap{id: s.id, metaKey: s.metaKey, minTime: lo, names: c.names, symbols: db.symbols, ranges: ranges,
		noStore: s.storedMax < lo}
	if len(s.buckets) > 0 {
		snap.memIDs = make([]uint64, 0, len(s.buckets))
	}
	for _, b := range s.buckets {
		if b.rows() == 0 || b.maxT < lo || b.minT > p.filter.maxTime {
			// Not in range, but Pebble may hold an older copy.
			snap.memIDs = append(snap.memIDs, b.id)
			continue
		}
		var cols bucket.Columns
		var thawed bool
		var later *pendingThaw
		if !b.unordered {
			// In time order: the capture itself (a sealed bucket, or an
			// open one, whose frozen rows only the read's fields decode).
			cols, thawed, later = captureFor(p, b, lo)
		} else if p.unordered && b.sorted.Load() == nil {
			cols, thawed, later = captureFor(p, b, lo)
			if b.unordered {
				if err := charge(snap.later(&cols, thawed, later), "the buckets in memory it reads"); err != nil {
					return nil, err
				}
				snap.loose = append(snap.loose, looseCols{cols: &cols, minT: b.minT, maxT: b.maxT})
				snap.memIDs = append(snap.memIDs, b.id)
				continue
			}
		} else {
			sorted, copied := b.sortedCapture(&db.sortedMem, db.opts.MemoryBudget/8)
			if copied {
				// The bucket's rows were out of order.
				if err := charge(columnsBytes(&sorted), "buckets sorted in memory"); err != nil {
					return nil, err
				}
			}
			cols = sorted
		}
		// A capture copies the column headers and bitmaps; the values
		// are shared unless thawed (a sorted copy is charged whole above).
		if err := charge(snap.later(&cols, thawed, later), "the buckets in memory it reads"); err != nil {
			return nil, err
		}
		snap.mem = append(snap.mem, &cols)
		snap.memIDs = append(snap.memIDs, b.id)
	}
	if p.archive != nil {
		// Archived rows, read before the plan: charged when read.
		snap.mem = append(snap.mem, p.archive.byMeta[s.metaKey]...)
	}
	return snap, nil
}

// captureFor captures bucket b for a read of p from time lo: its times
// alone when the read decodes no field (a count), else every column.
// thawed reports columns decoded from frozen rows, which the read holds
// alone. Of a bucket whose frozen rows all lie before lo, none is read:
// the reads of the last minutes of an open bucket, and a rollup pass
// folding new rows, decode none. A plan with lazyThaw leaves the decoding
// to the read (later, whose dst the caller sets): cols is then empty.
func captureFor(p *scanPlan, b *memBucket, lo int64) (cols bucket.Columns, thawed bool, later *pendingThaw) {
	unfrozen := b.frozenRows > 0 && b.frozenMaxT < lo
	if p.fields != nil && len(p.fields) == 0 {
		cols = bucket.Columns{Times: b.captureTimes()}
		if b.frozenRows == 0 || unfrozen {
			return cols, false, nil
		}
		return p.thawBucket(b, cols, nil)
	}
	if unfrozen {
		return b.captureTail(), b.tailDecoded(), nil
	}
	if b.frozenRows > 0 && p.fields != nil {
		// Only the fields the read decodes, as from a stored bucket.
		return p.thawBucket(b, b.captureTail(), func(name string) bool { return contains(p.fields, name) })
	}
	cp := b.capture()
	return cp.cols, cp.thawed, nil
}

// thawBucket decodes b's frozen rows followed by tail, its plain rows
// captured, keeping the columns keep keeps (nil: all); with lazyThaw it
// leaves that to the read, out of DB.mu (pendingThaw). DB.mu is held.
func (p *scanPlan) thawBucket(b *memBucket, tail bucket.Columns, keep func(name string) bool) (bucket.Columns, bool, *pendingThaw) {
	if p.lazyThaw {
		// The frozen rows are a prefix that later freezes never write
		// into (memBucket): the read decodes them after DB.mu is let go.
		return bucket.Columns{}, true, &pendingThaw{frozen: b.frozen[:len(b.frozen):len(b.frozen)], frozenRows: b.frozenRows,
			tail: tail, tailDecoded: b.tailDecoded(), keep: keep}
	}
	return p.thawColumns(b.frozen, b.frozenRows, &tail, keep), true, nil
}

// pendingThaw is the decoding of an open bucket's frozen rows that a
// capture left to the read: a capture holds DB.mu, which writers wait
// for, and a rollup pass' captures decoded thousands of buckets under it.
type pendingThaw struct {
	dst        *bucket.Columns
	frozen     []byte
	frozenRows int
	tail       bucket.Columns
	// tailDecoded: tail is open rows decoded, held by the read alone.
	tailDecoded bool
	keep        func(name string) bool
}

// bytes is about what the capture holds until the read and the decoded
// columns will hold, charged to the read's memory at the capture: the
// capture of the rows since the last freeze (every column's header and
// presence, and its values where open rows were decoded), every row's
// time, and for each column decoded its values and presence (the frozen
// bytes bound its strings').
func (t *pendingThaw) bytes() int64 {
	n := int64(t.frozenRows + len(t.tail.Times))
	size := capturedBytes(&t.tail, false) + 8*n
	if t.tailDecoded {
		size += columnsBytes(&t.tail)
	}
	for i := range t.tail.Fields {
		f := &t.tail.Fields[i]
		if t.keep != nil && !t.keep(f.Name) {
			continue
		}
		size += 64 + 8*((n+63)/64)
		switch f.Type {
		case model.KindString, model.KindBSON:
			size += 16*n + int64(len(t.frozen))
			for _, s := range f.Strings {
				size += int64(len(s))
			}
		case model.KindObjectID:
			size += bucket.ObjectIDLen * n
		case model.KindBool:
			size += n
		default:
			size += 8 * n
		}
	}
	return size
}

// thawPending decodes what the capture of s left to the read. DB.mu is
// not held.
func (p *scanPlan) thawPending(s *seriesSnap) {
	for i := range s.thaws {
		t := &s.thaws[i]
		*t.dst = p.thawColumns(t.frozen, t.frozenRows, &t.tail, t.keep)
	}
	clear(s.thaws)
	s.thaws = s.thaws[:0]
}

// thawFree holds thawed columns that no read holds any more, whose slices
// the next thaw decodes into: a rollup pass reads the open buckets of its
// series chunk after chunk, and decoding each chunk's frozen rows into
// new columns was most of what the pass allocated.
type thawFree struct{ cols []*bucket.Columns }

// maxThawFree bounds the columns a thawFree keeps.
const maxThawFree = 4096

// thawColumns is thawColumns into columns of p.thaw when the plan has one.
func (p *scanPlan) thawColumns(frozen []byte, frozenRows int, tail *bucket.Columns, keep func(name string) bool) bucket.Columns {
	if p.thaw == nil {
		return thawColumns(frozen, frozenRows, tail, keep)
	}
	var out *bucket.Columns
	if n := len(p.thaw.cols); n > 0 {
		out = p.thaw.cols[n-1]
		p.thaw.cols[n-1] = nil
		p.thaw.cols = p.thaw.cols[:n-1]
	} else {
		out = new(bucket.Columns)
	}
	thawColumnsInto(out, frozen, frozenRows, tail, keep)
	p.thawed = append(p.thawed, out)
	return *out
}

// recycleThawed gives the columns the plan's chunk thawed to p.thaw: the
// chunk's reads are done.
func (p *scanPlan) recycleThawed() {
	if p.thaw == nil {
		return
	}
	for _, c := range p.thawed {
		if len(p.thaw.cols) < maxThawFree {
			p.thaw.cols = append(p.thaw.cols, c)
		}
	}
	clear(p.thawed)
	p.thawed = p.thawed[:0]
}

// seriesScan starts a scan of series s of the plan, in descending time
// order when desc. The scan must be closed.
func (p *scanPlan) seriesScan(s *seriesSnap, desc bool) (*seriesScan, error) {
	var it *pebble.Iterator
	if !s.noStore {
		it, p.spare = p.spare, nil
	}
	sc := p.spareScan
	p.spareScan = nil
	return newSeriesScan(p, sc, it, s, desc)
}

// keep takes back the iterator of a closed series scan; it reports
// whether it did (else the caller closes it).
func (p *scanPlan) keep(it *pebble.Iterator) bool {
	if p.spare != nil || p.snap == nil || it.Error() != nil {
		return false
	}
	p.spare = it
	return true
}

// close releases the plan's snapshot and gives the query's memory back.
// It is safe to call more than once.
func (p *scanPlan) close() error {
	p.guard.finish()
	p.recycleThawed()
	var err error
	if p.spare != nil {
		err = p.spare.Close()
		p.spare = nil
	}
	p.seqAt = false
	if p.snap == nil {
		return err
	}
	err = errors.Join(err, p.snap.Close())
	p.snap = nil
	return err
}

// rowDoc builds the document of one row for a residual filter.
// The document holds only the fields the filter names, and is reused: the
// filter does not keep it.
func (p *scanPlan) rowDoc(s *seriesSnap, rc *rowCursor) map[string]any {
	if p.docPaths == nil {
		p.docPaths = map[string]bool{}
		for _, path := range p.filter.residual.Paths() {
			top, _, _ := strings.Cut(path, ".")
			p.docPaths[top] = true
		}
		p.doc = make(map[string]any, len(p.docPaths))
	}
	doc := p.doc
	clear(doc)
	if p.docPaths[p.ts.TimeField] {
		doc[p.ts.TimeField] = time.Unix(0, rc.time()).UTC()
	}
	if p.ts.MetaField != "" && p.docPaths[p.ts.MetaField] && s.hasMeta() {
		doc[p.ts.MetaField] = s.metaValue()
	}
	for i := range rc.cols.Fields {
		col := &rc.cols.Fields[i]
		if p.docPaths[col.Name] && col.IsPresent(rc.i) {
			doc[col.Name] = cellValue(col, rc.i)
		}
	}
	if p.docPaths[idField] {
		if _, stored := doc[idField]; !stored {
			doc[idField] = partialfilter.ObjectID(madeID(s.id, rc.time()))
		}
	}
	return doc
}
