package timeseries

import (
	"context"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// Delete removes the measurements of collection name that match f, which
// may hold conditions on the metaField and a range of the timeField only. It
// returns the number of measurements removed. The delete is logged before it
// is applied, so it survives a crash once Delete returns.
func (db *DB) Delete(ctx context.Context, name string, f *partialfilter.Filter) (int64, error) {
	c, err := db.lookup(name)
	if err != nil {
		return 0, err
	}
	db.mu.RLock()
	ts := c.opts.TimeSeries
	db.mu.RUnlock()
	if ts == nil {
		return 0, mongoerr.New(mongoerr.IllegalOperation, "collection %q is not a time-series collection", name)
	}
	plan := planFilter(f, ts)
	if err := plan.deleteRange(); err != nil {
		return 0, err
	}
	if plan.empty {
		return 0, nil
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	db.cutMu.Lock()
	defer db.cutMu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	rec := deleteRecord{coll: c.id, minTime: plan.minTime, maxTime: plan.maxTime}
	db.mu.RLock()
	if c.dropped {
		db.mu.RUnlock()
		return 0, notFound(name)
	}
	for _, s := range c.series {
		if plan.matchesSeries(ts, s.meta) {
			rec.metaKeys = append(rec.metaKeys, s.metaKey)
		}
	}
	db.mu.RUnlock()
	if len(rec.metaKeys) == 0 {
		return 0, nil
	}
	if _, err := db.wal.Append(rec.encode(nil)); err != nil {
		return 0, fmt.Errorf("timeseries: log delete on %q: %w", name, err)
	}
	n, err := db.applyDelete(c, &rec)
	if err != nil {
		return n, err
	}
	// Deleting out-of-range data may lift the suspension of expiry.
	db.mu.RLock()
	oor := c.oorBuckets
	db.mu.RUnlock()
	if oor > 0 {
		err = db.recountOutOfRange(c)
	}
	return n, err
}

// applyDelete removes the rows d names from memory and from Pebble. Writers
// are excluded (cutMu held, or replay).
func (db *DB) applyDelete(c *collection, d *deleteRecord) (int64, error) {
	type target struct {
		id    uint64
		inMem map[uint64]bool
		stale [][]byte // open-bucket snapshots whose bucket is gone
	}
	var deleted, buckets int64
	var targets []target
	db.mu.Lock()
	maxSpan := max(c.maxSpan, c.opts.TimeSeries.Span())
	names := c.names
	for _, key := range d.metaKeys {
		s := c.series[key]
		if s == nil {
			continue
		}
		t := target{id: s.id, inMem: map[uint64]bool{}}
		kept := s.buckets[:0]
		for _, b := range s.buckets {
			t.inMem[b.id] = true
			n := b.deleteRows(d.minTime, d.maxTime, c.opts.TimeSeries.TimeField)
			deleted += int64(n.rows)
			db.headMem.Add(n.mem)
			if b.rows() == 0 {
				buckets++
				if b.snapshot {
					t.stale = append(t.stale, bucketKey(spaceOpen, c.id, s.id, b.minTime, b.id))
				}
				continue
			}
			kept = append(kept, b)
		}
		clear(s.buckets[len(kept):])
		s.buckets = kept
		targets = append(targets, t)
	}
	db.mu.Unlock()

	batch := db.pdb.NewBatch()
	defer batch.Close()
	var r bucket.Reader
	var enc bucket.Encoder
	var refIdx map[string]uint32 // names' indexes, made on first use
	var refs []uint32
	for _, t := range targets {
		for _, k := range t.stale {
			if err := batch.Delete(k, nil); err != nil {
				return 0, err
			}
		}
		lo := d.minTime
		if lo > math.MinInt64+maxSpan {
			lo -= maxSpan
		} else {
			lo = math.MinInt64
		}
		lower := seriesTimeKey(spaceBucket, c.id, t.id, lo)
		upper := prefixEnd(seriesPrefix(spaceBucket, c.id, t.id))
		if d.maxTime < math.MaxInt64 {
			upper = seriesTimeKey(spaceBucket, c.id, t.id, d.maxTime+1)
		}
		it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return 0, err
		}
		var whole [][]byte // keys of buckets entirely inside the range
		partial := false
		for it.First(); it.Valid(); it.Next() {
			kp, err := parseBucketKey(it.Key())
			if err != nil {
				it.Close()
				return 0, err
			}
			if t.inMem[kp.id] {
				continue
			}
			v, err := it.ValueAndErr()
			if err == nil {
				err = r.ResetNames(v, names)
			}
			if err != nil {
				it.Close()
				return 0, fmt.Errorf("series %d bucket %d: %w", t.id, kp.id, err)
			}
			if r.MaxTime() < d.minTime || r.MinTime() > d.maxTime {
				partial = true
				continue
			}
			if r.MinTime() >= d.minTime && r.MaxTime() <= d.maxTime {
				deleted += int64(r.Rows())
				buckets++
				whole = append(whole, append([]byte(nil), it.Key()...))
				continue
			}
			partial = true
			cols, err := decodeAll(&r)
			if err != nil {
				it.Close()
				return 0, err
			}
			keep := make([]int32, 0, len(cols.Times))
			for i, tm := range cols.Times {
				if tm < d.minTime || tm > d.maxTime {
					keep = append(keep, int32(i))
				}
			}
			deleted += int64(len(cols.Times) - len(keep))
			rest := permuteColumns(&cols, keep)
			if refIdx == nil {
				refIdx = make(map[string]uint32, len(names))
				for i, n := range names {
					refIdx[n] = uint32(i)
				}
			}
			refs = refs[:0]
			for i := range rest.Fields {
				ref, ok := refIdx[rest.Fields[i].Name]
				if !ok {
					it.Close()
					return 0, fmt.Errorf("%w: series %d bucket %d: field %q is not in the collection's name table", ErrCorrupt, t.id, kp.id, rest.Fields[i].Name)
				}
				refs = append(refs, ref)
			}
			buf, err := enc.EncodeRefs(nil, &rest, refs)
			if err != nil {
				it.Close()
				return 0, err
			}
			if err := batch.Set(it.Key(), buf, nil); err != nil {
				it.Close()
				return 0, err
			}
		}
		if err := it.Close(); err != nil {
			return 0, err
		}
		if !partial && len(whole) > 0 {
			// Everything the scan met goes: one range deletion.
			if err := batch.DeleteRange(whole[0], prefixEnd(whole[len(whole)-1]), nil); err != nil {
				return 0, err
			}
			continue
		}
		for _, k := range whole {
			if err := batch.Delete(k, nil); err != nil {
				return 0, err
			}
		}
	}
	if err := db.pdb.Apply(batch, pebble.NoSync); err != nil {
		return 0, err
	}
	db.mu.Lock()
	c.count -= deleted
	c.buckets -= buckets
	c.dirty = true
	db.mu.Unlock()
	return deleted, nil
}

// deleted reports what deleteRows removed.
type deleted struct {
	rows int
	mem  int64 // change of memory held (negative)
}

// deleteRows removes the rows with times in [lo, hi] from b, replacing its
// columns (never changing them in place: captured prefixes stay valid).
func (b *memBucket) deleteRows(lo, hi int64, timeField string) deleted {
	if b.rows() == 0 || b.maxT < lo || b.minT > hi {
		return deleted{}
	}
	keep := make([]int32, 0, b.rows())
	for i, t := range b.cols.Times {
		if t < lo || t > hi {
			keep = append(keep, int32(i))
		}
	}
	n := b.rows() - len(keep)
	if n == 0 {
		return deleted{}
	}
	b.cols = permuteColumns(&b.cols, keep)
	before := b.mem
	b.mem = columnsMem(&b.cols)
	b.size = estimateSize(&b.cols, timeField)
	b.minT, b.maxT = 0, 0
	for i, t := range b.cols.Times {
		if i == 0 || t < b.minT {
			b.minT = t
		}
		if i == 0 || t > b.maxT {
			b.maxT = t
		}
	}
	b.dirty = true
	return deleted{rows: n, mem: b.mem - before}
}

// decodeAll decodes every column of the bucket r was reset to.
func decodeAll(r *bucket.Reader) (bucket.Columns, error) {
	var cols bucket.Columns
	var err error
	if cols.Times, err = r.Times(nil); err != nil {
		return cols, err
	}
	cols.Fields = make([]bucket.Column, r.NumFields())
	for i := range cols.Fields {
		if err := r.Column(i, &cols.Fields[i]); err != nil {
			return cols, err
		}
	}
	return cols, nil
}
