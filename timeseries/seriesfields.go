package timeseries

import (
	"context"
	"math/bits"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// SeriesFields is a series of a SeriesFields listing: its canonical meta
// key (MetaRun.Key's form) and its fields that hold a number in a row the
// listing's filter selects, in no particular order. The caller must not
// change Fields, which listings share.
type SeriesFields struct {
	Key    string
	Fields []string
}

// seriesFieldsBytes is what a series of a listing holds beside its
// fields' names, which the collection's name table holds: the entry and
// its slice.
const seriesFieldsBytes = 64

// SeriesFields lists the series of time-series collection name (it must
// have a metaField) that hold a number (a float, an int64 or an int32) in
// a field of fields (nil: any) in a row that f selects (nil: all), each
// with those fields, in no particular order; expired rows count for
// nothing. It is what Prometheus' series API asks of a collection whose
// numeric fields are series.
//
// A series whose newest row is in f's range, when f asks no more than the
// range and the meta value, is listed without reading its rows if each of
// its fields of fields that ever held a number holds one in its newest
// row (collection.lastRows), and passed over when its newest row is
// before the range. Its rows are read otherwise (presence alone, with no
// value decoded unless f names fields), each field's up to its first row
// that counts. The series are read a chunk at a time (seriesStream) and
// the listing is charged to the query's memory, as DistinctMeta's.
func (db *DB) SeriesFields(ctx context.Context, name string, f *partialfilter.Filter, fields []string) ([]SeriesFields, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	plan := &scanPlan{unordered: true}
	defer plan.close()
	l := &fieldLister{guard: guard, byMask: map[uint32][]string{}, recover: map[uint64]bool{}}
	st, fields, err := db.planSeriesFields(plan, c, name, f, fields, l)
	if err != nil {
		return nil, err
	}
	defer st.close()
	if len(fields) == 0 {
		return nil, nil // no field to hold a number
	}
	for {
		more, err := st.next()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		// The series loaded at open are settled by their newest
		// stored rows, read back first, where they can be.
		vs, err := db.settleRecovered(plan, c, l.recover, func(s *series, lo, hi int64) (int, uint32) {
			return c.settleFields(s, lo, hi, l.asked, l.beyond)
		})
		if err != nil {
			return nil, err
		}
		for i, s := range plan.series {
			v := vs.at(i)
			var got []string
			switch v.verdict {
			case settleNone:
				continue
			case settleList:
				db.mu.RLock()
				got = l.names(c, v.fields)
				db.mu.RUnlock()
			default:
				if got, err = seriesNumberFields(plan, s, fields); err != nil {
					return nil, err
				}
			}
			if err := l.add(s.metaKey, got); err != nil {
				return nil, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return l.out, nil
}

// fieldLister gathers a SeriesFields listing.
type fieldLister struct {
	guard *scanGuard
	out   []SeriesFields
	// byMask holds the names of each set of fields listed from the
	// series' newest rows: a fleet's series share a few.
	byMask map[uint32][]string
	// asked is the fields asked for, as bits by index in the name table;
	// beyond is set when one has no bit (collection.settleFields).
	asked  uint32
	beyond bool
	// recover holds the series of the chunk loaded at open whose newest
	// stored row the chunk reads back first (recoverChunk).
	recover map[uint64]bool
}

// add lists the series of key with fields, unless it has none.
func (l *fieldLister) add(key string, fields []string) error {
	if len(fields) == 0 {
		return nil
	}
	key = runKey(key)
	if err := l.guard.charge(seriesFieldsBytes, "the series listed"); err != nil {
		return err
	}
	l.out = append(l.out, SeriesFields{Key: key, Fields: fields})
	return nil
}

// planSeriesFields checks a SeriesFields listing against collection c and
// sets its scan up in plan; the series its newest rows settle are listed
// into l as the stream meets them and left out of it.
//
// It returns the stream and the fields asked for that ever held a number
// (collection.numberFields).
func (db *DB) planSeriesFields(plan *scanPlan, c *collection, name string, f *partialfilter.Filter, fields []string, l *fieldLister) (*seriesStream, []string, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	fields, err := c.numberFields(name, "list", fields)
	if err != nil {
		return nil, nil, err
	}
	asked, beyond := c.askedBits(fields)
	l.beyond = beyond
	st, err := db.newSeriesStream(plan, c, f, fields, l.guard, false)
	if err != nil {
		return nil, nil, err
	}
	plan.presenceOnly = plan.filter.residual == nil
	fast := plan.presenceOnly && plan.archive == nil
	l.asked = asked
	st.want = func(s *series, lo int64) (bool, error) {
		if !fast {
			return true, nil
		}
		switch v, last := c.settleFields(s, lo, plan.filter.maxTime, asked, l.beyond); v {
		case settleNone:
			return false, nil
		case settleList:
			readStats.lastKnown.Add(1)
			return false, l.add(s.metaKey, l.names(c, last))
		}
		if s.recoverable() {
			l.recover[s.id] = true
		}
		return true, nil
	}
	return st, fields, nil
}

// askedBits returns fields as bits by index in c's name table; those past
// the 32nd have none (beyond is set), and a series holding numbers in one
// is never settled by its newest rows (collection.bucketNumbers). DB.mu is
// held.
func (c *collection) askedBits(fields []string) (asked uint32, beyond bool) {
	for _, f := range fields {
		if i, ok := c.nameIdx[f]; ok && i < 32 {
			asked |= 1 << i
		} else {
			beyond = true
		}
	}
	return asked, beyond
}

// names returns the names of the fields of mask, bits by index in c's
// name table, in its order. DB.mu is held.
func (l *fieldLister) names(c *collection, mask uint32) []string {
	if out, ok := l.byMask[mask]; ok {
		return out
	}
	out := make([]string, 0, bits.OnesCount32(mask))
	for m := mask; m != 0; m &= m - 1 {
		out = append(out, c.names[bits.TrailingZeros32(m)])
	}
	l.byMask[mask] = out
	return out
}

// seriesNumberFields returns the fields of fields that hold a number in a
// row of the series of s that the plan's filter selects, in fields' order.
func seriesNumberFields(plan *scanPlan, s *seriesSnap, fields []string) ([]string, error) {
	found := make([]bool, len(fields))
	left := len(fields)
	err := eachNumberColumn(plan, s, fields, func(k int, col *bucket.Column, rc *rowCursor, lo, hi int, _ bool) error {
		if found[k] {
			return nil
		}
		for r := lo; r < hi; r++ {
			if ok, err := rowReturned(plan, s, rc, col, r); err != nil {
				return err
			} else if ok {
				found[k] = true
				if left--; left == 0 {
					return errFound
				}
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for k, ok := range found {
		if ok {
			out = append(out, fields[k])
		}
	}
	return out, nil
}
