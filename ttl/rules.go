package ttl

import (
	"math"
	"time"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// The 1970-2038 rule: a collection holding a measurement outside
// [MinTime, MaxTime] expires nothing (SPEC 2.4, as MongoDB does, since its
// TTL works on 32-bit seconds).
var (
	MinTime = time.Unix(0, 0).UTC()
	MaxTime = time.Unix(math.MaxInt32, 0).UTC()
)

// MinTimeNanos and MaxTimeNanos are MinTime and MaxTime in nanoseconds since
// the epoch.
const (
	MinTimeNanos int64 = 0
	MaxTimeNanos int64 = math.MaxInt32 * int64(time.Second)
)

// InRange reports whether a measurement time (ns) is inside the range TTL
// works on.
func InRange(t int64) bool { return t >= MinTimeNanos && t <= MaxTimeNanos }

// Rule is one source of expiry of a collection: its expireAfterSeconds or a
// partial TTL index.
type Rule struct {
	// Index is the name of the TTL index; "" for the collection's own
	// expireAfterSeconds.
	Index string
	// ExpireAfterSeconds is the rule's TTL, 0..math.MaxInt32.
	ExpireAfterSeconds int64
	// Filter selects the series the rule applies to, evaluated on the
	// document {metaField: meta}; nil applies to every series.
	Filter *partialfilter.Filter
	// Archive makes the rule move expiring data to the archive instead of
	// deleting it.
	Archive bool
}

// Matches reports whether r applies to the series whose meta document
// (metaField: meta value) is doc.
func (r *Rule) Matches(doc map[string]any) bool {
	return r.Filter == nil || r.Filter.Match(doc)
}

// Rules are the rules of one collection.
type Rules []Rule

// Effective returns the TTL of a series: the smallest ExpireAfterSeconds
// among the rules that match its meta document. ok is false when no rule
// applies: the series never expires.
func (rs Rules) Effective(doc map[string]any) (seconds int64, ok bool) {
	for i := range rs {
		if rs[i].Matches(doc) && (!ok || rs[i].ExpireAfterSeconds < seconds) {
			seconds, ok = rs[i].ExpireAfterSeconds, true
		}
	}
	return seconds, ok
}

// Cutoff returns the time (ns) below which measurements with TTL seconds
// have expired at now: a measurement at t has expired when now > t + TTL,
// that is when t < Cutoff(now, seconds). A bucket has expired when its
// newest measurement has.
func Cutoff(now time.Time, seconds int64) int64 {
	n := now.UnixNano()
	d := seconds * int64(time.Second) // seconds <= MaxInt32: no overflow
	if n < math.MinInt64+d {
		return math.MinInt64
	}
	return n - d
}

// Expired reports whether a measurement (or a bucket, by its newest
// measurement) at t with TTL seconds has expired at now.
func Expired(t int64, seconds int64, now time.Time) bool {
	return t < Cutoff(now, seconds)
}
