package timeseries

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/hourglassdb/hourglass/bucket"
)

// A fleet's checkpoint is written as one table and ingested, not applied
// as a batch. A batch holds all it writes at once, and Pebble keeps it
// until its flush: at an hour's turn or a compaction, tens of megabytes
// beside the buckets it copies (docs/benchmarks.md, "Checkpoints written
// as tables"). A table is written a window of encoded buckets at a time
// and its ingestion is as atomic as the batch: every key it holds, the
// checkpoint record among them, becomes visible at once, or none does.
//
// defaultTableCheckpoint is the fewest buckets a checkpoint writes as a
// table (Options.tableCheckpoint); below it, a batch costs little.
const defaultTableCheckpoint = minParallelEncode

// checkpointTableName is the table a checkpoint writes in the data
// directory before the store ingests it (and removes its name); one left
// by a crash is removed at open.
const checkpointTableName = "checkpoint.sst.tmp"

// tableOp is one key a checkpoint table writes: a bucket of the run
// (work >= 0, its value encoded as the table is written) or a key and
// value of the checkpoint's other writes.
type tableOp struct {
	key   []byte
	value []byte
	work  int
	del   bool
}

// useTable reports whether run is written as a table.
func (db *DB) useTable(run *ckptRun) bool {
	min := db.opts.tableCheckpoint
	if min == 0 {
		min = defaultTableCheckpoint
	}
	return min > 0 && len(run.work) >= min
}

// ingestCheckpoint writes what run captured, and the writes of pre, as
// one table and has the store ingest it: the same keys, in effect, as
// the batch encodeCheckpoint makes (a key written twice keeps its last
// write, in the batch's order). It reports whether the store took the
// table. A table is measured once written: without the room its first
// compaction needs, it is removed and the checkpoint skipped (errNoRoom).
func (db *DB) ingestCheckpoint(run *ckptRun, pre []func(*pebble.Batch) error, abort <-chan struct{}) (ingested bool, err error) {
	ops, err := db.checkpointOps(run, pre)
	if err != nil {
		return false, err
	}
	path := filepath.Join(db.opts.Dir, checkpointTableName)
	size, err := db.writeCheckpointTable(path, run, ops)
	defer func() {
		if !ingested {
			db.opts.FS.Remove(path) // the store removes its name once ingested
		}
	}()
	if isDiskFull(err) {
		// The filesystem filled as the table was written: the room needed
		// is the table's size, as far as it was measured (size), and what
		// the first compaction needs, as for a batch.
		need := batchNeed(int(size))
		db.roomNeed.Store(need)
		db.noRoom.Store(true)
		return false, fmt.Errorf("%w in %s: the checkpoint's table of about %s did not fit: %w", errNoRoom, db.opts.Dir, mib(size), err)
	}
	if err != nil {
		return false, err
	}
	// The table is on disk: what is left to need is its first
	// compaction's room (batchNeed less the table).
	if free := db.freeSpace(); free >= 0 && free < batchNeed(int(size))-size {
		need := batchNeed(int(size))
		db.roomNeed.Store(need)
		db.noRoom.Store(true)
		return false, fmt.Errorf("%w in %s: %s free, the checkpoint's table of %s needs %s more", errNoRoom, db.opts.Dir, mib(free), mib(size), mib(need-size))
	}
	if db.hooks.checkpointWrite != nil {
		if err := db.hooks.checkpointWrite(); err != nil {
			return false, err
		}
	}
	// An ingestion that overlaps the memtable flushes it first and waits,
	// with no way to give up on closing: the memtable is flushed here,
	// where closing can abandon the wait.
	if err := db.flushStore(abort); err != nil {
		return false, err
	}
	if err := db.pdb.Ingest([]string{path}); err != nil {
		return false, db.diskErr(err)
	}
	return true, nil
}

// checkpointOps lists, in key order, what run's table writes: the writes
// of pre and the new series, run's buckets (run.work is sorted by key
// here) and the snapshots of sealed ones deleted, the catalog records,
// the rollups' marks and the checkpoint record. Of two writes of a key,
// the later in that order is kept.
func (db *DB) checkpointOps(run *ckptRun, pre []func(*pebble.Batch) error) ([]tableOp, error) {
	type keyed struct {
		key []byte
		w   ckptBucket
	}
	ks := make([]keyed, len(run.work))
	for i := range run.work {
		w := &run.work[i]
		space := byte(spaceOpen)
		if w.sealed {
			space = spaceBucket
		}
		ks[i] = keyed{bucketKey(space, w.coll, w.series, w.b.minTime, w.b.id), *w}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return bytes.Compare(a.key, b.key) })
	for i := range ks {
		run.work[i] = ks[i].w
	}

	var ops []tableOp
	fromBatch := func(fill func(*pebble.Batch) error) error {
		b := db.pdb.NewBatch()
		defer b.Close()
		if err := fill(b); err != nil {
			return err
		}
		r := b.Reader()
		for {
			kind, k, v, ok, err := r.Next()
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			switch kind {
			case pebble.InternalKeyKindSet:
				ops = append(ops, tableOp{key: slices.Clone(k), value: slices.Clone(v), work: -1})
			case pebble.InternalKeyKindDelete:
				ops = append(ops, tableOp{key: slices.Clone(k), work: -1, del: true})
			default:
				return fmt.Errorf("timeseries: a checkpoint table cannot hold a write of kind %v", kind)
			}
		}
	}
	if err := fromBatch(func(b *pebble.Batch) error {
		for _, p := range pre {
			if err := p(b); err != nil {
				return err
			}
		}
		for _, sr := range run.newSeries {
			if err := b.Set(sr.key, []byte(sr.meta), nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for i := range ks {
		ops = append(ops, tableOp{key: ks[i].key, work: i})
		if w := &run.work[i]; w.sealed && w.b.snapshot {
			ops = append(ops, tableOp{key: bucketKey(spaceOpen, w.coll, w.series, w.b.minTime, w.b.id), work: -1, del: true})
		}
	}
	if err := fromBatch(func(b *pebble.Batch) error {
		for _, kv := range run.catalog {
			if err := b.Set(kv[0], kv[1], nil); err != nil {
				return err
			}
		}
		if run.rollupMarks != nil {
			if err := run.rollupMarks(b); err != nil {
				return err
			}
		}
		return b.Set(keyCheckpoint, run.st.encode(), nil)
	}); err != nil {
		return nil, err
	}
	// Stable: of equal keys the last write, kept below, stays last.
	slices.SortStableFunc(ops, func(a, b tableOp) int { return bytes.Compare(a.key, b.key) })
	out := ops[:0]
	for i := range ops {
		if i+1 < len(ops) && bytes.Equal(ops[i].key, ops[i+1].key) {
			continue
		}
		out = append(out, ops[i])
	}
	return out, nil
}

// writeCheckpointTable writes ops to a table at path, encoding run's
// buckets a window at a time, and returns its size once synced. On a
// failure, the size returned is the table's as far as it was written,
// scaled to all of ops.
func (db *DB) writeCheckpointTable(path string, run *ckptRun, ops []tableOp) (size int64, err error) {
	f, err := db.opts.FS.Create(path)
	if err != nil {
		return 0, fmt.Errorf("timeseries: create the checkpoint's table: %w", err)
	}
	// The store's level 0 options: the table is ingested there, or
	// below when no table overlaps it.
	tw := sstable.NewWriter(objstorageprovider.NewFileWritable(f),
		db.po.MakeWriterOptions(0, db.pdb.FormatMajorVersion().MaxTableFormat()))
	closed, done := false, 0
	defer func() {
		if !closed {
			if err != nil && done > 0 {
				size = int64(tw.EstimatedSize()) * int64(len(ops)) / int64(done)
			}
			tw.Close()
		}
	}()
	var pe *parallelEncoder
	if len(run.work) >= minParallelEncode && runtime.GOMAXPROCS(0) > 1 {
		pe = newParallelEncoder(min(runtime.GOMAXPROCS(0), maxEncoders))
	}
	var enc bucket.Encoder
	var thaw bucket.Columns
	var buf []byte
	window := -1
	for i, op := range ops {
		done = i
		switch {
		case op.del:
			err = tw.Delete(op.key)
		case op.work < 0:
			err = tw.Set(op.key, op.value)
		default:
			w := &run.work[op.work]
			if pe != nil {
				if win := op.work / encodeWindow; win != window {
					window = win
					lo := win * encodeWindow
					if err := pe.encode(run.work[lo:min(lo+encodeWindow, len(run.work))]); err != nil {
						return 0, err
					}
				}
				buf = pe.out[op.work%encodeWindow]
			} else if buf, err = w.encode(&enc, buf[:0], &thaw); err != nil {
				return 0, fmt.Errorf("timeseries: encode bucket %d: %w", w.b.id, err)
			}
			err = tw.Set(op.key, buf)
		}
		if err != nil {
			return 0, fmt.Errorf("timeseries: write the checkpoint's table: %w", err)
		}
	}
	done, size = len(ops), int64(tw.EstimatedSize())
	closed = true
	if err := tw.Close(); err != nil { // syncs the file
		return size, fmt.Errorf("timeseries: write the checkpoint's table: %w", err)
	}
	st, err := db.opts.FS.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// removeCheckpointTable removes a table a checkpoint wrote and a crash
// left before the store ingested it.
func (db *DB) removeCheckpointTable() error {
	err := db.opts.FS.Remove(filepath.Join(db.opts.Dir, checkpointTableName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
