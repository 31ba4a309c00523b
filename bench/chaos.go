package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ChaosConfig shapes a chaos run on a replica set: three members of the
// hourglass binary on loopback, writers and a deleter sending to whichever
// member leads, a collection whose rows expire, and Cycles faults chosen
// at random: kill -9 of the leader, kill -9 of a follower, SIGSTOP of a
// follower for a few seconds (it stops answering, as a member cut off by
// the network does, and resumes with what it missed), the replacement
// of a follower (removed from the set, its data deleted, joined again
// with --join), or a partition of the leader (its raft traffic cut while
// it runs: it loses the lead and catches up once healed). After every cycle
// the set is left to settle and every member is read: every acknowledged
// write is on every member, no member holds a row an acknowledged delete
// removed or a row nobody sent, the three hold the same rows, and expired
// rows are gone everywhere.
type ChaosConfig struct {
	// Binary is the hourglass executable.
	Binary string
	// Dir holds the members' data directories (n1, n2, n3); it must not
	// exist or be empty, and is left in place.
	Dir string
	// Seed chooses the faults, their targets and timings, and the
	// clients' operations; a failing seed reproduces the same schedule.
	Seed uint64
	// Cycles of fault and check (default 10).
	Cycles int
	// Duration is the load of a cycle before its fault, and again after
	// it (default 3 s).
	Duration time.Duration
	// Progress, if set, is called after each cycle's check.
	Progress func(ChaosCycle)
}

// ChaosCycle is one cycle's figures.
type ChaosCycle struct {
	Cycle  int    `json:"cycle"`
	Fault  string `json:"fault"`  // what was done, to which member
	Leader string `json:"leader"` // the leader before the fault
	// Acked rows and deletes acknowledged during the cycle; Checked the
	// acknowledged rows found on every member by its check.
	Acked   int `json:"acked"`
	Checked int `json:"checked"`
	// Settle is how long the set took to agree again after the fault.
	Settle time.Duration `json:"settleNanos"`
}

// ChaosResult sums a chaos run.
type ChaosResult struct {
	Seed       uint64        `json:"seed"`
	Cycles     int           `json:"cycles"`
	Acked      int64         `json:"acked"`
	Elapsed    time.Duration `json:"elapsedNanos"`
	Violations []string      `json:"violations,omitempty"`
}

// Collections of the chaos run.
const (
	chaosData = "chaos" // time series: writers' rows, deleted in ranges
	chaosTTL  = "chaos_ttl"
)

// chaosMember is one member: its flags and, while it runs, its process.
type chaosMember struct {
	id, raft, http, dir string
	proc                *ServerProcess
	stopped             bool // SIGSTOPped
}

// RunChaos runs the chaos test of cfg. It stops at the first check that
// finds a violation: the error wraps ErrViolation and names the seed.
func RunChaos(ctx context.Context, cfg ChaosConfig) (ChaosResult, error) {
	if cfg.Cycles == 0 {
		cfg.Cycles = 10
	}
	if cfg.Duration == 0 {
		cfg.Duration = 3 * time.Second
	}
	res := ChaosResult{Seed: cfg.Seed}
	if cfg.Binary == "" || cfg.Dir == "" {
		return res, errors.New("bench: ChaosConfig needs Binary and Dir")
	}
	if ents, err := os.ReadDir(cfg.Dir); err == nil && len(ents) > 0 {
		return res, fmt.Errorf("bench: %s is not empty: the chaos run starts from fresh data directories", cfg.Dir)
	}
	addrs, err := freeLoopbackAddrs(6)
	if err != nil {
		return res, err
	}
	var ms []*chaosMember
	var spec []string
	for i := range 3 {
		m := &chaosMember{id: fmt.Sprintf("n%d", i+1), raft: addrs[2*i], http: addrs[2*i+1], dir: filepath.Join(cfg.Dir, fmt.Sprintf("n%d", i+1))}
		ms = append(ms, m)
		spec = append(spec, m.id+"="+m.raft+"/"+m.http)
	}
	start := time.Now()
	// startMember starts m with --members, or, given a member to join
	// through, with --join (a member whose data was deleted).
	startMember := func(m *chaosMember, join ...*chaosMember) error {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		set := []string{"--members", strings.Join(spec, ",")}
		if len(join) > 0 {
			set = []string{"--join", join[0].http}
		}
		args := append([]string{"--replica-set", "rs0", "--node-id", m.id, "--raft-listen", m.raft}, set...)
		args = append(args, "--listen", m.http, "--mongo-listen", "", "--ttl-monitor-sleep", "1s", "--checkpoint-interval", "2s",
			"--fault-injection")
		p, err := StartServer(sctx, cfg.Binary, m.dir, args...)
		if err != nil {
			return fmt.Errorf("%s: %w", m.id, err)
		}
		m.proc, m.stopped = p, false
		return nil
	}
	for _, m := range ms {
		if err := startMember(m); err != nil {
			return res, err
		}
	}
	defer func() {
		for _, m := range ms {
			if m.proc != nil {
				if m.stopped {
					m.proc.cmd.Process.Signal(syscall.SIGCONT)
				}
				m.proc.Stop(time.Minute)
			}
		}
	}()
	cl := newChaosClients(ms, cfg.Seed)
	if err := cl.setup(ctx); err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6368616f73))
	fail := func(cycle int, err error) (ChaosResult, error) {
		res.Elapsed = time.Since(start)
		var logs strings.Builder
		for _, m := range ms {
			if m.proc != nil {
				fmt.Fprintf(&logs, "--- %s (last lines):\n%s\n", m.id, m.proc.Log(4<<10))
			}
		}
		return res, fmt.Errorf("seed %d, cycle %d: %w\n%s", cfg.Seed, cycle, err, logs.String())
	}
	for cycle := 1; cycle <= cfg.Cycles+1; cycle++ {
		cc := ChaosCycle{Cycle: cycle}
		if cycle <= cfg.Cycles {
			lctx, cancel := context.WithCancel(ctx)
			done := cl.run(lctx)
			sleepCtx(ctx, cfg.Duration)
			leader := cl.leader(ctx)
			cc.Leader = leader.id
			var target *chaosMember
			kind := rng.IntN(5)
			switch kind {
			case 0:
				target, cc.Fault = leader, "kill -9 of the leader "+leader.id
			case 4:
				target, cc.Fault = leader, "partition of the leader "+leader.id+" (cut off while it runs)"
			default:
				for target == nil || target == leader {
					target = ms[rng.IntN(3)]
				}
				switch kind {
				case 1:
					cc.Fault = "kill -9 of the follower " + target.id
				case 2:
					cc.Fault = "SIGSTOP of the follower " + target.id
				default:
					cc.Fault = "replacement of the follower " + target.id + " (removed, its data deleted, joined again)"
				}
			}
			pause := time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
			switch kind {
			case 2:
				target.proc.cmd.Process.Signal(syscall.SIGSTOP)
				target.stopped = true
				sleepCtx(ctx, pause)
				target.proc.cmd.Process.Signal(syscall.SIGCONT)
				target.stopped = false
			case 4:
				// Its raft traffic cut, the leader loses the lead when its
				// lease runs out and the others elect one; healed, it
				// catches up as a follower.
				if err := partition(ctx, target, pause); err != nil {
					cancel()
					<-done
					return fail(cycle, err)
				}
				sleepCtx(ctx, pause)
			case 3:
				// The set goes on with two voters while the member is
				// away; it comes back empty, as a non-voter through the
				// leader, catches up (from a snapshot once the log no
				// longer reaches back) and gets its vote back.
				if st, b := cl.send(ctx, http.MethodDelete, "/v1/replset/members/"+target.id, "", nil); st != http.StatusOK {
					cancel()
					<-done
					return fail(cycle, fmt.Errorf("remove member %s: HTTP %d %s", target.id, st, b))
				}
				target.proc.Kill()
				if err := os.RemoveAll(target.dir); err != nil {
					cancel()
					<-done
					return fail(cycle, err)
				}
				sleepCtx(ctx, pause)
				if err := startMember(target, cl.leader(ctx)); err != nil {
					cancel()
					<-done
					return fail(cycle, err)
				}
			default:
				target.proc.Kill()
				sleepCtx(ctx, pause)
				if err := startMember(target); err != nil {
					cancel()
					<-done
					return fail(cycle, err)
				}
			}
			sleepCtx(ctx, cfg.Duration)
			cancel()
			<-done
			cc.Acked = cl.takeAcked()
			res.Acked += int64(cc.Acked)
			res.Cycles++
		}
		t0 := time.Now()
		checked, vs, err := cl.check(ctx, cycle == cfg.Cycles+1)
		cc.Settle = time.Since(t0)
		if err != nil {
			return fail(cycle, err)
		}
		cc.Checked = checked
		if len(vs) > 0 {
			res.Violations = vs
			return fail(cycle, fmt.Errorf("%w after %s: %d violations, the first: %s", ErrViolation, cc.Fault, len(vs), vs[0]))
		}
		if err := cl.fault(); err != nil {
			return fail(cycle, err)
		}
		res.Elapsed = time.Since(start)
		if cfg.Progress != nil {
			cfg.Progress(cc)
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// freeLoopbackAddrs returns n loopback addresses with ports free now.
// partition cuts m's raft traffic for d (serve --fault-injection).
func partition(ctx context.Context, m *chaosMember, d time.Duration) error {
	u := fmt.Sprintf("http://%s/v1/replset/partition?seconds=%g", m.http, d.Seconds())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("partition %s: %w", m.id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("partition %s: HTTP %d %s", m.id, resp.StatusCode, b)
	}
	return nil
}

func freeLoopbackAddrs(n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// Row states in the chaos model.
const (
	chaosSent    = iota // sent, no answer: may or may not be stored
	chaosAcked          // acknowledged: must be on every member
	chaosDeleted        // an acknowledged delete removed it
	chaosMaybe          // a delete of it got no answer
)

// chaosClients are the writers, the deleter and what they were told.
type chaosClients struct {
	ms   []*chaosMember
	hc   *http.Client
	rng  *rand.Rand
	mu   sync.Mutex
	rows map[string][]uint8 // writer -> state of row seq
	// lead is the member believed to lead, followed on 421.
	lead   int
	acked  int
	firstE error
}

var chaosWriters = []string{"w0", "w1", "w2"}

// chaosEpoch is the time of row 0 of each writer; row n is n seconds
// later. chaos_ttl rows are written 3 hours before the run: they expire
// under its 1-hour TTL.
var chaosEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func newChaosClients(ms []*chaosMember, seed uint64) *chaosClients {
	c := &chaosClients{ms: ms, rng: rand.New(rand.NewPCG(seed, 0x77)), rows: map[string][]uint8{},
		hc: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
	return c
}

// send sends a write to the leader, following a follower's 421 and trying
// the others while none answers; status 0 means no member answered.
func (c *chaosClients) send(ctx context.Context, method, path, ctype string, body []byte) (int, []byte) {
	for attempt := 0; attempt < 30 && ctx.Err() == nil; attempt++ {
		c.mu.Lock()
		m := c.ms[c.lead]
		c.mu.Unlock()
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+m.http+path, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", ctype)
		resp, err := c.hc.Do(req)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case rerr != nil:
				return 0, nil // the request may have been applied
			case resp.StatusCode == http.StatusMisdirectedRequest && resp.Header.Get("Hourglass-Primary") != "":
				c.follow(resp.Header.Get("Hourglass-Primary"))
				continue
			case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "may"):
				return 0, nil // not committed in time, or the lead lost: its fate is unknown
			case resp.StatusCode != http.StatusMisdirectedRequest && resp.StatusCode != http.StatusServiceUnavailable:
				return resp.StatusCode, b
			}
			// No leader known yet: try the next member.
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			return 0, nil // sent, no answer: its fate is unknown
		}
		c.mu.Lock()
		c.lead = (c.lead + 1) % len(c.ms)
		c.mu.Unlock()
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return 0, nil
}

func (c *chaosClients) follow(httpAddr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.ms {
		if m.http == httpAddr {
			c.lead = i
		}
	}
}

// leader returns the member that says it leads, waiting for one.
func (c *chaosClients) leader(ctx context.Context) *chaosMember {
	for ctx.Err() == nil {
		for i, m := range c.ms {
			var st struct {
				State string `json:"state"`
			}
			if c.getJSON(ctx, m, "/v1/replset?self=true", &st) == nil && st.State == "leader" {
				c.mu.Lock()
				c.lead = i
				c.mu.Unlock()
				return m
			}
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	return c.ms[0]
}

func (c *chaosClients) getJSON(ctx context.Context, m *chaosMember, path string, out any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.http+path, nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s on %s: HTTP %d", path, m.id, resp.StatusCode)
	}
	return json.Unmarshal(b, out)
}

func (c *chaosClients) setup(ctx context.Context) error {
	c.leader(ctx)
	for _, p := range []struct{ name, body string }{
		{chaosData, `{"timeseries": {"timeField": "t", "metaField": "w"}}`},
		{chaosTTL, `{"timeseries": {"timeField": "t", "metaField": "w"}, "expireAfterSeconds": 3600}`},
	} {
		if st, b := c.send(ctx, http.MethodPut, "/v1/collections/"+p.name, "application/json", []byte(p.body)); st != http.StatusCreated {
			return fmt.Errorf("create %s: HTTP %d %s", p.name, st, b)
		}
	}
	return nil
}

// run starts the writers (NDJSON batches of 20 rows into chaos, and into
// chaos_ttl rows that are expired already) and the deleter; the channel
// closes when ctx ends and they have returned.
func (c *chaosClients) run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range chaosWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c.writeBatch(ctx, w)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for sleepCtx(ctx, 300*time.Millisecond) {
			c.deleteRange(ctx)
			c.writeExpired(ctx)
		}
	}()
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

func (c *chaosClients) writeBatch(ctx context.Context, w string) {
	c.mu.Lock()
	from := len(c.rows[w])
	for range 20 {
		c.rows[w] = append(c.rows[w], chaosSent)
	}
	c.mu.Unlock()
	var body strings.Builder
	for seq := from; seq < from+20; seq++ {
		fmt.Fprintf(&body, `{"t": {"$date": %q}, "w": %q, "seq": %d}`+"\n", chaosEpoch.Add(time.Duration(seq)*time.Second).Format(time.RFC3339), w, seq)
	}
	st, b := c.send(ctx, http.MethodPost, "/v1/collections/"+chaosData+"/documents", "application/x-ndjson", []byte(body.String()))
	switch {
	case st == http.StatusOK:
		c.mu.Lock()
		for seq := from; seq < from+20; seq++ {
			c.rows[w][seq] = chaosAcked
		}
		c.acked++
		c.mu.Unlock()
	case st != 0 && st != http.StatusTooManyRequests:
		c.setFault(fmt.Errorf("%s: insert of rows %d..%d: HTTP %d %s", w, from, from+19, st, b))
	}
}

// deleteRange deletes a range of a writer's acknowledged rows.
func (c *chaosClients) deleteRange(ctx context.Context) {
	w := chaosWriters[c.rng.IntN(len(chaosWriters))]
	c.mu.Lock()
	n := len(c.rows[w])
	c.mu.Unlock()
	if n < 40 {
		return
	}
	lo := c.rng.IntN(n - 20)
	hi := lo + 1 + c.rng.IntN(10)
	// Only rows whose insert was answered: a delete racing an insert in
	// flight could be applied before or after it whatever the order of
	// their replies.
	c.mu.Lock()
	for seq := lo; seq < hi; seq++ {
		if st := c.rows[w][seq]; st != chaosAcked && st != chaosDeleted {
			c.mu.Unlock()
			return
		}
	}
	for seq := lo; seq < hi; seq++ {
		if c.rows[w][seq] == chaosAcked {
			c.rows[w][seq] = chaosMaybe
		}
	}
	c.mu.Unlock()
	date := func(seq int) string { return chaosEpoch.Add(time.Duration(seq) * time.Second).Format(time.RFC3339) }
	body := fmt.Sprintf(`{"filter": {"w": %q, "t": {"$gte": {"$date": %q}, "$lt": {"$date": %q}}}}`, w, date(lo), date(hi))
	if c.rng.IntN(2) == 0 {
		// By the field seq: matched row by row on every member.
		body = fmt.Sprintf(`{"filter": {"w": %q, "seq": {"$gte": %d, "$lt": %d}}}`, w, lo, hi)
	}
	st, b := c.send(ctx, http.MethodPost, "/v1/collections/"+chaosData+"/delete", "application/json", []byte(body))
	switch {
	case st == http.StatusOK:
		c.mu.Lock()
		for seq := lo; seq < hi; seq++ {
			c.rows[w][seq] = chaosDeleted
		}
		c.acked++
		c.mu.Unlock()
	case st != 0 && st != http.StatusTooManyRequests:
		c.setFault(fmt.Errorf("delete of %s rows %d..%d: HTTP %d %s", w, lo, hi-1, st, b))
	}
}

// writeExpired writes rows 3 hours old into chaos_ttl, which the TTL
// monitor of the leader deletes.
func (c *chaosClients) writeExpired(ctx context.Context) {
	t := time.Now().Add(-3 * time.Hour).UTC().Format(time.RFC3339Nano)
	body := fmt.Sprintf(`{"t": {"$date": %q}, "w": "old", "v": 1}`+"\n", t)
	if st, b := c.send(ctx, http.MethodPost, "/v1/collections/"+chaosTTL+"/documents", "application/x-ndjson", []byte(body)); st != 0 && st != http.StatusOK && st != http.StatusTooManyRequests {
		c.setFault(fmt.Errorf("insert into %s: HTTP %d %s", chaosTTL, st, b))
	}
}

func (c *chaosClients) setFault(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstE == nil {
		c.firstE = err
	}
}

func (c *chaosClients) fault() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.firstE
}

func (c *chaosClients) takeAcked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.acked
	c.acked = 0
	return n
}

// check waits for the members to agree (the same rows on each, for up
// to a minute) and then checks the rows against the model; with final,
// chaos_ttl must also be empty on every member.
func (c *chaosClients) check(ctx context.Context, final bool) (int, []string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		sets := make([]map[string]bool, len(c.ms))
		agree := true
		var readErr error
		for i, m := range c.ms {
			if sets[i], readErr = c.rowsOf(ctx, m); readErr != nil {
				agree = false
				break
			}
			if i > 0 && !sameSet(sets[0], sets[i]) {
				agree = false
			}
		}
		if agree && final {
			for _, m := range c.ms {
				var d struct {
					Count int64 `json:"count"`
				}
				if err := c.getJSON(ctx, m, "/v1/collections/"+chaosTTL, &d); err != nil || d.Count != 0 {
					agree = false
				}
			}
		}
		if agree {
			return c.compare(sets[0])
		}
		if time.Now().After(deadline) {
			if readErr != nil {
				return 0, nil, fmt.Errorf("the members did not all answer within a minute: %w", readErr)
			}
			var vs []string
			for i, set := range sets {
				twice := 0
				for k := range set {
					if strings.HasPrefix(k, "twice:") {
						twice++
					}
				}
				if twice > 0 {
					vs = append(vs, fmt.Sprintf("%s holds %d rows twice", c.ms[i].id, twice))
				}
			}
			for i := 1; i < len(sets); i++ {
				if sets[i] != nil && !sameSet(sets[0], sets[i]) {
					vs = append(vs, fmt.Sprintf("%s and %s hold different rows a minute after the fault: %d and %d", c.ms[0].id, c.ms[i].id, len(sets[0]), len(sets[i])))
				}
			}
			if final {
				vs = append(vs, "chaos_ttl still holds expired rows a minute after the last cycle on some member")
			}
			return 0, vs, nil
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// rowsOf reads every row of chaos from one member, as "writer/seq".
func (c *chaosClients) rowsOf(ctx context.Context, m *chaosMember) (map[string]bool, error) {
	api := newAPIClient("http://" + m.http)
	defer api.close()
	rows := map[string]bool{}
	// Every member, secondaries included: readPreference lets them answer.
	err := api.stream(ctx, "/v1/collections/"+chaosData+"/find?readPreference=secondary", map[string]any{"projection": map[string]any{"w": 1, "seq": 1}}, func(line []byte) error {
		var r struct {
			W   string `json:"w"`
			Seq int    `json:"seq"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		k := fmt.Sprintf("%s/%d", r.W, r.Seq)
		if rows[k] {
			k = "twice:" + k // a row stored twice: a member holding it differs from the model
		}
		rows[k] = true
		return nil
	})
	return rows, err
}

// compare checks rows (every member's, equal) against the model.
func (c *chaosClients) compare(rows map[string]bool) (int, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var vs []string
	checked := 0
	for _, w := range chaosWriters {
		for seq, st := range c.rows[w] {
			k := fmt.Sprintf("%s/%d", w, seq)
			switch {
			case st == chaosAcked && !rows[k]:
				vs = append(vs, "acknowledged row "+k+" is missing on every member")
			case st == chaosAcked:
				checked++
			case st == chaosDeleted && rows[k]:
				vs = append(vs, "row "+k+", removed by an acknowledged delete, is on every member")
			}
		}
	}
	for k := range rows {
		if strings.HasPrefix(k, "twice:") {
			vs = append(vs, "row "+strings.TrimPrefix(k, "twice:")+" is stored twice")
			continue
		}
		w, seqText, _ := strings.Cut(k, "/")
		var seq int
		fmt.Sscan(seqText, &seq)
		if !slices.Contains(chaosWriters, w) || seq >= len(c.rows[w]) {
			vs = append(vs, "row "+k+" was never sent")
		}
	}
	return checked, vs, nil
}
