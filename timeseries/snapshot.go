package timeseries

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble"
)

// keyRestoring is set while ReplaceFrom copies a checkpoint into the store
// and deleted by its last batch: a store that has it was cut off in the
// middle of a restore and holds part of two states.
var keyRestoring = []byte{spaceMeta, 'r', 'e', 's', 't', 'o', 'r', 'i', 'n', 'g'}

// ErrRestoreInterrupted is what Open answers for a store whose ReplaceFrom
// did not finish: it holds part of the old content and part of the new.
// Call ReplaceFrom again (it starts by clearing the store), or start from
// an empty directory.
var ErrRestoreInterrupted = errors.New("timeseries: a restore from a checkpoint was interrupted; the store holds part of it")

// checkpointToTries bounds CheckpointTo's attempts when writes keep
// arriving between its checkpoint and its copy.
const checkpointToTries = 3

// CheckpointTo writes a copy of the whole store into dir, which must not
// exist: every bucket in memory is written to Pebble (a checkpoint), then
// Pebble makes a checkpoint of its files into dir (hard links where the
// file system allows; the copy costs disk space only as the live store
// compacts away from it). The copy holds no log: it is the state after
// every write that returned before the call. ReplaceFrom loads it into
// another DB.
//
// It is meant for moments without writes (a replica set takes it between
// two log entries): checkpoints, deletes, merges and TTL passes wait for
// it; an insert that lands between its checkpoint and its copy makes it
// start again, and after three tries it fails.
func (db *DB) CheckpointTo(dir string) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if err := db.checkSpace(-1); err != nil {
		return err
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	for range checkpointToTries {
		if err := db.checkpointLocked(db.stop); err != nil {
			return err
		}
		// With writers excluded: if nothing was inserted since the
		// checkpoint captured the buckets, Pebble holds every write.
		db.cutMu.Lock()
		db.mu.RLock()
		quiet := len(db.mu.captures) > 0 && db.mu.captures[len(db.mu.captures)-1].seq == db.mu.writeSeq
		db.mu.RUnlock()
		if !quiet {
			db.cutMu.Unlock()
			continue
		}
		// Documents of plain collections go to Pebble directly; its own
		// log is off, so its memtables are flushed before the copy.
		err := db.pdb.Flush()
		if err == nil {
			err = db.pdb.Checkpoint(dir)
		}
		db.cutMu.Unlock()
		if err != nil {
			return fmt.Errorf("timeseries: checkpoint into %s: %w", dir, db.diskErr(err))
		}
		return nil
	}
	return fmt.Errorf("timeseries: checkpoint into %s: inserts kept arriving during %d tries", dir, checkpointToTries)
}

// replaceBatchBytes bounds one batch of ReplaceFrom's copy.
const replaceBatchBytes = 8 << 20

// ReplaceFrom replaces everything db holds (collections, series, buckets,
// documents, indexes) with the content of dir, a copy CheckpointTo made.
// The buckets in memory and the log are dropped; the new content is
// durable when it returns. Writes, checkpoints and maintenance wait for it;
// a write made for the old content that reaches the log after it writes
// nothing of the old content: an insert is made again over the new
// content, any other write fails (NamespaceNotFound, "replaced"). A read
// running across it may see either content, or parts of both.
//
// The copy is not atomic: a crash in the middle leaves a store that Open
// refuses with ErrRestoreInterrupted, until ReplaceFrom runs again.
func (db *DB) ReplaceFrom(dir string) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if err := db.checkWritable(); err != nil {
		return err
	}
	start := time.Now()
	src, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: pebbleLogger{db.log}})
	if err != nil {
		return fmt.Errorf("timeseries: open checkpoint %s: %w", dir, err)
	}
	defer src.Close()
	var st checkpointState
	if v, closer, err := src.Get(keyCheckpoint); err == nil {
		st, err = decodeCheckpointState(v)
		closer.Close()
		if err != nil {
			return fmt.Errorf("timeseries: checkpoint %s: %w", dir, err)
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	if v, closer, err := src.Get(keyFormat); err != nil {
		return fmt.Errorf("timeseries: checkpoint %s has no format version: %w", dir, err)
	} else {
		ok := len(v) == 1 && v[0] <= formatVersion
		closer.Close()
		if !ok {
			return fmt.Errorf("%w: checkpoint %s", ErrNewerFormat, dir)
		}
	}

	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	db.cutMu.Lock()
	defer db.cutMu.Unlock()
	// Records before seg are of the old content: none is replayed again.
	seg, err := db.wal.Cut()
	if err != nil {
		return err
	}
	st.segment = seg

	b := db.pdb.NewBatch()
	if err := b.DeleteRange([]byte{0x00}, []byte{0xff}, nil); err != nil {
		b.Close()
		return err
	}
	if err := b.Set(keyRestoring, nil, nil); err != nil {
		b.Close()
		return err
	}
	it, err := src.NewIter(nil)
	if err != nil {
		b.Close()
		return err
	}
	var keys int64
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if string(k) == string(keyCheckpoint) || string(k) == string(keyRestoring) {
			continue
		}
		err := b.Set(k, it.Value(), nil)
		if err == nil && b.Len() >= replaceBatchBytes {
			if err = db.diskErr(db.pdb.Apply(b, pebble.NoSync)); err == nil {
				b.Close()
				b = db.pdb.NewBatch()
			}
		}
		if err != nil {
			it.Close()
			b.Close()
			return err
		}
		keys++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		b.Close()
		return fmt.Errorf("timeseries: read checkpoint %s: %w", dir, err)
	}
	err = errors.Join(b.Set(keyCheckpoint, st.encode(), nil), b.Delete(keyRestoring, nil))
	if err == nil {
		err = db.diskErr(db.pdb.Apply(b, pebble.NoSync))
	}
	b.Close()
	if err != nil {
		return err
	}
	if err := db.flushStore(nil); err != nil {
		return err
	}

	// The store holds the new content; memory is rebuilt from it as Open
	// builds it.
	// Lookups wait until the new catalog is loaded (DB.coll is held
	// throughout), rather than find no collection meanwhile.
	db.mu.Lock()
	db.coll.Lock()
	// Writers that hold the old content's collections find them gone: a
	// write logged from now on would be replayed over the new content.
	// What a failed meta update left for the next checkpoint to write is
	// of the old content too.
	for _, c := range db.mu.byID {
		c.gone.Store(true)
	}
	db.pendingPre = nil
	db.coll.byName = make(map[string]*collection)
	db.mu.byID = make(map[uint32]*collection)
	if h := db.hooks.catalogCleared; h != nil {
		h()
	}
	db.mu.nextColl, db.mu.nextSeries, db.mu.nextBucket = max(st.nextColl, 1), max(st.nextSeries, 1), max(st.nextBucket, 1)
	db.headMem.Store(0)
	db.seriesMem.Store(0)
	db.sealedSince.Store(0)
	db.sortedMem.Store(0)
	db.mergePending.Store(false)
	db.expiredUnflushed.Store(false)
	db.mergeGen.Add(1) // plans that let go of DB.mu start again
	err = db.load()
	db.coll.Unlock()
	db.mu.Unlock()
	if err == nil {
		err = db.initPlain()
	}
	if err == nil {
		err = db.initExpiry()
	}
	if err != nil {
		return fmt.Errorf("timeseries: load the restored store: %w", err)
	}
	if err := db.wal.Truncate(seg); err != nil {
		return err
	}
	db.log.Info("store replaced from a checkpoint", "checkpoint", dir, "keys", keys, "took", time.Since(start))
	return nil
}
