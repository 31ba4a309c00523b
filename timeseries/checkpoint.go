package timeseries

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
)

// state of the store kept under keyCheckpoint.
type checkpointState struct {
	segment    uint64
	nextColl   uint32
	nextSeries uint64
	nextBucket uint64
}

func (s *checkpointState) encode() []byte {
	b := binary.AppendUvarint(nil, s.segment)
	b = binary.AppendUvarint(b, uint64(s.nextColl))
	b = binary.AppendUvarint(b, s.nextSeries)
	return binary.AppendUvarint(b, s.nextBucket)
}

func decodeCheckpointState(b []byte) (checkpointState, error) {
	d := recordDecoder{b: b}
	s := checkpointState{segment: d.uvarint("segment"), nextColl: uint32(d.uvarint("next collection")),
		nextSeries: d.uvarint("next series"), nextBucket: d.uvarint("next bucket")}
	return s, d.err
}

// run is the checkpointer: one goroutine, woken by the ticker or by wake.
func (db *DB) run() {
	defer close(db.done)
	t := time.NewTicker(db.opts.CheckpointInterval)
	defer t.Stop()
	var pause time.Duration // after a failed checkpoint, before the next
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
		case <-db.wake:
		}
		if err := db.checkpoint(db.stop); errors.Is(err, errNoRoom) {
			db.log.Warn("checkpoint skipped", "err", err)
			continue
		} else if errors.Is(err, errFlushAbandoned) {
			return // closing: Close's final checkpoint flushes the store
		} else if err != nil {
			// Writers wake the checkpointer at every insert past the
			// log's threshold: a failure that lasts (the store's
			// filesystem failing) is retried, and logged, at most
			// once a second, then once every 30 s.
			pause = min(max(2*pause, time.Second), 30*time.Second)
			db.log.Error("checkpoint failed", "err", err, "retryIn", pause)
			select {
			case <-db.stop:
				return
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		select {
		case <-db.stop:
			return // closing: no merge pass to wait for
		default:
		}
		// The small buckets the checkpoint wrote are merged with their
		// neighbours (merge.go); nothing to merge costs one load.
		if err := db.mergeBuckets(context.Background(), db.stop, false); errors.Is(err, errNoRoom) {
			db.log.Warn("bucket merge skipped", "err", err)
		} else if err != nil {
			db.log.Error("bucket merge failed", "err", err)
		}
	}
}

func (db *DB) wakeCheckpointer() {
	select {
	case db.wake <- struct{}{}:
	default:
	}
}

// Checkpoint writes every bucket in memory to Pebble, makes it durable and
// truncates the log. It runs by itself in the background; tests and
// benchmarks call it to reach a known state.
func (db *DB) Checkpoint() error {
	if db.closed.Load() {
		return ErrClosed
	}
	return db.checkpoint(db.stop)
}

// Flush writes everything to disk (Checkpoint), merges small sealed
// buckets (MergeBuckets) and compacts the store, so that its size on disk
// is settled.
func (db *DB) Flush() error {
	if err := db.Checkpoint(); err != nil {
		return err
	}
	if err := db.MergeBuckets(context.Background()); err != nil {
		return err
	}
	return db.pdb.Compact([]byte{0x00}, []byte{0xff}, true)
}

type ckptBucket struct {
	b      *memBucket
	series uint64
	// cols is what was captured: a sealed bucket's own columns, which
	// nothing changes in place (captureSealed), or an open one's headers
	// captured into the checkpoint's ckptCapture.
	cols   bucket.Columns
	refs   []uint32 // the fields' indexes in the collection's name table
	coll   uint32
	sealed bool
}

// ckptCapture holds what a checkpoint captured of its open buckets in a
// few large slices, sized before (a fleet's checkpoint captures a million
// small buckets), and the name references of all its buckets.
type ckptCapture struct {
	fields  []bucket.Column
	refs    []uint32
	present []uint64
}

// A checkpoint of minParallelEncode buckets or more encodes them on up to
// maxEncoders goroutines, encodeWindow buckets at a time, then writes them
// to its batch in order. At an hour's turn a fleet's checkpoint encodes its full
// buckets of the hour while writers wait for the memory they hold (~0.9 s
// for 10k iot sensors on one core).
const (
	minParallelEncode = 1024
	encodeWindow      = 4096
	maxEncoders       = 4
)

// parallelEncoder encodes a window of a checkpoint's buckets in parallel.
type parallelEncoder struct {
	encs []bucket.Encoder
	bufs [][]byte // each encoder's output, reused across windows
	out  [][]byte // the window's encoded buckets, into bufs
	errs []error
}

func newParallelEncoder(n int) *parallelEncoder {
	return &parallelEncoder{
		encs: make([]bucket.Encoder, n),
		bufs: make([][]byte, n),
		out:  make([][]byte, encodeWindow),
		errs: make([]error, n),
	}
}

// encode encodes ws (at most encodeWindow) into pe.out[:len(ws)].
func (pe *parallelEncoder) encode(ws []ckptBucket) error {
	n := len(pe.encs)
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			// One buffer per encoder: a bucket's bytes are appended, and
			// out keeps a slice of them (slices into an array outgrown
			// stay valid: nothing writes the old array again).
			buf := pe.bufs[k][:0]
			for i := k; i < len(ws); i += n {
				at := len(buf)
				var err error
				if buf, err = pe.encs[k].EncodeRefs(buf, &ws[i].cols, ws[i].refs); err != nil {
					pe.errs[k] = fmt.Errorf("timeseries: encode bucket %d: %w", ws[i].b.id, err)
					return
				}
				pe.out[i] = buf[at:len(buf):len(buf)]
			}
			pe.bufs[k] = buf
		}(k)
	}
	wg.Wait()
	return errors.Join(pe.errs...)
}

// checkpoint writes a checkpoint; it gives up waiting for the store's
// flush when abort is closed (nil: never). It is skipped with errNoRoom,
// before anything is captured, when the filesystem has less free space
// than it may write: the log's bytes (what the buckets and documents
// written since the last checkpoint amount to) plus the buckets in memory
// (open ones are written whole), plus checkpointMargin. A Pebble flush
// that meets a full disk retries forever and a failed manifest write
// stops the process, so the checkpoint must not start one it cannot
// finish; the log keeps every write until a later checkpoint succeeds.
func (db *DB) checkpoint(abort <-chan struct{}) error {
	if db.readOnly {
		return nil
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	return db.checkpointLocked(abort)
}

// capturePoint is a checkpoint capture: when it ran and the writeSeq
// then.
type capturePoint struct {
	at  time.Time
	seq uint64
}

// idleSeq records a checkpoint capture now and returns the writeSeq of the
// newest earlier capture at least a CheckpointInterval old (0 when there
// is none): open buckets last written at or before it are idle. DB.mu is
// held for writing.
func (db *DB) idleSeq() uint64 {
	now := db.opts.Now()
	var seq uint64
	keep := 0
	for i, p := range db.captures {
		if now.Sub(p.at) >= db.opts.CheckpointInterval {
			seq, keep = p.seq, i
		}
	}
	db.captures = append(db.captures[:0], db.captures[keep:]...)
	db.captures = append(db.captures, capturePoint{at: now, seq: db.writeSeq})
	return seq
}

// checkpointNeed is the free space a checkpoint needs now (see
// checkpoint).
func (db *DB) checkpointNeed() int64 {
	return db.wal.Size() + db.headMem.Load() + checkpointMargin
}

// roomForCheckpoint reports whether the filesystem has the space a
// checkpoint needs now (true when it cannot tell).
func (db *DB) roomForCheckpoint() bool {
	free := db.freeSpace()
	return free < 0 || free >= db.checkpointNeed()
}

// checkpointLocked is checkpoint with maintMu held by the caller.
func (db *DB) checkpointLocked(abort <-chan struct{}) (err error) {
	if db.readOnly {
		return nil
	}
	// TTL passes take maintMu too: none runs until this checkpoint is done,
	// and what earlier ones removed is in it.
	expired := db.expiredUnflushed.Swap(false)
	defer func() {
		if err != nil && expired {
			db.expiredUnflushed.Store(true)
		}
	}()

	if free, need := db.freeSpace(), db.checkpointNeed(); free >= 0 && free < need {
		db.noRoom.Store(true)
		return fmt.Errorf("%w in %s: %s free, it may write %s", errNoRoom, db.opts.Dir, mib(free), mib(need))
	}
	// A store that keeps failing is not given the checkpoint's writes: its
	// memtables cannot be flushed, and once they are full a write to it
	// waits for a flush that does not come.
	if err := db.storeFailure(); err != nil {
		return err
	}

	// Capture, with writers excluded, everything the log before the cut
	// holds.
	db.cutMu.Lock()
	seg, err := db.wal.Cut()
	if err != nil {
		db.cutMu.Unlock()
		return err
	}
	var work []ckptBucket
	type seriesRec struct {
		key  []byte
		meta string
		s    *series
	}
	var newSeries []seriesRec
	var catalog [][2][]byte
	var catalogColls []*collection
	var catalogCounts [][2]int64 // their ckptCount and ckptBuckets before
	db.mu.Lock()
	db.sealedSince.Store(0) // what is sealed now, the capture takes
	idle := db.idleSeq()
	// A bucket or so per hot series: sized once, not grown by doubling
	// (a fleet's checkpoint captures a million buckets).
	// The capture's slices too: they stay in place, so that the slices
	// of them taken for each bucket need no copy.
	// Only open buckets' headers are captured (sealed ones are taken as
	// they are); every bucket's fields get name references.
	hot, fields, openFields, present := 0, 0, 0, 0
	for _, c := range db.byID {
		hot += len(c.hot)
		for _, s := range c.hot {
			for _, b := range s.buckets {
				fields += len(b.cols.Fields)
				if !b.sealed {
					openFields += len(b.cols.Fields)
					present += b.presenceWords()
				}
			}
		}
	}
	work = make([]ckptBucket, 0, hot)
	cp := ckptCapture{
		fields:  make([]bucket.Column, 0, openFields),
		refs:    make([]uint32, 0, fields),
		present: make([]uint64, 0, present),
	}
	for _, c := range db.byID {
		for _, s := range c.hot {
			if !s.persisted {
				newSeries = append(newSeries, seriesRec{seriesKey(c.id, s.id), s.metaKey, s})
			}
			for _, b := range s.buckets {
				if !b.sealed && !b.dirty && b.snapshot {
					if idle == 0 || b.lastWrite > idle {
						continue
					}
					// Idle: its snapshot is durable and it was not
					// written for a checkpoint interval. Sealed, it is
					// written out below and leaves memory; a later
					// measurement opens a new bucket, which the merge
					// pass joins to it.
					db.seal(b)
					db.stats.sealedIdle.Add(1)
				}
				w := ckptBucket{b: b, coll: c.id, series: s.id, sealed: b.sealed}
				if b.sealed {
					w.cols = b.captureSealed()
				} else {
					at := len(cp.fields)
					w.cols.Times, cp.fields, cp.present = b.appendCapture(cp.fields, cp.present)
					w.cols.Fields = cp.fields[at:len(cp.fields):len(cp.fields)]
				}
				at := len(cp.refs)
				cp.refs = c.nameRefs(cp.refs, &w.cols)
				w.refs = cp.refs[at:len(cp.refs):len(cp.refs)]
				work = append(work, w)
				b.dirty = false
			}
		}
		if c.dirty {
			catalogCounts = append(catalogCounts, [2]int64{c.ckptCount, c.ckptBuckets})
			c.ckptCount, c.ckptBuckets = c.count, c.buckets
			rec, err := c.record()
			if err != nil {
				db.mu.Unlock()
				db.cutMu.Unlock()
				return err
			}
			catalog = append(catalog, [2][]byte{catalogKey(c.name), rec})
			catalogColls = append(catalogColls, c)
			c.dirty = false
		}
	}
	st := checkpointState{segment: seg, nextColl: db.nextColl, nextSeries: db.nextSeries, nextBucket: db.nextBucket}
	db.mu.Unlock()
	db.cutMu.Unlock()

	// Encode and write outside the locks. Until the batch is applied, a
	// failure leaves what was captured dirty again, for the next
	// checkpoint, and the catalog counts those of the stored buckets (a
	// delete or TTL batch writes them before the next checkpoint); once
	// applied, it is in Pebble's memtable, which the next successful flush
	// makes durable.
	applied := false
	defer func() {
		if applied {
			return
		}
		db.mu.Lock()
		for i := range work {
			work[i].b.dirty = true
		}
		for i, c := range catalogColls {
			c.dirty = true
			c.ckptCount, c.ckptBuckets = catalogCounts[i][0], catalogCounts[i][1]
		}
		db.mu.Unlock()
	}()
	batch := db.pdb.NewBatch()
	defer batch.Close()
	var enc bucket.Encoder
	var buf []byte
	for _, sr := range newSeries {
		if err := batch.Set(sr.key, []byte(sr.meta), nil); err != nil {
			return err
		}
	}
	var pe *parallelEncoder
	if len(work) >= minParallelEncode && runtime.GOMAXPROCS(0) > 1 {
		pe = newParallelEncoder(min(runtime.GOMAXPROCS(0), maxEncoders))
	}
	for i := range work {
		w := &work[i]
		b := w.b
		if pe != nil {
			if i%encodeWindow == 0 {
				if err := pe.encode(work[i:min(i+encodeWindow, len(work))]); err != nil {
					return err
				}
			}
			buf = pe.out[i%encodeWindow]
		} else if buf, err = enc.EncodeRefs(buf[:0], &w.cols, w.refs); err != nil {
			return fmt.Errorf("timeseries: encode bucket %d: %w", b.id, err)
		}
		if w.sealed {
			if err := batch.Set(bucketKey(spaceBucket, w.coll, w.series, b.minTime, b.id), buf, nil); err != nil {
				return err
			}
			if b.snapshot {
				if err := batch.Delete(bucketKey(spaceOpen, w.coll, w.series, b.minTime, b.id), nil); err != nil {
					return err
				}
			}
		} else if err := batch.Set(bucketKey(spaceOpen, w.coll, w.series, b.minTime, b.id), buf, nil); err != nil {
			return err
		}
	}
	for _, kv := range catalog {
		if err := batch.Set(kv[0], kv[1], nil); err != nil {
			return err
		}
	}
	if err := batch.Set(keyCheckpoint, st.encode(), nil); err != nil {
		return err
	}
	if db.checkpointWrite != nil {
		if err := db.checkpointWrite(); err != nil {
			return err
		}
	}
	if err := db.pdb.Apply(batch, pebble.NoSync); err != nil {
		return db.diskErr(err)
	}
	applied = true
	if err := db.flushStore(abort); err != nil {
		return err
	}
	db.noRoom.Store(false)

	// The checkpoint is durable: drop sealed buckets from memory.
	now := db.opts.Now()
	db.mu.Lock()
	for _, sr := range newSeries {
		sr.s.persisted = true
	}
	var freed int64
	for i := range work {
		w := &work[i]
		b := w.b
		if !w.sealed {
			b.snapshot, b.snapRows = true, len(w.cols.Times)
			continue
		}
		c := db.byID[w.coll]
		if c == nil {
			continue
		}
		s := c.seriesOf(w.series)
		if s == nil {
			continue
		}
		// Reads see the stored copy from now on (the bucket leaves
		// memory below, under the same lock).
		s.storedMax = max(s.storedMax, b.maxT)
		if db.smallBucket(b) {
			if !c.markMerge(s.id, b.minTime, now) && db.stats.marksDropped.Add(1) == 1 {
				db.opts.Logger.Warn("merge marks full: small buckets stay unmerged", "collection", c.name, "marks", maxMarks)
			}
			db.mergePending.Store(true)
		}
		for j, x := range s.buckets {
			if x == b {
				s.buckets = append(s.buckets[:j], s.buckets[j+1:]...)
				freed += b.mem
				break
			}
		}
	}
	db.headMem.Add(-freed)
	for _, c := range db.byID {
		c.coolHot()
	}
	db.mu.Unlock()
	db.stats.checkpoints.Add(1)
	return db.wal.Truncate(seg)
}
