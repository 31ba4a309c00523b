package timeseries

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/ttl"
)

// InsertOptions control an insert.
type InsertOptions struct {
	// Unordered stores every valid measurement; otherwise the insert stops
	// at the first invalid one, as MongoDB's ordered inserts do.
	Unordered bool
}

// WriteError is a refused measurement of an insert.
type WriteError struct {
	Index int
	Err   error
}

// InsertResult reports what an insert stored.
type InsertResult struct {
	Inserted int
	Errors   []WriteError
}

// Batch holds the rows of one insert: measurements for a time-series
// collection, documents for a plain one. Exactly one of the two is used,
// as the collection's kind says; rows of the other kind are refused with
// IllegalOperation.
type Batch struct {
	Measurements []model.Measurement
	// Documents without _id get a new ObjectId, set in the document.
	Documents []document.Doc
	// Orders, when set, holds the field order of each document (nil
	// entries and a nil slice are name order). A document is stored, and
	// read back, in its order with _id moved first, as MongoDB stores it.
	Orders []*document.Order
}

// Insert validates the rows of b and stores the valid ones in collection
// name. When it returns, the stored rows are durable and visible. A row
// that is refused stores nothing of itself; with ordered inserts nothing
// after it is stored either. The error is non-nil only when nothing could
// be attempted (unknown collection, rows of the other kind of collection,
// closed DB, I/O failure): refusals of single rows are in the result.
//
// A time-series batch is grouped by meta value, put in time order and
// applied to the series' open buckets (docs/architecture.md, "Write
// path"); a plain batch is checked against the collection's unique
// indexes (a duplicate _id is DuplicateKey, 11000) and written as one
// durable log record.
func (db *DB) Insert(ctx context.Context, name string, b Batch, opts InsertOptions) (InsertResult, error) {
	if err := db.checkWritable(); err != nil {
		return InsertResult{}, err
	}
	for tries := 1; ; tries++ {
		c, err := db.lookup(name)
		if err != nil {
			return InsertResult{}, err
		}
		// The store was found writable above: one free-space check (a
		// statfs) an insert, not two.
		res, err := c.kind().insert(ctx, db, c, b, opts)
		if err != nil && c.gone.Load() && tries < maxGoneTries {
			// The collection was dropped, or ReplaceFrom swapped the
			// content, while the insert ran, and nothing of it was
			// written: it goes to the collection of its name now, if
			// there is one.
			continue
		}
		return res, err
	}
}

// maxGoneTries bounds the tries of an insert that keeps meeting its
// collection gone (dropped and created again, or ReplaceFrom, again and
// again).
const maxGoneTries = 4

// insertMeasurements is Insert of measurements into a time-series
// collection.
func (db *DB) insertMeasurements(ctx context.Context, c *collection, ms []model.Measurement, opts InsertOptions) (InsertResult, error) {
	var res InsertResult
	name := c.name
	c.lookupMu.RLock()
	ts := c.opts.TimeSeries
	c.lookupMu.RUnlock()
	if ts == nil {
		return res, mongoerr.New(mongoerr.IllegalOperation, "collection %q is not a time-series collection", name)
	}
	// Validate and group by series.
	sc := insertScratchPool.Get().(*insertScratch)
	defer sc.release()
	groups, gidx, counts, res := db.groupBatch(sc, c, ts, ms, opts)
	if res.Inserted == 0 {
		return res, nil
	}
	rows := sc.rowsFor(res.Inserted)
	off := 0
	for gi := range groups {
		groups[gi].rows = rows[off : off : off+counts[gi]]
		off += counts[gi]
	}
	for i, gi := range gidx {
		if gi >= 0 {
			groups[gi].rows = append(groups[gi].rows, ms[i])
		}
	}
	for gi := range groups {
		sortRows(groups[gi].rows)
	}
	if err := db.waitForMemory(ctx); err != nil {
		res.Inserted = 0
		return res, err
	}
	var rec []byte
	var enc *recordEncoder
	if !db.opts.ExternalLog {
		// The encoder keeps the record's buffer for the next insert: the
		// log copies or compresses a record before Append returns.
		enc = db.encPool.Get().(*recordEncoder)
		rec = enc.encodeInsert(enc.buf[:0], c.id, groups)
		db.keysRelogged.Add(int64(enc.relogged))
	}

	if h := db.hooks.logging; h != nil {
		h()
	}
	db.cutMu.RLock()
	var err error
	switch {
	case c.gone.Load():
		// Dropped (a drop holds the cut's lock, so it cannot come
		// between this and the apply), or replaced: the record names a
		// collection and series no longer there, which after
		// ReplaceFrom's cut would be replayed over the new content.
		err = errGone(name)
	case rec != nil:
		if _, aerr := db.wal.Append(rec); aerr != nil {
			err = db.diskErr(fmt.Errorf("timeseries: insert into %q: %w", name, aerr))
		}
	}
	if enc != nil {
		enc.keep(rec)
		db.encPool.Put(enc)
	}
	if err != nil {
		db.cutMu.RUnlock()
		res.Inserted = 0
		return res, err
	}
	db.mu.Lock()
	db.apply(c, groups)
	db.mu.Unlock()
	db.cutMu.RUnlock()
	if db.wal.Size() > db.opts.CheckpointLogBytes || db.sealedSince.Load() > db.bucketBudget()/8 ||
		db.keysRelogged.Load() > keysReloggedWake {
		db.wakeCheckpointer()
	}
	return res, nil
}

// keysReloggedWake is the bytes of meta keys written again to the log
// (DB.keysRelogged) past which an insert wakes the checkpointer, so that
// the series it makes durable are named by their ids from then on. A
// remote write load of 20,000 series, 7.2M samples, went through before
// the log reached CheckpointLogBytes: every record named every series by
// its labels, 93 bytes a sample before compression, and compressing them
// took 8-9% of the CPU (docs/benchmarks.md, "Series named by id sooner").
const keysReloggedWake = 8 << 20

// groupBatch validates ms and groups them by meta value: the groups, each
// measurement's group (-1: refused), the rows of each group, and what the
// insert will report. A group names the series of its key when the
// collection holds it (group.s), found here: apply then looks up only
// series new to the collection. The key of a new series given as a
// MetaKey (line protocol, remote write) is validated where it first
// comes.
//
// A series held is found again in the batch through the group it last
// went to (series.group), not through a map of the batch's keys. Another
// insert grouping the same series at once can move that mark, and the
// series then gets a second group; such groups are merged at the end
// (mergeSplit), so that a series' rows keep the batch's order (rows of
// one time are stored in the order sent).
func (db *DB) groupBatch(sc *insertScratch, c *collection, ts *model.TimeSeriesOptions, ms []model.Measurement, opts InsertOptions) (groups []group, gidx []int32, counts []int, res InsertResult) {
	sc.reset()
	groups, counts, index := sc.groups, sc.counts, sc.index
	defer func() { sc.groups, sc.counts = groups, counts }()
	var lastKey string
	lastGroup := -1
	// Each measurement's group (-1: refused), then the groups' rows in one
	// slice of exactly the right size.
	gidx = slices.Grow(sc.gidx[:0], len(ms))[:len(ms)]
	sc.gidx = gidx
	for i := range gidx {
		gidx[i] = -1
	}
	// The series are looked up under the read lock, taken again every
	// groupLockRows rows so that a writer of the series map (apply,
	// adding series) does not wait for a whole batch.
	c.lookupMu.RLock()
	locked := 0
	var prev *model.Measurement // the last measurement validate accepted
	for i := range ms {
		if locked++; locked == groupLockRows {
			c.lookupMu.RUnlock()
			c.lookupMu.RLock()
			locked = 0
		}
		m := &ms[i]
		err := m.ValidateAfter(ts, prev)
		if err == nil {
			prev = m
		}
		var key string
		if err == nil {
			if k, ok := m.Meta.(model.MetaKey); ok {
				key = string(k)
			} else {
				key, err = model.CanonicalMeta(m.Meta)
			}
		}
		gi := lastGroup
		if err == nil && (gi < 0 || key != lastKey) {
			if s := c.seriesFor(m, key); s != nil {
				if t := int(s.group.Load()) - 1; t >= 0 && t < len(groups) && groups[t].s == s {
					gi = t
				} else {
					gi = len(groups)
					groups = append(groups, group{metaKey: s.metaKey, s: s})
					counts = append(counts, 0)
					s.group.Store(uint32(gi + 1))
				}
			} else if t, ok := index[key]; ok {
				gi = t
			} else {
				if k, keyed := m.Meta.(model.MetaKey); keyed {
					// Checked here, once per batch; a key of a series
					// held was checked when the series was made.
					c.lookupMu.RUnlock()
					err = model.ValidMetaKey(k)
					c.lookupMu.RLock()
				}
				if err == nil {
					gi = len(groups)
					index[key] = gi
					groups = append(groups, group{metaKey: key})
					counts = append(counts, 0)
				}
			}
			if err == nil {
				lastKey, lastGroup = key, gi
			}
		}
		if err != nil {
			res.Errors = append(res.Errors, WriteError{Index: i, Err: err})
			if !opts.Unordered {
				break
			}
			continue
		}
		gidx[i] = int32(gi)
		counts[gi]++
		res.Inserted++
		if h := db.hooks.grouped; h != nil {
			h(c, i)
		}
	}
	c.lookupMu.RUnlock()
	// A series with two groups left its mark on the later one, unless
	// another insert moved it since: either way a group whose series'
	// mark is not its own may have a twin.
	for gi := range groups {
		if s := groups[gi].s; s != nil && s.group.Load() != uint32(gi+1) {
			groups, counts = mergeSplit(groups, gidx, counts)
			break
		}
	}
	return groups, gidx, counts, res
}

// mergeSplit merges the groups of one series into its first, renumbering
// the rows' groups (gidx) and the counts; the groups keep their order.
func mergeSplit(groups []group, gidx []int32, counts []int) ([]group, []int) {
	first := make(map[*series]int32, len(groups))
	remap := make([]int32, len(groups))
	n := 0
	for gi := range groups {
		g := groups[gi]
		if g.s != nil {
			if k, ok := first[g.s]; ok {
				remap[gi] = k
				counts[k] += counts[gi]
				continue
			}
			first[g.s] = int32(n)
		}
		remap[gi] = int32(n)
		groups[n], counts[n] = g, counts[gi]
		n++
	}
	clear(groups[n:])
	for i, gi := range gidx {
		if gi >= 0 {
			gidx[i] = remap[gi]
		}
	}
	return groups[:n], counts[:n]
}

// groupLockRows is how many rows groupBatch groups under one hold of the
// collection's lookup lock: an apply adding a series holds DB.mu while it
// waits for that lock, so a hold stays short: 64 rows of documents whose
// meta values are made canonical here take about 70 µs (1.1 µs a meta
// document of four fields), 512 took 0.6 ms.
const groupLockRows = 64

// insertScratch holds what an insert groups its batch with, pooled: a
// fleet's batch holds a row of each of thousands of series, and making
// its groups, their index and its rows anew for each batch was a tenth of
// what a million-series load allocated.
type insertScratch struct {
	groups []group
	counts []int
	index  map[string]int
	gidx   []int32
	rows   []model.Measurement
}

var insertScratchPool = sync.Pool{New: func() any {
	return &insertScratch{index: make(map[string]int)}
}}

// maxScratchRows bounds the rows (and groups) a pooled insertScratch keeps
// between inserts.
const maxScratchRows = 1 << 16

// reset empties sc for a grouping of a batch.
func (sc *insertScratch) reset() {
	clear(sc.groups)
	sc.groups, sc.counts = sc.groups[:0], sc.counts[:0]
	clear(sc.index)
}

// rowsFor returns n rows to fill (their Fields and Meta are replaced).
func (sc *insertScratch) rowsFor(n int) []model.Measurement {
	sc.rows = slices.Grow(sc.rows[:0], n)[:n]
	return sc.rows
}

// release drops what sc points to and returns it to the pool, unless a
// large batch grew it past maxScratchRows.
func (sc *insertScratch) release() {
	if cap(sc.rows) > maxScratchRows || cap(sc.groups) > maxScratchRows || cap(sc.gidx) > maxScratchRows {
		return
	}
	sc.reset()
	clear(sc.rows)
	insertScratchPool.Put(sc)
}

// sortRows puts one series' rows of a batch in time order (stable), so that
// a batch sent newest first or shuffled fills buckets as an ascending one
// does instead of opening a bucket for each measurement older than the
// open bucket's minimum. Rows already in order (most batches) are left
// as they are after one pass; rows in strictly descending order are
// reversed. The log record holds the sorted rows, so
// replay applies them in the same order.
func sortRows(rows []model.Measurement) {
	for i := 1; i < len(rows); i++ {
		if rows[i].Time < rows[i-1].Time {
			if i == 1 && strictlyDescending(rows) {
				slices.Reverse(rows) // newest first: no equal times to keep in order
				return
			}
			slices.SortStableFunc(rows, func(a, b model.Measurement) int { return cmp.Compare(a.Time, b.Time) })
			return
		}
	}
}

func strictlyDescending(rows []model.Measurement) bool {
	for i := 1; i < len(rows); i++ {
		if rows[i].Time >= rows[i-1].Time {
			return false
		}
	}
	return true
}

// waitForMemory blocks while buckets in memory exceed the budget, sealing
// open buckets early and asking for a checkpoint. It gives up with
// OutOfDiskSpace only when memory is still over the budget and the
// filesystem has no room for the checkpoint that would free it; a wait
// that ends because memory was freed otherwise (a drop, a delete, a TTL
// pass) or because the DB closed answers that.
func (db *DB) waitForMemory(ctx context.Context) error {
	if db.headMem.Load() <= db.bucketBudget() {
		return nil
	}
	db.sealForBudget()
	for db.headMem.Load() > db.bucketBudget() {
		db.wakeCheckpointer()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if db.closed.Load() {
			return ErrClosed
		}
		if db.headMem.Load() <= db.bucketBudget() {
			return nil
		}
		// noRoom stays set until a checkpoint succeeds: once space is
		// freed, the checkpoint just woken frees memory.
		if db.noRoom.Load() && !db.roomForCheckpoint() {
			// No checkpoint can free memory until space is freed.
			if err := db.checkWritable(); err != nil {
				return err
			}
			return mongoerr.New(mongoerr.OutOfDiskSpace,
				"not enough disk space in %s to write buckets out of memory; writes resume once space is freed", db.opts.Dir)
		}
	}
	return nil
}

// bucketBudget is the memory buckets may hold: the budget less what the
// series hold (which no checkpoint frees), but at least 1/minBucketBudget
// of it, so that writes go on when the series alone fill the budget.
func (db *DB) bucketBudget() int64 {
	b := db.opts.MemoryBudget
	return max(b-db.seriesMem.Load(), b/minBucketBudget)
}

// minBucketBudget: buckets keep at least 1/minBucketBudget of the budget.
// A series' resident cost is a few hundred bytes, so series alone fill a
// budget only by the million; the buckets then still have room for
// batches of thousands of rows (1/8 of the default 256 MiB is 32 MiB).
const minBucketBudget = 8

// sealForBudget seals the least recently written open buckets until the
// open ones hold at most half the bucket budget (bucketBudget), or
// 1/sealKeep of it when the buckets sealed hold few rows (thrashRows).
func (db *DB) sealForBudget() {
	db.mu.Lock()
	defer db.mu.Unlock()
	// The list is kept for the next call (a fleet's holds a few hundred
	// thousand buckets), emptied of its pointers after each.
	open := db.mu.sealScratch[:0]
	var openMem int64
	budget := db.bucketBudget()
	for _, c := range db.mu.byID {
		for _, s := range c.hot {
			for _, b := range s.buckets {
				if !b.sealed {
					open = append(open, b)
					openMem += b.mem
				}
			}
		}
	}
	slices.SortFunc(open, func(a, b *memBucket) int { return cmp.Compare(a.lastWrite, b.lastWrite) })
	target := budget / 2
	sealed, rows := 0, 0
	for _, b := range open {
		if openMem <= target {
			if target == budget/sealKeep || sealed == 0 || rows >= sealed*thrashRows {
				break
			}
			// The buckets sealed hold a few rows each: their series
			// come back more rarely than the budget keeps them open (a
			// fleet written in turn), and so will the others'.
			target = budget / sealKeep
			if openMem <= target {
				break
			}
		}
		openMem -= b.mem
		sealed++
		rows += b.rows()
		db.seal(b)
		db.stats.sealedEarly.Add(1)
	}
	clear(open)
	db.mu.sealScratch = open[:0]
}

// Under memory pressure the most recently written open buckets keep half
// the bucket budget, or 1/sealKeep of it when the buckets sealed to get
// there held under thrashRows rows on average. The checkpoint that frees
// the sealed buckets also rewrites the snapshot of every open bucket
// written since the last: a million sensors writing in turn, more than
// the budget holds, left half of it open, sealed nearly every point as a
// one-row bucket anyway and checkpointed ~3 times a second, rewriting
// ~3.6 open snapshots for each point. Where sealed buckets are full
// (dense series rolling over to a new bucket span), half stays open, so
// that the new span's buckets are not sealed early.
const (
	sealKeep   = 8
	thrashRows = 4
)

// sealGrace: a bucket left open for late rows is sealed once its series
// writes a 1/sealGrace of a span past its end (sealMovedOn; 15 minutes of
// an hour's bucket), and leaves memory at the next checkpoint, which
// sealing a bucket budget's eighth wakes. Sealed a whole span past, as before, a
// fleet loaded faster than real time held two full hours in memory
// (iot 10,000 sensors x 3 h: 94 MB of frozen rows at the end of the
// load, peak RSS 263-271 MiB against 196-206 sealed at a quarter:
// docs/benchmarks.md, "A bucket sealed a quarter of a span past"). In
// real time a bucket left a checkpoint interval without a write is sealed
// as idle long before either.
const sealGrace = 4

// apply adds groups to the buckets in memory. db.mu must be held.
func (db *DB) apply(c *collection, groups []group) {
	ts := c.opts.TimeSeries
	span, rounding := ts.Span(), ts.Rounding()
	if span > c.maxSpan {
		c.maxSpan = span
		c.dirty = true
	}
	db.mu.writeSeq++
	seq := db.mu.writeSeq
	var added int64
	var now time.Time // for rollup marks, read when one is made
	if len(c.rollups) > 0 {
		defer db.wakeRollups()
	}
	for gi := range groups {
		g := &groups[gi]
		s := g.s // resolved by the insert; series are never removed
		if s == nil {
			s = c.series.get(g.metaKey)
		}
		if s == nil {
			s = c.newSeries(db.mu.nextSeries, g.metaKey)
			s.lastKnown = true
			c.setSeriesTTL(s)
			db.mu.nextSeries++
			c.addSeries(s)
			c.markHot(s)
			db.seriesMem.Add(seriesMem(s))
		}
		var cur *memBucket
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for ri := range g.rows {
			m := &g.rows[ri]
			c.newest = max(c.newest, m.Time)
			lo, hi = min(lo, m.Time), max(hi, m.Time)
			sz := rowBytes(m, ts.TimeField)
			if cur == nil || !cur.fits(m.Time, sz, m.Fields, &db.lim) {
				cur = db.bucketFor(c, s, m, sz, span, rounding)
			}
			nf := len(cur.cols.Fields)
			added += cur.appendRow(m.Time, sz, m.Fields, c, db.lim.freezeAt < math.MaxInt)
			if cur.tailRows() >= db.lim.freezeAt && !cur.sealed {
				added += cur.freeze(&db.mu.freezeScratch)
			}
			if !cur.oor && !ttl.InRange(m.Time) {
				cur.oor = true
				if c.oorBuckets++; c.oorBuckets == 1 && !db.recovering {
					db.log.Warn("expiry suspended: the collection holds a measurement outside 1970-01-01T00:00:00Z..2038-01-19T03:14:07Z",
						"collection", c.name, "time", time.Unix(0, m.Time).UTC())
				}
			}
			cur.dirty = true
			cur.lastWrite = seq
			// A field type can only be new to the collection where it is
			// new to the bucket.
			for i := nf; i < len(cur.cols.Fields); i++ {
				col := &cur.cols.Fields[i]
				if t := c.fieldTypes[col.Name]; !t.has(col.Type) {
					if t == 0 {
						c.addName(col.Name)
					}
					c.fieldTypes[col.Name] = t | 1<<col.Type
				}
			}
			c.count++
			c.dirty = true
			if cur.rows() >= db.lim.maxCount {
				db.seal(cur)
				cur = nil
			}
		}
		if len(c.rollups) > 0 && len(g.rows) > 0 {
			db.markRollups(c, s, lo, hi, &now)
		}
		db.sealMovedOn(s, hi)
	}
	db.headMem.Add(added)
}

// sealMovedOn seals the open buckets of s whose span ended a 1/sealGrace
// of it or more before hi, the latest time s was just written
// (sealGrace). It runs once a group of rows is applied, so that what is
// sealed depends on the rows written, not on how they were batched: a
// batch's rows of a series are in time order, and its late rows went to
// their buckets before. db.mu must be held.
func (db *DB) sealMovedOn(s *series, hi int64) {
	for _, b := range s.buckets {
		if !b.sealed && b.movedOn(hi) {
			db.seal(b)
		}
	}
}

// movedOn reports whether b's span ended a 1/sealGrace of it or more
// before t, without overflow at either end of time.
func (b *memBucket) movedOn(t int64) bool {
	if b.minTime > math.MaxInt64-b.span {
		return false // it ends past the last time
	}
	end := b.minTime + b.span
	if end > t {
		return false
	}
	d := t - end
	return d < 0 || d >= b.span/sealGrace // d < 0: past int64, far more
}

// bucketFor finds an open bucket of s that takes m, or opens one, applying
// the rollover rules. db.mu must be held.
func (db *DB) bucketFor(c *collection, s *series, m *model.Measurement, sz int, span, rounding int64) *memBucket {
	var newest *memBucket
	nOpen := 0
	for _, b := range s.buckets {
		if b.sealed {
			continue
		}
		if b.fits(m.Time, sz, m.Fields, &db.lim) {
			return b
		}
		nOpen++
		if newest == nil || b.minTime > newest.minTime {
			newest = b
		}
	}
	// A full newest bucket is closed. A newer measurement past the newest
	// bucket's span leaves it open, so that measurements a little late
	// (another writer's batch, a retried request) still join it rather
	// than open a small out-of-order bucket; a bucket whose span ended a
	// 1/sealGrace of a span before the series' latest row is closed once
	// the rows are applied (sealMovedOn): in-order data has moved on.
	if newest != nil && (newest.rows() >= db.lim.maxCount || newest.size+sz > db.lim.maxBytes) {
		db.seal(newest)
		nOpen--
	}
	for nOpen >= db.lim.maxOpen {
		// Too many open buckets: seal the least recently written.
		var lru *memBucket
		for _, b := range s.buckets {
			if !b.sealed && (lru == nil || b.lastWrite < lru.lastWrite) {
				lru = b
			}
		}
		db.seal(lru)
		nOpen--
	}
	if newest != nil {
		s.rowsHint = int32(min(max(int(s.rowsHint), newest.rows()), db.lim.maxCount))
		if !newest.sealed && m.Time >= newest.minTime+newest.span && newest.tailRows() > 0 && db.lim.freezeAt < math.MaxInt {
			// The series moved on: the bucket left open takes only late
			// rows from now on, so its plain rows are frozen now rather
			// than held plain (and their room) until it seals.
			db.headMem.Add(newest.freeze(&db.mu.freezeScratch))
		}
	}
	b := &memBucket{id: db.mu.nextBucket, minTime: floorDiv(m.Time, rounding), span: span, capHint: int(s.rowsHint), mem: memBucketMem}
	c.oldestMin, c.newMin = min(c.oldestMin, b.minTime), min(c.newMin, b.minTime)
	db.headMem.Add(memBucketMem)
	db.mu.nextBucket++
	s.buckets = append(s.buckets, b)
	c.markHot(s)
	c.buckets++
	return b
}

// seal closes b: it waits for the next checkpoint, which writes its rows
// in time order. db.mu must be held.
func (db *DB) seal(b *memBucket) {
	if b.sealed {
		return
	}
	b.sealed = true
	db.sealedSince.Add(b.mem)
}

// rowBytes estimates the size a measurement adds to a bucket the way MongoDB
// counts it (the BSON size of the measurement), for the 128000-byte rule.
func rowBytes(m *model.Measurement, timeField string) int {
	n := 5 + len(timeField) + 2 + 8
	for i := range m.Fields {
		f := &m.Fields[i]
		n += len(f.Name) + 2 + valueBytes(f.Value.Kind, f.Value.S)
	}
	return n
}

// valueBytes is the BSON size of a value of kind k (s, a string's).
func valueBytes(k model.Kind, s string) int {
	switch k {
	case model.KindString, model.KindBSON:
		return 5 + len(s)
	case model.KindObjectID:
		return bucket.ObjectIDLen
	case model.KindBool:
		return 1
	}
	return 8
}
