package timeseries

import (
	"math"
	"strings"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// columnRange is the interval a filter's top-level conjuncts allow for the
// values of one measurement field.
type columnRange struct {
	name string
	r    partialfilter.Range
}

// pruneRanges returns the bounded intervals the residual filter sets on
// measurement fields: a bucket whose control block shows no value of such a
// field inside its interval holds no row the filter matches.
func pruneRanges(residual *partialfilter.Filter) []columnRange {
	if residual == nil {
		return nil
	}
	var out []columnRange
	for _, p := range residual.Paths() {
		if strings.Contains(p, ".") || p == idField {
			continue // a sub-field, or _id (made, not stored, for most): not a column of its own
		}
		r, _ := residual.Range(p)
		if r.Empty || r.HasMin || r.HasMax {
			out = append(out, columnRange{name: p, r: r})
		}
	}
	return out
}

// pruned reports whether the bucket r reads can hold no row inside every
// range: a field it lacks (a bounded interval holds no missing value), a
// column of another type bracket than a numeric interval's, or numeric
// bounds (min, max of the control block) outside the interval.
func pruned(ranges []columnRange, r *bucket.Reader) bool {
	for i := range ranges {
		fr := &ranges[i]
		if fr.r.Empty {
			return true
		}
		fi := r.FieldIndex(fr.name)
		if fi < 0 {
			return true
		}
		info := r.Field(fi)
		if info.Count == 0 {
			return true
		}
		bound := fr.r.Min
		if !fr.r.HasMin {
			bound = fr.r.Max
		}
		if !isNumber(bound) {
			continue
		}
		var lo, hi any
		switch info.Type {
		case bucket.TypeInt, bucket.TypeInt32:
			lo, hi = info.MinInt, info.MaxInt
		case bucket.TypeFloat:
			if math.IsNaN(info.MinFloat) {
				return true // every value is NaN: none lies in a bounded range
			}
			lo, hi = info.MinFloat, info.MaxFloat
		default:
			return true // strings, booleans, dates: not numbers
		}
		if fr.r.HasMin {
			if c := partialfilter.Compare(hi, fr.r.Min); c < 0 || c == 0 && !fr.r.MinInclusive {
				return true
			}
		}
		if fr.r.HasMax {
			if c := partialfilter.Compare(lo, fr.r.Max); c > 0 || c == 0 && !fr.r.MaxInclusive {
				return true
			}
		}
	}
	return false
}

func isNumber(v any) bool {
	switch v.(type) {
	case int64, float64, int, int32:
		return true
	}
	return false
}
