package promstore

import (
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// seriesSet is a storage.SeriesSet over series read whole.
type seriesSet struct {
	all []Series
	i   int
}

func (s *seriesSet) Next() bool {
	if s.i+1 >= len(s.all) {
		return false
	}
	s.i++
	return true
}

func (s *seriesSet) At() storage.Series                { return &series{s: &s.all[s.i]} }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// series is a storage.Series over a Series read.
type series struct{ s *Series }

func (s *series) Labels() labels.Labels { return s.s.Labels }

// Iterator returns an iterator over the series' samples, reusing it when
// it is one of ours.
func (s *series) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	if r, ok := it.(interface{ Reset(storage.Samples) }); ok && it != nil {
		r.Reset(samples(s.s.Samples))
		return it
	}
	return storage.NewListSeriesIterator(samples(s.s.Samples))
}

// samples is storage.Samples over the samples of a Series: a pointer to
// each, which holds it without allocating.
type samples []Sample

func (s samples) Get(i int) chunks.Sample { return &s[i] }
func (s samples) Len() int                { return len(s) }

// dedupe leaves out of each series a sample whose timestamp equals the
// previous one's: Prometheus' storage holds one sample a timestamp, and
// its engine expects timestamps that grow. Of samples of equal timestamps
// the first stored is kept, as Prometheus keeps the first it was given.
// Values are kept bit for bit: a staleness marker stays one.
func dedupe(all []Series) {
	for i := range all {
		ss := all[i].Samples
		if len(ss) < 2 {
			continue
		}
		n := 1
		for k := 1; k < len(ss); k++ {
			if ss[k].t != ss[n-1].t {
				ss[n] = ss[k]
				n++
			}
		}
		all[i].Samples = ss[:n]
	}
}
