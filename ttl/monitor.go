package ttl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Target names one rule of one collection for the monitor to work on.
type Target struct {
	Collection string
	// Index is the TTL index; "" for the collection's expireAfterSeconds.
	Index string
}

func (t Target) String() string {
	if t.Index == "" {
		return t.Collection
	}
	return t.Collection + "." + t.Index
}

// Budget bounds one batch of deletes.
type Budget struct {
	// Docs stops the batch once this many measurements are deleted; 0 means
	// no limit.
	Docs int64
	// Deadline stops the batch once the store's clock passes it; zero means
	// no limit.
	Deadline time.Time
}

// Batch is what one Expire call deleted.
type Batch struct {
	Docs, Buckets int64
	// More is true when the batch stopped at its budget with expired data
	// left for the target.
	More bool
}

// Store is what the monitor deletes from.
type Store interface {
	// Targets lists the TTL rules of every collection whose expiry is not
	// suspended.
	Targets(ctx context.Context) ([]Target, error)
	// Expire deletes, within budget, the buckets of t's series that have
	// expired at now. A target that no longer exists is an empty batch.
	Expire(ctx context.Context, t Target, now time.Time, budget Budget) (Batch, error)
}

// Clock is the monitor's time source, so that tests never sleep.
type Clock interface {
	Now() time.Time
	// After delivers the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Unlimited disables a budget of Options (MongoDB's 0).
const Unlimited = -1

// Options configure a Monitor. Zero values mean the defaults, which are
// MongoDB's.
type Options struct {
	Store Store
	Clock Clock
	// Sleep is the time between passes (ttlMonitorSleepSecs: 60 s).
	Sleep time.Duration
	// TargetDocs ends a rule's batch after this many measurements
	// (ttlIndexDeleteTargetDocs: 50000); Unlimited for none.
	TargetDocs int64
	// TargetTime ends a rule's batch after this long
	// (ttlIndexDeleteTargetTimeMS: 1 s); Unlimited for none.
	TargetTime time.Duration
	// SubPassTarget ends a sub-pass after this long, the next one starting
	// at once if work remains (ttlMonitorSubPassTargetSecs: 60 s);
	// Unlimited for none.
	SubPassTarget time.Duration
	// Disabled stops the background passes (ttlMonitorEnabled=false);
	// RunPass still works.
	Disabled bool
	Logger   *slog.Logger
}

// EnsureDefaults fills in zero values.
func (o *Options) EnsureDefaults() {
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Sleep == 0 {
		o.Sleep = 60 * time.Second
	}
	if o.TargetDocs == 0 {
		o.TargetDocs = 50000
	}
	if o.TargetTime == 0 {
		o.TargetTime = time.Second
	}
	if o.SubPassTarget == 0 {
		o.SubPassTarget = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("ttl: Options.Store is required"))
	}
	if o.Sleep < 0 {
		errs = append(errs, fmt.Errorf("ttl: Sleep %v must be positive", o.Sleep))
	}
	if o.TargetDocs < Unlimited || o.TargetTime < Unlimited || o.SubPassTarget < Unlimited {
		errs = append(errs, errors.New("ttl: budgets must be positive, or Unlimited"))
	}
	return errors.Join(errs...)
}

// Stats are the monitor's counters since it started.
type Stats struct {
	// DeletedDocuments counts measurements deleted (MongoDB counts buckets
	// of time-series collections here).
	DeletedDocuments int64 `json:"deletedDocuments"`
	DeletedBuckets   int64 `json:"deletedBuckets"`
	Passes           int64 `json:"passes"`
	SubPasses        int64 `json:"subPasses"`
}

// PassResult reports one pass.
type PassResult struct {
	DeletedDocuments int64         `json:"deletedDocuments"`
	DeletedBuckets   int64         `json:"deletedBuckets"`
	SubPasses        int64         `json:"subPasses"`
	Took             time.Duration `json:"-"`
}

// Op is the batch a monitor is running.
type Op struct {
	Target  Target
	Started time.Time
}

// Monitor deletes expired data in passes, in the background and on demand.
// One goroutine runs the passes; RunPass may be called concurrently with
// it and waits for a running pass to end first.
type Monitor struct {
	opts Options

	passMu sync.Mutex // one pass at a time
	stats  struct {
		docs, buckets, passes, subPasses atomic.Int64
	}
	current atomic.Pointer[Op]
	// disabled and sleep are the settings the background loop reads before
	// each wait (setParameter's ttlMonitorEnabled and ttlMonitorSleepSecs);
	// they start as Options.Disabled and Options.Sleep.
	disabled atomic.Bool
	sleep    atomic.Int64 // nanoseconds

	wake      chan struct{} // buffered(1)
	changed   chan struct{} // buffered(1): a setting changed, restart the wait
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a monitor. Start runs its background passes; Close stops
// them.
func New(opts Options) (*Monitor, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	m := &Monitor{opts: opts, wake: make(chan struct{}, 1), changed: make(chan struct{}, 1), done: make(chan struct{})}
	m.disabled.Store(opts.Disabled)
	m.sleep.Store(int64(opts.Sleep))
	return m, nil
}

// Enabled reports whether the background passes run (ttlMonitorEnabled).
func (m *Monitor) Enabled() bool { return !m.disabled.Load() }

// SetEnabled turns the background passes on or off while the monitor
// runs, as MongoDB's setParameter ttlMonitorEnabled does; a pass in
// progress finishes; turned on, the next pass comes after Sleep. RunPass
// works either way. It returns the previous setting.
func (m *Monitor) SetEnabled(on bool) (was bool) {
	was = !m.disabled.Swap(!on)
	m.settingChanged()
	return was
}

func (m *Monitor) settingChanged() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Sleep is the time between background passes (ttlMonitorSleepSecs).
func (m *Monitor) Sleep() time.Duration { return time.Duration(m.sleep.Load()) }

// SetSleep changes the time between background passes: the wait in
// progress starts again with d. d must be positive. It returns the
// previous value.
func (m *Monitor) SetSleep(d time.Duration) (was time.Duration, err error) {
	if d <= 0 {
		return m.Sleep(), fmt.Errorf("ttl: sleep %v must be positive", d)
	}
	was = time.Duration(m.sleep.Swap(int64(d)))
	m.settingChanged()
	return was, nil
}

// Start runs passes in the background, one every Sleep while the monitor
// is enabled. It must be called at most once.
func (m *Monitor) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.run(ctx)
}

// Close stops the background passes, interrupting a running one, and waits
// for them. Calling it twice, or without Start, is harmless.
func (m *Monitor) Close() {
	m.closeOnce.Do(func() {
		if m.cancel == nil {
			close(m.done)
			return
		}
		m.cancel()
		<-m.done
	})
}

// Wake asks for a pass now rather than after the sleep.
func (m *Monitor) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Monitor) run(ctx context.Context) {
	defer close(m.done)
	for {
		if m.disabled.Load() {
			// Parked until a setting changes or Close; Wake asks for
			// nothing then.
			select {
			case <-ctx.Done():
				return
			case <-m.changed:
			case <-m.wake:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
			continue
		case <-m.opts.Clock.After(m.Sleep()):
		case <-m.wake:
		}
		res, err := m.RunPass(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.opts.Logger.Error("TTL pass failed", "err", err)
			continue
		}
		if res.DeletedDocuments > 0 {
			m.opts.Logger.Info("TTL pass", "deletedDocuments", res.DeletedDocuments,
				"deletedBuckets", res.DeletedBuckets, "subPasses", res.SubPasses, "took", res.Took)
		}
	}
}

// RunPass runs one pass now and returns what it deleted. A pass is a series
// of sub-passes; each refreshes the rules and visits them round robin, one
// batch each, revisiting a rule whose batch stopped at a budget. A sub-pass
// ends when no work is left, or after SubPassTarget, and then the next one
// starts at once. The pass ends when nothing expired is left.
func (m *Monitor) RunPass(ctx context.Context) (PassResult, error) {
	m.passMu.Lock()
	defer m.passMu.Unlock()
	clock := m.opts.Clock
	start := clock.Now()
	var res PassResult
	m.stats.passes.Add(1)
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		m.stats.subPasses.Add(1)
		res.SubPasses++
		more, err := m.subPass(ctx, &res)
		if err != nil {
			return res, err
		}
		if !more {
			break
		}
	}
	res.Took = clock.Now().Sub(start)
	return res, nil
}

// subPass runs one sub-pass; more reports work left when it ended.
func (m *Monitor) subPass(ctx context.Context, res *PassResult) (more bool, err error) {
	clock := m.opts.Clock
	start := clock.Now()
	queue, err := m.opts.Store.Targets(ctx)
	if err != nil {
		return false, fmt.Errorf("ttl: list rules: %w", err)
	}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		t := queue[0]
		queue = queue[1:]
		now := clock.Now()
		budget := Budget{}
		if m.opts.TargetDocs > 0 {
			budget.Docs = m.opts.TargetDocs
		}
		if m.opts.TargetTime > 0 {
			budget.Deadline = now.Add(m.opts.TargetTime)
		}
		m.current.Store(&Op{Target: t, Started: now})
		b, err := m.opts.Store.Expire(ctx, t, now, budget)
		m.current.Store(nil)
		if err != nil {
			return false, fmt.Errorf("ttl: expire %s: %w", t, err)
		}
		res.DeletedDocuments += b.Docs
		res.DeletedBuckets += b.Buckets
		m.stats.docs.Add(b.Docs)
		m.stats.buckets.Add(b.Buckets)
		if b.More {
			queue = append(queue, t)
		}
		if m.opts.SubPassTarget > 0 && len(queue) > 0 && clock.Now().Sub(start) >= m.opts.SubPassTarget {
			return true, nil
		}
	}
	return false, nil
}

// Stats returns the counters.
func (m *Monitor) Stats() Stats {
	return Stats{
		DeletedDocuments: m.stats.docs.Load(),
		DeletedBuckets:   m.stats.buckets.Load(),
		Passes:           m.stats.passes.Load(),
		SubPasses:        m.stats.subPasses.Load(),
	}
}

// Current returns the batch running now, nil when none is.
func (m *Monitor) Current() *Op { return m.current.Load() }
