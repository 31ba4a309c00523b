package promstore

import (
	"context"
	"slices"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// lastInstant reports whether a Select's hints are those of
// last_over_time over a range at one instant (an instant query, no
// subquery around it: Step 0; the range reaching back Range less a
// millisecond from End, as neither an anchored nor a smoothed one does,
// which the engine refuses with last_over_time today), which needs only
// the last sample of each series that is not a staleness marker: its
// value is the result, wherever the range ends (offset and @ are in End).
// Either condition alone tells a range query or a subquery (whose Start
// lies a step or more earlier).
func lastInstant(h *storage.SelectHints) bool {
	return h != nil && h.Func == "last_over_time" && h.Step == 0 && h.Range > 0 && h.Start == h.End-h.Range+1
}

// fastLast reports whether a Select of these hints reads only the last
// samples of each series (see readLast).
func (qr *Querier) fastLast(h *storage.SelectHints) bool {
	return !qr.q.fullReads && lastInstant(h)
}

// maxStaleSeries is the most series ending with a staleness marker that
// a read for last_over_time reads whole one by one (readSeries); with
// more, it reads the whole range of every series.
const maxStaleSeries = 64

// readLast is Read, deduplicated as Select has it, for last_over_time at
// one instant: every series from the earliest time at which one of them
// holds its last sample in [start, end] on, the rest of the range left
// unread (readTail), but the series whose last sample is a staleness
// marker, which last_over_time passes over: each of those is read whole
// (or, when there are more than maxStaleSeries of them, every series).
func (qr *Querier) readLast(ctx context.Context, start, end int64, ms []*labels.Matcher) ([]Series, error) {
	sc, ok, err := qr.scope(ctx, start, end, ms)
	if err != nil || !ok {
		return nil, err
	}
	all, stale, ok, err := qr.readTail(ctx, sc, ms)
	if err != nil {
		return nil, err
	}
	if ok && len(stale) <= maxStaleSeries {
		return all, qr.readWhole(ctx, sc, ms, all, stale)
	}
	all, err = qr.read(ctx, sc, ms)
	dedupe(all)
	return all, err
}

// readTail reads, of every series in the range of sc that matches ms, its
// samples from the earliest time at which one of them holds its last
// sample in the range (timeseries.DB.EarliestLast; the aggregate behind
// it decodes about a bucket a series), deduplicated as Select has it,
// in label set order: every series with a sample in the range, each with
// every sample of the millisecond of its last one and after. stale are
// the label sets of the series whose last sample is a staleness marker:
// the sample before it may lie before what was read. ok is false, and
// the range must be read whole, when the engine could not tell where the
// last samples lie.
func (qr *Querier) readTail(ctx context.Context, sc readScope, ms []*labels.Matcher) (all []Series, stale []labels.Labels, ok bool, err error) {
	var (
		filter *partialfilter.Filter
		fields []string
	)
	if sc.fields {
		filter, fields, err = fieldsFilter(sc.timeField, sc.metaField, sc.start, sc.end, ms)
	} else {
		filter, err = selectFilter(sc.timeField, sc.metaField, sc.start, sc.end, ms)
		fields = []string{ValueField}
	}
	if err != nil {
		return nil, nil, false, err
	}
	t, found, err := qr.q.svc.DB().EarliestLast(ctx, qr.q.collection, filter, fields)
	switch {
	case ctx.Err() != nil:
		return nil, nil, false, ctx.Err()
	case err != nil || t < 0:
		// A value field holding more than numbers, say, or times before
		// 1970 (whose milliseconds round towards zero): read it all.
		return nil, nil, false, nil
	case !found:
		return nil, nil, true, nil // no sample in the range
	}
	tail := sc
	tail.start = max(sc.start, t/1e6)
	if all, err = qr.read(ctx, tail, ms); err != nil {
		return nil, nil, false, err
	}
	dedupe(all)
	for i := range all {
		if ss := all[i].Samples; len(ss) > 0 && value.IsStaleNaN(ss[len(ss)-1].f) {
			stale = append(stale, all[i].Labels)
		}
	}
	return all, stale, true, nil
}

// readWhole replaces the samples of each series of all (in label set
// order) whose labels are one of sets by all its samples in the range of
// sc (readSeries).
func (qr *Querier) readWhole(ctx context.Context, sc readScope, ms []*labels.Matcher, all []Series, sets []labels.Labels) error {
	for _, ls := range sets {
		i, ok := slices.BinarySearchFunc(all, ls, func(s Series, ls labels.Labels) int { return labels.Compare(s.Labels, ls) })
		if !ok {
			continue
		}
		ss, err := qr.readSeries(ctx, sc, ms, ls)
		if err != nil {
			return err
		}
		all[i].Samples = ss
	}
	return nil
}

// readSeries returns the samples in the range of sc of the series of
// label set ls, deduplicated, as Read of matchers ms gives them: Read of
// ms and a matcher for each label of ls, of which the engine is asked
// those whose value only a string gives (the text of a number or a
// boolean can come from a meta value of that type too: one label set,
// merged), and the series of ls alone kept.
func (qr *Querier) readSeries(ctx context.Context, sc readScope, ms []*labels.Matcher, ls labels.Labels) ([]Sample, error) {
	more := slices.Clone(ms)
	ls.Range(func(l labels.Label) {
		if sc.fields || !numberOrBool(l.Value) { // fieldsPushdown leaves those out itself
			more = append(more, labels.MustNewMatcher(labels.MatchEqual, l.Name, l.Value))
		}
	})
	got, err := qr.read(ctx, sc, more)
	if err != nil {
		return nil, err
	}
	dedupe(got)
	for _, s := range got {
		if labels.Equal(s.Labels, ls) {
			return s.Samples, nil
		}
	}
	return nil, nil
}

// numberOrBool reports whether a label's text can be that of a number or
// a boolean meta value.
func numberOrBool(v string) bool {
	if v == "true" || v == "false" {
		return true
	}
	_, err := strconv.ParseFloat(v, 64)
	return err == nil
}
