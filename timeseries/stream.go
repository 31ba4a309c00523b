package timeseries

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// seriesStream hands a read the series its filter selects a chunk at a
// time, so that what the read holds does not grow with the number of
// series: a find by series (SortSeries), an aggregate, a count, a
// distinct. Each chunk is taken as planScan takes all the series of a
// sorted find, under one hold of DB.mu (shared): the chunk's buckets in
// memory are captured, then a Pebble snapshot is taken before DB.mu is
// let go, so that a bucket leaving memory meanwhile is read once (memIDs)
// and no merge batch (applied under DB.mu held for writing) comes
// between the two. The previous chunk's snapshot, iterator and memory are
// given back before the next is taken.
//
// In meta order (a find by series) the series come in the order of their
// meta keys, as planScan sorts them; they are picked from the candidates
// by selection, a batch of the next smallest keys at a time (batches
// double from planYieldEvery up to maxStreamBatch series), so that the
// candidates are never sorted nor copied. Otherwise they come in id order
// (each chunk sorted by meta key with sortChunks).
//
// A stream is used by one goroutine.
type seriesStream struct {
	db     *DB
	c      *collection
	p      *scanPlan // the read's plan: p.series and p.snap hold the chunk
	now    time.Time // expiry is cut at the read's start for all chunks
	ranges []columnRange
	// list holds the candidates in id order: collection.byID, or the
	// series the meta filter selects; reorders is collection.reorders
	// when it was taken (a change makes the read fail: the list may have
	// moved).
	list     []*series
	reorders int
	// id order: pos is the index in list of the next candidate.
	pos       int
	metaOrder bool
	// meta order: batch holds the selected candidates in meta order,
	// batchPos the next; after is the meta key of the last selected
	// (after a first selection, started), batchSize the next batch's
	// size; done once no candidate is left to select.
	batch         []*series
	batchPos      int
	after         string
	started, done bool
	batchSize     int
	batchCharge   int64 // charged for batch
	chunkCharge   int64 // charged for the chunk in p
	lastChunk     int   // the most series a chunk took so far
	// maxChunk, when not 0, bounds the series a chunk takes: a read that
	// ends at its first find (HasRows) takes them a few at a time.
	maxChunk   int
	listCharge int64 // charged for list (a meta filter's matches)
	// want, if set, is asked under DB.mu (shared) about each candidate,
	// with the lower bound of its rows the read may return, before it is
	// taken: false leaves it out; an error ends the read.
	want func(s *series, lo int64) (bool, error)
	// sortChunks puts each chunk of an id-order stream in meta order (an
	// aggregate grouped by the whole meta value makes its cells in
	// order, which a read of one chunk then need not sort).
	sortChunks bool
}

// firstSnaps is the room for series snapshots a stream's first chunk is
// made with (more come one by one, and the next chunk's slab is made as
// large as the largest chunk).
const firstSnaps = 64

// maxStreamBatch bounds the series a meta-order stream selects at once:
// 512 KiB of pointers; a full read of a million series makes about twenty
// passes over the candidates.
const maxStreamBatch = 1 << 16

// newSeriesStream sets p up for a read of collection c with filter and
// the projection fields (nil: all), and returns the stream of its series;
// no series is taken yet (next). DB.mu is held for reading.
func (db *DB) newSeriesStream(p *scanPlan, c *collection, filter *partialfilter.Filter, fields []string, guard *scanGuard, metaOrder bool) (*seriesStream, error) {
	p.setup(c, filter, fields, guard)
	st := &seriesStream{db: db, c: c, p: p, now: db.opts.Now(), ranges: pruneRanges(p.filter.residual),
		reorders: c.reorders, metaOrder: metaOrder, batchSize: planYieldEvery}
	if p.filter.empty {
		st.done = true
		return st, nil
	}
	st.list = c.matchingSeries(&p.filter, p.ts)
	if p.filter.meta != nil {
		// The matches are the stream's (or shared with the cache): 8
		// bytes a series, held for the read.
		st.listCharge = 8 * int64(len(st.list))
		if err := guard.charge(st.listCharge, "the series its filter on the metaField selects"); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// next gives back the current chunk and takes the next into p.series,
// with p.snap its snapshot; it reports false when no series is left.
func (st *seriesStream) next() (bool, error) {
	if err := st.release(); err != nil {
		return false, err
	}
	for {
		if st.metaOrder && st.batchPos == len(st.batch) {
			if err := st.selectBatch(); err != nil {
				return false, err
			}
		}
		more, err := st.fill()
		if err != nil || len(st.p.series) > 0 {
			return err == nil, err
		}
		if !more {
			return false, nil
		}
	}
}

// release gives back what the chunk in p holds: its series' memory, its
// iterator and its snapshot.
func (st *seriesStream) release() error {
	p := st.p
	st.lastChunk = max(st.lastChunk, len(p.series))
	p.guard.release(st.chunkCharge)
	st.chunkCharge = 0
	clear(p.series)
	p.series = p.series[:0]
	clear(p.snaps)
	p.snaps = p.snaps[:0]
	p.recycleThawed()
	var err error
	if p.spare != nil {
		err = p.spare.Close()
		p.spare = nil
	}
	p.seqAt = false
	if p.snap != nil {
		err = errors.Join(err, p.snap.Close())
		p.snap = nil
	}
	return err
}

// candidate returns the next candidate, nil when none is left (in meta
// order: in the current batch).
func (st *seriesStream) candidate() *series {
	if st.metaOrder {
		if st.batchPos == len(st.batch) {
			return nil
		}
		st.batchPos++
		return st.batch[st.batchPos-1]
	}
	if st.pos == len(st.list) {
		return nil
	}
	st.pos++
	return st.list[st.pos-1]
}

// unread puts back the candidate candidate returned last.
func (st *seriesStream) unread() {
	if st.metaOrder {
		st.batchPos--
	} else {
		st.pos--
	}
}

// fill takes the next chunk into p under one hold of DB.mu: at most
// planYieldEvery candidates looked at, and what the chunk holds within
// half the memory the query has left (one series at least: a series that
// does not fit fails the read). It reports whether candidates are left.
func (st *seriesStream) fill() (more bool, err error) {
	db, c, p := st.db, st.c, st.p
	guard := p.guard
	room := (guard.limit - guard.used) / 2
	charge := func(n int64, what string) error {
		if err := guard.charge(n, what); err != nil {
			return err
		}
		st.chunkCharge += n
		return nil
	}
	// The slab of snapshots grows with the chunks taken: a read that
	// ends at its first series (HasRows) makes a few, not thousands.
	if want := min(planYieldEvery, len(st.list), max(firstSnaps, st.lastChunk)); cap(p.snaps) < want {
		p.snaps = make([]seriesSnap, 0, want)
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	if c.dropped {
		return false, notFound(c.name)
	}
	if c.reorders != st.reorders {
		return false, mongoerr.New(mongoerr.QueryPlanKilled, "the series index of %q changed during the query; retry it", c.name)
	}
	for looked := 0; looked < planYieldEvery && (st.maxChunk == 0 || len(p.series) < st.maxChunk); looked++ {
		s := st.candidate()
		if s == nil {
			break
		}
		// Expired measurements are never returned (SPEC 4.5).
		lo := p.lowerBound(c, s, st.now)
		if st.empty(s, lo) {
			continue
		}
		if st.want != nil {
			if ok, err := st.want(s, lo); err != nil {
				return false, err
			} else if !ok {
				continue
			}
		}
		if len(p.series) > 0 && st.chunkCharge+seriesSnapBytes+8*int64(len(s.buckets)) > room {
			st.unread()
			break
		}
		snap, err := db.captureSeries(p, c, s, lo, st.ranges, charge)
		if err != nil {
			return false, err
		}
		p.series = append(p.series, snap)
	}
	more = st.pos < len(st.list)
	if st.metaOrder {
		more = st.batchPos < len(st.batch) || !st.done
	}
	if len(p.series) == 0 {
		return more, nil
	}
	readStats.chunks.Add(1)
	// Pebble's view is taken after memory's, under the same hold.
	p.snap = db.pdb.NewSnapshot()
	p.lastForgets = c.lastForgets
	if err := p.archive.check(db, c); err != nil {
		return false, err
	}
	if st.sortChunks && !st.metaOrder {
		sort.Slice(p.series, func(i, j int) bool { return p.series[i].metaKey < p.series[j].metaKey })
	}
	return more, nil
}

// selectBatch selects into st.batch, in meta order, the next batchSize
// candidates after the last selected, in passes over the candidates that
// let go of DB.mu every maxStreamBatch series. Candidates with nothing
// visible in the read's range are passed over.
func (st *seriesStream) selectBatch() error {
	if st.done {
		return nil
	}
	p, c := st.p, st.c
	// A batch takes at most a quarter of the memory the query has left.
	p.guard.release(st.batchCharge)
	st.batchCharge = 0
	n := min(st.batchSize, len(st.list), max(int((p.guard.limit-p.guard.used)/32), 1))
	st.batchSize = min(2*st.batchSize, maxStreamBatch)
	if err := p.guard.charge(8*int64(n), "the series it reads next, in meta order"); err != nil {
		return err
	}
	st.batchCharge = 8 * int64(n)
	h := selectHeap(st.batch[:0])
	cands := 0 // the candidates after the last selected, at most
	st.db.mu.RLock()
	for i, s := range st.list {
		if i > 0 && i%maxStreamBatch == 0 {
			st.db.mu.RUnlock()
			if err := p.guard.ctx.Err(); err != nil {
				return err
			}
			st.db.mu.RLock()
			if c.reorders != st.reorders {
				st.db.mu.RUnlock()
				return mongoerr.New(mongoerr.QueryPlanKilled, "the series index of %q changed during the query; retry it", c.name)
			}
		}
		if st.started && s.metaKey <= st.after {
			continue
		}
		// A candidate past the batch counts even if it holds nothing:
		// at worst one more pass finds that.
		if cands++; len(h) == n && s.metaKey >= h[0].metaKey {
			continue
		}
		if st.empty(s, p.lowerBound(c, s, st.now)) {
			cands--
			continue
		}
		h = h.add(s, n)
	}
	st.db.mu.RUnlock()
	slices.SortFunc(h, func(a, b *series) int { return strings.Compare(a.metaKey, b.metaKey) })
	st.batch, st.batchPos = h, 0
	st.done = cands == len(h)
	if len(h) > 0 {
		st.after, st.started = h[len(h)-1].metaKey, true
	}
	return nil
}

// empty reports whether series s surely holds no row the read may return
// from time lo: lo is past the read's range, or no stored bucket of s
// reaches lo (series.storedMax) and none in memory holds a row in range.
// DB.mu is held for reading.
func (st *seriesStream) empty(s *series, lo int64) bool {
	maxT := st.p.filter.maxTime
	if lo > maxT {
		return true
	}
	if s.storedMax >= lo {
		return false
	}
	for _, b := range s.buckets {
		if b.rows() > 0 && b.maxT >= lo && b.minT <= maxT {
			return false
		}
	}
	return true
}

// selectHeap is a max-heap of series by meta key: the n smallest keys
// seen, the largest of them on top.
type selectHeap []*series

// add puts s in h, which holds at most n series: when full, s replaces
// the top, whose key is larger.
func (h selectHeap) add(s *series, n int) selectHeap {
	i := len(h)
	if i < n {
		h = append(h, s)
		for i > 0 { // up
			parent := (i - 1) / 2
			if h[parent].metaKey >= h[i].metaKey {
				break
			}
			h[parent], h[i] = h[i], h[parent]
			i = parent
		}
		return h
	}
	h[0], i = s, 0
	for { // down
		l, big := 2*i+1, i
		if l < len(h) && h[l].metaKey > h[big].metaKey {
			big = l
		}
		if r := l + 1; r < len(h) && h[r].metaKey > h[big].metaKey {
			big = r
		}
		if big == i {
			return h
		}
		h[big], h[i] = h[i], h[big]
		i = big
	}
}

// close gives back what the stream holds besides the plan's chunk, which
// the plan's close gives back.
func (st *seriesStream) close() {
	st.p.guard.release(st.batchCharge + st.listCharge + st.chunkCharge)
	st.batchCharge, st.listCharge, st.chunkCharge = 0, 0, 0
	st.batch, st.list = nil, nil
}
