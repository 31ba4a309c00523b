package ttl

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told. After channels fire when
// the time is advanced past their deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}

func (c *fakeClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// fakeStore holds, per target, a number of expired measurements in buckets
// of 1000. Each bucket deleted takes perBucket of clock time.
type fakeStore struct {
	mu        sync.Mutex
	clock     *fakeClock
	targets   []Target
	expired   map[Target]int64
	perBucket time.Duration
	calls     []Target
	budgets   []Budget
	fail      error
}

func (s *fakeStore) Targets(ctx context.Context) ([]Target, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Target(nil), s.targets...), nil
}

func (s *fakeStore) Expire(ctx context.Context, t Target, now time.Time, b Budget) (Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, t)
	s.budgets = append(s.budgets, b)
	if s.fail != nil {
		return Batch{}, s.fail
	}
	var out Batch
	for s.expired[t] > 0 {
		if (b.Docs > 0 && out.Docs >= b.Docs) || (!b.Deadline.IsZero() && !s.clock.Now().Before(b.Deadline)) {
			out.More = true
			break
		}
		n := min(s.expired[t], 1000)
		s.expired[t] -= n
		out.Docs += n
		out.Buckets++
		s.clock.Advance(s.perBucket)
	}
	return out, nil
}

func newTestMonitor(t *testing.T, s *fakeStore, mod func(*Options)) *Monitor {
	t.Helper()
	o := Options{Store: s, Clock: s.clock}
	if mod != nil {
		mod(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

var (
	ta = Target{Collection: "a"}
	tb = Target{Collection: "b", Index: "north"}
	tc = Target{Collection: "c"}
)

// SPEC 4.1: round robin, one batch per rule, a rule that hit its target
// visited again later in the same sub-pass, the pass complete when nothing
// expired is left.
func TestPassRoundRobin(t *testing.T) {
	clock := newFakeClock()
	s := &fakeStore{clock: clock, targets: []Target{ta, tb, tc},
		expired: map[Target]int64{ta: 120000, tb: 30000, tc: 0}}
	m := newTestMonitor(t, s, nil)
	res, err := m.RunPass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{ta, tb, tc, ta, ta}
	if !equalTargets(s.calls, want) {
		t.Fatalf("visits %v, want %v", s.calls, want)
	}
	if res.DeletedDocuments != 150000 || res.DeletedBuckets != 150 || res.SubPasses != 1 {
		t.Fatalf("result %+v", res)
	}
	if st := m.Stats(); st != (Stats{DeletedDocuments: 150000, DeletedBuckets: 150, Passes: 1, SubPasses: 1}) {
		t.Fatalf("stats %+v", st)
	}
	if s.budgets[0].Docs != 50000 || !s.budgets[0].Deadline.Equal(clock.Now().Add(time.Second)) {
		t.Fatalf("default budget %+v", s.budgets[0])
	}
}

// The time budget ends a batch; 0 (Unlimited) budgets leave a batch to
// delete everything.
func TestBudgets(t *testing.T) {
	clock := newFakeClock()
	s := &fakeStore{clock: clock, targets: []Target{ta}, expired: map[Target]int64{ta: 100000}, perBucket: 100 * time.Millisecond}
	m := newTestMonitor(t, s, func(o *Options) { o.TargetDocs = Unlimited })
	if _, err := m.RunPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 100 buckets at 100 ms each, 1 s a batch: 10 batches.
	if len(s.calls) != 10 || s.budgets[0].Docs != 0 || s.budgets[0].Deadline.IsZero() {
		t.Fatalf("%d batches, budget %+v", len(s.calls), s.budgets[0])
	}

	s = &fakeStore{clock: clock, targets: []Target{ta}, expired: map[Target]int64{ta: 100000}, perBucket: time.Second}
	m = newTestMonitor(t, s, func(o *Options) {
		o.TargetDocs, o.TargetTime, o.SubPassTarget = Unlimited, Unlimited, Unlimited
	})
	res, err := m.RunPass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.calls) != 1 || res.DeletedDocuments != 100000 || res.SubPasses != 1 || (s.budgets[0] != Budget{}) {
		t.Fatalf("unlimited: %d batches, %+v, budget %+v", len(s.calls), res, s.budgets[0])
	}
}

// SPEC 4.1: a sub-pass ends after SubPassTarget if work remains, and the
// next one starts at once, refreshing the rules.
func TestSubPasses(t *testing.T) {
	clock := newFakeClock()
	s := &fakeStore{clock: clock, targets: []Target{ta, tb}, expired: map[Target]int64{ta: 200000, tb: 200000}, perBucket: 200 * time.Millisecond}
	m := newTestMonitor(t, s, func(o *Options) { o.SubPassTarget = 3 * time.Second })
	res, err := m.RunPass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 400 buckets at 200 ms: 80 s of work in sub-passes of at least 3 s.
	if res.SubPasses < 10 || res.DeletedDocuments != 400000 {
		t.Fatalf("%+v", res)
	}
	if st := m.Stats(); st.SubPasses != res.SubPasses || st.Passes != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestErrorsAndCurrent(t *testing.T) {
	clock := newFakeClock()
	s := &fakeStore{clock: clock, targets: []Target{ta}, expired: map[Target]int64{ta: 10}, fail: errors.New("disk on fire")}
	m := newTestMonitor(t, s, nil)
	if _, err := m.RunPass(context.Background()); err == nil {
		t.Fatal("store error lost")
	}
	if m.Current() != nil {
		t.Fatal("a failed batch stays current")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.RunPass(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pass: %v", err)
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("no store accepted")
	}
	if _, err := New(Options{Store: s, TargetDocs: -5}); err == nil {
		t.Fatal("negative budget accepted")
	}
}

// The background loop passes once per Sleep, on Wake, and stops on Close.
func TestBackground(t *testing.T) {
	clock := newFakeClock()
	s := &fakeStore{clock: clock, targets: []Target{ta}, expired: map[Target]int64{ta: 5000}}
	m := newTestMonitor(t, s, func(o *Options) { o.Sleep = time.Minute })
	m.Start()
	waitFor(t, func() bool { return clock.Waiters() == 1 })
	clock.Advance(59 * time.Second)
	if m.Stats().Passes != 0 {
		t.Fatal("pass before the sleep ended")
	}
	clock.Advance(time.Second)
	waitFor(t, func() bool { return m.Stats().Passes == 1 && clock.Waiters() == 1 })
	if m.Stats().DeletedDocuments != 5000 {
		t.Fatalf("stats %+v", m.Stats())
	}
	m.Wake()
	waitFor(t, func() bool { return m.Stats().Passes == 2 })
	m.Close()
	m.Close()
	clock.Advance(time.Hour)
	if p := m.Stats().Passes; p != 2 {
		t.Fatalf("%d passes after Close", p)
	}
}

func TestDisabled(t *testing.T) {
	clock := newFakeClock()
	s := &fakeStore{clock: clock, targets: []Target{ta}, expired: map[Target]int64{ta: 5000}}
	m := newTestMonitor(t, s, func(o *Options) { o.Disabled = true })
	m.Start()
	defer m.Close()
	// Once the loop is parked, it waits for something: not the clock.
	waitParked(t, "ttl.(*Monitor).run(")
	if clock.Waiters() != 0 {
		t.Fatal("a disabled monitor waits for the clock")
	}
	clock.Advance(time.Hour)
	m.Wake()
	waitParked(t, "ttl.(*Monitor).run(")
	if m.Stats().Passes != 0 || clock.Waiters() != 0 {
		t.Fatal("a disabled monitor passed")
	}
	if res, err := m.RunPass(context.Background()); err != nil || res.DeletedDocuments != 5000 {
		t.Fatalf("RunPass on a disabled monitor: %+v %v", res, err)
	}
}

// TestSetEnabledAndSleep changes ttlMonitorEnabled and ttlMonitorSleepSecs
// on a running monitor: turned on, it passes after the sleep; a new sleep
// restarts the wait; turned off, it passes no more.
func TestSetEnabledAndSleep(t *testing.T) {
	clock := newFakeClock()
	s := &fakeStore{clock: clock, targets: []Target{ta}, expired: map[Target]int64{ta: 5000}}
	m := newTestMonitor(t, s, func(o *Options) { o.Disabled = true; o.Sleep = time.Minute })
	m.Start()
	defer m.Close()
	waitParked(t, "ttl.(*Monitor).run(")
	if m.Enabled() || clock.Waiters() != 0 {
		t.Fatal("a disabled monitor is enabled or waits for the clock")
	}
	if was := m.SetEnabled(true); was {
		t.Fatal("SetEnabled reported it was enabled")
	}
	waitFor(t, func() bool { return clock.Waiters() == 1 })
	if m.Stats().Passes != 0 {
		t.Fatal("turning the monitor on ran a pass at once; MongoDB waits for the sleep")
	}
	if was, err := m.SetSleep(10 * time.Second); err != nil || was != time.Minute {
		t.Fatalf("SetSleep = %v, %v; want the old 1m0s", was, err)
	}
	waitFor(t, func() bool { return clock.Waiters() == 2 }) // the abandoned minute and the new wait
	clock.Advance(10 * time.Second)
	waitFor(t, func() bool { return m.Stats().Passes == 1 })
	if _, err := m.SetSleep(0); err == nil {
		t.Fatal("SetSleep(0) accepted")
	}
	m.SetEnabled(false)
	waitParked(t, "ttl.(*Monitor).run(")
	clock.Advance(time.Hour)
	m.Wake()
	waitParked(t, "ttl.(*Monitor).run(")
	if m.Stats().Passes != 1 {
		t.Fatalf("a monitor turned off passed: %d passes", m.Stats().Passes)
	}
}

// waitFor waits until cond holds, polling; the deadline is only there to
// end a test whose condition never comes, far beyond a slow machine's pace.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitParked waits until the goroutine running fn (a "pkg.(*T).m(" frame)
// is blocked on a channel, so that whatever it does before blocking is done.
func waitParked(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	waitFor(t, func() bool {
		n := runtime.Stack(buf, true)
		for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			if strings.Contains(g, fn) && (strings.Contains(header, "[chan receive") || strings.Contains(header, "[select")) {
				return true
			}
		}
		return false
	})
}

func equalTargets(a, b []Target) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
