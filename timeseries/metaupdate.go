package timeseries

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries/wal"
)

// A meta update is MongoDB's update of a time-series collection: a filter
// on the metaField, update operators on the metaField (updateMany). Every
// series whose meta value the filter matches gets the value the operators
// make of it, and its measurements move to the series of that value,
// joining the collection's series of it if there is one. The moves of one
// update are made at once: a series may lose its measurements to one
// value and take another series' (an $inc of a meta field).
//
// Replaying such an update over its own result would move measurements
// again, so the update is made with a checkpoint (ckptChange): its record
// is the last of its log segment and the checkpoint that writes its moves
// starts replay after it, in one Pebble batch.

// metaMove moves every measurement of meta key from to meta key to.
type metaMove struct{ from, to string }

// metaUpdateRecord is a logged meta update (recMetaUpdate): the series of
// collection coll it moves, all at once.
type metaUpdateRecord struct {
	coll  uint32
	moves []metaMove
}

func (r *metaUpdateRecord) encode(dst []byte) []byte {
	dst = append(dst, recMetaUpdate)
	dst = binary.AppendUvarint(dst, uint64(r.coll))
	dst = binary.AppendUvarint(dst, uint64(len(r.moves)))
	for _, m := range r.moves {
		dst = appendString(dst, m.from)
		dst = appendString(dst, m.to)
	}
	return dst
}

// decodeMetaUpdate decodes a meta update record after its kind byte.
func decodeMetaUpdate(b []byte) (metaUpdateRecord, error) {
	d := recordDecoder{b: b}
	var r metaUpdateRecord
	r.coll = uint32(d.uvarint("collection"))
	r.moves = make([]metaMove, d.count("move count", 2))
	for i := range r.moves {
		r.moves[i].from = d.str("meta")
		r.moves[i].to = d.str("meta")
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	return r, d.err
}

// CheckMetaUpdate refuses, with MongoDB's codes and messages, an update of
// a time-series collection with options ts that is not a meta update:
// a replacement, no metaField, not multi, a filter or an operator on
// another field (InvalidOptions, 72). u is not changed.
func CheckMetaUpdate(ts *model.TimeSeriesOptions, u *Update) error {
	invalid := func(format string, args ...any) error {
		return mongoerr.New(mongoerr.InvalidOptions, format, args...)
	}
	switch {
	case u.Replacement != nil:
		return invalid("Cannot perform an update on a time-series collection using a replacement document")
	case u.Operators == nil:
		return mongoerr.New(mongoerr.BadValue, "an update holds either update operators or a replacement document")
	case ts.MetaField == "":
		return invalid("Cannot perform an update on a time-series collection that does not have a metaField")
	case !u.Multi:
		return invalid("Cannot perform a non-multi update on a time-series collection")
	case !u.Filter.RefersOnlyTo(ts.MetaField):
		return invalid("Cannot perform an update on a time-series collection when querying on a field that is not the metaField '%s'", ts.MetaField)
	}
	for _, p := range u.Operators.Paths() {
		if p != ts.MetaField && !strings.HasPrefix(p, ts.MetaField+".") {
			return invalid("Cannot perform an update on a time-series collection which updates a field that is not the metaField '%s'", ts.MetaField)
		}
	}
	return nil
}

// updateMeasurements is Update on a time-series collection c: a meta
// update (see above). Matched counts the measurements of the series the
// filter selects, Modified those that moved. A meta value the operators
// cannot make (a path through a non-document, an invalid value) refuses
// the whole update, and nothing changes.
func (db *DB) updateMeasurements(ctx context.Context, c *collection, u Update, now time.Time) (UpdateResult, error) {
	var res UpdateResult
	db.mu.RLock()
	ts := c.opts.TimeSeries
	db.mu.RUnlock()
	if err := CheckMetaUpdate(ts, &u); err != nil {
		return res, err
	}
	plan := planFilter(u.Filter, ts)
	if plan.empty {
		return res, nil
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := db.settlePending(); err != nil {
		return res, err
	}
	// A first look with writers let in: a refused update changes
	// nothing, and one that moves nothing needs no checkpoint.
	db.mu.RLock()
	if c.gone.Load() {
		db.mu.RUnlock()
		return res, notFound(c.name)
	}
	moves, matched, err := c.metaMoves(&plan, u.Operators, now)
	db.mu.RUnlock()
	if err != nil {
		return res, err
	}
	if len(moves) == 0 {
		res.Matched, err = db.seriesRows(c, matched)
		return res, err
	}
	var moved []seriesMove
	counted := false
	ch := &ckptChange{
		under: func() error {
			// Again, with writers excluded: the moves are those of the
			// series the log holds before the record.
			db.mu.RLock()
			if c.gone.Load() {
				db.mu.RUnlock()
				return notFound(c.name)
			}
			moves, matched, err = c.metaMoves(&plan, u.Operators, now)
			db.mu.RUnlock()
			if err != nil || len(moves) == 0 {
				return err
			}
			rec := metaUpdateRecord{coll: c.id, moves: moves}
			if !db.opts.ExternalLog {
				if _, err := db.wal.Append(rec.encode(nil)); err != nil {
					return db.diskErr(fmt.Errorf("timeseries: log update on %q: %w", c.name, err))
				}
			}
			db.mu.Lock()
			for _, s := range matched {
				res.Matched += s.memRows()
			}
			moved = db.moveSeries(c, &rec)
			for _, m := range moved {
				for _, b := range m.buckets {
					res.Modified += int64(b.rows())
				}
			}
			db.mu.Unlock()
			return nil
		},
		pre: func(b *pebble.Batch) error {
			n, err := db.moveStored(b, c, moved)
			if err != nil || counted {
				return err
			}
			counted = true
			res.Matched += n
			res.Modified += n
			// The matched series that keep their value.
			from := map[*series]bool{}
			for _, m := range moved {
				from[m.from] = true
			}
			var kept []*series
			for _, s := range matched {
				if !from[s] {
					kept = append(kept, s)
				}
			}
			n, err = db.storedSeriesRows(c, kept)
			res.Matched += n
			return err
		},
	}
	if err := db.checkpointWith(db.stop, ch); err != nil {
		if moved != nil {
			return res, fmt.Errorf("timeseries: update on %q is logged and made in memory; its stored buckets move with the next checkpoint, which a delete, TTL batch or merge pass makes first: %w", c.name, err)
		}
		return UpdateResult{}, err
	}
	return res, nil
}

// settlePending makes the stored part of the changes made in memory whose
// checkpoint did not write (pendingPre), with a checkpoint, before a
// delete, TTL batch, merge pass or meta update reads the stored buckets:
// until then, those of a series moved lie under the series it was moved
// from. The caller holds maintMu.
func (db *DB) settlePending() error {
	if len(db.pendingPre) == 0 {
		return nil
	}
	return db.checkpointLocked(db.stop)
}

// metaMoves returns the series of c that plan selects and the moves that
// ops make of them at now. DB.mu is held.
func (c *collection) metaMoves(plan *filterPlan, ops *document.Update, now time.Time) ([]metaMove, []*series, error) {
	ts := c.opts.TimeSeries
	var moves []metaMove
	matched := c.matchingSeries(plan, ts)
	for _, s := range matched {
		doc := document.Doc{}
		if s.metaKey != "" && s.metaKey != "null" {
			v, err := model.DecodeMetaKey(s.metaKey) // a copy of its own: Apply changes it
			if err != nil {
				return nil, nil, err
			}
			doc[ts.MetaField] = v
		}
		if _, err := ops.Apply(doc, now); err != nil {
			return nil, nil, err
		}
		key, err := model.CanonicalMeta(doc[ts.MetaField])
		if err == nil {
			err = model.ValidMetaKey(model.MetaKey(key))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("the new value of %q: %w", ts.MetaField, err)
		}
		if key != s.metaKey {
			moves = append(moves, metaMove{from: s.metaKey, to: key})
		}
	}
	return moves, matched, nil
}

// seriesMove is a move made in memory: series from gave its buckets in
// memory to series to.
type seriesMove struct {
	from, to *series
	buckets  []*memBucket
}

// moveSeries makes the moves of r in memory, all at once: the buckets in
// memory of every series moved from go to the series of their new value,
// made when c has none. A moved bucket is written by the next checkpoint
// under its new series (its snapshot under the old one goes: moveStored).
// DB.mu is held for writing.
func (db *DB) moveSeries(c *collection, r *metaUpdateRecord) []seriesMove {
	moved := make([]seriesMove, 0, len(r.moves))
	to := make([]string, 0, len(r.moves))
	for _, m := range r.moves {
		if from := c.series.get(m.from); from != nil {
			moved = append(moved, seriesMove{from: from, buckets: from.buckets})
			to = append(to, m.to)
		}
	}
	// Every series moved from is emptied before any takes buckets.
	for _, m := range moved {
		m.from.buckets = nil
		m.from.loseLast()
	}
	// Their measurements keep the ids made of the series they leave:
	// stored from now on (storeMadeIDs), in memory here and in Pebble by
	// moveStored.
	if len(moved) > 0 {
		if _, ok := c.nameIdx[idField]; !ok {
			c.addName(idField)
			c.dirty = true
		}
		c.fieldTypes[idField] |= 1 << model.KindObjectID
	}
	for i := range moved {
		mv := &moved[i]
		s := c.series.get(to[i])
		if s == nil {
			s = c.newSeries(db.mu.nextSeries, to[i])
			c.setSeriesTTL(s)
			db.mu.nextSeries++
			c.addSeries(s)
			db.seriesMem.Add(seriesMem(s))
		}
		mv.to = s
		s.loseLast() // it takes stored buckets too
		s.storedMax = max(s.storedMax, mv.from.storedMax)
		for _, b := range mv.buckets {
			b.dirty, b.snapshot, b.snapRows = true, false, 0
			// The ids made of the series moved from stay theirs: every
			// row's, so its frozen rows are made plain.
			d := b.thaw()
			if added, changed := storeMadeIDs(&b.cols, mv.from.id); changed {
				b.changed()
				b.mem += added
				d += added
			}
			db.headMem.Add(d)
		}
		s.buckets = append(s.buckets, mv.buckets...)
		c.markHot(s)
		if len(c.rollups) > 0 {
			// Both series' windows change, at any time they hold.
			var now time.Time
			db.markRollups(c, mv.from, math.MinInt64, math.MaxInt64, &now)
			db.markRollups(c, s, math.MinInt64, math.MaxInt64, &now)
			db.wakeRollups()
		}
	}
	return moved
}

// moveStored puts into batch the moves of the buckets Pebble holds for
// the series moved: each stored bucket goes under its new series (one
// with a copy in memory is dropped: the checkpoint writes that copy), and
// the open-bucket snapshots of the series moved from go. It returns the
// measurements it moved. The caller holds maintMu: no other change
// reaches the stored buckets meanwhile.
func (db *DB) moveStored(batch *pebble.Batch, c *collection, moved []seriesMove) (int64, error) {
	var n int64
	db.mu.RLock()
	rw := bucketRewriter{names: c.names} // append-only: this slice stays valid
	db.mu.RUnlock()
	for _, m := range moved {
		inMem := make(map[uint64]bool, len(m.buckets))
		for _, b := range m.buckets {
			inMem[b.id] = true
		}
		p := seriesPrefix(spaceBucket, c.id, m.from.id)
		err := db.scan(p, prefixEnd(p), func(k, v []byte) error {
			kp, err := parseBucketKey(k)
			if err != nil {
				return err
			}
			if !inMem[kp.id] {
				rows, _, _, err := bucket.Peek(v)
				if err != nil {
					return fmt.Errorf("series %d bucket %d: %w", m.from.id, kp.id, err)
				}
				n += int64(rows)
				if v, err = rw.withMadeIDs(v, m.from.id, kp.id); err != nil {
					return err
				}
				if err := batch.Set(bucketKey(spaceBucket, c.id, m.to.id, kp.minTime, kp.id), v, nil); err != nil {
					return err
				}
			}
			return batch.Delete(k, nil)
		})
		if err != nil {
			return 0, err
		}
		p = seriesPrefix(spaceOpen, c.id, m.from.id)
		if err := db.scan(p, prefixEnd(p), func(k, _ []byte) error { return batch.Delete(k, nil) }); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// seriesRows returns the measurements of the series list of c holds, in
// memory and stored. The caller holds maintMu.
func (db *DB) seriesRows(c *collection, list []*series) (int64, error) {
	db.mu.RLock()
	var n int64
	for _, s := range list {
		n += s.memRows()
	}
	db.mu.RUnlock()
	m, err := db.storedSeriesRows(c, list)
	return n + m, err
}

// storedSeriesRows returns the measurements of the stored buckets of the
// series of list that have no copy in memory. The caller holds maintMu.
func (db *DB) storedSeriesRows(c *collection, list []*series) (int64, error) {
	var n int64
	for _, s := range list {
		db.mu.RLock()
		inMem := make(map[uint64]bool, len(s.buckets))
		for _, b := range s.buckets {
			inMem[b.id] = true
		}
		db.mu.RUnlock()
		p := seriesPrefix(spaceBucket, c.id, s.id)
		err := db.scan(p, prefixEnd(p), func(k, v []byte) error {
			kp, err := parseBucketKey(k)
			if err != nil || inMem[kp.id] {
				return err
			}
			rows, _, _, err := bucket.Peek(v)
			n += int64(rows)
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// memRows returns the measurements of s in memory. DB.mu is held.
func (s *series) memRows() int64 {
	var n int64
	for _, b := range s.buckets {
		n += int64(b.rows())
	}
	return n
}

// replayMetaUpdate makes, during recovery, the meta update r logged at
// pos: in memory, then with a checkpoint that starts replay after it.
func (db *DB) replayMetaUpdate(r *metaUpdateRecord, pos wal.Pos) error {
	c := db.mu.byID[r.coll]
	if c == nil || c.opts.TimeSeries == nil {
		return nil // dropped after the update
	}
	for _, m := range r.moves {
		if err := model.ValidMetaKey(model.MetaKey(m.to)); err != nil {
			return fmt.Errorf("%w: log record at %v: %v", ErrCorrupt, pos, err)
		}
	}
	var moved []seriesMove
	err := db.checkpointWith(nil, &ckptChange{
		under: func() error {
			db.mu.Lock()
			moved = db.moveSeries(c, r)
			db.mu.Unlock()
			return nil
		},
		pre: func(b *pebble.Batch) error {
			_, err := db.moveStored(b, c, moved)
			return err
		},
		seg: pos.Segment + 1,
	})
	if errors.Is(err, errNoRoom) {
		return fmt.Errorf("timeseries: replay the update at %v: %w", pos, err)
	}
	return err
}
