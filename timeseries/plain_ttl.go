package timeseries

import (
	"context"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/ttl"
)

// plainRule is a TTL index of a plain collection (SPEC 3.1): a document
// matching its partial filter expires when the earliest date its field
// holds is more than seconds old. A document whose field holds no date
// never expires.
type plainRule struct {
	index   liveIndex
	seconds int64
}

// cutoff is the oldest date still alive at now.
func (r *plainRule) cutoff(now time.Time) time.Time {
	return now.Add(-time.Duration(r.seconds) * time.Second)
}

// expired reports whether doc has expired under r at now.
func (r *plainRule) expired(doc document.Doc, now time.Time) bool {
	if r.index.partial != nil && !r.index.partial.Match(doc) {
		return false
	}
	t, ok := document.EarliestDate(doc, r.index.paths[0])
	return ok && t.Before(r.cutoff(now))
}

// expiredAny reports whether doc has expired under any of rules: reads
// never return it, whether or not the monitor has deleted it yet.
func expiredAny(rules []plainRule, doc document.Doc, now time.Time) bool {
	for i := range rules {
		if rules[i].expired(doc, now) {
			return true
		}
	}
	return false
}

func (db *DB) plainRulesOf(c *collection) []plainRule {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return c.plainRules
}

// ttlChunk is how many documents a TTL batch deletes under one hold of
// the collection's write lock: writers wait at most that long.
const ttlChunk = 512

// expirePlain deletes, within budget, the documents of c that TTL index
// index has expired at now. It walks the index's entries below the cutoff
// in date order, so a batch that stops at its budget resumes where the
// oldest expired documents are. It deletes in chunks, each one durable
// log record written with writers held off; every document is read again
// under the lock, so one a writer refreshed meanwhile stays.
func (db *DB) expirePlain(ctx context.Context, c *collection, index string, now time.Time, budget ttl.Budget) (ttl.Batch, error) {
	var out ttl.Batch
	var rule *plainRule
	rules := db.plainRulesOf(c)
	for i := range rules {
		if rules[i].index.spec.Name == index {
			rule = &rules[i]
		}
	}
	if rule == nil {
		return out, nil
	}
	spec := rule.index.spec
	r := partialfilter.Range{Max: rule.cutoff(now), HasMax: true}
	lo, hi := rangeBounds(indexPrefix(c.id, spec.ID), r, spec.Key[0].Direction < 0)
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return out, err
	}
	defer it.Close()
	valid := it.First()
	for valid {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if budget.Docs > 0 && out.Docs >= budget.Docs || !budget.Deadline.IsZero() && db.opts.Now().After(budget.Deadline) {
			out.More = true
			break
		}
		var n int64
		var dropped bool
		n, valid, dropped, err = db.expireChunk(c, rule, it, now, budget.Docs-out.Docs)
		out.Docs += n
		if err != nil || dropped {
			return out, err
		}
	}
	return out, it.Error()
}

// expireChunk deletes up to ttlChunk expired documents (and at most limit,
// if above 0) from the entries it is at, holding c's write lock.
func (db *DB) expireChunk(c *collection, rule *plainRule, it *pebble.Iterator, now time.Time, limit int64) (n int64, valid, dropped bool, err error) {
	p := c.plain
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.dropped {
		return 0, false, true, nil
	}
	dr, err := newDocReader(db.pdb, c.id)
	if err != nil {
		return 0, false, false, err
	}
	defer dr.close()
	w := db.newDocWriter(c)
	seen := map[string]bool{}
	valid = it.Valid()
	for ; valid && n < ttlChunk && (limit <= 0 || n < limit); valid = it.Next() {
		idKey := it.Value()
		if seen[string(idKey)] {
			continue // another date of the same array
		}
		d, ok, err := dr.get(idKey)
		if err != nil {
			w.b.Close()
			return 0, false, false, err
		}
		if !ok || !rule.expired(d.doc, now) {
			continue
		}
		seen[string(d.idKey)] = true
		if err := w.remove(&d); err != nil {
			w.b.Close()
			return 0, false, false, err
		}
		n++
	}
	if err := w.commit(); err != nil {
		return 0, false, false, err
	}
	return n, valid, false, nil
}

// plainTTLState fills st for a plain collection: its TTL indexes and when
// the oldest document they hold expires.
func (db *DB) plainTTLState(c *collection, st *TTLState) error {
	for _, r := range db.plainRulesOf(c) {
		spec := r.index.spec
		st.Indexes = append(st.Indexes, TTLIndex{Name: spec.Name, ExpireAfterSeconds: r.seconds,
			PartialFilterExpression: spec.PartialFilterExpression})
		// The oldest date in the index is the first date entry.
		lo, hi := rangeBounds(indexPrefix(c.id, spec.ID), partialfilter.Range{Min: time.Unix(-1<<62, 0), HasMin: true}, spec.Key[0].Direction < 0)
		it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		// Oldest first: from the start of an ascending index, the end of
		// a descending one.
		first, next := it.First, it.Next
		if spec.Key[0].Direction < 0 {
			first, next = it.Last, it.Prev
		}
		for valid := first(); valid; valid = next() {
			d, ok, err := getDoc(db.pdb, c.id, it.Value()) // once per index: a Get is enough
			if err != nil {
				it.Close()
				return err
			}
			if !ok || r.index.partial != nil && !r.index.partial.Match(d.doc) {
				continue
			}
			if t, ok := document.EarliestDate(d.doc, r.index.paths[0]); ok {
				at := t.Add(time.Duration(r.seconds) * time.Second)
				if st.NextExpiry == nil || at.Before(*st.NextExpiry) {
					st.NextExpiry = &at
				}
			}
			break
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	return nil
}

// previewPlain counts, per TTL index of a plain collection, the documents
// the proposed values would expire now, reading each index below its
// proposed cutoff. Nothing changes.
func (db *DB) previewPlain(ctx context.Context, c *collection, p TTLProposal, out *TTLPreview) (*TTLPreview, error) {
	if p.ExpireAfterSeconds != nil || p.ExpireOff {
		return nil, invalid("collection-level 'expireAfterSeconds' needs a time-series collection; preview the TTL indexes of %q by name", c.name)
	}
	now := db.opts.Now()
	rules := append([]plainRule(nil), db.plainRulesOf(c)...)
	for n := range p.Indexes {
		found := false
		for i := range rules {
			if rules[i].index.spec.Name == n {
				rules[i].seconds, found = p.Indexes[n], true
			}
		}
		if found {
			continue
		}
		// A single-field index collMod would turn into a TTL index.
		for _, ix := range db.liveIndexes(c) {
			if ix.spec.Name == n && len(ix.paths) == 1 && !c.opts.Capped {
				rules, found = append(rules, plainRule{index: ix, seconds: p.Indexes[n]}), true
			}
		}
		if !found {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "index %q of %q cannot be a TTL index (compound, or the collection is capped)", n, c.name)
		}
	}
	snap := db.pdb.NewSnapshot()
	defer snap.Close()
	dr, err := newDocReader(snap, c.id)
	if err != nil {
		return nil, err
	}
	defer dr.close()
	counted := map[string]bool{}
	for i := range rules {
		r := &rules[i]
		spec := r.index.spec
		idx := spec.Name
		rp := RulePreview{Index: &idx, ExpireAfterSeconds: r.seconds}
		lo, hi := rangeBounds(indexPrefix(c.id, spec.ID), partialfilter.Range{Max: r.cutoff(now), HasMax: true}, spec.Key[0].Direction < 0)
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return nil, err
		}
		for valid := it.First(); valid; valid = it.Next() {
			if rp.Documents%256 == 0 {
				if err := ctx.Err(); err != nil {
					it.Close()
					return nil, err
				}
			}
			if counted[string(it.Value())] {
				continue
			}
			d, ok, err := dr.get(it.Value())
			if err != nil {
				it.Close()
				return nil, err
			}
			if ok && r.expired(d.doc, now) {
				counted[string(d.idKey)] = true
				rp.Documents++
			}
		}
		if err := it.Close(); err != nil {
			return nil, err
		}
		rp.Measurements, rp.HiddenMeasurements = rp.Documents, rp.Documents
		out.Rules = append(out.Rules, rp)
	}
	return out, nil
}
