package timeseries

import (
	"context"
	"errors"
	"iter"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// docCursor is the document side of a Cursor on a plain collection: the
// snapshot scan of findDocuments. Next pulls it one document at a time,
// as a coroutine (iter.Pull2) that starts at the first Next and holds its
// snapshot until it ends or the cursor is closed; ForEach on a cursor not
// yet pulled runs it directly.
type docCursor struct {
	seq  iter.Seq2[document.Doc, error]
	next func() (document.Doc, error, bool)
	stop func()
	doc  document.Doc
	plan DocPlan
	// enc is the current document's stored encoding, valid while the
	// scan waits on it (until the next document): Order reads it.
	enc []byte
	// projected: the documents are projected, and enc is more than Doc.
	projected bool
}

// errStopScan ends a scan whose cursor was closed before its end.
var errStopScan = errors.New("timeseries: scan stopped")

// find is Find on a plain collection.
func (plainKind) find(ctx context.Context, db *DB, c *collection, opts FindOptions) (*Cursor, error) {
	if opts.Fields != nil || opts.OmitTime || opts.OmitMeta || opts.Order != SortSeries {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "collection %q is a plain collection: a find takes a document projection and sort keys, not time-series columns", c.name)
	}
	d := &docCursor{projected: opts.Projection != nil}
	seq := func(yield func(document.Doc, error) bool) {
		plan, err := db.findDocuments(ctx, c, opts, func(doc document.Doc, enc []byte) error {
			d.enc = enc
			if !yield(doc, nil) {
				return errStopScan
			}
			return nil
		})
		d.plan = plan
		if err != nil && !errors.Is(err, errStopScan) {
			yield(nil, err)
		}
	}
	d.seq = seq
	return &Cursor{db: db, ctx: ctx, docs: d}, nil
}

// Doc returns the current document of a cursor on a plain collection. It
// is valid until the next call of Next or Close.
func (c *Cursor) Doc() document.Doc {
	if c.docs == nil {
		return nil
	}
	return c.docs.doc
}

// Order returns the field order of the current document of a cursor on a
// plain collection, as it is stored (_id first, then the order it was
// written in; fields an update added after them, in name order). Valid
// until the next call of Next or Close, or during ForEach's call.
func (c *Cursor) Order() *document.Order {
	if c.docs == nil || c.docs.enc == nil {
		return nil
	}
	o, err := storedOrder(c.docs.enc)
	if err != nil {
		return nil // the document decoded; its order cannot fail
	}
	return o
}

// Encoded returns the stored encoding (document.Encode) of the current
// document of a cursor on a plain collection when it is the whole result
// (the find has no projection), for a door to transcode without the map;
// nil otherwise. Valid as Order's result is.
func (c *Cursor) Encoded() []byte {
	if c.docs == nil || c.docs.projected || !document.StartsWithID(c.docs.enc) {
		return nil
	}
	return c.docs.enc
}

// Documents reports whether the cursor yields documents (a plain
// collection) rather than Arrow records (a time-series collection).
func (c *Cursor) Documents() bool { return c.docs != nil }

// Plan returns how a find on a plain collection ran (its explain), once
// Next has returned false.
func (c *Cursor) Plan() DocPlan {
	if c.docs == nil {
		return DocPlan{}
	}
	return c.docs.plan
}

// nextDoc is Next on a plain collection.
func (c *Cursor) nextDoc() bool {
	d := c.docs
	d.doc = nil
	if c.done || c.err != nil {
		return false
	}
	if d.next == nil {
		d.next, d.stop = iter.Pull2(d.seq)
	}
	doc, err, ok := d.next()
	switch {
	case !ok:
		c.done = true
		return false
	case err != nil:
		c.err = err
		return false
	}
	d.doc = doc
	return true
}

// EachDoc calls fn with every document of a find on a plain collection and
// closes the cursor; it takes Find's two results as they come:
//
//	plan, err := timeseries.EachDoc(db.Find(ctx, name, opts))(fn)
//
// It returns the plan (explain) and the first error of Find, the scan or
// fn.
func EachDoc(cur *Cursor, err error) func(fn func(document.Doc) error) (DocPlan, error) {
	return func(fn func(document.Doc) error) (DocPlan, error) {
		if err != nil {
			return DocPlan{}, err
		}
		defer cur.Close()
		err := cur.ForEach(fn)
		return cur.Plan(), err
	}
}

// ForEach calls fn with each remaining document of a find on a plain
// collection, in order, and returns the first error of the scan or fn;
// the cursor is at its end then. On a cursor not yet read with Next the
// scan calls fn itself, without the coroutine switch Next costs a
// document: what a reply that takes the whole result uses.
func (c *Cursor) ForEach(fn func(document.Doc) error) error {
	d := c.docs
	if d == nil {
		return mongoerr.New(mongoerr.IllegalOperation, "a time-series collection's find yields records, not documents")
	}
	if d.next != nil || c.done || c.err != nil {
		for c.Next() {
			if err := fn(d.doc); err != nil {
				c.err = err
				return err
			}
		}
		return c.Err()
	}
	c.done = true
	for doc, err := range d.seq {
		if err == nil {
			err = fn(doc)
		}
		if err != nil {
			c.err = err
			return err
		}
	}
	return nil
}
