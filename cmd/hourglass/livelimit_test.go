package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// TestLiveLimitAt checks the limit that follows the live heap: live x
// factor + slack, never above the ceiling.
func TestLiveLimitAt(t *testing.T) {
	const mib = 1 << 20
	l := liveLimit{factor: 1.25, slack: 64 * mib, ceiling: 640 * mib}
	for _, c := range []struct {
		live, want int64
	}{
		{0, 64 * mib},
		{100 * mib, 189 * mib},
		{200 * mib, 314 * mib},
		{460 * mib, 639 * mib},
		{461 * mib, 640 * mib},
		{1 << 30, 640 * mib},
	} {
		if got := l.at(c.live); got != c.want {
			t.Errorf("live %d: limit %d; want %d", c.live, got, c.want)
		}
	}
}

// TestLiveLimitSlack checks the slack after each window: four times more
// when the collector took more than its share of the CPU, up to the
// ceiling; half as much when it took less than half its share, down to
// the least slack; the same in between.
func TestLiveLimitSlack(t *testing.T) {
	const mib = 1 << 20
	l := liveLimit{factor: 1.25, slack: 64 * mib, minSlack: 32 * mib, ceiling: 640 * mib, maxGCShare: 0.1}
	for _, c := range []struct {
		share float64
		want  int64
	}{
		{0.01, 32 * mib},
		{0.01, 32 * mib},
		{0.05, 32 * mib},
		{0.1, 32 * mib},
		{0.11, 128 * mib},
		{0.08, 128 * mib},
		{0.2, 512 * mib},
		{0.2, 640 * mib},
		{0.3, 640 * mib},
		{0.049, 320 * mib},
		{0.0, 160 * mib},
	} {
		l.adjust(c.share)
		if l.slack != c.want {
			t.Fatalf("after a window at gc share %.3f: slack %d MiB; want %d", c.share, l.slack/mib, c.want/mib)
		}
	}
	if got := l.at(100 * mib); got != 285*mib {
		t.Fatalf("limit %d MiB at 100 MiB live, slack 160; want 285", got/mib)
	}
}

// TestGCShareWindow checks the collector's share of the CPU taken over
// windows: 0 until the first window closes, then the last window's share
// until the next closes.
func TestGCShareWindow(t *testing.T) {
	w := gcShareWindow{cpu: 10}
	for _, c := range []struct{ gc, total, want float64 }{
		{0.5, 4, 0},
		{1, 9.9, 0},
		{2, 10, 0.2},
		{2.5, 15, 0.2},
		{2.5, 19.9, 0.2},
		{2.5, 20, 0.05},
		{12.5, 40, 0.5},
	} {
		if got, _ := w.update(c.gc, c.total); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("gc %.1f s, total %.1f s: share %.3f; want %.3f", c.gc, c.total, got, c.want)
		}
	}
}

// TestLiveLimitFollows checks that the runtime's limit follows the live
// heap after each collection, reaches the ceiling when collections take
// more than their share of the CPU, and is left alone once stopped.
func TestLiveLimitFollows(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	const mib = 1 << 20
	live := func() int64 {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	// waitFor collects until the limit is want(the live heap) and that
	// live heap is at least min; it returns that live heap.
	waitFor := func(min int64, want func(live int64) int64) int64 {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
			if n := live(); n >= min && debug.SetMemoryLimit(-1) == want(n) {
				return n
			}
		}
		t.Fatalf("limit %d; want %d (live heap %d)", debug.SetMemoryLimit(-1), want(live()), live())
		return 0
	}

	// A share of 1: the collector never takes more, the limit follows.
	// No window closes within the test: the slack stays as given.
	l := liveLimit{factor: 2, slack: 16 * mib, minSlack: 8 * mib, ceiling: 1 << 40, maxGCShare: 1, window: time.Hour}
	stop := make(chan struct{})
	l.follow(stop)
	follows := func(n int64) int64 { return l.at(n) }
	waitFor(0, follows)
	held := make([]byte, 64*mib)
	for i := range held {
		held[i] = 1
	}
	before := waitFor(64*mib, follows)
	runtime.KeepAlive(held)
	held = nil
	if after := waitFor(0, follows); after > before-32*mib {
		t.Errorf("live heap %d after dropping 64 MiB; was %d", after, before)
	}
	close(stop)
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit %d after stop; want it left alone", got)
	}

	// A share below any: every window quadruples the slack, and the
	// limit reaches the ceiling.
	l = liveLimit{factor: 2, slack: 16 * mib, minSlack: 16 * mib, ceiling: 1 << 40, maxGCShare: -1, window: time.Millisecond}
	stop = make(chan struct{})
	defer close(stop)
	l.follow(stop)
	waitFor(0, func(int64) int64 { return 1 << 40 })
}
