package promstore

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// fsample is a float sample as Prometheus' list iterator takes it.
type fsample struct {
	t int64
	f float64
}

func (s fsample) T() int64                      { return s.t }
func (s fsample) F() float64                    { return s.f }
func (s fsample) ST() int64                     { return 0 }
func (s fsample) H() *histogram.Histogram       { return nil }
func (s fsample) FH() *histogram.FloatHistogram { return nil }
func (s fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fsample) Copy() chunks.Sample           { return s }

type fsamples []fsample

func (s fsamples) Get(i int) chunks.Sample { return s[i] }
func (s fsamples) Len() int                { return len(s) }

// TestSampleIterator: a series' iterator answers every sequence of Next,
// Seek and At as Prometheus' list iterator over the same samples does,
// also when reused for another series.
func TestSampleIterator(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var it chunkenc.Iterator
	for round := range 2000 {
		n := rng.IntN(12)
		ours := make([]Sample, n)
		theirs := make(fsamples, n)
		at := int64(rng.IntN(5))
		for i := range n {
			ours[i] = Sample{t: at, f: float64(i)}
			theirs[i] = fsample{t: at, f: float64(i)}
			at += 1 + int64(rng.IntN(4))
		}
		it = (&series{s: &Series{Samples: ours}}).Iterator(it)
		want := storage.NewListSeriesIterator(theirs)
		for op := range 16 {
			var a, b chunkenc.ValueType
			var what string
			if rng.IntN(2) == 0 {
				what = "Next"
				a, b = it.Next(), want.Next()
			} else {
				to := int64(rng.IntN(int(at) + 3))
				what = "Seek"
				a, b = it.Seek(to), want.Seek(to)
			}
			if a != b {
				t.Fatalf("round %d op %d %s: %v, Prometheus' %v (samples %v)", round, op, what, a, b, theirs)
			}
			if a == chunkenc.ValNone {
				continue
			}
			gt, gf := it.At()
			wt, wf := want.At()
			if gt != wt || gf != wf || it.AtT() != wt || it.AtST() != 0 {
				t.Fatalf("round %d op %d %s: at %d %v, Prometheus' %d %v", round, op, what, gt, gf, wt, wf)
			}
			if ht, h := it.AtHistogram(nil); ht != wt || h != nil {
				t.Fatalf("AtHistogram: %d %v", ht, h)
			}
			if ht, h := it.AtFloatHistogram(nil); ht != wt || h != nil {
				t.Fatalf("AtFloatHistogram: %d %v", ht, h)
			}
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
}

// TestSelectKey: reads of another range or other matchers have other
// keys (Querier.memo), also where names and values run together.
func TestSelectKey(t *testing.T) {
	m := func(ty labels.MatchType, n, v string) *labels.Matcher { return labels.MustNewMatcher(ty, n, v) }
	base := []*labels.Matcher{m(labels.MatchEqual, "job", "node"), m(labels.MatchEqual, "a", "bc")}
	keys := map[string]string{}
	for name, k := range map[string]string{
		"base":    selectKey(1, 2, base),
		"start":   selectKey(0, 2, base),
		"end":     selectKey(1, 3, base),
		"type":    selectKey(1, 2, []*labels.Matcher{m(labels.MatchNotEqual, "job", "node"), base[1]}),
		"name":    selectKey(1, 2, []*labels.Matcher{m(labels.MatchEqual, "jo", "node"), base[1]}),
		"value":   selectKey(1, 2, []*labels.Matcher{m(labels.MatchEqual, "job", "nodes"), base[1]}),
		"joined":  selectKey(1, 2, []*labels.Matcher{base[0], m(labels.MatchEqual, "ab", "c")}),
		"fewer":   selectKey(1, 2, base[:1]),
		"swapped": selectKey(1, 2, []*labels.Matcher{base[1], base[0]}),
	} {
		if other, ok := keys[k]; ok {
			t.Errorf("%s and %s have one key %q", name, other, k)
		}
		keys[k] = name
	}
	if selectKey(1, 2, base) != selectKey(1, 2, slices.Clone(base)) {
		t.Error("one read has two keys")
	}
}
