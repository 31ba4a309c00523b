package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/prometheus/prometheus/prompb"

	"github.com/hourglassdb/hourglass/internal/sendorder"
	"github.com/hourglassdb/hourglass/model"
)

// refCheck is what the write path checked and keyed before it decoded
// requests itself: prompb's decoded request, each series' labels sorted
// and checked, its canonical meta key made; the keys, or the first
// refusal.
func refCheck(req *prompb.WriteRequest) ([]string, int, error) {
	var keys []string
	samples := 0
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		labels := slices.Clone(ts.Labels)
		slices.SortStableFunc(labels, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
		for j, l := range labels {
			switch {
			case l.Name == "":
				return nil, 0, badRequest("series %d: empty label name", i)
			case !utf8.ValidString(l.Name):
				return nil, 0, badRequest("series %d: label name %q is not valid UTF-8", i, l.Name)
			case !utf8.ValidString(l.Value):
				return nil, 0, badRequest("series %d: the value of label %q is not valid UTF-8", i, l.Name)
			case l.Name[0] == '$' || strings.IndexByte(l.Name, 0) >= 0:
				return nil, 0, badRequest("series %d: label name %q cannot start with '$' or hold a NUL byte", i, l.Name)
			case j > 0 && l.Name == labels[j-1].Name:
				return nil, 0, badRequest("series %d: label %q is given twice", i, l.Name)
			}
		}
		dst := []byte{'{'}
		for _, l := range labels {
			if l.Value == "" {
				continue
			}
			if len(dst) > 1 {
				dst = append(dst, ',')
			}
			dst = model.AppendMetaString(dst, l.Name)
			dst = append(dst, ':')
			dst = model.AppendMetaString(dst, l.Value)
		}
		key := string(append(dst, '}'))
		if len(key) == 2 {
			return nil, 0, badRequest("series %d: no labels", i)
		}
		if len(key) > model.MaxMetaBytes {
			return nil, 0, badRequest("series %d: labels of %d bytes exceed the limit of %d", i, len(key), model.MaxMetaBytes)
		}
		for _, sm := range ts.Samples {
			if sm.Timestamp > math.MaxInt64/int64(1e6) || sm.Timestamp < math.MinInt64/int64(1e6) {
				return nil, 0, badRequest("series %d: timestamp %d ms is out of range", i, sm.Timestamp)
			}
		}
		samples += len(ts.Samples)
		keys = append(keys, key)
	}
	return keys, samples, nil
}

// decodeAndCheck is the handler's decoding and checking of pb (the
// decompressed body) with the key cache keys: the keys of its series, or
// the error the handler would answer; decodeErr tells a protobuf error.
func decodeAndCheck(t *testing.T, pb []byte, keys *promKeyCache) (rq *promReq, got []string, samples int, err error, decodeErr bool) {
	t.Helper()
	rq = new(promReq)
	if err := rq.decode(pb, nil, keys); err != nil {
		return rq, nil, 0, err, true
	}
	var b promBatch
	samples, err = b.check(rq)
	if err != nil {
		return rq, nil, 0, err, false
	}
	keys.add(rq.series)
	for _, s := range rq.series {
		got = append(got, string(s.key.(model.MetaKey)))
	}
	return rq, got, samples, nil, false
}

// FuzzPromDecode: the write path's decoder takes what prompb's Unmarshal
// takes and refuses what it refuses (but native histograms, which it
// refuses on purpose), with the same labels and samples; its checks and keys are those of prompb's request checked as
// before; and a second decoding, with the keys taken from the cache the
// first filled, gives the same keys and refusals.
func FuzzPromDecode(f *testing.F) {
	for _, req := range promSeeds() {
		pb, err := req.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(pb)
	}
	f.Add([]byte("\x0a\x05\x0a\x03\x0a\x01\xff"))
	// Labels after a sample, an unknown field in a label and a group.
	f.Add([]byte("\x0a\x1c\x0a\x06\x0a\x01a\x12\x01b\x12\x0b\x09\x00\x00\x00\x00\x00\x00\xf0\x3f\x10\x05\x0a\x05\x0a\x01c\x18\x07"))
	f.Add([]byte("\x0a\x0a\x0a\x08\x0a\x01a\x12\x01b\x1b\x1c\x1a\x00"))
	// A tag's field number beyond 32 bits: gogo takes its low 32 bits.
	f.Add([]byte("\x0a\x0d\x0a\x0b\x8a\x80\x80\x80\x10\x01a\x12\x01b\x00"))
	// Field number 0, length-delimited: prompb refuses it (illegal tag 0).
	f.Add([]byte("\x02\x01\x00"))
	// A series of a two-byte length.
	f.Add(append([]byte("\x0a\x83\x01\x0a\x80\x01\x0a\x01a\x12\x7b"), bytes.Repeat([]byte("b"), 123)...))
	// A varint of ten bytes whose last has more than one bit.
	f.Add([]byte("\x0a\x10\x12\x0e\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f\x09\x00\x00"))
	f.Fuzz(func(t *testing.T, pb []byte) {
		var ref prompb.WriteRequest
		refErr := ref.Unmarshal(pb)
		rq, keys, samples, err, decodeErr := decodeAndCheck(t, pb, nil)
		if refErr == nil && decodeErr && errors.Is(err, errPBHistograms) {
			for _, s := range ref.Timeseries {
				if len(s.Histograms) > 0 {
					return // refused on purpose
				}
			}
		}
		if (refErr != nil) != (err != nil && decodeErr) {
			t.Fatalf("prompb: %v; decoder: %v", refErr, err)
		}
		if refErr != nil {
			return
		}
		// The same series, labels (decoded before check sorted them, so
		// compared sorted) and samples.
		if len(rq.series) != len(ref.Timeseries) {
			t.Fatalf("%d series, prompb %d", len(rq.series), len(ref.Timeseries))
		}
		for i, s := range rq.series {
			want := ref.Timeseries[i]
			wl := slices.Clone(want.Labels)
			slices.SortStableFunc(wl, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
			// check sorted the labels of the series it reached.
			gl := slices.Clone(rq.labels[s.l0:s.l1])
			slices.SortStableFunc(gl, labelOrder)
			if len(gl) != len(wl) {
				t.Fatalf("series %d: %d labels, prompb %d", i, len(gl), len(wl))
			}
			for j := range gl {
				if string(gl[j].name) != wl[j].Name || string(gl[j].value) != wl[j].Value {
					t.Fatalf("series %d label %d: %q=%q, prompb %q=%q", i, j, gl[j].name, gl[j].value, wl[j].Name, wl[j].Value)
				}
			}
			gs := rq.samples[s.s0:s.s1]
			if len(gs) != len(want.Samples) {
				t.Fatalf("series %d: %d samples, prompb %d", i, len(gs), len(want.Samples))
			}
			for j, sm := range want.Samples {
				if gs[j].t != sm.Timestamp || math.Float64bits(gs[j].v) != math.Float64bits(sm.Value) {
					t.Fatalf("series %d sample %d: %v, prompb %v", i, j, gs[j], sm)
				}
			}
		}
		// The same checks, refusals and keys as before.
		wantKeys, wantSamples, wantErr := refCheck(&ref)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !slices.Equal(keys, wantKeys) || samples != wantSamples {
			t.Fatalf("check: %v %q %d; before: %v %q %d", err, keys, samples, wantErr, wantKeys, wantSamples)
		}
		// Again through a cache: the first pass fills it, the second
		// takes the keys from it.
		cache := newPromKeyCache(1 << 20)
		for pass := range 2 {
			_, keys, samples, err, _ := decodeAndCheck(t, pb, cache)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !slices.Equal(keys, wantKeys) || samples != wantSamples {
				t.Fatalf("pass %d with the cache: %v %q %d; before: %v %q %d", pass, err, keys, samples, wantErr, wantKeys, wantSamples)
			}
		}
	})
}

// promSeeds are requests of the shapes the write path sees and refuses.
func promSeeds() []*prompb.WriteRequest {
	ls := func(kv ...string) []prompb.Label {
		var l []prompb.Label
		for i := 0; i+1 < len(kv); i += 2 {
			l = append(l, prompb.Label{Name: kv[i], Value: kv[i+1]})
		}
		return l
	}
	one := []prompb.Sample{{Value: 1, Timestamp: 1714564800000}}
	ts := func(l []prompb.Label, s []prompb.Sample) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: l, Samples: s}
	}
	return []*prompb.WriteRequest{
		{Timeseries: []prompb.TimeSeries{
			ts(ls("__name__", "up", "instance", "localhost:9090", "job", "prometheus"), []prompb.Sample{{Value: 1, Timestamp: 1}, {Value: math.Float64frombits(0x7ff0000000000002), Timestamp: 2}}),
			ts(ls("job", "node", "__name__", "node_load1", "empty", ""), one),
			ts(ls("__name__", "up", "instance", "localhost:9090", "job", "prometheus"), one),
		}},
		{Timeseries: []prompb.TimeSeries{ts(ls("__name__", "up", "jo\xffb", "a"), one)}},
		{Timeseries: []prompb.TimeSeries{ts(ls("__name__", "up\xc3"), one)}},
		{Timeseries: []prompb.TimeSeries{ts(ls("__name__", "up", "", "a"), one)}},
		{Timeseries: []prompb.TimeSeries{ts(ls("job", "a", "__name__", "up", "job", ""), one)}},
		{Timeseries: []prompb.TimeSeries{ts(ls("job", ""), one)}},
		{Timeseries: []prompb.TimeSeries{ts(ls("$bad", "x"), one), ts(ls("a\x00", "x"), one)}},
		{Timeseries: []prompb.TimeSeries{ts(ls("__name__", "up"), []prompb.Sample{{Value: 1, Timestamp: math.MaxInt64 / 100}})}},
		{Timeseries: []prompb.TimeSeries{ts(ls("__name__", "up", "q", `"<&>\`), one)},
			Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "up", Help: "up", Unit: "s"}}},
		{Timeseries: []prompb.TimeSeries{{Labels: ls("__name__", "up"), Samples: one,
			Exemplars: []prompb.Exemplar{{Labels: ls("trace_id", "abc"), Value: 5, Timestamp: 3}}}}},
		{Timeseries: []prompb.TimeSeries{ts(ls("__name__", "up"), nil), ts(nil, one)}},
	}
}

// TestPromKeyCache: the cache keeps a series' key across requests, finds
// one of its older generation and moves it to the newer, and stays
// within its bytes as series come and go.
func TestPromKeyCache(t *testing.T) {
	req := func(from, n int) []byte {
		r := &prompb.WriteRequest{}
		for i := from; i < from+n; i++ {
			r.Timeseries = append(r.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "i", Value: fmt.Sprint(i)}},
				Samples: []prompb.Sample{{Value: float64(i), Timestamp: int64(i)}}})
		}
		pb, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return pb
	}
	const max = 64 << 10
	c := newPromKeyCache(max)
	cached := func(pb []byte) (n int) {
		rq, _, _, err, _ := decodeAndCheck(t, pb, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range rq.series {
			if s.cached {
				n++
			}
		}
		return n
	}
	if n := cached(req(0, 100)); n != 0 {
		t.Fatalf("%d series cached in an empty cache", n)
	}
	if n := cached(req(0, 100)); n != 100 {
		t.Fatalf("%d of 100 series cached on their second request", n)
	}
	// A cached series carries its entry's slot for the engine
	// (model.Measurement.Slot), the same with every request.
	slots := func() []*model.SeriesSlot {
		rq, _, _, err, _ := decodeAndCheck(t, req(0, 100), c)
		if err != nil {
			t.Fatal(err)
		}
		var out []*model.SeriesSlot
		for _, s := range rq.series {
			out = append(out, s.slot)
		}
		return out
	}
	s1, s2 := slots(), slots()
	for i := range s1 {
		if s1[i] == nil || s1[i] != s2[i] || (i > 0 && s1[i] == s1[i-1]) {
			t.Fatalf("series %d: slots %p then %p; want one of its own, the same each time", i, s1[i], s2[i])
		}
	}
	// Far more series than the cache holds: it stays within its bytes.
	for i := 100; i < 5000; i += 100 {
		cached(req(i, 100))
		if _, b := c.size(); b > max {
			t.Fatalf("cache of %d bytes, over its %d", b, max)
		}
	}
	if n := cached(req(0, 100)); n != 0 {
		t.Fatalf("%d long-gone series still cached", n)
	}
	if n := cached(req(4900, 100)); n != 100 {
		t.Fatalf("%d of the latest 100 series cached", n)
	}
	// A series found in the older generation is kept when the newer one
	// turns over.
	c = newPromKeyCache(max)
	first, _, _, _, _ := decodeAndCheck(t, req(0, 1), nil)
	wire := string(first.series[0].wire)
	cached(req(0, 1))
	for i := 1; len(c.prev.entries) == 0; i++ {
		cached(req(i, 1))
	}
	if _, ok := c.prev.index[wire]; !ok {
		t.Fatal("the first series is not in the older generation")
	}
	if cached(req(0, 1)) != 1 {
		t.Fatal("the first series not found in the older generation")
	}
	if _, ok := c.cur.index[wire]; !ok {
		t.Fatalf("the first series not moved to the newer generation")
	}
}

// TestPromKeyCacheOrder: series found by their place in the order they
// were added (the series after the one before) get their own keys and
// slots whatever order later requests send them in: the same, shifted,
// reversed, shuffled, with new series and repeats among them, and across
// a generation's turnover.
func TestPromKeyCacheOrder(t *testing.T) {
	req := func(ids []int) []byte {
		r := &prompb.WriteRequest{}
		for _, i := range ids {
			// Labels of one length, alike but for one byte in the middle.
			r.Timeseries = append(r.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "i", Value: fmt.Sprintf("%04d", i)}, {Name: "z", Value: "same"}},
				Samples: []prompb.Sample{{Value: float64(i), Timestamp: 1}}})
		}
		pb, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return pb
	}
	c := newPromKeyCache(64 << 10) // a few hundred series a generation
	slots := map[string]*model.SeriesSlot{}
	for round, sent := range sendorder.Rounds(7, 200, 60) {
		pb := req(sent)
		_, want, _, err, _ := decodeAndCheck(t, pb, nil)
		if err != nil {
			t.Fatal(err)
		}
		rq, got, _, err, _ := decodeAndCheck(t, pb, c)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: keys from the cache differ from the labels' own", round)
		}
		for i, s := range rq.series {
			if !s.cached {
				delete(slots, want[i]) // dropped from the cache: a new entry
				continue
			}
			// A series keeps its entry's slot, also when it moves to the
			// newer generation.
			if old, ok := slots[want[i]]; s.slot == nil || (ok && old != s.slot) {
				t.Fatalf("round %d: series %d has slot %p, before %p", round, sent[i], s.slot, old)
			}
			slots[want[i]] = s.slot
		}
	}
	// Requests of their own orders at once, the cache's generations
	// turning over under them.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			ids := make([]int, 150)
			for i := range ids {
				ids[i] = g*100 + i // overlapping the next goroutine's
			}
			for range 30 {
				if rng.IntN(2) == 0 {
					rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
				}
				pb := req(ids)
				_, want, _, err, _ := decodeAndCheck(t, pb, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if _, got, _, err, _ := decodeAndCheck(t, pb, c); err != nil || !slices.Equal(got, want) {
					t.Errorf("keys from a cache shared by requests at once differ from the labels' own (%v)", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestPromCachedChecks: a series whose key comes from the cache still has
// its samples checked, and a refused series is not cached.
func TestPromCachedChecks(t *testing.T) {
	c := newPromKeyCache(1 << 20)
	l := []prompb.Label{{Name: "__name__", Value: "up"}}
	good, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: l, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}}}}).Marshal()
	bad, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: l, Samples: []prompb.Sample{{Value: 1, Timestamp: math.MaxInt64 / 100}}}}}).Marshal()
	if _, _, _, err, _ := decodeAndCheck(t, good, c); err != nil {
		t.Fatal(err)
	}
	rq, _, _, err, _ := decodeAndCheck(t, bad, c)
	if !rq.series[0].cached || err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("cached series with a timestamp out of range: cached %v, %v", rq.series[0].cached, err)
	}
	dup, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}}}}).Marshal()
	for range 2 {
		rq, _, _, err, _ := decodeAndCheck(t, dup, c)
		var he *httpError
		if rq.series[0].cached || !errors.As(err, &he) || !strings.Contains(err.Error(), "given twice") {
			t.Fatalf("a series refused: cached %v, %v", rq.series[0].cached, err)
		}
	}
	if n, _ := c.size(); n != 1 {
		t.Fatalf("%d series cached, want the good one", n)
	}
}

// TestPromSampleFastPath: samples in Prometheus' encoding and in others
// decode alike.
func TestPromSampleFastPath(t *testing.T) {
	for _, sm := range []prompb.Sample{{Value: 1.5, Timestamp: 1714564800000}, {Value: -2, Timestamp: -1}, {}, {Value: math.Inf(1), Timestamp: math.MaxInt64}} {
		pb, _ := sm.Marshal()
		got, err := pbSample(pb)
		if err != nil || got.t != sm.Timestamp || math.Float64bits(got.v) != math.Float64bits(sm.Value) {
			t.Fatalf("%v: %v %v", sm, got, err)
		}
		// Timestamp first, then value.
		rev := binary.AppendUvarint([]byte{0x10}, uint64(sm.Timestamp))
		rev = binary.LittleEndian.AppendUint64(append(rev, 0x09), math.Float64bits(sm.Value))
		if got, err := pbSample(rev); err != nil || got.t != sm.Timestamp || math.Float64bits(got.v) != math.Float64bits(sm.Value) {
			t.Fatalf("%v reversed: %v %v", sm, got, err)
		}
	}
}

// TestPromConsecutiveSeries: a series sent once a sample, its labels
// repeated in consecutive TimeSeries, is keyed once; each sample is still
// checked.
func TestPromConsecutiveSeries(t *testing.T) {
	l := []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "a"}}
	req := &prompb.WriteRequest{}
	for i := range 3 {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: l, Samples: []prompb.Sample{{Value: 1, Timestamp: int64(i)}}})
	}
	pb, _ := req.Marshal()
	rq, keys, samples, err, _ := decodeAndCheck(t, pb, nil)
	if err != nil || samples != 3 || len(keys) != 3 || keys[0] != `{"__name__":"up","job":"a"}` || keys[1] != keys[0] || keys[2] != keys[0] {
		t.Fatalf("keys %q, %d samples, %v", keys, samples, err)
	}
	// The very same boxed key: made once.
	data := func(k any) *byte { return unsafe.StringData(string(k.(model.MetaKey))) }
	if data(rq.series[1].key) != data(rq.series[0].key) || data(rq.series[2].key) != data(rq.series[0].key) {
		t.Fatal("a key made for each series")
	}
	req.Timeseries[2].Samples[0].Timestamp = math.MinInt64 / 10
	pb, _ = req.Marshal()
	for _, c := range []*promKeyCache{nil, newPromKeyCache(1 << 20)} {
		for range 2 {
			if _, _, _, err, _ := decodeAndCheck(t, pb, c); err == nil || !strings.Contains(err.Error(), "series 2: timestamp") {
				t.Fatalf("a repeated series' timestamp out of range: %v", err)
			}
		}
	}
}

// BenchmarkPromDecode decodes and checks requests of 10,000 series of one
// sample each (as Prometheus sends them), 20,000 series taking turns, the
// keys from a warm cache: what the write path does before the insert.
func BenchmarkPromDecode(b *testing.B) {
	var bodies [][]byte
	for r := range 2 {
		req := &prompb.WriteRequest{}
		for i := r * 10000; i < (r+1)*10000; i++ {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels: []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("node_metric_%d", i%50)},
					{Name: "cpu", Value: fmt.Sprint(i % 8)}, {Name: "instance", Value: fmt.Sprintf("host-%d", i)},
					{Name: "job", Value: "node"}, {Name: "mode", Value: "user"}},
				Samples: []prompb.Sample{{Value: float64(i), Timestamp: 1714564800000}}})
		}
		pb, err := req.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, pb)
	}
	cache := newPromKeyCache(promKeyCacheBytes)
	rq := new(promReq)
	var batch promBatch
	var taken int64 // the handler's take, with nothing refused
	take := func(n int64) error { taken += n; return nil }
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		pb := bodies[i%2]
		err := rq.decode(pb, take, cache)
		if err == nil {
			_, err = batch.check(rq)
		}
		if err != nil {
			b.Fatal(err)
		}
		cache.add(rq.series)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10000), "ns/series")
}

// TestPromDecodeTakes: a decode takes from the budget at least the memory
// of the elements it decodes, and not much more (at most twice, as a
// slice grown by append holds), for requests of 1 to 5,000 series; and
// a take refused stops it with the refusal.
func TestPromDecodeTakes(t *testing.T) {
	for _, n := range []int{1, 2, 3, 17, 64, 65, 1000, 5000} {
		req := &prompb.WriteRequest{}
		for i := range n {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "i", Value: fmt.Sprint(i)}},
				Samples: []prompb.Sample{{Value: 1, Timestamp: 1}, {Value: 2, Timestamp: 2}}})
		}
		pb, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var taken int64
		rq := new(promReq)
		if err := rq.decode(pb, func(b int64) error { taken += b; return nil }, nil); err != nil {
			t.Fatal(err)
		}
		exact := int64(len(rq.series))*sizeSeries + int64(len(rq.labels))*sizeLabel + int64(len(rq.samples))*sizeSample
		if len(rq.series) != n || len(rq.labels) != 2*n || len(rq.samples) != 2*n {
			t.Fatalf("%d series: decoded %d, %d labels, %d samples", n, len(rq.series), len(rq.labels), len(rq.samples))
		}
		if taken < exact || taken > 2*exact {
			t.Errorf("%d series: took %d bytes for %d bytes of elements", n, taken, exact)
		}
		refused := errors.New("refused")
		budget := exact / 2
		err = new(promReq).decode(pb, func(b int64) error {
			if budget -= b; budget < 0 {
				return refused
			}
			return nil
		}, nil)
		var be *promBudgetError
		if !errors.As(err, &be) || be.err != refused {
			t.Errorf("%d series, half the budget: %v", n, err)
		}
	}
}
