package timeseries

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/ttl"
)

// Merging small sealed buckets.
//
// Rows of one batch are applied in time order, but data that comes late
// across batches (a backfill sent newest batch first, late points, a
// device that reconnects) opens buckets beside full ones, and they are
// sealed small. A checkpoint that writes a small sealed bucket marks its
// series with the bucket's min time (collection.mergeMarks). The merge
// pass, after each background checkpoint and from MergeBuckets, reads the
// stored buckets of each marked series around the marked times, puts their
// rows in time order and packs them again as an ascending load would
// (packRows): a bucket opens at the first row's time rounded down and takes
// rows while the rollover rules allow. When that makes fewer buckets, one
// Pebble batch writes the new buckets, deletes the old keys and rewrites the
// catalog record (same count, fewer buckets), and the store is flushed.

// maxMergeMarks bounds the ranges kept per series by a fold of the marks
// (foldMarks); past it they become one range from the oldest to the
// newest.
const maxMergeMarks = 32

// maxMarks bounds the marks a collection holds between passes (24 bytes
// each): when full, they are folded per series, and past that new marks
// are dropped and counted (Stats.MergeMarksDropped): their buckets stay
// as they are.
var maxMarks = 1 << 20

// mergeMark is a range of min times of small sealed buckets of a series,
// marked at unix second at (Options.Now).
type mergeMark struct {
	series uint64
	lo, hi int64
	at     uint32
}

// mergeWait is how long a mark waits while its series may still write
// into the marked time range, so that the buckets of a sparse series
// sealed early under memory pressure are merged once, when the series is
// done with the range, not at every checkpoint (MergeBuckets takes every
// mark).
const mergeWait = 2 * time.Minute

// ripe reports whether a background pass at now merges m: its range
// ended two spans before the collection's newest measurement, or it
// waited mergeWait.
func (c *collection) ripe(m mergeMark, span int64, now time.Time) bool {
	return satAdd(m.hi, 2*span) < c.newest || now.Unix()-int64(m.at) >= int64(mergeWait/time.Second)
}

// smallBucket reports whether a sealed bucket is worth a merge pass: under
// half the row and byte limits, and its rows cover under half its span (so
// a bucket of an ordered series, which fills its span, is never marked).
func (db *DB) smallBucket(b *memBucket) bool {
	return b.rows() < db.lim.maxCount/2 && b.size < db.lim.maxBytes/2 && b.maxT-b.minTime < b.span/2
}

// markMerge notes that a small sealed bucket of series id with min time
// minTime was written. DB.mu is held for writing.
func (c *collection) markMerge(id uint64, minTime int64, now time.Time) bool {
	return c.addMergeMark(mergeMark{id, minTime, minTime, uint32(now.Unix())})
}

// addMergeMark adds m to the marks of c; false when they are full and m
// was dropped. When full, the marks are folded to one range a series,
// sorted (c.marksSorted), and a mark of a series there widens its range;
// a mark of another series is dropped. DB.mu is held for writing.
func (c *collection) addMergeMark(m mergeMark) bool {
	c.boundMarks(m, len(c.mergeMarks) == 0)
	if !c.marksFull && len(c.mergeMarks) >= maxMarks && c.marksSorted < len(c.mergeMarks) {
		c.mergeMarks = foldMarksTo(c.mergeMarks, 1)
		c.marksSorted = len(c.mergeMarks)
		// A fold that freed less than half stays full until the next
		// pass takes marks: else a fleet of a million series, a mark
		// each, sorted its million marks every few marks added.
		c.marksFull = len(c.mergeMarks) > maxMarks/2
	}
	if !c.marksFull && len(c.mergeMarks) < maxMarks {
		c.mergeMarks = append(c.mergeMarks, m)
		return true
	}
	i, ok := slices.BinarySearchFunc(c.mergeMarks[:c.marksSorted], m.series,
		func(x mergeMark, id uint64) int { return cmp.Compare(x.series, id) })
	if !ok {
		return false
	}
	x := &c.mergeMarks[i]
	x.lo, x.hi, x.at = min(x.lo, m.lo), max(x.hi, m.hi), min(x.at, m.at)
	return true
}

// boundMarks lowers the bounds of c's marks (marksAt, marksHi) to take m;
// first: m is the first mark, and the bounds are m's.
func (c *collection) boundMarks(m mergeMark, first bool) {
	if first {
		c.marksAt, c.marksHi = m.at, m.hi
		return
	}
	c.marksAt, c.marksHi = min(c.marksAt, m.at), min(c.marksHi, m.hi)
}

// takeRipe removes and returns the marks a background pass at now merges
// (ripe); the marks kept stay in their order, the sorted prefix being the
// kept part of the old one. Full marks stay full unless the pass freed
// half of them: a fleet whose marks all wait (mergeWait) would otherwise
// sort its million marks again at the first mark after every pass.
// When the bounds of all marks (marksAt, marksHi) are not ripe, no mark
// is, and none is read: a fleet's million marks wait a couple of minutes,
// and a pass follows every checkpoint (several a second), with writers
// held off. DB.mu is held for writing.
func (c *collection) takeRipe(span int64, now time.Time) []mergeMark {
	if len(c.mergeMarks) == 0 || !c.ripe(mergeMark{hi: c.marksHi, at: c.marksAt}, span, now) {
		return nil
	}
	var ripe []mergeMark
	kept, sorted := c.mergeMarks[:0], 0
	for i, m := range c.mergeMarks {
		if c.ripe(m, span, now) {
			ripe = append(ripe, m)
			continue
		}
		kept = append(kept, m)
		if i < c.marksSorted {
			sorted++
		}
		c.boundMarks(m, len(kept) == 1)
	}
	clear(c.mergeMarks[len(kept):])
	c.mergeMarks, c.marksSorted = kept, sorted
	c.marksFull = c.marksFull && len(kept) > maxMarks/2
	return ripe
}

// foldMarks sorts marks by series and range and folds each series' to
// maxMergeMarks ranges at most, overlapping ranges joined; it works in
// place and returns the shortened slice.
func foldMarks(marks []mergeMark) []mergeMark { return foldMarksTo(marks, maxMergeMarks) }

// foldMarksTo is foldMarks keeping per ranges a series at most. A range
// folded into another keeps the older mark time.
func foldMarksTo(marks []mergeMark, per int) []mergeMark {
	slices.SortFunc(marks, func(a, b mergeMark) int {
		if c := cmp.Compare(a.series, b.series); c != 0 {
			return c
		}
		return cmp.Compare(a.lo, b.lo)
	})
	out := marks[:0]
	start := 0 // first of out holding the current series
	for _, m := range marks {
		n := len(out)
		if n > start && out[n-1].series != m.series {
			start = n
		}
		switch {
		case n > start && (m.lo <= out[n-1].hi || n-start >= per):
			// Joined, or folded into the last range up to the newest.
			out[n-1].hi = max(out[n-1].hi, m.hi)
			out[n-1].at = min(out[n-1].at, m.at)
		default:
			out = append(out, m)
		}
	}
	return out
}

// MergeBuckets runs the merge pass now: the small sealed buckets written
// by checkpoints since the last pass are merged with their neighbours in
// Pebble where that makes fewer buckets. Buckets in memory are not
// touched (Flush checkpoints first). It returns once the merged buckets
// are durable. Reads see either the old buckets or the merged ones.
func (db *DB) MergeBuckets(ctx context.Context) error {
	if db.closed.Load() {
		return ErrClosed
	}
	return db.mergeBuckets(ctx, db.stop, true)
}

// mergeBuckets is the merge pass; it gives up waiting for the store's
// flush when abort is closed. A background pass (all false) merges the
// ripe marks and keeps the others for a later one.
func (db *DB) mergeBuckets(ctx context.Context, abort <-chan struct{}, all bool) error {
	if db.readOnly || !db.mergePending.Load() {
		return nil
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	if err := db.settlePending(); err != nil {
		return err
	}
	type job struct {
		c     *collection
		marks []mergeMark
	}
	var jobs []job
	now := db.opts.Now()
	db.mu.Lock()
	db.mergePending.Store(false)
	for _, c := range db.mu.byID {
		if len(c.mergeMarks) == 0 {
			continue
		}
		if c.dropped || c.opts.TimeSeries == nil || all {
			if !c.dropped && c.opts.TimeSeries != nil {
				jobs = append(jobs, job{c, c.mergeMarks})
			}
			c.mergeMarks, c.marksSorted, c.marksFull = nil, 0, false
			continue
		}
		ripe := c.takeRipe(c.opts.TimeSeries.Span(), now)
		if len(c.mergeMarks) > 0 {
			db.mergePending.Store(true) // they wait for a later pass
		}
		if len(ripe) > 0 {
			jobs = append(jobs, job{c, ripe})
		}
	}
	db.mu.Unlock()
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].c.id < jobs[j].c.id })
	var err error
	for i, j := range jobs {
		if err = ctx.Err(); err == nil {
			err = db.mergeCollection(j.c, j.marks, abort)
		}
		if err != nil {
			// What was not merged is marked again for the next pass.
			db.mu.Lock()
			for _, j := range jobs[i:] {
				for _, m := range j.marks {
					if !j.c.addMergeMark(m) {
						db.stats.marksDropped.Add(1)
					}
				}
			}
			db.mergePending.Store(true)
			db.mu.Unlock()
			break
		}
	}
	if errors.Is(err, errFlushAbandoned) {
		return nil // closing: the final checkpoint flushes the batch
	}
	return err
}

// mergeChunkBytes bounds what one merge batch holds (the old keys it
// deletes and the new buckets it writes): a pass over many series commits
// a batch each time it passes this, so that its memory does not grow with
// the number of series marked.
var mergeChunkBytes = 8 << 20

// mergeCollection merges the marked series of c. maintMu is held.
func (db *DB) mergeCollection(c *collection, marks []mergeMark, abort <-chan struct{}) error {
	db.mu.RLock()
	if c.dropped {
		db.mu.RUnlock()
		return nil
	}
	ts := c.opts.TimeSeries
	m := merger{db: db, coll: c.id, names: c.names, timeField: ts.TimeField,
		span: ts.Span(), rounding: ts.Rounding()}
	db.mu.RUnlock()
	marks = foldMarks(slices.Clone(marks))

	snap := db.pdb.NewSnapshot()
	defer snap.Close()
	m.snap = snap
	defer func() {
		if m.batch != nil {
			m.batch.Close()
		}
		if m.it != nil {
			m.it.Close()
		}
	}()
	var ranges [][2]int64
	merged := false
	for i := 0; i < len(marks); {
		id := marks[i].series
		ranges = ranges[:0]
		for ; i < len(marks) && marks[i].series == id; i++ {
			ranges = append(ranges, [2]int64{marks[i].lo, marks[i].hi})
		}
		if m.batch == nil {
			m.batch = db.pdb.NewBatch()
		}
		for _, w := range mergeWindows(ranges, 2*m.span) {
			if err := m.series(id, w[0], w[1]); err != nil {
				return fmt.Errorf("timeseries: merge buckets of %q series %d: %w", c.name, id, err)
			}
		}
		if m.batch.Len()+m.outBytes >= mergeChunkBytes || i == len(marks) {
			applied, err := db.commitMerge(c, &m)
			if err != nil {
				return err
			}
			merged = merged || applied
		}
	}
	if !merged {
		return nil
	}
	return db.flushStore(abort)
}

// commitMerge applies m's batch: its new buckets, the deletes of the ones
// they replace, the checkpoint state and the catalog record. It reports
// whether the batch removed a bucket; m starts a new batch next.
func (db *DB) commitMerge(c *collection, m *merger) (bool, error) {
	batch := m.batch
	defer func() {
		batch.Close()
		clear(m.out)
		m.batch, m.out, m.outBytes, m.removed = nil, m.out[:0], 0, 0
	}()
	if m.removed == 0 {
		return false, nil
	}
	need := int64(batch.Len()+m.outBytes) + checkpointMargin
	if free := db.freeSpace(); free >= 0 && free < need {
		return false, fmt.Errorf("%w in %s: %s free, a merge of %q may write %s", errNoRoom, db.opts.Dir, mib(free), mib(need), c.name)
	}

	// The new buckets' ids are taken now and persisted with the batch, so
	// that no bucket made after a crash reuses one.
	db.mu.Lock()
	first := db.mu.nextBucket
	db.mu.nextBucket += uint64(len(m.out))
	db.mu.Unlock()
	for i, o := range m.out {
		if err := batch.Set(bucketKey(spaceBucket, c.id, o.series, o.minTime, first+uint64(i)), o.data, nil); err != nil {
			return false, err
		}
	}
	st, err := db.storedState()
	if err != nil {
		return false, err
	}
	st.nextBucket = max(st.nextBucket, first+uint64(len(m.out)))
	if err := batch.Set(keyCheckpoint, st.encode(), nil); err != nil {
		return false, err
	}
	// The catalog record goes in the same batch, with the same count and
	// the buckets the batch removes less, as deletes and TTL batches do.
	db.mu.Lock()
	c.ckptBuckets -= m.removed
	rec, err := c.record()
	if err == nil {
		err = batch.Set(catalogKey(c.name), rec, nil)
	}
	if err == nil {
		err = db.pdb.Apply(batch, pebble.NoSync)
		db.mergeGen.Add(1)
	}
	if err != nil {
		c.ckptBuckets += m.removed
		db.mu.Unlock()
		return false, db.diskErr(err)
	}
	c.buckets -= m.removed
	c.dirty = true
	db.mu.Unlock()
	db.stats.merged.Add(m.removed)
	if db.hooks.mergeApplied != nil {
		db.hooks.mergeApplied()
	}
	return true, nil
}

// storedState reads the checkpoint state Pebble holds.
func (db *DB) storedState() (checkpointState, error) {
	v, closer, err := db.pdb.Get(keyCheckpoint)
	if errors.Is(err, pebble.ErrNotFound) {
		db.mu.RLock()
		defer db.mu.RUnlock()
		return checkpointState{nextColl: db.mu.nextColl, nextSeries: db.mu.nextSeries, nextBucket: db.mu.nextBucket}, nil
	}
	if err != nil {
		return checkpointState{}, err
	}
	defer closer.Close()
	return decodeCheckpointState(v)
}

// mergeWindows turns a series' marks into ranges of bucket min times to
// read: each mark widened by pad on both sides, overlapping ranges joined.
func mergeWindows(marks [][2]int64, pad int64) [][2]int64 {
	ms := slices.Clone(marks)
	slices.SortFunc(ms, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]int64
	for _, m := range ms {
		lo, hi := satAdd(m[0], -pad), satAdd(m[1], pad)
		if n := len(out); n > 0 && lo <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], hi)
			continue
		}
		out = append(out, [2]int64{lo, hi})
	}
	return out
}

// satAdd returns a+b, saturated to the int64 range.
func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// merger holds one collection's merge pass.
type merger struct {
	db        *DB
	coll      uint32
	names     []string
	timeField string
	span      int64
	rounding  int64
	snap      *pebble.Snapshot
	batch     *pebble.Batch
	it        *pebble.Iterator // over snap, moved from series to series
	raw       [][2][]byte      // the keys and values of one series' window

	r        bucket.Reader
	enc      bucket.Encoder
	refIdx   map[string]uint32
	out      []mergedBucket
	outBytes int   // the encoded bytes of out
	removed  int64 // buckets the batch removes
}

// mergedBucket is a new bucket of the pass, encoded; its id is given when
// the batch is written.
type mergedBucket struct {
	series  uint64
	minTime int64
	data    []byte
}

// storedBucket is one stored bucket a merge reads.
type storedBucket struct {
	key     []byte
	minTime int64
	cols    bucket.Columns
}

// series merges the stored buckets of series id whose min time is in
// [lo, hi].
func (m *merger) series(id uint64, lo, hi int64) error {
	lower := seriesTimeKey(spaceBucket, m.coll, id, lo)
	upper := prefixEnd(seriesPrefix(spaceBucket, m.coll, id))
	if hi < math.MaxInt64 {
		upper = seriesTimeKey(spaceBucket, m.coll, id, hi+1)
	}
	m.db.stats.mergeReads.Add(1)
	// One iterator serves the pass, moved from series to series: a
	// sparse fleet marks a million series, and opening an iterator for
	// each cost more than the merges.
	if m.it == nil {
		it, err := m.snap.NewIter(nil)
		if err != nil {
			return err
		}
		m.it = it
	}
	it := m.it
	it.SetBounds(lower, upper)
	// The keys and values first: most series of a sparse fleet have one
	// bucket in the window, nothing to merge, and nothing to decode.
	m.raw = m.raw[:0]
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		m.raw = append(m.raw, [2][]byte{slices.Clone(it.Key()), slices.Clone(v)})
	}
	if err := it.Error(); err != nil {
		return err
	}
	if len(m.raw) < 2 {
		return nil
	}
	var src []storedBucket
	for _, kv := range m.raw {
		kp, err := parseBucketKey(kv[0])
		if err != nil {
			return err
		}
		if err := m.r.ResetNames(kv[1], m.names); err != nil {
			return fmt.Errorf("bucket %d: %w", kp.id, err)
		}
		if !ttl.InRange(m.r.MinTime()) || !ttl.InRange(m.r.MaxTime()) {
			// Such buckets are counted apart (collection.oorBuckets):
			// they stay as they are.
			continue
		}
		cols, err := decodeAll(&m.r)
		if err != nil {
			return fmt.Errorf("bucket %d: %w", kp.id, err)
		}
		src = append(src, storedBucket{key: kv[0], minTime: kp.minTime, cols: cols})
	}
	if len(src) < 2 {
		return nil
	}
	all, from := concatColumns(src)
	perm := make([]int32, len(all.Times))
	for i := range perm {
		perm[i] = int32(i)
	}
	// Rows in time order; equal times keep the order of their buckets.
	sort.SliceStable(perm, func(a, b int) bool { return all.Times[perm[a]] < all.Times[perm[b]] })
	runs := packRows(&all, perm, m.timeField, m.span, m.rounding, &m.db.lim)
	if len(runs) >= len(src) {
		return nil
	}
	// A packed bucket that is exactly a stored one (same rows, same min
	// time) is kept as it is.
	keep := make([]bool, len(src))
	for _, rows := range runs {
		s := from[rows[0]]
		if len(rows) == len(src[s].cols.Times) && floorDiv(all.Times[rows[0]], m.rounding) == src[s].minTime &&
			!slices.ContainsFunc(rows, func(p int32) bool { return from[p] != s }) {
			keep[s] = true
		}
	}
	for _, rows := range runs {
		if keep[from[rows[0]]] {
			continue // the run is that bucket's rows
		}
		cols := permuteColumns(&all, rows)
		data, err := m.encode(&cols)
		if err != nil {
			return err
		}
		m.out = append(m.out, mergedBucket{series: id, minTime: floorDiv(cols.Times[0], m.rounding), data: data})
		m.outBytes += len(data)
	}
	for i := range src {
		if keep[i] {
			continue
		}
		if err := m.batch.Delete(src[i].key, nil); err != nil {
			return err
		}
	}
	m.removed += int64(len(src) - len(runs))
	return nil
}

// encode encodes cols with the collection's name table.
func (m *merger) encode(cols *bucket.Columns) ([]byte, error) {
	if m.refIdx == nil {
		m.refIdx = make(map[string]uint32, len(m.names))
		for i, n := range m.names {
			m.refIdx[n] = uint32(i)
		}
	}
	refs := make([]uint32, 0, len(cols.Fields))
	for i := range cols.Fields {
		ref, ok := m.refIdx[cols.Fields[i].Name]
		if !ok {
			return nil, fmt.Errorf("%w: field %q is not in the collection's name table", ErrCorrupt, cols.Fields[i].Name)
		}
		refs = append(refs, ref)
	}
	return m.enc.EncodeRefs(nil, cols, refs)
}

// concatColumns puts the rows of src one bucket after another into one
// Columns, a column per (name, type), and returns it with the bucket each
// row comes from.
func concatColumns(src []storedBucket) (bucket.Columns, []int) {
	n := 0
	for i := range src {
		n += len(src[i].cols.Times)
	}
	var all bucket.Columns
	all.Times = make([]int64, 0, n)
	from := make([]int, 0, n)
	type colKey struct {
		name string
		typ  bucket.Type
	}
	idx := map[colKey]int{}
	for si := range src {
		cols := &src[si].cols
		base := len(all.Times)
		all.Times = append(all.Times, cols.Times...)
		for range cols.Times {
			from = append(from, si)
		}
		for ci := range cols.Fields {
			sc := &cols.Fields[ci]
			k := colKey{sc.Name, sc.Type}
			j, ok := idx[k]
			if !ok {
				j = len(all.Fields)
				idx[k] = j
				all.Fields = append(all.Fields, newDenseColumn(sc.Name, sc.Type, n))
			}
			dc := &all.Fields[j]
			for r := range cols.Times {
				if !sc.IsPresent(r) {
					continue
				}
				p := base + r
				dc.Present[p>>6] |= 1 << (uint(p) & 63)
				switch sc.Type {
				case model.KindFloat:
					dc.Floats[p] = sc.Floats[r]
				case model.KindInt, model.KindDate, model.KindInt32:
					dc.Ints[p] = sc.Ints[r]
				case model.KindString, model.KindBSON:
					dc.Strings[p] = sc.Strings[r]
				case model.KindObjectID:
					copy(dc.ID(p), sc.ID(r))
				case model.KindBool:
					dc.Bools[p] = sc.Bools[r]
				}
			}
		}
	}
	return all, from
}

// newDenseColumn returns a column of n absent rows.
func newDenseColumn(name string, t bucket.Type, n int) bucket.Column {
	c := bucket.Column{Name: name, Type: t, Present: make([]uint64, (n+63)/64)}
	switch t {
	case model.KindFloat:
		c.Floats = make([]float64, n)
	case model.KindInt, model.KindDate, model.KindInt32:
		c.Ints = make([]int64, n)
	case model.KindString, model.KindBSON:
		c.Strings = make([]string, n)
	case model.KindObjectID:
		c.IDs = make([]byte, n*bucket.ObjectIDLen)
	case model.KindBool:
		c.Bools = make([]bool, n)
	}
	return c
}

// packRows splits the rows perm of all (in time order) into buckets as an
// ascending load fills them: a bucket opens at its first row's time
// rounded down and takes rows while they stay within its span, under the
// row and byte limits (the write path's size estimate) and without a field
// of another type. A row of another type opens a bucket beside the one it
// does not fit, which stays open for the rows after it, as in the write
// path. It returns each bucket's rows, a subsequence of perm.
func packRows(all *bucket.Columns, perm []int32, timeField string, span, rounding int64, lim *limits) [][]int32 {
	type packed struct {
		minTime int64
		rows    []int32
		size    int
		types   map[string]bucket.Type
	}
	var out []*packed
	var open []*packed
	for _, p := range perm {
		t := all.Times[p]
		sz := 5 + len(timeField) + 2 + 8
		for ci := range all.Fields {
			c := &all.Fields[ci]
			if !c.IsPresent(int(p)) {
				continue
			}
			sz += len(c.Name) + 2
			switch c.Type {
			case model.KindString, model.KindBSON:
				sz += 5 + len(c.Strings[p])
			case model.KindObjectID:
				sz += bucket.ObjectIDLen
			case model.KindBool:
				sz++
			default:
				sz += 8
			}
		}
		var dst *packed
		kept := open[:0]
		for _, b := range open {
			if t-b.minTime >= span || len(b.rows) >= lim.maxCount || b.size+sz > lim.maxBytes {
				continue // closed: later rows are later still
			}
			kept = append(kept, b)
			if dst != nil {
				continue
			}
			clash := false
			for ci := range all.Fields {
				c := &all.Fields[ci]
				if have, ok := b.types[c.Name]; ok && have != c.Type && c.IsPresent(int(p)) {
					clash = true
					break
				}
			}
			if !clash {
				dst = b
			}
		}
		open = kept
		if dst == nil {
			dst = &packed{minTime: floorDiv(t, rounding), types: map[string]bucket.Type{}}
			out = append(out, dst)
			open = append(open, dst)
		}
		dst.rows = append(dst.rows, p)
		dst.size += sz
		for ci := range all.Fields {
			if c := &all.Fields[ci]; c.IsPresent(int(p)) {
				dst.types[c.Name] = c.Type
			}
		}
	}
	runs := make([][]int32, len(out))
	for i, b := range out {
		runs[i] = b.rows
	}
	return runs
}
