package timeseries

import (
	"context"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/ttl"
)

// Collection is a handle on one collection, whatever its kind: the command
// layer finds, counts, inserts and deletes through it without asking which
// kind it holds. A handle is cheap (a lookup) and stays usable across
// DDL: after a drop its methods answer NamespaceNotFound.
type Collection struct {
	db *DB
	c  *collection
}

// Collection returns a handle on the collection name (NamespaceNotFound if
// there is none).
func (db *DB) Collection(name string) (*Collection, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	return &Collection{db: db, c: c}, nil
}

// Name returns the collection's name.
func (h *Collection) Name() string { return h.c.name }

// TimeSeries returns the collection's time-series options, nil for a plain
// collection.
func (h *Collection) TimeSeries() *model.TimeSeriesOptions {
	h.db.mu.RLock()
	defer h.db.mu.RUnlock()
	if ts := h.c.opts.TimeSeries; ts != nil {
		o := *ts
		return &o
	}
	return nil
}

// Fields returns the measurement fields of a time-series collection and
// the types each was seen with (nil for a plain collection).
func (h *Collection) Fields() map[string][]string {
	h.db.mu.RLock()
	defer h.db.mu.RUnlock()
	return fieldTypeNames(h.c.fieldTypes)
}

// FieldNames returns the measurement fields of a time-series collection
// in the order a find returns them (collection.findFields; nil for a plain
// collection).
func (h *Collection) FieldNames() []string {
	h.db.mu.RLock()
	defer h.db.mu.RUnlock()
	return h.c.findFields()
}

// Find runs a query (see FindOptions): a time-series collection's result
// is Arrow records, a plain collection's documents (Cursor.Doc).
func (h *Collection) Find(ctx context.Context, opts FindOptions) (*Cursor, error) {
	if opts.Limit < 0 || opts.Skip < 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "a find's skip and limit must not be negative; got %d and %d", opts.Skip, opts.Limit)
	}
	return h.c.kind().find(ctx, h.db, h.c, opts)
}

// Count is DB.Count on this collection.
func (h *Collection) Count(ctx context.Context, f *partialfilter.Filter, o CountOptions) (int64, error) {
	if o.Skip < 0 || o.Limit < 0 {
		return 0, mongoerr.New(mongoerr.BadValue, "a count's skip and limit must not be negative")
	}
	n, err := h.c.kind().count(ctx, h.db, h.c, f, o)
	n = max(n-o.Skip, 0)
	if o.Limit > 0 {
		n = min(n, o.Limit)
	}
	return n, err
}

// Insert is DB.Insert into this collection.
func (h *Collection) Insert(ctx context.Context, b Batch, opts InsertOptions) (InsertResult, error) {
	if err := h.db.checkWritable(); err != nil {
		return InsertResult{}, err
	}
	return h.c.kind().insert(ctx, h.db, h.c, b, opts)
}

// Delete is DB.Delete from this collection.
func (h *Collection) Delete(ctx context.Context, f *partialfilter.Filter, opts DeleteOptions) (int64, error) {
	if err := h.db.checkWritable(); err != nil {
		return 0, err
	}
	return h.delete(ctx, f, opts)
}

// delete is Delete once the store was found writable.
func (h *Collection) delete(ctx context.Context, f *partialfilter.Filter, opts DeleteOptions) (int64, error) {
	if opts.Limit < 0 || opts.Limit > 1 {
		return 0, mongoerr.New(mongoerr.BadValue, "a delete's limit must be 0 (all) or 1 (one); got %d", opts.Limit)
	}
	return h.c.kind().delete(ctx, h.db, h.c, f, opts.Limit)
}

// kind is what differs between the two kinds of collection, behind every
// handle and DB method that reads or writes data: timeSeriesKind stores
// measurements in buckets of series, plainKind documents under their _id.
// A collection's kind is fixed when it is created.
type kind interface {
	insert(ctx context.Context, db *DB, c *collection, b Batch, opts InsertOptions) (InsertResult, error)
	delete(ctx context.Context, db *DB, c *collection, f *partialfilter.Filter, limit int64) (int64, error)
	// count counts what f matches, reading at most o.Skip+o.Limit when a
	// limit is given; the caller applies skip and limit to the result.
	count(ctx context.Context, db *DB, c *collection, f *partialfilter.Filter, o CountOptions) (int64, error)
	find(ctx context.Context, db *DB, c *collection, opts FindOptions) (*Cursor, error)
	expire(ctx context.Context, db *DB, c *collection, index string, now time.Time, budget ttl.Budget) (ttl.Batch, error)
	ttlState(ctx context.Context, db *DB, c *collection, st *TTLState) error
	preview(ctx context.Context, db *DB, c *collection, p TTLProposal, out *TTLPreview) (*TTLPreview, error)
	// stats sets what the kind keeps of its size in info.
	stats(c *collection, info *CollectionInfo)
	// builtinIndexes lists the indexes the kind has without creating them;
	// builtinIndex answers a createIndex of one of them (done).
	builtinIndexes() []IndexSpec
	builtinIndex(spec IndexSpec) (done bool, name string, err error)
	// addIndexes adds validated new indexes, all or none (maintMu held);
	// indexDropped removes what a dropped one leaves beside its
	// definition.
	addIndexes(ctx context.Context, db *DB, c *collection, specs []IndexSpec) error
	indexDropped(db *DB, c *collection, id uint32) error
	// lockWriters holds off the collection's writers for DDL; it returns
	// the unlock.
	lockWriters(c *collection) func()
}

type (
	timeSeriesKind struct{}
	plainKind      struct{}
)

// kind returns the collection's kind: the one place that asks.
func (c *collection) kind() kind {
	if c.plain != nil {
		return plainKind{}
	}
	return timeSeriesKind{}
}

func (timeSeriesKind) insert(ctx context.Context, db *DB, c *collection, b Batch, opts InsertOptions) (InsertResult, error) {
	if len(b.Documents) > 0 {
		return InsertResult{}, mongoerr.New(mongoerr.IllegalOperation, "collection %q is a time-series collection; this operation serves plain collections", c.name)
	}
	return db.insertMeasurements(ctx, c, b.Measurements, opts)
}

func (plainKind) insert(ctx context.Context, db *DB, c *collection, b Batch, opts InsertOptions) (InsertResult, error) {
	if len(b.Measurements) > 0 {
		return InsertResult{}, mongoerr.New(mongoerr.IllegalOperation, "collection %q is not a time-series collection", c.name)
	}
	return db.insertDocuments(ctx, c, b.Documents, b.Orders, opts)
}

func (timeSeriesKind) delete(ctx context.Context, db *DB, c *collection, f *partialfilter.Filter, limit int64) (int64, error) {
	if limit != 0 {
		return 0, mongoerr.New(mongoerr.IllegalOperation,
			"collection %q is a time-series collection: deletes remove every measurement the filter matches (limit 0, deleteMany), not one", c.name)
	}
	return db.deleteMeasurements(ctx, c, f)
}

func (plainKind) delete(ctx context.Context, db *DB, c *collection, f *partialfilter.Filter, limit int64) (int64, error) {
	return db.deleteDocuments(ctx, c, f, int(limit))
}

func (timeSeriesKind) count(ctx context.Context, db *DB, c *collection, f *partialfilter.Filter, o CountOptions) (int64, error) {
	if o.Limit > 0 {
		return db.countFound(ctx, c, f, o.Skip+o.Limit, o.Archive)
	}
	if o.Archive {
		return db.countFound(ctx, c, f, 0, true)
	}
	return db.countAll(ctx, c, c.name, f)
}

func (plainKind) count(ctx context.Context, db *DB, c *collection, f *partialfilter.Filter, o CountOptions) (int64, error) {
	var n int64
	q := FindOptions{Filter: f}
	if o.Limit > 0 {
		q.Limit = o.Skip + o.Limit
	}
	_, err := db.findDocuments(ctx, c, q, func(document.Doc, []byte) error { n++; return nil })
	return n, err
}

func (plainKind) expire(ctx context.Context, db *DB, c *collection, index string, now time.Time, budget ttl.Budget) (ttl.Batch, error) {
	return db.expirePlain(ctx, c, index, now, budget)
}

func (plainKind) ttlState(ctx context.Context, db *DB, c *collection, st *TTLState) error {
	return db.plainTTLState(c, st)
}

func (plainKind) preview(ctx context.Context, db *DB, c *collection, p TTLProposal, out *TTLPreview) (*TTLPreview, error) {
	if p.NewIndex != nil {
		return nil, invalid("'newIndex' is previewed on time-series collections; on %q, preview an existing index by name under 'indexes'", c.name)
	}
	return db.previewPlain(ctx, c, p, out)
}

func (timeSeriesKind) stats(*collection, *CollectionInfo) {}

// lockWriters holds off the writers of a plain collection, which hold its
// lock from their check that it exists to their commit, and returns the
// unlock. A time series' writers are held off by cutMu and DB.mu.
func (plainKind) lockWriters(c *collection) func() {
	c.plain.mu.Lock()
	return c.plain.mu.Unlock
}

func (timeSeriesKind) lockWriters(*collection) func() { return func() {} }

func (plainKind) stats(c *collection, info *CollectionInfo) {
	info.Count = c.plain.count.Load()
	info.DataBytes = c.plain.bytes.Load()
}
