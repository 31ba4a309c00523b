package timeseries

import (
	"context"
	"sync/atomic"
	"unsafe"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// scanGuard is shared by every scan of one query (a find, an aggregate): it
// checks the query's context every guardEvery buckets and rows, so that a
// scan stops soon after its client is gone or its deadline passed, and it
// keeps the account of the memory the query holds against
// Options.QueryMemoryBytes. It is used by one goroutine.
type scanGuard struct {
	ctx   context.Context
	limit int64 // bytes; Options.QueryMemoryBytes
	used  int64 // bytes charged and not released
	peak  int64 // the most used held at once
	// total is what every query of the DB holds, bounded by totalLimit
	// (Options.QueryMemoryTotalBytes); nil for none. done is set once
	// the query gave its memory back (finish).
	total      *atomic.Int64
	totalLimit int64
	done       bool
	// reclaim asks for memory held by idle queries back when the total is
	// taken (DB.OnQueryMemoryFull); nil: none.
	reclaim func(need int64) bool

	buckets int64 // buckets decoded or visited, and headers read
	headers int64 // headers read (to bound a series' first row)
	rows    int64 // rows passed
}

// guardEvery is how many buckets, or rows, pass between two checks of the
// context: a check costs a few nanoseconds, a bucket microseconds.
const guardEvery = 64

func newScanGuard(ctx context.Context, limit int64) *scanGuard {
	return &scanGuard{ctx: ctx, limit: limit}
}

// bucket counts one bucket read and checks the context now and then.
func (g *scanGuard) bucket() error {
	g.buckets++
	if g.buckets%guardEvery == 0 {
		return g.ctx.Err()
	}
	return nil
}

// row counts one row passed and checks the context now and then.
// rowsN counts n rows read at once, as n calls of row would.
func (g *scanGuard) rowsN(n int) error {
	before := g.rows
	g.rows += int64(n)
	if g.rows/(guardEvery*64) != before/(guardEvery*64) {
		return g.ctx.Err()
	}
	return nil
}

func (g *scanGuard) row() error {
	g.rows++
	if g.rows%(guardEvery*64) == 0 {
		return g.ctx.Err()
	}
	return nil
}

// acquireQuery waits for one of the DB's query slots
// (Options.QueryConcurrency), or until ctx is done. A find holds one while
// it plans and while it fills each batch, an aggregate for its run: queries
// take turns on the processors rather than crowd out the writers.
func (db *DB) acquireQuery(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case db.querySlots <- struct{}{}:
		return nil
	default:
	}
	db.stats.queryWaits.Add(1)
	select {
	case db.querySlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// releaseQuery gives a query slot back.
func (db *DB) releaseQuery() { <-db.querySlots }

// newQueryGuard is the guard of one query of db: its own limit and the
// DB's total.
func (db *DB) newQueryGuard(ctx context.Context) *scanGuard {
	g := newScanGuard(ctx, db.opts.QueryMemoryBytes)
	g.total, g.totalLimit = &db.queryMem, db.opts.QueryMemoryTotalBytes
	if f := db.reclaim.Load(); f != nil {
		g.reclaim = *f
	}
	return g
}

// startQuery takes a query slot (acquireQuery) and a guard of its memory
// for a query answered within the call (an aggregate, a count, a
// distinct); end gives both back.
func (db *DB) startQuery(ctx context.Context) (guard *scanGuard, end func(), err error) {
	if err := db.acquireQuery(ctx); err != nil {
		return nil, nil, err
	}
	guard = db.newQueryGuard(ctx)
	return guard, func() {
		guard.finish()
		db.releaseQuery()
	}, nil
}

// maxReclaims bounds how often one charge asks for memory back.
const maxReclaims = 64

// OnQueryMemoryFull sets what a query calls when the memory all queries
// may hold together (Options.QueryMemoryTotalBytes) is taken: reclaim may
// let go of memory held by queries that are not running (the idle cursors
// of a front door) and reports whether it did, in which case the query
// tries again, up to 64 times, before it is refused. reclaim is called
// from a query's goroutine, possibly with the DB's locks held: it must not
// call the DB but to close cursors no other goroutine uses. nil removes
// it. Queries already running keep the one they started with.
func (db *DB) OnQueryMemoryFull(reclaim func(need int64) bool) {
	if reclaim == nil {
		db.reclaim.Store(nil)
		return
	}
	db.reclaim.Store(&reclaim)
}

// charge adds n bytes to the query's memory; past the limit it charges
// nothing and returns a QueryExceededMemoryLimitNoDiskUseAllowed error
// naming the limit. Past the DB's total for all queries it charges
// nothing either and returns IngressRequestRateLimitExceeded: the query
// may run once others are done.
func (g *scanGuard) charge(n int64, what string) error {
	if g.used+n > g.limit {
		return mongoerr.New(mongoerr.QueryExceededMemoryLimit,
			"query exceeded its memory limit of %d bytes (QueryMemoryBytes) holding %s; add a limit, a narrower time range, "+
				"a more selective filter on the metaField, or a larger window", g.limit, what)
	}
	for attempt := 0; g.total != nil && !g.done; attempt++ {
		t := g.total.Add(n)
		if t <= g.totalLimit {
			break
		}
		g.total.Add(-n)
		if attempt < maxReclaims && g.reclaim != nil && g.reclaim(n) {
			continue
		}
		return mongoerr.New(mongoerr.IngressRequestRateLimitExceeded,
			"the queries running hold %d of the %d bytes all queries may hold (QueryMemoryTotalBytes), "+
				"and this one needs more for %s; retry it when fewer run", t-n, g.totalLimit, what)
	}
	g.used += n
	g.peak = max(g.peak, g.used)
	return nil
}

// fits returns the error charge would return for n bytes, charging
// nothing: a plan checks that the least it will hold fits before it
// allocates any of it.
func (g *scanGuard) fits(n int64, what string) error {
	if err := g.charge(n, what); err != nil {
		return err
	}
	g.release(n)
	return nil
}

// release returns n bytes charged before.
func (g *scanGuard) release(n int64) {
	g.used -= n
	if g.total != nil && !g.done {
		g.total.Add(-n)
	}
}

// finish gives back to the DB's total what the query still holds; it is
// safe to call more than once, and charges after it count only against
// the query's own limit.
func (g *scanGuard) finish() {
	if g == nil || g.done {
		return
	}
	if g.total != nil {
		g.total.Add(-g.used)
	}
	g.done = true
	for held := readStats.maxHeld.Load(); g.peak > held && !readStats.maxHeld.CompareAndSwap(held, g.peak); held = readStats.maxHeld.Load() {
	}
}

// capturedBytes is what a capture of a bucket's columns holds beside the
// values it shares: the Columns, their headers and presence bitmaps; all
// of it when the capture was thawed from frozen rows (it shares nothing).
func capturedBytes(cols *bucket.Columns, thawed bool) int64 {
	if thawed {
		return columnsBytes(cols)
	}
	n := int64(unsafe.Sizeof(*cols)) + 8 + int64(len(cols.Fields))*int64(unsafe.Sizeof(bucket.Column{}))
	for i := range cols.Fields {
		n += 8 * int64(len(cols.Fields[i].Present))
	}
	return n
}

// readStats counts the fast paths reads took since the process started,
// for tests to see them taken.
var readStats struct {
	// partBuckets counts the stored buckets a count took partly from
	// their time index (aggregator.countBucket).
	partBuckets atomic.Int64
	// wholeBuckets counts the stored buckets an aggregate took from their
	// headers alone (aggregator.countBucket).
	wholeBuckets atomic.Int64
	// chunks counts the chunks of series streams took (seriesStream).
	chunks atomic.Int64
	// existChecks counts the series DistinctMeta read to learn whether
	// they hold a row (seriesHasRow).
	existChecks atomic.Int64
	// lastKnown counts the series a listing took from their newest row's
	// time and fields without reading their rows (collection.lastRows).
	lastKnown atomic.Int64
	// lastRecovered counts the series whose newest stored row a read
	// read back (recoverChunk).
	lastRecovered atomic.Int64
	// maxHeld is the most query memory one query held at once (a
	// guard's peak, recorded when it finishes).
	maxHeld atomic.Int64
}

// Estimates of what a query holds, for its memory account.
const (
	// seriesSnapBytes is a series in a scan plan: the seriesSnap and its
	// pointer.
	seriesSnapBytes = 160
	// openScanBytes is a series scan that has been opened: its Pebble
	// iterator (with its block buffers) and its bucket reader's scratch.
	openScanBytes = 8 << 10
	// aggKeyBytes is a cell row's key and slice header in aggCells.
	aggKeyBytes = 40
	// aggGroupBytes is a group's entry in aggCells beside its value.
	aggGroupBytes = 64
)

// columnsBytes estimates the memory held by decoded columns.
func columnsBytes(cols *bucket.Columns) int64 {
	n := int64(len(cols.Times)) * 8
	for i := range cols.Fields {
		f := &cols.Fields[i]
		n += int64(len(f.Ints))*8 + int64(len(f.Floats))*8 + int64(len(f.Bools)) + int64(len(f.Present))*8 + int64(len(f.IDs))
		for _, s := range f.Strings {
			n += 16 + int64(len(s))
		}
		n += 64
	}
	return n
}
