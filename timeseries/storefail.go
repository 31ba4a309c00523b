package timeseries

import (
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
)

// Pebble retries a failed flush or compaction at once and for ever, and
// reports each failure to its event listener only. On a filesystem that
// keeps refusing (full, remounted read-only, failing, the directory
// removed) that is a core spent retrying, nothing in the log at the
// default level, and a checkpoint (the last one at close among them)
// waiting for a flush that never ends. storeFailures is that listener: it
// logs failures at error level (a line per failureLogEvery at most, with
// the count of those not logged), slows the retries (a growing pause,
// failurePauseMax at most, in the listener Pebble calls before retrying),
// and tells waiters for a flush (flushStore) that the store keeps failing.
type storeFailures struct {
	log *slog.Logger

	mu          sync.Mutex
	consecutive int   // failures since the last flush or compaction that succeeded
	last        error // the last failure
	notify      chan struct{}
	logged      time.Time // when a failure was last logged
	unlogged    int       // failures since, not logged
}

const (
	failureLogEvery  = 10 * time.Second
	failurePauseMin  = 10 * time.Millisecond
	failurePauseMax  = 250 * time.Millisecond
	failuresToGiveUp = 5 // consecutive failures a flush waiter sees before it gives up (about 0.3 s of retries)
)

func newStoreFailures(log *slog.Logger) *storeFailures {
	return &storeFailures{log: log, notify: make(chan struct{})}
}

// listener returns Pebble's event listener over f.
func (f *storeFailures) listener() *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: f.failed,
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err == nil {
				f.succeeded()
			}
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			if info.Err == nil {
				f.succeeded()
			}
		},
	}
}

// failed records a failure of the store's background work, logs it, wakes
// flush waiters and pauses the retry. Pebble may call it holding its own
// mutex, so the pause also holds back the store's writers; they wait for
// the failing flush in any case.
func (f *storeFailures) failed(err error) {
	f.mu.Lock()
	f.consecutive++
	n := f.consecutive
	f.last = err
	close(f.notify)
	f.notify = make(chan struct{})
	now := time.Now()
	var unlogged int
	logNow := now.Sub(f.logged) >= failureLogEvery
	if logNow {
		f.logged, unlogged, f.unlogged = now, f.unlogged, 0
	} else {
		f.unlogged++
	}
	f.mu.Unlock()
	if logNow {
		f.log.Error("the store failed to write its files; retrying (every write stays in the log until a checkpoint completes)",
			"err", err.Error(), "consecutive", n, "notLogged", unlogged) // Error: slog writes an error's stack with %+v
	}
	time.Sleep(failurePause(n))
}

// failurePause is the pause after the n-th consecutive failure: 10 ms,
// doubling, at most failurePauseMax.
func failurePause(n int) time.Duration {
	return min(failurePauseMin<<min(n-1, 8), failurePauseMax)
}

func (f *storeFailures) succeeded() {
	f.mu.Lock()
	n := f.consecutive
	f.consecutive = 0
	f.mu.Unlock()
	if n > 0 {
		f.log.Info("the store writes its files again", "afterFailures", n)
	}
}

// watch returns a channel closed at the next failure.
func (f *storeFailures) watch() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notify
}

// state returns the consecutive failures and the last one.
func (f *storeFailures) state() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.consecutive, f.last
}
