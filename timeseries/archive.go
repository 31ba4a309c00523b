package timeseries

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"math"
	"net/url"
	"runtime"
	"slices"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/archive"
	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/ttl"
)

// Archive on expiry (docs/archive.md). A series whose TTL comes from a
// rule with Archive set is not deleted when its buckets expire: an archive
// pass moves them to Options.Archive as Parquet files (package archive),
// then deletes them. Only buckets stored by a checkpoint are moved: a
// bucket still in memory (an open one, or one the log would replay) waits
// until a checkpoint writes it, so that a crash never brings back rows
// already archived. A pass, for one collection:
//
//  1. undoes what a pass cut off by a crash left: for every intent record,
//     deletes its files from the store, then the record;
//  2. reads the expired stored buckets of the series, within the TTL
//     budget, and encodes them, one file per UTC day;
//  3. writes an intent record naming the files (synced);
//  4. writes the files to the store (durable when Put returns), without
//     the maintenance lock;
//  5. under the maintenance lock, checks that every bucket read is still
//     stored unchanged and not held in memory (else it undoes 4 and 3: the
//     next pass tries again), then deletes the buckets, records the files
//     and their counts in the catalog and deletes the intent, in one
//     batch, durable with the next checkpoint.
//
// A crash before 5 is durable leaves the intent, whose files 1 removes
// (and the buckets, which the next pass moves again); once it is durable
// there is nothing to undo. The intent is made durable by a flush of
// Pebble's memtable (the store runs Pebble without its log), which also
// makes durable every intent an earlier undo deleted. Hourglass reads only recorded files; a Parquet
// engine reading the directory may see an intent's files until step 1.

// ArchiveStats counts what archive passes moved out of a collection.
type ArchiveStats struct {
	Seq          uint64 `json:"seq"`
	Files        int64  `json:"files"`
	Bytes        int64  `json:"bytes"`
	Measurements int64  `json:"measurements"`
}

// ArchiveFile is one archived file, as recorded in the catalog.
type ArchiveFile struct {
	Key  string `json:"key"`
	Date string `json:"date"`
	Rows int64  `json:"rows"`
	Size int64  `json:"size"`
	MinT int64  `json:"minT"`
	MaxT int64  `json:"maxT"`
	// CRC is the CRC-32C of the file's bytes, checked before a read
	// parses it.
	CRC uint32 `json:"crc"`
	// Store is the archive the file went to (objstore.Store.String).
	Store string `json:"store,omitempty"`
}

// ErrNoArchive is returned for an archive rule when the DB has no
// Options.Archive.
var ErrNoArchive = errors.New("timeseries: no archive store is configured")

// Kinds of spaceArchive keys.
const (
	archiveIntent byte = 0x01 // <seq>       -> JSON []string, the keys of the files written
	archiveFile   byte = 0x02 // <seq> <n>   -> JSON ArchiveFile
)

func archiveKey(coll uint32, kind byte, seq uint64) []byte {
	k := collPrefix(spaceArchive, coll)
	k = append(k, kind)
	return binary.BigEndian.AppendUint64(k, seq)
}

// archiveBatchRows is the least a batch of an archive pass moves, whatever
// the TTL monitor's budget of documents (its time budget still holds): a
// file per batch and day, the files hold many rows, which Parquet engines
// read faster and compress better.
const archiveBatchRows = 256 << 10

// archiveMaxRows bounds a batch: its rows are held decoded, then encoded,
// until its files are written, and a file must be readable within a
// query's memory.
const archiveMaxRows = 2 << 20

// archiveRetryMax bounds the wait between failed passes of a collection.
const archiveRetryMax = 5 * time.Minute

// archiveFileKey names the file of day date of pass seq of collection c,
// whose bytes are data: <collection>/date=YYYY-MM-DD/<collection
// id>-<seq>-<hash>.parquet, hash the first 8 bytes of the data's SHA-256
// in hex. The name follows from the pass and its content: a pass tried
// again on the same data writes the same file, and two stores that share
// an archive (a store and one restored from its backup, say) never write
// different bytes under one name.
func archiveFileKey(c *collection, date string, seq uint64, data []byte) string {
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%s/date=%s/%08x-%016x-%x.parquet", url.PathEscape(c.name), date, c.id, seq, sum[:8])
}

// archiveServed refuses, with code, a rule that archives on an engine
// whose writes are logged elsewhere (a replica set member's): rebuilt from
// that log after a crash, it would hold again what it archived.
func (db *DB) archiveServed(code mongoerr.Code) error {
	if db.opts.ExternalLog {
		return mongoerr.New(code, "'archive' is not served by a replica set member yet: a member rebuilt from the raft log would hold again what it archived (docs/archive.md)")
	}
	return nil
}

// splitArchive splits ids into the series that delete and those that
// archive when they expire.
func (db *DB) splitArchive(c *collection, ids []uint64) (del, arc []uint64) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	for _, id := range ids {
		if s := c.seriesOf(id); s != nil && s.archive {
			arc = append(arc, id)
		} else {
			del = append(del, id)
		}
	}
	if len(arc) == 0 {
		return ids, nil
	}
	return del, arc
}

// archivedBucket is a bucket an archive pass read: its key, a hash of its
// value (to see that it did not change before it is deleted) and counts.
type archivedBucket struct {
	key    []byte
	sum    uint64
	series uint64
	id     uint64
	rows   int64
}

// archiveSeries runs one archive pass over series ids of c, rule index.
func (db *DB) archiveSeries(ctx context.Context, c *collection, index string, ids []uint64, now time.Time, budget ttl.Budget) (out ttl.Batch, err error) {
	db.archiveMu.Lock()
	defer db.archiveMu.Unlock()
	db.mu.RLock()
	retry := c.archiveRetry
	db.mu.RUnlock()
	if now := db.opts.Now(); now.Before(retry) {
		return out, nil // backing off after a failure
	}
	// A batch takes at least archiveBatchRows and at most archiveMaxRows,
	// whatever the monitor's budget (none included).
	if budget.Docs <= 0 {
		budget.Docs = archiveMaxRows
	}
	budget.Docs = min(max(budget.Docs, archiveBatchRows), archiveMaxRows)
	out, err = db.archivePass(ctx, c, index, ids, now, budget)
	db.mu.Lock()
	defer db.mu.Unlock()
	if err == nil {
		c.archiveFail, c.archiveRetry, c.archiveWait = "", time.Time{}, 0
		return out, nil
	}
	if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
		return out, err
	}
	// Retried with backoff; logged when it changes, or once a minute.
	c.archiveWait = min(max(2*c.archiveWait, time.Second), archiveRetryMax)
	msg := err.Error()
	t := db.opts.Now()
	if msg != c.archiveFail || t.Sub(c.archiveLog) >= time.Minute {
		db.log.Error("archive pass failed: expired data is kept until the archive can be written",
			"collection", c.name, "err", err, "retryIn", c.archiveWait)
		c.archiveLog = t
	}
	c.archiveFail, c.archiveRetry = msg, t.Add(c.archiveWait)
	// The monitor goes on with other collections: the failure is in the
	// TTL state, not a failed pass.
	return out, nil
}

func (db *DB) archivePass(ctx context.Context, c *collection, index string, ids []uint64, now time.Time, budget ttl.Budget) (out ttl.Batch, err error) {
	st := db.opts.Archive
	if st == nil {
		return out, ErrNoArchive
	}
	if err := db.undoArchiveIntents(ctx, c); err != nil {
		return out, err
	}
	ts := c.opts.TimeSeries
	if ts == nil {
		return out, nil
	}
	batch := archive.NewBatch(ts.TimeField, ts.MetaField)
	var read []archivedBucket
	gone := fieldTypeSet{}
	// The rules the pass reads under: a change before its commit (a
	// longer TTL, archiving turned off) makes it start over.
	db.mu.RLock()
	rulesVer := c.rulesVer
	db.mu.RUnlock()
	more, err := db.archiveRead(ctx, c, index, ids, now, budget, batch, &read, gone)
	if err != nil || len(read) == 0 {
		return out, err
	}
	files, err := batch.Encode()
	if err != nil {
		return out, err
	}
	db.mu.RLock()
	seq := c.archived.Seq + 1
	db.mu.RUnlock()
	keys := make([]string, len(files))
	for i, f := range files {
		keys[i] = archiveFileKey(c, f.Date, seq, f.Data)
	}
	intent, err := json.Marshal(keys)
	if err != nil {
		return out, err
	}
	// The intent is durable before any file is written: Pebble has no
	// log of its own here, so a flush makes it so.
	ik := archiveKey(c.id, archiveIntent, seq)
	if err := db.pdb.Set(ik, intent, pebble.NoSync); err != nil {
		return out, db.diskErr(err)
	}
	if err := db.flushStore(db.stop); err != nil {
		return out, err
	}
	db.archiveHook("intent")
	undo := func(cause error) error {
		for _, k := range keys {
			if err := st.Delete(context.WithoutCancel(ctx), k); err != nil {
				return errors.Join(cause, err) // the intent stays: the next pass retries
			}
		}
		return errors.Join(cause, db.pdb.Delete(ik, pebble.NoSync))
	}
	for i, f := range files {
		if err := st.Put(ctx, keys[i], bytes.NewReader(f.Data), int64(len(f.Data))); err != nil {
			return out, undo(fmt.Errorf("archive %s: %w", st, err))
		}
	}
	db.archiveHook("files")
	docs, buckets, err := db.archiveCommit(c, seq, rulesVer, files, keys, read, gone)
	if err != nil {
		return out, undo(err)
	}
	db.archiveHook("commit")
	out.Docs, out.Buckets, out.More = docs, buckets, more
	return out, nil
}

func (db *DB) archiveHook(step string) {
	if h := db.hooks.archiveStep; h != nil {
		h(step)
	}
}

// errArchiveRace aborts a pass whose buckets changed while its files were
// written.
var errArchiveRace = errors.New("timeseries: buckets changed while they were archived; the next pass archives them again")

// archiveScan is an archive pass's walk over the stored buckets of a
// collection, under the maintenance lock.
type archiveScan struct {
	db    *DB
	c     *collection
	now   time.Time
	it    *pebble.Iterator
	inMem map[uint64]bool // the current series' buckets in memory
}

// series reads, under DB.mu, what a pass needs of series id: its cutoff,
// its meta key and the ids of its buckets in memory (whose stored copies
// are older); false when it does not archive.
func (a *archiveScan) series(id uint64) (cutoff int64, metaKey string, ok bool) {
	a.db.mu.RLock()
	defer a.db.mu.RUnlock()
	c := a.c
	s := c.seriesOf(id)
	if s == nil || s.ttl < 0 || !s.archive || c.dropped || c.oorBuckets > 0 {
		return 0, "", false
	}
	clear(a.inMem)
	for _, b := range s.buckets {
		a.inMem[b.id] = true
	}
	return ttl.Cutoff(a.now, s.ttl), s.metaKey, true
}

// expired reports whether the bucket at the iterator is one to move,
// with its key's parts and value.
func (a *archiveScan) expired(cutoff int64) (kp bucketKeyParts, v []byte, rows int, ok bool, err error) {
	if kp, err = parseBucketKey(a.it.Key()); err != nil || a.inMem[kp.id] {
		return kp, nil, 0, false, err // a newer copy lives in memory
	}
	if v, err = a.it.ValueAndErr(); err != nil {
		return kp, nil, 0, false, err
	}
	rows, _, maxT, err := bucket.Peek(v)
	if err != nil {
		return kp, nil, 0, false, fmt.Errorf("series %d bucket %d: %w", kp.series, kp.id, err)
	}
	return kp, v, rows, maxT < cutoff, nil
}

// window returns the end of the pass's window: a pass moves the oldest
// UTC day of expired data first, across all the series, so that a day's
// file holds every series of the day. The least min time of a bucket to
// move makes the window; the pass takes the buckets that start before
// its end. ok is false when nothing is to move.
func (a *archiveScan) window(ctx context.Context, order []uint64) (end int64, ok bool, err error) {
	c := a.c
	first := int64(math.MaxInt64)
	for n, id := range order {
		if n%64 == 63 {
			if err := ctx.Err(); err != nil {
				return 0, false, err
			}
		}
		cutoff, _, ok := a.series(id)
		if !ok {
			continue
		}
		upper := seriesTimeKey(spaceBucket, c.id, id, min(cutoff, first))
		for valid := a.it.SeekGE(seriesPrefix(spaceBucket, c.id, id)); valid && bytes.Compare(a.it.Key(), upper) < 0; valid = a.it.Next() {
			kp, _, _, ok, err := a.expired(cutoff)
			if err != nil {
				return 0, false, err
			}
			if ok {
				first = min(first, kp.minTime)
				break
			}
		}
	}
	if first == math.MaxInt64 {
		return 0, false, nil
	}
	const day = int64(24 * time.Hour)
	return floorDiv(first, day) + day, true, nil
}

// archiveRead reads, under the maintenance lock, the expired stored
// buckets of series ids in the pass's window into batch, within budget,
// and lists them in read.
func (db *DB) archiveRead(ctx context.Context, c *collection, index string, ids []uint64, now time.Time, budget ttl.Budget, batch *archive.Batch, read *[]archivedBucket, gone fieldTypeSet) (more bool, err error) {
	resumeKey := "\x00archive:" + index
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	if err := db.settlePending(); err != nil {
		return false, err
	}
	// The name table after any checkpoint the stored buckets come from.
	db.mu.RLock()
	resume := c.ttlResume[resumeKey]
	names := c.names
	db.mu.RUnlock()
	start, _ := slices.BinarySearch(ids, resume+1)
	order := append(slices.Clip(ids[start:]), ids[:start]...)
	cp := collPrefix(spaceBucket, c.id)
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: cp, UpperBound: prefixEnd(cp)})
	if err != nil {
		return false, err
	}
	defer it.Close()
	a := &archiveScan{db: db, c: c, now: now, it: it, inMem: map[uint64]bool{}}
	windowEnd, ok, err := a.window(ctx, order)
	if err != nil || !ok {
		return false, err
	}
	var r bucket.Reader
	over := func() bool {
		return (budget.Docs > 0 && batch.Rows() >= budget.Docs) ||
			(!budget.Deadline.IsZero() && db.opts.Now().After(budget.Deadline))
	}
	last := resume
	for n, id := range order {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if over() {
			more = true
			break
		}
		if n%64 == 63 {
			runtime.Gosched()
		}
		cutoff, metaKey, ok := a.series(id)
		if !ok {
			last = id
			continue
		}
		meta := model.MetaOfKey(metaKey)
		upper := seriesTimeKey(spaceBucket, c.id, id, min(cutoff, windowEnd))
		stopped := false
		for valid := it.SeekGE(seriesPrefix(spaceBucket, c.id, id)); valid && bytes.Compare(it.Key(), upper) < 0; valid = it.Next() {
			kp, v, rows, ok, err := a.expired(cutoff)
			if err != nil {
				return false, err
			}
			if !ok {
				continue
			}
			if over() {
				stopped = true
				break
			}
			v = slices.Clone(v) // decoded columns may point into it
			if err := r.ResetNames(v, names); err != nil {
				return false, fmt.Errorf("series %d bucket %d: %w", id, kp.id, err)
			}
			cols, err := decodeAll(&r)
			if err != nil {
				return false, fmt.Errorf("series %d bucket %d: %w", id, kp.id, err)
			}
			gone.addStored(&r)
			batch.Add(metaKey, meta, &cols)
			h := fnv.New64a()
			h.Write(v)
			*read = append(*read, archivedBucket{key: slices.Clone(it.Key()), sum: h.Sum64(), series: id, id: kp.id, rows: int64(rows)})
		}
		if stopped {
			more = true
			last = id - 1 // resume with this series
			break
		}
		last = id
	}
	if !more {
		last = 0
		// The next window may hold more: the monitor asks again until a
		// pass finds nothing.
		more = len(*read) > 0
	}
	db.mu.Lock()
	if c.ttlResume == nil {
		c.ttlResume = map[string]uint64{}
	}
	c.ttlResume[resumeKey] = last
	db.mu.Unlock()
	return more, nil
}

// archiveCommit deletes the buckets read, once their files are durable,
// and records the files: one batch.
func (db *DB) archiveCommit(c *collection, seq, rulesVer uint64, files []archive.File, keys []string, read []archivedBucket, gone fieldTypeSet) (docs, buckets int64, err error) {
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	// Every bucket read is still stored as it was, and none was taken
	// back into memory.
	for _, a := range read {
		v, closer, err := db.pdb.Get(a.key)
		if errors.Is(err, pebble.ErrNotFound) {
			return 0, 0, errArchiveRace
		}
		if err != nil {
			return 0, 0, db.diskErr(err)
		}
		h := fnv.New64a()
		h.Write(v)
		same := h.Sum64() == a.sum
		_ = closer.Close()
		if !same {
			return 0, 0, errArchiveRace
		}
		docs += a.rows
		buckets++
	}
	b := db.pdb.NewBatch()
	defer b.Close()
	for _, a := range read {
		if err := b.Delete(a.key, nil); err != nil {
			return 0, 0, err
		}
	}
	st := ArchiveStats{Seq: seq}
	for i, f := range files {
		rec, err := json.Marshal(ArchiveFile{Key: keys[i], Date: f.Date, Rows: f.Rows, Size: int64(len(f.Data)),
			MinT: f.MinT, MaxT: f.MaxT, CRC: crc32.Checksum(f.Data, crcTable), Store: db.opts.Archive.String()})
		if err != nil {
			return 0, 0, err
		}
		fk := binary.BigEndian.AppendUint16(archiveKey(c.id, archiveFile, seq), uint16(i))
		if err := b.Set(fk, rec, nil); err != nil {
			return 0, 0, err
		}
		st.Files++
		st.Bytes += int64(len(f.Data))
		st.Measurements += f.Rows
	}
	if err := b.Delete(archiveKey(c.id, archiveIntent, seq), nil); err != nil {
		return 0, 0, err
	}
	db.mu.Lock()
	if c.dropped {
		// Dropped while the files were written: they are undone.
		db.mu.Unlock()
		return 0, 0, notFound(c.name)
	}
	if c.rulesVer != rulesVer {
		db.mu.Unlock()
		return 0, 0, errArchiveRace
	}
	for _, a := range read {
		if s := c.seriesOf(a.series); s != nil {
			for _, mb := range s.buckets {
				if mb.id == a.id {
					db.mu.Unlock()
					return 0, 0, errArchiveRace
				}
			}
		}
	}
	// No checkpoint writes c's record before this batch is applied
	// (maintMu is held), and writers do not take stored buckets back into
	// memory: the lock is not needed across the sync. The counts in
	// memory change together once it is applied, so that a describe sees
	// every measurement either live or archived.
	next := c.archived
	next.Seq = seq
	next.Files += st.Files
	next.Bytes += st.Bytes
	next.Measurements += st.Measurements
	before := c.archived
	c.ckptCount -= docs
	c.ckptBuckets -= buckets
	c.archived = next
	rec, err := c.record()
	c.archived = before
	db.mu.Unlock()
	if err == nil {
		err = b.Set(catalogKey(c.name), rec, nil)
	}
	if err == nil {
		// Reads with the archive that listed the files before this and
		// take their snapshot after it fail and are retried
		// (archiveView.gen): they would miss the rows moved.
		db.archiveGen.Add(1)
		if err = db.pdb.Apply(b, pebble.NoSync); err != nil {
			err = db.diskErr(err)
		}
	}
	db.mu.Lock()
	if err != nil {
		c.ckptCount += docs
		c.ckptBuckets += buckets
		db.mu.Unlock()
		return 0, 0, err
	}
	c.archived = next
	c.count -= docs
	c.buckets -= buckets
	c.dirty = true
	db.mu.Unlock()
	db.expiredUnflushed.Store(true)
	// Committed: a failure from here on must not undo the files.
	if err := db.refreshFieldTypes(c, gone); err != nil {
		db.log.Warn("after an archive pass, the collection's field types were not refreshed", "collection", c.name, "err", err)
	}
	return docs, buckets, nil
}

// undoArchiveIntents removes the files of the intents of c that a pass
// cut off left, then the intents.
func (db *DB) undoArchiveIntents(ctx context.Context, c *collection) error {
	p := append(collPrefix(spaceArchive, c.id), archiveIntent)
	var found [][2][]byte
	err := db.scan(p, prefixEnd(p), func(k, v []byte) error {
		found = append(found, [2][]byte{slices.Clone(k), slices.Clone(v)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, kv := range found {
		var keys []string
		if err := json.Unmarshal(kv[1], &keys); err != nil {
			return fmt.Errorf("%w: archive intent of %q: %v", ErrCorrupt, c.name, err)
		}
		for _, k := range keys {
			if err := db.opts.Archive.Delete(ctx, k); err != nil {
				return fmt.Errorf("archive %s: remove %s, left by an interrupted pass: %w", db.opts.Archive, k, err)
			}
		}
		if err := db.pdb.Delete(kv[0], pebble.NoSync); err != nil {
			return db.diskErr(err)
		}
	}
	return nil
}

// sweepArchiveIntents undoes, at Open, what archive passes cut off by a
// crash left, whatever the collections' rules are now: a pass undoes its
// collection's intents first, but no pass may come (archiving turned
// off since). A failure is logged; the next pass of the collection
// tries again.
func (db *DB) sweepArchiveIntents() {
	if db.opts.Archive == nil {
		return
	}
	var colls []*collection
	db.mu.RLock()
	for _, c := range db.mu.byID {
		colls = append(colls, c)
	}
	db.mu.RUnlock()
	for _, c := range colls {
		p := append(collPrefix(spaceArchive, c.id), archiveIntent)
		found := false
		_ = db.scan(p, prefixEnd(p), func(_, _ []byte) error { found = true; return errStopScan })
		if !found {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		db.archiveMu.Lock()
		err := db.undoArchiveIntents(ctx, c)
		db.archiveMu.Unlock()
		cancel()
		if err != nil {
			db.log.Warn("the files of an archive pass cut off by a crash were not removed; the collection's next pass tries again",
				"collection", c.name, "err", err)
		}
	}
}

// ArchivedFiles lists the archived files of collection name recorded in
// the catalog, in the order they were written.
func (db *DB) ArchivedFiles(ctx context.Context, name string) ([]ArchiveFile, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	return db.archivedFiles(ctx, c)
}

func (db *DB) archivedFiles(ctx context.Context, c *collection) ([]ArchiveFile, error) {
	p := append(collPrefix(spaceArchive, c.id), archiveFile)
	var out []ArchiveFile
	err := db.scan(p, prefixEnd(p), func(_, v []byte) error {
		var f ArchiveFile
		if err := json.Unmarshal(v, &f); err != nil {
			return fmt.Errorf("%w: archive file record of %q: %v", ErrCorrupt, c.name, err)
		}
		out = append(out, f)
		return ctx.Err()
	})
	return out, err
}
