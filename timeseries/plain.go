package timeseries

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// Plain collections hold JSON documents keyed by _id. Their keys live in
// spaceDocument (docs/format/keys.md):
//
//	0x05 <coll u32> 'd' <_id key>                      -> uvarint seq, document (package document)
//	0x05 <coll u32> 'x' <index u32> <entry> <_id key>  -> <_id key>  (secondary index entry)
//	0x05 <coll u32> 'm' <index u32>                    -> multikey flag of an index
//	0x05 <coll u32> 'n' <seq u64>                      -> <_id key>  (capped: insertion order)
//	0x05 <coll u32> 's'                                -> uvarint count, bytes, next seq
//
// Every change is one Pebble batch, written to the log (fsynced) before it
// is applied, so that an acknowledged write survives a crash: replay
// applies the batch again, and applying a batch twice is harmless (its
// operations are blind sets and deletes). Writes to one collection are
// serialized by plainState.mu; reads take a Pebble snapshot and no lock.
const (
	subDoc      byte = 'd'
	subIndex    byte = 'x'
	subMultikey byte = 'm'
	subNatural  byte = 'n'
	subStats    byte = 's'
)

// recDocBatch is a log record of a plain collection: coll u32, then the
// Pebble batch representation.
const recDocBatch byte = 3

// plainState is the runtime state of a plain collection.
type plainState struct {
	// mu serializes writes: inserts, updates, deletes, index builds and
	// TTL batches.
	mu sync.Mutex
	// count and bytes are the documents stored and their encoded size,
	// expired ones included until deleted; seq numbers insertions.
	count, bytes atomic.Int64
	seq          uint64 // guarded by mu
}

func plainKey(coll uint32, sub byte, n int) []byte {
	k := make([]byte, 6, 6+n)
	k[0] = spaceDocument
	binary.BigEndian.PutUint32(k[1:], coll)
	k[5] = sub
	return k
}

func docKey(coll uint32, idKey []byte) []byte {
	return append(plainKey(coll, subDoc, len(idKey)), idKey...)
}

func indexPrefix(coll, index uint32) []byte {
	return binary.BigEndian.AppendUint32(plainKey(coll, subIndex, 4+32), index)
}

func multikeyKey(coll, index uint32) []byte {
	return binary.BigEndian.AppendUint32(plainKey(coll, subMultikey, 4), index)
}

func naturalKey(coll uint32, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(plainKey(coll, subNatural, 8), seq)
}

// storedDoc is a document as read from the store.
type storedDoc struct {
	idKey []byte
	seq   uint64
	size  int64 // encoded size of the document
	doc   document.Doc
	// order is the document's field order, read by the writes that
	// encode it again (getDocOrdered); enc is its encoding during a scan,
	// valid until the scan moves on.
	order *document.Order
	enc   []byte
}

func decodeStored(idKey, v []byte) (storedDoc, error) {
	seq, n := binary.Uvarint(v)
	if n <= 0 {
		return storedDoc{}, fmt.Errorf("%w: document value", ErrCorrupt)
	}
	doc, err := document.Decode(v[n:])
	if err != nil {
		return storedDoc{}, err
	}
	return storedDoc{idKey: idKey, seq: seq, size: int64(len(v) - n), doc: doc, enc: v[n:]}, nil
}

// getDoc reads one document by _id key from r; ok is false when there is
// none.
func getDoc(r pebble.Reader, coll uint32, idKey []byte) (d storedDoc, ok bool, err error) {
	return readDoc(r, coll, idKey, false)
}

// storedOrder reads the field order of a stored document, _id first: as
// every document is stored now (earlier versions stored name order), so
// that reads answer it there and a rewritten document moves it there.
func storedOrder(enc []byte) (*document.Order, error) {
	o, err := document.DecodeOrder(enc)
	return o.IDFirst(), err
}

// getDocOrdered is getDoc with the document's field order (storedOrder).
func getDocOrdered(r pebble.Reader, coll uint32, idKey []byte) (d storedDoc, ok bool, err error) {
	return readDoc(r, coll, idKey, true)
}

func readDoc(r pebble.Reader, coll uint32, idKey []byte, ordered bool) (d storedDoc, ok bool, err error) {
	v, closer, err := r.Get(docKey(coll, idKey))
	if errors.Is(err, pebble.ErrNotFound) {
		return d, false, nil
	}
	if err != nil {
		return d, false, err
	}
	defer closer.Close()
	d, err = decodeStored(append([]byte(nil), idKey...), v)
	if err == nil && ordered {
		d.order, err = storedOrder(d.enc)
	}
	d.enc = nil // closer releases it
	return d, err == nil, err
}

// plainCollection returns the collection name if it is a plain one.
func (db *DB) plainCollection(name string) (*collection, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	if c.plain == nil {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "collection %q is a time-series collection; this operation serves plain collections", name)
	}
	return c, nil
}

// docWriter accumulates the changes of one plain-collection write into a
// Pebble batch. plainState.mu is held.
type docWriter struct {
	db      *DB
	c       *collection
	b       *pebble.Batch
	indexes []liveIndex
	dCount  int64
	dBytes  int64
	// multikey is the set of indexes this batch makes multikey.
	multikey map[uint32]bool
}

func (db *DB) newDocWriter(c *collection) *docWriter {
	return &docWriter{db: db, c: c, b: db.pdb.NewIndexedBatch(), indexes: db.liveIndexes(c),
		multikey: map[uint32]bool{}}
}

// put stores d (a new or changed document) and its index entries; old is
// the previous version (nil for an insert).
func (w *docWriter) put(d *storedDoc, encoded []byte, old *storedDoc) error {
	newEntries, err := w.entries(d)
	if err != nil {
		return err
	}
	if old != nil {
		oldEntries, err := w.entries(old)
		if err != nil {
			return err
		}
		for k := range oldEntries {
			if _, keep := newEntries[k]; !keep {
				if err := w.b.Delete([]byte(k), nil); err != nil {
					return err
				}
			}
		}
		for k := range newEntries {
			if _, had := oldEntries[k]; had {
				delete(newEntries, k)
			}
		}
		w.dBytes -= old.size
	} else {
		w.dCount++
	}
	for k := range newEntries {
		if err := w.b.Set([]byte(k), d.idKey, nil); err != nil {
			return err
		}
	}
	val := binary.AppendUvarint(make([]byte, 0, 10+len(encoded)), d.seq)
	val = append(val, encoded...)
	w.dBytes += int64(len(encoded))
	if old == nil && w.c.opts.Capped {
		if err := w.b.Set(naturalKey(w.c.id, d.seq), d.idKey, nil); err != nil {
			return err
		}
	}
	return w.b.Set(docKey(w.c.id, d.idKey), val, nil)
}

// remove deletes d and its index entries.
func (w *docWriter) remove(d *storedDoc) error {
	entries, err := w.entries(d)
	if err != nil {
		return err
	}
	for k := range entries {
		if err := w.b.Delete([]byte(k), nil); err != nil {
			return err
		}
	}
	if w.c.opts.Capped {
		if err := w.b.Delete(naturalKey(w.c.id, d.seq), nil); err != nil {
			return err
		}
	}
	w.dCount--
	w.dBytes -= d.size
	return w.b.Delete(docKey(w.c.id, d.idKey), nil)
}

// entries computes d's index entries, noting indexes it makes multikey.
func (w *docWriter) entries(d *storedDoc) (map[string]struct{}, error) {
	out := map[string]struct{}{}
	for i := range w.indexes {
		ix := &w.indexes[i]
		multi, err := ix.appendEntries(out, w.c.id, d.doc, d.idKey)
		if err != nil {
			return nil, err
		}
		if multi {
			w.multikey[ix.spec.ID] = true
		}
	}
	return out, nil
}

// commit writes the batch with the collection's new statistics to the log
// and applies it; the counters change only once it is durable.
func (w *docWriter) commit() error {
	defer w.b.Close()
	if w.b.Empty() && w.dCount == 0 && w.dBytes == 0 {
		return nil
	}
	p := w.c.plain
	for id := range w.multikey {
		if err := w.b.Set(multikeyKey(w.c.id, id), []byte{1}, nil); err != nil {
			return err
		}
	}
	count, size := p.count.Load()+w.dCount, p.bytes.Load()+w.dBytes
	st := binary.AppendUvarint(nil, uint64(count))
	st = binary.AppendUvarint(st, uint64(size))
	st = binary.AppendUvarint(st, p.seq)
	if err := w.b.Set(plainKey(w.c.id, subStats, 0), st, nil); err != nil {
		return err
	}
	if err := w.db.commitBatch(w.c, w.b); err != nil {
		return err
	}
	p.count.Store(count)
	p.bytes.Store(size)
	return nil
}

// commitBatch logs b as a record of c and applies it to Pebble. Writers
// hold cutMu shared from the log append to the apply, so that a checkpoint
// (which flushes Pebble before dropping the log) never loses a batch.
func (db *DB) commitBatch(c *collection, b *pebble.Batch) error {
	var rec []byte
	if !db.opts.ExternalLog {
		repr := b.Repr()
		rec = make([]byte, 0, 5+len(repr))
		rec = append(rec, recDocBatch)
		rec = binary.BigEndian.AppendUint32(rec, c.id)
		rec = append(rec, repr...)
	}
	if h := db.hooks.logging; h != nil {
		h()
	}
	db.cutMu.RLock()
	defer db.cutMu.RUnlock()
	if db.closed.Load() {
		return ErrClosed
	}
	if c.gone.Load() {
		return errGone(c.name)
	}
	if rec != nil {
		if _, err := db.wal.Append(rec); err != nil {
			return db.diskErr(fmt.Errorf("timeseries: write to %q: %w", c.name, err))
		}
	}
	if err := db.pdb.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("timeseries: write to %q: %w", c.name, err)
	}
	if db.wal.Size() > db.opts.CheckpointLogBytes {
		db.wakeCheckpointer()
	}
	return nil
}

// replayDocBatch applies a logged batch during recovery.
func (db *DB) replayDocBatch(rec []byte) error {
	if len(rec) < 4 {
		return fmt.Errorf("%w: short document batch record", ErrCorrupt)
	}
	c := db.mu.byID[binary.BigEndian.Uint32(rec)]
	if c == nil || c.plain == nil {
		return nil // dropped after the write
	}
	b := db.pdb.NewBatch()
	defer b.Close()
	if err := b.SetRepr(append([]byte(nil), rec[4:]...)); err != nil {
		return fmt.Errorf("%w: document batch: %v", ErrCorrupt, err)
	}
	return db.pdb.Apply(b, pebble.NoSync)
}

// initPlain reads the statistics of every plain collection after recovery.
func (db *DB) initPlain() error {
	for _, c := range db.mu.byID {
		if c.plain == nil {
			continue
		}
		v, closer, err := db.pdb.Get(plainKey(c.id, subStats, 0))
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var vals [3]uint64
		b := v
		for i := range vals {
			x, n := binary.Uvarint(b)
			if n <= 0 {
				closer.Close()
				return fmt.Errorf("%w: statistics of collection %q", ErrCorrupt, c.name)
			}
			vals[i], b = x, b[n:]
		}
		closer.Close()
		c.plain.count.Store(int64(vals[0]))
		c.plain.bytes.Store(int64(vals[1]))
		c.plain.seq = vals[2]
	}
	return nil
}

// insertDocuments is Insert of documents into a plain collection. Invalid
// documents are refused one by one: with ordered options the insert stops
// at the first, else it skips each. The valid documents are written as one
// durable batch.
func (db *DB) insertDocuments(ctx context.Context, c *collection, docs []document.Doc, orders []*document.Order, opts InsertOptions) (InsertResult, error) {
	var res InsertResult
	name := c.name
	p := c.plain
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.dropped {
		return res, notFound(name)
	}
	w := db.newDocWriter(c)
	seen := map[string]bool{}
	enc := make([]byte, 0, 256)
	for i, doc := range docs {
		if err := ctx.Err(); err != nil {
			w.b.Close()
			return InsertResult{}, err
		}
		var order *document.Order
		if i < len(orders) {
			order = orders[i]
		}
		d, encoded, err := db.prepareInsert(c, w, doc, order, seen, enc[:0])
		if err == nil {
			err = w.put(&d, encoded, nil)
		}
		if err != nil {
			res.Errors = append(res.Errors, WriteError{Index: i, Err: err})
			if !opts.Unordered {
				break
			}
			continue
		}
		seen[string(d.idKey)] = true
		res.Inserted++
	}
	if c.opts.Capped {
		if err := db.evictCapped(c, w); err != nil {
			w.b.Close()
			return InsertResult{}, err
		}
	}
	if err := w.commit(); err != nil {
		return InsertResult{}, err
	}
	return res, nil
}

// prepareInsert validates doc, gives it an _id if it has none, and checks
// that the _id is new.
func (db *DB) prepareInsert(c *collection, w *docWriter, doc document.Doc, order *document.Order, seen map[string]bool, enc []byte) (storedDoc, []byte, error) {
	_, given := doc["_id"]
	if !given {
		doc["_id"] = document.NewObjectID(db.opts.Now())
	}
	idKey, err := document.AppendKey(nil, doc["_id"])
	if err != nil {
		return storedDoc{}, nil, mongoerr.New(mongoerr.BadValue, "%v", err)
	}
	enc, err = document.EncodeOrdered(enc, doc, order.IDFirst())
	if err != nil {
		return storedDoc{}, nil, mongoerr.New(mongoerr.BadValue, "%v", err)
	}
	if len(enc) > document.MaxSize {
		return storedDoc{}, nil, mongoerr.New(mongoerr.BSONObjectTooLarge, "document of %d bytes is larger than the %d-byte limit", len(enc), document.MaxSize)
	}
	// An ObjectId made here is new by construction (a per-process random
	// part and a counter): only a given _id is looked up.
	dup := given && seen[string(idKey)]
	if given && !dup {
		// The batch is indexed: this also sees documents deleted or
		// written earlier in it.
		_, found, err := getDoc(w.b, c.id, idKey)
		if err != nil {
			return storedDoc{}, nil, err
		}
		dup = found
	}
	if dup {
		return storedDoc{}, nil, mongoerr.New(mongoerr.DuplicateKey,
			"E11000 duplicate key error collection: %s index: _id_ dup key: { _id: %s }", c.name, renderValue(doc["_id"]))
	}
	var seq uint64
	if c.opts.Capped {
		c.plain.seq++
		seq = c.plain.seq
	}
	return storedDoc{idKey: idKey, seq: seq, size: int64(len(enc)), doc: doc}, enc, nil
}

// evictCapped removes the oldest documents of a capped collection until
// it is within its size and max, counting the batch w is about to write.
// Documents of the batch itself go last, oldest first.
func (db *DB) evictCapped(c *collection, w *docWriter) error {
	p := c.plain
	count, size := p.count.Load()+w.dCount, p.bytes.Load()+w.dBytes
	over := func() bool {
		return size > c.opts.Size || (c.opts.Max > 0 && count > c.opts.Max)
	}
	if !over() {
		return nil
	}
	lo := naturalKey(c.id, 0)
	it, err := w.b.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(plainKey(c.id, subNatural, 0))})
	if err != nil {
		return err
	}
	var victims [][]byte
	for valid := it.First(); valid && over(); valid = it.Next() {
		idKey := append([]byte(nil), it.Value()...)
		d, ok, err := getDoc(w.b, c.id, idKey)
		if err != nil {
			it.Close()
			return err
		}
		if !ok {
			continue
		}
		victims = append(victims, idKey)
		count--
		size -= d.size
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, idKey := range victims {
		d, ok, err := getDoc(w.b, c.id, idKey)
		if err != nil {
			return err
		}
		if ok {
			if err := w.remove(&d); err != nil {
				return err
			}
		}
	}
	return nil
}

// docReader reads documents by _id key through one iterator: a seek is
// much cheaper than a Get when many documents are read.
type docReader struct {
	it     *pebble.Iterator
	prefix []byte
	key    []byte
}

func newDocReader(r pebble.Reader, coll uint32) (*docReader, error) {
	p := plainKey(coll, subDoc, 0)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, err
	}
	return &docReader{it: it, prefix: p}, nil
}

// get reads the document with _id key idKey; ok is false when there is none.
func (dr *docReader) get(idKey []byte) (d storedDoc, ok bool, err error) {
	dr.key = append(append(dr.key[:0], dr.prefix...), idKey...)
	if !dr.it.SeekGE(dr.key) || !bytes.Equal(dr.it.Key(), dr.key) {
		return d, false, dr.it.Error()
	}
	d, err = decodeStored(append([]byte(nil), idKey...), dr.it.Value())
	return d, err == nil, err
}

func (dr *docReader) close() error { return dr.it.Close() }
