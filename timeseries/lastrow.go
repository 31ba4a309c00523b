package timeseries

import (
	"context"
	"slices"

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

// foldLast folds bucket b, leaving memory, into the series' lastT,
// lastNum and everNum. DB.mu is held for writing.
func (c *collection) foldLast(s *series, b *memBucket) {
	if !s.lastKnown || b.rows() == 0 {
		return
	}
	last, ever, ok := c.bucketNumbers(b)
	if !ok {
		s.lastKnown = false
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
