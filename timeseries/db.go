package timeseries

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries/wal"
	"github.com/hourglassdb/hourglass/ttl"
)

// DB is a store of collections. It is safe for concurrent use.
//
// Writes go to the log (fsynced, group-committed) and then into buckets in
// memory; a checkpoint writes buckets to Pebble and truncates the log.
// docs/architecture.md describes the write, read and recovery paths.
type DB struct {
	opts Options
	lim  limits
	log  *slog.Logger
	pdb  *pebble.DB
	wal  *wal.Log
	// symbols caches decoded shared symbol blocks for reads; nil when off.
	symbols *symbolCache

	// maintMu serializes checkpoints, deletes and catalog changes.
	maintMu sync.Mutex
	// cutMu is held shared by writers from their log append until their
	// measurements are in memory, and exclusively by a checkpoint while it
	// cuts the log and captures memory, so the capture holds exactly the
	// records before the cut.
	cutMu sync.RWMutex
	// mu guards the catalog and every bucket in memory (collection, series
	// and memBucket fields).
	mu          sync.RWMutex
	collections map[string]*collection
	byID        map[uint32]*collection
	nextColl    uint32
	nextSeries  uint64
	nextBucket  uint64
	writeSeq    uint64
	headMem     atomic.Int64 // bytes held by buckets in memory
	closed      atomic.Bool
	recovering  bool // replaying the log in Open

	encPool sync.Pool // *recordEncoder

	wake     chan struct{} // buffered(1): asks the checkpointer to run
	stop     chan struct{}
	done     chan struct{}
	closeErr error
	closeMu  sync.Mutex

	stats struct {
		checkpoints atomic.Int64
		sealedEarly atomic.Int64
		// aggBuckets counts the buckets whose rows an aggregate read:
		// one add per bucket, so tests can see buckets passed over.
		aggBuckets atomic.Int64
	}
}

// Open opens or creates the store in opts.Dir, replays the log, and starts
// the background checkpointer. Close must be called.
func Open(opts Options) (*DB, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	db := &DB{
		opts:        opts,
		lim:         limits{maxCount: opts.BucketMaxCount, maxBytes: opts.BucketMaxBytes, maxOpen: opts.MaxOpenBucketsPerSeries},
		symbols:     newSymbolCacheOrNil(opts.SymbolCacheBytes),
		log:         opts.Logger,
		collections: make(map[string]*collection),
		byID:        make(map[uint32]*collection),
		nextColl:    1,
		nextSeries:  1,
		nextBucket:  1,
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	db.encPool.New = func() any { return &recordEncoder{} }
	po := pebbleOptions(opts.Logger)
	po.Cache = pebble.NewCache(blockCacheSize)
	pdb, err := pebble.Open(filepath.Join(opts.Dir, "store"), po)
	po.Cache.Unref() // the store holds its own reference
	if err != nil {
		return nil, fmt.Errorf("timeseries: open store in %s: %w", opts.Dir, err)
	}
	db.pdb = pdb
	if err := db.load(); err != nil {
		pdb.Close()
		return nil, err
	}
	w, err := wal.Open(wal.Options{Dir: filepath.Join(opts.Dir, "wal"), SegmentSize: opts.LogSegmentSize,
		NoSync: opts.NoSync, Logger: opts.Logger})
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
	go db.run()
	return db, nil
}

// blockCacheSize is Pebble's block cache: index and filter blocks, and
// the documents and buckets read most.
const blockCacheSize = 64 << 20

// pebbleOptions configures Pebble for bucket storage. Pebble's own WAL is
// off: durability comes from the log, and a checkpoint flushes memtables
// before the log is truncated. Buckets are compressed already, so blocks are
// stored without another compression pass.
func pebbleOptions(logger *slog.Logger) *pebble.Options {
	o := &pebble.Options{
		DisableWAL:   true,
		MemTableSize: 32 << 20,
		Logger:       pebbleLogger{logger},
	}
	o.Levels = make([]pebble.LevelOptions, 7)
	for i := range o.Levels {
		o.Levels[i].Compression = pebble.NoCompression
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

// load reads the catalog, the series and the open-bucket snapshots.
func (db *DB) load() error {
	v, closer, err := db.pdb.Get(keyFormat)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
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
	}
	if v, closer, err := db.pdb.Get(keyCheckpoint); err == nil {
		st, derr := decodeCheckpointState(v)
		closer.Close()
		if derr != nil {
			return derr
		}
		db.nextColl, db.nextSeries, db.nextBucket = max(st.nextColl, 1), max(st.nextSeries, 1), max(st.nextBucket, 1)
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	// Catalog.
	if err := db.scan([]byte{spaceCatalog}, []byte{spaceCatalog + 1}, func(k, v []byte) error {
		r, err := decodeCollectionRecord(v)
		if err != nil {
			return err
		}
		c, err := r.toCollection()
		if err != nil {
			return err
		}
		db.collections[c.name] = c
		db.byID[c.id] = c
		db.nextColl = max(db.nextColl, c.id+1)
		return nil
	}); err != nil {
		return err
	}
	// Series.
	if err := db.scan([]byte{spaceSeries}, []byte{spaceSeries + 1}, func(k, v []byte) error {
		if len(k) != 13 {
			return fmt.Errorf("%w: series key of %d bytes", ErrCorrupt, len(k))
		}
		c := db.byID[binary.BigEndian.Uint32(k[1:])]
		if c == nil {
			return nil // left over from a dropped collection
		}
		meta, err := DecodeMeta(string(v))
		if err != nil {
			return err
		}
		s := &series{id: binary.BigEndian.Uint64(k[5:]), coll: c, metaKey: string(v), meta: meta, persisted: true}
		c.series[s.metaKey] = s
		c.seriesByID[s.id] = s
		db.nextSeries = max(db.nextSeries, s.id+1)
		return nil
	}); err != nil {
		return err
	}
	// Open-bucket snapshots.
	var r bucket.Reader
	return db.scan([]byte{spaceOpen}, []byte{spaceOpen + 1}, func(k, v []byte) error {
		kp, err := parseBucketKey(k)
		if err != nil {
			return err
		}
		c := db.byID[kp.coll]
		if c == nil {
			return nil
		}
		s := c.seriesByID[kp.series]
		if s == nil {
			return fmt.Errorf("%w: open bucket %d of unknown series %d", ErrCorrupt, kp.id, kp.series)
		}
		b, err := decodeMemBucket(&r, v, kp, c)
		if err != nil {
			return err
		}
		b.snapshot = true
		s.buckets = append(s.buckets, b)
		db.headMem.Add(b.mem)
		db.nextBucket = max(db.nextBucket, kp.id+1)
		return nil
	})
}

// decodeMemBucket rebuilds an open bucket from its snapshot.
func decodeMemBucket(r *bucket.Reader, v []byte, kp bucketKeyParts, c *collection) (*memBucket, error) {
	ts := c.opts.TimeSeries
	if err := r.ResetNames(v, c.names); err != nil {
		return nil, fmt.Errorf("open bucket %d: %w", kp.id, err)
	}
	b := &memBucket{id: kp.id, minTime: kp.minTime, span: ts.Span(), minT: r.MinTime(), maxT: r.MaxTime()}
	var err error
	if b.cols, err = decodeAll(r); err != nil {
		return nil, fmt.Errorf("open bucket %d: %w", kp.id, err)
	}
	b.mem = columnsMem(&b.cols)
	b.size = estimateSize(&b.cols, ts.TimeField)
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
			n += len(c.Name) + 2
			switch c.Type {
			case KindString:
				n += 5 + len(c.Strings[r])
			case KindBool:
				n++
			default:
				n += 8
			}
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
		case recInsert:
			coll, groups, err := decodeInsert(rec[1:])
			if err != nil {
				return fmt.Errorf("log record at %v: %w", pos, err)
			}
			c := db.byID[coll]
			if c == nil || c.opts.TimeSeries == nil {
				return nil // collection dropped after the write
			}
			for gi := range groups {
				meta, err := DecodeMeta(groups[gi].metaKey)
				if err != nil {
					return err
				}
				groups[gi].meta = meta
				rows += len(groups[gi].rows)
			}
			db.mu.Lock()
			db.apply(c, groups)
			db.mu.Unlock()
		case recDelete:
			d, err := decodeDelete(rec[1:])
			if err != nil {
				return fmt.Errorf("log record at %v: %w", pos, err)
			}
			c := db.byID[d.coll]
			if c == nil {
				return nil
			}
			if _, err := db.applyDelete(c, &d); err != nil {
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
	if err := db.wal.Truncate(from); err != nil {
		return err
	}
	if records > 0 {
		db.log.Info("replayed log", "records", records, "measurements", rows, "took", time.Since(start))
	}
	return nil
}

// Close writes a final checkpoint, stops the background work and closes the
// store. Calling Close more than once is harmless.
func (db *DB) Close() error {
	db.closeMu.Lock()
	defer db.closeMu.Unlock()
	if db.closed.Load() {
		return db.closeErr
	}
	close(db.stop)
	<-db.done
	err := db.checkpoint()
	db.closed.Store(true)
	db.closeErr = errors.Join(err, db.wal.Close(), db.pdb.Close())
	return db.closeErr
}

// run is the checkpointer: one goroutine, woken by the ticker or by wake.
func (db *DB) run() {
	defer close(db.done)
	t := time.NewTicker(db.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
		case <-db.wake:
		}
		if err := db.checkpoint(); err != nil {
			db.log.Error("checkpoint failed", "err", err)
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
	return db.checkpoint()
}

// Flush writes everything to disk (Checkpoint) and compacts the store, so
// that its size on disk is settled.
func (db *DB) Flush() error {
	if err := db.Checkpoint(); err != nil {
		return err
	}
	return db.pdb.Compact([]byte{0x00}, []byte{0xff}, true)
}

type ckptBucket struct {
	coll   uint32
	series uint64
	cap    captured
	refs   []uint32 // the fields' indexes in the collection's name table
	sealed bool
}

func (db *DB) checkpoint() error {
	db.maintMu.Lock()
	defer db.maintMu.Unlock()

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
	db.mu.Lock()
	for _, c := range db.byID {
		for _, s := range c.series {
			if !s.persisted {
				newSeries = append(newSeries, seriesRec{seriesKey(c.id, s.id), s.metaKey, s})
			}
			for _, b := range s.buckets {
				if !b.sealed && !b.dirty && b.snapshot {
					continue
				}
				w := ckptBucket{coll: c.id, series: s.id, cap: b.capture(), sealed: b.sealed}
				w.refs = c.nameRefs(nil, &w.cap.cols)
				work = append(work, w)
				b.dirty = false
			}
		}
		if c.dirty {
			c.ckptCount, c.ckptBuckets = c.count, c.buckets
			rec, err := c.record()
			if err != nil {
				db.mu.Unlock()
				db.cutMu.Unlock()
				return err
			}
			catalog = append(catalog, [2][]byte{catalogKey(c.name), rec})
			c.dirty = false
		}
	}
	st := checkpointState{segment: seg, nextColl: db.nextColl, nextSeries: db.nextSeries, nextBucket: db.nextBucket}
	db.mu.Unlock()
	db.cutMu.Unlock()

	// Encode and write outside the locks.
	batch := db.pdb.NewBatch()
	defer batch.Close()
	var enc bucket.Encoder
	var buf []byte
	for _, sr := range newSeries {
		if err := batch.Set(sr.key, []byte(sr.meta), nil); err != nil {
			return err
		}
	}
	for i := range work {
		w := &work[i]
		b := w.cap.b
		cols := &w.cap.cols
		if buf, err = enc.EncodeRefs(buf[:0], cols, w.refs); err != nil {
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
	if err := db.pdb.Apply(batch, pebble.NoSync); err != nil {
		return err
	}
	if _, err := db.pdb.AsyncFlush(); err != nil {
		return err
	}
	if err := db.pdb.Flush(); err != nil {
		return err
	}

	// The checkpoint is durable: drop sealed buckets from memory.
	db.mu.Lock()
	for _, sr := range newSeries {
		sr.s.persisted = true
	}
	var freed int64
	for i := range work {
		w := &work[i]
		b := w.cap.b
		if !w.sealed {
			b.snapshot = true
			continue
		}
		c := db.byID[w.coll]
		if c == nil {
			continue
		}
		s := c.seriesByID[w.series]
		if s == nil {
			continue
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
	db.mu.Unlock()
	db.stats.checkpoints.Add(1)
	return db.wal.Truncate(seg)
}

// lookup returns the live collection called name.
func (db *DB) lookup(name string) (*collection, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	db.mu.RLock()
	c := db.collections[name]
	db.mu.RUnlock()
	if c == nil {
		return nil, notFound(name)
	}
	return c, nil
}

// InsertOptions control an insert.
type InsertOptions struct {
	// Unordered stores every valid measurement; otherwise the insert stops
	// at the first invalid one, as MongoDB's ordered inserts do.
	Unordered bool
}

// WriteError is a refused measurement of an insert.
type WriteError struct {
	Index int
	Err   error
}

// InsertResult reports what an insert stored.
type InsertResult struct {
	Inserted int
	Errors   []WriteError
}

// Insert validates ms and stores the valid ones in collection name. When it
// returns, the stored measurements are durable and visible. A measurement
// that is refused stores nothing of itself; with ordered inserts nothing
// after it is stored either. The error is non-nil only when nothing could be
// attempted (unknown collection, closed DB, I/O failure): refusals of single
// measurements are in the result.
func (db *DB) Insert(ctx context.Context, name string, ms []Measurement, opts InsertOptions) (InsertResult, error) {
	var res InsertResult
	c, err := db.lookup(name)
	if err != nil {
		return res, err
	}
	db.mu.RLock()
	ts := c.opts.TimeSeries
	db.mu.RUnlock()
	if ts == nil {
		return res, mongoerr.New(mongoerr.IllegalOperation, "collection %q is not a time-series collection", name)
	}
	// Validate and group by meta value.
	groups := make([]group, 0, 8)
	index := make(map[string]int)
	var lastKey string
	lastGroup := -1
	// Each measurement's group (-1: refused), then the groups' rows in one
	// allocation of exactly the right size.
	gidx := make([]int32, len(ms))
	for i := range gidx {
		gidx[i] = -1
	}
	var counts []int
	for i := range ms {
		m := &ms[i]
		err := m.validate(ts)
		var key string
		if err == nil {
			if k, ok := m.Meta.(MetaKey); ok {
				key = string(k)
			} else {
				key, err = CanonicalMeta(m.Meta)
			}
		}
		gi := lastGroup
		if err == nil && (gi < 0 || key != lastKey) {
			var ok bool
			if gi, ok = index[key]; !ok {
				if k, isKey := m.Meta.(MetaKey); isKey {
					// A key of a series the collection holds was checked
					// when the series was created; check the others, once
					// per batch.
					db.mu.RLock()
					_, known := c.series[key]
					db.mu.RUnlock()
					if !known {
						err = validMetaKey(k)
					}
				}
				if err == nil {
					gi = len(groups)
					index[key] = gi
					groups = append(groups, group{metaKey: key, meta: m.Meta})
					counts = append(counts, 0)
				}
			}
			if err == nil {
				lastKey, lastGroup = key, gi
			}
		}
		if err != nil {
			res.Errors = append(res.Errors, WriteError{Index: i, Err: err})
			if !opts.Unordered {
				break
			}
			continue
		}
		gidx[i] = int32(gi)
		counts[gi]++
		res.Inserted++
	}
	if res.Inserted == 0 {
		return res, nil
	}
	rows := make([]Measurement, res.Inserted)
	off := 0
	for gi := range groups {
		groups[gi].rows = rows[off : off : off+counts[gi]]
		off += counts[gi]
	}
	for i, gi := range gidx {
		if gi >= 0 {
			groups[gi].rows = append(groups[gi].rows, ms[i])
		}
	}
	if err := db.waitForMemory(ctx); err != nil {
		res.Inserted = 0
		return res, err
	}
	enc := db.encPool.Get().(*recordEncoder)
	rec := enc.encodeInsert(make([]byte, 0, 64+len(ms)*32), c.id, groups)
	db.encPool.Put(enc)

	db.cutMu.RLock()
	if _, err := db.wal.Append(rec); err != nil {
		db.cutMu.RUnlock()
		res.Inserted = 0
		return res, fmt.Errorf("timeseries: insert into %q: %w", name, err)
	}
	db.mu.Lock()
	if c.dropped {
		db.mu.Unlock()
		db.cutMu.RUnlock()
		res.Inserted = 0
		return res, notFound(name)
	}
	db.apply(c, groups)
	db.mu.Unlock()
	db.cutMu.RUnlock()
	if db.wal.Size() > db.opts.CheckpointLogBytes {
		db.wakeCheckpointer()
	}
	return res, nil
}

// waitForMemory blocks while buckets in memory exceed the budget, sealing
// open buckets early and asking for a checkpoint.
func (db *DB) waitForMemory(ctx context.Context) error {
	if db.headMem.Load() <= db.opts.MemoryBudget {
		return nil
	}
	db.sealForBudget()
	for db.headMem.Load() > db.opts.MemoryBudget {
		db.wakeCheckpointer()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if db.closed.Load() {
			return ErrClosed
		}
	}
	return nil
}

// sealForBudget seals the least recently written open buckets until the
// open ones hold at most half the budget.
func (db *DB) sealForBudget() {
	db.mu.Lock()
	defer db.mu.Unlock()
	type ob struct {
		b *memBucket
		s *series
	}
	var open []ob
	var openMem int64
	for _, c := range db.byID {
		for _, s := range c.series {
			for _, b := range s.buckets {
				if !b.sealed {
					open = append(open, ob{b, s})
					openMem += b.mem
				}
			}
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i].b.lastWrite < open[j].b.lastWrite })
	for _, o := range open {
		if openMem <= db.opts.MemoryBudget/2 {
			break
		}
		openMem -= o.b.mem
		db.seal(o.b)
		db.stats.sealedEarly.Add(1)
	}
}

// apply adds groups to the buckets in memory. db.mu must be held.
func (db *DB) apply(c *collection, groups []group) {
	ts := c.opts.TimeSeries
	span, rounding := ts.Span(), ts.Rounding()
	if span > c.maxSpan {
		c.maxSpan = span
		c.dirty = true
	}
	db.writeSeq++
	seq := db.writeSeq
	var added int64
	for gi := range groups {
		g := &groups[gi]
		s := c.series[g.metaKey]
		if s == nil {
			meta := g.meta
			if _, ok := meta.(MetaKey); ok {
				meta, _ = DecodeMeta(g.metaKey) // validated by Insert
			}
			s = &series{id: db.nextSeries, coll: c, metaKey: g.metaKey, meta: meta}
			c.setSeriesTTL(s)
			db.nextSeries++
			c.series[s.metaKey] = s
			c.seriesByID[s.id] = s
		}
		var cur *memBucket
		for ri := range g.rows {
			m := &g.rows[ri]
			sz := m.rowBytes(ts.TimeField)
			if cur == nil || !cur.fits(m.Time, sz, m.Fields, &db.lim) {
				cur = db.bucketFor(c, s, m, sz, span, rounding)
			}
			nf := len(cur.cols.Fields)
			added += cur.appendRow(m.Time, sz, m.Fields)
			if !cur.oor && !ttl.InRange(m.Time) {
				cur.oor = true
				if c.oorBuckets++; c.oorBuckets == 1 && !db.recovering {
					db.log.Warn("expiry suspended: the collection holds a measurement outside 1970-01-01T00:00:00Z..2038-01-19T03:14:07Z",
						"collection", c.name, "time", time.Unix(0, m.Time).UTC())
				}
			}
			cur.dirty = true
			cur.lastWrite = seq
			// A field type can only be new to the collection where it is
			// new to the bucket.
			for i := nf; i < len(cur.cols.Fields); i++ {
				col := &cur.cols.Fields[i]
				if t := c.fieldTypes[col.Name]; !t.has(col.Type) {
					if t == 0 {
						c.addName(col.Name)
					}
					c.fieldTypes[col.Name] = t | 1<<col.Type
				}
			}
			c.count++
			c.dirty = true
			if cur.rows() >= db.lim.maxCount {
				db.seal(cur)
				cur = nil
			}
		}
	}
	db.headMem.Add(added)
}

// bucketFor finds an open bucket of s that takes m, or opens one, applying
// the rollover rules. db.mu must be held.
func (db *DB) bucketFor(c *collection, s *series, m *Measurement, sz int, span, rounding int64) *memBucket {
	var newest *memBucket
	nOpen := 0
	for _, b := range s.buckets {
		if b.sealed {
			continue
		}
		if b.fits(m.Time, sz, m.Fields, &db.lim) {
			return b
		}
		nOpen++
		if newest == nil || b.minTime > newest.minTime {
			newest = b
		}
	}
	// A full newest bucket is closed. A newer measurement past the newest
	// bucket's span leaves it open, so that measurements a little late
	// (another writer's batch, a retried request) still join it rather
	// than open a small out-of-order bucket; buckets whose span ended more
	// than a span before the new measurement are closed: in-order data has
	// moved on.
	if newest != nil && (newest.rows() >= db.lim.maxCount || newest.size+sz > db.lim.maxBytes) {
		db.seal(newest)
		nOpen--
	}
	if newest != nil && m.Time >= newest.minTime+newest.span {
		for _, b := range s.buckets {
			if !b.sealed && b.minTime+b.span <= m.Time-span {
				db.seal(b)
				nOpen--
			}
		}
	}
	for nOpen >= db.lim.maxOpen {
		// Too many open buckets: seal the least recently written.
		var lru *memBucket
		for _, b := range s.buckets {
			if !b.sealed && (lru == nil || b.lastWrite < lru.lastWrite) {
				lru = b
			}
		}
		db.seal(lru)
		nOpen--
	}
	if newest != nil {
		s.rowsHint = min(max(s.rowsHint, newest.rows()), db.lim.maxCount)
	}
	b := &memBucket{id: db.nextBucket, minTime: floorDiv(m.Time, rounding), span: span, capHint: s.rowsHint}
	db.nextBucket++
	s.buckets = append(s.buckets, b)
	c.buckets++
	return b
}

// seal closes b: its rows are sorted by time and it waits for the next
// checkpoint. db.mu must be held.
func (db *DB) seal(b *memBucket) {
	if b.sealed {
		return
	}
	b.sealed = true
	b.cols = sortedColumns(&b.cols)
	mem := columnsMem(&b.cols)
	db.headMem.Add(mem - b.mem)
	b.mem = mem
}
