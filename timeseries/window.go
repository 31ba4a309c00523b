package timeseries

import (
	"math"
	"math/big"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// windowing maps the times of an aggregate to its windows. A window is
// named by a key, which orders windows as their starts do:
//
//   - fixed windows of a width placed at origin + k*width for every
//     integer k: the key is the window's start in nanoseconds
//     (math.MinInt64 when that start lies before int64's range);
//   - calendar windows of months months (UTC), placed at the origin's
//     month + k*months: the key is k;
//   - one window over all time (whole): the key is 0.
//
// Keys of consecutive windows differ by step().
type windowing struct {
	width int64 // fixed: the width in ns; calendar and whole: 0
	off   int64 // fixed: the origin modulo the width, in [0, width)
	// months is the calendar windows' length; originMonth the month they
	// are counted from, in months since January 1970.
	months, originMonth int64
	whole               bool
}

// maxWindowMonths bounds AggregateOptions.Months: far more than the range
// of dates, so that month arithmetic cannot overflow.
const maxWindowMonths = 1 << 31

// newWindowing places windows of a width at origin + k*width for every
// integer k. off is the origin modulo the width, computed from the
// origin's seconds and nanoseconds: an origin outside the range of int64
// nanoseconds (before 1678 or after 2262) aligns windows exactly.
func newWindowing(origin time.Time, width int64) windowing {
	w := windowing{width: width}
	if !origin.IsZero() {
		ns := new(big.Int).Mul(big.NewInt(origin.Unix()), big.NewInt(1e9))
		ns.Add(ns, big.NewInt(int64(origin.Nanosecond())))
		w.off = ns.Mod(ns, big.NewInt(width)).Int64() // Euclidean: in [0, width)
	}
	return w
}

// aggWindowing checks the windows opts asks for and returns them.
func aggWindowing(opts *AggregateOptions) (windowing, error) {
	switch {
	case opts.Months < 0 || opts.Months > maxWindowMonths:
		return windowing{}, mongoerr.New(mongoerr.BadValue, "'months' must be between 1 and %d; got %d", maxWindowMonths, opts.Months)
	case opts.Months > 0 && opts.WholeRange:
		return windowing{}, mongoerr.New(mongoerr.BadValue, "calendar windows ('months') and one window over the whole range exclude each other")
	case (opts.Months > 0 || opts.WholeRange) && opts.Window != 0:
		return windowing{}, mongoerr.New(mongoerr.BadValue, "'window' must be zero with calendar windows or one window over the whole range; got %v", opts.Window)
	case opts.WholeRange:
		return windowing{whole: true}, nil
	case opts.Months > 0:
		w := windowing{months: int64(opts.Months)}
		if o := opts.Origin; !o.IsZero() {
			o = o.UTC()
			if o.Day() != 1 || o.Hour() != 0 || o.Minute() != 0 || o.Second() != 0 || o.Nanosecond() != 0 {
				return windowing{}, mongoerr.New(mongoerr.BadValue, "the origin of calendar windows must be the first instant of a month (UTC); got %s", o.Format(time.RFC3339Nano))
			}
			w.originMonth = int64(o.Year()-1970)*12 + int64(o.Month()-1)
		}
		return w, nil
	case opts.Window <= 0:
		return windowing{}, mongoerr.New(mongoerr.BadValue, "'window' must be a positive duration; got %v", opts.Window)
	}
	return newWindowing(opts.Origin, int64(opts.Window)), nil
}

// step is the difference between the keys of consecutive windows.
func (w windowing) step() int64 {
	if w.width > 0 {
		return w.width
	}
	return 1
}

// key returns the key of the window holding t.
func (w *windowing) key(t int64) int64 {
	if w.width > 0 {
		return w.start(t)
	}
	return w.otherKey(t)
}

// window returns the key of the window holding t and its first and last
// instants, as bounds does; lo > hi when they are not known. It is key
// and bounds in one call, for the paths that fold rows.
func (w *windowing) window(t int64) (k, lo, hi int64) {
	if w.width > 0 {
		k = w.start(t)
		if k != math.MinInt64 && k <= math.MaxInt64-w.width {
			return k, k, k + w.width - 1
		}
	} else {
		k = w.otherKey(t)
	}
	lo, hi, ok := w.otherBounds(k)
	if !ok {
		return k, 1, 0
	}
	return k, lo, hi
}

// otherKey is key for calendar windows and the window over all time.
func (w *windowing) otherKey(t int64) int64 {
	if w.whole {
		return 0
	}
	return divFloor(monthOf(t)-w.originMonth, w.months)
}

// start returns the start of the fixed window holding t; math.MinInt64
// when that start lies before int64's range.
func (w windowing) start(t int64) int64 {
	m := t % w.width
	if m < 0 {
		m += w.width
	}
	r := m - w.off // in (-width, width)
	if r < 0 {
		r += w.width
	}
	if t < math.MinInt64+r {
		return math.MinInt64
	}
	return t - r
}

// bounds returns the first and last instants of the window of key k,
// clamped to int64's range; ok is false when they are not known (a fixed
// window starting before int64's range).
func (w *windowing) bounds(k int64) (lo, hi int64, ok bool) {
	if w.width > 0 && k != math.MinInt64 && k <= math.MaxInt64-w.width {
		return k, k + w.width - 1, true
	}
	return w.otherBounds(k)
}

// otherBounds is bounds for the windows at the ends of int64's range, for
// calendar windows and for the window over all time.
func (w *windowing) otherBounds(k int64) (lo, hi int64, ok bool) {
	switch {
	case w.width > 0:
		if k == math.MinInt64 {
			return 0, 0, false
		}
		return k, math.MaxInt64, true
	case w.whole:
		return math.MinInt64, math.MaxInt64, true
	}
	first := w.originMonth + k*w.months
	lo = monthStart(first)
	hi = math.MaxInt64
	if next := monthStart(first + w.months); next != math.MaxInt64 {
		hi = next - 1
	}
	return lo, hi, true
}

// startTime is the time the result gives the window of key k: its start,
// math.MinInt64 when that lies before int64's range; 0 (the epoch) for
// the window over all time, which has no start.
func (w *windowing) startTime(k int64) int64 {
	switch {
	case w.width > 0:
		return k
	case w.whole:
		return 0
	}
	return monthStart(w.originMonth + k*w.months)
}

// The months, since January 1970, of the earliest and latest times of
// int64 nanoseconds.
var (
	minNanosMonth = monthOf(math.MinInt64)
	maxNanosMonth = monthOf(math.MaxInt64)
)

// monthOf returns the month (UTC) of the time t in nanoseconds, counted
// from January 1970.
func monthOf(t int64) int64 {
	y, m, _ := time.Unix(0, t).UTC().Date()
	return int64(y-1970)*12 + int64(m-1)
}

// monthStart returns the first instant, in nanoseconds, of month m
// counted from January 1970: math.MinInt64 when it lies before int64's
// range, math.MaxInt64 when after.
func monthStart(m int64) int64 {
	switch {
	case m <= minNanosMonth:
		return math.MinInt64
	case m > maxNanosMonth:
		return math.MaxInt64
	}
	return time.Date(1970+int(divFloor(m, 12)), time.Month(m-12*divFloor(m, 12)+1), 1, 0, 0, 0, 0, time.UTC).UnixNano()
}

// divFloor is a/b rounded toward -inf, for b > 0.
func divFloor(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
