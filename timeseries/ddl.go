package timeseries

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/ttl"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// CreateCollection creates a collection. It returns created=false without
// error when the collection exists with identical options (after
// defaults), and NamespaceExists (48) when it exists with others. A
// create whose record reached the store but whose flush failed returns
// the flush's error and makes nothing, but takes the collection id: a
// later flush may make that record durable, and then a restart finds the
// collection, as a create tried again (and durable) makes it anyway.
func (db *DB) CreateCollection(ctx context.Context, name string, opts CollectionOptions) (created bool, err error) {
	if err := db.checkWritable(); err != nil {
		return false, err
	}
	if err := ValidateName(name); err != nil {
		return false, err
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return false, err
	}
	if opts.Archive {
		if err := db.archiveServed(mongoerr.InvalidOptions); err != nil {
			return false, err
		}
	}
	if db.closed.Load() {
		return false, ErrClosed
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	if err := db.resolveRollupSource(&opts); err != nil {
		return false, err
	}
	db.mu.RLock()
	old := db.coll.byName[name]
	db.mu.RUnlock()
	if old != nil {
		if old.opts.Equal(opts) {
			return false, nil
		}
		return false, mongoerr.New(mongoerr.NamespaceExists, "collection %q already exists with different options", name)
	}
	c := &collection{
		id: db.mu.nextColl, name: name, opts: opts,
		oldestMin: math.MaxInt64, newMin: math.MaxInt64, // no bucket yet
		fieldTypes: make(map[string]typeSet), created: db.opts.Now().UTC(),
	}
	if opts.TimeSeries != nil {
		c.maxSpan = opts.TimeSeries.Span()
	} else {
		c.plain = &plainState{}
		c.nextIndexID = 1
	}
	c.compileRules()
	if err := db.checkRollupOf(name, &opts); err != nil {
		return false, err
	}
	if applied, err := db.persistCollection(c, db.mu.nextColl+1, nil); err != nil {
		if applied {
			// Pebble holds the record and the next id, which a later
			// flush makes durable: the id is taken, never given again
			// (two collections of one id after a restart). The
			// collection is not made: a create tried again writes its
			// record again, under the next id, and is durable only once
			// a flush succeeds.
			db.mu.Lock()
			db.mu.nextColl++
			db.mu.Unlock()
		}
		return false, err
	}
	db.mu.Lock()
	db.mu.nextColl++
	db.coll.Lock()
	db.coll.byName[name] = c
	db.coll.Unlock()
	db.mu.byID[c.id] = c
	err = db.relinkRollups(nil)
	db.mu.Unlock()
	if opts.RollupOf != nil {
		db.wakeRollups()
	}
	return true, err
}

// persistCollection writes c's catalog record (with the options and
// indexes of ch, when not nil) and the next collection id, and makes them
// durable. applied reports whether the record reached Pebble (a flush may
// still have failed after it, and a later one makes it durable).
//
// TTL passes are not logged: what one removed from memory is back after a
// crash until a checkpoint has written the buckets without it (the log
// replays their inserts), and what it range-deleted in the store until the
// store is flushed. That is harmless while the rules that expired it stand,
// since reads hide expired data, but a catalog change may relax them (a
// longer or no expireAfterSeconds, a TTL index dropped). So when a pass has
// removed anything since the last checkpoint, a checkpoint runs first: a
// catalog change never becomes durable before the expiry that preceded it.
// The caller holds maintMu.
func (db *DB) persistCollection(c *collection, nextColl uint32, ch *catalogChange) (applied bool, err error) {
	if db.expiredUnflushed.Load() {
		if err := db.checkpointLocked(db.stop); errors.Is(err, errNoRoom) {
			return false, mongoerr.New(mongoerr.OutOfDiskSpace, "the catalog change of %q must first checkpoint what TTL passes removed, and %v", c.name, err)
		} else if err != nil {
			return false, fmt.Errorf("timeseries: checkpoint before the catalog change of %q: %w", c.name, err)
		}
	}
	db.mu.RLock()
	rec, err := c.recordWith(ch)
	st := checkpointState{nextColl: nextColl, nextSeries: db.mu.nextSeries, nextBucket: db.mu.nextBucket}
	db.mu.RUnlock()
	if err != nil {
		return false, err
	}
	// The log position of the last checkpoint stays as it is.
	if v, closer, err := db.pdb.Get(keyCheckpoint); err == nil {
		old, derr := decodeCheckpointState(v)
		closer.Close()
		if derr != nil {
			return false, derr
		}
		st.segment = old.segment
		st.nextSeries = max(st.nextSeries, old.nextSeries)
		st.nextBucket = max(st.nextBucket, old.nextBucket)
	}
	b := db.pdb.NewBatch()
	defer b.Close()
	if err := b.Set(catalogKey(c.name), rec, nil); err != nil {
		return false, err
	}
	if err := b.Set(keyCheckpoint, st.encode(), nil); err != nil {
		return false, err
	}
	if err := db.pdb.Apply(b, pebble.NoSync); err != nil {
		return false, db.diskErr(err)
	}
	db.ddlStep("catalog applied")
	if err := db.flushStore(db.stop); err != nil {
		return true, err
	}
	db.ddlStep("catalog flushed")
	return true, nil
}

// ddlStep runs the test hook of a DDL step, if one is set.
func (db *DB) ddlStep(step string) {
	if f := db.hooks.ddlStep; f != nil {
		f(step)
	}
}

// catalogChange is a change of a collection's options, indexes or next
// index id. changeCatalog persists it before it installs it, so that a
// change whose record cannot be written (a full disk) is never live.
type catalogChange struct {
	opts        CollectionOptions
	indexes     []IndexSpec
	nextIndexID uint32
}

// catalogChangeOf returns c's options and indexes (a copy), for a change.
func (db *DB) catalogChangeOf(c *collection) catalogChange {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return catalogChange{opts: c.opts, indexes: append([]IndexSpec(nil), c.indexes...), nextIndexID: c.nextIndexID}
}

// maxSpan is the largest bucket span of c once ch is installed.
func (ch *catalogChange) maxSpan(c *collection) int64 {
	if ts := ch.opts.TimeSeries; ts != nil && ts.Span() > c.maxSpan {
		return ts.Span()
	}
	return c.maxSpan
}

// changeCatalog persists ch as c's catalog record, then installs it in
// memory (options, indexes, TTL rules). When the record could not be
// written, c is left as it was; a collection dropped meanwhile is
// NamespaceNotFound. The caller holds maintMu.
func (db *DB) changeCatalog(c *collection, ch catalogChange) error {
	db.mu.RLock()
	dropped := c.gone.Load()
	db.mu.RUnlock()
	if dropped {
		// Dropped or replaced since the caller's lookup: its record must
		// not come back.
		return notFound(c.name)
	}
	applied, err := db.persistCollection(c, db.nextCollSnapshot(), &ch)
	if !applied {
		return err
	}
	// Applied: Pebble holds the record, which its next flush makes durable
	// even when this one failed; memory follows it.
	db.mu.Lock()
	c.maxSpan = ch.maxSpan(c)
	c.lookupMu.Lock()
	c.opts = ch.opts
	c.lookupMu.Unlock()
	c.indexes, c.nextIndexID = ch.indexes, ch.nextIndexID
	c.compileRules()
	db.mu.Unlock()
	return err
}

// DropCollection removes a collection and all its data. NamespaceNotFound
// (26) when it does not exist.
func (db *DB) DropCollection(ctx context.Context, name string) error {
	// A drop frees space: it is allowed down to checkpointMargin.
	if err := db.checkSpace(min(db.opts.DiskReserve, checkpointMargin)); err != nil {
		return err
	}
	c, err := db.lookup(name)
	if err != nil {
		return err
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	if !db.unlinkCollection(c) {
		return notFound(name)
	}
	db.mu.Lock()
	err = db.relinkRollups(nil)
	db.mu.Unlock()
	if err != nil {
		return err
	}

	// Writers are no longer excluded: the store's flush below may wait for
	// space (a full disk), and writers of other collections go on meanwhile.
	// No checkpoint, TTL or merge pass writes c's keys (maintMu is held,
	// and c is out of the catalog in memory).
	b := db.pdb.NewBatch()
	defer b.Close()
	if err := b.Delete(catalogKey(name), nil); err != nil {
		return err
	}
	for _, space := range []byte{spaceSeries, spaceBucket, spaceOpen, spaceDocument, spaceRollup, spaceArchive} {
		p := collPrefix(space, c.id)
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return err
		}
	}
	if err := db.pdb.Apply(b, pebble.NoSync); err != nil {
		return db.diskErr(err)
	}
	return db.flushStore(db.stop)
}

// unlinkCollection takes c out of the catalog in memory and gives back
// the memory of its buckets, with its writers excluded (the plain
// collection's lock, cutMu): none is between its check that c exists and
// its rows in memory. It reports false when c was dropped already. The
// caller holds maintMu.
func (db *DB) unlinkCollection(c *collection) bool {
	defer c.kind().lockWriters(c)()
	db.cutMu.Lock()
	defer db.cutMu.Unlock()
	db.mu.Lock()
	defer db.mu.Unlock()
	if c.gone.Load() {
		return false
	}
	var mem, smem int64
	for _, s := range c.series.byOrd {
		smem += seriesMem(s)
		for _, b := range s.buckets {
			mem += b.mem
			b.changed() // its sorted copy, if any, goes too
		}
	}
	c.dropped = true
	c.gone.Store(true)
	db.coll.Lock()
	delete(db.coll.byName, c.name)
	db.coll.Unlock()
	delete(db.mu.byID, c.id)
	db.headMem.Add(-mem)
	db.seriesMem.Add(-smem)
	return true
}

// CollectionNames returns the names of the collections, sorted: a
// listing that reads nothing else (ListCollections describes each, its
// size on disk included).
func (db *DB) CollectionNames() []string {
	if db.closed.Load() {
		return nil
	}
	db.mu.RLock()
	names := make([]string, 0, len(db.coll.byName))
	for n := range db.coll.byName {
		names = append(names, n)
	}
	db.mu.RUnlock()
	sort.Strings(names)
	return names
}

// ListCollections describes every collection, sorted by name.
func (db *DB) ListCollections(ctx context.Context) ([]CollectionInfo, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	names := db.CollectionNames()
	out := make([]CollectionInfo, 0, len(names))
	for _, n := range names {
		info, err := db.Describe(ctx, n)
		if err != nil {
			continue // dropped meanwhile
		}
		out = append(out, info)
	}
	return out, nil
}

// Describe returns a collection's options and statistics.
func (db *DB) Describe(ctx context.Context, name string) (CollectionInfo, error) {
	info, err := db.DescribeShallow(ctx, name)
	if err != nil {
		return info, err
	}
	c, err := db.lookup(name)
	if err != nil {
		return CollectionInfo{}, err
	}
	var size uint64
	for _, space := range []byte{spaceSeries, spaceBucket, spaceOpen, spaceDocument} {
		p := collPrefix(space, c.id)
		n, err := db.pdb.EstimateDiskUsage(p, prefixEnd(p))
		if err != nil {
			return info, err
		}
		size += n
	}
	info.StorageBytes = int64(size)
	return info, nil
}

// DescribeShallow is Describe without StorageBytes, which asks Pebble for
// an estimate over the collection's key ranges: what a query needs (options,
// fields) at a fraction of the cost.
func (db *DB) DescribeShallow(ctx context.Context, name string) (CollectionInfo, error) {
	c, err := db.lookup(name)
	if err != nil {
		return CollectionInfo{}, err
	}
	db.mu.RLock()
	info := CollectionInfo{
		Name: c.name, Options: c.opts, Indexes: append([]IndexSpec(nil), c.indexes...),
		Count: c.count, Buckets: c.buckets, Fields: fieldTypeNames(c.fieldTypes), Created: c.created,
		OutOfRangeBuckets: c.oorBuckets,
	}
	if c.archived != (ArchiveStats{}) || slices.ContainsFunc(c.rules, func(r ttl.Rule) bool { return r.Archive }) {
		a := c.archived
		info.Archived = &a
	}
	db.mu.RUnlock()
	c.kind().stats(c, &info)
	return info, nil
}

// CollModOptions are the changes of a collMod. Nil fields stay as they are.
type CollModOptions struct {
	// ExpireAfterSeconds sets the collection TTL; with ExpireOff, removes it.
	ExpireAfterSeconds *int64
	ExpireOff          bool
	// Archive, when set, turns archiving of the collection-level TTL on
	// or off (it needs the TTL; ExpireOff turns it off too).
	Archive *bool `json:",omitempty"`
	// TimeSeries changes the granularity or custom bucket values.
	TimeSeries *model.TimeSeriesOptions
	// Index changes an index's expireAfterSeconds (CollModIndex), in the
	// same change as the rest.
	Index *IndexMod `json:",omitempty"`
	// StopRollup stops maintaining a rollup: the collection stays, an
	// ordinary time series from then on.
	StopRollup bool `json:",omitempty"`
}

// CollModResult reports old and new values of what a collMod changed.
type CollModResult struct {
	OldExpireAfterSeconds, NewExpireAfterSeconds *int64
	OldTimeSeries, NewTimeSeries                 *model.TimeSeriesOptions
	// Index is the index's change, when one was asked for.
	Index *IndexModResult `json:",omitempty"`
}

// CollMod changes a collection's options and one index (MongoDB's
// collMod) all at once: every part is checked first, and a refusal of any
// changes nothing; then the whole change is one catalog record, so that a
// crash leaves all of it or none. Refusals are InvalidOptions (72) unless
// a rule says otherwise (IndexNotFound, 27, for an unknown index).
func (db *DB) CollMod(ctx context.Context, name string, m CollModOptions) (CollModResult, error) {
	var res CollModResult
	if err := db.checkWritable(); err != nil {
		return res, err
	}
	c, err := db.lookup(name)
	if err != nil {
		return res, err
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	ch := db.catalogChangeOf(c)
	if m.Index != nil {
		// The index first: the part more likely refused.
		r, err := modIndex(c, &ch, *m.Index)
		if err != nil {
			return CollModResult{}, err
		}
		res.Index = &r
	}
	next := ch.opts
	if m.ExpireAfterSeconds != nil || m.ExpireOff {
		if next.TimeSeries == nil {
			return CollModResult{}, invalid("collection-level 'expireAfterSeconds' needs a time-series collection; use a TTL index on %q", name)
		}
		res.OldExpireAfterSeconds = next.ExpireAfterSeconds
		if m.ExpireOff {
			next.ExpireAfterSeconds = nil
		} else {
			v := *m.ExpireAfterSeconds
			if v < 0 || v > MaxExpireAfterSeconds {
				return CollModResult{}, invalid("'expireAfterSeconds' must be within [0, %d]; got %d", MaxExpireAfterSeconds, v)
			}
			next.ExpireAfterSeconds = &v
		}
		res.NewExpireAfterSeconds = next.ExpireAfterSeconds
	}
	if m.ExpireOff && m.Archive != nil && *m.Archive {
		return CollModResult{}, invalid("'archive' applies to the collection's 'expireAfterSeconds', which this collMod turns off")
	}
	if m.Archive != nil {
		next.Archive = *m.Archive
	}
	if m.ExpireOff {
		next.Archive = false
	}
	if next.Archive && (next.TimeSeries == nil || next.ExpireAfterSeconds == nil) {
		return CollModResult{}, invalid("'archive' applies to a time-series collection's 'expireAfterSeconds': %q has none", name)
	}
	if m.Archive != nil && *m.Archive {
		if err := db.archiveServed(mongoerr.InvalidOptions); err != nil {
			return CollModResult{}, err
		}
	}
	if m.TimeSeries != nil {
		if next.TimeSeries == nil {
			return CollModResult{}, invalid("collection %q is not a time-series collection", name)
		}
		if err := ValidateTimeSeriesChange(next.TimeSeries, m.TimeSeries); err != nil {
			return CollModResult{}, err
		}
		old := *next.TimeSeries
		ts := old
		if m.TimeSeries.Granularity != "" {
			ts.Granularity = m.TimeSeries.Granularity
			ts.BucketMaxSpanSeconds, ts.BucketRoundingSeconds = 0, 0
		} else if m.TimeSeries.BucketMaxSpanSeconds != 0 {
			ts.Granularity = ""
			ts.BucketMaxSpanSeconds, ts.BucketRoundingSeconds = m.TimeSeries.BucketMaxSpanSeconds, m.TimeSeries.BucketRoundingSeconds
		}
		next.TimeSeries = &ts
		res.OldTimeSeries, res.NewTimeSeries = &old, &ts
	}
	if m.StopRollup {
		if next.RollupOf == nil {
			return CollModResult{}, mongoerr.New(mongoerr.NamespaceNotFound, "collection %q is not a rollup", name)
		}
		next.RollupOf = nil
	}
	ch.opts = next
	if err := db.changeCatalog(c, ch); err != nil {
		return res, err
	}
	if m.StopRollup {
		db.mu.Lock()
		err := db.relinkRollups(nil)
		db.mu.Unlock()
		return res, err
	}
	return res, nil
}

func (db *DB) nextCollSnapshot() uint32 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.mu.nextColl
}
