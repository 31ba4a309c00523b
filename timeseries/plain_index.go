package timeseries

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// IDIndexName is the name of the _id index every plain collection has.
const IDIndexName = "_id_"

// liveIndex is a secondary index of a plain collection, ready to compute
// entries and bounds.
type liveIndex struct {
	spec    IndexSpec
	paths   [][]string
	partial *partialfilter.Filter // nil: every document
}

func newLiveIndex(spec IndexSpec) liveIndex {
	ix := liveIndex{spec: spec}
	for _, k := range spec.Key {
		ix.paths = append(ix.paths, strings.Split(k.Field, "."))
	}
	if spec.PartialFilterExpression != nil {
		// Validated when the index was created; a stored one parses.
		ix.partial, _ = partialfilter.Parse(spec.PartialFilterExpression)
	}
	return ix
}

// liveIndexes returns c's secondary indexes (compiled by compileRules;
// the slice is never modified).
func (db *DB) liveIndexes(c *collection) []liveIndex {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return c.live
}

// appendEntries adds doc's entries in ix to set: one per combination of
// the values of its fields (at most one field may hold an array: MongoDB's
// CannotIndexParallelArrays, 171). multi reports an array.
func (ix *liveIndex) appendEntries(set map[string]struct{}, coll uint32, doc document.Doc, idKey []byte) (multi bool, err error) {
	if ix.partial != nil && !ix.partial.Match(doc) {
		return false, nil
	}
	vals := make([][]any, len(ix.paths))
	arrayField := -1
	for i, p := range ix.paths {
		var m bool
		vals[i], m = document.IndexValues(doc, p)
		if m {
			if arrayField >= 0 {
				return false, mongoerr.New(mongoerr.CannotIndexParallelArrays,
					"cannot index parallel arrays [%s] [%s] (index %q)", ix.spec.Key[arrayField].Field, ix.spec.Key[i].Field, ix.spec.Name)
			}
			arrayField, multi = i, true
		}
	}
	prefix := indexPrefix(coll, ix.spec.ID)
	n := 1
	if arrayField >= 0 {
		n = len(vals[arrayField])
	}
	for j := 0; j < n; j++ {
		k := append([]byte(nil), prefix...)
		for i := range ix.paths {
			v := vals[i][0]
			if i == arrayField {
				v = vals[i][j]
			}
			if ix.spec.Key[i].Direction < 0 {
				k, err = document.AppendKeyDesc(k, v)
			} else {
				k, err = document.AppendKey(k, v)
			}
			if err != nil {
				return false, mongoerr.New(mongoerr.BadValue, "index %q: %v", ix.spec.Name, err)
			}
		}
		set[string(append(k, idKey...))] = struct{}{}
	}
	return multi, nil
}

// keyBounds is an interval of index or document keys to scan, [lo, hi).
type keyBounds struct {
	lo, hi []byte
	// score ranks plans: two per field bound by equality, one for a range.
	score int
	desc  string // the bounds for explain
}

// indexBounds returns the keys of ix a query with filter f must scan. A
// multikey index takes the bounds of one comparison per field, as a
// document matches {a: {$gt: 1, $lt: 5}} when one element is above 1 and
// another below 5.
func indexBounds(prefix []byte, key []IndexKey, f *partialfilter.Filter, multikey bool) keyBounds {
	b := keyBounds{lo: prefix, hi: prefixEnd(prefix)}
	var descs []string
	pfx := append([]byte(nil), prefix...)
	for _, k := range key {
		r := fieldRange(f, k.Field, multikey)
		if r.Empty {
			b.lo, b.hi = pfx, pfx
			descs = append(descs, k.Field+": empty")
			break
		}
		if !r.HasMin && !r.HasMax {
			break
		}
		desc := k.Direction < 0
		if r.HasMin && r.HasMax && r.MinInclusive && r.MaxInclusive && partialfilter.Compare(r.Min, r.Max) == 0 {
			pfx = appendKeyDir(pfx, r.Min, desc)
			b.lo, b.hi = pfx, prefixEnd(pfx)
			b.score += 2
			descs = append(descs, fmt.Sprintf("%s: [%s]", k.Field, renderValue(r.Min)))
			continue
		}
		b.lo, b.hi = rangeBounds(pfx, r, desc)
		b.score++
		descs = append(descs, k.Field+": "+renderRange(r))
		break
	}
	b.desc = strings.Join(descs, ", ")
	return b
}

// fieldRange is the range of path implied by f: all comparisons
// intersected, or for a multikey index the first conjunct that bounds it.
func fieldRange(f *partialfilter.Filter, path string, multikey bool) partialfilter.Range {
	if !multikey {
		r, _ := f.Range(path)
		return r
	}
	for _, c := range f.Conjuncts() {
		if r, _ := c.Range(path); r.HasMin || r.HasMax || r.Empty {
			return r
		}
	}
	return partialfilter.Range{}
}

func appendKeyDir(dst []byte, v any, desc bool) []byte {
	if desc {
		dst, _ = document.AppendKeyDesc(dst, v)
		return dst
	}
	dst, _ = document.AppendKey(dst, v)
	return dst
}

// rangeBounds returns the keys, after pfx, of the values in r. Key forms
// are self-delimiting, so every entry whose field equals v starts with
// pfx+key(v), and prefixEnd of that is the first entry above v.
func rangeBounds(pfx []byte, r partialfilter.Range, desc bool) (lo, hi []byte) {
	ref := r.Min
	if !r.HasMin {
		ref = r.Max
	}
	br := appendKeyDir(nil, ref, false)[0] // the type bracket
	with := func(v any) []byte { return appendKeyDir(append([]byte(nil), pfx...), v, desc) }
	if !desc {
		lo = append(append([]byte(nil), pfx...), br)
		if r.HasMin {
			if lo = with(r.Min); !r.MinInclusive {
				lo = prefixEnd(lo)
			}
		}
		hi = append(append([]byte(nil), pfx...), br+1)
		if r.HasMax {
			if hi = with(r.Max); r.MaxInclusive {
				hi = prefixEnd(hi)
			}
		}
		return lo, hi
	}
	lo = append(append([]byte(nil), pfx...), ^br)
	if r.HasMax {
		if lo = with(r.Max); !r.MaxInclusive {
			lo = prefixEnd(lo)
		}
	}
	hi = append(append([]byte(nil), pfx...), ^br+1)
	if r.HasMin {
		if hi = with(r.Min); r.MinInclusive {
			hi = prefixEnd(hi)
		}
	}
	return lo, hi
}

func renderValue(v any) string {
	b := document.AppendJSON(nil, document.Doc{"v": v})
	return string(b[5 : len(b)-1])
}

func renderRange(r partialfilter.Range) string {
	lo, hi := "(MinKey", "MaxKey)"
	if r.HasMin {
		lo = "(" + renderValue(r.Min)
		if r.MinInclusive {
			lo = "[" + renderValue(r.Min)
		}
	}
	if r.HasMax {
		hi = renderValue(r.Max) + ")"
		if r.MaxInclusive {
			hi = renderValue(r.Max) + "]"
		}
	}
	return lo + ", " + hi
}

// usable reports whether ix can answer a query with filter f: an index
// with a partial filter holds only the documents matching it, so every
// conjunct of that filter must be a conjunct of f.
func (ix *liveIndex) usable(f *partialfilter.Filter) bool {
	if ix.partial == nil {
		return true
	}
	have := map[string]bool{}
	for _, c := range f.Conjuncts() {
		have[c.String()] = true
	}
	for _, c := range ix.partial.Conjuncts() {
		if !have[c.String()] {
			return false
		}
	}
	return true
}

// buildIndexes writes the entries of new indexes for every document of
// c, in one pass and in batches. plainState.mu is held: writers wait, so
// the indexes are consistent with every write before and after them.
func (db *DB) buildIndexes(ctx context.Context, c *collection, specs []IndexSpec) error {
	ixs := make([]liveIndex, len(specs))
	for i := range specs {
		ixs[i] = newLiveIndex(specs[i])
	}
	multi := make([]bool, len(specs))
	prefix := plainKey(c.id, subDoc, 0)
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	b := db.pdb.NewBatch()
	flush := func() error {
		for i, m := range multi {
			if m {
				if err := b.Set(multikeyKey(c.id, specs[i].ID), []byte{1}, nil); err != nil {
					return err
				}
			}
		}
		err := db.commitBatch(c, b)
		b.Close()
		b = db.pdb.NewBatch()
		return err
	}
	defer func() { b.Close() }()
	set := map[string]struct{}{}
	for valid := it.First(); valid; valid = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		idKey := append([]byte(nil), it.Key()[len(prefix):]...)
		d, err := decodeStored(idKey, it.Value())
		if err != nil {
			return err
		}
		for i := range ixs {
			clear(set)
			m, err := ixs[i].appendEntries(set, c.id, d.doc, idKey)
			if err != nil {
				return err
			}
			multi[i] = multi[i] || m
			for k := range set {
				if err := b.Set([]byte(k), idKey, nil); err != nil {
					return err
				}
			}
		}
		if b.Len() > 4<<20 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	return flush()
}

// dropIndexEntries deletes the entries of an index. plainState.mu is held.
func (db *DB) dropIndexEntries(c *collection, id uint32) error {
	b := db.pdb.NewBatch()
	defer b.Close()
	p := indexPrefix(c.id, id)
	if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
		return err
	}
	if err := b.Delete(multikeyKey(c.id, id), nil); err != nil {
		return err
	}
	return db.commitBatch(c, b)
}

// isMultikey reads an index's multikey flag from r.
func isMultikey(r pebble.Reader, coll, id uint32) (bool, error) {
	_, closer, err := r.Get(multikeyKey(coll, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}
