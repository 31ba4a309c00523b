package promstore

import (
	"sort"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
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
	if r, ok := it.(*sampleIterator); ok {
		r.reset(s.s.Samples)
		return r
	}
	r := &sampleIterator{}
	r.reset(s.s.Samples)
	return r
}

// sampleIterator is a chunkenc.Iterator over the float samples of a
// Series, read from their slice (the engine's buffers call it once or
// twice a sample: no interface between it and a sample's fields).
type sampleIterator struct {
	s []Sample
	i int // the sample at; -1 before the first, len(s) past the last
}

func (it *sampleIterator) reset(s []Sample) { it.s, it.i = s, -1 }

func (it *sampleIterator) Next() chunkenc.ValueType {
	if it.i+1 >= len(it.s) {
		it.i = len(it.s)
		return chunkenc.ValNone
	}
	it.i++
	return chunkenc.ValFloat
}

// millis is a time in milliseconds since the epoch. Seek takes one by
// this name: go vet reads any Seek(int64) as a misspelt io.Seeker's.
type millis = int64

// Seek moves to the first sample at or after t, never back: a sample
// at or after t already is kept.
func (it *sampleIterator) Seek(t millis) chunkenc.ValueType {
	it.i = max(it.i, 0)
	if it.i >= len(it.s) {
		return chunkenc.ValNone
	}
	if it.s[it.i].t < t {
		rest := it.s[it.i:]
		it.i += sort.Search(len(rest), func(k int) bool { return rest[k].t >= t })
		if it.i >= len(it.s) {
			return chunkenc.ValNone
		}
	}
	return chunkenc.ValFloat
}

func (it *sampleIterator) At() (int64, float64) { s := &it.s[it.i]; return s.t, s.f }
func (it *sampleIterator) AtT() int64           { return it.s[it.i].t }
func (it *sampleIterator) AtST() int64          { return 0 }
func (it *sampleIterator) Err() error           { return nil }

func (it *sampleIterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return it.s[it.i].t, nil
}

func (it *sampleIterator) AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return it.s[it.i].t, nil
}

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
