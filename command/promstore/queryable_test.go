package promstore_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/command/promstore"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/timeseries"
)

// staleNaN is Prometheus' staleness marker (model/value.StaleNaN).
const staleNaN = 0x7ff0000000000002

const t0 = int64(1714564800000) // 2024-05-01T12:00:00Z in ms

// newService opens an engine on a real directory and its command layer,
// with the collection "prometheus" as remote write creates it.
func newService(t testing.TB) *command.Service {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	svc, err := command.New(command.Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	createProm(t, svc, "prometheus")
	return svc
}

func createProm(t testing.TB, svc *command.Service, name string) {
	t.Helper()
	opts := timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "labels"}}
	if _, err := svc.Writer().CreateCollection(context.Background(), name, opts); err != nil {
		t.Fatal(err)
	}
}

// insert stores samples (t, v pairs) of the series of the labels kv.
func insert(t testing.TB, svc *command.Service, name string, kv []string, samples ...float64) {
	t.Helper()
	meta := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		meta[kv[i]] = kv[i+1]
	}
	var ms []model.Measurement
	for i := 0; i+1 < len(samples); i += 2 {
		ms = append(ms, model.Measurement{Time: int64(samples[i]) * 1e6, Meta: meta,
			Fields: []model.Field{{Name: promstore.ValueField, Value: model.Float(samples[i+1])}}})
	}
	res, err := svc.Writer().Insert(context.Background(), name, timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("insert: %v %v", err, res.Errors)
	}
}

// fixture stores three series of up and one of http_requests_total, one
// with a label whose name holds a dot; up{instance="a"} ends with a
// staleness marker.
func fixture(t testing.TB) *command.Service {
	svc := newService(t)
	stale := math.Float64frombits(staleNaN)
	insert(t, svc, "prometheus", []string{"__name__", "up", "instance", "a", "job", "prometheus"},
		float64(t0), 1, float64(t0+15000), 1, float64(t0+30000), stale)
	insert(t, svc, "prometheus", []string{"__name__", "up", "instance", "b", "job", "node"},
		float64(t0), 0, float64(t0+15000), 1, float64(t0+30000), 1)
	insert(t, svc, "prometheus", []string{"__name__", "up", "instance", "c", "job", "node", "zone.name", "eu"},
		float64(t0+15000), 1)
	insert(t, svc, "prometheus", []string{"__name__", "http_requests_total", "code", "200", "job", "node"},
		float64(t0), 10, float64(t0+15000), 25, float64(t0+30000), 40)
	return svc
}

type got struct {
	labels string
	t      []int64
	bits   []uint64
}

// selectAll runs Select and returns every series with its samples' bits.
func selectAll(t *testing.T, q storage.Querier, hints *storage.SelectHints, ms ...*labels.Matcher) []got {
	t.Helper()
	ss := q.Select(context.Background(), true, hints, ms...)
	var out []got
	var it chunkenc.Iterator
	for ss.Next() {
		s := ss.At()
		g := got{labels: s.Labels().String()}
		it = s.Iterator(it)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			g.t = append(g.t, ts)
			g.bits = append(g.bits, math.Float64bits(v))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func names(gs []got) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.labels)
	}
	return out
}

// TestSelectMatchers: each kind of matcher selects the series Prometheus
// would, a label a series lacks being "", a label name holding a dot
// matched exactly, the series in label set order.
func TestSelectMatchers(t *testing.T) {
	svc := fixture(t)
	store, err := promstore.New(svc, "prometheus", promstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := store.Querier(t0-1e6, t0+1e6)
	defer q.Close()
	m := labels.MustNewMatcher
	upA := `{__name__="up", instance="a", job="prometheus"}`
	upB := `{__name__="up", instance="b", job="node"}`
	upC := `{__name__="up", instance="c", job="node", "zone.name"="eu"}`
	http := `{__name__="http_requests_total", code="200", job="node"}`
	for _, tc := range []struct {
		ms   []*labels.Matcher
		want []string
	}{
		{[]*labels.Matcher{m(labels.MatchEqual, "__name__", "up")}, []string{upA, upB, upC}},
		{[]*labels.Matcher{m(labels.MatchEqual, "__name__", "up"), m(labels.MatchNotEqual, "job", "node")}, []string{upA}},
		{[]*labels.Matcher{m(labels.MatchRegexp, "job", "no.*")}, []string{http, upB, upC}},
		{[]*labels.Matcher{m(labels.MatchRegexp, "job", "no")}, nil}, // anchored
		{[]*labels.Matcher{m(labels.MatchNotRegexp, "instance", "a|b"), m(labels.MatchRegexp, "__name__", ".+")}, []string{http, upC}},
		{[]*labels.Matcher{m(labels.MatchEqual, "code", ""), m(labels.MatchEqual, "job", "node")}, []string{upB, upC}},
		{[]*labels.Matcher{m(labels.MatchNotEqual, "code", ""), m(labels.MatchRegexp, "__name__", ".+")}, []string{http}},
		{[]*labels.Matcher{m(labels.MatchRegexp, "code", "2..|"), m(labels.MatchEqual, "job", "node")}, []string{http, upB, upC}},
		{[]*labels.Matcher{m(labels.MatchEqual, "zone.name", "eu")}, []string{upC}},
		{[]*labels.Matcher{m(labels.MatchNotEqual, "zone.name", "eu"), m(labels.MatchEqual, "__name__", "up")}, []string{upA, upB}},
	} {
		if g := names(selectAll(t, q, nil, tc.ms...)); !slices.Equal(g, tc.want) {
			t.Errorf("%v: got %v, want %v", tc.ms, g, tc.want)
		}
	}
}

// TestSelectRange: the hints' range, both ends included, within the
// Querier's; a staleness marker is returned bit for bit.
func TestSelectRange(t *testing.T) {
	svc := fixture(t)
	store, _ := promstore.New(svc, "prometheus", promstore.Options{})
	q, _ := store.Querier(t0, t0+30000)
	defer q.Close()
	inst := labels.MustNewMatcher(labels.MatchEqual, "instance", "a")
	all := selectAll(t, q, nil, inst)
	if len(all) != 1 || !slices.Equal(all[0].t, []int64{t0, t0 + 15000, t0 + 30000}) {
		t.Fatalf("whole range: %+v", all)
	}
	if b := all[0].bits; b[0] != math.Float64bits(1) || b[2] != staleNaN {
		t.Fatalf("values %x: want 1 then the staleness marker %x", b, uint64(staleNaN))
	}
	hinted := selectAll(t, q, &storage.SelectHints{Start: t0 + 15000, End: t0 + 29999}, inst)
	if len(hinted) != 1 || !slices.Equal(hinted[0].t, []int64{t0 + 15000}) {
		t.Fatalf("hints [t0+15s, t0+30s): %+v", hinted)
	}
	// Hints beyond the Querier's range are bounded by it.
	wide := selectAll(t, q, &storage.SelectHints{Start: t0 - 1e6, End: t0 + 1e6}, inst)
	if len(wide) != 1 || len(wide[0].t) != 3 {
		t.Fatalf("hints wider than the querier: %+v", wide)
	}
	// A range holding none of a series' samples selects no series.
	q2, _ := store.Querier(t0+31000, t0+60000)
	defer q2.Close()
	if g := selectAll(t, q2, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "up")); len(g) != 0 {
		t.Fatalf("after every sample: %+v", g)
	}
}

// TestSelectDuplicates: Select keeps one sample a timestamp (the first
// stored), Read returns every one, both in time order, out-of-order
// writes included.
func TestSelectDuplicates(t *testing.T) {
	svc := newService(t)
	kv := []string{"__name__", "dup", "job", "x"}
	insert(t, svc, "prometheus", kv, float64(t0+2000), 3, float64(t0), 1)
	insert(t, svc, "prometheus", kv, float64(t0), 2, float64(t0+1000), 5)
	store, _ := promstore.New(svc, "prometheus", promstore.Options{})
	q := store.NewQuerier(t0, t0+10000)
	defer q.Close()
	g := selectAll(t, q, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "dup"))
	if len(g) != 1 || !slices.Equal(g[0].t, []int64{t0, t0 + 1000, t0 + 2000}) || g[0].bits[0] != math.Float64bits(1) {
		t.Fatalf("select: %+v", g)
	}
	raw, err := q.Read(context.Background(), t0, t0+10000, labels.MustNewMatcher(labels.MatchEqual, "__name__", "dup"))
	if err != nil || len(raw) != 1 || len(raw[0].Samples) != 4 {
		t.Fatalf("read: %v %+v", err, raw)
	}
}

// TestLabelNamesValues: names and values of the series in the range that
// match, sorted, from the series index; the series hint lists series
// without samples.
func TestLabelNamesValues(t *testing.T) {
	svc := fixture(t)
	store, _ := promstore.New(svc, "prometheus", promstore.Options{})
	ctx := context.Background()
	q, _ := store.Querier(math.MinInt64, math.MaxInt64)
	defer q.Close()
	names, _, err := q.LabelNames(ctx, nil)
	if err != nil || !slices.Equal(names, []string{"__name__", "code", "instance", "job", "zone.name"}) {
		t.Fatalf("label names: %v %v", names, err)
	}
	names, _, _ = q.LabelNames(ctx, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "prometheus"))
	if !slices.Equal(names, []string{"__name__", "instance", "job"}) {
		t.Fatalf("label names of job=prometheus: %v", names)
	}
	vals, _, _ := q.LabelValues(ctx, "__name__", nil)
	if !slices.Equal(vals, []string{"http_requests_total", "up"}) {
		t.Fatalf("__name__ values: %v", vals)
	}
	vals, _, _ = q.LabelValues(ctx, "instance", &storage.LabelHints{Limit: 2}, labels.MustNewMatcher(labels.MatchEqual, "__name__", "up"))
	if !slices.Equal(vals, []string{"a", "b"}) {
		t.Fatalf("instance values, limit 2: %v", vals)
	}
	// Only the series with samples in the range.
	late, _ := store.Querier(t0+10000, t0+20000)
	defer late.Close()
	vals, _, _ = late.LabelValues(ctx, "instance", nil)
	if !slices.Equal(vals, []string{"a", "b", "c"}) {
		t.Fatalf("instance values in [t0+10s, t0+20s]: %v", vals)
	}
	tail, _ := store.Querier(t0+20000, t0+40000)
	defer tail.Close()
	vals, _, _ = tail.LabelValues(ctx, "instance", nil)
	if !slices.Equal(vals, []string{"a", "b"}) {
		t.Fatalf("instance values in [t0+20s, t0+40s]: %v", vals)
	}
	series := selectAll(t, tail, &storage.SelectHints{Start: t0 + 20000, End: t0 + 40000, Func: "series"},
		labels.MustNewMatcher(labels.MatchEqual, "job", "node"))
	if len(series) != 2 || len(series[0].t) != 0 || !strings.Contains(series[0].labels, "http_requests_total") {
		t.Fatalf("series of job=node in [t0+20s, t0+40s]: %+v", series)
	}
}

// TestQuerierLimits: a querier's reads count against MaxSamples and the
// memory budget together, which Close gives back; a missing collection
// holds no series; a collection without a metaField is refused.
func TestQuerierLimits(t *testing.T) {
	svc := fixture(t)
	ctx := context.Background()
	all := labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")
	var read atomic.Int64
	store, _ := promstore.New(svc, "prometheus", promstore.Options{MaxSamples: 10, Read: &read})
	q := store.NewQuerier(t0, t0+30000)
	if _, err := q.Read(ctx, t0, t0+30000, all); err != nil { // 10 samples
		t.Fatal(err)
	}
	if _, err := q.Read(ctx, t0, t0, all); !errors.Is(err, promstore.ErrSampleLimit) {
		t.Fatalf("past MaxSamples: %v", err)
	}
	if read.Load() < 10 || q.Samples() < 10 {
		t.Fatalf("samples counted: %d, %d", read.Load(), q.Samples())
	}
	q.Close()

	budget := command.NewBudget(64 << 10)
	store, _ = promstore.New(svc, "prometheus", promstore.Options{Memory: budget})
	q = store.NewQuerier(t0, t0+30000)
	if _, err := q.Read(ctx, t0, t0+30000, all); err != nil {
		t.Fatal(err)
	}
	if !budget.TryTake(budget.Max()) {
		budget.Give(0)
	} else {
		t.Fatal("the samples read took none of the budget")
	}
	q.Close()
	q.Close() // harmless
	if !budget.TryTake(budget.Max()) {
		t.Fatal("Close did not give the budget back")
	}
	budget.Give(budget.Max())

	tiny := command.NewBudget(100)
	store, _ = promstore.New(svc, "prometheus", promstore.Options{Memory: tiny})
	q = store.NewQuerier(t0, t0+30000)
	if _, err := q.Read(ctx, t0, t0+30000, all); !errors.Is(err, promstore.ErrMemoryLimit) {
		t.Fatalf("over the whole budget: %v", err)
	}
	q.Close()

	store, _ = promstore.New(svc, "missing", promstore.Options{})
	if got := selectAll(t, store.NewQuerier(t0, t0+1), nil, all); len(got) != 0 {
		t.Fatalf("a missing collection: %v", got)
	}
	opts := timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t"}}
	if _, err := svc.Writer().CreateCollection(ctx, "nometa", opts); err != nil {
		t.Fatal(err)
	}
	store, _ = promstore.New(svc, "nometa", promstore.Options{})
	ss := store.NewQuerier(t0, t0+1).Select(ctx, true, nil, all)
	var se *promstore.StorageError
	if ss.Next() || !errors.As(ss.Err(), &se) || !strings.Contains(se.Error(), "metaField") {
		t.Fatalf("a collection without a metaField: %v", ss.Err())
	}
}

// TestIntegerValues: a value field the document API wrote as integers
// (an Int64 or Int32 column), or as integers and floats, gives samples;
// a value field of text gives none. Each case is a collection of its own:
// a find's column has one type for the collection.
func TestIntegerValues(t *testing.T) {
	svc := newService(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		vals []model.Value
		want []float64
	}{
		{"ints", []model.Value{model.Int(1), model.Int(2)}, []float64{1, 2}},
		{"int32s", []model.Value{model.Int32(3), model.Int32(4)}, []float64{3, 4}},
		{"mixed", []model.Value{model.Int(5), model.Float(5.5)}, []float64{5, 5.5}},
		{"text", []model.Value{model.String("a")}, nil},
	} {
		createProm(t, svc, tc.name)
		var ms []model.Measurement
		for i, v := range tc.vals {
			ms = append(ms, model.Measurement{Time: (t0 + int64(i)*1000) * 1e6, Meta: map[string]any{"__name__": "m"},
				Fields: []model.Field{{Name: promstore.ValueField, Value: v}}})
		}
		if res, err := svc.Writer().Insert(ctx, tc.name, timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Fatalf("insert %s: %v %v", tc.name, err, res.Errors)
		}
		store, _ := promstore.New(svc, tc.name, promstore.Options{})
		q := store.NewQuerier(t0, t0+10000)
		var vals []float64
		for _, s := range selectAll(t, q, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")) {
			for _, b := range s.bits {
				vals = append(vals, math.Float64frombits(b))
			}
		}
		q.Close()
		if !slices.Equal(vals, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, vals, tc.want)
		}
	}
}

// TestQuerierLimitsDuringRead: the samples of a read are counted against
// the limits as they are read, not once it ends: a read past MaxSamples
// stops within a few thousand samples of it (samples are charged 4,096 at
// a time), holding no more.
func TestQuerierLimitsDuringRead(t *testing.T) {
	svc := newService(t)
	samples := make([]float64, 0, 2*20000)
	for i := range 20000 {
		samples = append(samples, float64(t0+int64(i)), 1)
	}
	insert(t, svc, "prometheus", []string{"__name__", "big"}, samples...)
	var read atomic.Int64
	store, _ := promstore.New(svc, "prometheus", promstore.Options{MaxSamples: 5000, Read: &read})
	q := store.NewQuerier(t0, t0+20000)
	defer q.Close()
	_, err := q.Read(context.Background(), t0, t0+20000, labels.MustNewMatcher(labels.MatchEqual, "__name__", "big"))
	if !errors.Is(err, promstore.ErrSampleLimit) {
		t.Fatalf("20,000 samples over a limit of 5,000: %v", err)
	}
	// Counted as read: what was charged before the charge that failed.
	// Charged at the end only, none would be.
	if n := read.Load(); n == 0 || n > 5000 {
		t.Fatalf("%d samples charged before the limit stopped the read, want some and at most 5000", n)
	}
}
