package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// LoadConfig describes a load of a workload, as line protocol, into any
// HTTP endpoint that takes it (Hourglass's /write, InfluxDB,
// VictoriaMetrics, QuestDB).
type LoadConfig struct {
	// Source is the data to load; nil means Workload.
	Source   LineSource
	Workload Workload
	// URL is the write URL with its query, e.g.
	// http://127.0.0.1:7700/write?db=cpu.
	URL string
	// Workers posting batches at once (default 2) of BatchRows lines
	// (default 5000), as the peers harness loads.
	Workers, BatchRows int
	// Gzip compresses the bodies.
	Gzip bool
	// Encode, if set, turns each batch of lines into the body sent (a
	// remote write request: RemoteWriteEncoder), in each worker; its
	// result is valid until its next call. Not with Gzip.
	Encode func(lines []byte) ([]byte, error)
	// NewEncode makes one Encode a worker (Encode is then ignored).
	NewEncode func() func(lines []byte) ([]byte, error)
	// Headers are added to every request.
	Headers map[string]string
	// Limit stops after this many rows; 0 loads the whole workload.
	Limit int
	// Duration, if positive, stops the load this long after it began: no
	// batch is sent after that, the batches in flight are waited for, and
	// the result counts the rows acknowledged. LoadResult.Stopped tells
	// whether it cut the load short.
	Duration time.Duration
	// Order is the order of each series' rows inside a batch: the lines
	// of each batch are reordered (OrderDesc, OrderShuffle) before it is
	// sent. The zero value sends them as the source writes them.
	Order Order
	// Token is sent as "Authorization: Token <token>" when set.
	Token string
	// ContentType of the bodies; default "text/plain; charset=utf-8" (line
	// protocol). Use "application/x-ndjson" for JSON documents.
	ContentType string
	// Bearer sends Token as "Authorization: Bearer <token>" (the Hourglass
	// API) rather than InfluxDB's "Token <token>".
	Bearer bool
	// Retries is how often a batch is retried after a transport error, a
	// 5xx or a 429 (default 5); Retry-After is honoured up to 5 s.
	Retries int
	// Client sends the requests; nil means a client with keep-alive and a
	// 2-minute timeout.
	Client *http.Client
	// Progress, if set, is called about once a second and at the end,
	// never twice at once.
	Progress func(Progress)
	// Pregenerate, if positive, makes every body of the load (its lines
	// reordered, encoded or gzipped) before the first is sent, holding at
	// most this many bytes of them: a load whose bodies would need more
	// fails before sending anything. The load then measures the target
	// alone, as TSBS loads files made beforehand: the generator does not
	// take CPU from a target on the same machine while it loads. Elapsed
	// starts after the bodies are made.
	Pregenerate int64
	// Ready, if set, is called once the load is ready to send (its bodies
	// made, with Pregenerate) and before the first is sent: the load
	// starts when it returns nil and fails with its error otherwise.
	// Elapsed starts after it. Loads of several targets started together
	// wait there for one another.
	Ready func(context.Context) error
}

// Progress is the state of a running load.
type Progress struct {
	Rows, Points   int64
	TotalRows      int64
	Elapsed        time.Duration
	Errors, Retrys int64
	// Batches were acknowledged since the previous call, with these
	// latencies: P50 and P99 of a uniform sample of at most
	// IntervalSample of them, Max of all.
	Batches int64
	Latency Latency
}

// IntervalSample is how many batch latencies of one progress interval are
// kept to estimate its percentiles.
const IntervalSample = 1024

// Latency summarizes request latencies.
type Latency struct {
	P50, P99, Max time.Duration
}

// LoadResult reports a load.
type LoadResult struct {
	Rows, Points int64
	Bytes        int64 // line protocol bytes sent, before compression
	Requests     int64 // batches acknowledged
	Retries      int64
	Errors       int64 // batches refused for good (4xx other than 429, or out of retries)
	FirstError   string
	Start        time.Time     // when the first request could go
	Elapsed      time.Duration // first request to last reply
	Latency      Latency       // per acknowledged batch, retries included
	// Stopped is set when LoadConfig.Duration ended the load before the
	// workload (or Limit) was sent in full.
	Stopped bool
}

// PointsPerSecond is the load's rate.
func (r LoadResult) PointsPerSecond() float64 { return float64(r.Points) / r.Elapsed.Seconds() }

// MBPerSecond is the line protocol sent per second, in MB (10^6 bytes).
func (r LoadResult) MBPerSecond() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

type batch struct {
	body []byte
	rows int
	// made is set when body is what is sent (pregenerated), made from
	// lineBytes of lines; otherwise body is the lines.
	made      bool
	lineBytes int
}

// Load generates the workload and posts it to cfg.URL. Batches are
// generated while earlier ones are in flight; at most 2 x Workers are held
// in memory.
func Load(ctx context.Context, cfg LoadConfig) (LoadResult, error) {
	src, err := cfg.source()
	if err != nil {
		return LoadResult{}, err
	}
	if cfg.URL == "" {
		return LoadResult{}, errors.New("bench: LoadConfig.URL is required")
	}
	if cfg.Gzip && (cfg.Encode != nil || cfg.NewEncode != nil) {
		return LoadResult{}, errors.New("bench: Gzip and an encoder do not go together: a remote write body is snappy-compressed")
	}
	cfg.ensureDefaults()
	l := &loader{cfg: &cfg, perRow: int64(src.FieldsPerRow()), total: int64(src.Rows()), window: newLatencyWindow(),
		timeUp: make(chan struct{})}
	if cfg.Limit > 0 && int64(cfg.Limit) < l.total {
		l.total = int64(cfg.Limit)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var made []batch
	if cfg.Pregenerate > 0 {
		if made, err = l.pregenerate(ctx, src); err != nil {
			return LoadResult{}, err
		}
	}
	if cfg.Ready != nil {
		if err := cfg.Ready(ctx); err != nil {
			return LoadResult{}, err
		}
	}
	batches := make(chan batch, cfg.Workers)
	free := make(chan []byte, 2*cfg.Workers+1)
	l.start = time.Now()
	if cfg.Duration > 0 {
		t := time.AfterFunc(cfg.Duration, func() {
			l.stopped.Store(true)
			close(l.timeUp)
		})
		defer t.Stop()
	}
	if made != nil {
		go l.hand(ctx, made, batches)
	} else {
		go l.generate(ctx, src, batches, free)
	}

	progressDone := make(chan struct{})
	progressExited := make(chan struct{})
	if cfg.Progress != nil {
		go l.reportProgress(progressDone, progressExited)
	} else {
		close(progressExited)
	}
	var wg sync.WaitGroup
	for i := 0; i < cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.work(ctx, batches, free)
		}()
	}
	wg.Wait()
	elapsed := time.Since(l.start)
	close(progressDone)
	<-progressExited
	res := l.result(elapsed)
	if cfg.Progress != nil {
		n, lat := l.window.take()
		cfg.Progress(Progress{Rows: res.Rows, Points: res.Points, TotalRows: l.total, Elapsed: res.Elapsed, Errors: res.Errors, Retrys: res.Retries,
			Batches: n, Latency: lat})
	}
	if l.genErr != nil {
		return res, l.genErr
	}
	return res, ctx.Err()
}

// source is the LineSource of a load: Source, else the Workload with its
// defaults, validated.
func (cfg *LoadConfig) source() (LineSource, error) {
	if cfg.Source != nil {
		return cfg.Source, nil
	}
	w := cfg.Workload
	w.EnsureDefaults()
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return w, nil
}

// ensureDefaults fills in the zero fields of a load's configuration.
func (cfg *LoadConfig) ensureDefaults() {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = 5000
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 5
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 2 * time.Minute,
			Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Workers, DisableCompression: true}}
	}
}

// loader is the state of one Load, shared by its generator, its workers
// and its progress reports.
type loader struct {
	cfg           *LoadConfig
	perRow, total int64
	start         time.Time
	// timeUp is closed, and stopped set, when cfg.Duration has passed.
	timeUp  chan struct{}
	stopped atomic.Bool

	// Set by the generator before it closes the batches channel.
	genErr  error
	genDone atomic.Bool // every batch was handed to the workers
	dropped atomic.Int64

	rows, retries, errs, reqs, sentBytes atomic.Int64
	window                               *latencyWindow

	mu       sync.Mutex // guards lats and firstErr
	lats     []time.Duration
	firstErr string
}

// generate writes the load's rows into batches of cfg.BatchRows, reusing
// the bodies the workers give back on free, until the rows are all sent,
// the time is up or ctx is done; it closes batches.
func (l *loader) generate(ctx context.Context, src LineSource, batches chan<- batch, free <-chan []byte) {
	defer close(batches)
	next := src.NewLineWriter()
	reorder := newLineReorderer(l.cfg.Order)
	var sent int64
	for sent < l.total {
		var buf []byte
		select {
		case buf = <-free:
		default:
		}
		buf = buf[:0]
		n := 0
		for n < l.cfg.BatchRows && sent < l.total {
			var ok bool
			if buf, ok = next(buf); !ok {
				break
			}
			n++
			sent++
		}
		if n == 0 {
			break
		}
		buf = reorder.apply(buf)
		if !l.give(ctx, batches, batch{body: buf, rows: n}) {
			return
		}
	}
	l.genDone.Store(true)
}

// give hands b to the workers; it reports false, b not handed, when the
// time is up or ctx is done (setting genErr then).
func (l *loader) give(ctx context.Context, batches chan<- batch, b batch) bool {
	select {
	case batches <- b:
		return true
	case <-l.timeUp:
		return false
	case <-ctx.Done():
		l.genErr = ctx.Err()
		return false
	}
}

// pregenerate makes the bodies of the whole load, as generate and the
// workers would, and returns them; it fails once they would hold more
// than cfg.Pregenerate bytes.
func (l *loader) pregenerate(ctx context.Context, src LineSource) ([]batch, error) {
	gctx, cancel := context.WithCancel(ctx)
	gen := make(chan batch, 1)
	free := make(chan []byte, 1)
	go l.generate(gctx, src, gen, free)
	defer func() {
		cancel()
		for range gen { // let the generator end
		}
	}()
	b := l.newBodyMaker()
	var made []batch
	var held int64
	for g := range gen {
		body, err := b.body(g.body)
		if err != nil {
			return nil, fmt.Errorf("bench: making the load's bodies: %w", err)
		}
		if held += int64(len(body)); held > l.cfg.Pregenerate {
			return nil, fmt.Errorf("bench: the load's bodies take more than %d bytes once made; lower the load (--hours, --limit) or raise the bound", l.cfg.Pregenerate)
		}
		made = append(made, batch{body: slices.Clone(body), rows: g.rows, made: true, lineBytes: len(g.body)})
		select {
		case free <- g.body:
		default:
		}
	}
	if err := l.genErr; err != nil {
		l.genErr = nil
		return nil, err
	}
	return made, ctx.Err()
}

// hand gives the workers the bodies pregenerate made, until they are
// all sent, the time is up or ctx is done; it closes batches.
func (l *loader) hand(ctx context.Context, made []batch, batches chan<- batch) {
	defer close(batches)
	for _, b := range made {
		if !l.give(ctx, batches, b) {
			return
		}
	}
	l.genDone.Store(true)
}

// bodyMaker turns a batch's lines into the body sent: encoded (remote
// write) or gzipped as the load asks, or the lines as they are.
type bodyMaker struct {
	encode func([]byte) ([]byte, error)
	gzip   bool
	zbuf   bytes.Buffer
	zw     *gzip.Writer
}

func (l *loader) newBodyMaker() *bodyMaker {
	m := &bodyMaker{encode: l.cfg.Encode, gzip: l.cfg.Gzip}
	if l.cfg.NewEncode != nil {
		m.encode = l.cfg.NewEncode()
	}
	m.zw = gzip.NewWriter(&m.zbuf)
	return m
}

// body returns the body of lines, valid until the next call.
func (m *bodyMaker) body(lines []byte) ([]byte, error) {
	if m.encode != nil {
		return m.encode(lines)
	}
	if m.gzip {
		m.zbuf.Reset()
		m.zw.Reset(&m.zbuf)
		m.zw.Write(lines)
		m.zw.Close()
		return m.zbuf.Bytes(), nil
	}
	return lines, nil
}

// reportProgress calls cfg.Progress every second until done is closed,
// then closes exited.
func (l *loader) reportProgress(done <-chan struct{}, exited chan<- struct{}) {
	defer close(exited)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			r := l.rows.Load()
			n, lat := l.window.take()
			l.cfg.Progress(Progress{Rows: r, Points: r * l.perRow, TotalRows: l.total, Elapsed: time.Since(l.start),
				Errors: l.errs.Load(), Retrys: l.retries.Load(), Batches: n, Latency: lat})
		}
	}
}

// work posts batches until the channel is closed, counting what was
// acknowledged and giving each body back on free; once the time is up it
// drops the batches left.
func (l *loader) work(ctx context.Context, batches <-chan batch, free chan<- []byte) {
	var mine []time.Duration
	defer func() {
		l.mu.Lock()
		l.lats = append(l.lats, mine...)
		l.mu.Unlock()
	}()
	maker := l.newBodyMaker()
	for b := range batches {
		if l.stopped.Load() {
			// Time is up: drop what was generated but not sent.
			l.dropped.Add(1)
			continue
		}
		body, lineBytes := b.body, b.lineBytes
		if !b.made {
			lineBytes = len(b.body)
			var err error
			if body, err = maker.body(b.body); err != nil {
				l.errs.Add(1)
				l.mu.Lock()
				if l.firstErr == "" {
					l.firstErr = err.Error()
				}
				l.mu.Unlock()
				continue
			}
		}
		t0 := time.Now()
		nRetries, err := post(ctx, l.cfg, body)
		l.retries.Add(int64(nRetries))
		if err != nil {
			l.errs.Add(1)
			l.mu.Lock()
			if l.firstErr == "" {
				l.firstErr = err.Error()
			}
			l.mu.Unlock()
		} else {
			lat := time.Since(t0)
			mine = append(mine, lat)
			l.window.add(lat)
			l.rows.Add(int64(b.rows))
			l.reqs.Add(1)
			l.sentBytes.Add(int64(lineBytes))
		}
		if !b.made {
			select {
			case free <- b.body:
			default:
			}
		}
	}
}

// result is the load's result once its workers are done.
func (l *loader) result(elapsed time.Duration) LoadResult {
	res := LoadResult{Start: l.start, Elapsed: elapsed, Rows: l.rows.Load(), Bytes: l.sentBytes.Load(), Requests: l.reqs.Load(),
		Retries: l.retries.Load(), Errors: l.errs.Load(), FirstError: l.firstErr, Latency: summarize(l.lats)}
	res.Points = res.Rows * l.perRow
	res.Stopped = l.stopped.Load() && (!l.genDone.Load() || l.dropped.Load() > 0)
	return res
}

// post sends one batch, retrying transport errors, 5xx and 429.
func post(ctx context.Context, cfg *LoadConfig, body []byte) (retries int, err error) {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
		if err != nil {
			return retries, err
		}
		ct := cfg.ContentType
		if ct == "" {
			ct = "text/plain; charset=utf-8"
		}
		req.Header.Set("Content-Type", ct)
		if cfg.Gzip {
			req.Header.Set("Content-Encoding", "gzip")
		}
		for k, v := range cfg.Headers {
			req.Header.Set(k, v)
		}
		if cfg.Token != "" && cfg.Bearer {
			req.Header.Set("Authorization", "Bearer "+cfg.Token)
		} else if cfg.Token != "" {
			req.Header.Set("Authorization", "Token "+cfg.Token)
		}
		resp, err := cfg.Client.Do(req)
		var wait time.Duration
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			switch {
			case resp.StatusCode < 300:
				return retries, nil
			case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
				err = fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
				if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
					wait = min(time.Duration(s)*time.Second, 5*time.Second)
				}
			default:
				return retries, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
			}
		}
		if ctx.Err() != nil {
			return retries, ctx.Err()
		}
		if attempt >= cfg.Retries {
			return retries, fmt.Errorf("after %d retries: %w", retries, err)
		}
		retries++
		if wait == 0 {
			wait = time.Duration(100<<attempt) * time.Millisecond
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return retries, ctx.Err()
		}
	}
}

// latencyWindow collects the batch latencies of one progress interval in
// bounded memory: their count, their maximum and a uniform sample of at
// most IntervalSample of them (reservoir sampling).
type latencyWindow struct {
	mu     sync.Mutex
	n      int64
	max    time.Duration
	sample []time.Duration
	rng    *rand.Rand
}

func newLatencyWindow() *latencyWindow {
	return &latencyWindow{rng: rand.New(rand.NewPCG(1, 2)), sample: make([]time.Duration, 0, IntervalSample)}
}

func (w *latencyWindow) add(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	w.max = max(w.max, d)
	if len(w.sample) < IntervalSample {
		w.sample = append(w.sample, d)
	} else if i := w.rng.Int64N(w.n); i < IntervalSample {
		w.sample[i] = d
	}
}

// take returns the interval's batch count and latencies, and starts a new
// interval.
func (w *latencyWindow) take() (int64, Latency) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, lat := w.n, summarize(w.sample)
	lat.Max = w.max
	w.n, w.max, w.sample = 0, 0, w.sample[:0]
	return n, lat
}

// summarize returns the median, 99th percentile and maximum of lats.
func summarize(lats []time.Duration) Latency {
	if len(lats) == 0 {
		return Latency{}
	}
	s := slices.Clone(lats)
	slices.Sort(s)
	at := func(q float64) time.Duration {
		i := int(q * float64(len(s)-1))
		return s[i]
	}
	return Latency{P50: at(0.50), P99: at(0.99), Max: s[len(s)-1]}
}
