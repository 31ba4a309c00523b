package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"
)

// SoakConfig shapes a soak: a mixed load on an hourglass binary for
// Duration while its resident size, open files and goroutines are
// sampled.
type SoakConfig struct {
	// Binary is the hourglass executable to run as "serve"; Dir its data
	// directory.
	Binary, Dir string
	// Duration of the load (default 30 minutes).
	Duration time.Duration
	// Every is the sampling interval (default 5 s).
	Every time.Duration
	// Tolerance is how much a figure may rise after the warm-up, as a
	// fraction of its peak over the second quarter of the run (default
	// 0.2), on top of a fixed slack per figure (SoakSlack).
	Tolerance float64
	// Seed chooses the load's operations.
	Seed uint64
	// Progress, if set, is called with each sample.
	Progress func(SoakSample)
}

func (c *SoakConfig) ensureDefaults() {
	if c.Duration == 0 {
		c.Duration = 30 * time.Minute
	}
	if c.Every == 0 {
		c.Every = 5 * time.Second
	}
	if c.Tolerance == 0 {
		c.Tolerance = 0.2
	}
	if c.Progress == nil {
		c.Progress = func(SoakSample) {}
	}
}

// SoakSlack is the rise each figure may take after the warm-up whatever
// its level: a few MiB of resident size for the runtime's and Pebble's
// rounding, a few descriptors and goroutines for connections and requests
// in progress at the moment of a sample.
var SoakSlack = map[string]float64{"rssMiB": 16, "fds": 8, "goroutines": 16}

// SoakSample is one sample of the server.
type SoakSample struct {
	Elapsed    time.Duration `json:"elapsedNanos"`
	RSSMiB     float64       `json:"rssMiB"`
	FDs        int           `json:"fds"`
	Goroutines int           `json:"goroutines"`
	Requests   int64         `json:"requests"` // answered since the start
	Errors     int64         `json:"errors"`
}

// SoakFigure is whether one figure stayed flat: its first sample, its
// peak over the second quarter of the run (after the warm-up), its peak
// over the last half and its last sample. Flat when LastHalfMax is at most
// Limit.
type SoakFigure struct {
	Name        string  `json:"name"`
	Start       float64 `json:"start"`
	WarmMax     float64 `json:"secondQuarterMax"`
	LastHalfMax float64 `json:"lastHalfMax"`
	End         float64 `json:"end"`
	Limit       float64 `json:"limit"`
	Flat        bool    `json:"flat"`
}

// SoakResult is a soak's report.
type SoakResult struct {
	Elapsed  time.Duration `json:"elapsedNanos"`
	Requests int64         `json:"requests"`
	Rows     int64         `json:"rowsWritten"`
	Errors   int64         `json:"errors"`
	// FirstError is the first reply that was neither 2xx nor 429, or the
	// first transport error.
	FirstError string       `json:"firstError,omitempty"`
	Figures    []SoakFigure `json:"figures"`
	Samples    []SoakSample `json:"samples"`
	Flat       bool         `json:"flat"`
}

// Collections of the soak.
const (
	soakTS    = "soak_ts"
	soakLP    = "soak_lp"
	soakPlain = "soak_plain"
	// soakTTL is the TTL of every soak collection: the data written stays
	// bounded, so that a flat server is one that does not leak.
	soakTTL = 120
)

// RunSoak starts the server, runs the load for cfg.Duration with a sample
// every cfg.Every, stops the server with SIGTERM and reports. An error is
// returned when the server cannot be started, dies, or does not stop
// cleanly; figures that are not flat are reported in the result (Flat
// false), not as an error.
func RunSoak(ctx context.Context, cfg SoakConfig) (SoakResult, error) {
	cfg.ensureDefaults()
	var res SoakResult
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	srv, err := StartServer(startCtx, cfg.Binary, cfg.Dir, "--ttl-monitor-sleep", "5s", "--checkpoint-interval", "30s")
	cancel()
	if err != nil {
		return res, err
	}
	defer srv.Kill()
	c := newAPIClient(srv.URL)
	defer c.close()
	l := &soakLoad{c: c}
	if err := l.setup(ctx); err != nil {
		return res, err
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	clients := []func(context.Context, *rand.Rand){l.writeJSON, l.writeJSON, l.writeLP, l.writePlain, l.query, l.ddl}
	for i, run := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(loadCtx, rand.New(rand.NewPCG(cfg.Seed, uint64(i))))
		}()
	}
	start := time.Now()
	sample := func() error {
		s := SoakSample{Elapsed: time.Since(start), Requests: l.requests.Load(), Errors: l.errors.Load()}
		rss, _, err := ProcessMemory(srv.PID)
		if err != nil {
			return err
		}
		s.RSSMiB = float64(rss) / (1 << 20)
		p, err := procfs.NewProc(srv.PID)
		if err != nil {
			return err
		}
		if s.FDs, err = p.FileDescriptorsLen(); err != nil {
			return err
		}
		if s.Goroutines, err = goroutines(ctx, c); err != nil {
			return err
		}
		res.Samples = append(res.Samples, s)
		cfg.Progress(s)
		return nil
	}
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
	deadline := time.After(cfg.Duration)
	err = sample()
loop:
	for err == nil {
		select {
		case <-tick.C:
			err = sample()
		case <-deadline:
			err = sample()
			break loop
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	stopLoad()
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.Requests, res.Rows, res.Errors = l.requests.Load(), l.rows.Load(), l.errors.Load()
	if e := l.firstErr.Load(); e != nil {
		res.FirstError = *e
	}
	if err != nil {
		return res, fmt.Errorf("sampling the server: %w\n%s", err, srv.Log(4<<10))
	}
	if err := srv.Stop(time.Minute); err != nil {
		return res, fmt.Errorf("stopping the server: %w\n%s", err, srv.Log(4<<10))
	}
	res.Figures, res.Flat = soakFigures(res.Samples, cfg.Tolerance)
	return res, nil
}

// soakFigures judges each figure of samples: flat when its peak over the
// last half is at most its peak over the second quarter times
// (1+tolerance), plus its slack.
func soakFigures(samples []SoakSample, tolerance float64) ([]SoakFigure, bool) {
	n := len(samples)
	allFlat := true
	var out []SoakFigure
	for _, f := range []struct {
		name string
		get  func(SoakSample) float64
	}{
		{"rssMiB", func(s SoakSample) float64 { return s.RSSMiB }},
		{"fds", func(s SoakSample) float64 { return float64(s.FDs) }},
		{"goroutines", func(s SoakSample) float64 { return float64(s.Goroutines) }},
	} {
		peak := func(from, to int) float64 {
			m := 0.0
			for _, s := range samples[from:to] {
				m = max(m, f.get(s))
			}
			return m
		}
		fig := SoakFigure{Name: f.name}
		if n >= 4 {
			fig.Start, fig.End = f.get(samples[0]), f.get(samples[n-1])
			fig.WarmMax, fig.LastHalfMax = peak(n/4, n/2), peak(n/2, n)
			fig.Limit = fig.WarmMax*(1+tolerance) + SoakSlack[f.name]
			fig.Flat = fig.LastHalfMax <= fig.Limit
		}
		allFlat = allFlat && fig.Flat
		out = append(out, fig)
	}
	return out, allFlat
}

// goroutines reads go_goroutines from the server's /metrics.
func goroutines(ctx context.Context, c *apiClient) (int, error) {
	st, body, err := c.do(ctx, http.MethodGet, "/metrics", "", nil)
	if err != nil {
		return 0, err
	}
	if st != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: HTTP %d", st)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, errors.New("GET /metrics: no go_goroutines")
}

// soakLoad is the soak's clients and their counts.
type soakLoad struct {
	c                      *apiClient
	requests, rows, errors atomic.Int64
	firstErr               atomic.Pointer[string]
}

func (l *soakLoad) setup(ctx context.Context) error {
	ts := func(timeField, metaField string) map[string]any {
		return map[string]any{"timeseries": map[string]any{"timeField": timeField, "metaField": metaField,
			"bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 60}, "expireAfterSeconds": soakTTL}
	}
	if err := l.c.call(ctx, http.MethodPut, "/v1/collections/"+soakTS, ts("t", "sensor"), nil); err != nil {
		return err
	}
	if err := l.c.call(ctx, http.MethodPut, "/v1/collections/"+soakLP, ts("time", "tags"), nil); err != nil {
		return err
	}
	if err := l.c.call(ctx, http.MethodPut, "/v1/collections/"+soakPlain, map[string]any{}, nil); err != nil {
		return err
	}
	return l.c.call(ctx, http.MethodPost, "/v1/collections/"+soakPlain+"/indexes",
		map[string]any{"key": map[string]any{"at": 1}, "name": "at_ttl", "expireAfterSeconds": soakTTL}, nil)
}

// send sends one request and counts it: rows are counted when it is
// acknowledged, an error when the reply is neither 2xx nor 429 (or there
// is none, unless the load is stopping).
func (l *soakLoad) send(ctx context.Context, method, path, ctype string, body []byte, rows int) {
	st, reply, err := l.c.do(ctx, method, path, ctype, body)
	if ctx.Err() != nil {
		return
	}
	l.requests.Add(1)
	switch {
	case err != nil:
		l.fail(fmt.Sprintf("%s %s: %v", method, path, err))
	case st/100 == 2:
		l.rows.Add(int64(rows))
	case st != http.StatusTooManyRequests:
		l.fail(fmt.Sprintf("%s %s: HTTP %d: %.200s", method, path, st, reply))
	}
}

func (l *soakLoad) fail(msg string) {
	l.errors.Add(1)
	l.firstErr.CompareAndSwap(nil, &msg)
}

// pace sleeps so that a client sends about 10 requests a second.
func pace(ctx context.Context, rng *rand.Rand) bool {
	return sleepCtx(ctx, time.Duration(50+rng.IntN(100))*time.Millisecond)
}

// writeJSON writes batches of 100 rows of 100 sensors at the current time.
func (l *soakLoad) writeJSON(ctx context.Context, rng *rand.Rand) {
	for pace(ctx, rng) {
		var b bytes.Buffer
		now := time.Now().UTC()
		for i := 0; i < 100; i++ {
			fmt.Fprintf(&b, `{"t": {"$date": %q}, "sensor": "s%d", "v": %g, "n": %d}`+"\n",
				now.Add(time.Duration(i)*time.Microsecond).Format(time.RFC3339Nano), rng.IntN(100), rng.Float64()*100, rng.IntN(1000))
		}
		l.send(ctx, http.MethodPost, "/v1/collections/"+soakTS+"/documents", "application/x-ndjson", b.Bytes(), 100)
	}
}

// writeLP writes batches of 100 lines of 100 hosts at the current time.
func (l *soakLoad) writeLP(ctx context.Context, rng *rand.Rand) {
	for pace(ctx, rng) {
		var b bytes.Buffer
		now := time.Now().UnixNano()
		for i := 0; i < 100; i++ {
			fmt.Fprintf(&b, "cpu,host=h%d,region=r%d usage=%g,n=%di %d\n", rng.IntN(100), rng.IntN(4), rng.Float64()*100, rng.IntN(1000), now+int64(i))
		}
		l.send(ctx, http.MethodPost, "/write?db="+soakLP, "text/plain; charset=utf-8", b.Bytes(), 100)
	}
}

// writePlain inserts sessions, each under the TTL index, and updates one.
func (l *soakLoad) writePlain(ctx context.Context, rng *rand.Rand) {
	for pace(ctx, rng) {
		var b bytes.Buffer
		b.WriteByte('[')
		now := time.Now().UTC().Format(time.RFC3339Nano)
		for i := 0; i < 50; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"user": "u%d", "at": {"$date": %q}, "v": %d}`, rng.IntN(1000), now, rng.IntN(1000))
		}
		b.WriteByte(']')
		l.send(ctx, http.MethodPost, "/v1/collections/"+soakPlain+"/documents", "application/json", b.Bytes(), 50)
		l.send(ctx, http.MethodPost, "/v1/collections/"+soakPlain+"/update", "application/json",
			fmt.Appendf(nil, `{"filter": {"user": "u%d"}, "update": {"$inc": {"visits": 1}}}`, rng.IntN(1000)), 0)
	}
}

// query runs finds (sorted with a limit, by series, on the plain
// collection) and aggregates over the last two minutes.
func (l *soakLoad) query(ctx context.Context, rng *rand.Rand) {
	for pace(ctx, rng) {
		since := fmt.Sprintf(`{"$date": %q}`, time.Now().Add(-2*time.Minute).UTC().Format(time.RFC3339Nano))
		var path, body string
		switch rng.IntN(5) {
		case 0:
			path, body = soakTS+"/find", `{"sort": {"t": -1}, "limit": 100}`
		case 1:
			path, body = soakTS+"/find", fmt.Sprintf(`{"filter": {"sensor": "s%d", "t": {"$gte": %s}}}`, rng.IntN(100), since)
		case 2:
			path, body = soakTS+"/aggregate", fmt.Sprintf(`{"filter": {"t": {"$gte": %s}}, "window": "10s", "fields": ["v"], "funcs": ["avg", "max"]}`, since)
		case 3:
			path, body = soakLP+"/aggregate", fmt.Sprintf(`{"filter": {"time": {"$gte": %s}}, "window": "30s", "groupBy": "tags.region"}`, since)
		case 4:
			path, body = soakPlain+"/find", fmt.Sprintf(`{"filter": {"user": "u%d"}, "limit": 10}`, rng.IntN(1000))
		}
		l.send(ctx, http.MethodPost, "/v1/collections/"+path, "application/json", []byte(body), 0)
	}
}

// ddl runs a TTL pass, a collMod, an index built and dropped, a scratch
// collection created, written and dropped, in turn, one every second or
// so.
func (l *soakLoad) ddl(ctx context.Context, rng *rand.Rand) {
	ttl := soakTTL
	for n := 0; sleepCtx(ctx, time.Duration(500+rng.IntN(1000))*time.Millisecond); n++ {
		switch n % 5 {
		case 0:
			l.send(ctx, http.MethodPost, "/v1/admin/ttl/run", "", nil, 0)
		case 1:
			ttl = 2*soakTTL + soakTTL/4 - ttl // 120 <-> 150
			l.send(ctx, http.MethodPatch, "/v1/collections/"+soakTS, "application/json", fmt.Appendf(nil, `{"expireAfterSeconds": %d}`, ttl), 0)
		case 2:
			l.send(ctx, http.MethodPost, "/v1/collections/"+soakPlain+"/indexes", "application/json", []byte(`{"key": {"v": 1}, "name": "v_1"}`), 0)
			l.send(ctx, http.MethodDelete, "/v1/collections/"+soakPlain+"/indexes/v_1", "", nil, 0)
		case 3:
			name := "/v1/collections/soak_scratch_" + strconv.Itoa(n)
			l.send(ctx, http.MethodPut, name, "application/json", []byte(`{"timeseries": {"timeField": "t", "metaField": "m"}}`), 0)
			l.send(ctx, http.MethodPost, name+"/documents", "application/x-ndjson",
				fmt.Appendf(nil, `{"t": {"$date": %q}, "m": "a", "v": 1}`+"\n", time.Now().UTC().Format(time.RFC3339Nano)), 1)
			l.send(ctx, http.MethodDelete, name, "", nil, 0)
		case 4:
			l.send(ctx, http.MethodPost, "/v1/collections/"+soakTS+"/compact", "", nil, 0)
		}
	}
}
