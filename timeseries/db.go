package timeseries

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/timeseries/wal"
)

// DB is a store of collections. It is safe for concurrent use.
//
// Writes go to the log (fsynced, group-committed) and then into buckets in
// memory; a checkpoint writes buckets to Pebble and truncates the log.
// docs/architecture.md describes the write, read and recovery paths.
type DB struct {
	// Set by Open and not changed after it (recovering: only while Open
	// replays the log).
	opts Options
	lim  limits
	log  *slog.Logger
	pdb  *pebble.DB
	po   *pebble.Options // the store's, for the tables checkpoints write
	wal  *wal.Log
	// storeFail watches the store's flushes and compactions for failures.
	storeFail *storeFailures
	// symbols caches decoded shared symbol blocks for reads; nil when off.
	symbols    *symbolCache
	recovering bool
	// readOnly is set by Open on a full disk: Pebble writes to memory only
	// (overlayFS), no checkpoint runs and every write is refused
	// (checkWritable).
	readOnly bool
	encPool  sync.Pool // *recordEncoder
	// querySlots holds a token per find or aggregate working now, at most
	// Options.QueryConcurrency (acquireQuery).
	querySlots chan struct{}
	wake       chan struct{} // buffered(1): asks the checkpointer to run
	stop       chan struct{}
	done       chan struct{}
	// rollupWake (buffered(1)) tells the rollup loop that marks arrived;
	// rollupDone is closed when it ends.
	rollupWake chan struct{}
	rollupDone chan struct{}
	// rollupMu serializes rollup passes (rollupPasses).
	rollupMu sync.Mutex
	// rollupThaw holds the columns a pass' reads decode frozen rows into,
	// from one chunk of series to the next (guarded by rollupMu).
	rollupThaw thawFree
	// rollupScratch is what passes reuse from one recomputation to the
	// next, kept while they find work (guarded by rollupMu).
	rollupScratch rollupScratch
	// archiveMu serializes archive passes (archive.go).
	archiveMu sync.Mutex
	// archiveGen counts archive commits, bumped before each is applied
	// (archiveView.gen).
	archiveGen atomic.Uint64
	// backupHook is the hook of SetBackupHook: the DB's owner's (a
	// replica set member's), set after it opened the DB.
	backupHook atomic.Pointer[BackupHook]

	// The locks, in the order they are taken: a goroutine holding one
	// takes only locks below it.
	//
	//	closing.Mutex          Close
	//	rollupMu               rollup passes
	//	maintMu                checkpoints, deletes, TTL and merge passes, DDL
	//	plainState.mu          a plain collection's writers
	//	cutMu                  writers (shared) against a checkpoint's cut
	//	mu                     the catalog and the buckets in memory
	//	coll, collection.lookupMu   lookups without mu (never held together)
	//	leaf locks             seriesMatches.mu, symbolCache.mu,
	//	                       storeFailures.mu, overlayFS.mu: nothing is
	//	                       taken under them
	//
	// Fields below a lock are guarded by it; the atomics after them are
	// read and written without one.

	// closing serializes Close; err is what it returned.
	closing struct {
		sync.Mutex
		err error
	}
	// maintMu serializes checkpoints, deletes, TTL passes, merge passes
	// and catalog changes.
	maintMu sync.Mutex
	// pendingPre holds the Pebble writes of changes made in memory with a
	// checkpoint that did not apply its batch (ckptChange.pre): the next
	// checkpoint's batch makes them. Guarded by maintMu.
	pendingPre []func(*pebble.Batch) error
	// cutMu is held shared by writers from their log append until their
	// measurements are in memory, and exclusively by a checkpoint while it
	// cuts the log and captures memory, so the capture holds exactly the
	// records before the cut.
	cutMu sync.RWMutex
	// mu guards the catalog and every bucket in memory (collection, series
	// and memBucket fields) and these.
	mu struct {
		sync.RWMutex
		byID       map[uint32]*collection
		nextColl   uint32
		nextSeries uint64
		nextBucket uint64
		writeSeq   uint64
		// captures are the times and writeSeq of the recent checkpoint
		// captures, oldest first, back to the newest one at least a
		// CheckpointInterval old: an open bucket not written since that
		// one is idle (idleSeq).
		captures []capturePoint
		// sealScratch is sealForBudget's list of open buckets, kept
		// between calls without its pointers.
		sealScratch []*memBucket
		// freezeScratch is where apply encodes a bucket's rows it freezes.
		freezeScratch freezeScratch
	}
	// coll guards byName for lookup, which does not take mu: an insert
	// finds its collection while another applies its batch. Writers of
	// byName hold mu for writing, then coll.
	coll struct {
		sync.RWMutex
		byName map[string]*collection
	}

	headMem atomic.Int64 // bytes held by buckets in memory
	// sortedMem is the bytes of the sorted copies of open buckets that
	// reads share (memBucket.sorted), bounded by MemoryBudget/8.
	sortedMem atomic.Int64
	// seriesMem is the memory the series hold besides their buckets
	// (seriesMem()): it counts in the budget but no checkpoint frees it.
	seriesMem atomic.Int64
	// sealedSince is the memory of the buckets sealed since the last
	// checkpoint's capture (seal), which only a checkpoint frees: once it
	// passes an eighth of the bucket budget an insert wakes the
	// checkpointer, so that the buckets are written while writers go on
	// rather than when they must wait for memory (waitForMemory).
	sealedSince atomic.Int64
	// keysRelogged is the bytes of meta keys the log's insert records
	// wrote since the last checkpoint's capture for series the collection
	// held already: a series is named by its id only once a checkpoint
	// made it durable, and until then every record names it by its key.
	// Past keysReloggedWake an insert wakes the checkpointer.
	keysRelogged atomic.Int64
	// queryMem is the memory every find and aggregate holds, charged by
	// their guards (scanGuard) against Options.QueryMemoryTotalBytes.
	queryMem atomic.Int64
	// expiredUnflushed is set when a TTL pass removed data since the last
	// checkpoint (see persistCollection).
	expiredUnflushed atomic.Bool
	// mergePending is set when a collection has merge marks
	// (collection.mergeMarks), so that a pass with nothing to do costs a
	// load.
	mergePending atomic.Bool
	// mergeGen counts the merge batches applied (commitMerge): a plan
	// that let go of DB.mu during its walk checks it (planScan).
	mergeGen atomic.Uint64
	closed   atomic.Bool
	// backupBusy is set while Backup runs (backup.go): one at a time.
	backupBusy atomic.Bool
	// noRoom is set while checkpoints are skipped for lack of disk space
	// (errNoRoom), so that writers waiting for memory give up.
	noRoom atomic.Bool
	// roomNeed is the free space the last checkpoint skipped for lack of
	// room measured it would take (0: none skipped since one succeeded).
	roomNeed atomic.Int64
	// reclaim is what queries call when the total of query memory is
	// taken (OnQueryMemoryFull).
	reclaim atomic.Pointer[func(need int64) bool]

	// hooks are set by tests before the DB is used.
	hooks struct {
		// mergeApplied runs after a merge batch is applied and before
		// the flush that makes it durable.
		mergeApplied func()
		// checkpointWrite runs before a checkpoint applies its batch; an
		// error fails the checkpoint there.
		checkpointWrite func() error
		// fieldTypesScan runs before refreshFieldTypes reads the stored
		// buckets.
		fieldTypesScan func()
		// planYielded runs each time a plan's walk has let go of DB.mu.
		planYielded func()
		// ddlStep runs at the steps of DDL a crash may come between
		// (ddlStep's callers name them).
		ddlStep func(step string)
		// archiveStep runs at the steps of an archive pass a crash may
		// come between: "intent" (durable), "files" (written), "commit"
		// (applied, durable with the next flush).
		archiveStep func(step string)
		// catalogCleared runs when ReplaceFrom has emptied the catalog in
		// memory, before it loads the new one.
		catalogCleared func()
		// lastRead runs when recoverChunk has read series' newest stored
		// rows, before it makes them known.
		lastRead func()
		// rollupAggregated runs when a rollup pass has aggregated a
		// range, before it replaces the rollup's measurements.
		rollupAggregated func()
		// rollupDeleted runs when a rollup pass has logged and applied
		// the delete of a range, before it inserts the range's new
		// measurements.
		rollupDeleted func()
		// storeFlush runs before the store is flushed (flushStore); an
		// error fails the flush there.
		storeFlush func() error
		// logging runs when an insert or a plain collection's write has
		// made its log record, before it takes the lock that orders it
		// against the log's cuts.
		logging func()
		// grouped runs after groupBatch grouped row i of a batch, with
		// the collection's lookup lock held for reading.
		grouped func(c *collection, i int)
	}

	stats struct {
		// catalogCounts counts the counts answered from the catalog
		// (Count's catalogCount); distincts the distincts answered from
		// the series index (DistinctMeta).
		catalogCounts, distincts atomic.Int64
		checkpoints              atomic.Int64
		sealedEarly              atomic.Int64
		// sealedIdle counts the open buckets checkpoints sealed as idle.
		sealedIdle atomic.Int64
		// aggBuckets counts the buckets whose rows an aggregate read:
		// one add per bucket, so tests can see buckets passed over.
		aggBuckets atomic.Int64
		// rollupFolds counts the series whose newest window a rollup
		// pass folded new rows into (rollupTail) instead of reading.
		rollupFolds atomic.Int64
		// merged counts the buckets merge passes removed, mergeReads the
		// series windows they read.
		merged, mergeReads atomic.Int64
		// marksDropped counts the merge marks dropped when a
		// collection's were full (maxMarks).
		marksDropped atomic.Int64
		// ttlIdle counts the TTL batches that found nothing due from
		// the collection's oldest bucket alone (collection.oldestMin).
		ttlIdle atomic.Int64
		// queryWaits counts the queries that waited for a slot.
		queryWaits atomic.Int64
		// planRetries counts the plan walks made again after a merge
		// committed during them (planScan).
		planRetries atomic.Int64
	}
}

// EngineStats counts the storage engine's background work since Open.
type EngineStats struct {
	// Checkpoints written.
	Checkpoints int64
	// SealedForMemory counts open buckets sealed early to keep the
	// buckets in memory within the budget; SealedIdle those a checkpoint
	// sealed because nothing was written to them for a checkpoint
	// interval.
	SealedForMemory, SealedIdle int64
	// Merged counts the buckets merge passes removed by joining them with
	// their neighbours; MergeMarksDropped the small buckets left unmerged
	// because a collection's merge marks were full.
	Merged, MergeMarksDropped int64
	// CountsFromCatalog counts the counts answered from the catalog, with
	// no measurement read (Count); DistinctsFromSeries the distincts of a
	// meta path answered from the series index (DistinctMeta).
	CountsFromCatalog, DistinctsFromSeries int64
}

// Stats returns the engine's counters.
func (db *DB) Stats() EngineStats {
	return EngineStats{
		Checkpoints:         db.stats.checkpoints.Load(),
		SealedForMemory:     db.stats.sealedEarly.Load(),
		SealedIdle:          db.stats.sealedIdle.Load(),
		Merged:              db.stats.merged.Load(),
		MergeMarksDropped:   db.stats.marksDropped.Load(),
		CountsFromCatalog:   db.stats.catalogCounts.Load(),
		DistinctsFromSeries: db.stats.distincts.Load(),
	}
}

// StoreStats is what the store under the engine has done: the bytes its
// flushes and compactions wrote, its compactions, and what a read meets.
type StoreStats struct {
	// FlushedBytes and CompactedBytes are the bytes written to tables by
	// flushes of the memtables and by compactions since the store opened:
	// with the bytes checkpoints hand it, the store's write amplification.
	FlushedBytes, CompactedBytes uint64
	// Compactions counts the compactions since the store opened.
	Compactions int64
	// ReadAmp is the number of table runs a read may look in (the files of
	// level 0 and each non-empty level below it); L0Files the files of
	// level 0.
	ReadAmp, L0Files int64
	// DiskBytes is the space the store takes on disk.
	DiskBytes uint64
}

// StoreStats returns the store's counters.
func (db *DB) StoreStats() StoreStats {
	m := db.pdb.Metrics()
	st := StoreStats{Compactions: m.Compact.Count, ReadAmp: int64(m.ReadAmp()), L0Files: m.Levels[0].NumFiles, DiskBytes: m.DiskSpaceUsage()}
	for i := range m.Levels {
		st.FlushedBytes += m.Levels[i].BytesFlushed
		st.CompactedBytes += m.Levels[i].BytesCompacted
	}
	return st
}

// Close writes a final checkpoint, stops the background work and closes the
// store. Calling Close more than once is harmless.
func (db *DB) Close() error {
	db.closing.Lock()
	defer db.closing.Unlock()
	if db.closed.Load() {
		return db.closing.err
	}
	close(db.stop)
	if !db.readOnly {
		<-db.done
		<-db.rollupDone
	}
	err := db.checkpoint(nil)
	if errors.Is(err, errNoRoom) {
		// Everything written is in the log, replayed at the next Open.
		db.log.Warn("final checkpoint skipped; the log keeps every write", "err", err)
		err = nil
	}
	db.closed.Store(true)
	perr := db.pdb.Close()
	if perr != nil && isDiskFull(perr) {
		// Pebble's own log is off (the DB's log is the one that counts):
		// ENOSPC closing it loses nothing.
		db.log.Warn("store closed on a full disk", "err", perr)
		perr = nil
	}
	db.closing.err = errors.Join(err, db.wal.Close(), perr)
	return db.closing.err
}

// lookup returns the live collection called name.
func (db *DB) lookup(name string) (*collection, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	db.coll.RLock()
	c := db.coll.byName[name]
	db.coll.RUnlock()
	if c == nil {
		return nil, notFound(name)
	}
	return c, nil
}
