package timeseries

import (
	"fmt"
	"math"
	"time"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/ttl"
)

// Read visibility of expired data (docs/ttl.md): reads never return a
// measurement that has expired, also before the TTL monitor deletes it, and
// nothing in a collection expires while it holds a bucket outside
// 1970-2038 (the suspension, which recountOutOfRange keeps count of). The
// rules are compiled when the DB opens (initExpiry) and at every change of
// them (collection.compileRules).

// initExpiry compiles the rules and counts out-of-range buckets of every
// collection after recovery.
func (db *DB) initExpiry() error {
	db.mu.Lock()
	colls := make([]*collection, 0, len(db.coll.byName))
	for _, c := range db.coll.byName {
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
