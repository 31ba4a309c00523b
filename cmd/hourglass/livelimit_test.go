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
// factor + slack, never above the ceiling, and the ceiling while the
// collector takes more than its share of the CPU.
func TestLiveLimitAt(t *testing.T) {
	const mib = 1 << 20
	l := liveLimit{factor: 1.25, slack: 64 * mib, ceiling: 640 * mib, maxGCShare: 0.1}
	for _, c := range []struct {
		live  int64
		share float64
		want  int64
	}{
		{0, 0, 64 * mib},
		{100 * mib, 0, 189 * mib},
		{200 * mib, 0.1, 314 * mib},
		{200 * mib, 0.11, 640 * mib},
		{460 * mib, 0, 639 * mib},
		{461 * mib, 0, 640 * mib},
		{1 << 30, 0, 640 * mib},
	} {
		if got := l.at(c.live, c.share); got != c.want {
			t.Errorf("live %d, gc share %.2f: limit %d; want %d", c.live, c.share, got, c.want)
		}
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
		if got := w.update(c.gc, c.total); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("gc %.1f s, total %.1f s: share %.3f; want %.3f", c.gc, c.total, got, c.want)
		}
	}
}

// TestLiveLimitFollows checks that the runtime's limit follows the live
// heap after each collection, goes to the ceiling when collections take
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
	l := liveLimit{factor: 2, slack: 16 * mib, ceiling: 1 << 40, maxGCShare: 1}
	stop := make(chan struct{})
	l.follow(stop)
	follows := func(n int64) int64 { return l.at(n, 0) }
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

	// A share below any: the limit stays at the ceiling.
	l = liveLimit{factor: 2, slack: 16 * mib, ceiling: 1 << 40, maxGCShare: -1}
	stop = make(chan struct{})
	defer close(stop)
	l.follow(stop)
	waitFor(0, func(int64) int64 { return 1 << 40 })
}
