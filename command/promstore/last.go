package promstore

import (
	"context"

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

// readLast is Read, deduplicated as Select has it, for last_over_time at
// one instant: of each series only its samples from its last one in
// [start, end] on, the rest of the range left unread (readTail), unless
// one series' last sample is a staleness marker, which last_over_time
// passes over: then the whole range is read.
func (qr *Querier) readLast(ctx context.Context, start, end int64, ms []*labels.Matcher) ([]Series, error) {
	sc, ok, err := qr.scope(ctx, start, end, ms)
	if err != nil || !ok {
		return nil, err
	}
	all, ok, err := qr.readTail(ctx, sc, ms)
	if err != nil || ok {
		return all, err
	}
	all, err = qr.read(ctx, sc, ms)
	dedupe(all)
	return all, err
}

// readTail reads, of every series in the range of sc that matches ms, its
// samples from the earliest time at which one of them holds its last
// sample in the range (timeseries.DB.EarliestLast; the aggregate behind
// it decodes about a bucket a series), deduplicated as Select has it:
// every series with a sample in the range, each with every sample of the
// millisecond of its last one and after. ok is false, and the range must
// be read whole, when one series' last sample is a staleness marker (the
// sample before it may lie before what was read), or the engine could
// not tell where the last samples lie.
func (qr *Querier) readTail(ctx context.Context, sc readScope, ms []*labels.Matcher) (all []Series, ok bool, err error) {
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
		return nil, false, err
	}
	t, found, err := qr.q.svc.DB().EarliestLast(ctx, qr.q.collection, filter, fields)
	switch {
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case err != nil || t < 0:
		// A value field holding more than numbers, say, or times before
		// 1970 (whose milliseconds round towards zero): read it all.
		return nil, false, nil
	case !found:
		return nil, true, nil // no sample in the range
	}
	tail := sc
	tail.start = max(sc.start, t/1e6)
	if all, err = qr.read(ctx, tail, ms); err != nil {
		return nil, false, err
	}
	dedupe(all)
	for i := range all {
		if ss := all[i].Samples; len(ss) > 0 && value.IsStaleNaN(ss[len(ss)-1].f) {
			return nil, false, nil
		}
	}
	return all, true, nil
}
