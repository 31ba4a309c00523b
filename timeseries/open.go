package timeseries

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries/wal"
)

// Open opens or creates the store in opts.Dir, replays the log, and starts
// the background checkpointer. Close must be called.
//
// When the filesystem of opts.Dir has less than Options.DiskReserve free,
// the DB opens read-only: nothing is written to the store's directory (a
// read-write open writes a manifest, and Pebble stops the process when
// that fails), so Pebble opens over a file system that keeps what it
// writes in memory (overlayFS); the log is replayed into memory, its
// document writes and deletes included, no checkpoint runs, and every
// write is refused with OutOfDiskSpace (14031) until a restart with space
// free, which replays the log again into the store on disk. A read-only
// open fails, with OutOfDiskSpace, where there is no store yet.
func Open(opts Options) (*DB, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	db := &DB{
		opts:       opts,
		lim:        limits{maxCount: opts.BucketMaxCount, maxBytes: opts.BucketMaxBytes, maxOpen: opts.MaxOpenBucketsPerSeries, freezeAt: freezeRows},
		symbols:    newSymbolCacheOrNil(opts.SymbolCacheBytes),
		log:        opts.Logger,
		querySlots: make(chan struct{}, opts.QueryConcurrency),
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		rollupWake: make(chan struct{}, 1),
		rollupDone: make(chan struct{}),
	}
	db.coll.byName = make(map[string]*collection)
	db.mu.byID = make(map[uint32]*collection)
	db.mu.nextColl, db.mu.nextSeries, db.mu.nextBucket = 1, 1, 1
	// Buckets loaded from snapshots have lastWrite 0: older than any
	// capture (idleSeq).
	db.mu.writeSeq = 1
	db.encPool.New = func() any { return &recordEncoder{} }
	// A checkpoint's table a crash left is not part of the store: it goes
	// before the free space is measured, and before the log's replay may
	// write a checkpoint of its own.
	if err := removeCheckpointTable(opts.FS, opts.Dir); err != nil {
		return nil, err
	}
	if free := db.freeSpace(); opts.DiskReserve >= 0 && free >= 0 && free < opts.DiskReserve {
		db.readOnly = true
		opts.Logger.Warn("opening read-only: the filesystem is full; writes are refused until a restart with space free",
			"dir", opts.Dir, "free", free, "reserve", opts.DiskReserve)
	}
	storeDir := filepath.Join(opts.Dir, "store")
	if db.readOnly {
		if _, err := opts.FS.Stat(storeDir); err != nil {
			return nil, mongoerr.New(mongoerr.OutOfDiskSpace,
				"no store in %s to open read-only, and the filesystem has %d bytes free, under the reserve of %d (Options.DiskReserve): free space to create one",
				opts.Dir, db.freeSpace(), opts.DiskReserve)
		}
	} else if err := wal.CreateDir(opts.FS, storeDir, opts.NoSync); err != nil {
		return nil, err
	}
	po := pebbleOptions(opts.Logger, opts.FS)
	db.storeFail = newStoreFailures(opts.Logger)
	po.EventListener = db.storeFail.listener()
	po.EventListener.EnsureDefaults(po.Logger)
	if db.readOnly {
		// Pebble opens read-write over a file system that writes to
		// memory only (overlayFS): the log's document writes and deletes
		// are applied there, and no compaction copies the store.
		po.FS = newOverlayFS(po.FS)
		po.DisableAutomaticCompactions = true
	}
	// Pebble reserves room for its memtables out of the block cache: the
	// cache is made larger by what they may hold, so that blocks keep
	// blockCacheSize of it (with 64 MiB in all, a full memtable and a
	// flushing one left it nearly nothing, and every read of a fleet's
	// stored buckets went to the file).
	po.Cache = pebble.NewCache(storeCacheSize)
	pdb, err := pebble.Open(filepath.Join(opts.Dir, "store"), po)
	po.Cache.Unref() // the store holds its own reference
	if err != nil {
		return nil, fmt.Errorf("timeseries: open store in %s: %w", opts.Dir, err)
	}
	db.pdb, db.po = pdb, po
	if err := db.load(); err != nil {
		pdb.Close()
		return nil, err
	}
	w, err := wal.Open(wal.Options{Dir: filepath.Join(opts.Dir, "wal"), SegmentSize: opts.LogSegmentSize,
		NoSync: opts.NoSync, Logger: opts.Logger, FS: opts.FS})
	if err != nil {
		pdb.Close()
		return nil, fmt.Errorf("timeseries: open log: %w", err)
	}
	db.wal = w
	if err := db.recover(); err != nil {
		w.Close()
		pdb.Close()
		return nil, err
	}
	if err := db.initPlain(); err != nil {
		w.Close()
		pdb.Close()
		return nil, err
	}
	if err := db.initExpiry(); err != nil {
		w.Close()
		pdb.Close()
		return nil, err
	}
	if !db.readOnly {
		db.sweepArchiveIntents()
		go db.run()
		if db.opts.ManualRollups {
			close(db.rollupDone)
		} else {
			go db.rollupLoop()
			db.wakeRollups() // marks loaded or made at open
		}
	}
	return db, nil
}

// Pebble's memory: the block cache keeps blockCacheSize for index and
// filter blocks and the documents and buckets read most, and the cache made
// (storeCacheSize, 128 MiB) holds the room of the memtables besides: up to
// memTableStop of memTableSize (a full one being flushed and the one taking
// writes), which Pebble reserves out of its cache.
const (
	blockCacheSize = 64 << 20
	memTableSize   = 32 << 20
	memTableStop   = 2
	storeCacheSize = blockCacheSize + memTableStop*memTableSize
)

// StoreOffHeapBytes is the most memory the store holds outside the Go
// heap, where the runtime's memory limit does not see it: Pebble's cache
// and memtables (storeCacheSize), which it allocates with C's allocator in
// a binary built with cgo. Without cgo they are on the Go heap, and it is 0.
func StoreOffHeapBytes() int64 {
	if cgoEnabled {
		return storeCacheSize
	}
	return 0
}

// pebbleOptions configures Pebble for bucket storage. Pebble's own WAL is
// off: durability comes from the log, and a checkpoint flushes memtables
// before the log is truncated. Tables flushed from memtables (level 0) are
// written uncompressed, so checkpoints pay nothing for it; compactions
// write the other levels with Snappy. Buckets are compressed already, but
// what is stored beside their columns is not: series records (canonical
// meta values), bucket keys and control blocks. With a million sparse
// series these are most of the bytes, and Snappy halves them (high-
// cardinality load, 1M series x 10 points: 21.4 -> 11.6 bytes a point
// once compacted); blocks Snappy cannot shrink by an eighth, such as
// those of large buckets, are kept as they are. The OS's file system is
// left to Pebble's default, which adds its disk-health checks.
func pebbleOptions(logger *slog.Logger, fs vfs.FS) *pebble.Options {
	o := &pebble.Options{
		DisableWAL:                  true,
		MemTableSize:                memTableSize,
		MemTableStopWritesThreshold: memTableStop,
		Logger:                      pebbleLogger{logger},
	}
	if fs != vfs.Default {
		o.FS = fs
	}
	o.Levels = make([]pebble.LevelOptions, 7)
	for i := range o.Levels {
		o.Levels[i].Compression = pebble.SnappyCompression
		if i == 0 {
			o.Levels[i].Compression = pebble.NoCompression
		}
		o.Levels[i].BlockSize = 32 << 10
		// Point reads of documents (an _id checked for duplicates, a
		// document fetched through an index) skip tables without the key.
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	o.EnsureDefaults()
	return o
}

type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// load reads the catalog, the series and the open-bucket snapshots.
func (db *DB) load() error {
	v, closer, err := db.pdb.Get(keyFormat)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if db.readOnly {
			return mongoerr.New(mongoerr.OutOfDiskSpace, "cannot create a store in %s: its filesystem is full", db.opts.Dir)
		}
		if err := db.pdb.Set(keyFormat, []byte{formatVersion}, pebble.NoSync); err != nil {
			return err
		}
		if err := db.pdb.Flush(); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		ver := append([]byte(nil), v...)
		closer.Close()
		if len(ver) != 1 || ver[0] > formatVersion {
			return fmt.Errorf("%w: version %v, this build reads %d", ErrNewerFormat, ver, formatVersion)
		}
		if ver[0] < formatVersion && !db.readOnly {
			// Before anything of the new version is written, so that an
			// older build refuses the store rather than misreading it.
			if err := db.pdb.Set(keyFormat, []byte{formatVersion}, pebble.NoSync); err != nil {
				return err
			}
			if err := db.pdb.Flush(); err != nil {
				return err
			}
		}
	}
	if _, closer, err := db.pdb.Get(keyRestoring); err == nil {
		closer.Close()
		return fmt.Errorf("%w: %s", ErrRestoreInterrupted, db.opts.Dir)
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	if v, closer, err := db.pdb.Get(keyCheckpoint); err == nil {
		st, derr := decodeCheckpointState(v)
		closer.Close()
		if derr != nil {
			return derr
		}
		db.mu.nextColl, db.mu.nextSeries, db.mu.nextBucket = max(st.nextColl, 1), max(st.nextSeries, 1), max(st.nextBucket, 1)
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	// Catalog.
	var recount []*collection
	if err := db.scan([]byte{spaceCatalog}, []byte{spaceCatalog + 1}, func(k, v []byte) error {
		r, err := decodeCollectionRecord(v)
		if err != nil {
			return err
		}
		c, err := r.toCollection()
		if err != nil {
			return err
		}
		if !r.CountExact && c.opts.TimeSeries != nil {
			recount = append(recount, c)
		}
		db.coll.byName[c.name] = c // the caller holds DB.coll, or Open has not returned
		db.mu.byID[c.id] = c
		db.mu.nextColl = max(db.mu.nextColl, c.id+1)
		return nil
	}); err != nil {
		return err
	}
	// Series.
	if err := db.scan([]byte{spaceSeries}, []byte{spaceSeries + 1}, func(k, v []byte) error {
		if len(k) != 13 {
			return fmt.Errorf("%w: series key of %d bytes", ErrCorrupt, len(k))
		}
		c := db.mu.byID[binary.BigEndian.Uint32(k[1:])]
		if c == nil {
			return nil // left over from a dropped collection
		}
		if _, err := model.DecodeMetaKey(string(v)); err != nil {
			return err
		}
		s := c.newSeries(binary.BigEndian.Uint64(k[5:]), model.StringView(v))
		s.persisted, s.storedMax = true, math.MaxInt64
		s.durable.Store(true)
		c.addSeries(s)
		db.seriesMem.Add(seriesMem(s))
		db.mu.nextSeries = max(db.mu.nextSeries, s.id+1)
		return nil
	}); err != nil {
		return err
	}
	for _, c := range recount {
		if err := db.recountStored(c); err != nil {
			return err
		}
	}
	marks, err := db.loadRollupMarks()
	if err != nil {
		return err
	}
	if err := db.relinkRollups(marks); err != nil {
		return err
	}
	// Open-bucket snapshots.
	var r bucket.Reader
	var scratch freezeScratch
	return db.scan([]byte{spaceOpen}, []byte{spaceOpen + 1}, func(k, v []byte) error {
		kp, err := parseBucketKey(k)
		if err != nil {
			return err
		}
		c := db.mu.byID[kp.coll]
		if c == nil {
			return nil
		}
		s := c.seriesOf(kp.series)
		if s == nil {
			return fmt.Errorf("%w: open bucket %d of unknown series %d", ErrCorrupt, kp.id, kp.series)
		}
		b, err := decodeMemBucket(&r, v, kp, c, &scratch)
		if err != nil {
			return err
		}
		b.snapshot, b.snapRows = true, b.rows()
		s.buckets = append(s.buckets, b)
		c.markHot(s)
		db.headMem.Add(b.mem)
		db.mu.nextBucket = max(db.mu.nextBucket, kp.id+1)
		return nil
	})
}

// recountStored sets c's count and buckets to those of the buckets Pebble
// holds for it, for a catalog record that may not match them (CountExact),
// and marks the record for the next checkpoint. It reads the header of
// every stored bucket of c, once: the record written then is exact.
func (db *DB) recountStored(c *collection) error {
	var rows, buckets int64
	for _, space := range []byte{spaceBucket, spaceOpen} {
		p := collPrefix(space, c.id)
		if err := db.scan(p, prefixEnd(p), func(k, v []byte) error {
			n, _, _, err := bucket.Peek(v)
			if err != nil {
				return fmt.Errorf("collection %q: bucket %x: %w", c.name, k, err)
			}
			rows += int64(n)
			buckets++
			return nil
		}); err != nil {
			return err
		}
	}
	if rows != c.count || buckets != c.buckets {
		db.log.Info("recounted collection", "collection", c.name, "count", rows, "recorded", c.count,
			"buckets", buckets, "recordedBuckets", c.buckets)
	}
	c.count, c.ckptCount = rows, rows
	c.buckets, c.ckptBuckets = buckets, buckets
	c.dirty = true
	return nil
}

// decodeMemBucket rebuilds an open bucket from its snapshot.
// Its rows are frozen, in scratch (the caller's buffer).
func decodeMemBucket(r *bucket.Reader, v []byte, kp bucketKeyParts, c *collection, scratch *freezeScratch) (*memBucket, error) {
	ts := c.opts.TimeSeries
	if len(v) > 0 && v[0] == bucket.VersionSnapshot {
		return decodeSnapshot(v, kp, c)
	}
	if err := r.ResetNames(v, c.names); err != nil {
		return nil, fmt.Errorf("open bucket %d: %w", kp.id, err)
	}
	b := &memBucket{id: kp.id, minTime: kp.minTime, span: ts.Span(), minT: r.MinTime(), maxT: r.MaxTime()}
	var err error
	if b.cols, err = decodeAll(r); err != nil {
		return nil, fmt.Errorf("open bucket %d: %w", kp.id, err)
	}
	b.mem = bucketMem(&b.cols)
	b.size = estimateSize(&b.cols, ts.TimeField)
	b.unordered = !slices.IsSorted(b.cols.Times)
	b.lastNum, b.lastOver = lastNumbers(&b.cols, b.maxT)
	if len(b.cols.Times) >= freezeRows {
		b.freeze(scratch)
	}
	return b, nil
}

// decodeSnapshot rebuilds an open bucket from a snapshot of its frozen
// rows (bucket.AppendSnapshot): they are checked and kept as they are,
// and decoded once for the bucket's size and order.
func decodeSnapshot(v []byte, kp bucketKeyParts, c *collection) (*memBucket, error) {
	ts := c.opts.TimeSeries
	var snap bucket.Snapshot
	if err := bucket.ReadSnapshot(v, &snap); err != nil {
		return nil, fmt.Errorf("%w: open bucket %d: %v", ErrCorrupt, kp.id, err)
	}
	b := &memBucket{id: kp.id, minTime: kp.minTime, span: ts.Span(), minT: snap.MinT, maxT: snap.MaxT,
		frozen: slices.Clone(snap.Frozen), frozenRows: snap.Rows, frozenMaxT: snap.MaxT, snapFrozen: true}
	b.cols.Times = []int64{}
	for i, ref := range snap.Refs {
		if int(ref) >= len(c.names) {
			return nil, fmt.Errorf("%w: open bucket %d: name reference %d of %d names", ErrCorrupt, kp.id, ref, len(c.names))
		}
		b.cols.Fields = append(b.cols.Fields, emptyColumn(c.names[ref], snap.Types[i], 0))
	}
	all := b.capture().cols
	if lo, hi := slices.Min(all.Times), slices.Max(all.Times); lo != b.minT || hi != b.maxT {
		return nil, fmt.Errorf("%w: open bucket %d: times [%d, %d], bounds [%d, %d]", ErrCorrupt, kp.id, lo, hi, b.minT, b.maxT)
	}
	b.mem = memBucketMem + int64(len(b.frozen)) + columnsMem(&b.cols)
	b.size = estimateSize(&all, ts.TimeField)
	b.unordered = !slices.IsSorted(all.Times)
	b.lastNum, b.lastOver = lastNumbers(&all, b.maxT)
	return b, nil
}

// estimateSize is rowBytes summed over the rows of cols.
func estimateSize(cols *bucket.Columns, timeField string) int {
	n := len(cols.Times) * (5 + len(timeField) + 2 + 8)
	for i := range cols.Fields {
		c := &cols.Fields[i]
		for r := range cols.Times {
			if !c.IsPresent(r) {
				continue
			}
			var str string
			if c.Type == model.KindString || c.Type == model.KindBSON {
				str = c.Strings[r]
			}
			n += len(c.Name) + 2 + valueBytes(c.Type, str)
		}
	}
	return n
}

func (db *DB) scan(lower, upper []byte, fn func(k, v []byte) error) error {
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		if err := fn(it.Key(), v); err != nil {
			it.Close()
			return err
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// recover replays the log after the last checkpoint.
func (db *DB) recover() error {
	db.recovering = true
	defer func() { db.recovering = false }()
	var from uint64
	if v, closer, err := db.pdb.Get(keyCheckpoint); err == nil {
		st, derr := decodeCheckpointState(v)
		closer.Close()
		if derr != nil {
			return derr
		}
		from = st.segment
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	var records, rows int
	start := time.Now()
	err := db.wal.Replay(from, func(pos wal.Pos, rec []byte) error {
		if len(rec) == 0 {
			return fmt.Errorf("%w: empty log record at %v", ErrCorrupt, pos)
		}
		records++
		switch rec[0] {
		case recInsert, recInsertByID:
			coll, groups, err := decodeInsert(rec[1:], rec[0] == recInsertByID)
			if err != nil {
				return fmt.Errorf("log record at %v: %w", pos, err)
			}
			c := db.mu.byID[coll]
			if c == nil || c.opts.TimeSeries == nil {
				return nil // collection dropped after the write
			}
			for gi := range groups {
				g := &groups[gi]
				if g.ref != 0 {
					// A series the checkpoint this replay starts from,
					// or an earlier one, made durable: it is loaded.
					if g.s = c.seriesOf(g.ref - 1); g.s == nil {
						return fmt.Errorf("%w: log record at %v names series %d of %q, which the store does not hold", ErrCorrupt, pos, g.ref-1, c.name)
					}
					g.metaKey = g.s.metaKey
				} else if _, err := model.DecodeMetaKey(g.metaKey); err != nil {
					return err
				}
				rows += len(g.rows)
			}
			db.mu.Lock()
			db.apply(c, groups)
			db.mu.Unlock()
		case recDelete, recDeleteWhere:
			d, err := decodeDelete(rec[1:], rec[0] == recDeleteWhere)
			if err != nil {
				return fmt.Errorf("log record at %v: %w", pos, err)
			}
			c := db.mu.byID[d.coll]
			if c == nil {
				return nil
			}
			_, gone, err := db.applyDelete(c, &d)
			if err == nil {
				err = db.refreshFieldTypes(c, gone)
			}
			if err != nil {
				return err
			}
			if c.opts.RollupOf != nil {
				db.mu.Lock()
				db.remarkRollup(c, &d)
				db.mu.Unlock()
			}
		case recMetaUpdate:
			r, err := decodeMetaUpdate(rec[1:])
			if err != nil {
				return fmt.Errorf("log record at %v: %w", pos, err)
			}
			if err := db.replayMetaUpdate(&r, pos); err != nil {
				return err
			}
		case recDocBatch:
			if err := db.replayDocBatch(rec[1:]); err != nil {
				return fmt.Errorf("log record at %v: %w", pos, err)
			}
		default:
			return fmt.Errorf("%w: log record of unknown kind %d at %v", ErrCorrupt, rec[0], pos)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("timeseries: replay log: %w", err)
	}
	if db.readOnly {
		return nil
	}
	if err := db.wal.Truncate(from); err != nil {
		return err
	}
	if records > 0 {
		db.log.Info("replayed log", "records", records, "measurements", rows, "took", time.Since(start))
	}
	return nil
}
