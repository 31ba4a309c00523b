package timeseries

import (
	"slices"
	"strings"
	"sync"

	"github.com/hourglassdb/hourglass/model"
)

// seriesMatches caches, per collection, the series a meta filter selects,
// so that a query for one sensor does not evaluate its filter on the meta
// value of every series. Series are only ever added to a collection, in
// ascending id order (collection.byID): an entry made over the first n
// series stays true of them, and is brought up to date by looking at the
// series added since, not at all of them again (a fleet's series keep
// coming while it is queried).
type seriesMatches struct {
	mu      sync.Mutex
	reorder int // collection.reorders the entries hold for
	entries map[string]matchEntry
	held    int // series pointers the entries hold, at most maxMatchHeld
}

type matchEntry struct {
	n    int // len(collection.byID) when made
	list []*series
}

const (
	// maxMatchEntries bounds the filters cached per collection; when full,
	// the cache starts over.
	maxMatchEntries = 256
	// maxMatchSeries bounds the series one entry keeps: filters selecting
	// more cost a pass over them anyway. A site of a million-sensor fleet
	// (1%) fits.
	maxMatchSeries = 1 << 16
	// maxMatchHeld bounds the series pointers all entries hold (8 MiB);
	// when full, the cache starts over.
	maxMatchHeld = 1 << 20
)

// matchingSeries returns the series of c whose meta value passes p's meta
// conditions (all series when p has none). DB.mu is held, for reading at
// least. The slice must not be changed.
func (c *collection) matchingSeries(p *filterPlan, ts *model.TimeSeriesOptions) []*series {
	if p.meta == nil {
		return c.byID
	}
	key := p.meta.String()
	m := &c.matches
	from, out := 0, []*series(nil)
	m.mu.Lock()
	if e, ok := m.entries[key]; ok && m.reorder == c.reorders {
		from, out = e.n, e.list
	}
	m.mu.Unlock()
	if from == len(c.byID) {
		return out
	}
	// The cached list may be shared: new matches go into a copy.
	out = slices.Clip(out)
	quoted := p.requiredQuoted()
	for _, s := range c.byID[from:] {
		if keyMayMatch(s.metaKey, quoted) && p.matchesSeries(ts, seriesMeta(s)) {
			out = append(out, s)
		}
	}
	if len(out) <= maxMatchSeries {
		m.mu.Lock()
		if m.reorder != c.reorders || m.entries == nil || len(m.entries) >= maxMatchEntries || m.held+len(out) > maxMatchHeld {
			m.reorder, m.entries, m.held = c.reorders, map[string]matchEntry{}, 0
		}
		if e, ok := m.entries[key]; !ok || e.n < len(c.byID) {
			m.held += len(out) - len(e.list)
			m.entries[key] = matchEntry{n: len(c.byID), list: out}
		}
		m.mu.Unlock()
	}
	return out
}

// requiredQuoted is p's meta filter's required strings
// (partialfilter.RequiredStrings) as a canonical meta key writes them.
func (p *filterPlan) requiredQuoted() [][]string {
	if p.quoted == nil && p.meta != nil {
		groups := p.meta.RequiredStrings()
		p.quoted = make([][]string, len(groups))
		for i, g := range groups {
			p.quoted[i] = make([]string, len(g))
			for j, s := range g {
				p.quoted[i][j] = string(model.AppendMetaString(nil, s))
			}
		}
	}
	return p.quoted
}

// keyMayMatch reports whether the canonical meta key holds, for each
// group, one of its quoted strings: false means the series' meta value
// cannot pass the filter the groups come from, without decoding it.
func keyMayMatch(key string, quoted [][]string) bool {
	for _, g := range quoted {
		found := false
		for _, q := range g {
			if strings.Contains(key, q) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
