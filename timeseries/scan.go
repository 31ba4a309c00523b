package timeseries

import (
	"bytes"
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/hourglassdb/hourglass/model"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
)

// seriesScan produces the measurements of one series in time order
// (ascending, or descending when desc), merging buckets whose time ranges
// overlap. Buckets are read and decoded only when the merge reaches them, so
// a scan holds only the buckets that overlap its position in memory.
type seriesScan struct {
	s       *seriesSnap
	fields  []string // projected fields; nil: all
	desc    bool
	minTime int64
	maxTime int64
	maxSpan int64

	mem    []*bucket.Columns // captured, sorted, not yet opened; in scan order
	it     *pebble.Iterator  // sealed buckets in key order; nil when done
	active cursorHeap
	reader *bucket.Reader // from readerPool, returned by Close
	err    error
	guard  *scanGuard // the query's: context checks, memory account
	// skip, if set, is asked about every bucket before its columns are
	// decoded, with the bounds of its rows inside the scan's range; a
	// bucket it answers true for is passed over (eachBucket only).
	skip func(minT, maxT int64) bool
	// whole, if set, is given every stored bucket whose rows all lie in
	// the scan's range before its columns are decoded; a bucket it
	// answers true for (it took the bucket from its header) is passed
	// over (eachBucket only).
	whole func(r *bucket.Reader) (bool, error)
	// part, if set, is given every other stored bucket in range, whose
	// rows lie partly outside it, in the same way.
	part func(r *bucket.Reader) (bool, error)
	// plan, when the scan is one of a plan's, takes its iterator back at
	// Close for the next series.
	plan *scanPlan
	// upper, if set, is the key the scan stops at: its iterator spans
	// the collection (newSeriesScan). It is the plan's buffer, valid
	// until the plan's next scan.
	upper []byte
}

// seriesSnap is a series as a scan sees it: captured under DB.mu.
type seriesSnap struct {
	id      uint64
	metaKey string
	// meta is the decoded meta value once metaValue made it: a scan over
	// a fleet decodes only what groups or filters ask for.
	meta     any
	metaDone bool
	minTime  int64 // the scan's lower time bound: the filter's, or the TTL cutoff
	mem      []*bucket.Columns
	memIDs   []uint64 // the buckets read from memory (a series has few)
	names    []string // the collection's name table
	symbols  *symbolCache
	ranges   []columnRange // buckets outside these hold no matching row
	// loose are open buckets whose rows are out of time order, with
	// their time bounds, taken unsorted by an unordered plan.
	loose []looseCols
	// thaws are the decodings of frozen rows the capture left to the
	// read (scanPlan.lazyThaw), into columns of mem or loose.
	thaws []pendingThaw
	// noStore: no stored bucket of the series reaches minTime
	// (series.storedMax), so the scan reads memory only.
	noStore bool
}

// later returns the bytes a capture of a bucket into cols holds, and
// keeps t, when not nil, for the read to decode into cols.
func (s *seriesSnap) later(cols *bucket.Columns, thawed bool, t *pendingThaw) int64 {
	if t == nil {
		return capturedBytes(cols, thawed)
	}
	t.dst = cols
	s.thaws = append(s.thaws, *t)
	return t.bytes()
}

// looseCols is a capture of an open bucket whose rows are not in time
// order, and the bounds of their times.
type looseCols struct {
	cols       *bucket.Columns
	minT, maxT int64
}

// rowCursor walks the rows of one decoded bucket.
type rowCursor struct {
	cols  *bucket.Columns
	i     int // current row
	end   int // exclusive (ascending) / the last row index is i >= end (descending: i < end)
	desc  bool
	bytes int64 // charged to the query's memory while the cursor is active
}

func (c *rowCursor) time() int64 { return c.cols.Times[c.i] }

func (c *rowCursor) valid() bool {
	if c.desc {
		return c.i >= c.end
	}
	return c.i < c.end
}

func (c *rowCursor) next() {
	if c.desc {
		c.i--
	} else {
		c.i++
	}
}

type cursorHeap struct {
	cs   []*rowCursor
	desc bool
}

func (h *cursorHeap) Len() int { return len(h.cs) }
func (h *cursorHeap) Less(i, j int) bool {
	if h.desc {
		return h.cs[i].time() > h.cs[j].time()
	}
	return h.cs[i].time() < h.cs[j].time()
}
func (h *cursorHeap) Swap(i, j int) { h.cs[i], h.cs[j] = h.cs[j], h.cs[i] }
func (h *cursorHeap) Push(x any)    { h.cs = append(h.cs, x.(*rowCursor)) }
func (h *cursorHeap) Pop() any {
	x := h.cs[len(h.cs)-1]
	h.cs = h.cs[:len(h.cs)-1]
	return x
}

// readerPool holds bucket readers with their scratch space (entropy
// decoders' tables, buffers) for scans to reuse.
var readerPool = sync.Pool{New: func() any { return new(bucket.Reader) }}

// newSeriesScan prepares a scan of s over [s.minTime, p's maxTime] for
// plan p, in descending time order when desc. sc, if not nil, is a closed
// scan to reuse; it, if not nil, an iterator of p's snapshot to reuse.
// The scan must be closed.
//
// An ascending scan of an unordered plan (an aggregate's, a count's, a
// distinct's, which read one series after another to the end of their
// keys, in id order mostly) keeps an iterator over the whole collection
// and stops at the series' upper key itself (seriesScan.upper): when the
// previous scan left the iterator at its own upper key or before, and
// this series' keys come after that, the iterator is at this series'
// first key or before it, and a seek is made only when before, where
// new bounds for each series would make every series seek from the top.
func newSeriesScan(p *scanPlan, sc *seriesScan, it *pebble.Iterator, s *seriesSnap, desc bool) (*seriesScan, error) {
	if sc == nil {
		sc = &seriesScan{}
	}
	minTime, maxTime := s.minTime, p.filter.maxTime
	*sc = seriesScan{s: s, fields: p.fields, desc: desc, minTime: minTime, maxTime: maxTime, maxSpan: p.maxSpan, guard: p.guard, plan: p,
		mem: sc.mem[:0], active: cursorHeap{cs: sc.active.cs[:0], desc: desc}}
	for _, cols := range s.mem {
		n := len(cols.Times)
		if n == 0 || cols.Times[n-1] < minTime || cols.Times[0] > maxTime {
			continue
		}
		sc.mem = append(sc.mem, cols)
	}
	if len(sc.mem) > 1 {
		if desc {
			slices.SortFunc(sc.mem, func(a, b *bucket.Columns) int { return cmp.Compare(last(b), last(a)) })
		} else {
			slices.SortFunc(sc.mem, func(a, b *bucket.Columns) int { return cmp.Compare(a.Times[0], b.Times[0]) })
		}
	}
	if s.noStore {
		return sc, nil
	}
	p.lower, p.upper = appendScanKeyBounds(p.lower[:0], p.upper[:0], p.coll, s.id, minTime, maxTime, p.maxSpan)
	if p.unordered && !desc {
		if it == nil {
			cp := collPrefix(spaceBucket, p.coll)
			var err error
			if it, err = p.snap.NewIter(&pebble.IterOptions{LowerBound: cp, UpperBound: prefixEnd(cp)}); err != nil {
				return nil, err
			}
			p.seqAt = false
		}
		if !p.seqAt || bytes.Compare(p.lower, p.seqKey) < 0 || it.Valid() && bytes.Compare(it.Key(), p.lower) < 0 {
			it.SeekGE(p.lower)
		}
		sc.it, sc.upper = it, p.upper
		p.seqAt = false // until this scan gives the iterator back
		sc.skipInMemory()
		return sc, nil
	}
	// Pebble copies the bounds.
	if it != nil {
		it.SetBounds(p.lower, p.upper)
	} else {
		var err error
		if it, err = p.snap.NewIter(&pebble.IterOptions{LowerBound: p.lower, UpperBound: p.upper}); err != nil {
			return nil, err
		}
	}
	sc.it = it
	if desc {
		it.Last()
	} else {
		it.First()
	}
	sc.skipInMemory()
	return sc, nil
}

// valid reports whether the scan's iterator is on one of its keys.
func (sc *seriesScan) valid() bool {
	if sc.it == nil || !sc.it.Valid() {
		return false
	}
	return sc.upper == nil || bytes.Compare(sc.it.Key(), sc.upper) < 0
}

// scanKeyBounds returns the keys between which the stored buckets of series
// id that may hold rows in [minTime, maxTime] lie: a bucket starts at most
// maxSpan before its first row.
func scanKeyBounds(coll uint32, id uint64, minTime, maxTime, maxSpan int64) (lower, upper []byte) {
	return appendScanKeyBounds(nil, nil, coll, id, minTime, maxTime, maxSpan)
}

// appendScanKeyBounds is scanKeyBounds appending the keys to lower and
// upper.
func appendScanKeyBounds(lower, upper []byte, coll uint32, id uint64, minTime, maxTime, maxSpan int64) ([]byte, []byte) {
	lo := minTime
	if lo > math.MinInt64+maxSpan {
		lo -= maxSpan
	} else {
		lo = math.MinInt64
	}
	lower = appendSeriesTimeKey(lower, spaceBucket, coll, id, lo)
	if maxTime == math.MaxInt64 {
		// The end of the series' prefix: the next series' prefix.
		upper = prefixEndInPlace(appendSeriesTimeKey(upper, spaceBucket, coll, id, math.MinInt64)[:1+4+8])
	} else {
		upper = appendSeriesTimeKey(upper, spaceBucket, coll, id, maxTime+1)
	}
	return lower, upper
}

func last(c *bucket.Columns) int64 { return c.Times[len(c.Times)-1] }

// skipInMemory moves the iterator past buckets that are also in memory
// (newer there).
func (sc *seriesScan) skipInMemory() {
	for sc.valid() {
		kp, err := parseBucketKey(sc.it.Key())
		if err != nil {
			sc.err = err
			return
		}
		if !slices.Contains(sc.s.memIDs, kp.id) {
			return
		}
		sc.step()
	}
}

func (sc *seriesScan) step() {
	if sc.desc {
		sc.it.Prev()
	} else {
		sc.it.Next()
	}
}

// Close releases the scan's iterator and the memory its active buckets
// were charged.
func (sc *seriesScan) Close() error {
	for _, c := range sc.active.cs {
		sc.guard.release(c.bytes)
	}
	sc.active.cs = nil
	if sc.reader != nil {
		sc.reader.Reset(nil) // drops its reference to the bucket's bytes
		readerPool.Put(sc.reader)
		sc.reader = nil
	}
	p := sc.plan
	if p != nil && p.unordered && p.spareScan == nil {
		// The next scan of the plan takes this one's slices; nothing
		// holds a scan of an unordered plan once it is closed.
		defer func() { p.spareScan = sc }()
	}
	if sc.it == nil {
		return nil
	}
	if p != nil && p.keep(sc.it) {
		if sc.upper != nil {
			// Left at its upper key or before (see newSeriesScan).
			p.seqKey, p.seqAt = append(p.seqKey[:0], sc.upper...), true
		}
		sc.it = nil
		return nil
	}
	err := sc.it.Close()
	sc.it = nil
	return err
}

// bound returns, for the next unread Pebble bucket, the earliest time it may
// hold (ascending) or the latest (descending); ok is false when none is left.
func (sc *seriesScan) pebbleBound() (t int64, ok bool) {
	if !sc.valid() {
		return 0, false
	}
	kp, err := parseBucketKey(sc.it.Key())
	if err != nil {
		sc.err = err
		return 0, false
	}
	if sc.desc {
		if kp.minTime > math.MaxInt64-sc.maxSpan {
			return math.MaxInt64, true
		}
		return kp.minTime + sc.maxSpan - 1, true
	}
	return kp.minTime, true
}

// before reports whether a bucket bounded by t must be opened before a row at
// time cur is emitted.
func (sc *seriesScan) before(t, cur int64) bool {
	if sc.desc {
		return t >= cur
	}
	return t <= cur
}

// fill opens every unread bucket that may hold a row that comes before the
// head of the active heap.
func (sc *seriesScan) fill() error {
	for {
		var cur int64
		haveCur := sc.active.Len() > 0
		if haveCur {
			cur = sc.active.cs[0].time()
		}
		if len(sc.mem) > 0 {
			m := sc.mem[0]
			t := m.Times[0]
			if sc.desc {
				t = last(m)
			}
			if !haveCur || sc.before(t, cur) {
				sc.mem = sc.mem[1:]
				sc.push(sc.cursor(m))
				continue
			}
		}
		if t, ok := sc.pebbleBound(); ok && (!haveCur || sc.before(t, cur)) {
			cols, err := sc.decode(sc.it.Value(), nil)
			if err != nil {
				return err
			}
			sc.step()
			sc.skipInMemory()
			if cols != nil {
				c := sc.cursor(cols)
				if c.valid() {
					c.bytes = columnsBytes(cols)
					if err := sc.guard.charge(c.bytes, "the buckets of a sort"); err != nil {
						return err
					}
				}
				sc.push(c)
			}
			continue
		}
		return sc.err
	}
}

func (sc *seriesScan) push(c *rowCursor) {
	if c.valid() {
		heap.Push(&sc.active, c)
	}
}

// decode decodes the projected columns of an encoded bucket into dst,
// reusing its slices, or into new columns when dst is nil; nil when the
// bucket lies outside the scan's range.
func (sc *seriesScan) decode(v []byte, dst *bucket.Columns) (*bucket.Columns, error) {
	if err := sc.guard.bucket(); err != nil {
		return nil, err
	}
	if sc.reader == nil {
		sc.reader = readerPool.Get().(*bucket.Reader)
		if sc.s.symbols != nil { // a nil *symbolCache is not a nil interface
			sc.reader.SetSymbolCache(sc.s.symbols)
		} else {
			sc.reader.SetSymbolCache(nil)
		}
	}
	r := sc.reader
	if err := r.ResetNames(v, sc.s.names); err != nil {
		return nil, fmt.Errorf("series %d: %w", sc.s.id, err)
	}
	if r.Rows() == 0 || r.MaxTime() < sc.minTime || r.MinTime() > sc.maxTime {
		return nil, nil
	}
	if sc.skip != nil && sc.skip(max(r.MinTime(), sc.minTime), min(r.MaxTime(), sc.maxTime)) {
		return nil, nil
	}
	if len(sc.s.ranges) > 0 && pruned(sc.s.ranges, r) {
		return nil, nil
	}
	if sc.whole != nil && r.MinTime() >= sc.minTime && r.MaxTime() <= sc.maxTime {
		if done, err := sc.whole(r); done || err != nil {
			return nil, err
		}
	} else if sc.part != nil {
		if done, err := sc.part(r); done || err != nil {
			return nil, err
		}
	}
	cols := dst
	if cols == nil {
		cols = &bucket.Columns{}
	}
	cols.Fields = cols.Fields[:0]
	var err error
	if cols.Times, err = r.Times(cols.Times); err != nil {
		return nil, err
	}
	for i := 0; i < r.NumFields(); i++ {
		if sc.fields != nil && !contains(sc.fields, r.Field(i).Name) {
			continue
		}
		if n := len(cols.Fields); n < cap(cols.Fields) {
			cols.Fields = cols.Fields[:n+1] // Column and Presence set all of it
		} else {
			cols.Fields = append(cols.Fields, bucket.Column{})
		}
		col := &cols.Fields[len(cols.Fields)-1]
		if sc.plan != nil && sc.plan.presenceOnly { // times and presence, no values
			if err := r.Presence(i, col); err != nil {
				return nil, err
			}
			continue
		}
		if err := r.Column(i, col); err != nil {
			return nil, err
		}
	}
	return cols, nil
}

// cursor positions a cursor on the rows of sorted cols inside the range.
func (sc *seriesScan) cursor(cols *bucket.Columns) *rowCursor {
	lo := sort.Search(len(cols.Times), func(i int) bool { return cols.Times[i] >= sc.minTime })
	hi := sort.Search(len(cols.Times), func(i int) bool { return cols.Times[i] > sc.maxTime })
	c := &rowCursor{cols: cols, desc: sc.desc}
	if sc.desc {
		c.i, c.end = hi-1, lo
	} else {
		c.i, c.end = lo, hi
	}
	return c
}

// next returns the cursor holding the next row in order, or nil at the end.
// The caller reads the row, then calls advance.
func (sc *seriesScan) next() (*rowCursor, error) {
	if len(sc.s.loose) > 0 {
		return nil, fmt.Errorf("timeseries: series %d: rows out of order in an ordered read", sc.s.id)
	}
	if err := sc.fill(); err != nil {
		return nil, err
	}
	if sc.active.Len() == 0 {
		return nil, nil
	}
	return sc.active.cs[0], nil
}

// advance moves past the row returned by next.
func (sc *seriesScan) advance() {
	c := sc.active.cs[0]
	c.next()
	if c.valid() {
		heap.Fix(&sc.active, 0)
	} else {
		heap.Pop(&sc.active)
		sc.guard.release(c.bytes)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// eachBucket calls fn with every bucket of the scan that holds rows in
// [minTime, maxTime], in no particular order and without merging: the
// scan for order-insensitive work (aggregates), which skips the per-row
// heap. For a bucket in time order, fn is given the range [lo, hi) of
// those rows; for an open bucket whose rows are not (seriesSnap.loose),
// all its rows and loose, and the rows outside the range are fn's to pass
// over. It consumes the scan.
func (sc *seriesScan) eachBucket(fn func(cols *bucket.Columns, lo, hi int, loose *looseCols) error) error {
	visit := func(cols *bucket.Columns) error {
		lo := sort.Search(len(cols.Times), func(i int) bool { return cols.Times[i] >= sc.minTime })
		hi := sort.Search(len(cols.Times), func(i int) bool { return cols.Times[i] > sc.maxTime })
		if lo < hi {
			return fn(cols, lo, hi, nil)
		}
		return nil
	}
	for i := range sc.s.loose {
		l := &sc.s.loose[i]
		if err := sc.guard.bucket(); err != nil {
			return err
		}
		lo, hi := max(l.minT, sc.minTime), min(l.maxT, sc.maxTime)
		if lo > hi || sc.skip != nil && sc.skip(lo, hi) {
			continue
		}
		if err := fn(l.cols, 0, len(l.cols.Times), l); err != nil {
			return err
		}
	}
	for _, m := range sc.mem {
		if err := sc.guard.bucket(); err != nil {
			return err
		}
		if sc.skip != nil && sc.skip(max(m.Times[0], sc.minTime), min(last(m), sc.maxTime)) {
			continue
		}
		if err := visit(m); err != nil {
			return err
		}
	}
	sc.mem = nil
	var scratch *bucket.Columns
	if sc.plan != nil {
		scratch = &sc.plan.scratch // fn keeps nothing of a bucket
	}
	for sc.valid() {
		cols, err := sc.decode(sc.it.Value(), scratch)
		if err != nil {
			return err
		}
		if cols != nil {
			if err := visit(cols); err != nil {
				return err
			}
		}
		sc.step()
		sc.skipInMemory()
		if sc.err != nil {
			return sc.err
		}
	}
	return nil
}

// metaValue is the snapshot's decoded meta value, nil for none, decoded on
// first use. A snapshot belongs to one scan at a time.
func (s *seriesSnap) metaValue() any {
	if !s.metaDone {
		s.meta, s.metaDone = model.MetaOfKey(s.metaKey), true
	}
	return s.meta
}

// hasMeta reports whether the series has a meta value (not null).
func (s *seriesSnap) hasMeta() bool { return s.metaKey != "" && s.metaKey != "null" }

// runKey is the series' key as MetaRun.Key has it: "null" for no meta
// value.
func runKey(metaKey string) string {
	if metaKey == "" {
		return "null"
	}
	return metaKey
}
