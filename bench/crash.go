package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"
)

// CrashConfig shapes a crash loop: Cycles kill -9 cycles of the hourglass
// binary, each a restart on the same data directory, a check of what the
// clients were told against what the server returns, then a mixed load
// (JSON and line-protocol writers, plain-collection inserts, deletes, TTL
// passes, archive passes and DDL) cut by SIGKILL at a random point.
type CrashConfig struct {
	// Binary is the hourglass executable to run as "serve".
	Binary string
	// Dir is the data directory; it must not exist or be empty. It is kept
	// across cycles and left in place at the end.
	Dir string
	// Seed chooses every client's operations and the kill points; the
	// same seed gives the same choices (the timing, and so what a kill
	// cuts, still varies).
	Seed uint64
	// Cycles of kill -9 and restart (default 10).
	Cycles int
	// Duration is the longest a cycle's load runs before its kill, which
	// falls uniformly between a tenth of it and all of it (default 5 s).
	Duration time.Duration
	// ServerFlags are added to "serve"'s command line, after the loop's
	// own: a 2 s checkpoint interval and a 1 s TTL monitor sleep, so that
	// kills fall before, during and after checkpoints and TTL passes.
	ServerFlags []string
	// Progress, if set, is called after each cycle's check.
	Progress func(CrashCycle)
	// BeforeCheck, if set, is called after each restart, before the check,
	// with the server's URL. Tests use it to change data behind the
	// clients' back and see the check fail.
	BeforeCheck func(ctx context.Context, cycle int, url string) error
}

func (c *CrashConfig) ensureDefaults() {
	if c.Cycles == 0 {
		c.Cycles = 10
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	if c.Progress == nil {
		c.Progress = func(CrashCycle) {}
	}
}

// CrashCycle is one cycle's figures: the check after its restart covers
// the load of the cycle before.
type CrashCycle struct {
	Cycle int `json:"cycle"` // 1-based; Cycles+1 is the final check
	// Restart is how long the server took to open and serve.
	Restart time.Duration `json:"restartNanos"`
	// Checked is how many acknowledged rows and documents the check
	// looked for and found, over every collection (a row is counted at
	// every check it lives through).
	Checked int `json:"checked"`
	// Acked are the inserts (rows) and deletes (requests) acknowledged
	// during the cycle's load; Unacked the rows whose request the kill
	// cut (or the server refused with 429 or 5xx).
	Acked   int `json:"acked"`
	Unacked int `json:"unacked"`
	// KilledAfter is when the kill came, from the start of the load.
	KilledAfter time.Duration `json:"killedAfterNanos"`
}

// CrashResult sums a crash loop.
type CrashResult struct {
	Seed    uint64        `json:"seed"`
	Cycles  int           `json:"cycles"`
	Checked int64         `json:"checked"`
	Acked   int64         `json:"acked"`
	Elapsed time.Duration `json:"elapsedNanos"`
	// Violations found by the check that failed; empty when the loop ran
	// clean.
	Violations []Violation `json:"violations,omitempty"`
}

// A Violation is an invariant the server broke, found by a check.
type Violation struct {
	Cycle      int    `json:"cycle"`
	Collection string `json:"collection"`
	What       string `json:"what"`
}

func (v Violation) String() string {
	return fmt.Sprintf("cycle %d, %s: %s", v.Cycle, v.Collection, v.What)
}

// ErrViolation is returned, wrapped, by RunCrash when a check fails.
var ErrViolation = errors.New("bench: crash check failed")

// crashServerFlags are the flags every crash-loop server runs with.
var crashServerFlags = []string{"--checkpoint-interval", "2s", "--ttl-monitor-sleep", "1s"}

// RunCrash runs the crash loop of cfg. After the last cycle the server is
// restarted and checked, stopped cleanly with SIGTERM, restarted and
// checked again. It stops at the first check that finds a violation: the
// result lists them and the error wraps ErrViolation with the seed and the
// cycle.
func RunCrash(ctx context.Context, cfg CrashConfig) (CrashResult, error) {
	cfg.ensureDefaults()
	res := CrashResult{Seed: cfg.Seed}
	if cfg.Binary == "" || cfg.Dir == "" {
		return res, errors.New("bench: CrashConfig needs Binary and Dir")
	}
	if ents, err := os.ReadDir(cfg.Dir); err == nil && len(ents) > 0 {
		return res, fmt.Errorf("bench: data directory %s is not empty: the crash loop starts from a fresh one", cfg.Dir)
	}
	start := time.Now()
	m := newCrashModel(cfg.Seed)
	flags := append(append([]string{}, crashServerFlags...), cfg.ServerFlags...)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6b696c6c))
	for cycle := 1; cycle <= cfg.Cycles+2; cycle++ {
		t0 := time.Now()
		startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		srv, err := StartServer(startCtx, cfg.Binary, cfg.Dir, flags...)
		cancel()
		if err != nil {
			return res, fmt.Errorf("cycle %d: %w", cycle, err)
		}
		cc := CrashCycle{Cycle: cycle, Restart: time.Since(t0)}
		c := newAPIClient(srv.URL)
		fail := func(err error) (CrashResult, error) {
			srv.Kill()
			c.close()
			return res, fmt.Errorf("seed %d, cycle %d: %w\nserver log (last lines):\n%s", cfg.Seed, cycle, err, srv.Log(8<<10))
		}
		if cfg.BeforeCheck != nil {
			if err := cfg.BeforeCheck(ctx, cycle, srv.URL); err != nil {
				return fail(err)
			}
		}
		if cycle == 1 {
			if err := m.setup(ctx, c); err != nil {
				return fail(err)
			}
		} else {
			checked, vs, err := m.check(ctx, c, cycle)
			if err != nil {
				return fail(err)
			}
			cc.Checked = checked
			res.Checked += int64(checked)
			if len(vs) > 0 {
				res.Violations = vs
				srv.Kill()
				c.close()
				return res, fmt.Errorf("%w: seed %d, cycle %d: %d violations, the first: %s", ErrViolation, cfg.Seed, cycle, len(vs), vs[0])
			}
		}
		switch {
		case cycle <= cfg.Cycles:
			kill := cfg.Duration/10 + time.Duration(rng.Int64N(int64(cfg.Duration-cfg.Duration/10)+1))
			cc.Acked, cc.Unacked = m.load(ctx, c, srv, kill)
			cc.KilledAfter = kill
			res.Cycles++
			res.Acked += int64(cc.Acked)
		case cycle == cfg.Cycles+1:
			// The final check after a crash is done; now a clean stop.
			if err := srv.Stop(time.Minute); err != nil {
				return fail(fmt.Errorf("clean stop: %w", err))
			}
		default:
			srv.Stop(time.Minute)
		}
		srv.Kill()
		c.close()
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := m.err(); err != nil {
			return res, fmt.Errorf("seed %d, cycle %d: %w", cfg.Seed, cycle, err)
		}
		res.Elapsed = time.Since(start)
		cfg.Progress(cc)
	}
	return res, nil
}

// load runs the clients until kill has passed, kills the server and waits
// for the clients to see it gone.
func (m *crashModel) load(ctx context.Context, c *apiClient, srv *ServerProcess, kill time.Duration) (acked, unacked int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range m.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx, c)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.ddl.run(ctx, c)
	}()
	select {
	case <-time.After(kill):
	case <-ctx.Done():
	}
	srv.Kill()
	wg.Wait()
	for _, w := range m.writers {
		acked += w.acked
		unacked += w.unacked
		w.acked, w.unacked = 0, 0
	}
	acked += m.ddl.acked
	m.ddl.acked = 0
	return acked, unacked
}

// crashModel is what the clients were told, and what the server must
// therefore return.
type crashModel struct {
	writers []*crashWriter
	byName  map[string]*crashWriter
	ddl     *ddlClient

	mu       sync.Mutex // guards firstErr and pending
	firstErr error
	pending  []Violation // seen during a load, reported by the next check
}

// Collections of the crash loop.
const (
	crashJSON  = "crash_json"  // time series, NDJSON writers
	crashLP    = "crash_lp"    // time series, line-protocol writers
	crashPlain = "crash_plain" // plain documents
	crashTTL   = "crash_ttl"   // time series with a TTL
	// crashArchive is a time series whose TTL moves expiring rows to the
	// archive: a find with the archive returns every row once.
	crashArchive = "crash_archive"
)

// crashTTLs are the TTLs collMod sets crash_ttl to in turn. Rows written
// 3 h back expire under either; rows written at the time of writing live
// for at least the smaller.
var crashTTLs = [2]int64{3600, 7200}

// crashEpoch is the time of sequence number 0 in crash_json and crash_lp;
// row n is at crashEpoch + n seconds.
var crashEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func newCrashModel(seed uint64) *crashModel {
	m := &crashModel{byName: map[string]*crashWriter{}}
	add := func(kind writerKind, coll, name string) {
		w := &crashWriter{kind: kind, coll: coll, name: name, model: m,
			rng: rand.New(rand.NewPCG(seed, uint64(len(m.writers)+1)))}
		m.writers = append(m.writers, w)
		m.byName[name] = w
	}
	add(kindJSON, crashJSON, "j0")
	add(kindJSON, crashJSON, "j1")
	add(kindLP, crashLP, "l0")
	add(kindLP, crashLP, "l1")
	add(kindPlain, crashPlain, "p0")
	add(kindTTL, crashTTL, "t0")
	add(kindArchive, crashArchive, "a0")
	m.ddl = &ddlClient{model: m, rng: rand.New(rand.NewPCG(seed, 0x64646c)), ttl: crashTTLs[0]}
	return m
}

// fault records a reply no client expects (a 400 to a well-formed
// request): the loop stops after the cycle with it.
func (m *crashModel) fault(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.firstErr == nil {
		m.firstErr = err
	}
}

func (m *crashModel) err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.firstErr
}

// setup creates the collections and the TTL.
func (m *crashModel) setup(ctx context.Context, c *apiClient) error {
	for _, p := range []struct {
		name string
		body any
	}{
		{crashJSON, map[string]any{"timeseries": map[string]any{"timeField": "t", "metaField": "sensor"}}},
		{crashLP, map[string]any{"timeseries": map[string]any{"timeField": "time", "metaField": "tags"}}},
		{crashPlain, map[string]any{}},
		{crashTTL, map[string]any{"timeseries": map[string]any{"timeField": "t", "metaField": "sensor"}, "expireAfterSeconds": crashTTLs[0]}},
		{crashArchive, map[string]any{"timeseries": map[string]any{"timeField": "t", "metaField": "sensor"}, "expireAfterSeconds": 3600, "archive": true}},
	} {
		if err := c.call(ctx, http.MethodPut, "/v1/collections/"+p.name, p.body, nil); err != nil {
			return err
		}
	}
	return c.call(ctx, http.MethodPut, "/v1/collections/"+crashJSON+"/rollups/"+crashRollup, crashRollupSpec, nil)
}

// The rollup of crash_json the check compares with crash_json's aggregate.
var (
	crashRollup      = crashJSON + "_10s"
	crashRollupSpec  = map[string]any{"window": "10s", "fields": []string{"v"}, "funcs": crashRollupFuncs}
	crashRollupFuncs = []string{"count", "sum", "min", "max", "first", "last"}
)
