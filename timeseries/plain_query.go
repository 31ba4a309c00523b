package timeseries

import (
	"bytes"
	"container/heap"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// SortKey is one field of a sort of documents.
type SortKey struct {
	Field string
	Desc  bool
}

// MaxSortBytes bounds the documents a sort without limit buffers
// (MongoDB's 100 MiB for a blocking sort without disk use).
const MaxSortBytes = 100 << 20

// DocPlan describes how a query on a plain collection ran: its explain.
type DocPlan struct {
	// Stage is IDHACK (one _id), IXSCAN (an index range) or COLLSCAN.
	Stage string `json:"stage"`
	// Index is the index scanned ("_id_" for the _id index).
	Index string `json:"index,omitempty"`
	// Bounds are the scanned key ranges, per field.
	Bounds       string `json:"indexBounds,omitempty"`
	KeysExamined int64  `json:"keysExamined"`
	DocsExamined int64  `json:"docsExamined"`
	Returned     int64  `json:"nReturned"`
	// SortInMemory is true when the result was sorted after the scan.
	SortInMemory bool `json:"sortInMemory"`
}

// docPlan is a chosen access path.
type docPlan struct {
	DocPlan
	natural  bool // capped insertion order
	primary  bool // the _id index (document keys)
	lo, hi   []byte
	multikey bool
}

// planDocs chooses the access path of filter f: the index whose bounds
// pin the most leading fields (two points per equality, one per range),
// the _id index first among equals; a collection scan when none helps.
func (db *DB) planDocs(r pebble.Reader, c *collection, f *partialfilter.Filter) (docPlan, error) {
	if f == nil {
		f = &partialfilter.Filter{}
	}
	docPrefix := plainKey(c.id, subDoc, 0)
	best := docPlan{primary: true}
	b := indexBounds(docPrefix, idKeyPattern, f, false)
	best.lo, best.hi, best.Bounds = b.lo, b.hi, b.desc
	score := b.score
	for _, ix := range db.liveIndexes(c) {
		if !ix.usable(f) {
			continue
		}
		prefix := indexPrefix(c.id, ix.spec.ID)
		// A multikey index is bound by fewer comparisons, never more:
		// read its flag only for an index that could win.
		if b := indexBounds(prefix, ix.spec.Key, f, false); b.score <= score {
			continue
		}
		mk, err := isMultikey(r, c.id, ix.spec.ID)
		if err != nil {
			return best, err
		}
		b := indexBounds(prefix, ix.spec.Key, f, mk)
		if b.score > score {
			score = b.score
			best = docPlan{lo: b.lo, hi: b.hi, multikey: mk}
			best.Index, best.Bounds = ix.spec.Name, b.desc
		}
	}
	switch {
	case score == 0 && c.opts.Capped:
		best = docPlan{natural: true}
		best.lo = plainKey(c.id, subNatural, 0)
		best.hi = prefixEnd(best.lo)
		best.Stage = "COLLSCAN"
	case score == 0:
		best.Stage, best.Bounds = "COLLSCAN", ""
	case best.primary && score == 2:
		best.Stage, best.Index = "IDHACK", IDIndexName
	case best.primary:
		best.Stage, best.Index = "IXSCAN", IDIndexName
	default:
		best.Stage = "IXSCAN"
	}
	return best, nil
}

// scanDocs visits, in plan order, the documents of c that match f and have
// not expired at now, until fn returns false.
func (db *DB) scanDocs(ctx context.Context, r pebble.Reader, c *collection, plan docPlan, f *partialfilter.Filter, now time.Time, fn func(*storedDoc) (bool, error)) (DocPlan, error) {
	rules := db.plainRulesOf(c)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: plan.lo, UpperBound: plan.hi})
	if err != nil {
		return plan.DocPlan, err
	}
	defer it.Close()
	docPrefixLen := len(plainKey(c.id, subDoc, 0))
	var dr *docReader
	if !plan.primary {
		if dr, err = newDocReader(r, c.id); err != nil {
			return plan.DocPlan, err
		}
		defer dr.close()
	}
	var seen map[string]bool
	if plan.multikey {
		seen = map[string]bool{}
	}
	for valid := it.First(); valid; valid = it.Next() {
		if plan.DocsExamined%256 == 0 {
			if err := ctx.Err(); err != nil {
				return plan.DocPlan, err
			}
		}
		var d storedDoc
		if plan.primary {
			plan.DocsExamined++
			if plan.Stage != "COLLSCAN" {
				plan.KeysExamined++
			}
			idKey := append([]byte(nil), it.Key()[docPrefixLen:]...)
			if d, err = decodeStored(idKey, it.Value()); err != nil {
				return plan.DocPlan, err
			}
		} else {
			if !plan.natural {
				plan.KeysExamined++
			}
			if seen != nil {
				if seen[string(it.Value())] {
					continue
				}
				seen[string(it.Value())] = true
			}
			var ok bool
			d, ok, err = dr.get(it.Value())
			if err != nil {
				return plan.DocPlan, err
			}
			if !ok {
				continue
			}
			plan.DocsExamined++
		}
		if f != nil && !f.Match(d.doc) || expiredAny(rules, d.doc, now) {
			continue
		}
		more, err := fn(&d)
		if err != nil || !more {
			return plan.DocPlan, err
		}
	}
	return plan.DocPlan, it.Error()
}

// findDocuments runs q on a plain collection and calls fn with each
// result, in order, on a consistent snapshot, and its stored encoding
// (valid during the call: the field order). Documents that have expired
// under a TTL index are never returned. It returns the plan (explain).
func (db *DB) findDocuments(ctx context.Context, c *collection, q FindOptions, fn func(doc document.Doc, enc []byte) error) (DocPlan, error) {
	snap := db.pdb.NewSnapshot()
	defer snap.Close()
	now := db.opts.Now()
	skip := q.Skip
	emit := func(d *storedDoc) error {
		if skip > 0 {
			skip--
			return nil
		}
		return fn(q.Projection.Apply(d.doc), d.enc)
	}
	plan, err := db.planDocs(snap, c, q.Filter)
	if err != nil {
		return plan.DocPlan, err
	}
	var returned int64
	// A sort on _id alone is the order of a scan of the _id index.
	if len(q.Sort) == 0 || len(q.Sort) == 1 && q.Sort[0].Field == "_id" && !q.Sort[0].Desc && plan.primary {
		out, err := db.scanDocs(ctx, snap, c, plan, q.Filter, now, func(d *storedDoc) (bool, error) {
			if q.Limit > 0 && returned >= q.Limit+q.Skip {
				return false, nil
			}
			returned++
			return true, emit(d)
		})
		out.Returned = max(returned-q.Skip, 0)
		return out, err
	}
	s := &docSorter{keys: q.Sort}
	if q.Limit > 0 {
		s.keep = q.Limit + q.Skip
	}
	out, err := db.scanDocs(ctx, snap, c, plan, q.Filter, now, func(d *storedDoc) (bool, error) {
		return true, s.add(d)
	})
	out.SortInMemory = true
	if err != nil {
		return out, err
	}
	for _, d := range s.sorted() {
		if err := emit(d); err != nil {
			return out, err
		}
		returned++
	}
	out.Returned = max(returned-q.Skip, 0)
	return out, nil
}

// docSorter sorts documents by keys; with keep > 0 it holds only the
// first keep (a bounded heap), else every document up to MaxSortBytes.
type docSorter struct {
	keys  []SortKey
	keep  int64
	docs  []*storedDoc
	bytes int64
}

func (s *docSorter) add(d *storedDoc) error {
	dc := *d
	dc.enc = bytes.Clone(d.enc) // the scan moves on
	if s.keep > 0 {
		if int64(len(s.docs)) < s.keep {
			heap.Push(s, &dc)
		} else if s.less(&dc, s.docs[0]) {
			s.docs[0] = &dc
			heap.Fix(s, 0)
		}
		return nil
	}
	s.bytes += d.size
	if s.bytes > MaxSortBytes {
		return mongoerr.New(mongoerr.QueryExceededMemoryLimit,
			"sort exceeded the memory limit of %d bytes; add a limit or a more selective filter", MaxSortBytes)
	}
	s.docs = append(s.docs, &dc)
	return nil
}

// The heap keeps the worst document on top.
func (s *docSorter) Len() int           { return len(s.docs) }
func (s *docSorter) Less(i, j int) bool { return s.less(s.docs[j], s.docs[i]) }
func (s *docSorter) Swap(i, j int)      { s.docs[i], s.docs[j] = s.docs[j], s.docs[i] }
func (s *docSorter) Push(x any)         { s.docs = append(s.docs, x.(*storedDoc)) }
func (s *docSorter) Pop() any {
	d := s.docs[len(s.docs)-1]
	s.docs = s.docs[:len(s.docs)-1]
	return d
}

func (s *docSorter) sorted() []*storedDoc {
	slices.SortFunc(s.docs, func(a, b *storedDoc) int {
		if s.less(a, b) {
			return -1
		}
		if s.less(b, a) {
			return 1
		}
		return 0
	})
	return s.docs
}

// less orders by the sort keys, then by _id. An array sorts by its least
// element ascending and its greatest descending, as in MongoDB.
func (s *docSorter) less(a, b *storedDoc) bool {
	for _, k := range s.keys {
		va, vb := sortValue(a.doc, k), sortValue(b.doc, k)
		c := partialfilter.Compare(va, vb)
		if k.Desc {
			c = -c
		}
		if c != 0 {
			return c < 0
		}
	}
	return bytes.Compare(a.idKey, b.idKey) < 0
}

func sortValue(doc document.Doc, k SortKey) any {
	vals, _ := document.IndexValues(doc, strings.Split(k.Field, "."))
	best := vals[0]
	for _, v := range vals[1:] {
		c := partialfilter.Compare(v, best)
		if k.Desc && c > 0 || !k.Desc && c < 0 {
			best = v
		}
	}
	return best
}

// matchingDocs returns the _id keys of c's live documents matching f.
// plainState.mu is held.
func (db *DB) matchingDocs(ctx context.Context, c *collection, f *partialfilter.Filter, limit int) ([][]byte, error) {
	var ids [][]byte
	plan, err := db.planDocs(db.pdb, c, f)
	if err != nil {
		return nil, err
	}
	_, err = db.scanDocs(ctx, db.pdb, c, plan, f, db.opts.Now(), func(d *storedDoc) (bool, error) {
		ids = append(ids, d.idKey)
		return limit <= 0 || len(ids) < limit, nil
	})
	return ids, err
}

// docChunk is how many documents one batch of a delete or update
// changes: each batch is one durable log record.
const docChunk = 1000

// deleteDocuments is Delete on a plain collection: the first match in _id
// order with limit 1, every match with 0.
func (db *DB) deleteDocuments(ctx context.Context, c *collection, f *partialfilter.Filter, limit int) (int64, error) {
	p := c.plain
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.dropped {
		return 0, notFound(c.name)
	}
	ids, err := db.matchingDocs(ctx, c, f, limit)
	if err != nil {
		return 0, err
	}
	var n int64
	for len(ids) > 0 {
		chunk := ids[:min(docChunk, len(ids))]
		ids = ids[len(chunk):]
		w := db.newDocWriter(c)
		k := int64(0)
		for _, idKey := range chunk {
			d, ok, err := getDoc(w.b, c.id, idKey)
			if err == nil && ok {
				err = w.remove(&d)
				k++
			}
			if err != nil {
				w.b.Close()
				return n, err
			}
		}
		if err := w.commit(); err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}

// UpdateResult reports an update or replace.
type UpdateResult struct {
	Matched  int64 `json:"matched"`
	Modified int64 `json:"modified"`
}

// Update describes a change of a plain collection's documents: update
// operators, or a replacement that keeps the document's _id. It applies
// to the first document Filter matches in _id order, or to every match
// with Multi (operators only).
type Update struct {
	Filter *partialfilter.Filter
	// Exactly one of Operators and Replacement is set. A replacement may
	// hold the document's own _id but no other (ImmutableField, 66).
	Operators   *document.Update
	Replacement document.Doc
	// ReplacementOrder is the replacement's field order (nil: name
	// order); _id stays first. An update by operators keeps the fields'
	// order and adds new fields after them, in name order.
	ReplacementOrder *document.Order
	Multi            bool
	// Now is the time $currentDate sets; zero means the DB's clock. The
	// members of a replica set apply an update at the time its leader
	// chose, so that every member stores the same documents.
	Now time.Time
}

// Update changes the documents of a plain collection that u's filter
// matches. A document the change would make invalid (a path through a
// non-document, $inc of a string, too large) stops the update with that
// error; documents updated before it stay updated, as in MongoDB, and the
// result counts them.
//
// On a time-series collection it is MongoDB's meta update: with Multi, a
// filter on the metaField and operators on the metaField only, it changes
// the meta value of the series the filter selects, and counts their
// measurements; anything else is InvalidOptions (72) with MongoDB's
// message. It is logged before it is made and made with a checkpoint
// (metaupdate.go).
func (db *DB) Update(ctx context.Context, name string, u Update) (UpdateResult, error) {
	if err := db.checkWritable(); err != nil {
		return UpdateResult{}, err
	}
	if h, err := db.Collection(name); err == nil && h.TimeSeries() != nil {
		now := u.Now
		if now.IsZero() {
			now = db.opts.Now()
		}
		return db.updateMeasurements(ctx, h.c, u, now)
	}
	if (u.Operators == nil) == (u.Replacement == nil) {
		return UpdateResult{}, mongoerr.New(mongoerr.BadValue, "an update holds either update operators or a replacement document")
	}
	if u.Replacement != nil && u.Multi {
		return UpdateResult{}, mongoerr.New(mongoerr.FailedToParse, "multi update is not supported for replacement-style update")
	}
	now := u.Now
	if now.IsZero() {
		now = db.opts.Now()
	}
	if u.Operators != nil {
		return db.rewriteDocs(ctx, name, u.Filter, u.Multi, now, func(d *storedDoc, now time.Time) (bool, error) {
			return u.Operators.Apply(d.doc, now)
		})
	}
	repl, replOrder := u.Replacement, u.ReplacementOrder.IDFirst()
	return db.rewriteDocs(ctx, name, u.Filter, false, now, func(d *storedDoc, _ time.Time) (bool, error) {
		doc := d.doc
		id := doc["_id"]
		if rid, ok := repl["_id"]; ok && partialfilter.Compare(rid, id) != 0 {
			return false, mongoerr.New(mongoerr.ImmutableField,
				"the _id of a replacement must be the document's own: %s, not %s", renderValue(id), renderValue(rid))
		}
		old, _ := document.EncodeOrdered(nil, doc, d.order)
		clear(doc)
		for k, v := range repl {
			doc[k] = v
		}
		doc["_id"] = id
		d.order = replOrder
		now, _ := document.EncodeOrdered(nil, doc, d.order)
		return !bytes.Equal(old, now), nil
	})
}

// rewriteDocs changes the documents matching f with change, in batches.
func (db *DB) rewriteDocs(ctx context.Context, name string, f *partialfilter.Filter, multi bool, now time.Time, change func(*storedDoc, time.Time) (bool, error)) (UpdateResult, error) {
	var res UpdateResult
	c, err := db.plainCollection(name)
	if err != nil {
		return res, err
	}
	p := c.plain
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.dropped {
		return res, notFound(name)
	}
	limit := 1
	if multi {
		limit = 0
	}
	ids, err := db.matchingDocs(ctx, c, f, limit)
	if err != nil {
		return res, err
	}
	for len(ids) > 0 {
		chunk := ids[:min(docChunk, len(ids))]
		ids = ids[len(chunk):]
		w := db.newDocWriter(c)
		var matched, modified int64
		var failed error
		for _, idKey := range chunk {
			old, ok, err := getDoc(w.b, c.id, idKey)
			if err != nil {
				w.b.Close()
				return res, err
			}
			if !ok {
				continue
			}
			matched++
			// Decode a second copy to change: old keeps the entries to
			// remove.
			d, _, err := getDocOrdered(w.b, c.id, idKey)
			if err != nil {
				w.b.Close()
				return res, err
			}
			changed, err := change(&d, now)
			if err == nil && changed {
				var enc []byte
				if enc, err = document.EncodeOrdered(nil, d.doc, d.order); err == nil && len(enc) > document.MaxSize {
					err = mongoerr.New(mongoerr.BSONObjectTooLarge, "the updated document would be %d bytes, above the %d-byte limit", len(enc), document.MaxSize)
				}
				if err == nil {
					err = w.put(&d, enc, &old)
				}
				modified++
			}
			if err != nil {
				matched--
				if changed {
					modified--
				}
				failed = err
				break
			}
		}
		if c.opts.Capped {
			if err := db.evictCapped(c, w); err != nil {
				w.b.Close()
				return res, err
			}
		}
		if err := w.commit(); err != nil {
			return res, err
		}
		res.Matched += matched
		res.Modified += modified
		if failed != nil {
			return res, failed
		}
	}
	return res, nil
}
