package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// QueryLoadResult reports the queries RunQueryLoad sent, per query.
type QueryLoadResult struct {
	Name    string
	Runs    int // answered 200
	Errors  int // any other answer, or no answer
	Latency Latency
	// Bytes is the largest answer read.
	Bytes int64
	// FirstError is the first refusal or failure, as the server said it.
	FirstError string
}

// RunQueryLoad runs clients concurrent query loops against cfg's target
// until ctx is done: each picks one of cfg.Queries at random (seeded),
// sends it, reads the whole answer and starts again. It is the read side
// of a mixed load: `hourglass bench ingest --queries N` runs it while the
// writers load the same collection. An answer other than 200 counts as an
// error with its message kept, and the loop goes on. The results come in
// cfg.Queries' order.
func RunQueryLoad(ctx context.Context, cfg QueryConfig, clients int, seed uint64) []QueryLoadResult {
	if cfg.Collection == "" {
		cfg.Collection = "bench_cpu"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Minute}
	}
	if cfg.Queries == nil {
		cfg.Queries = Queries
	}
	type acc struct {
		lats []time.Duration
		res  QueryLoadResult
		mu   sync.Mutex
	}
	accs := make([]acc, len(cfg.Queries))
	for i := range accs {
		accs[i].res.Name = cfg.Queries[i].Name
	}
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(rng *rand.Rand) {
			defer wg.Done()
			for ctx.Err() == nil {
				i := rng.IntN(len(cfg.Queries))
				took, n, err := cfg.once(ctx, &cfg.Queries[i])
				if ctx.Err() != nil {
					return // cut short by the end of the load: not counted
				}
				a := &accs[i]
				a.mu.Lock()
				if err != nil {
					a.res.Errors++
					if a.res.FirstError == "" {
						a.res.FirstError = err.Error()
					}
				} else {
					a.res.Runs++
					a.lats = append(a.lats, took)
					a.res.Bytes = max(a.res.Bytes, n)
				}
				a.mu.Unlock()
			}
		}(rand.New(rand.NewPCG(seed, uint64(c))))
	}
	wg.Wait()
	out := make([]QueryLoadResult, len(accs))
	for i := range accs {
		out[i] = accs[i].res
		out[i].Latency = summarize(accs[i].lats)
	}
	return out
}

// once sends q and reads its whole answer: its time and size, or the
// refusal.
func (c *QueryConfig) once(ctx context.Context, q *Query) (time.Duration, int64, error) {
	req, err := c.request(ctx, q)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := c.Client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return 0, 0, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, n, fmt.Errorf("reading the answer: %w", err)
	}
	return time.Since(start), n, nil
}

// QueryLoadTable formats results as a text table, one query a line.
func QueryLoadTable(results []QueryLoadResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%16s %7s %7s %10s %10s %10s %12s\n", "query", "runs", "errors", "p50 ms", "p99 ms", "max ms", "max bytes")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e6) }
	for _, r := range results {
		fmt.Fprintf(&b, "%16s %7d %7d %10s %10s %10s %12d\n", r.Name, r.Runs, r.Errors, ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.Max), r.Bytes)
	}
	for _, r := range results {
		if r.FirstError != "" {
			fmt.Fprintf(&b, "%s: first error: %.300s\n", r.Name, r.FirstError)
		}
	}
	return b.String()
}
