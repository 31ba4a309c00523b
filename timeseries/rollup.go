package timeseries

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// RollupSpec makes a time-series collection a rollup of another
// (docs/rollups.md): per meta value of the source and window, one
// measurement stamped at the window's start, with a field
// <field>_<func> per field and function. The rollup is kept current from
// the windows the source's writes and deletes touch, recomputed from the
// source's aggregate while the source still holds them; expiry of the
// source never changes it.
type RollupSpec struct {
	// Source is the collection rolled up; SourceID its id, set when the
	// rollup is created: a source dropped and created again is another
	// collection, whose rollup this is not.
	Source   string `json:"source"`
	SourceID uint32 `json:"sourceId,omitempty"`
	// Window is the width of the windows, canonical ("90s", "5m", "1h",
	// "1d"): whole seconds, aligned to the epoch.
	Window string `json:"window"`
	// Fields are the source's fields aggregated, Funcs the functions
	// (count sum avg min max first last), each in the order given.
	Fields []string `json:"fields"`
	Funcs  []string `json:"funcs"`
	// PartialFilterExpression, when set, restricts the rollup to the
	// series whose meta value it matches (it names the metaField only).
	PartialFilterExpression map[string]any `json:"partialFilterExpression,omitempty"`
}

// Rollup bounds.
const (
	// MaxRollupWindow is the widest window: a year of 366 days.
	MaxRollupWindow = 366 * 24 * time.Hour
	// MaxRollupFields bounds the fields of one rollup.
	MaxRollupFields = 100
	// maxRollupSpans is how many disjoint ranges a series' pending marks
	// keep before the nearest two merge into one.
	maxRollupSpans = 8
	// rollupCells bounds the (series, window) cells one recomputation
	// aggregates at once.
	rollupCells = 1 << 15
)

// ParseRollupWindow reads a rollup window: an integer with a unit s, m,
// h, d or w ("90s", "15m", "1h", "1d") or a Go duration ("1h30m") of
// whole seconds, from 1 s to MaxRollupWindow.
func ParseRollupWindow(s string) (time.Duration, error) {
	var d time.Duration
	if n := len(s); n > 1 && strings.IndexByte("dw", s[n-1]) >= 0 {
		v, err := strconv.ParseInt(s[:n-1], 10, 64)
		if err != nil || v <= 0 || v > int64(MaxRollupWindow/(24*time.Hour)) {
			return 0, mongoerr.New(mongoerr.BadValue, "invalid rollup window %q: want a duration such as 5m, 1h or 1d", s)
		}
		d = time.Duration(v) * 24 * time.Hour
		if s[n-1] == 'w' {
			d *= 7
		}
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, mongoerr.New(mongoerr.BadValue, "invalid rollup window %q: want a duration such as 5m, 1h or 1d", s)
		}
	}
	if d < time.Second || d > MaxRollupWindow || d%time.Second != 0 {
		return 0, mongoerr.New(mongoerr.BadValue, "rollup window %q must be whole seconds from 1s to %dd", s, MaxRollupWindow/(24*time.Hour))
	}
	return d, nil
}

// formatRollupWindow writes d in the largest unit that divides it.
func formatRollupWindow(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s%86400 == 0:
		return strconv.FormatInt(s/86400, 10) + "d"
	case s%3600 == 0:
		return strconv.FormatInt(s/3600, 10) + "h"
	case s%60 == 0:
		return strconv.FormatInt(s/60, 10) + "m"
	}
	return strconv.FormatInt(s, 10) + "s"
}

// RollupOptions returns the options of the collection that rolls up a
// source of time-series options src by spec: the same timeField and
// metaField, a granularity that suits the window, spec made canonical
// (its window in its largest unit) and the rollup's own
// expireAfterSeconds. Bad input is BadValue (2).
func RollupOptions(src *model.TimeSeriesOptions, spec RollupSpec, expireAfterSeconds *int64) (CollectionOptions, error) {
	if src == nil {
		return CollectionOptions{}, mongoerr.New(mongoerr.BadValue, "collection %q is not a time-series collection: only time series have rollups", spec.Source)
	}
	d, err := ParseRollupWindow(spec.Window)
	if err != nil {
		return CollectionOptions{}, err
	}
	spec.Window = formatRollupWindow(d)
	if _, _, err := checkRollupSpec(src, &spec); err != nil {
		return CollectionOptions{}, err
	}
	g := model.GranularitySeconds
	switch {
	case d >= time.Hour:
		g = model.GranularityHours
	case d >= time.Minute:
		g = model.GranularityMinutes
	}
	ts := &model.TimeSeriesOptions{TimeField: src.TimeField, MetaField: src.MetaField, Granularity: g}
	return CollectionOptions{TimeSeries: ts, ExpireAfterSeconds: expireAfterSeconds, RollupOf: &spec}, nil
}

// checkRollupSpec checks spec against its source's options: fields, funcs
// and filter. It returns the functions and the compiled filter.
func checkRollupSpec(src *model.TimeSeriesOptions, spec *RollupSpec) ([]AggFunc, *partialfilter.Filter, error) {
	if len(spec.Fields) == 0 {
		return nil, nil, mongoerr.New(mongoerr.BadValue, "a rollup needs at least one field")
	}
	if len(spec.Fields) > MaxRollupFields {
		return nil, nil, mongoerr.New(mongoerr.BadValue, "a rollup takes at most %d fields; got %d", MaxRollupFields, len(spec.Fields))
	}
	for i, f := range spec.Fields {
		switch {
		case f == "" || strings.HasPrefix(f, "$") || strings.ContainsAny(f, ".\x00") || len(f) > model.MaxFieldNameBytes:
			return nil, nil, mongoerr.New(mongoerr.BadValue, "invalid rollup field %.40q", f)
		case f == src.TimeField || (src.MetaField != "" && f == src.MetaField) || f == "_id":
			return nil, nil, mongoerr.New(mongoerr.BadValue, "rollup field %q: the timeField, the metaField and _id are not aggregated", f)
		case slices.Contains(spec.Fields[:i], f):
			return nil, nil, mongoerr.New(mongoerr.BadValue, "rollup field %q is given twice", f)
		}
	}
	if len(spec.Funcs) == 0 {
		return nil, nil, mongoerr.New(mongoerr.BadValue, "a rollup needs at least one of the funcs count, sum, avg, min, max, first, last")
	}
	funcs := make([]AggFunc, len(spec.Funcs))
	for i, f := range spec.Funcs {
		if !slices.Contains(AllAggFuncs, AggFunc(f)) {
			return nil, nil, mongoerr.New(mongoerr.BadValue, "unknown rollup func %q; want count, sum, avg, min, max, first or last", f)
		}
		if slices.Contains(spec.Funcs[:i], f) {
			return nil, nil, mongoerr.New(mongoerr.BadValue, "rollup func %q is given twice", f)
		}
		funcs[i] = AggFunc(f)
	}
	var filter *partialfilter.Filter
	if spec.PartialFilterExpression != nil {
		var err error
		if filter, err = partialfilter.Parse(spec.PartialFilterExpression); err != nil {
			return nil, nil, mongoerr.New(mongoerr.BadValue, "invalid rollup partialFilterExpression: %v", mongoerr.MessageOf(err))
		}
		if src.MetaField == "" || !filter.RefersOnlyTo(src.MetaField) {
			return nil, nil, mongoerr.New(mongoerr.BadValue, "a rollup's partialFilterExpression may only refer to the metaField %q", src.MetaField)
		}
	}
	return funcs, filter, nil
}

// rollup is a rollup being maintained: attached to its source collection
// (collection.rollups), with the windows still to recompute. Guarded by
// DB.mu.
type rollup struct {
	coll   *collection // the rollup collection
	src    *collection
	window int64 // nanoseconds
	fields []string
	funcs  []AggFunc
	filter *partialfilter.Filter
	// pending holds, per source series id, the window-aligned ranges
	// [lo, hi) whose windows a write or delete touched; inflight those a
	// pass is recomputing. A checkpoint persists both (spaceRollup), so
	// that a crash loses none.
	pending, inflight map[uint64][]span
	// bulk holds the marks of one range shared by many series, the
	// common case of in-order writes (each batch marks the current
	// windows of the series it reaches), as a bitset by series ord: a
	// mark there costs a bit test, not a map lookup. It is part of
	// pending.
	bulk bulkMarks
	// since is when the oldest mark in pending was made, passSince the
	// same for inflight; zero when empty.
	since, passSince time.Time
	// known and matched cache, per source series (by ord), whether the
	// filter takes it.
	known, matched bitset
	// lastErr is the last pass's failure, shown by ListRollups.
	lastErr error
	// tails holds, per source series id, the series' newest window as
	// the last pass left it (rollupTail), which the next pass folds new
	// rows into instead of reading the window again. Only passes use it
	// (DB.rollupMu).
	tails map[uint64]*rollupTail
	// minSince holds, per source series (by ord), the earliest time a
	// write or delete reached since the series' last pass began
	// (math.MaxInt64: none): a tail is folded into only while every
	// change since it was taken lies after it. Series past its end have
	// no tail.
	minSince []int64
}

// rollupTail is the newest window of a source series as a pass
// aggregated it: its cells, one per rollup field, and maxT, the newest
// time of a value they hold (window-1 when they hold none). Rows after
// maxT, while minSince shows no change at or before it, are all the
// window lacks: a pass aggregates those alone and folds them in.
type rollupTail struct {
	window int64
	maxT   int64
	cells  []aggCell
}

// maxRollupTails bounds the tails a rollup keeps: beyond it, series have
// their windows read again whole.
const maxRollupTails = 1 << 18

// span is a window-aligned time range [lo, hi) in nanoseconds. fill marks
// a rollup's first fill (and a refill), which recomputes windows the
// source may have begun to expire too: what the source still holds is
// all there is to roll up.
type span struct {
	lo, hi int64
	fill   bool
}

// floorWindow is the start of the window of width w holding t.
func floorWindow(t, w int64) int64 {
	r := t % w
	if r < 0 {
		r += w
	}
	return t - r
}

// windowEnd is the end of the window holding t, saturated at MaxInt64.
func windowEnd(t, w int64) int64 {
	lo := floorWindow(t, w)
	if lo > math.MaxInt64-w {
		return math.MaxInt64
	}
	return lo + w
}

// bitset is a set of small integers.
type bitset []uint64

func (b bitset) has(i uint32) bool { return int(i>>6) < len(b) && b[i>>6]&(1<<(i&63)) != 0 }

// set adds i and reports whether it was new.
func (b *bitset) set(i uint32) bool {
	for int(i>>6) >= len(*b) {
		*b = append(*b, 0)
	}
	w := &(*b)[i>>6]
	if *w&(1<<(i&63)) != 0 {
		return false
	}
	*w |= 1 << (i & 63)
	return true
}

// bulkMarks are marks of one span for a set of series (by ord).
type bulkMarks struct {
	span span
	bits bitset
	n    int // series in bits
}

// maxBulkMove is how many series a bulk may hold when a mark ahead of
// its span comes: fewer move to the map and the bulk starts again there
// (a late row began it); more stretch its span forward instead.
const maxBulkMove = 64

// takes reports whether the rollup covers series s. DB.mu is held for
// writing.
func (r *rollup) takes(s *series) bool {
	if r.filter == nil {
		return true
	}
	if r.known.has(s.ord) {
		return r.matched.has(s.ord)
	}
	r.known.set(s.ord)
	ok := r.filter.Match(r.src.metaDoc(seriesMeta(s)))
	if ok {
		r.matched.set(s.ord)
	}
	return ok
}

// addBulk adds the bulk's marks to m, as per-series spans. DB.mu is held.
func (r *rollup) addBulk(m map[uint64][]span) {
	if r.bulk.n == 0 {
		return
	}
	for _, s := range r.src.byID {
		if r.bulk.bits.has(s.ord) {
			m[s.id] = addSpan(m[s.id], r.bulk.span)
		}
	}
}

// takeBulk moves the bulk's marks into m. DB.mu is held for writing.
func (r *rollup) takeBulk(m map[uint64][]span) {
	r.addBulk(m)
	r.bulk = bulkMarks{bits: r.bulk.bits[:0]}
	clear(r.bulk.bits[:cap(r.bulk.bits)])
}

// pendingSeriesCount counts the series with marks in pending (a series in
// both the map and the bulk counts twice).
func (r *rollup) pendingSeriesCount() int { return len(r.pending) + r.bulk.n }

// mark records that the windows of series s from lo to hi (inclusive
// times) need recomputing. DB.mu is held for writing.
func (r *rollup) mark(s *series, lo, hi int64, now time.Time) {
	if int(s.ord) < len(r.minSince) && lo < r.minSince[s.ord] {
		r.minSince[s.ord] = lo
	}
	// The common case first, with no division: in-order writes mark the
	// series' current windows, which the bulk holds already.
	if b := &r.bulk; b.n > 0 && lo >= b.span.lo && hi < b.span.hi && b.bits.has(s.ord) {
		return
	}
	r.markSpan(s, lo, hi, false, now)
}

func (r *rollup) markSpan(s *series, lo, hi int64, fill bool, now time.Time) {
	if !r.takes(s) {
		return
	}
	sp := span{lo: floorWindow(lo, r.window), hi: windowEnd(hi, r.window), fill: fill}
	if lo == math.MinInt64 {
		sp.lo = math.MinInt64
	}
	if r.since.IsZero() {
		r.since = now
	}
	if b := &r.bulk; !fill && sp.lo != math.MinInt64 && sp.hi != math.MaxInt64 {
		if b.n > 0 && b.n <= maxBulkMove && sp.lo > b.span.hi {
			r.takeBulk(r.pending)
		}
		if b.n == 0 {
			b.span = sp
		}
		if sp.lo >= b.span.lo && (sp.lo <= b.span.hi || b.n > maxBulkMove) {
			b.span.hi = max(b.span.hi, sp.hi)
			if b.bits.set(s.ord) {
				b.n++
			}
			return
		}
	}
	ss := r.pending[s.id]
	for _, x := range ss {
		if x.lo <= sp.lo && sp.hi <= x.hi && (x.fill || !fill) {
			return // marked already: in-order writes mark the same window batch after batch
		}
	}
	r.pending[s.id] = addSpan(ss, sp)
}

// addSpan adds sp to the sorted disjoint spans ss, merging overlapping
// and adjacent ones; past maxRollupSpans the two closest merge.
func addSpan(ss []span, sp span) []span {
	i := 0
	for i < len(ss) && ss[i].hi < sp.lo {
		i++
	}
	j := i
	for j < len(ss) && ss[j].lo <= sp.hi {
		sp.lo, sp.hi, sp.fill = min(sp.lo, ss[j].lo), max(sp.hi, ss[j].hi), sp.fill || ss[j].fill
		j++
	}
	ss = slices.Replace(ss, i, j, sp)
	if len(ss) > maxRollupSpans {
		best := 1
		for k := 2; k < len(ss); k++ {
			if uint64(ss[k].lo-ss[k-1].hi) < uint64(ss[best].lo-ss[best-1].hi) {
				best = k
			}
		}
		ss[best-1].hi = ss[best].hi
		ss[best-1].fill = ss[best-1].fill || ss[best].fill
		ss = slices.Delete(ss, best, best+1)
	}
	return ss
}

// markAll marks every series of the rollup's source over all time: a
// rollup's first fill, and what a restart finds with no persisted marks.
func (r *rollup) markAll(now time.Time) {
	for _, s := range r.src.byID {
		r.markSpan(s, math.MinInt64, math.MaxInt64, true, now)
	}
}

// markRollups records the windows rows of s from lo to hi touched in
// every rollup of c; the caller wakes the rollup loop (wakeRollups) once
// it has marked what it changed. now is read (once) only when a mark is
// made. DB.mu is held for writing.
//
// In-order writes reach the same windows of a series batch after batch:
// c.marked remembers, per series, a range every rollup has marked
// already, so that those writes cost one comparison for all the rollups
// (apply runs under the writers' lock: the rollups' checks there were
// ~5% of an iot load's rate).
func (db *DB) markRollups(c *collection, s *series, lo, hi int64, now *time.Time) {
	if int(s.ord) < len(c.marked) {
		if m := &c.marked[s.ord]; m.gen == c.markedGen && lo >= m.lo && hi < m.hi {
			return
		}
	}
	if now.IsZero() {
		*now = db.opts.Now()
	}
	covered := int64(math.MaxInt64)
	for _, r := range c.rollups {
		r.mark(s, lo, hi, *now)
		covered = min(covered, windowEnd(hi, r.window))
	}
	if n := int(s.ord) + 1; n > len(c.marked) {
		c.marked = slices.Grow(c.marked, n-len(c.marked))[:n]
	}
	// Every rollup holds [floor(lo), windowEnd(hi)) of s marked, and its
	// earliest write since the last pass (minSince) at or before lo: a
	// write within [lo, covered) changes neither.
	c.marked[s.ord] = markedRange{gen: c.markedGen, lo: lo, hi: covered}
}

// markedRange is a range [lo, hi) of a series' times that every rollup of
// its collection has marked, valid while gen is the collection's
// markedGen: a pass taking the marks, or the rollups changing, moves it
// on (forgetMarked).
type markedRange struct {
	gen    uint64
	lo, hi int64
}

// forgetMarked invalidates c's cache of marked ranges: marks were taken
// by a pass (which also starts the series' minSince anew) or the rollups
// changed. DB.mu is held for writing.
func (c *collection) forgetMarked() {
	c.markedGen++
	if len(c.rollups) == 0 {
		c.marked = nil
	}
}

// remarkRollup marks again, in the rollup kept in collection c, the
// windows of the source series that a delete of c replayed from the log
// removed. A pass replaces a range of a rollup by two records, a delete
// and an insert: a crash between them leaves the delete, and the marks an
// open restores (persisted, and made again by the source's writes
// replayed) need not cover its range, which spans every series of the
// pass's group. Marked as a fill: what the delete removed is recomputed
// from what the source holds, also before the source's expiry horizon.
// Replayed with its insert too, the range is recomputed to the same
// measurements. DB.mu is held for writing.
func (db *DB) remarkRollup(c *collection, d *deleteRecord) {
	now := db.opts.Now()
	for _, src := range db.mu.byID {
		for _, r := range src.rollups {
			if r.coll != c {
				continue
			}
			for _, k := range d.metaKeys {
				if s := src.series.get(k); s != nil {
					r.markSpan(s, d.minTime, d.maxTime, true, now)
				}
			}
		}
	}
}

// relinkRollups attaches every rollup collection to its source and
// detaches those whose source or definition is gone; a rollup newly
// attached is marked for a whole recomputation unless marks (persisted,
// from spaceRollup) are given for it. DB.mu is held for writing.
func (db *DB) relinkRollups(stored map[uint32]map[uint64][]span) error {
	want := map[*collection][]*rollup{}
	byName := make(map[string]*collection, len(db.mu.byID))
	for _, c := range db.mu.byID {
		if !c.dropped {
			byName[c.name] = c
		}
	}
	for _, c := range db.mu.byID {
		if c.dropped || c.opts.RollupOf == nil {
			continue
		}
		spec := c.opts.RollupOf
		src := byName[spec.Source]
		if src == nil || src.dropped || src.opts.TimeSeries == nil || src == c || src.id != spec.SourceID {
			continue
		}
		var r *rollup
		for _, old := range src.rollups {
			if old.coll == c {
				r = old
			}
		}
		if r == nil {
			d, err := ParseRollupWindow(spec.Window)
			if err != nil {
				return fmt.Errorf("timeseries: rollup %q: %w", c.name, err)
			}
			funcs, filter, err := checkRollupSpec(src.opts.TimeSeries, spec)
			if err != nil {
				return fmt.Errorf("timeseries: rollup %q: %w", c.name, err)
			}
			r = &rollup{coll: c, src: src, window: int64(d), fields: spec.Fields, funcs: funcs, filter: filter,
				pending: map[uint64][]span{}}
			if marks, ok := stored[c.id]; ok {
				r.pending = marks
				if len(marks) > 0 {
					r.since = db.opts.Now()
				}
			} else {
				r.markAll(db.opts.Now())
			}
		}
		want[src] = append(want[src], r)
	}
	for _, c := range db.mu.byID {
		c.rollups = want[c]
		c.forgetMarked()
	}
	return nil
}

// RollupInfo describes a rollup being maintained.
type RollupInfo struct {
	Name string     `json:"name"`
	Spec RollupSpec `json:"spec"`
	// ExpireAfterSeconds is the rollup collection's own TTL.
	ExpireAfterSeconds *int64 `json:"expireAfterSeconds,omitempty"`
	// Watermark: every write to the source acknowledged before it is in
	// the rollup. LagSeconds is how far it is behind now (0: caught up).
	Watermark  time.Time `json:"watermark"`
	LagSeconds float64   `json:"lagSeconds"`
	// PendingSeries counts the source series with windows to recompute.
	PendingSeries int `json:"pendingSeries"`
	// LastError is the last recomputation's failure, if it failed.
	LastError string `json:"lastError,omitempty"`
}

// ListRollups describes the rollups of collection name, by name.
func (db *DB) ListRollups(ctx context.Context, name string) ([]RollupInfo, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	now := db.opts.Now()
	db.mu.RLock()
	defer db.mu.RUnlock()
	out := []RollupInfo{}
	for _, r := range c.rollups {
		info := RollupInfo{Name: r.coll.name, Spec: *r.coll.opts.RollupOf, ExpireAfterSeconds: r.coll.opts.ExpireAfterSeconds,
			Watermark: now.UTC(), PendingSeries: r.pendingSeriesCount() + len(r.inflight)}
		info.Spec.SourceID = 0
		oldest := r.since
		if !r.passSince.IsZero() && (oldest.IsZero() || r.passSince.Before(oldest)) {
			oldest = r.passSince
		}
		if !oldest.IsZero() {
			info.Watermark = oldest.UTC()
			info.LagSeconds = now.Sub(oldest).Seconds()
		}
		if r.lastErr != nil {
			info.LastError = r.lastErr.Error()
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b RollupInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// CatchUpRollups recomputes every pending window of every rollup now,
// until none is left (writes arriving meanwhile included), or ctx ends.
func (db *DB) CatchUpRollups(ctx context.Context) error {
	for {
		n, err := db.rollupPasses(ctx, time.Time{})
		if err != nil || n == 0 {
			return err
		}
	}
}

// rollupLoop maintains the rollups in the background: a pass when marks
// arrive, then, while writes go on, a pause of rollupPauseFactor times
// the pass's duration (at least rollupMinPause), so that recomputation
// takes a bounded share of the processors however fast writes come; the
// lag grows instead. A pass's reads may use more than one processor, so
// the pause is nineteen times its duration, not nine.
func (db *DB) rollupLoop() {
	defer close(db.rollupDone)
	const rollupMinPause = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-db.stop
		cancel()
	}()
	var failPause time.Duration
	for {
		select {
		case <-db.stop:
			return
		case <-db.rollupWake:
		}
		start := time.Now()
		pause := time.Duration(0)
		if _, err := db.rollupPasses(ctx, start.Add(rollupPassBudget)); err != nil && ctx.Err() == nil {
			// A failure that lasts (a field that now holds strings, a
			// full disk) is retried, and logged, once a second, then
			// up to once every 30 s.
			failPause = min(max(2*failPause, time.Second), 30*time.Second)
			pause = failPause
			db.log.Error("rollup pass failed", "err", err, "retryIn", failPause)
			db.wakeRollups() // the marks are back: try again after the pause
		} else {
			failPause = 0
		}
		pause = max(pause, rollupMinPause, rollupPauseFactor*time.Since(start))
		if !db.rollupPause(pause, failPause > 0) {
			return
		}
	}
}

// rollupPassBudget is how long a pass of the background loop works
// before it stops at the next chunk of series and leaves the rest to the
// next pass: the work a pass finds grows with the writes since the last,
// so without a bound the pauses between passes would bound nothing.
const rollupPassBudget = 200 * time.Millisecond

// rollupPauseFactor is the pause between two passes while writes go on,
// in passes' durations.
const rollupPauseFactor = 19

// rollupPause waits d, or less once writes stop: the pause leaves the
// processor to ingest, and once none came for rollupMinPause the rest
// of it serves nothing (a load just ended: the rollups catch up at once).
// After a failure (hard) it waits the whole of d. It reports false when
// the DB is closing.
func (db *DB) rollupPause(d time.Duration, hard bool) bool {
	const tick = 100 * time.Millisecond
	end := time.After(d)
	t := time.NewTicker(tick)
	defer t.Stop()
	db.mu.RLock()
	seq := db.mu.writeSeq
	db.mu.RUnlock()
	for {
		select {
		case <-db.stop:
			return false
		case <-end:
			return true
		case <-t.C:
			db.mu.RLock()
			now := db.mu.writeSeq
			db.mu.RUnlock()
			if now == seq && !hard {
				return true
			}
			seq = now
		}
	}
}

// rollupPasses runs one pass of every rollup holding marks and returns the
// series it recomputed. Passes run one at a time (rollupMu): a catch-up
// waits for the background loop's pass to end. Past deadline (zero:
// none), a pass leaves the series it has not reached to the next.
func (db *DB) rollupPasses(ctx context.Context, deadline time.Time) (int, error) {
	db.rollupMu.Lock()
	defer db.rollupMu.Unlock()
	defer func() { db.rollupThaw = thawFree{} }() // kept for a pass only
	db.mu.RLock()
	var rs []*rollup
	for _, c := range db.mu.byID {
		for _, r := range c.rollups {
			if r.pendingSeriesCount() > 0 {
				rs = append(rs, r)
			}
		}
	}
	db.mu.RUnlock()
	if len(rs) == 0 {
		db.rollupScratch = rollupScratch{} // no work: nothing kept for it
	}
	slices.SortFunc(rs, func(a, b *rollup) int { return strings.Compare(a.coll.name, b.coll.name) })
	total := 0
	var errs []error
	for _, r := range rs {
		n, err := db.rollupPass(ctx, r, deadline)
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("rollup %q: %w", r.coll.name, err))
		}
	}
	return total, errors.Join(errs...)
}

// pendingSeries is a source series to recompute in a pass, with the
// tail its window of tail.window is folded from (nil: read whole).
type pendingSeries struct {
	id    uint64
	key   string
	spans []span
	tail  *rollupTail
	// visible is the earliest time of the series a read returned when
	// the pass began: a window starting before it may lack rows that a
	// longer TTL shows again, and leaves no tail.
	visible int64
}

// passTails gathers the tails a pass leaves: each series' newest window
// aggregated, installed at the pass's end if no change reached it
// meanwhile.
type passTails map[uint64]*rollupTail

// merge puts into t the tails of u, each unless t holds a newer window
// of its series.
func (t passTails) merge(u passTails) {
	for id, x := range u {
		t.add(id, x)
	}
}

// add puts x into t as series id's tail unless t holds a newer window.
func (t passTails) add(id uint64, x *rollupTail) {
	if old := t[id]; old == nil || old.window < x.window {
		t[id] = x
	}
}

// takeTail removes s's tail from r and returns it if the pass can fold
// into it: no write or delete reached it since it was taken, and a span
// of keep (not a fill) holds its window. It then starts s's minSince
// anew. DB.mu is held for writing.
func (r *rollup) takeTail(s *series, keep []span) *rollupTail {
	t := r.tails[s.id]
	if t != nil {
		delete(r.tails, s.id)
	}
	if n := int(s.ord) + 1; n > len(r.minSince) {
		for len(r.minSince) < n {
			r.minSince = append(r.minSince, math.MaxInt64)
		}
	}
	since := r.minSince[s.ord]
	r.minSince[s.ord] = math.MaxInt64
	if t == nil || since <= t.maxT {
		return nil
	}
	for _, sp := range keep {
		if !sp.fill && sp.lo <= t.window && t.window < sp.hi {
			return t
		}
	}
	return nil
}

// installTails keeps the tails next holds, as many as maxRollupTails
// allows. A write or delete during the pass that reached a tail's window
// at or before its newest value shows in minSince, which has counted
// from the pass's start: the next pass drops that tail (takeTail). DB.mu
// is held for writing.
func (r *rollup) installTails(next passTails) {
	if r.tails == nil {
		r.tails = map[uint64]*rollupTail{}
	}
	for id, t := range next {
		if len(r.tails) >= maxRollupTails {
			return
		}
		r.tails[id] = t
	}
}

// rollupPass recomputes the windows marked in r: for each source series,
// the windows its source still holds whole are aggregated anew and
// replace the rollup's measurements of that series in those ranges.
// Windows the source may have begun to expire are left as they are: the
// rollup keeps what the source loses. On failure the marks go back, and
// so do those of the series a pass past deadline (zero: none) did not
// reach.
func (db *DB) rollupPass(ctx context.Context, r *rollup, deadline time.Time) (n int, err error) {
	db.mu.Lock()
	if r.coll.dropped || r.src.dropped || r.pendingSeriesCount() == 0 || r.inflight != nil {
		db.mu.Unlock()
		return 0, nil
	}
	r.takeBulk(r.pending)
	r.src.forgetMarked() // the marks move to inflight, minSince starts anew
	r.inflight, r.passSince = r.pending, r.since
	r.pending, r.since = map[uint64][]span{}, time.Time{}
	now := db.opts.Now()
	var work []pendingSeries
	for _, s := range r.src.byID {
		ss := r.inflight[s.id]
		if ss == nil {
			continue
		}
		// Windows that start before now - TTL may have lost rows to
		// expiry (a row expires once its bucket's bound, at or after it,
		// is TTL old): those are kept as they are.
		horizon := int64(math.MinInt64)
		if s.ttl >= 0 {
			horizon = windowEnd(now.UnixNano()-s.ttl*int64(time.Second)-1, r.window)
		}
		var keep []span
		for _, sp := range ss {
			if !sp.fill {
				sp.lo = max(sp.lo, horizon)
			}
			if sp.lo < sp.hi {
				keep = append(keep, sp)
			}
		}
		if keep != nil {
			work = append(work, pendingSeries{id: s.id, key: s.metaKey, spans: keep, tail: r.takeTail(s, keep),
				visible: r.src.visibleFrom(s, now)})
		}
	}
	db.mu.Unlock()
	next := passTails{}
	// left holds the series and spans of the groups the pass left, out of
	// time: a fold group's span from its tail's window on (nothing
	// before it changed).
	type leftSpan struct {
		p  pendingSeries
		sp span
	}
	var left []leftSpan
	defer func() {
		db.mu.Lock()
		// A series left keeps its tail: what changed since the pass began
		// shows in minSince, as for any.
		for _, l := range left {
			if t := l.p.tail; t != nil {
				next.add(l.p.id, t)
			}
		}
		r.installTails(next)
		back := r.inflight
		if err == nil {
			back = make(map[uint64][]span, len(left))
			for _, l := range left {
				back[l.p.id] = append(back[l.p.id], l.sp)
			}
		}
		for id, ss := range back {
			for _, sp := range ss {
				r.pending[id] = addSpan(r.pending[id], sp)
			}
		}
		if len(back) > 0 {
			if r.since.IsZero() || r.passSince.Before(r.since) {
				r.since = r.passSince
			}
			if err == nil {
				db.wakeRollups()
			}
		}
		r.inflight, r.passSince, r.lastErr = nil, time.Time{}, err
		db.mu.Unlock()
	}()
	// Series sharing a range are recomputed together: in-order writes
	// mark the same recent windows of every series they reach. A series
	// with a tail has the span holding the tail's window recomputed from
	// that window on (none before it changed), folding into the tail.
	type group struct {
		sp   span
		fold bool
	}
	groups := map[group][]pendingSeries{}
	var order []group
	for _, p := range work {
		for _, sp := range p.spans {
			g := group{sp: sp}
			if t := p.tail; t != nil && !sp.fill && sp.lo <= t.window && t.window < sp.hi {
				g = group{sp: span{lo: t.window, hi: sp.hi}, fold: true}
			}
			if groups[g] == nil {
				order = append(order, g)
			}
			groups[g] = append(groups[g], p)
		}
	}
	for gi, g := range order {
		ps := groups[g]
		done := 0 // of ps, recomputed
		if gi == 0 || deadline.IsZero() || !time.Now().After(deadline) {
			var err error
			done, err = db.recomputeRollup(ctx, r, g.sp, ps, g.fold, next, deadline)
			n += done
			if err != nil {
				return n, err
			}
			if done == len(ps) {
				continue
			}
		}
		// Out of time: the rest of this group and the groups after it
		// are left to the next pass.
		for _, g := range order[gi:] {
			for _, p := range groups[g][done:] {
				left = append(left, leftSpan{p, g.sp})
			}
			done = 0
		}
		break
	}
	return n, ctx.Err()
}

// recomputeRollup recomputes the windows of sp for the series of ps:
// their measurements in the rollup within sp are replaced by the source's
// aggregate, in chunks of at most rollupCells (series, window) cells.
//
// fold: every series of ps has a tail of window sp.lo, which the first
// chunk of time starts from; only rows after the tail's are read there.
// The newest window aggregated of each series goes to next. Past
// deadline (zero: none) it stops after a chunk of at most
// rollupDeadlineChunk series; it returns how many of ps it recomputed.
func (db *DB) recomputeRollup(ctx context.Context, r *rollup, sp span, ps []pendingSeries, fold bool, next passTails, deadline time.Time) (int, error) {
	// The aggregate reads the range the source holds; the deletion covers
	// all of sp. An open range (a first fill, a delete or meta update of
	// any time) is closed at the series' first and last measurements.
	alo, ahi := sp.lo, sp.hi
	if alo == math.MinInt64 || ahi == math.MaxInt64 {
		lo, hi, found, err := db.rollupBounds(ctx, r, ps)
		if err != nil {
			return 0, err
		}
		if found {
			alo, ahi = max(alo, floorWindow(lo, r.window)), min(ahi, windowEnd(hi, r.window))
		} else {
			alo, ahi = 0, 0
		}
	}
	windows := int64(1)
	if alo < ahi {
		windows = max(1, (ahi-alo)/r.window)
	}
	for start := 0; start < len(ps); {
		// As many series as the cell budget takes over the whole range; a
		// range wider than the budget goes a series at a time, in slices
		// of time.
		per := int(max(1, int64(rollupCells)/windows))
		if !deadline.IsZero() {
			if start > 0 && time.Now().After(deadline) {
				return start, nil
			}
			per = min(per, rollupDeadlineChunk)
		}
		chunk := ps[start:min(len(ps), start+per)]
		start += len(chunk)
		step := ahi - alo
		if windows > rollupCells {
			step = rollupCells * r.window
		}
		for t := alo; ; t += step {
			end := ahi
			if step > 0 && t < ahi-step {
				end = t + step
			}
			dlo, dhi := t, end
			if t == alo {
				dlo = sp.lo
			}
			if end == ahi {
				dhi = sp.hi
			}
			if err := db.replaceRollupRange(ctx, r, chunk, t, end, dlo, dhi, fold && t == sp.lo, next); err != nil {
				return start - len(chunk), err
			}
			if end >= ahi || step <= 0 {
				break
			}
		}
	}
	return len(ps), nil
}

// rollupDeadlineChunk is the most series a pass with a deadline
// recomputes between two looks at the clock.
const rollupDeadlineChunk = 1024

// rollupBounds returns the times of the first and last measurements of
// the series ps holding one of the rollup's fields; found is false when
// none does.
func (db *DB) rollupBounds(ctx context.Context, r *rollup, ps []pendingSeries) (lo, hi int64, found bool, err error) {
	only := make(map[uint64]bool, len(ps))
	for _, p := range ps {
		only[p.id] = true
	}
	opts := AggregateOptions{WholeRange: true, Ungrouped: true, Fields: r.fields, Funcs: []AggFunc{AggFirst, AggLast}, only: only}
	win, err := aggWindowing(&opts)
	if err != nil {
		return 0, 0, false, err
	}
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		return 0, 0, false, err
	}
	defer end()
	a, err := db.aggregate(ctx, r.src, r.src.name, opts, opts.Funcs, win, guard)
	if err != nil {
		return 0, 0, false, err
	}
	lo, hi = math.MaxInt64, math.MinInt64
	for _, row := range a.cells.rows {
		for _, c := range row {
			if c.count > 0 {
				lo, hi, found = min(lo, c.firstT), max(hi, c.lastT), true
			}
		}
	}
	return lo, hi, found, nil
}

// replaceRollupRange aggregates the source series ps over [alo, ahi) and
// replaces their rollup measurements in [dlo, dhi) with the result. With
// fold, each series is read after its tail's newest value, and the tail's
// cells are folded into; each series' newest window aggregated goes to
// next.
func (db *DB) replaceRollupRange(ctx context.Context, r *rollup, ps []pendingSeries, alo, ahi, dlo, dhi int64, fold bool, next passTails) error {
	only := make(map[uint64]bool, len(ps))
	for _, p := range ps {
		only[p.id] = true
	}
	// The tails this range leaves count once its measurements are
	// replaced: a failure leaves the windows as they were, and a tail
	// would have the next pass fold past them.
	made := passTails{}
	var from map[uint64]int64
	var seed func(*aggregator) error
	if fold {
		from = make(map[uint64]int64, len(ps))
		for _, p := range ps {
			from[p.id] = p.tail.maxT + 1
		}
		seed = func(a *aggregator) error { return seedTails(a, r, ps) }
		db.stats.rollupFolds.Add(int64(len(ps)))
	}
	var ms []model.Measurement
	if alo < ahi {
		ts := r.src.opts.TimeSeries
		f, err := partialfilter.ParseJSON([]byte(fmt.Sprintf(`{%q: {"$gte": {"$date": {"$numberLong": "%d"}}, "$lt": {"$date": {"$numberLong": "%d"}}}}`,
			ts.TimeField, model.FloorMillis(alo), model.FloorMillis(ahi))))
		if err != nil {
			return err
		}
		sc := &db.rollupScratch
		if sc.cells == nil {
			sc.cells = &aggCells{}
		}
		opts := AggregateOptions{Filter: f, Window: time.Duration(r.window), Fields: r.fields, Funcs: r.funcs, exactGroups: true, only: only,
			from: from, seed: seed, thaw: &db.rollupThaw, cells: sc.cells}
		win, err := aggWindowing(&opts)
		if err != nil {
			return err
		}
		guard, end, err := db.startQuery(ctx)
		if err != nil {
			return err
		}
		a, err := db.aggregate(ctx, r.src, r.src.name, opts, r.funcs, win, guard)
		if err != nil {
			end()
			return err
		}
		ms = sc.measurements(a, r)
		takeTails(a, r, ps, made)
		end()
		if db.hooks.rollupAggregated != nil {
			db.hooks.rollupAggregated()
		}
	}
	_, err := db.deleteLogged(ctx, r.coll, func() deleteRecord {
		rec := deleteRecord{coll: r.coll.id, minTime: dlo, maxTime: dhi - 1}
		if dhi == math.MaxInt64 {
			rec.maxTime = math.MaxInt64
		}
		for _, p := range ps {
			keys := []string{p.key}
			if p.key == "" || p.key == "null" {
				// No meta value: either key in the rollup.
				keys = []string{"", "null"}
			}
			for _, k := range keys {
				if r.coll.series.get(k) != nil && !slices.Contains(rec.metaKeys, k) {
					rec.metaKeys = append(rec.metaKeys, k)
				}
			}
		}
		return rec
	})
	if err != nil {
		return err
	}
	if db.hooks.rollupDeleted != nil {
		db.hooks.rollupDeleted()
	}
	if len(ms) > 0 {
		res, err := db.insertMeasurements(ctx, r.coll, ms, InsertOptions{})
		if err != nil {
			return err
		}
		if len(res.Errors) > 0 {
			return fmt.Errorf("timeseries: rollup %q refused a measurement: %w", r.coll.name, res.Errors[0].Err)
		}
	}
	next.merge(made)
	return nil
}

// seedTails puts the tail of every series of ps (all have one) into the
// aggregator's cells.
func seedTails(a *aggregator, r *rollup, ps []pendingSeries) error {
	for _, p := range ps {
		g, err := a.cells.groupID(p.key)
		if err != nil {
			return err
		}
		row, err := a.cells.row(aggKey{group: g, window: a.win.key(p.tail.window)})
		if err != nil {
			return err
		}
		for i, f := range r.fields {
			if fi, ok := a.fieldIdx[f]; ok {
				row[fi] = p.tail.cells[i]
			}
		}
	}
	return nil
}

// takeTails puts into next the newest window the aggregate a holds of
// each series of ps that has a meta value (series of none share a group),
// unless next holds a newer one. An aggregate of counts alone keeps no
// times: it leaves no tails.
func takeTails(a *aggregator, r *rollup, ps []pendingSeries, next passTails) {
	if a.countOnly {
		return
	}
	newest := make(map[int32]int, len(ps))
	for ki, k := range a.cells.keys {
		if i, ok := newest[k.group]; !ok || k.window > a.cells.keys[i].window {
			newest[k.group] = ki
		}
	}
	for _, p := range ps {
		if p.key == "" || p.key == "null" {
			continue
		}
		g, ok := a.cells.gids[p.key]
		if !ok {
			continue
		}
		ki, ok := newest[g]
		if !ok {
			continue
		}
		w := a.win.startTime(a.cells.keys[ki].window)
		if w < p.visible {
			continue // rows before the cutoff may show again
		}
		if old := next[p.id]; old != nil && old.window >= w {
			continue
		}
		t := &rollupTail{window: w, maxT: w - 1, cells: make([]aggCell, len(r.fields))}
		row := a.cells.rows[ki]
		for i, f := range r.fields {
			if fi, ok := a.fieldIdx[f]; ok {
				t.cells[i] = row[fi]
				if row[fi].count > 0 {
					t.maxT = max(t.maxT, row[fi].lastT)
				}
			}
		}
		next[p.id] = t
	}
}

// rollupScratch is what a rollup's passes reuse from one recomputation
// to the next (DB.rollupScratch, guarded by rollupMu): the aggregate's
// cells and the measurements made of them, at most rollupCells of each.
// Made anew for each, they were more than half the bytes a load of iot
// sensors with two rollups allocated (docs/benchmarks.md, "Rollup passes
// reusing their cells"). It is dropped once the passes find no work.
type rollupScratch struct {
	cells  *aggCells
	ms     []model.Measurement
	fields []model.Field
}

// measurements makes the rollup's measurements of an aggregate's cells
// (rollupMeasurements) into sc's arrays: they hold until the next call.
func (sc *rollupScratch) measurements(a *aggregator, r *rollup) []model.Measurement {
	names := rollupFieldNames(r)
	clear(sc.ms)
	clear(sc.fields)
	sc.ms, sc.fields = rollupMeasurements(sc.ms[:0], sc.fields[:0], a, r, names)
	return sc.ms
}

// rollupFieldNames returns the names of the rollup's fields, in the order
// of its fields, then its functions: <field>_<func>.
func rollupFieldNames(r *rollup) []string {
	names := make([]string, 0, len(r.fields)*len(r.funcs))
	for _, f := range r.fields {
		for _, fn := range r.funcs {
			names = append(names, f+"_"+string(fn))
		}
	}
	return names
}

// rollupMeasurements appends to ms the rollup's measurements of an
// aggregate's cells: one per (series, window), count always, the other
// functions when the window held a value of the field. Their fields are
// appended to slab, which it returns too; names are rollupFieldNames.
func rollupMeasurements(ms []model.Measurement, slab []model.Field, a *aggregator, r *rollup, names []string) ([]model.Measurement, []model.Field) {
	cells := a.cells
	// The fields of every measurement from one slab, made at its size
	// (the measurements hold slices of it).
	if need := len(cells.keys) * len(names); cap(slab) < need {
		slab = make([]model.Field, 0, need)
	}
	for ki, k := range cells.keys {
		row := cells.rows[ki]
		m := model.Measurement{Time: a.win.startTime(k.window)}
		if g := cells.groups[k.group]; g != "null" && g != "" {
			m.Meta = model.MetaKey(g)
		}
		start := len(slab)
		for fi, f := range r.fields {
			var cell aggCell
			if i, ok := a.fieldIdx[f]; ok {
				cell = row[i]
			}
			for j, fn := range r.funcs {
				name := names[fi*len(r.funcs)+j]
				if fn == AggCount {
					slab = append(slab, model.Field{Name: name, Value: model.Int(cell.count)})
					continue
				}
				if cell.count == 0 {
					continue
				}
				slab = append(slab, model.Field{Name: name, Value: model.Float(cell.value(fn))})
			}
		}
		m.Fields = slab[start:len(slab):len(slab)]
		ms = append(ms, m)
	}
	return ms, slab
}

// Persisted marks (spaceRollup): per rollup collection, its pending and
// inflight ranges:
//
//	series count uvarint, then per series: id uvarint, span count
//	uvarint, then per span lo and hi varints and a byte, 1 for a fill.
func rollupMarksKey(coll uint32) []byte { return collPrefix(spaceRollup, coll) }

// encodeMarks encodes r's marks (pending, inflight and the bulk's) as
// persisted. DB.mu is held.
func (r *rollup) encodeMarks() []byte {
	// The series of the map marks, sorted, and those of the bulk, in id
	// order already (byID): merged as they are encoded, with no map of
	// all the marks made (a checkpoint encodes them under DB.mu, and a
	// fleet's bulk holds every series).
	ids := make([]uint64, 0, len(r.pending)+len(r.inflight))
	for id := range r.pending {
		ids = append(ids, id)
	}
	for id := range r.inflight {
		if _, ok := r.pending[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var bulk []uint64
	if r.bulk.n > 0 {
		bulk = make([]uint64, 0, r.bulk.n)
		for _, s := range r.src.byID {
			if r.bulk.bits.has(s.ord) {
				bulk = append(bulk, s.id)
			}
		}
	}
	n := len(ids) + len(bulk)
	for i, j := 0, 0; i < len(ids) && j < len(bulk); {
		switch {
		case ids[i] < bulk[j]:
			i++
		case ids[i] > bulk[j]:
			j++
		default:
			n--
			i, j = i+1, j+1
		}
	}
	b := binary.AppendUvarint(make([]byte, 0, 16+n*16), uint64(n))
	var ss []span
	for i, j := 0, 0; i < len(ids) || j < len(bulk); {
		id := uint64(0)
		ss = ss[:0]
		switch {
		case j == len(bulk) || (i < len(ids) && ids[i] < bulk[j]):
			id = ids[i]
			i++
		case i == len(ids) || bulk[j] < ids[i]:
			id = bulk[j]
			j++
			ss = append(ss, r.bulk.span)
		default:
			id = ids[i]
			i, j = i+1, j+1
			ss = append(ss, r.bulk.span)
		}
		for _, sp := range r.pending[id] {
			ss = addSpan(ss, sp)
		}
		for _, sp := range r.inflight[id] {
			ss = addSpan(ss, sp)
		}
		b = binary.AppendUvarint(b, id)
		b = binary.AppendUvarint(b, uint64(len(ss)))
		for _, sp := range ss {
			b = binary.AppendVarint(b, sp.lo)
			b = binary.AppendVarint(b, sp.hi)
			fill := byte(0)
			if sp.fill {
				fill = 1
			}
			b = append(b, fill)
		}
	}
	return b
}

func decodeRollupMarks(b []byte) (map[uint64][]span, error) {
	d := recordDecoder{b: b}
	n := d.count("series count", 2)
	out := make(map[uint64][]span, n)
	for range n {
		id := d.uvarint("series id")
		k := d.count("span count", 2)
		ss := make([]span, 0, k)
		for range k {
			lo, hi, fill := d.varint("span start"), d.varint("span end"), d.byte1("span kind")
			if d.err == nil && (lo >= hi || fill > 1) {
				d.fail("span")
			}
			ss = append(ss, span{lo, hi, fill == 1})
		}
		out[id] = ss
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: rollup marks: %v", ErrCorrupt, d.err)
	}
	return out, nil
}

// loadRollupMarks reads the persisted marks of every rollup collection.
func (db *DB) loadRollupMarks() (map[uint32]map[uint64][]span, error) {
	out := map[uint32]map[uint64][]span{}
	err := db.scan([]byte{spaceRollup}, []byte{spaceRollup + 1}, func(k, v []byte) error {
		if len(k) != 5 {
			return fmt.Errorf("%w: rollup marks key %x", ErrCorrupt, k)
		}
		m, err := decodeRollupMarks(v)
		if err != nil {
			return err
		}
		out[binary.BigEndian.Uint32(k[1:])] = m
		return nil
	})
	return out, err
}

// captureRollupMarks returns the Pebble writes of every rollup's marks as
// of now, for a checkpoint's batch. DB.mu is held.
func (db *DB) captureRollupMarks() func(*pebble.Batch) error {
	type marks struct {
		coll uint32
		v    []byte
	}
	var all []marks
	for _, c := range db.mu.byID {
		for _, r := range c.rollups {
			all = append(all, marks{r.coll.id, r.encodeMarks()})
		}
	}
	if all == nil {
		return nil
	}
	return func(b *pebble.Batch) error {
		for _, m := range all {
			if err := b.Set(rollupMarksKey(m.coll), m.v, nil); err != nil {
				return err
			}
		}
		return nil
	}
}

// wakeRollups tells the rollup loop to look for marks.
func (db *DB) wakeRollups() {
	select {
	case db.rollupWake <- struct{}{}:
	default:
	}
}

// resolveRollupSource sets the source's id in the rollup options opts, so
// that a rollup created again compares equal to the one that exists.
func (db *DB) resolveRollupSource(opts *CollectionOptions) error {
	if opts.RollupOf == nil {
		return nil
	}
	src, err := db.lookup(opts.RollupOf.Source)
	if err != nil {
		return err
	}
	spec := *opts.RollupOf
	spec.SourceID = src.id
	opts.RollupOf = &spec
	return nil
}

// checkRollupOf checks the rollup options of a collection being created
// as name against its source, which must be another time-series
// collection with the same timeField and metaField whose fields, if it
// holds any, include the rollup's. Refusals are BadValue (2).
func (db *DB) checkRollupOf(name string, opts *CollectionOptions) error {
	spec := opts.RollupOf
	if spec == nil {
		return nil
	}
	if spec.Source == name {
		return mongoerr.New(mongoerr.BadValue, "a collection cannot be a rollup of itself")
	}
	src, err := db.lookup(spec.Source)
	if err != nil {
		return err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	if spec.SourceID != src.id {
		return mongoerr.New(mongoerr.BadValue, "the rollup's source %q is another collection than the one named so now", spec.Source)
	}
	sts := src.opts.TimeSeries
	if sts == nil {
		return mongoerr.New(mongoerr.BadValue, "collection %q is not a time-series collection: only time series have rollups", spec.Source)
	}
	if ts := opts.TimeSeries; ts.TimeField != sts.TimeField || ts.MetaField != sts.MetaField {
		return mongoerr.New(mongoerr.BadValue, "a rollup has its source's timeField %q and metaField %q", sts.TimeField, sts.MetaField)
	}
	d, err := ParseRollupWindow(spec.Window)
	if err != nil {
		return err
	}
	if formatRollupWindow(d) != spec.Window {
		return mongoerr.New(mongoerr.BadValue, "rollup window %q is not in its canonical form %q", spec.Window, formatRollupWindow(d))
	}
	if _, _, err := checkRollupSpec(sts, spec); err != nil {
		return err
	}
	if len(src.fieldTypes) > 0 {
		for _, f := range spec.Fields {
			if _, ok := src.fieldTypes[f]; !ok {
				return mongoerr.New(mongoerr.BadValue, "unknown rollup field %q: collection %q holds no such field", f, spec.Source)
			}
		}
	}
	return nil
}
