package promstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// The time, meta and value fields of a collection remote write stores
// samples in (API.md, "Prometheus").
const (
	TimeField  = "t"
	MetaField  = "labels"
	ValueField = "value"
)

// The errors of a read, checked with errors.Is. A door words them for its
// clients, with the setting that bounds them.
var (
	// ErrSampleLimit: the samples read pass Options.MaxSamples.
	ErrSampleLimit = errors.New("promstore: sample limit exceeded")
	// ErrMemoryLimit: the samples read would take more than the whole
	// memory budget (Options.Memory).
	ErrMemoryLimit = errors.New("promstore: the samples read would take more than the whole query memory")
	// ErrMemoryBusy: other requests hold the memory the samples need;
	// retrying later may succeed.
	ErrMemoryBusy = errors.New("promstore: other requests hold the memory the samples need")
)

// StorageError is an error of the storage met by a Querier's Select,
// LabelValues or LabelNames. Prometheus' engine passes the errors of its
// storage on as they are: a door tells them from the engine's own (of
// evaluation) by this type, and reads the cause with errors.Is and As.
type StorageError struct{ Err error }

func (e *StorageError) Error() string { return e.Err.Error() }
func (e *StorageError) Unwrap() error { return e.Err }

// Options configure a Queryable. The zero value of each field means its
// default.
type Options struct {
	// MaxSamples bounds the samples one Querier reads, across its
	// selects; past it a read fails with ErrSampleLimit. Default: no
	// bound of its own (Memory still bounds them).
	MaxSamples int64
	// Memory is the budget the samples and labels a Querier holds are
	// taken from until it is closed: the request memory every door
	// shares (command.Service.Bodies), so that queries cannot take what
	// ingest needs. Nil: not counted.
	Memory *command.Budget
	// Read, when set, counts the samples read as they are read (a
	// door's currentOp entry shows them while the query runs).
	Read *atomic.Int64
	// Scanned, when set, counts the collections a Querier read: each
	// Select, LabelValues or LabelNames that reached a collection's data
	// (its buckets or its series index for the labels) adds one. A
	// collection whose series' names cannot match the __name__ matchers
	// is not read and not counted.
	Scanned *atomic.Int64
}

// Queryable is a storage.Queryable over one time-series collection of a
// command.Service. A collection that does not exist holds no series. It is
// safe for concurrent use.
type Queryable struct {
	svc        *command.Service
	collection string
	opts       Options
	// fullReads: every Select reads its whole range, also where the
	// query needs only the last samples (readLast); for tests.
	fullReads bool
}

// New returns the Queryable of collection name of svc.
func New(svc *command.Service, name string, opts Options) (*Queryable, error) {
	if svc == nil {
		return nil, errors.New("promstore: a command.Service is required")
	}
	if err := timeseries.ValidateName(name); err != nil {
		return nil, err
	}
	if opts.MaxSamples < 0 {
		return nil, fmt.Errorf("promstore: MaxSamples %d is negative", opts.MaxSamples)
	}
	return &Queryable{svc: svc, collection: name, opts: opts}, nil
}

// Querier implements storage.Queryable: a Querier of the samples in
// [mint, maxt] (milliseconds since the epoch, both included). The caller
// closes it, which gives back the memory its samples held.
func (q *Queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return q.NewQuerier(mint, maxt), nil
}

// NewQuerier is Querier with its concrete type, whose Read serves remote
// read.
func (q *Queryable) NewQuerier(mint, maxt int64) *Querier {
	return &Querier{q: q, mint: mint, maxt: maxt, m: &meter{opts: q.opts}}
}

// Querier reads series of the Queryable's collection. Its reads count
// against the Queryable's limits together; it is safe for concurrent use.
type Querier struct {
	q          *Queryable
	mint, maxt int64
	// m counts what the Querier read against the limits: its own, or
	// the one all the Queriers of an AllQueryable's Querier share.
	m *meter
	// index: before a read, the __name__ matchers are checked against
	// the names the collection's series index holds (mayHold), as an
	// AllQueryable's Querier does of each collection it merges.
	index bool

	memoMu sync.Mutex
	// memo holds the series of each whole read (Select's default) by
	// its range and matchers: an expression naming one selector twice
	// (sum(x) / count(x)) reads it once. The series are the engine's to
	// read, never to change, until the Querier is closed.
	memo map[string][]Series
}

// meter counts the samples and memory of reads against Options' limits;
// several Queriers (one a collection) can share one, so that the limits
// bound their sum.
type meter struct {
	opts Options

	mu      sync.Mutex // guards the fields below
	samples int64      // read so far
	used    int64      // bytes of what has been read
	held    int64      // bytes taken from Options.Memory; at least used
	closed  bool
}

// reserveStep is the least memory taken from the budget at a time, so
// that a read takes the budget's lock once a megabyte, not once a series.
const reserveStep = 1 << 20

// charge counts n samples and b bytes read, failing past the limits.
func (qr *Querier) charge(n, b int64) error { return qr.m.charge(n, b) }

// charge counts n samples and b bytes read, failing past the limits.
func (m *meter) charge(n, b int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if max := m.opts.MaxSamples; max > 0 && m.samples+n > max {
		return fmt.Errorf("%w: more than %d samples", ErrSampleLimit, max)
	}
	m.samples += n
	m.used += b
	if c := m.opts.Read; c != nil && n > 0 {
		c.Add(n)
	}
	budget := m.opts.Memory
	if budget == nil || m.used <= m.held {
		return nil
	}
	if m.used > budget.Max() {
		return fmt.Errorf("%w: %d bytes, over the budget of %d", ErrMemoryLimit, m.used, budget.Max())
	}
	// A step ahead when it is free, else what is needed now.
	need := m.used - m.held
	for _, take := range []int64{max(need, reserveStep), need} {
		if budget.TryTake(take) {
			m.held += take
			return nil
		}
	}
	return fmt.Errorf("%w (%d bytes of %d)", ErrMemoryBusy, need, budget.Max())
}

// Samples returns the samples read so far (by every Querier sharing
// this one's limits).
func (qr *Querier) Samples() int64 {
	qr.m.mu.Lock()
	defer qr.m.mu.Unlock()
	return qr.m.samples
}

// Close gives back the memory the Querier's reads took (with those of
// every Querier sharing its limits, for an AllQueryable's); the series
// they returned must no longer be used. Closing twice is harmless.
func (qr *Querier) Close() error {
	qr.memoMu.Lock()
	qr.memo = nil
	qr.memoMu.Unlock()
	return qr.m.close()
}

// close gives back the memory the reads took.
func (m *meter) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if b := m.opts.Memory; b != nil {
		b.Give(m.held)
	}
	m.held = 0
	return nil
}

// Select implements storage.Querier: the series matching every matcher,
// in label set order (whatever sortSeries says: sorting is cheap next to
// the read), with their samples in the hints' range within the
// Querier's. A sample whose timestamp equals the one before it in its
// series is left out, as Prometheus' storage keeps one sample a
// timestamp. Hints whose Func is "series" ask for labels only (the
// series API): the series are read from the series index, without
// samples. Hints of last_over_time at one instant (lastInstant) get of
// each series only its samples from its last one's time on, or from an
// earlier time (readLast): all last_over_time looks at.
func (qr *Querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	start, end := qr.selectRange(hints)
	var (
		all []Series
		err error
	)
	switch {
	case hints != nil && hints.Func == "series":
		var sets []labels.Labels
		sets, err = qr.labelSets(ctx, start, end, ms)
		for _, ls := range sets {
			all = append(all, Series{Labels: ls})
		}
	case qr.fastLast(hints):
		all, err = qr.readLast(ctx, start, end, ms)
	default:
		all, err = qr.readOnce(ctx, start, end, ms)
	}
	return newSeriesSet(all, err, hints)
}

// readOnce is Read of [start, end] for ms, deduplicated (dedupe), or the
// series an earlier readOnce of the same range and matchers returned:
// they are counted against the limits once.
func (qr *Querier) readOnce(ctx context.Context, start, end int64, ms []*labels.Matcher) ([]Series, error) {
	key := selectKey(start, end, ms)
	qr.memoMu.Lock()
	all, ok := qr.memo[key]
	qr.memoMu.Unlock()
	if ok {
		return all, nil
	}
	all, err := qr.Read(ctx, start, end, ms...)
	if err != nil {
		return nil, err
	}
	dedupe(all)
	qr.memoMu.Lock()
	if qr.memo == nil {
		qr.memo = map[string][]Series{}
	}
	qr.memo[key] = all
	qr.memoMu.Unlock()
	return all, nil
}

// selectKey is the key of a read of [start, end] for ms in Querier.memo:
// the range, and each matcher's type, name and value in their order.
func selectKey(start, end int64, ms []*labels.Matcher) string {
	b := make([]byte, 0, 64)
	b = strconv.AppendInt(b, start, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, end, 10)
	for _, m := range ms {
		b = append(b, 0, byte(m.Type))
		b = strconv.AppendQuote(b, m.Name)
		b = strconv.AppendQuote(b, m.Value)
	}
	return string(b)
}

// newSeriesSet is the SeriesSet of a Select that read all, or failed
// with err.
func newSeriesSet(all []Series, err error, hints *storage.SelectHints) storage.SeriesSet {
	if err != nil {
		return storage.ErrSeriesSet(&StorageError{Err: err})
	}
	if hints != nil && hints.Limit > 0 && len(all) > hints.Limit {
		all = all[:hints.Limit]
	}
	return &seriesSet{all: all, i: -1}
}

// selectRange is the range of a Select of hints: the hints' within the
// Querier's.
func (qr *Querier) selectRange(hints *storage.SelectHints) (start, end int64) {
	start, end = qr.mint, qr.maxt
	if hints != nil {
		start, end = max(start, hints.Start), min(end, hints.End)
	}
	return start, end
}

// LabelValues implements storage.LabelQuerier: the values of label name
// among the series in the Querier's range that match every matcher,
// sorted.
func (qr *Querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	sets, err := qr.labelSets(ctx, qr.mint, qr.maxt, ms)
	if err != nil {
		return nil, nil, &StorageError{Err: err}
	}
	seen := map[string]struct{}{}
	out := []string{}
	for _, ls := range sets {
		if v := ls.Get(name); v != "" {
			if _, ok := seen[v]; !ok {
				seen[v] = struct{}{}
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	out, _ = hints.ApplyLimit(out)
	return out, nil, nil
}

// LabelNames implements storage.LabelQuerier: the label names of the
// series in the Querier's range that match every matcher, sorted.
func (qr *Querier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	sets, err := qr.labelSets(ctx, qr.mint, qr.maxt, ms)
	if err != nil {
		return nil, nil, &StorageError{Err: err}
	}
	seen := map[string]struct{}{}
	out := []string{}
	for _, ls := range sets {
		ls.Range(func(l labels.Label) {
			if _, ok := seen[l.Name]; !ok {
				seen[l.Name] = struct{}{}
				out = append(out, l.Name)
			}
		})
	}
	slices.Sort(out)
	out, _ = hints.ApplyLimit(out)
	return out, nil, nil
}

// collection returns the time and meta fields of the collection, or ok
// false when it does not exist (no series).
func (qr *Querier) collection(ctx context.Context) (timeField, metaField string, ok bool, err error) {
	info, err := qr.q.svc.DB().DescribeShallow(ctx, qr.q.collection)
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
		return "", "", false, nil // no series, as Prometheus holds none of a name it never saw
	}
	if err != nil {
		return "", "", false, err
	}
	ts := info.Options.TimeSeries
	if ts == nil || ts.MetaField == "" {
		return "", "", false, mongoerr.New(mongoerr.BadValue,
			"collection %q is not a time series with a metaField; Prometheus reads the labels from it", qr.q.collection)
	}
	return ts.TimeField, ts.MetaField, true, nil
}

// clampRange bounds a range of milliseconds to the engine's times
// (nanoseconds in an int64), reporting false when it is empty.
func clampRange(start, end int64) (int64, int64, bool) {
	const maxMs = math.MaxInt64 / int64(1e6)
	start, end = min(max(start, -maxMs), maxMs), min(max(end, -maxMs), maxMs)
	return start, end, start <= end
}
