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

// Flush writes everything to disk (Checkpoint, with the open buckets
// encoded as buckets rather than as their frozen rows), merges small
// sealed buckets (MergeBuckets) and compacts the store, so that its size
// on disk is settled.
func (db *DB) Flush() error {
	if db.closed.Load() {
		return ErrClosed
	}
	if !db.readOnly {
		db.maintMu.Lock()
		err := db.checkpointWith(db.stop, &ckptChange{encodeOpen: true})
		db.maintMu.Unlock()
		if err != nil {
			return err
		}
	}
	if err := db.MergeBuckets(context.Background()); err != nil {
		return err
	}
	return db.pdb.Compact([]byte{0x00}, []byte{0xff}, true)
}

type ckptBucket struct {
	b      *memBucket
	series uint64
	// cols is what was captured: a sealed bucket's own plain columns,
	// which nothing changes in place (nothing appends to a sealed bucket,
	// and every other change replaces its slices), or an open one's
	// headers captured into the checkpoint's ckptCapture.
	cols bucket.Columns
	// frozen and frozenRows are the bucket's frozen rows, before cols'
	// or those of open (cols then holds none: the bucket's column list,
	// which nothing writes to).
	frozen     []byte
	frozenRows int
	open       []byte
	openRows   int
	refs       []uint32 // the fields' indexes in the collection's name table
	coll       uint32
	sealed     bool
	unordered  bool
	minT, maxT int64
	// encodeOpen: an open bucket encoded as a bucket, not written as its
	// frozen rows (ckptChange.encodeOpen).
	encodeOpen bool
}

// encode appends what w writes to dst: a sealed bucket encoded, an open
// one's snapshot (its frozen rows copied, its plain ones frozen: an open
// bucket is written again at every checkpoint while it fills).
func (w *ckptBucket) encode(enc *bucket.Encoder, dst []byte, scratch *encodeScratch) ([]byte, error) {
	if !w.sealed && !w.encodeOpen {
		return bucket.AppendSnapshot(dst, w.minT, w.maxT, w.refs, w.frozen, w.frozenRows, w.tail(scratch)), nil
	}
	return enc.EncodeRefs(dst, w.columns(scratch), w.refs)
}

// rows returns the rows w writes.
func (w *ckptBucket) rows() int { return w.frozenRows + w.openRows + len(w.cols.Times) }

// tail returns the rows of w after its frozen ones: its open rows decoded
// into scratch, or its plain columns.
func (w *ckptBucket) tail(scratch *encodeScratch) *bucket.Columns {
	if w.openRows == 0 {
		return &w.cols
	}
	decodeOpenRows(&scratch.open, w.cols.Fields, w.open, w.openRows)
	return &scratch.open
}

// columns returns the rows w encodes: its frozen rows decoded, and put in
// time order for a sealed bucket (a stored bucket's rows are), both into
// scratch, which the caller reuses from bucket to bucket.
func (w *ckptBucket) columns(scratch *encodeScratch) *bucket.Columns {
	cols := w.tail(scratch)
	if w.frozenRows > 0 {
		thawColumnsInto(&scratch.thaw, w.frozen, w.frozenRows, cols, nil)
		cols = &scratch.thaw
	}
	if w.sealed && w.unordered {
		cols = sortedColumnsInto(&scratch.sorted, cols, &scratch.perm)
	}
	return cols
}

// encodeScratch is what an encoder of a checkpoint's buckets reuses from
// bucket to bucket: their frozen rows decoded, the rows of a bucket that
// came out of order sorted, and their order. A fleet's checkpoint at an
// hour's turn, or its last, sorts thousands of buckets with late rows:
// made anew each time, their sorted copies were 140 MB of garbage at the
// end of an iot load of 10,000 sensors, the peak of its memory
// (docs/benchmarks.md, "A bucket sealed a quarter of a span past").
type encodeScratch struct {
	thaw, sorted, open bucket.Columns
	perm               []int32
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
	encs    []bucket.Encoder
	scratch []encodeScratch // each encoder's
	bufs    [][]byte        // each encoder's output, reused across windows
	out     [][]byte        // the window's encoded buckets, into bufs
	errs    []error
}

func newParallelEncoder(n int) *parallelEncoder {
	return &parallelEncoder{
		encs:    make([]bucket.Encoder, n),
		scratch: make([]encodeScratch, n),
		bufs:    make([][]byte, n),
		out:     make([][]byte, encodeWindow),
		errs:    make([]error, n),
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
				if buf, err = ws[i].encode(&pe.encs[k], buf, &pe.scratch[k]); err != nil {
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
// before anything is written, when the filesystem has less free space than
// it will write: its batch, measured once encoded, plus a quarter and
// checkpointMargin (batchNeed). The room measured is remembered, so that
// writers waiting for memory know when space enough is free again
// (roomForCheckpoint), and the next checkpoint captures nothing until it
// is.
func (db *DB) checkpoint(abort <-chan struct{}) error {
	if db.readOnly {
		return nil
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	return db.checkpointLocked(abort)
}

// ckptChange is a change made with a checkpoint, in the same Pebble batch:
// a change whose log record must never be replayed over its own result
// (a meta update, metaupdate.go). under makes it in memory, with writers
// excluded, before the capture; pre puts its writes to Pebble into the
// batch, before the checkpoint's own. Once the batch is durable, replay
// starts after the change's record; until then, before it, with Pebble as
// it was.
type ckptChange struct {
	under func() error
	pre   func(*pebble.Batch) error
	// seg, when not 0, is the log segment replay starts from after this
	// checkpoint, instead of a cut of the log: a change replayed during
	// recovery, whose record is the last of segment seg-1.
	seg uint64
	// encodeOpen writes every open bucket, written since the last
	// checkpoint or snapshotted as its frozen rows, as an encoded bucket:
	// a few bytes a row fewer on disk, for a compaction (Flush).
	encodeOpen bool
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
	for i, p := range db.mu.captures {
		if now.Sub(p.at) >= db.opts.CheckpointInterval {
			seq, keep = p.seq, i
		}
	}
	db.mu.captures = append(db.mu.captures[:0], db.mu.captures[keep:]...)
	db.mu.captures = append(db.mu.captures, capturePoint{at: now, seq: db.mu.writeSeq})
	return seq
}

// checkpointNeed is the free space the next checkpoint needs, as far as
// it is known before it runs: what the last one skipped for lack of room
// measured it would write (roomNeed), else nothing beyond
// checkpointMargin (the checkpoint measures what it writes before it
// writes it).
func (db *DB) checkpointNeed() int64 {
	return max(db.roomNeed.Load(), checkpointMargin)
}

// roomForCheckpoint reports whether the filesystem has the space the next
// checkpoint needs (true when it cannot tell).
func (db *DB) roomForCheckpoint() bool {
	free := db.freeSpace()
	return free < 0 || free >= db.checkpointNeed()
}

// batchNeed is the free space writing a checkpoint batch of n bytes
// needs: the table its flush writes (level 0 is not compressed, so about
// the batch), a quarter more for the table's index and what the first
// compaction writes before it deletes, and checkpointMargin.
func batchNeed(n int) int64 { return int64(n) + int64(n)/4 + checkpointMargin }

// checkpointLocked is checkpoint with maintMu held by the caller: capture
// (writers excluded), encode into one Pebble batch, check the room for
// it, write it, flush it, and let go of what it made durable.
func (db *DB) checkpointLocked(abort <-chan struct{}) (err error) {
	return db.checkpointWith(abort, nil)
}

// checkpointWith is checkpointLocked making change ch (nil: none). An
// error before ch.under ran leaves ch unmade; after, ch.under's change is
// made in memory and, if the batch was not applied, ch.pre's writes are
// kept for the next checkpoints (pendingPre).
func (db *DB) checkpointWith(abort <-chan struct{}, ch *ckptChange) (err error) {
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
	// Nothing is captured (the log is not even cut) without
	// checkpointMargin free, nor, after one was skipped for lack of room,
	// until the room it measured is free.
	if free, need := db.freeSpace(), db.checkpointNeed(); free >= 0 && free < need {
		db.noRoom.Store(true)
		return fmt.Errorf("%w in %s: %s free, it will write %s", errNoRoom, db.opts.Dir, mib(free), mib(need))
	}
	// A store that keeps failing is not given the checkpoint's writes: its
	// memtables cannot be flushed, and once they are full a write to it
	// waits for a flush that does not come.
	if err := db.storeFailure(); err != nil {
		return err
	}
	run, err := db.captureCheckpoint(ch)
	if err != nil {
		return err
	}
	// Until the batch is applied, a failure leaves what was captured dirty
	// again, for the next checkpoint, and the catalog counts those of the
	// stored buckets (a delete or TTL batch writes them before the next
	// checkpoint); once applied, it is in Pebble's memtable, which the next
	// successful flush makes durable.
	applied := false
	defer func() {
		if !applied {
			db.uncapture(run)
		}
	}()
	if db.useTable(run) {
		err = db.ingestCheckpoint(run, db.pendingPre, abort)
		if errors.Is(err, errTableKind) {
			err = db.applyCheckpoint(run)
		}
		if err != nil {
			return err
		}
	} else if err := db.applyCheckpoint(run); err != nil {
		return err
	}
	applied = true
	db.pendingPre = nil
	db.mergeGen.Add(1) // a change may have moved stored buckets between series
	if err := db.flushStore(abort); err != nil {
		return err
	}
	db.roomNeed.Store(0)
	db.noRoom.Store(false)
	db.releaseCheckpoint(run)
	db.stats.checkpoints.Add(1)
	if db.recovering {
		return nil // recover truncates the log once replay is done
	}
	return db.wal.Truncate(run.st.segment)
}

// applyCheckpoint writes what run captured, and the writes of the
// pending pre functions, as one batch (encodeCheckpoint) applied to the
// store's memtable, which the flush after it makes durable.
func (db *DB) applyCheckpoint(run *ckptRun) error {
	batch, err := db.encodeCheckpoint(run, db.pendingPre)
	if err != nil {
		return err
	}
	defer batch.Close()
	// What the checkpoint writes is measured, not guessed: a Pebble flush
	// that meets a full disk retries forever and a failed manifest write
	// stops the process, so the checkpoint must not start one it cannot
	// finish; the log keeps every write until a later checkpoint succeeds.
	if free, need := db.freeSpace(), batchNeed(batch.Len()); free >= 0 && free < need {
		return db.skipForRoom(free, need)
	}
	if db.hooks.checkpointWrite != nil {
		if err := db.hooks.checkpointWrite(); err != nil {
			return err
		}
	}
	if err := db.pdb.Apply(batch, pebble.NoSync); err != nil {
		return db.diskErr(err)
	}
	return nil
}

// skipForRoom skips a checkpoint that needs need bytes free, free
// being free: the room it measured is remembered (roomNeed), so that no
// checkpoint captures again, and no writer waiting for memory waits for
// one, until that much is free.
func (db *DB) skipForRoom(free, need int64) error {
	db.roomNeed.Store(need)
	db.noRoom.Store(true)
	return fmt.Errorf("%w in %s: %s free, it will write %s", errNoRoom, db.opts.Dir, mib(free), mib(need))
}

// ckptRun is what a checkpoint captured, from the capture to the release.
type ckptRun struct {
	st            checkpointState
	work          []ckptBucket
	cp            ckptCapture // backs work's open columns and name references
	newSeries     []seriesRec
	catalog       [][2][]byte
	catalogColls  []*collection
	catalogCounts [][2]int64 // their ckptCount and ckptBuckets before
	// rollupMarks writes the rollups' marks as of the capture.
	rollupMarks func(*pebble.Batch) error
	// batchSize is the size the batch was made at (sizedBatch); 0 when
	// it started small and grew.
	batchSize int
}

// seriesRec is a series a checkpoint writes for the first time.
type seriesRec struct {
	key  []byte
	meta string
	s    *series
}

// captureCheckpoint cuts the log and captures, with writers excluded,
// everything the log before the cut holds: every sealed bucket, every open
// bucket that changed (a prefix of its columns that later appends cannot
// touch), new series and changed catalog records. No encoding happens
// under the locks.
func (db *DB) captureCheckpoint(ch *ckptChange) (*ckptRun, error) {
	db.cutMu.Lock()
	defer db.cutMu.Unlock()
	if ch != nil && ch.under != nil {
		if err := ch.under(); err != nil {
			return nil, err
		}
		if ch.pre != nil {
			// Made in memory: its Pebble part goes into this checkpoint's
			// batch, or the next one's.
			db.pendingPre = append(db.pendingPre, ch.pre)
		}
	}
	var seg uint64
	var err error
	if ch != nil && ch.seg != 0 {
		seg = ch.seg
	} else if seg, err = db.wal.Cut(); err != nil {
		return nil, err
	}
	run := &ckptRun{}
	db.mu.Lock()
	defer db.mu.Unlock()
	db.sealedSince.Store(0)  // what is sealed now, the capture takes
	db.keysRelogged.Store(0) // and the series it makes durable
	idle := db.idleSeq()
	db.sizeCapture(run)
	for _, c := range db.mu.byID {
		for _, s := range c.hot {
			if !s.persisted {
				run.newSeries = append(run.newSeries, seriesRec{seriesKey(c.id, s.id), s.metaKey, s})
			}
			for _, b := range s.buckets {
				encodeOpen := ch != nil && ch.encodeOpen && !b.sealed
				if !b.sealed && !b.dirty && b.snapshot && !(encodeOpen && b.snapFrozen) {
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
				w := run.cp.capture(c, s, b)
				w.encodeOpen = encodeOpen && !b.sealed
				run.work = append(run.work, w)
				b.dirty = false
			}
		}
		if c.dirty {
			run.catalogCounts = append(run.catalogCounts, [2]int64{c.ckptCount, c.ckptBuckets})
			c.ckptCount, c.ckptBuckets = c.count, c.buckets
			rec, err := c.record()
			if err != nil {
				c.ckptCount, c.ckptBuckets = run.catalogCounts[len(run.catalogCounts)-1][0], run.catalogCounts[len(run.catalogCounts)-1][1]
				run.catalogCounts = run.catalogCounts[:len(run.catalogCounts)-1]
				db.uncaptureLocked(run)
				return nil, err
			}
			run.catalog = append(run.catalog, [2][]byte{catalogKey(c.name), rec})
			run.catalogColls = append(run.catalogColls, c)
			c.dirty = false
		}
	}
	run.st = checkpointState{segment: seg, nextColl: db.mu.nextColl, nextSeries: db.mu.nextSeries, nextBucket: db.mu.nextBucket}
	run.rollupMarks = db.captureRollupMarks()
	return run, nil
}

// sizeCapture sizes run's slices once, not by doubling (a fleet's
// checkpoint captures a million buckets): a bucket or so per hot series.
// The capture's slices stay in place, so that the slices of them taken
// for each bucket need no copy. Only open buckets' headers are captured
// (sealed ones are taken as they are); every bucket's fields get name
// references. DB.mu is held.
func (db *DB) sizeCapture(run *ckptRun) {
	hot, fields, openFields, present := 0, 0, 0, 0
	for _, c := range db.mu.byID {
		hot += len(c.hot)
		for _, s := range c.hot {
			for _, b := range s.buckets {
				fields += len(b.cols.Fields)
				if !b.sealed && len(b.cols.Times) > 0 {
					openFields += len(b.cols.Fields)
					present += b.presenceWords()
				}
			}
		}
	}
	run.work = make([]ckptBucket, 0, hot)
	run.cp = ckptCapture{
		fields:  make([]bucket.Column, 0, openFields),
		refs:    make([]uint32, 0, fields),
		present: make([]uint64, 0, present),
	}
}

// capture takes bucket b of series s of collection c into the checkpoint:
// a sealed bucket's own columns, an open one's headers into cp.
func (cp *ckptCapture) capture(c *collection, s *series, b *memBucket) ckptBucket {
	w := ckptBucket{b: b, coll: c.id, series: s.id, sealed: b.sealed, unordered: b.unordered,
		frozen: b.frozen[:len(b.frozen):len(b.frozen)], frozenRows: b.frozenRows, minT: b.minT, maxT: b.maxT,
		open: b.open[:len(b.open):len(b.open)], openRows: b.openRows}
	switch {
	case b.sealed:
		w.cols = b.cols
	case len(b.cols.Times) == 0:
		// No plain rows: the column list, which nothing writes to.
		w.cols.Fields = b.cols.Fields[:len(b.cols.Fields):len(b.cols.Fields)]
	default:
		at := len(cp.fields)
		w.cols.Times, cp.fields, cp.present = b.appendCapture(cp.fields, cp.present)
		w.cols.Fields = cp.fields[at:len(cp.fields):len(cp.fields)]
	}
	at := len(cp.refs)
	cp.refs = c.nameRefs(cp.refs, &w.cols)
	w.refs = cp.refs[at:len(cp.refs):len(cp.refs)]
	return w
}

// uncapture makes what run captured dirty again, for the next checkpoint,
// and gives the catalog records their counts before.
func (db *DB) uncapture(run *ckptRun) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.uncaptureLocked(run)
}

func (db *DB) uncaptureLocked(run *ckptRun) {
	for i := range run.work {
		run.work[i].b.dirty = true
	}
	for i, c := range run.catalogColls {
		c.dirty = true
		c.ckptCount, c.ckptBuckets = run.catalogCounts[i][0], run.catalogCounts[i][1]
	}
}

// encodeCheckpoint encodes what run captured into one Pebble batch, in
// order: series, sealed buckets under 0x03, open-bucket snapshots under
// 0x04, catalog records, and the checkpoint record naming the log segment
// of the cut. The caller closes the batch.
func (db *DB) encodeCheckpoint(run *ckptRun, pre []func(*pebble.Batch) error) (_ *pebble.Batch, err error) {
	var enc bucket.Encoder
	var scratch encodeScratch // reused, bucket after bucket
	var buf []byte
	var pe *parallelEncoder
	work := run.work
	if len(work) >= minParallelEncode && runtime.GOMAXPROCS(0) > 1 {
		pe = newParallelEncoder(min(runtime.GOMAXPROCS(0), maxEncoders))
		// The first window is encoded before the batch is made, which is
		// made at the size it measures (sizedBatch).
		if err := pe.encode(work[:min(encodeWindow, len(work))]); err != nil {
			return nil, err
		}
	}
	batch := db.pdb.NewBatch()
	if pe != nil {
		run.batchSize = run.sizedBatch(pe)
		batch = db.pdb.NewBatchWithSize(run.batchSize)
	}
	defer func() {
		if err != nil {
			batch.Close()
		}
	}()
	for _, p := range pre {
		if err := p(batch); err != nil {
			return nil, err
		}
	}
	for _, sr := range run.newSeries {
		if err := batch.Set(sr.key, []byte(sr.meta), nil); err != nil {
			return nil, err
		}
	}
	for i := range work {
		w := &work[i]
		b := w.b
		if pe != nil {
			if i%encodeWindow == 0 && i > 0 {
				if err := pe.encode(work[i:min(i+encodeWindow, len(work))]); err != nil {
					return nil, err
				}
			}
			buf = pe.out[i%encodeWindow]
		} else if buf, err = w.encode(&enc, buf[:0], &scratch); err != nil {
			return nil, fmt.Errorf("timeseries: encode bucket %d: %w", b.id, err)
		}
		if w.sealed {
			if err := batch.Set(bucketKey(spaceBucket, w.coll, w.series, b.minTime, b.id), buf, nil); err != nil {
				return nil, err
			}
			if b.snapshot {
				if err := batch.Delete(bucketKey(spaceOpen, w.coll, w.series, b.minTime, b.id), nil); err != nil {
					return nil, err
				}
			}
		} else if err := batch.Set(bucketKey(spaceOpen, w.coll, w.series, b.minTime, b.id), buf, nil); err != nil {
			return nil, err
		}
	}
	for _, kv := range run.catalog {
		if err := batch.Set(kv[0], kv[1], nil); err != nil {
			return nil, err
		}
	}
	if run.rollupMarks != nil {
		if err := run.rollupMarks(batch); err != nil {
			return nil, err
		}
	}
	if err := batch.Set(keyCheckpoint, run.st.encode(), nil); err != nil {
		return nil, err
	}
	return batch, nil
}

// sizedBatch is about the bytes of run's batch once pe has encoded the
// first window of its buckets, a little more rather than less: the batch
// is made at that size once instead of grown by doubling, which copies it
// and leaves it up to twice its bytes (a fleet's checkpoint at the end of
// a load writes tens of megabytes; a copy held three times that for a
// moment). The keys and records are counted; the buckets of the first
// window are measured, and the others' bytes are their frozen and plain
// rows' (bucketEstimate) scaled as the first window's were: encoding
// shrinks frozen rows by a factor that depends on the data (about three
// for a fleet's sensor readings).
func (run *ckptRun) sizedBatch(pe *parallelEncoder) int {
	n := 1024
	for _, sr := range run.newSeries {
		n += len(sr.key) + len(sr.meta) + batchEntryOverhead
	}
	for _, kv := range run.catalog {
		n += len(kv[0]) + len(kv[1]) + batchEntryOverhead
	}
	first := min(encodeWindow, len(run.work))
	measured, estimated, rest := 0, 0, 0
	for i := range run.work {
		n += bucketKeyLen + batchEntryOverhead
		if w := &run.work[i]; w.sealed && w.b.snapshot {
			n += bucketKeyLen + batchEntryOverhead // its snapshot deleted
		}
		if i < first {
			measured += len(pe.out[i])
			estimated += run.work[i].bucketEstimate()
		} else {
			rest += run.work[i].bucketEstimate()
		}
	}
	if estimated > 0 {
		n += measured + int(float64(rest)*float64(measured)/float64(estimated))
	}
	return n + n/8
}

// bucketEstimate is about the bytes of w written: its frozen rows (a
// snapshot copies them; encoded, they shrink) and a few bytes a plain
// value.
func (w *ckptBucket) bucketEstimate() int {
	return 64 + len(w.frozen) + len(w.open)/2 + len(w.cols.Times)*(2+3*len(w.cols.Fields)) + 8*len(w.refs)
}

// batchEntryOverhead is a Pebble batch entry's bytes beyond its key and
// value: a kind byte and two length varints.
const batchEntryOverhead = 5

// releaseCheckpoint lets go of what a durable checkpoint wrote: new
// series are persisted, open buckets have their snapshot, sealed buckets
// leave memory (reads see their stored copies from now on) and small ones
// are marked for the merge pass.
func (db *DB) releaseCheckpoint(run *ckptRun) {
	now := db.opts.Now()
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, sr := range run.newSeries {
		sr.s.persisted = true
		sr.s.durable.Store(true)
	}
	var freed int64
	for i := range run.work {
		w := &run.work[i]
		b := w.b
		if !w.sealed {
			b.snapshot, b.snapRows, b.snapFrozen = true, w.rows(), !w.encodeOpen
			continue
		}
		c := db.mu.byID[w.coll]
		if c == nil {
			continue
		}
		s := c.seriesOf(w.series)
		if s == nil {
			continue
		}
		s.storedMax = max(s.storedMax, b.maxT)
		c.foldLast(s, b)
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
				b.changed() // its sorted copy, if a read made one, goes too
				break
			}
		}
	}
	db.headMem.Add(-freed)
	for _, c := range db.mu.byID {
		c.coolHot()
	}
}
