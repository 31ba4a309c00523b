package mongowire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

const (
	// defaultFirstBatch is MongoDB's first batch when find names no
	// batchSize.
	defaultFirstBatch = 101
	// maxBatchBytes bounds the documents of one reply so that it stays
	// under maxBsonObjectSize with its envelope.
	maxBatchBytes = MaxBSONObjectSize - 16<<10
)

// findArgs are the options of a find.
type findArgs struct {
	filter     map[string]any
	projection map[string]any
	sort       []timeseries.SortKey
	skip       int64
	limit      int64
	batchSize  int64 // -1: default
	single     bool
	archive    bool // Hourglass' own: read the archive too (docs/archive.md)
}

// findOptionsIgnored are the find fields accepted that change nothing
// Hourglass does (its plans are its own, sorts are bounded by memory, and
// cursors time out unless used). Fields neither read nor here are refused.
var findOptionsIgnored = map[string]bool{"noCursorTimeout": true, "allowDiskUse": true, "hint": true}

func parseFind(cmd *wireCommand) (findArgs, error) {
	a := findArgs{batchSize: -1}
	args, err := cmd.args()
	if err != nil {
		return a, err
	}
	for k, v := range args {
		switch k {
		case "filter", "projection":
			m, ok := v.(map[string]any)
			if !ok && v != nil {
				return a, mongoerr.New(mongoerr.TypeMismatch, "'find.%s' must be a document", k)
			}
			if k == "filter" {
				a.filter = m
			} else {
				a.projection = m
			}
		case "sort":
			if _, ok := v.(map[string]any); !ok && v != nil {
				return a, mongoerr.New(mongoerr.TypeMismatch, "'find.sort' must be a document")
			}
		case "skip", "limit", "batchSize":
			n, err := integer(k, v)
			if err != nil {
				return a, err
			}
			switch k {
			case "skip":
				a.skip = n
			case "limit":
				if n < 0 {
					// The legacy negative limit: one batch of at most -n.
					n, a.single = -n, true
				}
				a.limit = n
			case "batchSize":
				a.batchSize = n
			}
			if n < 0 {
				return a, mongoerr.New(mongoerr.BadValue, "'find.%s' must not be negative; got %d", k, n)
			}
		case "singleBatch":
			b, ok := v.(bool)
			if !ok {
				return a, mongoerr.New(mongoerr.TypeMismatch, "'find.singleBatch' must be a boolean")
			}
			a.single = a.single || b
		case "archive":
			b, ok := v.(bool)
			if !ok {
				return a, mongoerr.New(mongoerr.TypeMismatch, "'find.archive' must be a boolean")
			}
			a.archive = b
		default:
			if !findOptionsIgnored[k] {
				return a, mongoerr.New(unknownField, "BSON field 'find.%s' is an unknown field; Hourglass supports filter, projection, sort, skip, limit, batchSize, singleBatch and archive", k)
			}
		}
	}
	// The sort's keys in their order, which the map lost.
	if v, err := cmd.body.LookupErr("sort"); err == nil {
		if d, ok := v.DocumentOK(); ok {
			err := model.EachBSONElement(d, func(key string, e bsoncore.Value) error {
				dir, ok := e.AsInt64OK()
				if !ok || (dir != 1 && dir != -1) {
					return mongoerr.New(mongoerr.BadValue, "'sort.%s' must be 1 or -1", key)
				}
				a.sort = append(a.sort, timeseries.SortKey{Field: key, Desc: dir < 0})
				return nil
			})
			if err != nil {
				return a, err
			}
		}
	}
	return a, nil
}

// unknownField is MongoDB's code for a command field it does not know.
const unknownField mongoerr.Code = 40415

// integer reads a whole number given as any BSON number type.
func integer(name string, v any) (int64, error) {
	switch x := v.(type) {
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<62 {
			return int64(x), nil
		}
	}
	return 0, mongoerr.New(mongoerr.TypeMismatch, "'%s' must be an integer", name)
}

func cmdFind(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, err := cmd.collectionName()
	if err != nil {
		return nil, err
	}
	a, err := parseFind(cmd)
	if err != nil {
		return nil, err
	}
	ns := cmd.db + "." + name
	if _, err := s.db.Collection(name); errors.Is(err, mongoerr.New(mongoerr.NamespaceNotFound, "")) {
		// MongoDB finds nothing in a missing collection.
		return cursorReply(0, ns, "firstBatch", bson.A{}), nil
	} else if err != nil {
		return nil, err
	}
	var filter *partialfilter.Filter
	if len(a.filter) > 0 {
		if filter, err = partialfilter.Parse(a.filter); err != nil {
			return nil, err
		}
	}
	src, err := s.find(name, filter, &a)
	if err != nil {
		return nil, err
	}
	return s.firstBatch(cmd.conn, ns, src, a.batchSize, a.single)
}

// batchBytes is maxBatchBytes, lowered by tests to make many batches of a
// few documents.
var batchBytes = maxBatchBytes

// rawReplyKey marks a handler's reply that is a whole BSON document
// already, "ok" included: conn.handle sends it as it is.
const rawReplyKey = "\x00raw"

func rawReply(doc []byte) bson.D { return bson.D{{Key: rawReplyKey, Value: bson.Raw(doc)}} }

// batchReply builds a cursor reply, {cursor: {<key>: [documents], id,
// ns}, ok: 1}, in one buffer: each document is appended once, where it is
// sent from, with no envelope built around a copy of the batch.
type batchReply struct {
	buf           []byte
	doc, cur, arr int32
	count         int
	key           [20]byte
}

func newBatchReply(dst []byte, batchKey string) *batchReply {
	b := &batchReply{}
	b.doc, b.buf = bsoncore.AppendDocumentStart(dst[:0])
	b.cur, b.buf = bsoncore.AppendDocumentElementStart(b.buf, "cursor")
	b.arr, b.buf = bsoncore.AppendArrayElementStart(b.buf, batchKey)
	return b
}

// fill appends up to n documents (n 0: as many as fit maxBatchBytes),
// starting with pending, a document left over from the last batch. done
// reports that src is exhausted; next, if any, is a document that did not
// fit (a copy: it outlives the source's next call).
func (b *batchReply) fill(src source, pending bsoncore.Document, n int64) (next bsoncore.Document, done bool, err error) {
	for n <= 0 || int64(b.count) < n {
		d := pending
		pending = nil
		if d == nil {
			if d, err = src.next(); err != nil {
				return nil, false, err
			}
			if d == nil {
				return nil, true, nil
			}
		}
		if len(b.buf)-int(b.arr)+len(d) > batchBytes && b.count > 0 {
			return bytes.Clone(d), false, nil
		}
		b.buf = bsoncore.AppendDocumentElement(b.buf, model.StringView(itoa(b.key[:0], b.count)), d)
		b.count++
	}
	return nil, false, nil
}

// finish closes the batch and returns the whole reply.
func (b *batchReply) finish(id int64, ns string) []byte {
	b.buf, _ = bsoncore.AppendArrayEnd(b.buf, b.arr)
	b.buf = bsoncore.AppendInt64Element(b.buf, "id", id)
	b.buf = bsoncore.AppendStringElement(b.buf, "ns", ns)
	b.buf, _ = bsoncore.AppendDocumentEnd(b.buf, b.cur)
	b.buf = bsoncore.AppendDoubleElement(b.buf, "ok", 1)
	b.buf, _ = bsoncore.AppendDocumentEnd(b.buf, b.doc)
	return b.buf
}

func cmdGetMore(s *Server, conn *conn, cmd *wireCommand) (bson.D, error) {
	v, _ := cmd.body.LookupErr("getMore")
	id, ok := v.Int64OK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'getMore' must be a cursor id (int64)")
	}
	if err := checkDatabase(cmd.db); err != nil {
		return nil, err
	}
	cv, _ := cmd.body.LookupErr("collection")
	coll, ok := cv.StringValueOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'getMore.collection' must be a string")
	}
	var n int64
	if bv, err := cmd.body.LookupErr("batchSize"); err == nil {
		if n, ok = bv.AsInt64OK(); !ok || n < 0 {
			return nil, mongoerr.New(mongoerr.BadValue, "'getMore.batchSize' must be a non-negative integer")
		}
	}
	c, ok := s.cursors.acquire(id)
	if !ok {
		if why, killed := s.cursors.whyKilled(id); killed {
			return nil, mongoerr.New(mongoerr.CursorKilled, "cursor id %d was killed: %s", id, why)
		}
		return nil, mongoerr.New(codeCursorNotFound, "cursor id %d not found", id)
	}
	ns := cmd.db + "." + coll
	if c.ns != ns {
		s.cursors.release(c, false)
		return nil, mongoerr.New(mongoerr.Unauthorized, "Requested getMore on namespace '%s', but cursor belongs to a different namespace %s", ns, c.ns)
	}
	var b *batchReply
	var done bool
	var err error
	if a := c.wait(); a != nil {
		if a.err == nil && n > 0 && int64(a.b.count) > n {
			// Built for another batch size: its documents go first.
			c.src = newQueuedSource(a.b, a.next, c.src)
			c.pending = nil
			s.replyBufs.Put(a.b.buf[:0])
		} else {
			b, done, err, c.pending = a.b, a.end, a.err, a.next
		}
	}
	if b == nil && err == nil {
		b = newBatchReply(s.replyBufs.Get(), "nextBatch")
		c.pending, done, err = b.fill(c.src, c.pending, n)
	}
	if err == nil && !done && n == 0 {
		s.buildAhead(c)
	}
	s.cursors.release(c, done || err != nil)
	if err != nil {
		if b != nil {
			s.replyBufs.Put(b.buf[:0])
		}
		return nil, err
	}
	if done {
		id = 0
	}
	reply := b.finish(id, ns)
	conn.pooled = reply // back to s.replyBufs once sent
	return rawReply(reply), nil
}

// buildAhead starts building c's next batch (of the default size) while
// the client reads this one, when a slot is free: the driver asks for the
// next batch only once it has read the last, so otherwise the server and
// the client take turns. c is held by the getMore calling it.
func (s *Server) buildAhead(c *cursor) {
	select {
	case s.prefetches <- struct{}{}:
	default:
		return
	}
	a := &prefetch{done: make(chan struct{})}
	c.ahead = a
	s.prefetched.Add(1)
	src, pending := c.src, c.pending
	c.pending = nil
	go func() {
		defer func() { <-s.prefetches }()
		defer close(a.done)
		defer func() {
			// As handleSafely does for a command: the getMore that takes
			// this batch answers the error, and the server goes on.
			if r := recover(); r != nil {
				s.panics.Add(1)
				s.log.Error("building a batch ahead panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				a.b, a.err = nil, mongoerr.New(mongoerr.InternalError, "internal error; see the server log")
			}
		}()
		a.b = newBatchReply(s.replyBufs.Get(), "nextBatch")
		a.next, a.end, a.err = a.b.fill(src, pending, 0)
		if a.err != nil {
			s.replyBufs.Put(a.b.buf[:0])
			a.b = nil
		}
	}()
}

func cmdKillCursors(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	if _, err := cmd.collectionName(); err != nil {
		return nil, err
	}
	v, err := cmd.body.LookupErr("cursors")
	arr, ok := v.ArrayOK()
	if err != nil || !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'killCursors.cursors' must be an array of cursor ids")
	}
	vals, _ := arr.Values()
	killed, missing := bson.A{}, bson.A{}
	for _, e := range vals {
		id, ok := e.Int64OK()
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "'killCursors.cursors' must hold int64 cursor ids")
		}
		if s.cursors.kill(id) {
			killed = append(killed, id)
		} else {
			missing = append(missing, id)
		}
	}
	return bson.D{{Key: "cursorsKilled", Value: killed}, {Key: "cursorsNotFound", Value: missing},
		{Key: "cursorsAlive", Value: bson.A{}}, {Key: "cursorsUnknown", Value: bson.A{}}}, nil
}

// find runs a find through the command layer. Its cursor reads under a
// context of its own: it outlives the command, until the client reads
// its last batch or kills it.
func (s *Server) find(name string, filter *partialfilter.Filter, a *findArgs) (source, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cur, err := s.cmd.Find(ctx, command.Find{Collection: name, Filter: filter, Projection: a.projection,
		Sort: a.sort, Skip: a.skip, Limit: a.limit, ExactTypes: true, Archive: a.archive})
	if err != nil {
		cancel()
		return nil, err
	}
	if cur.Documents() {
		return &documentSource{cur: cur, cancel: cancel}, nil
	}
	return &measurementSource{cur: cur, cancel: cancel}, nil
}

// documentSource turns the documents of a find on a plain collection
// into BSON.
type documentSource struct {
	cur    *timeseries.Cursor
	cancel context.CancelFunc
	buf    []byte // the last document transcoded (valid until the next)
}

func (d *documentSource) next() (bsoncore.Document, error) {
	if !d.cur.Next() {
		return nil, d.cur.Err()
	}
	if enc := d.cur.Encoded(); enc != nil {
		// The stored bytes as BSON, in their order, without the map.
		var err error
		d.buf, err = document.AppendBSON(d.buf[:0], enc)
		return d.buf, err
	}
	return orderedDocument(d.cur.Doc(), d.cur.Order()), nil
}

func (d *documentSource) close() {
	d.cur.Close()
	d.cancel()
}

// measurementSource turns the Arrow records of a time-series find into
// documents: the time field a BSON date (milliseconds), the meta field its
// value, each non-null field its value.
type measurementSource struct {
	cur    *timeseries.Cursor
	cancel context.CancelFunc
	rec    arrow.Record
	row    int
	kinds  []columnKind
	names  []string // the current record's field names, UTF-8
	buf    []byte   // the last document
	// metaText and metaElem are, by column, the last JSON text of a meta
	// or mixed column and its BSON element.
	metaText []string
	metaElem [][]byte
}

type columnKind uint8

const (
	colOther columnKind = iota
	colJSON             // meta or mixed: JSON text of a value
)

func (m *measurementSource) next() (bsoncore.Document, error) {
	for {
		for m.rec == nil || m.row >= int(m.rec.NumRows()) {
			if !m.cur.Next() {
				return nil, m.cur.Err()
			}
			m.rec, m.row = m.cur.Record(), 0
			if m.kinds == nil {
				m.kinds = kindsOf(m.rec.Schema())
			}
			// The field names of the record's columns, made UTF-8 once
			// for all its rows.
			m.names = m.names[:0]
			for _, f := range m.rec.Schema().Fields() {
				m.names = append(m.names, document.ValidKey(f.Name))
			}
		}
		row := m.row
		m.row++
		return m.document(row)
	}
}

func kindsOf(sc *arrow.Schema) []columnKind {
	kinds := make([]columnKind, sc.NumFields())
	for i, f := range sc.Fields() {
		if f.Metadata.FindKey(model.MetaColumnMetadataKey) >= 0 || f.Metadata.FindKey(model.MixedColumnMetadataKey) >= 0 {
			kinds[i] = colJSON
		}
	}
	return kinds
}

func (m *measurementSource) document(row int) (bsoncore.Document, error) {
	idx, dst := bsoncore.AppendDocumentStart(m.buf[:0])
	for i, col := range m.rec.Columns() {
		if col.IsNull(row) {
			continue
		}
		name := m.names[i]
		switch c := col.(type) {
		case *array.Timestamp:
			dst = bsoncore.AppendDateTimeElement(dst, name, model.FloorMillis(int64(c.Value(row))))
		case *array.Float64:
			dst = bsoncore.AppendDoubleElement(dst, name, c.Value(row))
		case *array.Int64:
			dst = bsoncore.AppendInt64Element(dst, name, c.Value(row))
		case *array.Int32:
			dst = bsoncore.AppendInt32Element(dst, name, c.Value(row))
		case *array.FixedSizeBinary: // ObjectIds
			var id [12]byte
			copy(id[:], c.Value(row))
			dst = bsoncore.AppendObjectIDElement(dst, name, id)
		case *array.Binary: // BSON values: the type byte, then the value
			v := c.Value(row)
			if len(v) == 0 {
				continue
			}
			dst = bsoncore.AppendHeader(dst, bsoncore.Type(v[0]), name)
			dst = append(dst, v[1:]...)
		case *array.Boolean:
			dst = bsoncore.AppendBooleanElement(dst, name, c.Value(row))
		case *array.String:
			if m.kinds[i] != colJSON {
				dst = bsoncore.AppendStringElement(dst, name, document.ValidUTF8(c.Value(row)))
				continue
			}
			// Rows come series by series: the meta value of the last row
			// is usually this one's, its element encoded already.
			text := c.Value(row)
			if m.metaText == nil {
				m.metaText, m.metaElem = make([]string, len(m.kinds)), make([][]byte, len(m.kinds))
			}
			if m.metaElem[i] == nil || m.metaText[i] != text {
				v, err := model.DecodeMeta(text)
				if err != nil {
					return nil, err
				}
				m.metaText[i], m.metaElem[i] = text, appendValue(m.metaElem[i][:0], name, v)
			}
			dst = append(dst, m.metaElem[i]...)
		default:
			return nil, mongoerr.New(mongoerr.InternalError, "column %q has the unexpected type %s", name, col.DataType())
		}
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	m.buf = dst
	return dst, nil
}

func (m *measurementSource) close() {
	m.cur.Close()
	m.cancel()
}
