package timeseries

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/ttl"
)

// Expiry (docs/ttl.md). A bucket expires when its newest measurement does:
// at maxT + TTL, where TTL is the series' effective TTL (the smallest of
// the rules that match it, collection.setSeriesTTL). Reads hide expired
// measurements at once (visibleFrom); the TTL monitor deletes whole expired
// buckets through Targets and Expire. Deletes are not logged: expiry is
// idempotent, so a delete lost in a crash is simply made again by the next
// pass, and the counts, checkpointed with the data, stay consistent with it.

// initExpiry compiles the rules and counts out-of-range buckets of every
// collection after recovery.
func (db *DB) initExpiry() error {
	db.mu.Lock()
	colls := make([]*collection, 0, len(db.collections))
	for _, c := range db.collections {
		c.compileRules()
		colls = append(colls, c)
	}
	db.mu.Unlock()
	for _, c := range colls {
		if err := db.recountOutOfRange(c); err != nil {
			return err
		}
		db.mu.RLock()
		n := c.oorBuckets
		db.mu.RUnlock()
		if n > 0 {
			db.log.Warn("expiry suspended: the collection holds measurements outside 1970-01-01T00:00:00Z..2038-01-19T03:14:07Z",
				"collection", c.name, "outOfRangeBuckets", n)
		}
	}
	return nil
}

// recountOutOfRange sets c.oorBuckets from the data: buckets in memory by
// their bounds, buckets in Pebble by their keys (a bucket starting before
// 1970 holds a measurement before it) and, near 2038, their control
// blocks. With many buckets a series it costs two seeks per series;
// with few (a sensor fleet: a million series of a bucket or two) one
// pass over the collection's keys, which costs less than the seeks.
func (db *DB) recountOutOfRange(c *collection) error {
	var n int64
	db.mu.Lock()
	if c.opts.TimeSeries == nil {
		db.mu.Unlock()
		return nil
	}
	maxSpan := max(c.maxSpan, c.opts.TimeSeries.Span())
	// Bucket ids are unique in the store: one set for the collection.
	inMem := map[uint64]bool{}
	ids := make([]uint64, 0, len(c.byID))
	oldest := int64(math.MaxInt64)
	c.newMin = math.MaxInt64
	for _, s := range c.byID {
		for _, b := range s.buckets {
			oldest = min(oldest, b.minTime)
			inMem[b.id] = true
			b.oor = b.rows() > 0 && (!ttl.InRange(b.minT) || !ttl.InRange(b.maxT))
			if b.oor {
				n++
			}
		}
		ids = append(ids, s.id)
	}
	scan := c.buckets < recountScanBuckets*int64(len(ids))
	db.mu.Unlock()
	// One iterator for every series: SetBounds per range.
	it, err := db.pdb.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	nearEnd := max(ttl.MaxTimeNanos-maxSpan, ttl.MinTimeNanos)
	// check counts the stored bucket at the iterator if it is out of
	// range; kp is its key.
	check := func(kp bucketKeyParts) error {
		oldest = min(oldest, kp.minTime)
		if inMem[kp.id] {
			return nil
		}
		switch {
		case kp.minTime < ttl.MinTimeNanos || kp.minTime > ttl.MaxTimeNanos:
			n++
		case kp.minTime >= nearEnd:
			v, err := it.ValueAndErr()
			var maxT int64
			if err == nil {
				_, _, maxT, err = bucket.Peek(v)
			}
			if err != nil {
				return fmt.Errorf("series %d bucket %d: %w", kp.series, kp.id, err)
			}
			if maxT > ttl.MaxTimeNanos {
				n++
			}
		}
		return nil
	}
	// checkRange checks the stored buckets with keys in [lo, hi).
	checkRange := func(lo, hi []byte) error {
		it.SetBounds(lo, hi)
		for valid := it.First(); valid; valid = it.Next() {
			kp, err := parseBucketKey(it.Key())
			if err == nil {
				err = check(kp)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if scan {
		p := collPrefix(spaceBucket, c.id)
		if err := checkRange(p, prefixEnd(p)); err != nil {
			return err
		}
	} else {
		for _, id := range ids {
			prefix := seriesPrefix(spaceBucket, c.id, id)
			// The oldest bucket.
			it.SetBounds(prefix, prefixEnd(prefix))
			if it.First() {
				kp, err := parseBucketKey(it.Key())
				if err != nil {
					return err
				}
				oldest = min(oldest, kp.minTime)
			}
			// Buckets starting before 1970, and those that may end
			// after 2038.
			if err := checkRange(prefix, seriesTimeKey(spaceBucket, c.id, id, ttl.MinTimeNanos)); err != nil {
				return err
			}
			if err := checkRange(seriesTimeKey(spaceBucket, c.id, id, nearEnd), prefixEnd(prefix)); err != nil {
				return err
			}
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	db.mu.Lock()
	was := c.oorBuckets
	c.oorBuckets = n
	c.oldestMin = min(oldest, c.newMin)
	db.mu.Unlock()
	if was > 0 && n == 0 {
		db.log.Info("expiry resumed: no measurement outside 1970..2038 is left", "collection", c.name)
	}
	return nil
}

// recountScanBuckets: below this many stored buckets a series on average,
// recountOutOfRange reads every bucket key rather than seek twice a
// series.
var recountScanBuckets int64 = 16

// visibleFrom returns the oldest time (ns) of s a read may return at now:
// older measurements have expired. DB.mu is held.
func (c *collection) visibleFrom(s *series, now time.Time) int64 {
	if s.ttl < 0 || c.oorBuckets > 0 {
		return math.MinInt64
	}
	return ttl.Cutoff(now, s.ttl)
}

// Targets lists the TTL rules of every time-series collection whose expiry
// is not suspended (ttl.Store).
func (db *DB) Targets(ctx context.Context) ([]ttl.Target, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	var out []ttl.Target
	for _, c := range db.collections {
		for _, r := range c.plainRules {
			out = append(out, ttl.Target{Collection: c.name, Index: r.index.spec.Name})
		}
		if c.opts.TimeSeries == nil || c.oorBuckets > 0 {
			continue
		}
		for _, r := range c.rules {
			out = append(out, ttl.Target{Collection: c.name, Index: r.Index})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Collection != out[j].Collection {
			return out[i].Collection < out[j].Collection
		}
		return out[i].Index < out[j].Index
	})
	return out, nil
}

// Expire deletes, within budget, the expired buckets of the series rule t
// applies to (ttl.Store). A series is cut by its effective TTL, which may
// be shorter than t's. Batches resume after the series the previous one
// stopped at, so that every series is reached. A batch holds the
// maintenance lock (checkpoints wait) but takes the memory lock only to
// unlink buckets, one series at a time: ingest and reads go on.
func (db *DB) Expire(ctx context.Context, t ttl.Target, now time.Time, budget ttl.Budget) (out ttl.Batch, err error) {
	defer func() {
		// A batch that deleted, or failed partway, may leave removals that
		// only a checkpoint makes durable (see persistCollection).
		if out.Docs > 0 || err != nil {
			db.expiredUnflushed.Store(true)
		}
	}()
	if err := db.checkWritable(); err != nil {
		return out, err
	}
	c, err := db.lookup(t.Collection)
	if err != nil {
		if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
			return out, nil
		}
		return out, err
	}
	if c.plain != nil {
		return db.expirePlain(ctx, c, t.Index, now, budget)
	}
	// Nothing expires before the cutoff of the shortest TTL passes the
	// oldest bucket's min time: no series to visit.
	db.mu.RLock()
	idle := len(c.rules) > 0
	for i := range c.rules {
		idle = idle && ttl.Cutoff(now, c.rules[i].ExpireAfterSeconds) <= c.oldestMin
	}
	db.mu.RUnlock()
	if idle {
		db.stats.ttlIdle.Add(1)
		return out, nil
	}
	ids, ok := db.ruleSeries(c, t.Index)
	if !ok {
		return out, nil
	}
	db.mu.RLock()
	resume := c.ttlResume[t.Index]
	db.mu.RUnlock()
	// Start after the series the last batch stopped at, and wrap around.
	start, _ := slices.BinarySearch(ids, resume+1)
	order := append(slices.Clip(ids[start:]), ids[:start]...)

	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	db.mu.RLock()
	names := c.names
	db.mu.RUnlock()
	x := &expiry{db: db, c: c, budget: budget, batch: db.pdb.NewBatch(), gone: fieldTypeSet{}, names: names}
	defer x.batch.Close()
	// One iterator over the collection's stored buckets, moved forward
	// from series to series by seeks alone: Pebble turns a seek past the
	// last into steps when it can, where new bounds for each series
	// would make every seek start over.
	cp := collPrefix(spaceBucket, c.id)
	if x.it, err = db.pdb.NewIter(&pebble.IterOptions{LowerBound: cp, UpperBound: prefixEnd(cp)}); err != nil {
		return out, err
	}
	defer x.it.Close()
	last := resume
	n := 0
	for _, id := range order {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if x.over() {
			out.More = true
			break
		}
		if n++; n%64 == 0 {
			// Let writers and readers run: a batch is one of many
			// goroutines, and must not hold a core for long.
			runtime.Gosched()
		}
		more, err := x.series(id, now)
		if err != nil {
			return out, err
		}
		if more {
			out.More = true
			last = id - 1 // resume with this series
			break
		}
		last = id
	}
	if !out.More {
		last = 0
	}
	// The catalog record goes in the same batch, with the checkpoint count
	// less what the batch deletes from Pebble: if Pebble makes the batch
	// durable before the next checkpoint (a memtable flush) and the process
	// dies, the count recovered is that record's plus the log's.
	if x.persisted > 0 || x.persistedBuckets > 0 {
		db.mu.Lock()
		c.ckptCount -= x.persisted
		c.ckptBuckets -= x.persistedBuckets
		rec, err := c.record()
		if err == nil {
			err = x.batch.Set(catalogKey(c.name), rec, nil)
		}
		if err != nil {
			c.ckptCount += x.persisted
			c.ckptBuckets += x.persistedBuckets
			db.mu.Unlock()
			return out, err
		}
		db.mu.Unlock()
	}
	if err := db.pdb.Apply(x.batch, pebble.NoSync); err != nil {
		db.mu.Lock()
		c.ckptCount += x.persisted
		c.ckptBuckets += x.persistedBuckets
		db.mu.Unlock()
		x.docs, x.buckets = x.memDocs, x.memBuckets
		db.account(c, x)
		return out, err
	}
	db.account(c, x)
	if x.docs > 0 {
		if err := db.refreshFieldTypes(c, x.gone); err != nil {
			return out, err
		}
	}
	db.mu.Lock()
	if c.ttlResume == nil {
		c.ttlResume = map[string]uint64{}
	}
	c.ttlResume[t.Index] = last
	db.mu.Unlock()
	out.Docs, out.Buckets = x.docs, x.buckets
	return out, nil
}

func (db *DB) account(c *collection, x *expiry) {
	db.mu.Lock()
	c.count -= x.docs
	c.buckets -= x.buckets
	c.dirty = true
	db.mu.Unlock()
	db.headMem.Add(-x.mem)
}

// ruleSeries returns the ids, sorted, of the series of c that rule index
// applies to and that have a TTL; false when the rule does not exist or
// expiry is suspended. The list is cached until the rules or the series
// change.
func (db *DB) ruleSeries(c *collection, index string) ([]uint64, bool) {
	db.mu.RLock()
	valid := c.ruleCacheVer == c.rulesVer && c.ruleCacheSeries == len(c.series)
	ids, cached := c.ruleCache[index]
	suspended := c.oorBuckets > 0 || c.dropped
	db.mu.RUnlock()
	if suspended {
		return nil, false
	}
	if valid && cached {
		return ids, true
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if c.ruleCacheVer != c.rulesVer || c.ruleCacheSeries != len(c.series) {
		c.ruleCache = map[string][]uint64{}
		c.ruleCacheVer, c.ruleCacheSeries = c.rulesVer, len(c.series)
	}
	ri := -1
	for i := range c.rules {
		if c.rules[i].Index == index {
			ri = i
		}
	}
	if ri < 0 {
		return nil, false
	}
	ids = make([]uint64, 0, len(c.series))
	for _, s := range c.byID {
		if s.ttl >= 0 && c.ruleMatches(ri, s, &seriesMetaDoc{}) {
			ids = append(ids, s.id)
		}
	}
	slices.Sort(ids)
	c.ruleCache[index] = ids
	return ids, true
}

// expiry is one Expire batch: what it deleted so far, and the Pebble
// iterator and batch it works with.
type expiry struct {
	db                  *DB
	c                   *collection
	budget              ttl.Budget
	it                  *pebble.Iterator
	batch               *pebble.Batch
	docs, buckets       int64
	memDocs, memBuckets int64 // the part removed from memory
	mem                 int64 // bytes of memory released
	// persisted and persistedBuckets are the measurements and buckets of
	// the Pebble keys deleted: the part of the catalog's checkpoint count
	// that goes with them.
	persisted, persistedBuckets int64
	run                         [][]byte
	inMem, removed              map[uint64]bool
	// gone holds the field types of the buckets deleted, read with r
	// against the name table names (refreshFieldTypes).
	gone  fieldTypeSet
	r     bucket.Reader
	names []string
}

// noteStored adds the field types of stored bucket v to x.gone.
func (x *expiry) noteStored(v []byte) error {
	if err := x.r.ResetNames(v, x.names); err != nil {
		return err
	}
	x.gone.addStored(&x.r)
	return nil
}

func (x *expiry) over() bool {
	return (x.budget.Docs > 0 && x.docs >= x.budget.Docs) ||
		(!x.budget.Deadline.IsZero() && x.db.opts.Now().After(x.budget.Deadline))
}

// series deletes the buckets of series id whose newest measurement is older
// than its cutoff at now. more reports a stop at the budget.
func (x *expiry) series(id uint64, now time.Time) (more bool, err error) {
	db, c := x.db, x.c
	if x.inMem == nil {
		x.inMem, x.removed = map[uint64]bool{}, map[uint64]bool{}
	}
	clear(x.inMem)
	clear(x.removed)
	// Most series have nothing expired in memory: look under the read lock
	// and take the write lock only to unlink buckets.
	db.mu.RLock()
	s := c.seriesOf(id)
	if s == nil || s.ttl < 0 || c.dropped || c.oorBuckets > 0 {
		db.mu.RUnlock()
		return false, nil
	}
	cutoff := ttl.Cutoff(now, s.ttl)
	unlink := false
	for _, b := range s.buckets {
		if b.rows() > 0 && b.maxT < cutoff {
			unlink = true
			break
		}
		x.inMem[b.id] = true
	}
	db.mu.RUnlock()
	if !unlink {
		return x.pebbleBuckets(id, cutoff, false)
	}
	clear(x.inMem)
	db.mu.Lock()
	if s.ttl < 0 || c.dropped || c.oorBuckets > 0 {
		db.mu.Unlock()
		return false, nil
	}
	cutoff = ttl.Cutoff(now, s.ttl)
	var stale [][]byte
	var staleRows int64
	kept := s.buckets[:0]
	for _, b := range s.buckets {
		expired := b.rows() > 0 && b.maxT < cutoff
		if expired && x.over() {
			more, expired = true, false
		}
		if !expired {
			x.inMem[b.id] = true
			kept = append(kept, b)
			continue
		}
		n := int64(b.rows())
		x.gone.addColumns(&b.cols)
		b.changed() // its sorted copy, if any, goes too
		x.docs += n
		x.memDocs += n
		x.buckets++
		x.memBuckets++
		x.mem += b.mem
		x.removed[b.id] = true
		if b.snapshot {
			stale = append(stale, bucketKey(spaceOpen, c.id, s.id, b.minTime, b.id))
			staleRows += int64(b.snapRows)
		}
	}
	clear(s.buckets[len(kept):])
	s.buckets = kept
	db.mu.Unlock()
	// The snapshots' rows, as the checkpoints that wrote them counted.
	x.persisted += staleRows
	x.persistedBuckets += int64(len(stale))
	for _, k := range stale {
		if err := x.batch.Delete(k, nil); err != nil {
			return more, err
		}
	}
	return x.pebbleBuckets(id, cutoff, more)
}

// pebbleBuckets deletes the expired buckets of series id held in Pebble,
// skipping those in x.inMem.
func (x *expiry) pebbleBuckets(id uint64, cutoff int64, more bool) (bool, error) {
	c := x.c
	// Only buckets starting before the cutoff can end before it.
	upper := seriesTimeKey(spaceBucket, c.id, id, cutoff)
	x.run = x.run[:0]
	for valid := x.it.SeekGE(seriesPrefix(spaceBucket, c.id, id)); valid && bytes.Compare(x.it.Key(), upper) < 0; valid = x.it.Next() {
		kp, err := parseBucketKey(x.it.Key())
		if err != nil {
			return more, err
		}
		if x.inMem[kp.id] {
			// An older copy of a bucket that lives on in memory.
			if err := x.flush(); err != nil {
				return more, err
			}
			continue
		}
		if x.removed[kp.id] {
			// The copy of a bucket just removed from memory, counted there.
			v, err := x.it.ValueAndErr()
			var rows int
			if err == nil {
				rows, _, _, err = bucket.Peek(v)
			}
			if err == nil {
				err = x.noteStored(v)
			}
			if err != nil {
				return more, fmt.Errorf("series %d bucket %d: %w", id, kp.id, err)
			}
			x.persisted += int64(rows)
			x.persistedBuckets++
			x.run = append(x.run, slices.Clone(x.it.Key()))
			continue
		}
		if more || x.over() {
			more = true
			break
		}
		v, err := x.it.ValueAndErr()
		var rows int
		var maxT int64
		if err == nil {
			rows, _, maxT, err = bucket.Peek(v)
		}
		if err != nil {
			return more, fmt.Errorf("series %d bucket %d: %w", id, kp.id, err)
		}
		if maxT >= cutoff {
			if err := x.flush(); err != nil {
				return more, err
			}
			continue
		}
		if err := x.noteStored(v); err != nil {
			return more, fmt.Errorf("series %d bucket %d: %w", id, kp.id, err)
		}
		x.docs += int64(rows)
		x.buckets++
		x.persisted += int64(rows)
		x.persistedBuckets++
		x.run = append(x.run, slices.Clone(x.it.Key()))
	}
	return more, x.flush()
}

// flush deletes the run of consecutive expired keys: one key, or a range.
func (x *expiry) flush() error {
	var err error
	switch len(x.run) {
	case 0:
	case 1:
		err = x.batch.Delete(x.run[0], nil)
	default:
		err = x.batch.DeleteRange(x.run[0], prefixEnd(x.run[len(x.run)-1]), nil)
	}
	x.run = x.run[:0]
	return err
}

// TTLIndex is a TTL index as TTLState reports it.
type TTLIndex struct {
	Name                    string         `json:"name"`
	ExpireAfterSeconds      int64          `json:"expireAfterSeconds"`
	PartialFilterExpression map[string]any `json:"partialFilterExpression,omitempty"`
}

// TTLState is the expiry state of a time-series collection.
type TTLState struct {
	ExpireAfterSeconds *int64     `json:"expireAfterSeconds"`
	Indexes            []TTLIndex `json:"indexes"`
	// Suspended is true while the collection holds a measurement outside
	// 1970..2038 (SPEC 2.4); Reason says so.
	Suspended         bool    `json:"suspended"`
	Reason            *string `json:"reason"`
	OutOfRangeBuckets int64   `json:"outOfRangeBuckets"`
	// NextExpiry is when the oldest measurement under a rule expires (in
	// the past when expired data awaits the monitor); nil when nothing
	// will expire.
	NextExpiry *time.Time `json:"nextExpiry"`
}

// TTLState reports a collection's expiry rules and state. It reads the
// oldest bucket of every series that has a TTL: one seek each.
func (db *DB) TTLState(ctx context.Context, name string) (*TTLState, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	st := &TTLState{Indexes: []TTLIndex{}}
	type ser struct {
		id     uint64
		ttl    int64
		oldest int64
		inMem  bool
	}
	var list []ser
	if c.plain != nil {
		return st, db.plainTTLState(c, st)
	}
	db.mu.RLock()
	st.ExpireAfterSeconds = c.opts.ExpireAfterSeconds
	for _, spec := range c.indexes {
		if spec.IsTTL() {
			st.Indexes = append(st.Indexes, TTLIndex{Name: spec.Name, ExpireAfterSeconds: *spec.ExpireAfterSeconds,
				PartialFilterExpression: spec.PartialFilterExpression})
		}
	}
	st.OutOfRangeBuckets = c.oorBuckets
	if c.oorBuckets > 0 {
		st.Suspended = true
		reason := fmt.Sprintf("%d bucket(s) hold measurements outside 1970-01-01T00:00:00Z..2038-01-19T03:14:07Z: nothing in the collection expires until they are deleted", c.oorBuckets)
		st.Reason = &reason
	}
	if !st.Suspended {
		for _, s := range c.series {
			if s.ttl < 0 {
				continue
			}
			e := ser{id: s.id, ttl: s.ttl, oldest: math.MaxInt64}
			for _, b := range s.buckets {
				if b.rows() > 0 && b.minT < e.oldest {
					e.oldest, e.inMem = b.minT, true
				}
			}
			list = append(list, e)
		}
	}
	db.mu.RUnlock()
	var next int64 = math.MaxInt64
	it, err := db.pdb.NewIter(nil)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for _, s := range list {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		it.SetBounds(seriesPrefix(spaceBucket, c.id, s.id), prefixEnd(seriesPrefix(spaceBucket, c.id, s.id)))
		if it.First() {
			if v, err := it.ValueAndErr(); err == nil {
				if rows, minT, _, err := bucket.Peek(v); err == nil && rows > 0 {
					s.oldest = min(s.oldest, minT)
				}
			}
		}
		if err := it.Error(); err != nil {
			return nil, err
		}
		if s.oldest == math.MaxInt64 {
			continue
		}
		d := s.ttl * int64(time.Second)
		if s.oldest <= math.MaxInt64-d {
			next = min(next, s.oldest+d)
		}
	}
	if next != math.MaxInt64 {
		t := time.Unix(0, next).UTC()
		st.NextExpiry = &t
	}
	return st, nil
}

// TTLProposal is a change of TTL values to preview: the collection's
// (ExpireAfterSeconds, or ExpireOff) and indexes' by name.
type TTLProposal struct {
	ExpireAfterSeconds *int64
	ExpireOff          bool
	Indexes            map[string]int64
	// NewIndex is a TTL index to preview as if CreateIndex had made it
	// (time-series collections).
	NewIndex *IndexSpec
}

// validateNewTTLIndex checks a proposed TTL index as CreateIndex would,
// against the existing indexes; it names spec when it has no name.
func validateNewTTLIndex(opts *CollectionOptions, existing []IndexSpec, spec *IndexSpec) error {
	if spec.Name == "" && len(spec.Key) > 0 {
		spec.Name = DefaultIndexName(spec.Key)
	}
	if !spec.IsTTL() {
		return mongoerr.New(mongoerr.InvalidOptions, "'newIndex' needs 'expireAfterSeconds': only TTL indexes expire data")
	}
	if _, err := validateIndex(opts, spec); err != nil {
		return err
	}
	for _, old := range existing {
		if old.Name == spec.Name {
			return mongoerr.New(mongoerr.IndexOptionsConflict,
				"an index named %q exists; preview a new value for it under 'indexes'", spec.Name)
		}
		if sameKey(old.Key, spec.Key) && sameFilter(old.PartialFilterExpression, spec.PartialFilterExpression) {
			return mongoerr.New(mongoerr.IndexOptionsConflict,
				"index %q already exists with the same key and filter; preview a new value for it under 'indexes'", old.Name)
		}
	}
	if len(existing) >= MaxIndexes {
		return mongoerr.New(mongoerr.CannotCreateIndex, "a collection holds at most %d indexes", MaxIndexes)
	}
	return nil
}

// RulePreview is what one rule would expire now.
type RulePreview struct {
	// Index is the TTL index, nil for the collection's expireAfterSeconds.
	Index              *string `json:"index"`
	ExpireAfterSeconds int64   `json:"expireAfterSeconds"`
	// Buckets and Measurements the monitor would delete now, counted under
	// the rule that gives their series its TTL.
	Buckets      int64 `json:"buckets"`
	Measurements int64 `json:"measurements"`
	// HiddenMeasurements are those reads would stop returning now: the
	// deleted ones and the expired ones of buckets not yet whole expired.
	HiddenMeasurements int64 `json:"hiddenMeasurements"`
	// Documents the rule would delete now (plain collections; each counted
	// under the first rule that expires it). Measurements and
	// HiddenMeasurements then count the same documents.
	Documents int64 `json:"documents,omitempty"`
}

// TTLPreview is the dry run of a TTL change.
type TTLPreview struct {
	Now       time.Time     `json:"now"`
	Suspended bool          `json:"suspended"`
	Rules     []RulePreview `json:"rules"`
}

// PreviewTTL reports, per rule, what would expire now if the collection had
// the TTL values of p, without changing anything. It reads the control
// blocks of the buckets that start before their series' cutoff, and
// decodes the times of those that straddle it.
func (db *DB) PreviewTTL(ctx context.Context, name string, p TTLProposal) (*TTLPreview, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	now := db.opts.Now()
	out := &TTLPreview{Now: now.UTC(), Rules: []RulePreview{}}
	for n := range p.Indexes {
		db.mu.RLock()
		i := indexByName(c.indexes, n)
		db.mu.RUnlock()
		if i < 0 {
			return nil, mongoerr.New(mongoerr.IndexNotFound, "index not found with name [%s]", n)
		}
	}
	if c.plain != nil {
		if p.NewIndex != nil {
			return nil, invalid("'newIndex' is previewed on time-series collections; on %q, preview an existing index by name under 'indexes'", name)
		}
		return db.previewPlain(ctx, c, p, out)
	}
	db.mu.RLock()
	probe, err := proposedRules(c, p)
	if err != nil {
		db.mu.RUnlock()
		return nil, err
	}
	names := c.names
	out.Suspended = c.oorBuckets > 0
	for _, r := range probe.rules {
		rp := RulePreview{ExpireAfterSeconds: r.ExpireAfterSeconds}
		if r.Index != "" {
			idx := r.Index
			rp.Index = &idx
		}
		out.Rules = append(out.Rules, rp)
	}
	var list []previewSeries
	if !out.Suspended {
		list = previewList(c, probe, now)
	}
	// Pebble's view is taken with memory's, as Find does: the buckets a
	// checkpoint writes later may refer to field names newer than names.
	snap := db.pdb.NewSnapshot()
	db.mu.RUnlock()
	defer snap.Close()
	if err := previewStored(ctx, snap, c.id, names, list, out); err != nil {
		return nil, err
	}
	return out, nil
}

// proposedRules returns a copy of collection c's options and indexes with
// the TTL values of p, its rules compiled. DB.mu is held.
func proposedRules(c *collection, p TTLProposal) (*collection, error) {
	probe := &collection{opts: c.opts, indexes: append([]IndexSpec(nil), c.indexes...)}
	if p.NewIndex != nil {
		spec := *p.NewIndex
		if err := validateNewTTLIndex(&probe.opts, probe.indexes, &spec); err != nil {
			return nil, err
		}
		probe.indexes = append(probe.indexes, spec)
	}
	if p.ExpireOff {
		probe.opts.ExpireAfterSeconds = nil
	} else if p.ExpireAfterSeconds != nil {
		probe.opts.ExpireAfterSeconds = p.ExpireAfterSeconds
	}
	for i := range probe.indexes {
		if v, ok := p.Indexes[probe.indexes[i].Name]; ok {
			v := v
			probe.indexes[i].ExpireAfterSeconds = &v
		}
	}
	probe.compileRules()
	return probe, nil
}

// previewSeries is a series a TTL preview counts: the rule that applies
// to it (index in the probe's rules), its cutoff, and its buckets in
// memory.
type previewSeries struct {
	id     uint64
	rule   int
	cutoff int64
	mem    []*bucket.Columns // captured: those that start before the cutoff
	inMem  map[uint64]bool
}

// previewList returns the series of c a rule of probe applies to, each
// with the rule of the shortest TTL among those that match. DB.mu is held.
func previewList(c, probe *collection, now time.Time) []previewSeries {
	var list []previewSeries
	for _, s := range c.byID {
		var m seriesMetaDoc // decoded only for a rule whose strings the key holds
		best, ok := -1, false
		for i := range probe.rules {
			if probe.ruleMatches(i, s, &m) && (!ok || probe.rules[i].ExpireAfterSeconds < probe.rules[best].ExpireAfterSeconds) {
				best, ok = i, true
			}
		}
		if !ok {
			continue
		}
		e := previewSeries{id: s.id, rule: best, cutoff: ttl.Cutoff(now, probe.rules[best].ExpireAfterSeconds), inMem: map[uint64]bool{}}
		for _, b := range s.buckets {
			e.inMem[b.id] = true
			if b.rows() > 0 && b.minT < e.cutoff {
				cp := b.capture()
				e.mem = append(e.mem, &cp.cols)
			}
		}
		list = append(list, e)
	}
	return list
}

// countTimes adds to rp the measurements of one bucket with times that
// are before cutoff, and the bucket itself when all of them are.
func (rp *RulePreview) countTimes(times []int64, cutoff int64) {
	hidden := int64(0)
	newest := int64(math.MinInt64)
	for _, t := range times {
		if t < cutoff {
			hidden++
		}
		newest = max(newest, t)
	}
	rp.HiddenMeasurements += hidden
	if len(times) > 0 && newest < cutoff {
		rp.Buckets++
		rp.Measurements += int64(len(times))
	}
}

// previewStored adds to out's rules what would expire of the series of
// list, in memory and in snap (collection coll, with name table names).
func previewStored(ctx context.Context, snap *pebble.Snapshot, coll uint32, names []string, list []previewSeries, out *TTLPreview) error {
	it, err := snap.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	var r bucket.Reader
	for _, s := range list {
		if err := ctx.Err(); err != nil {
			return err
		}
		rp := &out.Rules[s.rule]
		for _, cols := range s.mem {
			rp.countTimes(cols.Times, s.cutoff)
		}
		it.SetBounds(seriesPrefix(spaceBucket, coll, s.id), seriesTimeKey(spaceBucket, coll, s.id, s.cutoff))
		for valid := it.First(); valid; valid = it.Next() {
			kp, err := parseBucketKey(it.Key())
			if err != nil {
				return err
			}
			if s.inMem[kp.id] {
				continue
			}
			v, err := it.ValueAndErr()
			if err == nil {
				err = r.ResetNames(v, names)
			}
			if err != nil {
				return fmt.Errorf("series %d bucket %d: %w", s.id, kp.id, err)
			}
			if r.MaxTime() < s.cutoff {
				rp.Buckets++
				rp.Measurements += int64(r.Rows())
				rp.HiddenMeasurements += int64(r.Rows())
				continue
			}
			times, err := r.Times(nil)
			if err != nil {
				return err
			}
			rp.countTimes(times, s.cutoff)
		}
		if err := it.Error(); err != nil {
			return err
		}
	}
	return nil
}
