package timeseries

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble"
	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// EarliestLast returns the earliest, over every series of collection
// name and every field of fields, of the time (nanoseconds) of the
// series' last row that the filter selects and that holds a number in the
// field; ok is false when no such row exists. Fields nil means every
// field that holds only numbers; a field that holds other values fails
// with TypeMismatch, as in an aggregate.
//
// Every series' rows that the filter selects from that time on hold the
// last value of each of its fields: a reader that needs only the last
// value of each series (Prometheus' last_over_time) reads those rows, not
// the whole range. It is the aggregate of func last over the whole range
// by series, and decodes, as that does, about one bucket a series: the
// newest of each, older ones passed over by their time bounds once each
// field has a last value (a field the collection never held is not
// asked for: it would have a series' every bucket read).
func (db *DB) EarliestLast(ctx context.Context, name string, filter *partialfilter.Filter, fields []string) (t int64, ok bool, err error) {
	c, err := db.lookup(name)
	if err != nil {
		return 0, false, err
	}
	if fields != nil {
		held := make([]string, 0, len(fields))
		db.mu.RLock()
		for _, f := range fields {
			if _, ok := c.fieldTypes[f]; ok && !slices.Contains(held, f) {
				held = append(held, f)
			}
		}
		db.mu.RUnlock()
		if len(held) == 0 {
			return 0, false, nil
		}
		fields = held
	}
	opts := AggregateOptions{Filter: filter, WholeRange: true, Fields: fields, Funcs: []AggFunc{AggLast}, exactGroups: true}
	win, err := aggWindowing(&opts)
	if err != nil {
		return 0, false, err
	}
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		return 0, false, err
	}
	defer end()
	if fields != nil {
		// The series whose newest rows settle it are not read.
		var rest map[uint64]bool
		if t, ok, rest, err = db.earliestSettled(c, filter, fields, guard); err != nil || rest != nil && len(rest) == 0 {
			return t, ok, err
		}
		opts.only = rest
	}
	a, err := db.aggregate(ctx, c, name, opts, opts.Funcs, win, guard)
	if err != nil {
		return 0, false, err
	}
	for _, row := range a.cells.rows {
		for _, cell := range row {
			if cell.count > 0 && (!ok || cell.lastT < t) {
				t, ok = cell.lastT, true
			}
		}
	}
	return t, ok, nil
}

// earliestSettled is EarliestLast of the series of c whose newest rows
// settle it (collection.settleFields): a series whose newest row in the
// range holds a number in every field of fields it ever held one in has
// its last rows there, and one whose newest row is before the range has
// none. The series loaded at open have their newest stored rows read
// back first (settleRecovered). rest is the series that must be read
// (none: t and ok are the answer); nil, with the whole collection to
// read, when the filter asks more than the range and the meta value or a
// field holds other values than numbers (the aggregate refuses it).
func (db *DB) earliestSettled(c *collection, f *partialfilter.Filter, fields []string, guard *scanGuard) (t int64, ok bool, rest map[uint64]bool, err error) {
	plan := &scanPlan{unordered: true}
	defer plan.close()
	db.mu.RLock()
	for _, name := range fields {
		if c.fieldTypes[name]&^numberTypeSet != 0 {
			db.mu.RUnlock()
			return 0, false, nil, nil
		}
	}
	asked, beyond := c.askedBits(fields)
	st, err := db.newSeriesStream(plan, c, f, fields, guard, false)
	db.mu.RUnlock()
	if err != nil {
		return 0, false, nil, err
	}
	defer st.close()
	if plan.filter.residual != nil || plan.archive != nil {
		return 0, false, nil, nil
	}
	plan.presenceOnly = true
	// judge settles series s over [lo, hi] where it can. DB.mu is held.
	judge := func(s *series, lo, hi int64) (int, uint32) {
		v, last := c.settleFields(s, lo, hi, asked, beyond)
		if v == settleList {
			if lt, _, _, _ := c.lastRows(s); !ok || lt < t {
				t, ok = lt, true
			}
		}
		return v, last
	}
	recover := map[uint64]bool{}
	st.want = func(s *series, lo int64) (bool, error) {
		if v, _ := judge(s, lo, plan.filter.maxTime); v != settleRead {
			readStats.lastKnown.Add(1)
			return false, nil
		}
		if s.recoverable() {
			recover[s.id] = true
		}
		return true, nil
	}
	rest = map[uint64]bool{}
	for {
		more, err := st.next()
		if err != nil {
			return 0, false, nil, err
		}
		if !more {
			break
		}
		vs, err := db.settleRecovered(plan, c, recover, judge)
		if err != nil {
			return 0, false, nil, err
		}
		for i, s := range plan.series {
			if vs.at(i).verdict == settleRead {
				rest[s.id] = true
			}
		}
	}
	return t, ok, rest, nil
}

// numberKind reports whether values of kind k are numbers as PromQL reads
// them: floats, int64s and int32s.
func numberKind(k model.Kind) bool {
	return k == model.KindFloat || k == model.KindInt || k == model.KindInt32
}

// markLast records that column c of b holds a number in a row at b.maxT.
func (b *memBucket) markLast(c int) {
	if c < 64 {
		b.lastNum |= 1 << c
	} else {
		b.lastOver = true
	}
}

// lastNumbers returns the lastNum and lastOver of a bucket holding cols,
// whose newest rows are at maxT.
func lastNumbers(cols *bucket.Columns, maxT int64) (num uint64, over bool) {
	for r, t := range cols.Times {
		if t != maxT {
			continue
		}
		for c := range cols.Fields {
			if col := &cols.Fields[c]; numberKind(col.Type) && col.IsPresent(r) {
				if c < 64 {
					num |= 1 << c
				} else {
					over = true
				}
			}
		}
	}
	return num, over
}

// bucketNumbers returns the fields of b, as bits by index in c's name
// table, that hold a number in a row at b.maxT (last) and in any row
// (ever: its columns of numbers); ok is false when a bit cannot say it
// (a name past the 32nd, a column past the 64th). DB.mu is held.
func (c *collection) bucketNumbers(b *memBucket) (last, ever uint32, ok bool) {
	if b.lastOver {
		return 0, 0, false
	}
	for i := range b.cols.Fields {
		col := &b.cols.Fields[i]
		if !numberKind(col.Type) {
			continue
		}
		idx, found := c.nameIdx[col.Name]
		if !found || idx >= 32 {
			return 0, 0, false
		}
		bit := uint32(1) << idx
		ever |= bit
		if i < 64 && b.lastNum&(1<<i) != 0 {
			last |= bit
		}
	}
	return last, ever, true
}

// loseLast makes the series' newest row unknown until the store is
// opened again. DB.mu is held for writing.
func (s *series) loseLast() { s.lastKnown, s.lastLost = false, true }

// forgetLast makes the series' newest row unknown until a read reads it
// back from the store (recoverLast), as at open: what its buckets that
// left memory brought is dropped, which the store holds. DB.mu is held
// for writing.
func (s *series) forgetLast() {
	if !s.lastLost {
		s.lastKnown, s.lastT, s.lastNum, s.everNum = false, math.MinInt64, 0, 0
	}
}

// foldLast folds bucket b, leaving memory, into the series' lastT,
// lastNum and everNum, known or not yet (recoverLast combines them with
// what it reads). DB.mu is held for writing.
func (c *collection) foldLast(s *series, b *memBucket) {
	if s.lastLost || b.rows() == 0 {
		return
	}
	last, ever, ok := c.bucketNumbers(b)
	if !ok {
		s.loseLast()
		return
	}
	s.everNum |= ever
	switch {
	case b.maxT > s.lastT:
		s.lastT, s.lastNum = b.maxT, last
	case b.maxT == s.lastT:
		s.lastNum |= last
	}
}

// lastRows returns the time of the newest row of s (math.MinInt64 when it
// has none), the fields, as bits by index in c's name table, that hold a
// number in a row at that time (last), and those that held one in any row
// (ever); ok is false when they are not known (series.lastKnown). A
// series whose newest row is in a read's range holds every field of last
// there, and no field outside ever anywhere: when ever is within last,
// the read need not look at its rows. DB.mu is held.
func (c *collection) lastRows(s *series) (t int64, last, ever uint32, ok bool) {
	if !s.lastKnown {
		return 0, 0, 0, false
	}
	t, last, ever = s.lastT, s.lastNum, s.everNum
	for _, b := range s.buckets {
		if b.rows() == 0 {
			continue
		}
		bl, be, bok := c.bucketNumbers(b)
		if !bok {
			return 0, 0, 0, false
		}
		ever |= be
		switch {
		case b.maxT > t:
			t, last = b.maxT, bl
		case b.maxT == t:
			last |= bl
		}
	}
	return t, last, ever, true
}

// recoverLast makes known the newest row of a series loaded at open from
// what storedNewest read of its stored buckets, at time t with the fields
// names holding a number: combined with what its buckets leaving memory
// since brought (foldLast), before or after the read, and with everNum
// "any" (the fields older rows held are not read). A series whose rows a
// change reached meanwhile (lastLost) stays unknown. DB.mu is held for
// writing.
func (c *collection) recoverLast(s *series, t int64, names []string) {
	if !s.recoverable() {
		return
	}
	var last uint32
	for _, n := range names {
		i, ok := c.nameIdx[n]
		if !ok || i >= 32 {
			s.loseLast()
			return
		}
		last |= 1 << i
	}
	switch {
	case t > s.lastT:
		s.lastT, s.lastNum = t, last
	case t == s.lastT:
		s.lastNum |= last
	}
	s.everNum, s.lastKnown = ^uint32(0), true
}

// storedNewest reads from r the newest row of the stored (sealed)
// buckets of series id of collection coll, whose name table is names and
// whose buckets span at most maxSpan: its time (math.MinInt64 when none is
// stored) and the fields holding a number in a row at that time. It reads
// the buckets' headers from the newest by start time back to the first
// that cannot hold a later row, and decodes those holding the newest.
func storedNewest(r pebble.Reader, coll uint32, id uint64, names []string, maxSpan int64) (t int64, fields []string, err error) {
	prefix := seriesPrefix(spaceBucket, coll, id)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, nil, err
	}
	defer it.Close()
	t = math.MinInt64
	var (
		br   bucket.Reader
		best [][]byte // the buckets whose newest row is at t
	)
	for ok := it.Last(); ok; ok = it.Prev() {
		kp, err := parseBucketKey(it.Key())
		if err != nil {
			return 0, nil, err
		}
		if t != math.MinInt64 && kp.minTime <= t-maxSpan {
			break // its rows are before kp.minTime+maxSpan, so before t
		}
		if err := br.ResetNames(it.Value(), names); err != nil {
			return 0, nil, fmt.Errorf("%w: bucket %d: %v", ErrCorrupt, kp.id, err)
		}
		switch mt := br.MaxTime(); {
		case mt > t:
			t, best = mt, append(best[:0], slices.Clone(it.Value()))
		case mt == t:
			best = append(best, slices.Clone(it.Value()))
		}
	}
	if err := it.Error(); err != nil {
		return 0, nil, err
	}
	var (
		times []int64
		col   bucket.Column
	)
	for _, v := range best {
		if err := br.ResetNames(v, names); err != nil {
			return 0, nil, err
		}
		if times, err = br.Times(times[:0]); err != nil {
			return 0, nil, err
		}
		for i := range br.NumFields() {
			f := br.Field(i)
			if !numberKind(f.Type) || slices.Contains(fields, f.Name) {
				continue
			}
			if err := br.Presence(i, &col); err != nil {
				return 0, nil, err
			}
			for r, rt := range times {
				if rt == t && col.IsPresent(r) {
					fields = append(fields, f.Name)
					break
				}
			}
		}
	}
	return t, fields, nil
}

// recoverChunk reads back the newest stored rows of the series of the
// chunk in plan that want holds (series loaded at open whose newest row
// a read needed), and makes them known (recoverLast), under one hold of
// DB.mu.
func (db *DB) recoverChunk(plan *scanPlan, c *collection, want map[uint64]bool) error {
	type read struct {
		id     uint64
		t      int64
		fields []string
	}
	var got []read
	for _, s := range plan.series {
		if !want[s.id] {
			continue
		}
		t, fields, err := storedNewest(plan.snap, plan.coll, s.id, s.names, plan.maxSpan)
		if err != nil {
			return err
		}
		got = append(got, read{s.id, t, fields})
	}
	if len(got) == 0 {
		return nil
	}
	readStats.lastRecovered.Add(int64(len(got)))
	if db.hooks.lastRead != nil {
		db.hooks.lastRead()
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if c.lastForgets != plan.lastForgets {
		return nil // a TTL changed since snap: what it shows may be older
	}
	for _, r := range got {
		if s := c.seriesOf(r.id); s != nil {
			c.recoverLast(s, r.t, r.fields)
		}
	}
	return nil
}

// What a series' newest row settles for a read (present, settleFields).
const (
	settleRead = iota // nothing: its rows are read
	settleNone        // it holds no row the read returns
	settleList        // it holds one (with the fields settleFields gives)
)

// present judges whether series s holds a row in [lo, hi] from its newest
// row (a read that asks no more than the range and the meta value).
// While the collection's expiry is suspended (a measurement outside
// 1970..2038: visibility.go), rows a TTL pass deleted before are no
// longer hidden by the read's bound, and a newest row may be one of them:
// the rows are read. DB.mu is held.
func (c *collection) present(s *series, lo, hi int64) int {
	t, _, _, ok := c.lastRows(s)
	switch {
	case !ok || c.oorBuckets > 0:
		return settleRead // unknown, or expiry suspended (lastT may be a row a pass deleted)
	case t == math.MinInt64 || t < lo:
		return settleNone // no row, or none from lo on
	case t <= hi:
		return settleList
	}
	return settleRead
}

// settleFields judges which fields of asked (bits by index in c's name
// table) hold a number in a row of series s in [lo, hi], from its newest
// row: the series' newest row in range holds every field of asked it
// ever held a number in (SeriesFields). DB.mu is held.
//
// beyond says that a field asked for has no bit (past the 32nd name): a
// series read back (everNum "any") may hold numbers in it, so its rows
// are read.
func (c *collection) settleFields(s *series, lo, hi int64, asked uint32, beyond bool) (int, uint32) {
	t, last, ever, ok := c.lastRows(s)
	switch {
	case !ok || c.oorBuckets > 0 || beyond && ever == ^uint32(0):
		return settleRead, 0 // unknown, expiry suspended (see present), or a field past the bits
	case t == math.MinInt64 || t < lo || ever&asked == 0:
		return settleNone, 0 // no row from lo on, or no number in a field asked
	case t > hi || ever&asked&^last != 0:
		return settleRead, 0 // rows after the range, or a field only older rows may hold
	}
	return settleList, last & asked
}

// settled is a verdict of settleRecovered.
type settled struct {
	verdict int
	fields  uint32
}

// verdicts are settleRecovered's, by index in a chunk's plan.series.
type verdicts []settled

// at is the verdict of the chunk's i-th series: settleRead when none was
// judged.
func (v verdicts) at(i int) settled {
	if v == nil {
		return settled{}
	}
	return v[i]
}

// recoverable reports whether a read settled by newest rows reads s's
// newest stored row back first (recoverChunk): s was loaded at open, and
// no delete or meta update has reached it since. DB.mu is held.
func (s *series) recoverable() bool { return !s.lastKnown && !s.lastLost }

// settleRecovered reads back the newest stored rows of the series of the
// chunk in plan that want holds (recoverChunk), then judges each of the
// chunk's series with judge under one hold of DB.mu: the verdicts, in
// plan.series' order (settleRead for those not in want; nil when want is
// empty). It empties want for the next chunk.
func (db *DB) settleRecovered(plan *scanPlan, c *collection, want map[uint64]bool, judge func(s *series, lo, hi int64) (int, uint32)) (verdicts, error) {
	if len(want) == 0 {
		return nil, nil
	}
	defer clear(want)
	if err := db.recoverChunk(plan, c, want); err != nil {
		return nil, err
	}
	out := make(verdicts, len(plan.series))
	db.mu.RLock()
	defer db.mu.RUnlock()
	for i, sn := range plan.series {
		if !want[sn.id] {
			continue
		}
		if s := c.seriesOf(sn.id); s != nil {
			out[i].verdict, out[i].fields = judge(s, sn.minTime, plan.filter.maxTime)
		}
	}
	return out, nil
}
