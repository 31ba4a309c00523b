package timeseries

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// Sort orders of a find.
const (
	// SortSeries returns series one after the other (in series order), each
	// in ascending time order. It is the cheapest order.
	SortSeries = 0
	// SortAscending merges all series into one ascending time order.
	SortAscending = 1
	// SortDescending merges all series into one descending time order.
	SortDescending = -1
)

// FindOptions describe a find on a collection of either kind. Filter,
// Sort, Skip and Limit serve both; Fields, OmitTime, OmitMeta, Order,
// BatchRows and Allocator shape a time-series collection's Arrow records,
// Projection a plain collection's documents.
type FindOptions struct {
	// Filter selects measurements or documents; nil matches all.
	Filter *partialfilter.Filter
	// Sort orders the result. A time-series collection sorts by its
	// timeField alone (the same as Order); a plain collection by any
	// fields, and without Sort in the plan's order (_id order, or
	// insertion order for a capped collection scanned whole).
	Sort []SortKey
	// Skip leaves out the first Skip results.
	Skip int64
	// Projection shapes the documents of a plain collection; nil returns
	// them whole.
	Projection *document.Projection
	// Fields lists the measurement fields to return, in order; nil returns
	// every field the collection has seen, in the order it first saw them
	// (its name table: the order they were first written).
	Fields []string
	// ExactTypes returns every value with the BSON type it was written
	// with: a field seen with several types (an int and a double, say)
	// is one column of BSON values (model.BSONColumnMetadataKey), and so
	// is a field of values with no column type of their own (a decimal,
	// an array). Without it, such a field is a float64 column when it
	// holds only numbers, Extended JSON text otherwise (Arrow readers get
	// columns they can compute on).
	ExactTypes bool
	// OmitTime and OmitMeta leave the time and meta columns out.
	OmitTime, OmitMeta bool
	// Order is SortSeries, SortAscending or SortDescending.
	Order int
	// Limit stops after this many results (after Skip); 0 means no
	// limit.
	Limit int64
	// BatchRows is the number of rows per record; 0 means 4096.
	BatchRows int
	// Allocator allocates the records' memory; nil means the Go allocator.
	Allocator memory.Allocator
	// Archive reads archived data too (time series; docs/archive.md).
	Archive bool
	// MetaRuns leaves the meta column out of the records (as OmitMeta)
	// and gives instead, for each record, the runs of its rows that
	// belong to one series (Cursor.MetaRuns): a reader that groups rows
	// by series gets each series' meta value once, not on every row.
	MetaRuns bool
}

// MetaRun is a run of consecutive rows of a record that belong to one
// series: its canonical meta key ("null" without a meta value) and how
// many rows.
type MetaRun struct {
	Key  string
	Rows int
}

// Cursor streams the result of a find as Arrow records. It is not safe for
// concurrent use and must be closed.
type Cursor struct {
	// scan is what the find reads; its snapshot is released by Close.
	scan scanPlan
	// stream, for a find by series, hands scan its series a chunk at a
	// time; streamDone once it has no more.
	stream     *seriesStream
	streamDone bool

	db     *DB
	ctx    context.Context
	schema *arrow.Schema
	bld    *array.RecordBuilder
	out    []outColumn
	rec    arrow.Record
	err    error
	done   bool

	batch   int
	limit   int64
	emitted int64
	skip    int64 // rows to leave out first; skipped so far
	skipped int64
	// docs, on a plain collection, yields its documents (docCursor).
	docs     *docCursor
	omitTime bool
	omitMeta bool
	// metaRuns: runs holds the current record's runs of rows of one
	// series (FindOptions.MetaRuns).
	metaRuns bool
	runs     []MetaRun
	nextSer  int
	cur      *seriesScan  // SortSeries: the series being read
	merge    *seriesMerge // global orders
	set      []bool       // scratch: result columns set in the current row
	colMap   map[*bucket.Columns][]int
	fieldPos map[string]int
	idPos    int // the _id result column; -1: not returned
}

// outColumn is a field column of the result.
type outColumn struct {
	name  string
	kind  bucket.Type // the column's Arrow type; KindString for mixed
	mixed bool        // Extended JSON text of each value
	bson  bool        // each value's BSON type byte and bytes
}

// Find runs a query on a time-series collection. A sorted find's result is
// a snapshot: measurements inserted after Find returns are not in it. A
// find by series (SortSeries) reads its series in chunks, in meta order,
// each taken when the cursor reaches it (the first by Find): each series
// is read as one state of the store, and every measurement stored before
// Find and not deleted is returned, but a chunk taken after Find returned
// may hold measurements written since, as MongoDB's cursors, which yield
// between batches, may; what it holds does not grow with the number of
// series it reads.
//
// On a plain collection, Find reads one snapshot of the store, taken by
// the cursor's first Next; the cursor yields documents (Cursor.Doc) and,
// once exhausted, the plan (Cursor.Plan).
func (db *DB) Find(ctx context.Context, name string, opts FindOptions) (*Cursor, error) {
	h, err := db.Collection(name)
	if err != nil {
		return nil, err
	}
	return h.Find(ctx, opts)
}

// find is Find on a time-series collection.
func (timeSeriesKind) find(ctx context.Context, db *DB, c *collection, opts FindOptions) (*Cursor, error) {
	name := c.name
	if opts.Projection != nil {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "collection %q is a time-series collection: a find projects its fields, not a document projection", name)
	}
	cur := &Cursor{db: db, ctx: ctx, batch: opts.BatchRows, limit: opts.Limit, skip: opts.Skip, omitTime: opts.OmitTime,
		omitMeta: opts.OmitMeta || opts.MetaRuns, metaRuns: opts.MetaRuns}
	if cur.batch <= 0 {
		cur.batch = 4096
	}
	if opts.Order < -1 || opts.Order > 1 {
		return nil, mongoerr.New(mongoerr.BadValue, "sort must be 1 (ascending), -1 (descending) or 0 (by series)")
	}
	var err error

	// The plan runs in a query slot, and so does each batch (Next).
	if err := db.acquireQuery(ctx); err != nil {
		return nil, err
	}
	defer db.releaseQuery()
	guard := db.newQueryGuard(ctx)
	if opts.Archive {
		if cur.scan.archive, err = db.loadArchive(ctx, c, opts.Filter, opts.Fields, guard); err != nil {
			guard.finish()
			return nil, err
		}
	}
	db.mu.RLock()
	ts := c.opts.TimeSeries
	if ts == nil || c.dropped {
		db.mu.RUnlock()
		guard.finish()
		if ts == nil {
			return nil, mongoerr.New(mongoerr.IllegalOperation, "collection %q is not a time-series collection", name)
		}
		return nil, notFound(name)
	}
	order, err := sortOrder(ts, opts)
	if err != nil {
		db.mu.RUnlock()
		guard.finish()
		return nil, err
	}
	// The schema: every field seen, or the projection.
	fieldNames := opts.Fields
	if fieldNames == nil {
		if cur.scan.archive != nil {
			fieldNames = c.findFieldsWith(cur.scan.archive.types)
		} else {
			fieldNames = c.findFields()
		}
	}
	cur.idPos = -1
	for i, f := range fieldNames {
		types := c.fieldTypes[f]
		if cur.scan.archive != nil {
			types |= cur.scan.archive.types[f]
		}
		if f == idField {
			// Measurements written without one have an _id made for them.
			types |= 1 << model.KindObjectID
			cur.idPos = i
		}
		cur.out = append(cur.out, outputColumn(f, types, opts.ExactTypes))
	}
	if order == SortSeries {
		cur.stream, err = db.newSeriesStream(&cur.scan, c, opts.Filter, opts.Fields, guard, true)
	} else {
		err = db.planScan(&cur.scan, c, opts.Filter, opts.Fields, guard)
	}
	db.mu.RUnlock()
	if err == nil && cur.stream != nil {
		// The first chunk now: a find of fewer series than a chunk reads
		// them all as of its start.
		var more bool
		more, err = cur.stream.next()
		cur.streamDone = !more
	}
	if err != nil {
		cur.Close()
		return nil, err
	}

	// Schema.
	var fs []arrow.Field
	if !opts.OmitTime {
		fs = append(fs, arrow.Field{Name: ts.TimeField, Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}})
	}
	if !cur.omitMeta && ts.MetaField != "" {
		fs = append(fs, arrow.Field{Name: ts.MetaField, Type: arrow.BinaryTypes.String, Nullable: true,
			Metadata: arrow.NewMetadata([]string{model.MetaColumnMetadataKey}, []string{"json"})})
	}
	cur.fieldPos = make(map[string]int, len(cur.out))
	for i, oc := range cur.out {
		f := arrow.Field{Name: oc.name, Type: arrowType(oc.kind), Nullable: true}
		switch {
		case oc.bson:
			f.Type = arrow.BinaryTypes.Binary
			f.Metadata = arrow.NewMetadata([]string{model.BSONColumnMetadataKey}, []string{"value"})
		case oc.mixed:
			f.Metadata = arrow.NewMetadata([]string{model.MixedColumnMetadataKey}, []string{"json"})
		}
		cur.fieldPos[oc.name] = i
		fs = append(fs, f)
	}
	cur.schema = arrow.NewSchema(fs, nil)
	mem := opts.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	cur.bld = array.NewRecordBuilder(mem, cur.schema)
	cur.colMap = make(map[*bucket.Columns][]int)
	if order != SortSeries {
		cur.merge = &seriesMerge{plan: &cur.scan, desc: order == SortDescending}
		if err := cur.merge.init(); err != nil {
			cur.Close()
			return nil, err
		}
	}
	return cur, nil
}

// sortOrder is the order of a time-series find: by series, or by time
// when Sort names the timeField.
func sortOrder(ts *model.TimeSeriesOptions, opts FindOptions) (int, error) {
	order := opts.Order
	for _, k := range opts.Sort {
		if k.Field != ts.TimeField {
			return 0, mongoerr.New(mongoerr.BadValue, "sort supports the timeField '%s' only; got '%s'", ts.TimeField, k.Field)
		}
		order = SortAscending
		if k.Desc {
			order = SortDescending
		}
	}
	return order, nil
}

// outputColumn picks a field's result type from the types it was seen
// with (see FindOptions.ExactTypes).
func outputColumn(name string, ts typeSet, exact bool) outColumn {
	types := ts.types()
	switch {
	case len(types) == 0:
		return outColumn{name: name, kind: model.KindFloat}
	case len(types) == 1 && types[0] == model.KindBSON:
		return outColumn{name: name, kind: model.KindString, mixed: !exact, bson: exact}
	case len(types) == 1:
		return outColumn{name: name, kind: types[0]}
	case exact:
		return outColumn{name: name, kind: model.KindBSON, bson: true}
	case ts&^numberTypeSet == 0:
		return outColumn{name: name, kind: model.KindFloat}
	}
	return outColumn{name: name, kind: model.KindString, mixed: true}
}

func arrowType(k bucket.Type) arrow.DataType {
	switch k {
	case model.KindInt:
		return arrow.PrimitiveTypes.Int64
	case model.KindInt32:
		return arrow.PrimitiveTypes.Int32
	case model.KindString:
		return arrow.BinaryTypes.String
	case model.KindBool:
		return arrow.FixedWidthTypes.Boolean
	case model.KindDate:
		return &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}
	case model.KindObjectID:
		return &arrow.FixedSizeBinaryType{ByteWidth: bucket.ObjectIDLen}
	case model.KindBSON:
		return arrow.BinaryTypes.Binary
	}
	return arrow.PrimitiveTypes.Float64
}

// Schema returns the schema of every record of the cursor (nil on a plain
// collection).
func (c *Cursor) Schema() *arrow.Schema { return c.schema }

// Next advances to the next record (or document, on a plain collection);
// false at the end or on error (see Err).
func (c *Cursor) Next() bool {
	if c.docs != nil {
		return c.nextDoc()
	}
	if c.rec != nil {
		c.rec.Release()
		c.rec = nil
	}
	if c.done || c.err != nil {
		return false
	}
	if err := c.db.acquireQuery(c.ctx); err != nil {
		c.err = err
		return false
	}
	n, err := c.fill()
	c.db.releaseQuery()
	if err != nil {
		c.err = err
		return false
	}
	if n == 0 {
		c.done = true
		return false
	}
	c.rec = c.bld.NewRecord()
	return true
}

// MetaRuns returns, with FindOptions.MetaRuns, the runs of rows of one
// series of the current record, in row order; they are valid until the
// next call to Next.
func (c *Cursor) MetaRuns() []MetaRun { return c.runs }

// Record returns the current record. It is valid until the next call of
// Next or Close; Retain it to keep it longer.
func (c *Cursor) Record() arrow.Record { return c.rec }

// Err returns the error that ended the iteration, if any.
func (c *Cursor) Err() error { return c.err }

// Close releases the cursor's resources. It is safe to call more than once.
func (c *Cursor) Close() error {
	if c.docs != nil {
		if c.docs.stop != nil {
			c.docs.stop()
		}
		c.docs.doc = nil
		c.done = true
		return nil
	}
	var errs []error
	if c.rec != nil {
		c.rec.Release()
		c.rec = nil
	}
	if c.cur != nil {
		errs = append(errs, c.cur.Close())
		c.cur = nil
	}
	if c.merge != nil {
		errs = append(errs, c.merge.close())
		c.merge = nil
	}
	if c.stream != nil {
		c.stream.close()
		c.stream = nil
	}
	if c.bld != nil {
		c.bld.Release()
		c.bld = nil
	}
	errs = append(errs, c.scan.close())
	c.done = true
	return errors.Join(errs...)
}

// nextRow returns the scan and cursor of the next row in the cursor's order.
func (c *Cursor) nextRow() (*seriesScan, *rowCursor, error) {
	if c.merge != nil {
		return c.merge.next()
	}
	for {
		if c.cur == nil {
			if c.nextSer >= len(c.scan.series) {
				if c.stream == nil || c.streamDone {
					return nil, nil, nil
				}
				more, err := c.stream.next()
				if err != nil {
					return nil, nil, err
				}
				c.nextSer, c.streamDone = 0, !more
				continue
			}
			s := c.scan.series[c.nextSer]
			c.nextSer++
			sc, err := c.scan.seriesScan(s, false)
			if err != nil {
				return nil, nil, err
			}
			c.cur = sc
		}
		rc, err := c.cur.next()
		if err != nil {
			return nil, nil, err
		}
		if rc != nil {
			return c.cur, rc, nil
		}
		if err := c.cur.Close(); err != nil {
			return nil, nil, err
		}
		c.cur = nil
	}
}

func (c *Cursor) advance(sc *seriesScan) error {
	if c.merge != nil {
		return c.merge.advance()
	}
	sc.advance()
	return nil
}

// fill appends up to one batch of rows to the builder.
func (c *Cursor) fill() (int, error) {
	n := 0
	c.runs = c.runs[:0]
	for n < c.batch {
		if c.limit > 0 && c.emitted >= c.limit {
			break
		}
		sc, rc, err := c.nextRow()
		if err != nil {
			return n, err
		}
		if rc == nil {
			break
		}
		if err := c.scan.guard.row(); err != nil {
			return n, err
		}
		switch {
		case c.scan.filter.residual != nil && !c.scan.filter.residual.Match(c.scan.rowDoc(sc.s, rc)):
		case c.skipped < c.skip:
			c.skipped++
		default:
			c.appendRow(sc.s, rc)
			n++
			c.emitted++
		}
		if err := c.advance(sc); err != nil {
			return n, err
		}
	}
	return n, nil
}

// columnsOf maps the fields of a decoded bucket to result columns (-1: not
// projected).
func (c *Cursor) columnsOf(cols *bucket.Columns) []int {
	if m, ok := c.colMap[cols]; ok {
		return m
	}
	if len(c.colMap) > 1024 {
		clear(c.colMap)
	}
	m := make([]int, len(cols.Fields))
	for i := range cols.Fields {
		if p, ok := c.fieldPos[cols.Fields[i].Name]; ok {
			m[i] = p
		} else {
			m[i] = -1
		}
	}
	c.colMap[cols] = m
	return m
}

func (c *Cursor) appendRow(s *seriesSnap, rc *rowCursor) {
	base := 0
	if !c.omitTime {
		c.bld.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(rc.time()))
		base++
	}
	if c.metaRuns {
		key := runKey(s.metaKey)
		if n := len(c.runs); n > 0 && c.runs[n-1].Key == key {
			c.runs[n-1].Rows++
		} else {
			c.runs = append(c.runs, MetaRun{Key: key, Rows: 1})
		}
	}
	if !c.omitMeta && c.scan.ts.MetaField != "" {
		b := c.bld.Field(base).(*array.StringBuilder)
		if !s.hasMeta() {
			b.AppendNull()
		} else {
			b.Append(s.metaKey)
		}
		base++
	}
	if len(c.set) != len(c.out) {
		c.set = make([]bool, len(c.out))
	}
	set := c.set
	clear(set)
	cols := rc.cols
	for i, p := range c.columnsOf(cols) {
		if p < 0 {
			continue
		}
		col := &cols.Fields[i]
		if !col.IsPresent(rc.i) {
			continue
		}
		appendCell(c.bld.Field(base+p), c.out[p], col, rc.i)
		set[p] = true
	}
	if p := c.idPos; p >= 0 && !set[p] {
		// Written without an _id: the one made of the series and time.
		id := madeID(s.id, rc.time())
		appendMadeID(c.bld.Field(base+p), c.out[p], id[:])
		set[p] = true
	}
	for p, ok := range set {
		if !ok {
			c.bld.Field(base + p).AppendNull()
		}
	}
}

// appendMadeID appends a made ObjectId to a result column of type oc.
func appendMadeID(b array.Builder, oc outColumn, id []byte) {
	col := bucket.Column{Type: model.KindObjectID, IDs: id}
	switch {
	case oc.bson:
		var buf [13]byte
		b.(*array.BinaryBuilder).Append(appendCellBSON(buf[:0], &col, 0))
	case oc.mixed:
		b.(*array.StringBuilder).Append(model.CellJSON(&col, 0))
	default:
		b.(*array.FixedSizeBinaryBuilder).Append(id)
	}
}

// appendCell appends row i of col to a result column of type oc.
func appendCell(b array.Builder, oc outColumn, col *bucket.Column, i int) {
	switch {
	case oc.bson:
		var buf [64]byte
		b.(*array.BinaryBuilder).Append(appendCellBSON(buf[:0], col, i))
		return
	case oc.mixed:
		b.(*array.StringBuilder).Append(model.CellJSON(col, i))
		return
	}
	switch oc.kind {
	case model.KindFloat:
		fb := b.(*array.Float64Builder)
		if col.Type == model.KindInt || col.Type == model.KindInt32 {
			fb.Append(float64(col.Ints[i]))
		} else {
			fb.Append(col.Floats[i])
		}
	case model.KindInt:
		b.(*array.Int64Builder).Append(col.Ints[i])
	case model.KindInt32:
		b.(*array.Int32Builder).Append(int32(col.Ints[i]))
	case model.KindDate:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(col.Ints[i]))
	case model.KindString:
		b.(*array.StringBuilder).Append(col.Strings[i])
	case model.KindBool:
		b.(*array.BooleanBuilder).Append(col.Bools[i])
	case model.KindObjectID:
		b.(*array.FixedSizeBinaryBuilder).Append(col.ID(i))
	}
}

// appendCellBSON appends row i of col as its BSON type byte and bytes.
func appendCellBSON(dst []byte, col *bucket.Column, i int) []byte {
	switch col.Type {
	case model.KindFloat:
		return bsoncore.AppendDouble(append(dst, byte(bsoncore.TypeDouble)), col.Floats[i])
	case model.KindInt:
		return bsoncore.AppendInt64(append(dst, byte(bsoncore.TypeInt64)), col.Ints[i])
	case model.KindInt32:
		return bsoncore.AppendInt32(append(dst, byte(bsoncore.TypeInt32)), int32(col.Ints[i]))
	case model.KindDate:
		return bsoncore.AppendDateTime(append(dst, byte(bsoncore.TypeDateTime)), model.FloorMillis(col.Ints[i]))
	case model.KindString:
		return bsoncore.AppendString(append(dst, byte(bsoncore.TypeString)), col.Strings[i])
	case model.KindBool:
		return bsoncore.AppendBoolean(append(dst, byte(bsoncore.TypeBoolean)), col.Bools[i])
	case model.KindObjectID:
		return append(append(dst, byte(bsoncore.TypeObjectID)), col.ID(i)...)
	case model.KindBSON:
		return append(dst, col.Strings[i]...)
	}
	return append(dst, byte(bsoncore.TypeNull))
}

func cellValue(col *bucket.Column, i int) any {
	switch col.Type {
	case model.KindFloat:
		return col.Floats[i]
	case model.KindInt:
		return col.Ints[i]
	case model.KindInt32:
		return int32(col.Ints[i])
	case model.KindDate:
		return time.Unix(0, col.Ints[i]).UTC()
	case model.KindString:
		return col.Strings[i]
	case model.KindBool:
		return col.Bools[i]
	case model.KindObjectID:
		return model.Value{Kind: col.Type, S: string(col.ID(i))}.Interface()
	case model.KindBSON:
		return model.Value{Kind: col.Type, S: col.Strings[i]}.Interface()
	}
	return nil
}

// seriesMerge merges the series of a scan into one time order. A series is
// opened (its buckets read and decoded) only when the bound of its first
// row, taken from its buckets in memory and the key of its first stored
// bucket, reaches the top of the heap; a series is closed as soon as it
// ends. So a sorted find with a limit reads the buckets of the series whose
// rows it returns and one bucket key of each other series, and holds the
// buckets of the series it has opened only.
type seriesMerge struct {
	plan *scanPlan
	desc bool
	h    mergeHeap
}

// mergeItem is a series in the merge: opened (sc set, rc on its next row,
// t that row's time) or not yet (t bounds its first row: no row comes
// before it in the merge's order).
type mergeItem struct {
	s  *seriesSnap
	t  int64
	sc *seriesScan
	rc *rowCursor
}

type mergeHeap struct {
	items []mergeItem
	desc  bool
}

// Less orders by time, then by series: the order of the result, and a
// series' bound sorts no later than its first row.
func (h *mergeHeap) Less(i, j int) bool {
	a, b := h.items[i].t, h.items[j].t
	if a == b {
		return h.items[i].s.metaKey < h.items[j].s.metaKey
	}
	if h.desc {
		return a > b
	}
	return a < b
}
func (h *mergeHeap) Len() int      { return len(h.items) }
func (h *mergeHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)    { h.items = append(h.items, x.(mergeItem)) }
func (h *mergeHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// init puts every series of the plan that may hold a row in range in the
// heap, unopened, at the bound of its first row.
func (m *seriesMerge) init() error {
	m.h.desc = m.desc
	it, err := m.plan.snap.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	r := readerPool.Get().(*bucket.Reader)
	r.SetSymbolCache(nil)
	defer func() {
		r.Reset(nil)
		readerPool.Put(r)
	}()
	for i, s := range m.plan.series {
		if i%guardEvery == 0 {
			if err := m.plan.guard.ctx.Err(); err != nil {
				return err
			}
		}
		t, ok, err := m.firstBound(it, r, s)
		if err != nil {
			return err
		}
		if ok {
			m.h.items = append(m.h.items, mergeItem{s: s, t: t})
		}
	}
	heap.Init(&m.h)
	return nil
}

// firstBound returns the earliest time (latest when descending) series s
// holds a row at within the plan's range, from its buckets in memory and
// the headers of its stored buckets that may come first: those that start
// (ascending) or may end (descending) before the best time found. ok is
// false when it has no bucket in range. r reads the headers.
func (m *seriesMerge) firstBound(it *pebble.Iterator, r *bucket.Reader, s *seriesSnap) (t int64, ok bool, err error) {
	p := m.plan
	lo, hi := s.minTime, p.filter.maxTime
	better := func(x int64) {
		if !ok || (m.desc && x > t) || (!m.desc && x < t) {
			t, ok = x, true
		}
	}
	for _, cols := range s.mem {
		n := len(cols.Times)
		if n == 0 || cols.Times[n-1] < lo || cols.Times[0] > hi {
			continue
		}
		if m.desc {
			better(min(cols.Times[n-1], hi))
		} else {
			better(max(cols.Times[0], lo))
		}
	}
	if s.noStore {
		return t, ok, nil
	}
	lower, upper := scanKeyBounds(p.coll, s.id, lo, hi, p.maxSpan)
	it.SetBounds(lower, upper)
	valid := it.First()
	if m.desc {
		valid = it.Last()
	}
	for ; valid; valid = m.step(it) {
		kp, err := parseBucketKey(it.Key())
		if err != nil {
			return 0, false, err
		}
		if m.desc {
			// A bucket ends before its start plus the longest span.
			if ok && kp.minTime <= math.MaxInt64-p.maxSpan && kp.minTime+p.maxSpan-1 < t {
				break
			}
		} else if ok && kp.minTime >= t {
			break
		}
		if slices.Contains(s.memIDs, kp.id) {
			continue // newer in memory
		}
		p.guard.headers++
		if err := p.guard.bucket(); err != nil {
			return 0, false, err
		}
		v, err := it.ValueAndErr()
		if err == nil {
			err = r.ResetNames(v, s.names)
		}
		if err != nil {
			return 0, false, fmt.Errorf("series %d bucket %d: %w", s.id, kp.id, err)
		}
		if r.Rows() == 0 || r.MaxTime() < lo || r.MinTime() > hi {
			continue
		}
		if m.desc {
			better(min(r.MaxTime(), hi))
		} else {
			better(max(r.MinTime(), lo))
		}
	}
	return t, ok, it.Error()
}

func (m *seriesMerge) step(it *pebble.Iterator) bool {
	if m.desc {
		return it.Prev()
	}
	return it.Next()
}

// next returns the scan and cursor of the next row, opening the series
// whose bounds come first until an opened one is on top.
func (m *seriesMerge) next() (*seriesScan, *rowCursor, error) {
	for m.h.Len() > 0 {
		top := &m.h.items[0]
		if top.sc != nil {
			return top.sc, top.rc, nil
		}
		if err := m.plan.guard.charge(openScanBytes, "the series a sort has open"); err != nil {
			return nil, nil, err
		}
		sc, err := m.plan.seriesScan(top.s, m.desc)
		if err != nil {
			m.plan.guard.release(openScanBytes)
			return nil, nil, err
		}
		top.sc = sc
		rc, err := sc.next()
		if err != nil {
			return nil, nil, err
		}
		if rc == nil {
			m.closeTop()
			continue
		}
		top.rc, top.t = rc, rc.time()
		heap.Fix(&m.h, 0)
	}
	return nil, nil, nil
}

// advance moves past the row next returned.
func (m *seriesMerge) advance() error {
	top := &m.h.items[0]
	top.sc.advance()
	rc, err := top.sc.next()
	if err != nil {
		return err
	}
	if rc == nil {
		return m.closeTop()
	}
	top.rc, top.t = rc, rc.time()
	heap.Fix(&m.h, 0)
	return nil
}

// closeTop closes the opened series on top of the heap and removes it.
func (m *seriesMerge) closeTop() error {
	it := heap.Pop(&m.h).(mergeItem)
	m.plan.guard.release(openScanBytes)
	return it.sc.Close()
}

// close closes the opened series.
func (m *seriesMerge) close() error {
	var errs []error
	for _, it := range m.h.items {
		if it.sc != nil {
			m.plan.guard.release(openScanBytes)
			errs = append(errs, it.sc.Close())
		}
	}
	m.h.items = nil
	return errors.Join(errs...)
}
