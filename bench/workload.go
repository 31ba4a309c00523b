package bench

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalidWorkload is wrapped by every error Workload.Validate returns.
var ErrInvalidWorkload = errors.New("bench: invalid workload")

// FieldNames are the ten fields of the cpu measurement, in the order they
// appear in a line and in Row.Ints and Row.Floats. It must not be modified.
var FieldNames = [NumFields]string{
	"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
	"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice",
}

// NumFields is the number of fields per row: a point is one field value.
const NumFields = 10

// Measurement is the measurement name every line carries.
const Measurement = "cpu"

// Defaults of Workload. They are the peers harness's defaults, so a zero
// Workload is the data set the published peer
// figures were measured on: 100 hosts x 8,640 ticks = 864,000 rows, 8,640,000
// points.
const (
	DefaultScale    = 100
	DefaultSeed     = 123
	DefaultInterval = 10 * time.Second
	DefaultSpan     = 24 * time.Hour
)

// DefaultStart is the first timestamp of a Workload whose Start is zero,
// 2016-01-01T00:00:00Z, the peers harness's default.
var DefaultStart = time.Date(2016, time.January, 1, 0, 0, 0, 0, time.UTC)

// ValueKind selects how field values are written.
type ValueKind uint8

const (
	// ValuesInt truncates each value toward zero and writes it as an integer
	// with an "i" suffix ("58i"), as TSBS's influx serializer does for cpu-only.
	// It is the default because that is the data set peers are compared on.
	ValuesInt ValueKind = 0
	// ValuesFloat writes each value as a full-precision float64 in its
	// shortest round-trip form: a much harder case for compression.
	ValuesFloat ValueKind = 1
)

// String returns "int" or "float", the names lpgen's -values flag takes.
func (k ValueKind) String() string {
	switch k {
	case ValuesInt:
		return "int"
	case ValuesFloat:
		return "float"
	}
	return fmt.Sprintf("ValueKind(%d)", uint8(k))
}

// Workload describes a TSBS cpu-only shaped data set, the one the peers
// harness's lpgen writes: Scale hosts, each carrying the ten TSBS devops
// tags and, every Interval from Start (inclusive) to End (exclusive), one row
// of the ten FieldNames. Each field is a random walk that starts at U(0,100)
// and moves by N(0,1) steps clamped to [0,100]. The same Workload always
// yields the same rows.
//
// The zero value is the default workload; see EnsureDefaults.
type Workload struct {
	// Scale is the number of hosts (series per field); 0 means DefaultScale.
	Scale int
	// Seed seeds the math/rand source all tags and values come from; 0 means
	// DefaultSeed, so seed 0 itself cannot be chosen.
	Seed int64
	// Start is the first timestamp; zero means DefaultStart.
	Start time.Time
	// End is the exclusive end of the time range; zero means Start plus
	// DefaultSpan (2016-01-02T00:00:00Z when Start is zero too). The last
	// tick is the last Start + k*Interval before End.
	End time.Time
	// Interval is the time between two rows of one host; 0 means
	// DefaultInterval.
	Interval time.Duration
	// Values selects integer or float field values; the zero value is
	// ValuesInt.
	Values ValueKind
}

// EnsureDefaults replaces zero fields by their defaults. It leaves invalid
// values (negative Scale or Interval) for Validate to report.
func (w *Workload) EnsureDefaults() {
	if w.Scale == 0 {
		w.Scale = DefaultScale
	}
	if w.Seed == 0 {
		w.Seed = DefaultSeed
	}
	if w.Start.IsZero() {
		w.Start = DefaultStart
	}
	if w.End.IsZero() {
		w.End = w.Start.Add(DefaultSpan)
	}
	if w.Interval == 0 {
		w.Interval = DefaultInterval
	}
}

// Nanosecond timestamps are int64 nanoseconds since the Unix epoch, so
// Start and End must lie between these instants.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// Validate reports, wrapping ErrInvalidWorkload, why the workload (after
// defaults) cannot be generated: a negative Scale or Interval, an unknown
// Values, a Start or End whose nanosecond timestamp overflows int64, or more
// points than an int can count.
func (w Workload) Validate() error {
	w.EnsureDefaults()
	_, err := w.ticks()
	return err
}

// ticks returns the number of timestamps per host of a defaulted workload.
func (w Workload) ticks() (int, error) {
	switch {
	case w.Scale < 0:
		return 0, fmt.Errorf("%w: scale %d is negative", ErrInvalidWorkload, w.Scale)
	case w.Interval < 0:
		return 0, fmt.Errorf("%w: interval %s is negative", ErrInvalidWorkload, w.Interval)
	case w.Values != ValuesInt && w.Values != ValuesFloat:
		return 0, fmt.Errorf("%w: unknown values kind %d", ErrInvalidWorkload, uint8(w.Values))
	case w.Start.Before(minTime) || w.Start.After(maxTime):
		return 0, fmt.Errorf("%w: start %s is outside the nanosecond timestamp range",
			ErrInvalidWorkload, w.Start.Format(time.RFC3339Nano))
	case w.End.Before(minTime) || w.End.After(maxTime):
		return 0, fmt.Errorf("%w: end %s is outside the nanosecond timestamp range",
			ErrInvalidWorkload, w.End.Format(time.RFC3339Nano))
	}
	start, end := w.Start.UnixNano(), w.End.UnixNano()
	if end <= start {
		return 0, nil
	}
	// end-start fits in a uint64 even when it overflows an int64.
	span, iv := uint64(end)-uint64(start), uint64(w.Interval)
	n := span / iv
	if span%iv != 0 {
		n++
	}
	if n > math.MaxInt/NumFields/uint64(max(w.Scale, 1)) {
		return 0, fmt.Errorf("%w: %d hosts x %d ticks x %d fields overflows an int",
			ErrInvalidWorkload, w.Scale, n, NumFields)
	}
	return int(n), nil
}

// Ticks returns the number of timestamps per host: the count of
// Start + k*Interval before End. It is 0 for an invalid workload.
func (w Workload) Ticks() int {
	w.EnsureDefaults()
	n, err := w.ticks()
	if err != nil {
		return 0
	}
	return n
}

// Rows returns the number of rows (lines) the workload yields, Scale x
// Ticks. It is 0 for an invalid workload.
func (w Workload) Rows() int {
	w.EnsureDefaults()
	n, err := w.ticks()
	if err != nil {
		return 0
	}
	return w.Scale * n
}

// Points returns the number of field values the workload yields,
// Rows x NumFields.
func (w Workload) Points() int {
	return w.Rows() * NumFields
}
