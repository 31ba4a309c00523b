package timeseries

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/ttl"
)

// The TTL state of a collection (TTLState: its rules, their suspension,
// the next expiry) and the dry run of a change of its rules (PreviewTTL).

// TTLIndex is a TTL index as TTLState reports it.
type TTLIndex struct {
	Name                    string         `json:"name"`
	ExpireAfterSeconds      int64          `json:"expireAfterSeconds"`
	PartialFilterExpression map[string]any `json:"partialFilterExpression,omitempty"`
	Archive                 bool           `json:"archive,omitempty"`
}

// TTLState is the expiry state of a time-series collection.
type TTLState struct {
	ExpireAfterSeconds *int64     `json:"expireAfterSeconds"`
	Indexes            []TTLIndex `json:"indexes"`
	// Suspended is true while the collection holds a measurement outside
	// 1970..2038 (SPEC 2.4), or while its archive cannot be written (the
	// data that would go there is kept); Reason says why.
	Suspended         bool    `json:"suspended"`
	Reason            *string `json:"reason"`
	OutOfRangeBuckets int64   `json:"outOfRangeBuckets"`
	// NextExpiry is when the oldest measurement under a rule expires (in
	// the past when expired data awaits the monitor); nil when nothing
	// will expire.
	NextExpiry *time.Time `json:"nextExpiry"`
}

// TTLState reports a collection's expiry rules and state. It reads the
// oldest bucket of every series that has a TTL: one seek each.
func (db *DB) TTLState(ctx context.Context, name string) (*TTLState, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	st := &TTLState{Indexes: []TTLIndex{}}
	return st, c.kind().ttlState(ctx, db, c, st)
}

// ttlState is DB.TTLState on a time-series collection.
func (timeSeriesKind) ttlState(ctx context.Context, db *DB, c *collection, st *TTLState) error {
	type ser struct {
		id     uint64
		ttl    int64
		oldest int64
		inMem  bool
	}
	var list []ser
	db.mu.RLock()
	st.ExpireAfterSeconds = c.opts.ExpireAfterSeconds
	for _, spec := range c.indexes {
		if spec.IsTTL() {
			st.Indexes = append(st.Indexes, TTLIndex{Name: spec.Name, ExpireAfterSeconds: *spec.ExpireAfterSeconds,
				PartialFilterExpression: spec.PartialFilterExpression, Archive: spec.Archive})
		}
	}
	st.OutOfRangeBuckets = c.oorBuckets
	if c.oorBuckets > 0 {
		st.Suspended = true
		reason := fmt.Sprintf("%d bucket(s) hold measurements outside 1970-01-01T00:00:00Z..2038-01-19T03:14:07Z: nothing in the collection expires until they are deleted", c.oorBuckets)
		st.Reason = &reason
	} else if c.archiveFail != "" {
		// Only archiving waits: deletes of other series go on, and the
		// next expiry is still worth showing.
		st.Suspended = true
		reason := fmt.Sprintf("the archive cannot be written, so expired data that archives is kept (retried at %s): %s",
			c.archiveRetry.UTC().Format(time.RFC3339), c.archiveFail)
		st.Reason = &reason
	}
	if c.oorBuckets == 0 {
		for _, s := range c.series.byOrd {
			if s.ttl < 0 {
				continue
			}
			e := ser{id: s.id, ttl: s.ttl, oldest: math.MaxInt64}
			for _, b := range s.buckets {
				if b.rows() > 0 && b.minT < e.oldest {
					e.oldest, e.inMem = b.minT, true
				}
			}
			list = append(list, e)
		}
	}
	db.mu.RUnlock()
	var next int64 = math.MaxInt64
	it, err := db.pdb.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	for _, s := range list {
		if err := ctx.Err(); err != nil {
			return err
		}
		it.SetBounds(seriesPrefix(spaceBucket, c.id, s.id), prefixEnd(seriesPrefix(spaceBucket, c.id, s.id)))
		if it.First() {
			if v, err := it.ValueAndErr(); err == nil {
				if rows, minT, _, err := bucket.Peek(v); err == nil && rows > 0 {
					s.oldest = min(s.oldest, minT)
				}
			}
		}
		if err := it.Error(); err != nil {
			return err
		}
		if s.oldest == math.MaxInt64 {
			continue
		}
		d := s.ttl * int64(time.Second)
		if s.oldest <= math.MaxInt64-d {
			next = min(next, s.oldest+d)
		}
	}
	if next != math.MaxInt64 {
		t := time.Unix(0, next).UTC()
		st.NextExpiry = &t
	}
	return nil
}

// TTLProposal is a change of TTL values to preview: the collection's
// (ExpireAfterSeconds, or ExpireOff) and indexes' by name.
type TTLProposal struct {
	ExpireAfterSeconds *int64
	ExpireOff          bool
	Indexes            map[string]int64
	// NewIndex is a TTL index to preview as if CreateIndex had made it
	// (time-series collections).
	NewIndex *IndexSpec
}

// validateNewTTLIndex checks a proposed TTL index as CreateIndex would,
// against the existing indexes; it names spec when it has no name.
func validateNewTTLIndex(opts *CollectionOptions, existing []IndexSpec, spec *IndexSpec) error {
	if spec.Name == "" && len(spec.Key) > 0 {
		spec.Name = DefaultIndexName(spec.Key)
	}
	if !spec.IsTTL() {
		return mongoerr.New(mongoerr.InvalidOptions, "'newIndex' needs 'expireAfterSeconds': only TTL indexes expire data")
	}
	if _, err := validateIndex(opts, spec); err != nil {
		return err
	}
	for _, old := range existing {
		if old.Name == spec.Name {
			return mongoerr.New(mongoerr.IndexOptionsConflict,
				"an index named %q exists; preview a new value for it under 'indexes'", spec.Name)
		}
		if sameKey(old.Key, spec.Key) && sameFilter(old.PartialFilterExpression, spec.PartialFilterExpression) {
			return mongoerr.New(mongoerr.IndexOptionsConflict,
				"index %q already exists with the same key and filter; preview a new value for it under 'indexes'", old.Name)
		}
	}
	if len(existing) >= MaxIndexes {
		return mongoerr.New(mongoerr.CannotCreateIndex, "a collection holds at most %d indexes", MaxIndexes)
	}
	return nil
}

// RulePreview is what one rule would expire now.
type RulePreview struct {
	// Index is the TTL index, nil for the collection's expireAfterSeconds.
	Index              *string `json:"index"`
	ExpireAfterSeconds int64   `json:"expireAfterSeconds"`
	// Buckets and Measurements the monitor would delete now, counted under
	// the rule that gives their series its TTL.
	Buckets      int64 `json:"buckets"`
	Measurements int64 `json:"measurements"`
	// HiddenMeasurements are those reads would stop returning now: the
	// deleted ones and the expired ones of buckets not yet whole expired.
	HiddenMeasurements int64 `json:"hiddenMeasurements"`
	// Documents the rule would delete now (plain collections; each counted
	// under the first rule that expires it). Measurements and
	// HiddenMeasurements then count the same documents.
	Documents int64 `json:"documents,omitempty"`
}

// TTLPreview is the dry run of a TTL change.
type TTLPreview struct {
	Now       time.Time     `json:"now"`
	Suspended bool          `json:"suspended"`
	Rules     []RulePreview `json:"rules"`
	// Rollups are the collection's rollups, which keep what the rules
	// expire (docs/rollups.md).
	Rollups []RollupPreview `json:"rollups,omitempty"`
}

// RollupPreview is a rollup in a TTL dry run: its windows of the fields
// and funcs, kept for its own expireAfterSeconds (nil: for ever), for
// Sensors of the sensors a rule expires data of.
type RollupPreview struct {
	Name               string   `json:"name"`
	Window             string   `json:"window"`
	Fields             []string `json:"fields"`
	Funcs              []string `json:"funcs"`
	ExpireAfterSeconds *int64   `json:"expireAfterSeconds"`
	Sensors            int      `json:"sensors"`
}

// PreviewTTL reports, per rule, what would expire now if the collection had
// the TTL values of p, without changing anything. It reads the control
// blocks of the buckets that start before their series' cutoff, and
// decodes the times of those that straddle it.
func (db *DB) PreviewTTL(ctx context.Context, name string, p TTLProposal) (*TTLPreview, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	now := db.opts.Now()
	out := &TTLPreview{Now: now.UTC(), Rules: []RulePreview{}}
	for n := range p.Indexes {
		db.mu.RLock()
		i := indexByName(c.indexes, n)
		db.mu.RUnlock()
		if i < 0 {
			return nil, mongoerr.New(mongoerr.IndexNotFound, "index not found with name [%s]", n)
		}
	}
	return c.kind().preview(ctx, db, c, p, out)
}

// preview is DB.PreviewTTL on a time-series collection.
func (timeSeriesKind) preview(ctx context.Context, db *DB, c *collection, p TTLProposal, out *TTLPreview) (*TTLPreview, error) {
	now := out.Now
	db.mu.RLock()
	probe, err := proposedRules(c, p)
	if err != nil {
		db.mu.RUnlock()
		return nil, err
	}
	names := c.names
	out.Suspended = c.oorBuckets > 0
	for _, r := range probe.rules {
		rp := RulePreview{ExpireAfterSeconds: r.ExpireAfterSeconds}
		if r.Index != "" {
			idx := r.Index
			rp.Index = &idx
		}
		out.Rules = append(out.Rules, rp)
	}
	var list []previewSeries
	if !out.Suspended {
		list = previewList(c, probe, now)
	}
	for _, r := range c.rollups {
		spec := r.coll.opts.RollupOf
		rp := RollupPreview{Name: r.coll.name, Window: spec.Window, Fields: spec.Fields, Funcs: spec.Funcs,
			ExpireAfterSeconds: r.coll.opts.ExpireAfterSeconds}
		for _, e := range list {
			if s := c.seriesOf(e.id); s != nil && (r.filter == nil || r.filter.Match(c.metaDoc(seriesMeta(s)))) {
				rp.Sensors++
			}
		}
		out.Rollups = append(out.Rollups, rp)
	}
	// Pebble's view is taken with memory's, as Find does: the buckets a
	// checkpoint writes later may refer to field names newer than names.
	snap := db.pdb.NewSnapshot()
	db.mu.RUnlock()
	defer snap.Close()
	if err := previewStored(ctx, snap, c.id, names, list, out); err != nil {
		return nil, err
	}
	return out, nil
}

// proposedRules returns a copy of collection c's options and indexes with
// the TTL values of p, its rules compiled. DB.mu is held.
func proposedRules(c *collection, p TTLProposal) (*collection, error) {
	probe := &collection{opts: c.opts, indexes: append([]IndexSpec(nil), c.indexes...)}
	if p.NewIndex != nil {
		spec := *p.NewIndex
		if err := validateNewTTLIndex(&probe.opts, probe.indexes, &spec); err != nil {
			return nil, err
		}
		probe.indexes = append(probe.indexes, spec)
	}
	if p.ExpireOff {
		probe.opts.ExpireAfterSeconds = nil
	} else if p.ExpireAfterSeconds != nil {
		probe.opts.ExpireAfterSeconds = p.ExpireAfterSeconds
	}
	for i := range probe.indexes {
		if v, ok := p.Indexes[probe.indexes[i].Name]; ok {
			v := v
			probe.indexes[i].ExpireAfterSeconds = &v
		}
	}
	probe.compileRules()
	return probe, nil
}

// previewSeries is a series a TTL preview counts: the rule that applies
// to it (index in the probe's rules), its cutoff, and its buckets in
// memory.
type previewSeries struct {
	id     uint64
	rule   int
	cutoff int64
	mem    []*bucket.Columns // captured: those that start before the cutoff
	inMem  map[uint64]bool
}

// previewList returns the series of c a rule of probe applies to, each
// with the rule of the shortest TTL among those that match. DB.mu is held.
func previewList(c, probe *collection, now time.Time) []previewSeries {
	var list []previewSeries
	for _, s := range c.byID {
		var m seriesMetaDoc // decoded only for a rule whose strings the key holds
		best, ok := -1, false
		for i := range probe.rules {
			if probe.ruleMatches(i, s, &m) && (!ok || probe.rules[i].ExpireAfterSeconds < probe.rules[best].ExpireAfterSeconds) {
				best, ok = i, true
			}
		}
		if !ok {
			continue
		}
		e := previewSeries{id: s.id, rule: best, cutoff: ttl.Cutoff(now, probe.rules[best].ExpireAfterSeconds), inMem: map[uint64]bool{}}
		for _, b := range s.buckets {
			e.inMem[b.id] = true
			if b.rows() > 0 && b.minT < e.cutoff {
				cp := b.capture()
				e.mem = append(e.mem, &cp.cols)
			}
		}
		list = append(list, e)
	}
	return list
}

// countTimes adds to rp the measurements of one bucket with times that
// are before cutoff, and the bucket itself when all of them are.
func (rp *RulePreview) countTimes(times []int64, cutoff int64) {
	hidden := int64(0)
	newest := int64(math.MinInt64)
	for _, t := range times {
		if t < cutoff {
			hidden++
		}
		newest = max(newest, t)
	}
	rp.HiddenMeasurements += hidden
	if len(times) > 0 && newest < cutoff {
		rp.Buckets++
		rp.Measurements += int64(len(times))
	}
}

// previewStored adds to out's rules what would expire of the series of
// list, in memory and in snap (collection coll, with name table names).
func previewStored(ctx context.Context, snap *pebble.Snapshot, coll uint32, names []string, list []previewSeries, out *TTLPreview) error {
	it, err := snap.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	var r bucket.Reader
	for _, s := range list {
		if err := ctx.Err(); err != nil {
			return err
		}
		rp := &out.Rules[s.rule]
		for _, cols := range s.mem {
			rp.countTimes(cols.Times, s.cutoff)
		}
		it.SetBounds(seriesPrefix(spaceBucket, coll, s.id), seriesTimeKey(spaceBucket, coll, s.id, s.cutoff))
		for valid := it.First(); valid; valid = it.Next() {
			kp, err := parseBucketKey(it.Key())
			if err != nil {
				return err
			}
			if s.inMem[kp.id] {
				continue
			}
			v, err := it.ValueAndErr()
			if err == nil {
				err = r.ResetNames(v, names)
			}
			if err != nil {
				return fmt.Errorf("series %d bucket %d: %w", s.id, kp.id, err)
			}
			if r.MaxTime() < s.cutoff {
				rp.Buckets++
				rp.Measurements += int64(r.Rows())
				rp.HiddenMeasurements += int64(r.Rows())
				continue
			}
			times, err := r.Times(nil)
			if err != nil {
				return err
			}
			rp.countTimes(times, s.cutoff)
		}
		if err := it.Error(); err != nil {
			return err
		}
	}
	return nil
}
