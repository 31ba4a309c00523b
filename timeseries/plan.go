package timeseries

import (
	"math"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// filterPlan is a filter split for a time-series collection: conditions on
// the meta field select series, a time range prunes buckets and rows, and
// the rest is evaluated per measurement.
type filterPlan struct {
	meta     *partialfilter.Filter // nil: every series
	minTime  int64                 // inclusive
	maxTime  int64                 // inclusive
	residual *partialfilter.Filter // nil: none
	empty    bool                  // the filter matches nothing
	doc      map[string]any        // scratch: the document matchesSeries matches
}

// planFilter splits f for a collection with options ts.
func planFilter(f *partialfilter.Filter, ts *TimeSeriesOptions) filterPlan {
	p := filterPlan{minTime: math.MinInt64, maxTime: math.MaxInt64}
	if f == nil || f.IsEmpty() {
		return p
	}
	var metaTerms, timeTerms, rest []*partialfilter.Filter
	for _, t := range f.Conjuncts() {
		switch {
		case ts.MetaField != "" && t.RefersOnlyTo(ts.MetaField):
			metaTerms = append(metaTerms, t)
		case t.RefersOnlyTo(ts.TimeField):
			timeTerms = append(timeTerms, t)
		default:
			rest = append(rest, t)
		}
	}
	if len(metaTerms) > 0 {
		p.meta = partialfilter.And(metaTerms...)
	}
	if len(timeTerms) > 0 {
		tf := partialfilter.And(timeTerms...)
		r, exact := tf.Range(ts.TimeField)
		if !exact {
			rest = append(rest, timeTerms...)
		}
		if r.Empty {
			p.empty = true
		}
		if r.HasMin {
			if t, ok := r.Min.(time.Time); ok {
				p.minTime = clampNanos(t)
				if !r.MinInclusive {
					if p.minTime == math.MaxInt64 {
						p.empty = true
					}
					p.minTime++
				}
			} else if exact {
				// A time compared with a non-date matches nothing.
				p.empty = true
			}
		}
		if r.HasMax {
			if t, ok := r.Max.(time.Time); ok {
				p.maxTime = clampNanos(t)
				if !r.MaxInclusive {
					if p.maxTime == math.MinInt64 {
						p.empty = true
					}
					p.maxTime--
				}
			} else if exact {
				p.empty = true
			}
		}
		if p.minTime > p.maxTime {
			p.empty = true
		}
	}
	if len(rest) > 0 {
		p.residual = partialfilter.And(rest...)
	}
	return p
}

// clampNanos converts t to nanoseconds, clamping outside int64's range.
func clampNanos(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// matchesSeries reports whether a series' meta value passes the plan.
func (p *filterPlan) matchesSeries(ts *TimeSeriesOptions, meta any) bool {
	if p.meta == nil {
		return true
	}
	if p.doc == nil {
		p.doc = make(map[string]any, 1)
	}
	clear(p.doc)
	if meta != nil {
		p.doc[ts.MetaField] = meta
	}
	return p.meta.Match(p.doc)
}

// deleteRange checks that p can be executed as a delete on a time-series
// collection: meta conditions and a time range only.
func (p *filterPlan) deleteRange() error {
	if p.residual != nil {
		return mongoerr.New(mongoerr.BadValue,
			"a delete on a time-series collection takes conditions on the metaField and a range of the timeField only")
	}
	return nil
}
