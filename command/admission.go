package command

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// Ingest bounds the writes of measurements and documents being stored at
// once, whichever door they came in by, and those waiting for a turn, so
// that the server never queues without limit: past the queue a write is
// refused (IngressRequestRateLimitExceeded, HTTP 429), and one that waits
// too long too (HTTP 503). It is safe for concurrent use.
type Ingest struct {
	slots   chan struct{}
	waiting atomic.Int64
	maxWait int64
	// timeout bounds the wait for a slot.
	timeout time.Duration
}

// ingestWait is how long a write waits for a slot: an ingest slot is held
// for one batch, milliseconds, so a wait this long means the server is
// overloaded.
const ingestWait = 30 * time.Second

func newIngest(slots, queue int) *Ingest {
	return &Ingest{slots: make(chan struct{}, slots), maxWait: int64(max(queue, 0)), timeout: ingestWait}
}

// ErrIngestQueueFull and ErrIngestTimeout are the refusals of Acquire,
// both IngressRequestRateLimitExceeded; the second comes after a wait,
// when the server is overloaded (HTTP 503 rather than 429).
var (
	ErrIngestQueueFull = mongoerr.New(mongoerr.IngressRequestRateLimitExceeded, "too many ingest requests in progress; retry later")
	ErrIngestTimeout   = &ingestTimeout{mongoerr.New(mongoerr.IngressRequestRateLimitExceeded, "the ingest queue did not drain in time; retry later")}
)

// ingestTimeout tells ErrIngestTimeout from other errors of its code.
type ingestTimeout struct{ err *mongoerr.Error }

func (e *ingestTimeout) Error() string { return e.err.Message }
func (e *ingestTimeout) Unwrap() error { return e.err }

// Acquire takes a slot, waiting in the bounded queue if need be: at once
// ErrIngestQueueFull when the queue is full, ErrIngestTimeout after the
// wait, or ctx's error. The caller must Release a slot it got.
func (a *Ingest) Acquire(ctx context.Context) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	default:
	}
	if a.waiting.Add(1) > a.maxWait {
		a.waiting.Add(-1)
		return ErrIngestQueueFull
	}
	defer a.waiting.Add(-1)
	t := time.NewTimer(a.timeout)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-t.C:
		return ErrIngestTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release gives a slot back.
func (a *Ingest) Release() { <-a.slots }

// InUse returns the slots taken.
func (a *Ingest) InUse() int { return len(a.slots) }

// Waiting returns the writes waiting for a slot.
func (a *Ingest) Waiting() int64 { return a.waiting.Load() }

// Slots returns the number of slots.
func (a *Ingest) Slots() int { return cap(a.slots) }

// QueueLimit returns how many writes may wait for a slot.
func (a *Ingest) QueueLimit() int64 { return a.maxWait }
