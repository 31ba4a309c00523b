package timeseries

import (
	"bytes"
	"context"
	"fmt"
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

// Targets lists the TTL rules of every time-series collection whose expiry
// is not suspended (ttl.Store).
func (db *DB) Targets(ctx context.Context) ([]ttl.Target, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	var out []ttl.Target
	for _, c := range db.coll.byName {
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
	return c.kind().expire(ctx, db, c, t.Index, now, budget)
}

// expire is DB.Expire on a time-series collection: the expired buckets of
// the series the rule named index applies to.
func (timeSeriesKind) expire(ctx context.Context, db *DB, c *collection, index string, now time.Time, budget ttl.Budget) (out ttl.Batch, err error) {
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
	ids, ok := db.ruleSeries(c, index)
	if !ok {
		return out, nil
	}
	// Series whose rule archives go to an archive pass once the deletes
	// are done and the maintenance lock is released (it runs after the
	// unlock deferred below).
	ids, arc := db.splitArchive(c, ids)
	if len(arc) > 0 {
		defer func() {
			if err != nil || out.More {
				return
			}
			b := budget
			if b.Docs > 0 {
				if b.Docs -= out.Docs; b.Docs <= 0 {
					out.More = true
					return
				}
			}
			a, aerr := db.archiveSeries(ctx, c, index, arc, now, b)
			out.Docs += a.Docs
			out.Buckets += a.Buckets
			out.More = a.More
			err = aerr
		}()
	}
	db.mu.RLock()
	resume := c.ttlResume[index]
	db.mu.RUnlock()
	// Start after the series the last batch stopped at, and wrap around.
	start, _ := slices.BinarySearch(ids, resume+1)
	order := append(slices.Clip(ids[start:]), ids[:start]...)

	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	if err := db.settlePending(); err != nil {
		return out, err
	}
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
	c.ttlResume[index] = last
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
	valid := c.ruleCacheVer == c.rulesVer && c.ruleCacheSeries == c.series.len()
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
	if c.ruleCacheVer != c.rulesVer || c.ruleCacheSeries != c.series.len() {
		c.ruleCache = map[string][]uint64{}
		c.ruleCacheVer, c.ruleCacheSeries = c.rulesVer, c.series.len()
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
	ids = make([]uint64, 0, c.series.len())
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
		x.gone.addBucket(b)
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
