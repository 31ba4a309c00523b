package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTarget counts the lines and bytes it accepts, and answers the first
// request with 503 to exercise retries.
type fakeTarget struct {
	lines, bytes, requests atomic.Int64
	failFirst              atomic.Bool
	mu                     sync.Mutex
	gzipped                bool
}

func (f *fakeTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if f.failFirst.CompareAndSwap(true, false) {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		f.mu.Lock()
		f.gzipped = true
		f.mu.Unlock()
		body = zr
	}
	b, _ := io.ReadAll(body)
	f.lines.Add(int64(bytes.Count(b, []byte{'\n'})))
	f.bytes.Add(int64(len(b)))
	w.WriteHeader(http.StatusNoContent)
}

func newFakeServer(f *fakeTarget) *httptest.Server { return httptest.NewServer(f) }

func TestLoadArithmetic(t *testing.T) {
	f := &fakeTarget{}
	f.failFirst.Store(true)
	srv := httptest.NewServer(f)
	defer srv.Close()
	w := Workload{Scale: 7}
	w.EnsureDefaults()
	w.End = w.Start.Add(time.Hour)
	var calls atomic.Int64
	res, err := Load(context.Background(), LoadConfig{Workload: w, URL: srv.URL + "/write", BatchRows: 100, Workers: 3, Gzip: true,
		Progress: func(p Progress) { calls.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	rows := int64(7 * 360)
	if res.Rows != rows || res.Points != rows*NumFields || f.lines.Load() != rows {
		t.Fatalf("rows %d points %d, target saw %d lines; want %d rows", res.Rows, res.Points, f.lines.Load(), rows)
	}
	if res.Bytes != f.bytes.Load() || res.Requests != (rows+99)/100 || res.Retries != 1 || res.Errors != 0 || f.requests.Load() != res.Requests+1 {
		t.Fatalf("result %+v; target %d bytes, %d requests", res, f.bytes.Load(), f.requests.Load())
	}
	if !f.gzipped || calls.Load() == 0 {
		t.Fatal("bodies not gzipped, or no progress reported")
	}
	if got := res.PointsPerSecond(); got != float64(res.Points)/res.Elapsed.Seconds() {
		t.Fatalf("points/s %v", got)
	}
	if res.Latency.P50 <= 0 || res.Latency.P99 < res.Latency.P50 || res.Latency.Max < res.Latency.P99 {
		t.Fatalf("latency %+v", res.Latency)
	}

	// Limit, and refusals counted as errors.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"code":"invalid","message":"nope"}`, http.StatusBadRequest)
	}))
	defer bad.Close()
	res, err = Load(context.Background(), LoadConfig{Workload: w, URL: bad.URL, BatchRows: 100, Limit: 250})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 0 || res.Errors != 3 || res.FirstError == "" {
		t.Fatalf("refused load: %+v", res)
	}
}

func TestSummarize(t *testing.T) {
	var lats []time.Duration
	for i := 100; i >= 1; i-- {
		lats = append(lats, time.Duration(i)*time.Millisecond)
	}
	if s := summarize(lats); s.P50 != 50*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Fatalf("%+v", s)
	}
	if s := summarize(nil); s != (Latency{}) {
		t.Fatalf("empty: %+v", s)
	}
}

// TestLatencyWindow checks that an interval's latencies are kept in
// bounded memory, with an exact count and maximum and percentiles close
// to the true ones.
func TestLatencyWindow(t *testing.T) {
	w := newLatencyWindow()
	for i := 1; i <= 100_000; i++ {
		w.add(time.Duration(i) * time.Microsecond)
	}
	if len(w.sample) != IntervalSample || cap(w.sample) != IntervalSample {
		t.Fatalf("sample holds %d (cap %d)", len(w.sample), cap(w.sample))
	}
	n, lat := w.take()
	if n != 100_000 || lat.Max != 100*time.Millisecond {
		t.Fatalf("n %d, %+v", n, lat)
	}
	// A uniform sample of 1024: the median within a few percent of 50 ms.
	if lat.P50 < 45*time.Millisecond || lat.P50 > 55*time.Millisecond || lat.P99 < 97*time.Millisecond || lat.P99 > lat.Max {
		t.Fatalf("percentiles %+v", lat)
	}
	// The next interval starts empty.
	if n, lat := w.take(); n != 0 || lat != (Latency{}) {
		t.Fatalf("after take: %d %+v", n, lat)
	}
	w.add(3 * time.Millisecond)
	if n, lat := w.take(); n != 1 || lat.P50 != 3*time.Millisecond || lat.Max != 3*time.Millisecond {
		t.Fatalf("one batch: %d %+v", n, lat)
	}
}

// slowTarget accepts every batch after a delay, counting the lines.
func slowTarget(delay time.Duration, lines *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		time.Sleep(delay)
		lines.Add(int64(bytes.Count(b, []byte{'\n'})))
		w.WriteHeader(http.StatusNoContent)
	})
}

// TestLoadProgressLatency checks that the progress calls carry the
// latencies of every acknowledged batch, each batch in one interval.
func TestLoadProgressLatency(t *testing.T) {
	var lines atomic.Int64
	srv := httptest.NewServer(slowTarget(20*time.Millisecond, &lines))
	defer srv.Close()
	w := Workload{Scale: 2}
	w.EnsureDefaults()
	w.End = w.Start.Add(time.Hour) // 720 rows: 72 batches of 10, about 1.5 s on 1 worker
	var samples []Progress
	res, err := Load(context.Background(), LoadConfig{Workload: w, URL: srv.URL, BatchRows: 10, Workers: 1,
		Progress: func(p Progress) { samples = append(samples, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 72 || res.Stopped || len(samples) < 2 {
		t.Fatalf("%+v, %d progress calls", res, len(samples))
	}
	var batches int64
	for _, p := range samples {
		batches += p.Batches
		if p.Batches > 0 && (p.Latency.P50 < 20*time.Millisecond || p.Latency.P99 < p.Latency.P50 || p.Latency.Max < p.Latency.P99) {
			t.Fatalf("interval latency %+v", p)
		}
	}
	if batches != res.Requests || samples[len(samples)-1].Rows != res.Rows {
		t.Fatalf("progress counted %d batches, the load %d", batches, res.Requests)
	}
}

// TestLoadDuration stops a load by time and checks that the result counts
// exactly what the target acknowledged.
func TestLoadDuration(t *testing.T) {
	var lines atomic.Int64
	srv := httptest.NewServer(slowTarget(50*time.Millisecond, &lines))
	defer srv.Close()
	w := Workload{Scale: 10} // 86,400 rows: 864 batches of 50 ms, over 20 s on 2 workers
	w.EnsureDefaults()
	const d = 300 * time.Millisecond
	// Should Duration be ignored, the context ends the load as an error.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Load(ctx, LoadConfig{Workload: w, URL: srv.URL, BatchRows: 100, Workers: 2, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.Rows == 0 || res.Rows >= int64(w.Rows()) || res.Rows != lines.Load() || res.Points != res.Rows*NumFields {
		t.Fatalf("%+v; the target took %d lines", res, lines.Load())
	}
	// The batches in flight at the deadline were waited for: over the
	// duration, but far from the whole load (the bound leaves a loaded
	// machine 10 s to finish two 50 ms batches).
	if res.Elapsed < d || res.Elapsed > d+10*time.Second || res.Requests != res.Rows/100 || res.Errors != 0 {
		t.Fatalf("%+v", res)
	}
	// A duration longer than the load changes nothing.
	lines.Store(0)
	w = Workload{Scale: 1}
	w.EnsureDefaults()
	res, err = Load(context.Background(), LoadConfig{Workload: w, URL: srv.URL, BatchRows: 1000, Limit: 3000, Duration: time.Minute})
	if err != nil || res.Stopped || res.Rows != 3000 || lines.Load() != 3000 {
		t.Fatalf("%v %+v", err, res)
	}
}

// TestReadCut: the crash check reads a collection again only when an
// archive pass cut the read (QueryPlanKilled over HTTP 503).
func TestReadCut(t *testing.T) {
	cut := `{"error":{"code":175,"codeName":"QueryPlanKilled","message":"an archive pass moved data of \"crash_archive\" during the read; retry it"}}`
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&statusError{Status: 503, Body: cut}, true},
		{fmt.Errorf("find: %w", &statusError{Status: 503, Body: cut}), true},
		{&statusError{Status: 500, Body: cut}, false},
		{&statusError{Status: 503, Body: `{"error":{"code":292,"codeName":"QueryExceededMemoryLimitNoDiskUseAllowed"}}`}, false},
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		if got := readCut(tc.err); got != tc.want {
			t.Errorf("readCut(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestLoadPregenerated checks that a pregenerated load sends the bodies a
// load generating as it goes sends (lines, gzipped or remote write),
// counts what it sent the same way, and that one whose bodies would pass
// the bound sends nothing.
func TestLoadPregenerated(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{} // mode: the bodies received, as sent
	var mode atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[mode.Load().(string)] = append(got[mode.Load().(string)], string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	w := Workload{Scale: 5}
	w.EnsureDefaults()
	w.End = w.Start.Add(time.Hour)
	rows := int64(5 * 360)
	for _, tc := range []struct {
		name string
		cfg  LoadConfig
	}{
		{"lines", LoadConfig{}},
		{"gzip", LoadConfig{Gzip: true}},
		{"remote", LoadConfig{NewEncode: RemoteWriteEncoder}},
	} {
		var results []LoadResult
		for _, pre := range []int64{0, 1 << 30} {
			cfg := tc.cfg
			cfg.Workload, cfg.URL, cfg.BatchRows, cfg.Workers, cfg.Pregenerate = w, srv.URL, 70, 3, pre
			mode.Store(fmt.Sprint(tc.name, pre))
			res, err := Load(context.Background(), cfg)
			if err != nil {
				t.Fatal(tc.name, pre, err)
			}
			if res.Rows != rows || res.Requests != (rows+69)/70 || res.Errors != 0 {
				t.Fatalf("%s, pregenerate %d: %+v", tc.name, pre, res)
			}
			results = append(results, res)
		}
		if results[0].Bytes != results[1].Bytes {
			t.Fatalf("%s: %d line bytes sent as generated, %d pregenerated", tc.name, results[0].Bytes, results[1].Bytes)
		}
		a, b := got[tc.name+"0"], got[fmt.Sprint(tc.name, 1<<30)]
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			t.Fatalf("%s: the pregenerated bodies differ from those generated as the load went", tc.name)
		}
	}

	// Over the bound: an error, nothing sent.
	mode.Store("over")
	_, err := Load(context.Background(), LoadConfig{Workload: w, URL: srv.URL, BatchRows: 70, Pregenerate: 10 << 10})
	if err == nil || !strings.Contains(err.Error(), "more than 10240 bytes") {
		t.Fatalf("over the bound: %v", err)
	}
	if n := len(got["over"]); n != 0 {
		t.Fatalf("over the bound: %d bodies sent", n)
	}

	// With a duration: what is acknowledged is counted.
	mode.Store("duration")
	res, err := Load(context.Background(), LoadConfig{Workload: w, URL: srv.URL, BatchRows: 70, Pregenerate: 1 << 30, Duration: time.Minute})
	if err != nil || res.Rows != rows || res.Stopped {
		t.Fatalf("with a duration: %+v, %v", res, err)
	}
}
