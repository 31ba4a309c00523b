package timeseries

import (
	"context"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/ttl"
)

// CountOptions are a count's skip and limit, as MongoDB's count and
// countDocuments take them.
type CountOptions struct {
	// Skip is the number of matching measurements or documents passed
	// over before counting.
	Skip int64
	// Limit bounds the count; 0 means no limit.
	Limit int64
	// Archive counts a time series' archived measurements too, as a find
	// with Archive returns them (FindOptions.Archive): the count reads
	// the archive's files, not the collection's count.
	Archive bool
}

// Count returns the number of measurements (a time-series collection) or
// documents (a plain one) of collection name that f matches (nil: all), as
// a find of f would return them, after o.Skip, at most o.Limit: expired
// measurements and documents are not counted.
//
// On a time series, without a filter it is the collection's count of
// measurements (CollectionInfo.Count) when nothing in the collection can
// have expired at the read's time (no TTL rule, expiry suspended by
// out-of-range data, or every rule's cutoff at or before the oldest
// bucket's start); otherwise the measurements are counted a chunk of
// series at a time (seriesStream), stored buckets whose rows all lie in
// the range from their headers, others from their times alone (and the
// fields f names, when it has conditions on them): what it holds does not
// grow with the number of series. With a limit, a find reads at most
// Skip+Limit measurements instead.
func (db *DB) Count(ctx context.Context, name string, f *partialfilter.Filter, o CountOptions) (int64, error) {
	h, err := db.Collection(name)
	if err != nil {
		return 0, err
	}
	return h.Count(ctx, f, o)
}

// countFound counts the measurements a find of f returns (with archive,
// those archived too), up to limit (0: all).
func (db *DB) countFound(ctx context.Context, c *collection, f *partialfilter.Filter, limit int64, archive bool) (int64, error) {
	cur, err := timeSeriesKind{}.find(ctx, db, c, FindOptions{Filter: f, Fields: []string{}, OmitTime: true, Limit: limit, Archive: archive})
	if err != nil {
		return 0, err
	}
	defer cur.Close()
	var n int64
	for cur.Next() {
		n += cur.Record().NumRows()
	}
	return n, cur.Err()
}

// countAll is Count of a time series without a limit.
func (db *DB) countAll(ctx context.Context, c *collection, name string, f *partialfilter.Filter) (int64, error) {
	if n, ok, err := db.catalogCount(c, name, f); ok || err != nil {
		if ok {
			db.stats.catalogCounts.Add(1)
		}
		return n, err
	}
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		return 0, err
	}
	defer end() // also when planning fails
	opts := AggregateOptions{Filter: f, WholeRange: true, Ungrouped: true, CountDocs: true, Fields: []string{}}
	a, err := db.aggregate(ctx, c, name, opts, []AggFunc{AggCount}, windowing{whole: true}, guard)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, row := range a.cells.rows {
		n += row[a.docs].count
	}
	return n, nil
}

// catalogCount answers Count from the collection's count when f matches
// every measurement and none can have expired at the read's time; ok
// reports whether it did.
func (db *DB) catalogCount(c *collection, name string, f *partialfilter.Filter) (n int64, ok bool, err error) {
	if f != nil && !f.IsEmpty() {
		return 0, false, nil
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	switch {
	case c.dropped:
		return 0, false, notFound(name)
	case c.opts.TimeSeries == nil:
		return 0, false, mongoerr.New(mongoerr.IllegalOperation, "collection %q is not a time-series collection", name)
	}
	if c.oorBuckets == 0 {
		// Nothing is expired while every rule's cutoff is at or before
		// the oldest bucket's start (as in DB.Expire); oldestMin is
		// math.MinInt64 until it is known.
		now := db.opts.Now()
		for i := range c.rules {
			if ttl.Cutoff(now, c.rules[i].ExpireAfterSeconds) > c.oldestMin {
				return 0, false, nil
			}
		}
	}
	return c.count, true, nil
}
