package timeseries

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/cockroachdb/pebble/vfs"
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

// tableCheckpointBytes is the bytes of buckets (bucketEstimate, before
// encoding) from which a checkpoint of defaultTableCheckpoint buckets or
// more is written as a table. A smaller one is a batch the memtable takes
// in: an ingested table costs a flush of the memtable and a table in
// level 0 each, and a million sparse series checkpoint twice a second,
// most times 7 MB of one-row buckets (written as tables, that load ran at
// 0.76x the rate, at 1.24x the CPU a point: docs/benchmarks.md, "Small
// checkpoints as batches again"); 10,000 sensors' checkpoints through
// 3 h of iot held 19, 47 and 87 MB.
const tableCheckpointBytes = 16 << 20

// tableWindow is how many buckets a checkpoint's table encodes at once
// (at most encodeWindow): their encoded bytes are held until written.
// BenchmarkCheckpointFleet (an hour of 10,000 sensors, checkpointed
// every 10 minutes): 4,096 grew the heap by up to 31 MiB a checkpoint,
// 1,024 by 11, 256 by 6.5 and 128 by 5.9 (the batch, 42).
const tableWindow = 256

// checkpointTableName is the table a checkpoint writes in the data
// directory before the store ingests it (and removes its name); one left
// by a crash is removed at open.
const checkpointTableName = "checkpoint.sst.tmp"

// tableOp is a write of a checkpoint's table other than its buckets and
// new series: a write of its pre functions, a catalog record, rollup
// marks, the checkpoint record.
type tableOp struct {
	key, value []byte
	del        bool
}

func (op *tableOp) write(tw *sstable.Writer) error {
	if op.del {
		return tw.Delete(op.key)
	}
	return tw.Set(op.key, op.value)
}

// errTableRoom: the free space would not hold the rest of a checkpoint's
// table.
var errTableRoom = errors.New("timeseries: no room for the rest of the checkpoint's table")

// errTableKind: a checkpoint's writes hold a kind a table cannot (a range
// delete, a merge); the checkpoint is written as a batch instead.
var errTableKind = errors.New("timeseries: a checkpoint table cannot hold this kind of write")

// useTable reports whether run is written as a table.
func (db *DB) useTable(run *ckptRun) bool {
	if min := db.opts.tableCheckpoint; min != 0 {
		return min > 0 && len(run.work) >= min
	}
	if len(run.work) < defaultTableCheckpoint {
		return false
	}
	least := cmp.Or(db.opts.tableCheckpointBytes, tableCheckpointBytes)
	n := 0
	for i := range run.work {
		if n += run.work[i].bucketEstimate(); n >= least {
			return true
		}
	}
	return false
}

// ingestCheckpoint writes what run captured, and the writes of pre, as
// one table and has the store ingest it: the same keys, in effect, as
// the batch encodeCheckpoint makes (a key written twice keeps its last
// write, in the batch's order). Before the table is written and after
// every window of buckets, the free space must hold what is left of it
// (as measured so far), a quarter of it for its first compaction and
// checkpointMargin: a table that would not fit is removed and the
// checkpoint skipped (skipForRoom) before the filesystem fills, which
// would fail the store's own writes; one the filesystem still could not
// hold is skipped the same way. It returns errTableKind, having written
// nothing, when pre writes a kind a table cannot hold.
func (db *DB) ingestCheckpoint(run *ckptRun, pre []func(*pebble.Batch) error, abort <-chan struct{}) error {
	preOps, tailOps, err := db.checkpointOps(run, pre)
	if err != nil {
		return err
	}
	path := filepath.Join(db.opts.Dir, checkpointTableName)
	size, err := db.writeCheckpointTable(path, run, preOps, tailOps)
	// Written: a quarter of it for its first compaction and
	// checkpointMargin must still be free.
	if free := db.freeSpace(); err == nil && free >= 0 && free < batchNeed(int(size))-size {
		err = errTableRoom
	}
	if err == nil && db.hooks.checkpointWrite != nil {
		err = db.hooks.checkpointWrite()
	}
	// An ingestion that overlaps the memtable flushes it first and waits,
	// with no way to give up on closing: the memtable is flushed here,
	// where closing can abandon the wait (a write to the store in between
	// still makes the ingestion flush).
	if err == nil {
		if err := db.flushStore(abort); err != nil {
			db.dropCheckpointTable()
			return err
		}
		err = db.pdb.Ingest([]string{path}) // the store removes this name
	}
	if err == nil {
		return nil
	}
	db.dropCheckpointTable()
	if full := isDiskFull(err); full || errors.Is(err, errTableRoom) {
		skipped := db.skipForRoom(db.freeSpace(), batchNeed(int(size)))
		if full { // the estimate was short, or the store's own room
			return fmt.Errorf("%w: %w", skipped, err)
		}
		return skipped
	}
	return db.diskErr(err)
}

// workOrder returns the indexes of run.work in the order of their keys,
// and those of the sealed buckets with a snapshot in the order of their
// snapshots' keys (which the checkpoint deletes): keys compared by their
// parts, none made.
func workOrder(run *ckptRun) (sets, dels []int32) {
	space := func(w *ckptBucket) byte {
		if w.sealed {
			return spaceBucket
		}
		return spaceOpen
	}
	byKey := func(a, b *ckptBucket, sa, sb byte) int {
		if c := cmp.Compare(sa, sb); c != 0 {
			return c
		}
		if c := cmp.Compare(a.coll, b.coll); c != 0 {
			return c
		}
		if c := cmp.Compare(a.series, b.series); c != 0 {
			return c
		}
		if c := cmp.Compare(a.b.minTime, b.b.minTime); c != 0 { // flipTime keeps the order
			return c
		}
		return cmp.Compare(a.b.id, b.b.id)
	}
	sets = make([]int32, len(run.work))
	for i := range sets {
		sets[i] = int32(i)
		if w := &run.work[i]; w.sealed && w.b.snapshot {
			dels = append(dels, int32(i))
		}
	}
	slices.SortFunc(sets, func(i, j int32) int {
		a, b := &run.work[i], &run.work[j]
		return byKey(a, b, space(a), space(b))
	})
	slices.SortFunc(dels, func(i, j int32) int {
		return byKey(&run.work[i], &run.work[j], spaceOpen, spaceOpen)
	})
	return sets, dels
}

// checkpointOps returns, each in key order, the writes of pre (before
// the new series and the buckets in a batch's order) and those after
// them: the catalog records, the rollups' marks and the checkpoint
// record. Of two writes of a key in one, the later is kept.
func (db *DB) checkpointOps(run *ckptRun, pre []func(*pebble.Batch) error) (preOps, tailOps []tableOp, err error) {
	fromBatch := func(fill func(*pebble.Batch) error) ([]tableOp, error) {
		b := db.pdb.NewBatch()
		defer b.Close()
		if err := fill(b); err != nil {
			return nil, err
		}
		var ops []tableOp
		r := b.Reader()
		for {
			kind, k, v, ok, err := r.Next()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			switch kind {
			case pebble.InternalKeyKindSet:
				ops = append(ops, tableOp{key: slices.Clone(k), value: slices.Clone(v)})
			case pebble.InternalKeyKindDelete:
				ops = append(ops, tableOp{key: slices.Clone(k), del: true})
			default:
				return nil, fmt.Errorf("%w: %v", errTableKind, kind)
			}
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
	if preOps, err = fromBatch(func(b *pebble.Batch) error {
		for _, p := range pre {
			if err := p(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if tailOps, err = fromBatch(func(b *pebble.Batch) error {
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
		return nil, nil, err
	}
	return preOps, tailOps, nil
}

// The streams a checkpoint's table merges, in a batch's order: of two
// writes of a key, the one of the later stream is kept.
const (
	streamPre = iota
	streamSeries
	streamSets // buckets
	streamDels // snapshots of sealed buckets deleted
	streamTail
	nStreams
)

// writeCheckpointTable writes to a table at path, in key order, the
// writes of preOps, run's new series, its buckets (encoded a window at a
// time), the deletes of the snapshots of its sealed buckets and tailOps,
// and returns the table's size once synced. It stops with errTableRoom
// when the free space would not hold the rest; on a failure, the size
// returned is the table's as far as it was written, scaled to all of it.
func (db *DB) writeCheckpointTable(path string, run *ckptRun, preOps, tailOps []tableOp) (size int64, err error) {
	t := &tableWriter{db: db, run: run, preOps: preOps, tailOps: tailOps, winStart: -1}
	t.sets, t.dels = workOrder(run)
	t.series = make([]int32, len(run.newSeries))
	for i := range t.series {
		t.series[i] = int32(i)
	}
	slices.SortFunc(t.series, func(i, j int32) int { return bytes.Compare(run.newSeries[i].key, run.newSeries[j].key) })
	t.measure()
	// Never a name the store still holds: a crash between the store's
	// link of an ingested table and its removal of this name leaves both.
	if err := removeCheckpointTable(db.opts.FS, db.opts.Dir); err != nil {
		return 0, err
	}
	f, err := db.opts.FS.Create(path)
	if err != nil {
		return 0, fmt.Errorf("timeseries: create the checkpoint's table: %w", err)
	}
	// The store's level 0 options: the table is ingested there, or
	// below when no table overlaps it.
	wr := objstorageprovider.NewFileWritable(f)
	t.tw = sstable.NewWriter(wr, db.po.MakeWriterOptions(0, db.pdb.FormatMajorVersion().MaxTableFormat()))
	n := runtime.GOMAXPROCS(0)
	if len(t.sets) < minParallelEncode {
		n = 1
	}
	t.pe = newParallelEncoder(min(n, maxEncoders))
	t.window = make([]ckptBucket, 0, min(len(t.sets), tableWindow))
	// The first window is measured before anything is written, then the
	// room for the whole table checked.
	if len(t.sets) > 0 {
		err = t.encode(0)
	}
	if err == nil {
		err = t.room()
	}
	if err == nil {
		err = t.merge()
	}
	if err != nil {
		wr.Abort() // closes the file, writing nothing more
		return t.estimate(), err
	}
	if err := t.tw.Close(); err != nil { // syncs the file
		return t.estimate(), fmt.Errorf("timeseries: write the checkpoint's table: %w", err)
	}
	st, err := db.opts.FS.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// tableWriter writes a checkpoint's table (writeCheckpointTable).
type tableWriter struct {
	db              *DB
	run             *ckptRun
	preOps, tailOps []tableOp
	// sets, dels and series are the orders of run's buckets, of its
	// sealed buckets' snapshots and of its new series (by index).
	sets, dels, series []int32
	tw                 *sstable.Writer
	pe                 *parallelEncoder
	window             []ckptBucket // the buckets pe encoded last
	winStart           int          // their first index in sets
	// The table's size, estimated: the keys and the values other than
	// buckets', known; the buckets encoded, measured; the buckets left
	// (their bucketEstimate, rest), at the rate of those encoded.
	known, encoded, estimated, rest int64
}

// measure sets what the table's size estimate starts from.
func (t *tableWriter) measure() {
	t.known = int64(len(t.sets)+len(t.dels)) * (bucketKeyLen + batchEntryOverhead)
	for _, ops := range [][]tableOp{t.preOps, t.tailOps} {
		for i := range ops {
			t.known += int64(len(ops[i].key) + len(ops[i].value) + batchEntryOverhead)
		}
	}
	for i := range t.run.newSeries {
		t.known += int64(len(t.run.newSeries[i].key) + len(t.run.newSeries[i].meta) + batchEntryOverhead)
	}
	for i := range t.run.work {
		t.rest += int64(t.run.work[i].bucketEstimate())
	}
}

// estimate is the table's size, as far as it is measured.
func (t *tableWriter) estimate() int64 {
	e := t.known + t.encoded
	if t.estimated > 0 {
		e += int64(float64(t.rest) * float64(t.encoded) / float64(t.estimated))
	} else {
		e += t.rest
	}
	return e
}

// room returns errTableRoom unless the free space holds what is left of
// the table, a quarter of all of it and checkpointMargin.
func (t *tableWriter) room() error {
	if free, need := t.db.freeSpace(), batchNeed(int(t.estimate()))-int64(t.tw.EstimatedSize()); free >= 0 && free < need {
		return errTableRoom
	}
	return nil
}

// encode encodes the window of sets holding si, measured, unless it is
// the window encoded last.
func (t *tableWriter) encode(si int) error {
	start := si - si%tableWindow
	if start == t.winStart {
		return nil
	}
	if start > 0 { // the first is measured before it is checked
		if err := t.room(); err != nil {
			return err
		}
	}
	t.window = t.window[:0]
	for _, i := range t.sets[start:min(start+tableWindow, len(t.sets))] {
		t.window = append(t.window, t.run.work[i])
	}
	if err := t.pe.encode(t.window); err != nil {
		return err
	}
	t.winStart = start
	for j := range t.window {
		t.encoded += int64(len(t.pe.out[j]))
		t.estimated += int64(t.window[j].bucketEstimate())
		t.rest -= int64(t.window[j].bucketEstimate())
	}
	return nil
}

// putKey writes into key the key of bucket w in space.
func putKey(key []byte, space byte, w *ckptBucket) []byte {
	key[0] = space
	binary.BigEndian.PutUint32(key[1:], w.coll)
	binary.BigEndian.PutUint64(key[5:], w.series)
	binary.BigEndian.PutUint64(key[13:], flipTime(w.b.minTime))
	binary.BigEndian.PutUint64(key[21:], w.b.id)
	return key
}

// merge writes the five streams to the table in key order.
func (t *tableWriter) merge() error {
	run := t.run
	// The keys of buckets and snapshots, each in its own buffer (the
	// writer copies what it keeps).
	bkey, dkey := make([]byte, bucketKeyLen), make([]byte, bucketKeyLen)
	var at [nStreams]int
	lens := [nStreams]int{len(t.preOps), len(t.series), len(t.sets), len(t.dels), len(t.tailOps)}
	var heads [nStreams][]byte
	for {
		for c := range heads {
			heads[c] = nil
			if at[c] >= lens[c] {
				continue
			}
			switch c {
			case streamPre:
				heads[c] = t.preOps[at[c]].key
			case streamSeries:
				heads[c] = run.newSeries[t.series[at[c]]].key
			case streamSets:
				w := &run.work[t.sets[at[c]]]
				space := byte(spaceOpen)
				if w.sealed {
					space = spaceBucket
				}
				heads[c] = putKey(bkey, space, w)
			case streamDels:
				heads[c] = putKey(dkey, spaceOpen, &run.work[t.dels[at[c]]])
			case streamTail:
				heads[c] = t.tailOps[at[c]].key
			}
		}
		best := -1
		for c := range heads {
			if heads[c] != nil && (best < 0 || bytes.Compare(heads[c], heads[best]) <= 0) {
				best = c // of equal keys, the later stream
			}
		}
		if best < 0 {
			return nil
		}
		for c := range heads {
			if c != best && heads[c] != nil && bytes.Equal(heads[c], heads[best]) {
				at[c]++ // a write the later one replaces
			}
		}
		k := heads[best]
		var err error
		switch best {
		case streamPre:
			err = t.preOps[at[best]].write(t.tw)
		case streamTail:
			err = t.tailOps[at[best]].write(t.tw)
		case streamSeries:
			err = t.tw.Set(k, []byte(run.newSeries[t.series[at[best]]].meta))
		case streamSets:
			if err := t.encode(at[best]); err != nil {
				return err
			}
			err = t.tw.Set(k, t.pe.out[at[best]%tableWindow])
		case streamDels:
			err = t.tw.Delete(k)
		}
		if err != nil {
			return fmt.Errorf("timeseries: write the checkpoint's table: %w", err)
		}
		at[best]++
	}
}

// dropCheckpointTable removes the table of a checkpoint that failed.
func (db *DB) dropCheckpointTable() {
	if err := removeCheckpointTable(db.opts.FS, db.opts.Dir); err != nil {
		db.log.Warn("checkpoint table not removed", "dir", db.opts.Dir, "err", err)
	}
}

// removeCheckpointTable removes a table a checkpoint wrote and a crash
// left before the store ingested it (or after, before the store removed
// this name: the store keeps its own).
func removeCheckpointTable(fs vfs.FS, dir string) error {
	err := fs.Remove(filepath.Join(dir, checkpointTableName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
