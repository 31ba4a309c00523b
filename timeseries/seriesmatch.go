package timeseries

import "sync"

// seriesMatches caches, per collection, the series a meta filter selects,
// so that a query for one sensor does not evaluate its filter on the meta
// value of every series. Series are only ever added to a collection: an
// entry holds while the number of series is the one it was made with.
type seriesMatches struct {
	mu      sync.Mutex
	n       int // len(collection.series) the entries hold for
	entries map[string][]*series
}

const (
	// maxMatchEntries bounds the filters cached per collection; when full,
	// the cache starts over.
	maxMatchEntries = 256
	// maxMatchSeries bounds the series one entry keeps: filters selecting
	// more cost a pass over them anyway.
	maxMatchSeries = 4096
)

// matchingSeries returns the series of c whose meta value passes p's meta
// conditions (all series when p has none). DB.mu is held, for reading at
// least. The slice must not be changed.
func (c *collection) matchingSeries(p *filterPlan, ts *TimeSeriesOptions) []*series {
	var key string
	if p.meta != nil {
		key = p.meta.String()
		m := &c.matches
		m.mu.Lock()
		if m.n == len(c.series) {
			if l, ok := m.entries[key]; ok {
				m.mu.Unlock()
				return l
			}
		}
		m.mu.Unlock()
	}
	var out []*series
	for _, s := range c.series {
		if p.matchesSeries(ts, seriesMeta(s)) {
			out = append(out, s)
		}
	}
	if p.meta != nil && len(out) <= maxMatchSeries {
		m := &c.matches
		m.mu.Lock()
		if m.n != len(c.series) || m.entries == nil || len(m.entries) >= maxMatchEntries {
			m.n, m.entries = len(c.series), map[string][]*series{}
		}
		m.entries[key] = out
		m.mu.Unlock()
	}
	return out
}
