package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The default runtime memory limit follows the live heap. After each
// garbage collection serve sets it to liveFactor x the bytes that
// collection found live, plus liveSlack, at most the default sum
// (runtimeMemoryLimit): with GOGC at 100 alone the heap grows to twice
// what was live before the collector runs again, and the process keeps
// what it grew to. The slack keeps a small heap's collections as rare as
// GOGC makes them and leaves room for the runtime's own memory (stacks,
// metadata). When the collector took more than maxGCShare of the CPU
// (GOMAXPROCS x the time) over the last gcWindow or more, as on a large
// live heap (a million series), the limit is the sum until a window in
// which it took less: the memory saved is not worth the CPU there. A
// window of several collections, not one, lets the short bursts of
// collections of a compaction pass without backing off. Measured in
// docs/benchmarks.md ("Runtime memory limit following the live heap").
const (
	liveFactor = 1.25
	liveSlack  = 64 << 20
	maxGCShare = 0.10
	gcWindow   = 5 * time.Second
)

// liveLimit is a soft memory limit for the Go runtime that follows the
// heap's live bytes: live x factor + slack, never above ceiling, and
// ceiling while the collector takes more than maxGCShare of the CPU.
type liveLimit struct {
	factor     float64
	slack      int64
	ceiling    int64
	maxGCShare float64
}

// at returns the limit for live bytes of live heap when the collector
// took gcShare of the CPU over the last cycle.
func (l liveLimit) at(live int64, gcShare float64) int64 {
	if gcShare > l.maxGCShare {
		return l.ceiling
	}
	return min(int64(float64(live)*l.factor)+l.slack, l.ceiling)
}

// follow sets the runtime's memory limit from the live heap now and again
// after each garbage collection, until stop is closed.
func (l liveLimit) follow(stop <-chan struct{}) {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"},
	}
	w := gcShareWindow{cpu: gcWindow.Seconds() * float64(runtime.GOMAXPROCS(0))}
	set := func() {
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindFloat64 || s[2].Value.Kind() != metrics.KindFloat64 {
			return
		}
		share := w.update(s[1].Value.Float64(), s[2].Value.Float64())
		debug.SetMemoryLimit(l.at(int64(s[0].Value.Uint64()), share))
	}
	var arm func()
	arm = func() {
		// A finalizer runs once a collection has found its object
		// unreachable: one made anew each time runs after each cycle.
		runtime.SetFinalizer(new(gcSentinel), func(*gcSentinel) {
			select {
			case <-stop:
				return
			default:
			}
			set()
			arm()
		})
	}
	set()
	arm()
}

// gcShareWindow is the collector's share of the CPU over the last
// completed window of at least cpu CPU-seconds (GOMAXPROCS x the time).
type gcShareWindow struct {
	cpu              float64
	startGC, startAt float64
	share            float64
}

// update takes the runtime's cumulative CPU-seconds of the collector (gc)
// and of all (total, GOMAXPROCS x the time) and returns the share of the
// last window completed: 0 until one is.
func (w *gcShareWindow) update(gc, total float64) float64 {
	if total-w.startAt >= w.cpu {
		w.share = (gc - w.startGC) / (total - w.startAt)
		w.startGC, w.startAt = gc, total
	}
	return w.share
}

// gcSentinel is the object whose finalizer marks a collection's end; it
// holds a pointer so that it is not allocated among other tiny objects.
type gcSentinel struct{ _ *int }
