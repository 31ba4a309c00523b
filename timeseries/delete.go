package timeseries

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// DeleteOptions tune a delete.
type DeleteOptions struct {
	// Limit 1 deletes the first matching document in _id order (a plain
	// collection's deleteOne); 0 deletes every match. A time-series
	// collection takes 0 only (IllegalOperation otherwise).
	Limit int64
}

// Delete removes what matches f from collection name and returns how many
// measurements or documents it removed; any filter serves (every
// measurement or document for an empty one). On a time-series collection,
// a filter of conditions on the metaField and a range of the timeField
// removes whole ranges of series; any other condition is evaluated on each
// measurement of the series and time range the filter selects, as a
// query evaluates it. The delete is logged before it is applied, so it
// survives a crash once Delete returns.
func (db *DB) Delete(ctx context.Context, name string, f *partialfilter.Filter, opts DeleteOptions) (int64, error) {
	if err := db.checkWritable(); err != nil {
		return 0, err
	}
	h, err := db.Collection(name)
	if err != nil {
		return 0, err
	}
	return h.delete(ctx, f, opts) // checked writable above
}

// deleteMeasurements is Delete on a time-series collection.
func (db *DB) deleteMeasurements(ctx context.Context, c *collection, f *partialfilter.Filter) (int64, error) {
	db.mu.RLock()
	ts := c.opts.TimeSeries
	db.mu.RUnlock()
	if ts == nil {
		return 0, mongoerr.New(mongoerr.IllegalOperation, "collection %q is not a time-series collection", c.name)
	}
	plan := planFilter(f, ts)
	if plan.empty {
		return 0, nil
	}
	return db.deleteLogged(ctx, c, func() deleteRecord {
		rec := deleteRecord{coll: c.id, minTime: plan.minTime, maxTime: plan.maxTime}
		if plan.residual != nil {
			// Conditions that the series and the time range do not
			// settle: each row of them is matched against the whole
			// filter, which the record carries (recDeleteWhere). A
			// filter the series and time range settle keeps the range
			// record (recDelete).
			rec.filter = f
		}
		for _, s := range c.matchingSeries(&plan, ts) {
			rec.metaKeys = append(rec.metaKeys, s.metaKey)
		}
		return rec
	})
}

// deleteLogged makes the delete that plan returns of collection c: with
// writers excluded, plan (called with DB.mu held for reading) names the
// series and range, and the record is logged and applied.
func (db *DB) deleteLogged(ctx context.Context, c *collection, plan func() deleteRecord) (int64, error) {
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	if err := db.settlePending(); err != nil {
		return 0, err
	}
	db.cutMu.Lock()
	cutHeld := true
	defer func() {
		if cutHeld {
			db.cutMu.Unlock()
		}
	}()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	db.mu.RLock()
	if c.gone.Load() {
		db.mu.RUnlock()
		return 0, notFound(c.name)
	}
	rec := plan()
	db.mu.RUnlock()
	if len(rec.metaKeys) == 0 {
		return 0, nil
	}
	if !db.opts.ExternalLog {
		if _, err := db.wal.Append(rec.encode(nil)); err != nil {
			return 0, db.diskErr(fmt.Errorf("timeseries: log delete on %q: %w", c.name, err))
		}
	}
	n, gone, err := db.applyDelete(c, &rec)
	if err != nil {
		return n, err
	}
	// Deleting out-of-range data may lift the suspension of expiry.
	db.mu.RLock()
	oor := c.oorBuckets
	db.mu.RUnlock()
	if oor > 0 {
		if err := db.recountOutOfRange(c); err != nil {
			return n, err
		}
	}
	// The field types are recomputed with writers let in: it may read
	// every stored bucket's header of c.
	db.cutMu.Unlock()
	cutHeld = false
	return n, db.refreshFieldTypes(c, gone)
}

// applyDelete removes the rows d names from memory and from Pebble, and
// returns the rows removed and the field types of the buckets it reached,
// for refreshFieldTypes (nil when it removed nothing). Writers are
// excluded (cutMu held, or replay).
func (db *DB) applyDelete(c *collection, d *deleteRecord) (int64, fieldTypeSet, error) {
	db.mu.Lock()
	maxSpan := max(c.maxSpan, c.opts.TimeSeries.Span())
	rw := bucketRewriter{names: c.names}
	gone := fieldTypeSet{}
	rf := newRowFilter(d.filter, c.opts.TimeSeries)
	targets, deleted, buckets := db.deleteInMemory(c, d, rf, gone)
	db.mu.Unlock()
	// The rows removed from memory are gone whatever happens in Pebble
	// (the delete is logged): a failure below still takes them off the
	// counts, or the next checkpoint would persist a count too high.
	memDeleted, memBuckets := deleted, buckets
	fail := func(err error) (int64, fieldTypeSet, error) {
		db.mu.Lock()
		c.count -= memDeleted
		c.buckets -= memBuckets
		c.dirty = true
		db.mu.Unlock()
		return memDeleted, nil, err
	}

	batch := db.pdb.NewBatch()
	defer batch.Close()
	// persisted and persistedBuckets are what the batch removes from
	// Pebble: the part of the catalog's checkpoint count that goes with it.
	var persisted, persistedBuckets int64
	for _, t := range targets {
		for _, k := range t.stale {
			n, found, err := db.storedRows(k)
			if err != nil {
				return fail(err)
			}
			if found {
				persisted += n
				persistedBuckets++
			}
		}
		n, nb, err := db.deleteStored(batch, &rw, c.id, d, rf, t, maxSpan, gone)
		if err != nil {
			return fail(err)
		}
		deleted += n
		buckets += nb
		persisted += n
		persistedBuckets += nb
	}
	// The catalog record goes in the same batch, its count less what the
	// batch removes from Pebble: Pebble may make the batch durable before
	// the next checkpoint (a memtable flush, or another collection's
	// catalog write), and replaying this delete after a crash then finds
	// nothing left in Pebble to count.
	db.mu.Lock()
	c.ckptCount -= persisted
	c.ckptBuckets -= persistedBuckets
	rec, err := c.record()
	db.mu.Unlock()
	if err == nil {
		err = batch.Set(catalogKey(c.name), rec, nil)
	}
	if err == nil {
		err = db.pdb.Apply(batch, pebble.NoSync)
	}
	if err != nil {
		db.mu.Lock()
		c.ckptCount += persisted
		c.ckptBuckets += persistedBuckets
		db.mu.Unlock()
		return fail(err)
	}
	db.mu.Lock()
	c.count -= deleted
	c.buckets -= buckets
	c.dirty = true
	if len(c.rollups) > 0 {
		// Also when nothing was deleted: a delete replayed after a crash
		// may find its rows gone from the store already (its batch
		// reached Pebble) while the marks it made did not survive.
		var now time.Time
		for _, k := range d.metaKeys {
			if s := c.series.get(k); s != nil {
				db.markRollups(c, s, d.minTime, d.maxTime, &now)
			}
		}
		db.wakeRollups()
	}
	db.mu.Unlock()
	if deleted == 0 {
		return 0, nil, nil
	}
	return deleted, gone, nil
}

// fieldTypeSet is a set of (field, type) pairs.
type fieldTypeSet map[string]typeSet

// addBucket adds the fields of b with a value.
func (g fieldTypeSet) addBucket(b *memBucket) {
	for i, has := range b.presentColumns() {
		if f := &b.cols.Fields[i]; has {
			g[f.Name] |= 1 << f.Type
		}
	}
}

// addStored adds the fields of the bucket r was reset to.
func (g fieldTypeSet) addStored(r *bucket.Reader) {
	for i := range r.NumFields() {
		if fi := r.Field(i); fi.Count > 0 {
			g[fi.Name] |= 1 << fi.Type
		}
	}
}

// removeBucket removes the fields of b with a value from g.
func (g fieldTypeSet) removeBucket(b *memBucket) {
	for i, has := range b.presentColumns() {
		if f := &b.cols.Fields[i]; has && g[f.Name].has(f.Type) {
			g.drop(f.Name, f.Type)
		}
	}
}

func (g fieldTypeSet) drop(name string, t bucket.Type) {
	if v := g[name] &^ (1 << t); v != 0 {
		g[name] = v
	} else {
		delete(g, name)
	}
}

// refreshFieldTypes removes from c's field types the pairs of gone (those
// of the buckets a delete or TTL batch reached) that no bucket holds any
// more, so that a type whose last value went is no longer reported or
// refused by aggregates. Buckets in memory are looked at first, stored
// buckets (their control blocks only) until every pair is found: a pair
// that is still common is found at once, and only a type that did vanish
// costs a pass over the collection's stored buckets. The caller holds
// maintMu (no checkpoint moves buckets meanwhile, no delete or TTL pass
// removes rows), not cutMu: writers adding a type meanwhile put its rows
// in memory, where the last look, under mu, finds them.
func (db *DB) refreshFieldTypes(c *collection, gone fieldTypeSet) error {
	if len(gone) == 0 {
		return nil
	}
	db.mu.RLock()
	for f, t := range gone {
		if t &= c.fieldTypes[f]; t != 0 {
			gone[f] = t
		} else {
			delete(gone, f) // not recorded (or already removed)
		}
	}
	memBuckets := func() {
		for _, s := range c.series.byOrd {
			for _, b := range s.buckets {
				if len(gone) == 0 {
					return
				}
				gone.removeBucket(b)
			}
		}
	}
	memBuckets()
	names := c.names
	db.mu.RUnlock()
	if len(gone) > 0 {
		if db.hooks.fieldTypesScan != nil {
			db.hooks.fieldTypesScan()
		}
		// Open-bucket snapshots are in memory: sealed buckets only.
		p := collPrefix(spaceBucket, c.id)
		it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return err
		}
		var r bucket.Reader
		for it.First(); it.Valid() && len(gone) > 0; it.Next() {
			v, err := it.ValueAndErr()
			if err == nil {
				err = r.ResetNames(v, names)
			}
			if err != nil {
				it.Close()
				return fmt.Errorf("collection %q: bucket %x: %w", c.name, it.Key(), err)
			}
			for i := range r.NumFields() {
				if fi := r.Field(i); fi.Count > 0 && gone[fi.Name].has(fi.Type) {
					gone.drop(fi.Name, fi.Type)
				}
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return err
		}
	}
	if len(gone) == 0 {
		return nil
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	memBuckets() // writers may have added some meanwhile
	for f, t := range gone {
		if v := c.fieldTypes[f] &^ t; v != 0 {
			c.fieldTypes[f] = v
		} else {
			delete(c.fieldTypes, f)
		}
		c.dirty = true
	}
	return nil
}

// storedRows returns the measurements of the bucket stored under k, and
// whether there is one.
func (db *DB) storedRows(k []byte) (int64, bool, error) {
	v, closer, err := db.pdb.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	rows, _, _, err := bucket.Peek(v)
	if err != nil {
		return 0, false, fmt.Errorf("bucket %x: %w", k, err)
	}
	return int64(rows), true, nil
}

// deleteTarget is a series a delete reaches, as its buckets in memory
// left it for the Pebble part.
type deleteTarget struct {
	id    uint64
	key   string          // its meta key
	inMem map[uint64]bool // buckets in memory: their Pebble copies are older
	stale [][]byte        // open-bucket snapshots whose bucket is gone
}

// deleteInMemory removes the rows d names (those rf matches, when d has a
// filter) from the buckets in memory, and returns the series d names with
// the rows and buckets removed. DB.mu is held for writing.
func (db *DB) deleteInMemory(c *collection, d *deleteRecord, rf *rowFilter, gone fieldTypeSet) (targets []deleteTarget, deleted, buckets int64) {
	for _, key := range d.metaKeys {
		s := c.series.get(key)
		if s == nil {
			continue
		}
		rf.series(s.id, key)
		s.loseLast() // its stored rows too, unread here
		t := deleteTarget{id: s.id, key: key, inMem: map[uint64]bool{}}
		kept := s.buckets[:0]
		for _, b := range s.buckets {
			t.inMem[b.id] = true
			if b.rows() > 0 && b.maxT >= d.minTime && b.minT <= d.maxTime {
				gone.addBucket(b)
			}
			n := b.deleteRows(d.minTime, d.maxTime, rf, c.opts.TimeSeries.TimeField)
			deleted += int64(n.rows)
			db.headMem.Add(n.mem)
			if b.rows() == 0 {
				db.headMem.Add(-b.mem)
				buckets++
				if b.snapshot {
					t.stale = append(t.stale, bucketKey(spaceOpen, c.id, s.id, b.minTime, b.id))
				}
				continue
			}
			kept = append(kept, b)
		}
		clear(s.buckets[len(kept):])
		s.buckets = kept
		targets = append(targets, t)
	}
	return targets, deleted, buckets
}

// deleteStored puts into batch the removal of the rows d names (those rf
// matches, when d has a filter) from the buckets Pebble holds for series t
// of collection coll: whole buckets are deleted (one range deletion when
// the scan met nothing else), buckets partly inside are rewritten. It
// returns the rows and buckets removed.
func (db *DB) deleteStored(batch *pebble.Batch, rw *bucketRewriter, coll uint32, d *deleteRecord, rf *rowFilter, t deleteTarget, maxSpan int64, gone fieldTypeSet) (deleted, buckets int64, err error) {
	rf.series(t.id, t.key)
	for _, k := range t.stale {
		if err := batch.Delete(k, nil); err != nil {
			return 0, 0, err
		}
	}
	lo := d.minTime
	if lo > math.MinInt64+maxSpan {
		lo -= maxSpan
	} else {
		lo = math.MinInt64
	}
	lower := seriesTimeKey(spaceBucket, coll, t.id, lo)
	upper := prefixEnd(seriesPrefix(spaceBucket, coll, t.id))
	if d.maxTime < math.MaxInt64 {
		upper = seriesTimeKey(spaceBucket, coll, t.id, d.maxTime+1)
	}
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, 0, err
	}
	r := &rw.r
	var whole [][]byte // keys of buckets entirely inside the range
	partial := false
	for it.First(); it.Valid(); it.Next() {
		kp, err := parseBucketKey(it.Key())
		if err != nil {
			it.Close()
			return 0, 0, err
		}
		if t.inMem[kp.id] {
			continue
		}
		v, err := it.ValueAndErr()
		if err == nil {
			err = r.ResetNames(v, rw.names)
		}
		if err != nil {
			it.Close()
			return 0, 0, fmt.Errorf("series %d bucket %d: %w", t.id, kp.id, err)
		}
		if r.MaxTime() < d.minTime || r.MinTime() > d.maxTime {
			partial = true
			continue
		}
		gone.addStored(r)
		if rf == nil && r.MinTime() >= d.minTime && r.MaxTime() <= d.maxTime {
			deleted += int64(r.Rows())
			buckets++
			whole = append(whole, append([]byte(nil), it.Key()...))
			continue
		}
		partial = true
		n, buf, err := rw.rewrite(d, rf, t.id, kp.id)
		if err != nil {
			it.Close()
			return 0, 0, err
		}
		if n == 0 {
			continue // the filter matched none of its rows
		}
		deleted += n
		if buf == nil {
			// Every row matched: the bucket goes.
			buckets++
			whole = append(whole, append([]byte(nil), it.Key()...))
			continue
		}
		if err := batch.Set(it.Key(), buf, nil); err != nil {
			it.Close()
			return 0, 0, err
		}
	}
	if err := it.Close(); err != nil {
		return 0, 0, err
	}
	if !partial && len(whole) > 0 {
		// Everything the scan met goes: one range deletion.
		if err := batch.DeleteRange(whole[0], prefixEnd(whole[len(whole)-1]), nil); err != nil {
			return 0, 0, err
		}
		return deleted, buckets, nil
	}
	for _, k := range whole {
		if err := batch.Delete(k, nil); err != nil {
			return 0, 0, err
		}
	}
	return deleted, buckets, nil
}

// bucketRewriter re-encodes stored buckets without the rows a delete
// names, reusing its reader, encoder and scratch across buckets.
type bucketRewriter struct {
	r      bucket.Reader
	enc    bucket.Encoder
	names  []string          // the collection's name table
	refIdx map[string]uint32 // names' indexes, made on first use
	refs   []uint32
}

// rewrite encodes the bucket the reader holds (of series and bucket id, for
// errors) without its rows inside d's time range that rf (nil: every row)
// matches. It returns the rows removed and the new encoding: nil when no
// row is left, or none removed.
func (rw *bucketRewriter) rewrite(d *deleteRecord, rf *rowFilter, series, id uint64) (int64, []byte, error) {
	cols, err := decodeAll(&rw.r)
	if err != nil {
		return 0, nil, err
	}
	keep := make([]int32, 0, len(cols.Times))
	for i, tm := range cols.Times {
		if tm < d.minTime || tm > d.maxTime || rf != nil && !rf.match(&cols, i) {
			keep = append(keep, int32(i))
		}
	}
	removed := int64(len(cols.Times) - len(keep))
	if removed == 0 || len(keep) == 0 {
		return removed, nil, nil
	}
	rest := permuteColumns(&cols, keep)
	buf, err := rw.encode(&rest, series, id)
	if err != nil {
		return 0, nil, err
	}
	return removed, buf, nil
}

// withMadeIDs returns the stored bucket v of the series of id series with
// its measurements' made ids stored (storeMadeIDs), or v itself when they
// are already.
func (rw *bucketRewriter) withMadeIDs(v []byte, series, id uint64) ([]byte, error) {
	if err := rw.r.ResetNames(v, rw.names); err != nil {
		return nil, fmt.Errorf("series %d bucket %d: %w", series, id, err)
	}
	cols, err := decodeAll(&rw.r)
	if err != nil {
		return nil, fmt.Errorf("series %d bucket %d: %w", series, id, err)
	}
	if _, changed := storeMadeIDs(&cols, series); !changed {
		return v, nil
	}
	return rw.encode(&cols, series, id)
}

// encode encodes cols with references to the collection's name table.
func (rw *bucketRewriter) encode(cols *bucket.Columns, series, id uint64) ([]byte, error) {
	if rw.refIdx == nil {
		rw.refIdx = make(map[string]uint32, len(rw.names))
		for i, n := range rw.names {
			rw.refIdx[n] = uint32(i)
		}
	}
	rw.refs = rw.refs[:0]
	for i := range cols.Fields {
		ref, ok := rw.refIdx[cols.Fields[i].Name]
		if !ok {
			return nil, fmt.Errorf("%w: series %d bucket %d: field %q is not in the collection's name table", ErrCorrupt, series, id, cols.Fields[i].Name)
		}
		rw.refs = append(rw.refs, ref)
	}
	return rw.enc.EncodeRefs(nil, cols, rw.refs)
}

// rowFilter matches a delete's filter against rows, one document a row,
// built as a query builds it for its residual filter (scanPlan.rowDoc):
// the row's time, its series' meta value and its fields. A nil *rowFilter
// is no filter. Not safe for concurrent use.
type rowFilter struct {
	p    scanPlan
	snap seriesSnap
	rc   rowCursor
}

// newRowFilter returns the rowFilter of f on a collection with options ts;
// nil when f is nil.
func newRowFilter(f *partialfilter.Filter, ts *model.TimeSeriesOptions) *rowFilter {
	if f == nil {
		return nil
	}
	rf := &rowFilter{}
	rf.p.ts = ts
	rf.p.filter.residual = f
	return rf
}

// series sets the series, by its id and meta key, of the rows matched
// next.
func (rf *rowFilter) series(id uint64, metaKey string) {
	if rf != nil {
		rf.snap = seriesSnap{id: id, metaKey: metaKey}
	}
}

// match reports whether row i of cols matches.
func (rf *rowFilter) match(cols *bucket.Columns, i int) bool {
	rf.rc.cols, rf.rc.i = cols, i
	return rf.p.filter.residual.Match(rf.p.rowDoc(&rf.snap, &rf.rc))
}

// deleted reports what deleteRows removed.
type deleted struct {
	rows int
	mem  int64 // change of memory held (negative)
}

// deleteRows removes the rows with times in [lo, hi] that rf (nil: every
// row) matches from b, replacing its columns (never changing them in
// place: captured prefixes stay valid).
func (b *memBucket) deleteRows(lo, hi int64, rf *rowFilter, timeField string) deleted {
	if b.rows() == 0 || b.maxT < lo || b.minT > hi {
		return deleted{}
	}
	all := b.capture().cols // frozen rows decoded
	keep := make([]int32, 0, b.rows())
	for i, t := range all.Times {
		if t < lo || t > hi || rf != nil && !rf.match(&all, i) {
			keep = append(keep, int32(i))
		}
	}
	n := b.rows() - len(keep)
	if n == 0 {
		return deleted{}
	}
	b.changed()
	b.cols = permuteColumns(&all, keep)
	b.frozen, b.frozenRows = nil, 0
	b.open, b.openRows, b.hdrShared = nil, 0, false
	before := b.mem
	b.mem = bucketMem(&b.cols)
	b.size = estimateSize(&b.cols, timeField)
	b.minT, b.maxT = 0, 0
	for i, t := range b.cols.Times {
		if i == 0 || t < b.minT {
			b.minT = t
		}
		if i == 0 || t > b.maxT {
			b.maxT = t
		}
	}
	b.lastNum, b.lastOver = lastNumbers(&b.cols, b.maxT)
	b.dirty = true
	return deleted{rows: n, mem: b.mem - before}
}

// decodeAll decodes every column of the bucket r was reset to.
func decodeAll(r *bucket.Reader) (bucket.Columns, error) {
	var cols bucket.Columns
	var err error
	if cols.Times, err = r.Times(nil); err != nil {
		return cols, err
	}
	cols.Fields = make([]bucket.Column, r.NumFields())
	for i := range cols.Fields {
		if err := r.Column(i, &cols.Fields[i]); err != nil {
			return cols, err
		}
	}
	return cols, nil
}
