package timeseries

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// distinctValueBytes is what a distinct value holds beside its text: its
// entry in the set and its decoded value in the result.
const distinctValueBytes = 96

// DistinctMeta returns the distinct values of path, the metaField or a
// dotted path inside it, among the measurements of time-series collection
// name that f matches (nil: all), as MongoDB's distinct gives them:
// arrays unwound (at the end of the path and on the way), nothing for a
// series whose meta value lacks the path or is null, numbers of equal
// value (1 and 1.0) once, in MongoDB's order of values
// (partialfilter.Compare). Values are as model.DecodeMeta gives them; the
// caller owns the slice.
//
// The values come from the series index (each series' canonical meta
// key), not from the measurements, and are exact with respect to expiry
// and deletes: a series counts only if it holds a row f matches that has
// not expired, which is learnt for the series whose values are not known
// yet only, cheapest first: the series' bounds in memory (its buckets'
// times, the latest time it has stored), its newest row's time when it is
// known (collection.lastRows: for a filter on the range and the meta
// value alone), then its buckets in memory, then
// its stored buckets in time order, the first whose rows all lie in the
// range settling it from its header. The series are read a chunk at a
// time (seriesStream); the values are de-duplicated as they come and
// charged to the query's memory: past Options.QueryMemoryBytes the read
// fails with QueryExceededMemoryLimitNoDiskUseAllowed (292).
func (db *DB) DistinctMeta(ctx context.Context, name, path string, f *partialfilter.Filter) ([]any, error) {
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	d, err := db.distinctMeta(ctx, guard, name, path, f, 0)
	if err != nil {
		return nil, err
	}
	return d.values(guard)
}

// MetaValuesDistinct reports whether no two of the series f selects have
// meta values that compare equal (partialfilter.Compare): 1 and 1.0 are
// two series, one value. Then the engine's order by series is an order by
// meta value. Read as DistinctMeta reads, from the series index.
func (db *DB) MetaValuesDistinct(ctx context.Context, name string, f *partialfilter.Filter) (bool, error) {
	c, err := db.lookup(name)
	if err != nil {
		return false, err
	}
	db.mu.RLock()
	ts := c.opts.TimeSeries
	db.mu.RUnlock()
	if ts == nil || ts.MetaField == "" {
		return true, nil // one partition, or none to speak of
	}
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		return false, err
	}
	defer end()
	d, err := db.distinctMeta(ctx, guard, name, ts.MetaField, f, 0)
	if err != nil {
		return false, err
	}
	vals := make([]any, 0, len(d.texts))
	for _, t := range d.texts {
		v, err := model.DecodeMetaKey(t)
		if err != nil {
			return false, err
		}
		vals = append(vals, v)
	}
	slices.SortFunc(vals, partialfilter.Compare)
	for i := 1; i < len(vals); i++ {
		if partialfilter.Compare(vals[i-1], vals[i]) == 0 {
			return false, nil
		}
	}
	return true, guard.ctx.Err()
}

// HasRows reports whether time-series collection name (it must have a
// metaField) holds a row f selects (nil: any), expired rows counting for
// nothing: DistinctMeta's read, ended at the first series that holds one
// (its newest row's time alone settles most).
func (db *DB) HasRows(ctx context.Context, name string, f *partialfilter.Filter) (bool, error) {
	c, err := db.lookup(name)
	if err != nil {
		return false, err
	}
	db.mu.RLock()
	ts := c.opts.TimeSeries
	db.mu.RUnlock()
	if ts == nil || ts.MetaField == "" {
		return false, mongoerr.New(mongoerr.IllegalOperation, "collection %q is not a time series with a metaField", name)
	}
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		return false, err
	}
	defer end()
	d, err := db.distinctMeta(ctx, guard, name, "", f, 1)
	if err != nil {
		return false, err
	}
	return len(d.texts) > 0, nil
}

// distinctLimitChunk is the series a chunk of a distinct read of a few
// values takes (HasRows): the first series often settle it, and those
// whose rows or newest stored row are read are read a few at a time.
const distinctLimitChunk = 16

// anyRowTexts is the one value of a distinct read of no path (HasRows):
// every series gives it, a meta value or not.
var anyRowTexts = []string{""}

// errDistinctFull ends a distinct read that has the values it wanted.
var errDistinctFull = errors.New("timeseries: the distinct values wanted are found")

// distinctMeta reads the distinct texts of the values at path of the
// series f selects, the first limit of them (0: all); for path "", one
// value for any series that holds a row f selects.
func (db *DB) distinctMeta(ctx context.Context, guard *scanGuard, name, path string, f *partialfilter.Filter, limit int) (*distinct, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	db.stats.distincts.Add(1)
	plan := &scanPlan{unordered: true}
	defer plan.close()
	d := &distinct{seen: map[string]struct{}{}, pending: map[uint64][]string{}, recover: map[uint64]bool{}, limit: limit}
	st, err := db.planDistinct(plan, c, name, path, f, guard, d)
	if err != nil {
		return nil, err
	}
	defer st.close()
	if limit > 0 {
		st.maxChunk = distinctLimitChunk
	}
	for {
		more, err := st.next()
		if errors.Is(err, errDistinctFull) {
			return d, nil
		}
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		if err := d.chunk(db, c, plan); errors.Is(err, errDistinctFull) {
			return d, nil
		} else if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return d, nil
}

// distinct gathers the values of a DistinctMeta.
type distinct struct {
	path  []string // inside the meta value; nil: the whole value
	seen  map[string]struct{}
	texts []string // the keys of seen, in the order found
	// pending holds, for the series of the chunk being taken, the texts
	// of their values (stream.want).
	pending map[uint64][]string
	// recover holds the series of the chunk loaded at open whose newest
	// stored row the chunk reads back first (recoverChunk).
	recover map[uint64]bool
	scratch []string
	limit   int // the values wanted, 0: all (errDistinctFull)
	// anyRow: no path (HasRows): every series gives anyRowTexts.
	anyRow bool
}

// planDistinct checks a DistinctMeta's path against collection c and
// sets its scan up in plan: the series come in id order, those whose
// values are all known left out.
func (db *DB) planDistinct(plan *scanPlan, c *collection, name, path string, f *partialfilter.Filter, guard *scanGuard, d *distinct) (*seriesStream, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	ts, err := c.metaSeries(name, "there are no meta values to list")
	if err != nil {
		return nil, err
	}
	if path != "" && path != ts.MetaField && !strings.HasPrefix(path, ts.MetaField+".") {
		return nil, mongoerr.New(mongoerr.BadValue, "the path of a distinct over the series must be the metaField %q or a path inside it; got %q", ts.MetaField, path)
	}
	d.anyRow = path == ""
	if path != "" && path != ts.MetaField {
		d.path = strings.Split(strings.TrimPrefix(path, ts.MetaField+"."), ".")
		if slices.Contains(d.path, "") {
			return nil, mongoerr.New(mongoerr.BadValue, "the path %q has an empty field name", path)
		}
	}
	// Only the fields the residual filter names are decoded.
	st, err := db.newSeriesStream(plan, c, f, []string{}, guard, false)
	if err != nil {
		return nil, err
	}
	plan.presenceOnly = plan.filter.residual == nil
	clear(d.pending)
	st.want = func(s *series, lo int64) (bool, error) {
		texts := anyRowTexts
		if !d.anyRow {
			texts = d.textsOf(s.metaKey)
		}
		for _, t := range texts {
			if _, ok := d.seen[t]; ok {
				continue
			}
			// A series whose newest row is in range holds a row the
			// read returns, when the filter asks no more than the
			// range and the meta value; one whose newest row is before
			// it holds none: its rows need not be read.
			if plan.presenceOnly && plan.archive == nil {
				switch c.present(s, lo, plan.filter.maxTime) {
				case settleList:
					readStats.lastKnown.Add(1)
					return false, d.add(plan.guard, texts)
				case settleNone:
					return false, nil
				}
				if s.recoverable() {
					d.recover[s.id] = true
				}
			}
			d.pending[s.id] = texts
			return true, nil
		}
		return false, nil
	}
	return st, nil
}

// add adds the texts not seen yet.
func (d *distinct) add(guard *scanGuard, texts []string) error {
	for _, t := range texts {
		if _, ok := d.seen[t]; ok {
			continue
		}
		if err := guard.charge(int64(len(t))+distinctValueBytes, "the distinct values"); err != nil {
			return err
		}
		d.seen[t] = struct{}{}
		d.texts = append(d.texts, t)
		if len(d.texts) == d.limit {
			return errDistinctFull
		}
	}
	return nil
}

// chunk adds the values of the series of the chunk in plan that hold a
// row the read may return: first reading back the newest stored rows of
// those loaded at open (d.recover), which settles most.
func (d *distinct) chunk(db *DB, c *collection, plan *scanPlan) error {
	defer clear(d.pending)
	vs, err := db.settleRecovered(plan, c, d.recover, func(s *series, lo, hi int64) (int, uint32) {
		return c.present(s, lo, hi), 0
	})
	if err != nil {
		return err
	}
	for i, s := range plan.series {
		texts := d.pending[s.id]
		known := true
		for _, t := range texts {
			_, ok := d.seen[t]
			known = known && ok
		}
		if known {
			continue // a series before it in the chunk brought them
		}
		v := vs.at(i).verdict
		ok := v == settleList
		if v == settleRead {
			if ok, err = seriesHasRow(plan, s); err != nil {
				return err
			}
		}
		if !ok {
			continue
		}
		if err := d.add(plan.guard, texts); err != nil {
			return err
		}
	}
	return nil
}

// textsOf returns the canonical texts of the values at d.path in the meta
// value of key, in a slice of its own (none: the series gives none).
func (d *distinct) textsOf(key string) []string {
	if key == "" || key == "null" {
		return nil
	}
	if d.path == nil {
		if key[0] != '[' {
			return []string{key}
		}
	} else if raw, ok := model.MetaKeyField(key, d.path); ok && raw != "null" && raw[0] != '[' {
		return []string{raw}
	}
	// An array on the way or at the end, a null or missing value: the
	// value decoded and walked as MongoDB's distinct walks it.
	d.scratch = d.scratch[:0]
	document.DistinctValues(model.MetaOfKey(key), d.path, func(v any) {
		if t, err := model.CanonicalMeta(v); err == nil && !slices.Contains(d.scratch, t) {
			d.scratch = append(d.scratch, t)
		}
	})
	if len(d.scratch) == 0 {
		return nil
	}
	return slices.Clone(d.scratch)
}

// values decodes the distinct texts into values, numbers of equal value
// once, in MongoDB's order of values. The texts are parts of the series'
// meta keys, immutable: the values share their memory
// (model.DecodeMetaKey, one pass, no JSON decoder a value).
func (d *distinct) values(guard *scanGuard) ([]any, error) {
	// Texts of one value (1 and 1.0, an int32 and an int64) are one
	// value to distinct.
	var set document.DistinctSet
	for _, t := range d.texts {
		v, err := model.DecodeMetaKey(t)
		if err != nil {
			return nil, err
		}
		set.Add(v)
	}
	return set.Sorted(), guard.ctx.Err()
}

// errFound stops a scan at its first row.
var errFound = errors.New("timeseries: a row was found")

// seriesHasRow reports whether series s of plan (an unordered plan that
// decodes no field but those its residual filter names) holds a row the
// plan's filter matches in its range: its buckets in memory first, then
// its stored buckets, a stored bucket whose rows all lie in the range
// settling it from its header when no residual filter applies.
func seriesHasRow(plan *scanPlan, s *seriesSnap) (bool, error) {
	readStats.existChecks.Add(1)
	sc, err := plan.seriesScan(s, false)
	if err != nil {
		return false, err
	}
	residual := plan.filter.residual
	if residual == nil {
		sc.whole = func(*bucket.Reader) (bool, error) { return true, errFound }
	}
	var rc rowCursor
	err = sc.eachBucket(func(cols *bucket.Columns, lo, hi int, loose *looseCols) error {
		if loose != nil {
			lo, hi = 0, len(cols.Times)
		}
		rc.cols = cols
		for r := lo; r < hi; r++ {
			if t := cols.Times[r]; t < s.minTime || t > plan.filter.maxTime {
				continue
			}
			if residual == nil {
				return errFound
			}
			if err := plan.guard.row(); err != nil {
				return err
			}
			if rc.i = r; residual.Match(plan.rowDoc(s, &rc)) {
				return errFound
			}
		}
		return nil
	})
	if cerr := sc.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, errFound) {
		return true, nil
	}
	return false, err
}
