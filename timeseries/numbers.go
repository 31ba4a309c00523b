package timeseries

import (
	"context"
	"errors"
	"slices"
	"sort"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// ReadNumbers calls fn, for each series of time-series collection name
// (it must have a metaField) that f selects (nil: all) and each field of
// fields (nil: every field) holding a number (a float, an int64 or an
// int32) in a row f selects, with the series' canonical meta key
// (MetaRun.Key's form), the field, and the times (nanoseconds) and values
// of those numbers, integers as floats, in time order (the rows of one
// time in no particular order); expired rows count for nothing. The
// series come in no particular order, each field's samples in one call.
// fn must not keep ts or vs, which the next call reuses; an error from it
// ends the read.
//
// It is what Prometheus' engine reads of a collection: the columns of
// the fields asked for are decoded from each bucket the range reaches and
// their numbers copied as they are, with no record made, a series' fields
// at a time; a chunk of series is read at a time (seriesStream) under the
// query's memory budget, as a find's.
func (db *DB) ReadNumbers(ctx context.Context, name string, f *partialfilter.Filter, fields []string, fn func(key, field string, ts []int64, vs []float64) error) error {
	c, err := db.lookup(name)
	if err != nil {
		return err
	}
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		return err
	}
	defer end()
	// An ordered plan: an open bucket whose rows came out of order is
	// read from its sorted copy, which the reads after share
	// (memBucket.sortedCapture), not decoded and sorted again each time.
	plan := &scanPlan{}
	defer plan.close()
	st, fields, err := db.planReadNumbers(plan, c, name, f, fields, guard)
	if err != nil {
		return err
	}
	defer st.close()
	if len(fields) == 0 {
		return nil
	}
	acc := make([]numberRun, len(fields))
	for {
		more, err := st.next()
		if err != nil {
			return err
		}
		if !more {
			break
		}
		for _, s := range plan.series {
			held, err := seriesNumbers(plan, s, fields, acc)
			if err != nil {
				guard.release(held)
				return err
			}
			key := runKey(s.metaKey)
			for k := range acc {
				r := &acc[k]
				if len(r.ts) == 0 {
					continue
				}
				r.sort()
				if err := fn(key, fields[k], r.ts, r.vs); err != nil {
					guard.release(held)
					return err
				}
			}
			guard.release(held)
			for k := range acc {
				if cap(acc[k].ts) > keptNumbers {
					acc[k] = numberRun{} // a large series' room is not kept uncounted
				}
			}
		}
	}
	return ctx.Err()
}

// planReadNumbers checks a ReadNumbers read against collection c and sets
// its scan up in plan; it returns the stream and the fields asked for
// that ever held a number (fields less the time and meta fields; all the
// collection's for nil).
func (db *DB) planReadNumbers(plan *scanPlan, c *collection, name string, f *partialfilter.Filter, fields []string, guard *scanGuard) (*seriesStream, []string, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	fields, err := c.numberFields(name, "read", fields)
	if err != nil {
		return nil, nil, err
	}
	st, err := db.newSeriesStream(plan, c, f, fields, guard, false)
	if err != nil {
		return nil, nil, err
	}
	return st, fields, nil
}

// numberRun is the numbers of one field of a series ReadNumbers gathers:
// segments, each a bucket's rows, in time order but for an open bucket
// taken unsorted.
type numberRun struct {
	ts     []int64
	vs     []float64
	segs   []int // where each segment starts
	sorted bool  // ts is in order
	perm   []int32
	order  []int // the segments in time order, kept for the next series
	tmpT   []int64
	tmpV   []float64
}

// begin starts a segment, the next bucket's rows.
func (n *numberRun) begin() {
	if k := len(n.segs); k == 0 || n.segs[k-1] != len(n.ts) {
		n.segs = append(n.segs, len(n.ts))
	}
}

// add appends the value of row r of col, at time t.
func (n *numberRun) add(t int64, col *bucket.Column, r int) {
	if len(n.ts) > 0 && t < n.ts[len(n.ts)-1] {
		n.sorted = false
	}
	n.ts = append(n.ts, t)
	if col.Type == bucket.TypeFloat {
		n.vs = append(n.vs, col.Floats[r])
	} else {
		n.vs = append(n.vs, float64(col.Ints[r]))
	}
}

// addRange appends rows [lo, hi) of col, every one present and in time
// order, with times ts.
func (n *numberRun) addRange(ts []int64, col *bucket.Column, lo, hi int) {
	if lo == hi {
		return
	}
	if len(n.ts) > 0 && ts[lo] < n.ts[len(n.ts)-1] {
		n.sorted = false
	}
	n.ts = append(n.ts, ts[lo:hi]...)
	if col.Type == bucket.TypeFloat {
		n.vs = append(n.vs, col.Floats[lo:hi]...)
		return
	}
	for _, v := range col.Ints[lo:hi] {
		n.vs = append(n.vs, float64(v))
	}
}

// sort puts the run in time order (rows of one time keep their order
// within a bucket): its segments in the order of their first times when
// each is in order and none overlaps the next (a series' buckets, the
// open one taken before the stored ones), else every row.
func (n *numberRun) sort() {
	if n.sorted {
		return
	}
	k := len(n.segs)
	end := func(i int) int {
		if i+1 < k {
			return n.segs[i+1]
		}
		return len(n.ts)
	}
	order := n.order[:0]
	for i := range k {
		if n.segs[i] < end(i) {
			order = append(order, i) // a bucket of no row in range gives none
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return n.ts[n.segs[order[a]]] < n.ts[n.segs[order[b]]] })
	ok := true
	for j, i := range order {
		lo, hi := n.segs[i], end(i)
		if !slices.IsSorted(n.ts[lo:hi]) || j > 0 && n.ts[lo] < n.ts[end(order[j-1])-1] {
			ok = false
			break
		}
	}
	n.tmpT, n.tmpV = n.tmpT[:0], n.tmpV[:0]
	if ok {
		for _, i := range order {
			n.tmpT = append(n.tmpT, n.ts[n.segs[i]:end(i)]...)
			n.tmpV = append(n.tmpV, n.vs[n.segs[i]:end(i)]...)
		}
	} else {
		n.perm = n.perm[:0]
		for i := range n.ts {
			n.perm = append(n.perm, int32(i))
		}
		sort.SliceStable(n.perm, func(a, b int) bool { return n.ts[n.perm[a]] < n.ts[n.perm[b]] })
		for _, p := range n.perm {
			n.tmpT, n.tmpV = append(n.tmpT, n.ts[p]), append(n.tmpV, n.vs[p])
		}
	}
	n.ts, n.tmpT = n.tmpT, n.ts
	n.vs, n.tmpV = n.tmpV, n.vs
	n.order, n.sorted = order, true
}

// keptNumbers is the most numbers a field's buffers keep room for from
// one series to the next once their charge is released.
const keptNumbers = 1 << 16

// numberBytes is what a number ReadNumbers gathers holds: its time and
// value, and their copy when they are sorted.
const numberBytes = 32

// seriesNumbers gathers into acc (one run per field of fields, emptied
// first) the numbers of the series of s in the rows the plan's filter
// selects, charging them to the query's memory column by column: it
// returns what it charged, which the caller releases, also on an error.
func seriesNumbers(plan *scanPlan, s *seriesSnap, fields []string, acc []numberRun) (held int64, err error) {
	for k := range acc {
		acc[k].ts, acc[k].vs, acc[k].segs, acc[k].sorted = acc[k].ts[:0], acc[k].vs[:0], acc[k].segs[:0], true
	}
	err = eachNumberColumn(plan, s, fields, func(k int, col *bucket.Column, rc *rowCursor, lo, hi int, inRange bool) error {
		r := &acc[k]
		before := len(r.ts)
		r.begin()
		if inRange && col.Present == nil {
			r.addRange(rc.cols.Times, col, lo, hi)
		} else {
			for i := lo; i < hi; i++ {
				if ok, err := rowReturned(plan, s, rc, col, i); err != nil {
					return err
				} else if ok {
					r.add(rc.cols.Times[i], col, i)
				}
			}
		}
		add := int64(len(r.ts)-before) * numberBytes
		if err := plan.guard.charge(add, "the numbers of a series"); err != nil {
			return err
		}
		held += add
		return nil
	})
	return held, err
}

// eachNumberColumn scans the series of s, calling fn for each column of
// numbers of a bucket that is a field of fields (k its index) with the
// bucket's rows to look at, [lo, hi) of rc.cols; inRange says that they
// are all in the read's range and match its filter (a bucket in time
// order, no residual filter), else each is judged by rowReturned. An error
// from fn ends the scan; errFound ends it as found, with no error.
func eachNumberColumn(plan *scanPlan, s *seriesSnap, fields []string, fn func(k int, col *bucket.Column, rc *rowCursor, lo, hi int, inRange bool) error) error {
	sc, err := plan.seriesScan(s, false)
	if err != nil {
		return err
	}
	var rc rowCursor
	err = sc.eachBucket(func(cols *bucket.Columns, lo, hi int, loose *looseCols) error {
		inRange := loose == nil && plan.filter.residual == nil
		if loose != nil {
			lo, hi = 0, len(cols.Times)
		}
		rc.cols = cols
		for c := range cols.Fields {
			col := &cols.Fields[c]
			if k := slices.Index(fields, col.Name); k >= 0 && numberKind(col.Type) {
				if err := fn(k, col, &rc, lo, hi, inRange); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if cerr := sc.Close(); err == nil || errors.Is(err, errFound) {
		err = cerr
	}
	return err
}

// numberTypeSet is the types of the values PromQL reads as numbers.
const numberTypeSet typeSet = 1<<bucket.TypeFloat | 1<<bucket.TypeInt | 1<<bucket.TypeInt32

// numberFields checks that collection c (name) is a time series with a
// metaField (metaSeries), whose series a read can ("list", "read") by meta
// value, and returns of fields (nil: all the collection's) those but the
// time and meta fields that ever held a number. DB.mu is held.
func (c *collection) numberFields(name, what string, fields []string) ([]string, error) {
	ts, err := c.metaSeries(name, "it has no series to "+what)
	if err != nil {
		return nil, err
	}
	if fields == nil {
		fields = c.findFields()
	}
	return slices.DeleteFunc(slices.Clone(fields), func(f string) bool {
		return f == ts.TimeField || f == ts.MetaField || c.fieldTypes[f]&numberTypeSet == 0
	}), nil
}

// metaSeries returns the options of collection c (name) for a read by
// series: NamespaceNotFound once dropped, IllegalOperation for a plain
// collection, BadValue saying noMeta for a time series without a
// metaField. DB.mu is held.
func (c *collection) metaSeries(name, noMeta string) (*model.TimeSeriesOptions, error) {
	ts := c.opts.TimeSeries
	switch {
	case c.dropped:
		return nil, notFound(name)
	case ts == nil:
		return nil, mongoerr.New(mongoerr.IllegalOperation, "collection %q is not a time-series collection", name)
	case ts.MetaField == "":
		return nil, mongoerr.New(mongoerr.BadValue, "collection %q has no metaField: %s", name, noMeta)
	}
	return ts, nil
}

// rowReturned reports whether a read of the plan returns the value of
// col in row r of the bucket rc is on: present, in the read's range and
// matching its residual filter (each row that filter is checked on
// counts against the query's rows).
func rowReturned(plan *scanPlan, s *seriesSnap, rc *rowCursor, col *bucket.Column, r int) (bool, error) {
	if t := rc.cols.Times[r]; t < s.minTime || t > plan.filter.maxTime || !col.IsPresent(r) {
		return false, nil
	}
	residual := plan.filter.residual
	if residual == nil {
		return true, nil
	}
	if err := plan.guard.row(); err != nil {
		return false, err
	}
	rc.i = r
	return residual.Match(plan.rowDoc(s, rc)), nil
}
