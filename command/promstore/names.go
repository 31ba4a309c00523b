package promstore

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// numberTypes are the field types (Describe's) a series' samples are
// read from: the columns numbers reads.
var numberTypes = []string{"double", "long", "int"}

// nameMatchers returns the matchers of ms on __name__.
func nameMatchers(ms []*labels.Matcher) []*labels.Matcher {
	var out []*labels.Matcher
	for _, m := range ms {
		if m.Name == labels.MetricName {
			out = append(out, m)
		}
	}
	return out
}

// matchName reports whether name matches every matcher of nms.
func matchName(nms []*labels.Matcher, name string) bool {
	for _, m := range nms {
		if !m.Matches(name) {
			return false
		}
	}
	return true
}

// mayHold reports whether the collection can hold a series whose name
// matches every __name__ matcher of ms, before anything of it is read:
// false tells the read to leave the collection alone.
//
// A collection of the fields shape names its series <collection>_<f> or,
// for line-protocol data, <measurement>_<f>, f one of its numeric fields
// (its describe's field types). The names of the first kind are known at
// once and checked; an equality (or a regexp of a few alternatives, which
// Prometheus reads as a set) that ends in no _<f> rules out the second
// kind too. Only then, when q.index is set, are the collection's
// measurements read from its series index (no bucket is decoded), and
// their names checked. A collection of remote write's shape names its
// series by their __name__ label, which its series index holds: with
// q.index set, the names the matchers select are looked up there first;
// else the read's own filter does that.
func (qr *Querier) mayHold(ctx context.Context, timeField, metaField string, fields bool, ms []*labels.Matcher) (bool, error) {
	nms := nameMatchers(ms)
	if len(nms) == 0 {
		return true, nil
	}
	if !fields {
		if !qr.index || matchName(nms, "") {
			// A series without __name__ (one the document API wrote)
			// matches too: the series index has no name to tell.
			return true, nil
		}
		var conds []any
		for _, m := range nms {
			if f := matcherFilter(metaField, m); f != nil {
				if _, err := partialfilter.Parse(f); err == nil {
					conds = append(conds, f)
				}
			}
		}
		if len(conds) == 0 {
			return true, nil
		}
		names, other, err := qr.distinct(ctx, metaField+"."+labels.MetricName, map[string]any{"$and": conds})
		if err != nil {
			return false, err
		}
		return other || slices.ContainsFunc(names, func(n string) bool { return matchName(nms, n) }), nil
	}
	h, err := qr.q.svc.DB().Collection(qr.q.collection)
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var numeric []string
	for f, types := range h.Fields() {
		if f == timeField || f == metaField || !slices.ContainsFunc(types, func(t string) bool { return slices.Contains(numberTypes, t) }) {
			continue
		}
		if matchName(nms, qr.q.collection+"_"+f) {
			return true, nil
		}
		numeric = append(numeric, f)
	}
	if len(numeric) == 0 {
		return false, nil
	}
	// <measurement>_<f>: a name the matchers list must end in _<f>.
	var cands []any // the measurements the names the matchers list can be of
	listed := false
	for _, m := range nms {
		set := m.SetMatches()
		if m.Type == labels.MatchEqual {
			set = []string{m.Value}
		} else if m.Type != labels.MatchRegexp || set == nil {
			continue
		}
		if !slices.ContainsFunc(set, func(name string) bool {
			return slices.ContainsFunc(numeric, func(f string) bool {
				return len(name) > len(f)+1 && strings.HasSuffix(name, "_"+f)
			})
		}) {
			return false, nil
		}
		if listed {
			continue
		}
		listed = true
		for _, name := range set {
			for _, f := range numeric {
				if m := strings.TrimSuffix(name, "_"+f); len(m) < len(name) && m != "" && matchName(nms, name) && !slices.Contains(cands, any(m)) {
					cands = append(cands, m)
				}
			}
		}
	}
	if !qr.index {
		return true, nil
	}
	if listed && !slices.ContainsFunc(cands, func(m any) bool { return !onlyString(m.(string)) }) {
		// Whether a series of those measurements holds a row: the first
		// found settles it.
		if len(cands) == 0 {
			return false, nil
		}
		f, err := partialfilter.Parse(map[string]any{metaField + "." + measurementLabel: map[string]any{"$in": cands}})
		if err != nil {
			return false, err
		}
		has, err := qr.q.svc.HasRows(ctx, qr.q.collection, f)
		if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
			return false, nil // dropped meanwhile
		}
		return has, err
	}
	ms2, other, err := qr.distinct(ctx, metaField+"."+measurementLabel, map[string]any{})
	if err != nil || other {
		return other, err
	}
	for _, m := range ms2 {
		for _, f := range numeric {
			if m != "" && matchName(nms, m+"_"+f) {
				return true, nil
			}
		}
	}
	return false, nil
}

// distinct returns the distinct string values at path of the series the
// filter selects, from the collection's series index; other reports a
// value of another type (a number, whose text the check does not
// guess: the collection is read).
func (qr *Querier) distinct(ctx context.Context, path string, filter map[string]any) (out []string, other bool, err error) {
	f, err := partialfilter.Parse(filter)
	if err != nil {
		return nil, false, err
	}
	vals, err := qr.q.svc.DistinctMeta(ctx, qr.q.collection, path, f)
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	for _, v := range vals {
		if s, ok := v.(string); ok {
			out = append(out, s)
		} else if v != nil {
			other = true
		}
	}
	return out, other, nil
}

// CollectionsRead counts the reads of a collection by every Querier of
// the process, as Options.Scanned counts a Queryable's: what a test of a
// door, which cannot reach the Options its requests use, reads to see
// which collections a request read.
var CollectionsRead atomic.Int64

// scanned counts a read of the collection (Options.Scanned,
// CollectionsRead).
func (qr *Querier) scanned() {
	CollectionsRead.Add(1)
	if c := qr.q.opts.Scanned; c != nil {
		c.Add(1)
	}
}
