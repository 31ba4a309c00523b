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
	// Limit stops after this many rows; 0 loads the whole workload.
	Limit int
	// Duration, if positive, stops the load this long after it began: no
	// batch is sent after that, the batches in flight are waited for, and
	// the result counts the rows acknowledged. LoadResult.Stopped tells
	// whether it cut the load short.
	Duration time.Duration
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
}

// Load generates the workload and posts it to cfg.URL. Batches are
// generated while earlier ones are in flight; at most 2 x Workers are held
// in memory.
func Load(ctx context.Context, cfg LoadConfig) (LoadResult, error) {
	var res LoadResult
	src := cfg.Source
	if src == nil {
		w := cfg.Workload
		w.EnsureDefaults()
		if err := w.Validate(); err != nil {
			return res, err
		}
		src = w
	}
	perRow := int64(src.FieldsPerRow())
	if cfg.URL == "" {
		return res, errors.New("bench: LoadConfig.URL is required")
	}
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
	total := int64(src.Rows())
	if cfg.Limit > 0 && int64(cfg.Limit) < total {
		total = int64(cfg.Limit)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	batches := make(chan batch, cfg.Workers)
	free := make(chan []byte, 2*cfg.Workers+1)
	// timeUp is closed when cfg.Duration has passed.
	timeUp := make(chan struct{})
	var stopped atomic.Bool
	start := time.Now()
	if cfg.Duration > 0 {
		t := time.AfterFunc(cfg.Duration, func() {
			stopped.Store(true)
			close(timeUp)
		})
		defer t.Stop()
	}
	var genErr error
	var genDone atomic.Bool // every batch was handed to the workers
	var dropped atomic.Int64
	go func() {
		defer close(batches)
		next := src.NewLineWriter()
		var sent int64
		for sent < total {
			var buf []byte
			select {
			case buf = <-free:
			default:
			}
			buf = buf[:0]
			n := 0
			for n < cfg.BatchRows && sent < total {
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
			select {
			case batches <- batch{buf, n}:
			case <-timeUp:
				return
			case <-ctx.Done():
				genErr = ctx.Err()
				return
			}
		}
		genDone.Store(true)
	}()

	var (
		rows, retries, errs, reqs, sentBytes atomic.Int64
		mu                                   sync.Mutex
		lats                                 []time.Duration
		firstErr                             string
		window                               = newLatencyWindow()
	)
	progressDone := make(chan struct{})
	progressExited := make(chan struct{})
	if cfg.Progress != nil {
		go func() {
			defer close(progressExited)
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-progressDone:
					return
				case <-t.C:
					r := rows.Load()
					n, lat := window.take()
					cfg.Progress(Progress{Rows: r, Points: r * perRow, TotalRows: total, Elapsed: time.Since(start),
						Errors: errs.Load(), Retrys: retries.Load(), Batches: n, Latency: lat})
				}
			}
		}()
	} else {
		close(progressExited)
	}
	var wg sync.WaitGroup
	for i := 0; i < cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var zbuf bytes.Buffer
			zw := gzip.NewWriter(&zbuf)
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lats = append(lats, mine...)
				mu.Unlock()
			}()
			for b := range batches {
				if stopped.Load() {
					// Time is up: drop what was generated but not sent.
					dropped.Add(1)
					continue
				}
				body := b.body
				if cfg.Gzip {
					zbuf.Reset()
					zw.Reset(&zbuf)
					zw.Write(b.body)
					zw.Close()
					body = zbuf.Bytes()
				}
				t0 := time.Now()
				nRetries, err := post(ctx, &cfg, body)
				retries.Add(int64(nRetries))
				if err != nil {
					errs.Add(1)
					mu.Lock()
					if firstErr == "" {
						firstErr = err.Error()
					}
					mu.Unlock()
				} else {
					lat := time.Since(t0)
					mine = append(mine, lat)
					window.add(lat)
					rows.Add(int64(b.rows))
					reqs.Add(1)
					sentBytes.Add(int64(len(b.body)))
				}
				select {
				case free <- b.body:
				default:
				}
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	close(progressDone)
	<-progressExited
	res.Rows = rows.Load()
	res.Points = res.Rows * perRow
	res.Bytes = sentBytes.Load()
	res.Requests = reqs.Load()
	res.Retries = retries.Load()
	res.Errors = errs.Load()
	res.FirstError = firstErr
	res.Latency = summarize(lats)
	res.Stopped = stopped.Load() && (!genDone.Load() || dropped.Load() > 0)
	if cfg.Progress != nil {
		n, lat := window.take()
		cfg.Progress(Progress{Rows: res.Rows, Points: res.Points, TotalRows: total, Elapsed: res.Elapsed, Errors: res.Errors, Retrys: res.Retries,
			Batches: n, Latency: lat})
	}
	if genErr != nil {
		return res, genErr
	}
	return res, ctx.Err()
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
