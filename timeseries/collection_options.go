package timeseries

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/partialfilter"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// MaxBucketSpanSeconds bounds custom bucketMaxSpanSeconds and
// bucketRoundingSeconds: one year, as MongoDB.
const MaxBucketSpanSeconds = 31536000

// MaxExpireAfterSeconds is the largest expireAfterSeconds MongoDB accepts
// (the largest int32).
const MaxExpireAfterSeconds = math.MaxInt32

// CollectionOptions are the options a collection is created with. A nil
// TimeSeries makes a plain document collection.
type CollectionOptions struct {
	TimeSeries *model.TimeSeriesOptions `json:"timeseries,omitempty"`
	// ExpireAfterSeconds is the collection-level TTL of a time-series
	// collection; nil means none.
	ExpireAfterSeconds *int64 `json:"expireAfterSeconds,omitempty"`
	Capped             bool   `json:"capped,omitempty"`
	Size               int64  `json:"size,omitempty"`
	Max                int64  `json:"max,omitempty"`
}

// Equal reports whether o and p are the same options after defaults.
func (o CollectionOptions) Equal(p CollectionOptions) bool {
	a, _ := json.Marshal(o)
	b, _ := json.Marshal(p)
	return string(a) == string(b)
}

// EnsureDefaults fills in the defaults: granularity "seconds" when neither a
// granularity nor custom bucket values are given.
func (o *CollectionOptions) EnsureDefaults() {
	if ts := o.TimeSeries; ts != nil && ts.Granularity == "" && ts.BucketMaxSpanSeconds == 0 && ts.BucketRoundingSeconds == 0 {
		ts.Granularity = model.GranularitySeconds
	}
}

func invalid(format string, args ...any) error {
	return mongoerr.New(mongoerr.InvalidOptions, format, args...)
}

// Validate checks o against MongoDB's rules. Errors are *mongoerr.Error with
// code InvalidOptions (72) unless a rule says otherwise.
func (o *CollectionOptions) Validate() error {
	if o.ExpireAfterSeconds != nil {
		if o.TimeSeries == nil {
			return invalid("'expireAfterSeconds' at collection level needs a time-series collection; use a TTL index on a plain collection")
		}
		if v := *o.ExpireAfterSeconds; v < 0 || v > MaxExpireAfterSeconds {
			return invalid("'expireAfterSeconds' must be within [0, %d]; got %d", MaxExpireAfterSeconds, v)
		}
	}
	if o.TimeSeries == nil {
		if o.Capped && o.Size <= 0 {
			return invalid("a capped collection needs a 'size' greater than 0")
		}
		if !o.Capped && (o.Size != 0 || o.Max != 0) {
			return invalid("'size' and 'max' are only allowed on a capped collection")
		}
		return nil
	}
	if o.Capped {
		return invalid("a time-series collection cannot be capped")
	}
	ts := o.TimeSeries
	switch {
	case strings.IndexByte(ts.TimeField, 0) >= 0:
		return mongoerr.New(mongoerr.BadValue, "the 'timeField' cannot contain a NUL byte: %q", ts.TimeField)
	case strings.IndexByte(ts.MetaField, 0) >= 0:
		return mongoerr.New(mongoerr.BadValue, "the 'metaField' cannot contain a NUL byte: %q", ts.MetaField)
	case ts.TimeField == "":
		return invalid("'timeseries.timeField' is required")
	case strings.Contains(ts.TimeField, "."):
		return invalid("the 'timeField' cannot contain embedded fields ('.'): %q", ts.TimeField)
	case strings.HasPrefix(ts.TimeField, "$"):
		return invalid("the 'timeField' cannot start with '$': %q", ts.TimeField)
	case ts.TimeField == "_id":
		return invalid("the 'timeField' cannot be '_id'")
	}
	if ts.MetaField != "" {
		switch {
		case ts.MetaField == "_id":
			return invalid("the 'metaField' cannot be '_id'")
		case ts.MetaField == ts.TimeField:
			return invalid("the 'metaField' cannot be the same as the 'timeField' (%q)", ts.TimeField)
		case strings.Contains(ts.MetaField, "."):
			return invalid("the 'metaField' cannot contain embedded fields ('.'): %q", ts.MetaField)
		case strings.HasPrefix(ts.MetaField, "$"):
			return invalid("the 'metaField' cannot start with '$': %q", ts.MetaField)
		}
	}
	custom := ts.BucketMaxSpanSeconds != 0 || ts.BucketRoundingSeconds != 0
	if ts.Granularity != "" && custom {
		return invalid("'timeseries.granularity' cannot be combined with 'bucketMaxSpanSeconds' or 'bucketRoundingSeconds'")
	}
	if ts.Granularity != "" && ts.Granularity.Rank() == 0 {
		return mongoerr.New(mongoerr.BadValue, "'timeseries.granularity' must be one of \"seconds\", \"minutes\", \"hours\"; got %q", string(ts.Granularity))
	}
	if custom {
		return validateCustomBuckets(ts)
	}
	return nil
}

// validateCustomBuckets checks custom bucketMaxSpanSeconds and
// bucketRoundingSeconds: equal, within [1, MaxBucketSpanSeconds].
func validateCustomBuckets(ts *model.TimeSeriesOptions) error {
	if ts.BucketMaxSpanSeconds != ts.BucketRoundingSeconds {
		return invalid("'timeseries.bucketMaxSpanSeconds' (%d) and 'timeseries.bucketRoundingSeconds' (%d) must be equal",
			ts.BucketMaxSpanSeconds, ts.BucketRoundingSeconds)
	}
	if v := ts.BucketMaxSpanSeconds; v < 1 || v > MaxBucketSpanSeconds {
		return invalid("'timeseries.bucketMaxSpanSeconds' must be within [1, %d]; got %d", MaxBucketSpanSeconds, v)
	}
	return nil
}

var collectionNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,120}$`)

// ValidateName checks a collection name: 1-120 bytes of [A-Za-z0-9_.-], not
// starting with "system." or ".". Errors carry InvalidNamespace (73).
func ValidateName(name string) error {
	if !collectionNameRE.MatchString(name) {
		return mongoerr.New(mongoerr.InvalidNamespace, "invalid collection name %q: names are 1-120 bytes of [A-Za-z0-9_.-]", name)
	}
	if strings.HasPrefix(name, "system.") || strings.HasPrefix(name, ".") {
		return mongoerr.New(mongoerr.InvalidNamespace, "invalid collection name %q: names may not start with 'system.' or '.'", name)
	}
	return nil
}

// ParseExpireAfterSeconds converts a JSON value to an expireAfterSeconds:
// a number within [0, MaxExpireAfterSeconds]; a fractional value is truncated
// (MongoDB 7.3+). Anything else is refused with code, naming the rule.
func ParseExpireAfterSeconds(v any, code mongoerr.Code) (int64, error) {
	f, ok := jsonNumber(v)
	if !ok {
		return 0, mongoerr.New(code, "'expireAfterSeconds' must be a number within [0, %d]; got %s", MaxExpireAfterSeconds, describe(v))
	}
	if math.IsNaN(f) {
		return 0, mongoerr.New(code, "'expireAfterSeconds' must be a number within [0, %d]; got NaN", MaxExpireAfterSeconds)
	}
	if f < 0 || f >= MaxExpireAfterSeconds+1 {
		return 0, mongoerr.New(code, "'expireAfterSeconds' must be within [0, %d]; got %v", MaxExpireAfterSeconds, f)
	}
	return int64(f), nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprintf("%T", v)
		}
		return string(b)
	}
}

// ParseCollectionOptions converts the JSON body of a create request into
// options, refusing unknown options and wrong types. It does not fill in
// defaults or run Validate.
func ParseCollectionOptions(raw map[string]any) (CollectionOptions, error) {
	var o CollectionOptions
	for _, k := range sortedKeys(raw) {
		v := raw[k]
		switch k {
		case "timeseries":
			m, ok := v.(map[string]any)
			if !ok {
				return o, invalid("'timeseries' must be an object; got %s", describe(v))
			}
			ts, err := parseTimeSeriesOptions(m)
			if err != nil {
				return o, err
			}
			o.TimeSeries = ts
		case "expireAfterSeconds":
			e, err := ParseExpireAfterSeconds(v, mongoerr.InvalidOptions)
			if err != nil {
				return o, err
			}
			o.ExpireAfterSeconds = &e
		case "capped":
			b, ok := v.(bool)
			if !ok {
				return o, invalid("'capped' must be a boolean; got %s", describe(v))
			}
			o.Capped = b
		case "size", "max":
			n, err := positiveInt(k, v)
			if err != nil {
				return o, err
			}
			if k == "size" {
				o.Size = n
			} else {
				o.Max = n
			}
		default:
			return o, invalid("unknown collection option %q", k)
		}
	}
	return o, nil
}

func parseTimeSeriesOptions(m map[string]any) (*model.TimeSeriesOptions, error) {
	ts := &model.TimeSeriesOptions{}
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch k {
		case "timeField", "metaField", "granularity":
			s, ok := v.(string)
			if !ok {
				return nil, invalid("'timeseries.%s' must be a string; got %s", k, describe(v))
			}
			switch k {
			case "timeField":
				ts.TimeField = s
			case "metaField":
				if s == "" {
					return nil, invalid("'timeseries.metaField' cannot be empty")
				}
				ts.MetaField = s
			default:
				ts.Granularity = model.Granularity(s)
				if ts.Granularity.Rank() == 0 {
					return nil, mongoerr.New(mongoerr.BadValue, "'timeseries.granularity' must be one of \"seconds\", \"minutes\", \"hours\"; got %q", s)
				}
			}
		case "bucketMaxSpanSeconds", "bucketRoundingSeconds":
			n, err := positiveInt("timeseries."+k, v)
			if err != nil {
				return nil, err
			}
			if n == 0 {
				return nil, invalid("'timeseries.%s' must be within [1, %d]; got 0", k, MaxBucketSpanSeconds)
			}
			if k == "bucketMaxSpanSeconds" {
				ts.BucketMaxSpanSeconds = n
			} else {
				ts.BucketRoundingSeconds = n
			}
		default:
			return nil, invalid("unknown time-series option 'timeseries.%s'", k)
		}
	}
	return ts, nil
}

// positiveInt accepts a JSON integer >= 0.
func positiveInt(name string, v any) (int64, error) {
	f, ok := jsonNumber(v)
	if !ok {
		return 0, invalid("'%s' must be a number; got %s", name, describe(v))
	}
	if f != math.Trunc(f) || f < 0 || f > math.MaxInt64/2 {
		return 0, invalid("'%s' must be a non-negative integer; got %v", name, f)
	}
	return int64(f), nil
}

// jsonNumber returns v as a float64 if it is a JSON number (as decoded
// with or without UseNumber) or a Go integer.
func jsonNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case partialfilter.Decimal128:
		return n.Float64(), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// ValidateTimeSeriesChange checks a collMod of time-series options: the
// granularity only becomes coarser, custom bucket values only grow, and the
// time and meta fields never change.
func ValidateTimeSeriesChange(old, next *model.TimeSeriesOptions) error {
	if next.TimeField != "" && next.TimeField != old.TimeField {
		return invalid("'timeseries.timeField' cannot be changed")
	}
	if next.MetaField != "" && next.MetaField != old.MetaField {
		return invalid("'timeseries.metaField' cannot be changed")
	}
	if next.Granularity != "" {
		if next.BucketMaxSpanSeconds != 0 || next.BucketRoundingSeconds != 0 {
			return invalid("'timeseries.granularity' cannot be combined with 'bucketMaxSpanSeconds' or 'bucketRoundingSeconds'")
		}
		if old.Granularity == "" {
			// From custom bucketing to a granularity: allowed when the span
			// does not shrink.
			if s, _ := next.Granularity.SpanAndRounding(); s*1e9 < old.Span() {
				return invalid("'timeseries.granularity' %q would shrink the bucket span from %d s", next.Granularity, old.Span()/1e9)
			}
			return nil
		}
		if next.Granularity.Rank() < old.Granularity.Rank() {
			return invalid("'timeseries.granularity' can only become coarser: %q -> %q refused", old.Granularity, next.Granularity)
		}
		return nil
	}
	if next.BucketMaxSpanSeconds != 0 || next.BucketRoundingSeconds != 0 {
		if err := validateCustomBuckets(next); err != nil {
			return err
		}
		if next.BucketMaxSpanSeconds*1e9 < old.Span() || next.BucketRoundingSeconds*1e9 < old.Rounding() {
			return invalid("custom bucket values can only grow: bucketMaxSpanSeconds %d -> %d refused", old.Span()/1e9, next.BucketMaxSpanSeconds)
		}
	}
	return nil
}
