package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The default runtime memory limit follows the live heap. After each
// garbage collection serve sets it to liveFactor x the bytes that
// collection found live, plus a slack, at most the default sum
// (runtimeMemoryLimit): with GOGC at 100 alone the heap grows to twice
// what was live before the collector runs again, and the process keeps
// what it grew to. The slack keeps a small heap's collections as rare as
// GOGC makes them and leaves room for the runtime's own memory (stacks,
// metadata). It starts at liveSlack and follows the collector's share of
// the CPU (GOMAXPROCS x the time) over windows of gcWindow or more: four
// times as much after a window in which the collector took more than
// maxGCShare, as on a large live heap (a million series), where the
// memory saved is not worth the CPU; half as much, down to minLiveSlack,
// after one in which it took less than half that. A window of several
// collections, not one, lets the short bursts of collections of a
// compaction pass without backing off. Measured in docs/benchmarks.md
// ("Runtime memory limit following the live heap", "A memory limit's
// slack that follows the collector's CPU").
const (
	liveFactor   = 1.25
	liveSlack    = 64 << 20
	minLiveSlack = 32 << 20
	maxGCShare   = 0.10
	gcWindow     = 5 * time.Second
)

// liveLimit is a soft memory limit for the Go runtime that follows the
// heap's live bytes: live x factor + slack, never above ceiling, the slack
// following the collector's share of the CPU (adjust).
type liveLimit struct {
	factor     float64
	slack      int64 // the slack now; it starts at what is given
	minSlack   int64
	ceiling    int64
	maxGCShare float64
	window     time.Duration // of the collector's share of the CPU
}

// at returns the limit for live bytes of live heap.
func (l *liveLimit) at(live int64) int64 {
	lf := int64(float64(live) * l.factor)
	if lf >= l.ceiling-l.slack {
		return l.ceiling
	}
	return lf + l.slack
}

// adjust sets the slack after a window in which the collector took share
// of the CPU: four times more above maxGCShare, half below half of it.
func (l *liveLimit) adjust(share float64) {
	switch {
	case share > l.maxGCShare:
		l.slack = min(l.slack, l.ceiling/4) * 4
	case share < l.maxGCShare/2:
		l.slack = max(l.slack/2, l.minSlack)
	}
}

// follow sets the runtime's memory limit from the live heap now and again
// after each garbage collection, until stop is closed.
func (l liveLimit) follow(stop <-chan struct{}) {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"},
	}
	w := gcShareWindow{cpu: l.window.Seconds() * float64(runtime.GOMAXPROCS(0))}
	set := func() {
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindFloat64 || s[2].Value.Kind() != metrics.KindFloat64 {
			return
		}
		if share, closed := w.update(s[1].Value.Float64(), s[2].Value.Float64()); closed {
			l.adjust(share)
		}
		debug.SetMemoryLimit(l.at(int64(s[0].Value.Uint64())))
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
// last window completed (0 until one is), and whether this call
// completed it.
func (w *gcShareWindow) update(gc, total float64) (share float64, closed bool) {
	if total-w.startAt >= w.cpu {
		w.share = (gc - w.startGC) / (total - w.startAt)
		w.startGC, w.startAt = gc, total
		closed = true
	}
	return w.share, closed
}

// gcSentinel is the object whose finalizer marks a collection's end; it
// holds a pointer so that it is not allocated among other tiny objects.
type gcSentinel struct{ _ *int }
