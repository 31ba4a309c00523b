package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The default runtime memory limit follows the live heap. After each
// garbage collection serve sets it to liveFactor x the bytes that
// collection found live, plus liveSlack, at most the default sum
// (runtimeMemoryLimit): with GOGC at 100 alone the heap grows to twice
// what was live before the collector runs again, and the process keeps
// what it grew to. The slack keeps a small heap's collections as rare as
// GOGC makes them and leaves room for the runtime's own memory (stacks,
// metadata). When the collector took more than maxGCShare of the CPU
// (GOMAXPROCS x the time) since the previous collection, as on a large
// live heap (a million series), the limit goes back to the sum until a
// collection is cheaper again: the memory saved is not worth the CPU
// there. Measured in docs/benchmarks.md ("Runtime memory limit following
// the live heap").
const (
	liveFactor = 1.25
	liveSlack  = 64 << 20
	maxGCShare = 0.10
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
	var lastGC, lastTotal float64
	set := func() {
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindFloat64 || s[2].Value.Kind() != metrics.KindFloat64 {
			return
		}
		gc, total := s[1].Value.Float64(), s[2].Value.Float64()
		share := 0.0
		if total > lastTotal {
			share = (gc - lastGC) / (total - lastTotal)
		}
		lastGC, lastTotal = gc, total
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

// gcSentinel is the object whose finalizer marks a collection's end; it
// holds a pointer so that it is not allocated among other tiny objects.
type gcSentinel struct{ _ *int }
