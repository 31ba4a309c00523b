package timeseries

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

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
	// Archive makes the collection-level TTL move expiring data to the
	// archive (Options.Archive, docs/archive.md) instead of deleting it.
	Archive bool  `json:"archive,omitempty"`
	Capped  bool  `json:"capped,omitempty"`
	Size    int64 `json:"size,omitempty"`
	Max     int64 `json:"max,omitempty"`
	// RollupOf makes a time-series collection a rollup of another
	// (RollupOptions makes these options).
	RollupOf *RollupSpec `json:"rollupOf,omitempty"`
}

// Equal reports whether o and p are the same options after defaults.
func (o CollectionOptions) Equal(p CollectionOptions) bool {
	a, _ := json.Marshal(o)
	b, _ := json.Marshal(p)
	return string(a) == string(b)
}

// EnsureDefaults fills in the defaults: granularity "seconds" when neither a
// granularity nor custom bucket values are given. A granularity given with
// its own bucket span (and rounding), which MongoDB accepts, is kept as the
// granularity alone: the same options as without them.
func (o *CollectionOptions) EnsureDefaults() {
	ts := o.TimeSeries
	if ts == nil {
		return
	}
	if ts.Granularity == "" && ts.BucketMaxSpanSeconds == 0 && ts.BucketRoundingSeconds == 0 {
		c := *ts
		c.Granularity = model.GranularitySeconds
		o.TimeSeries = &c
		return
	}
	if c, ok := granularityDefaults(ts); ok {
		o.TimeSeries = c
	}
}

// granularityDefaults returns ts without its bucket values when it names a
// granularity and its bucket values are that granularity's (or not given);
// ok is false otherwise, and ts is not changed.
func granularityDefaults(ts *model.TimeSeriesOptions) (*model.TimeSeriesOptions, bool) {
	if ts.Granularity.Rank() == 0 || (ts.BucketMaxSpanSeconds == 0 && ts.BucketRoundingSeconds == 0) {
		return nil, false
	}
	span, rounding := ts.Granularity.SpanAndRounding()
	if (ts.BucketMaxSpanSeconds != 0 && ts.BucketMaxSpanSeconds != span) ||
		(ts.BucketRoundingSeconds != 0 && ts.BucketRoundingSeconds != rounding) {
		return nil, false
	}
	c := *ts
	c.BucketMaxSpanSeconds, c.BucketRoundingSeconds = 0, 0
	return &c, true
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
	if o.Archive && (o.TimeSeries == nil || o.ExpireAfterSeconds == nil) {
		return invalid("'archive' applies to a time-series collection's 'expireAfterSeconds': give both")
	}
	if o.RollupOf != nil && o.TimeSeries == nil {
		return mongoerr.New(mongoerr.BadValue, "a rollup is a time-series collection")
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
	return validateBucketing(ts)
}

// validateBucketing checks a granularity and custom bucket values as
// MongoDB does: each bucket value within [1, MaxBucketSpanSeconds]
// (BadValue, 2); with a granularity, a bucket value only when it is the
// granularity's own; without one, bucketMaxSpanSeconds and
// bucketRoundingSeconds together and equal (InvalidOptions, 72).
func validateBucketing(ts *model.TimeSeriesOptions) error {
	if err := bucketRange("bucketMaxSpanSeconds", ts.BucketMaxSpanSeconds); err != nil {
		return err
	}
	if err := bucketRange("bucketRoundingSeconds", ts.BucketRoundingSeconds); err != nil {
		return err
	}
	custom := ts.BucketMaxSpanSeconds != 0 || ts.BucketRoundingSeconds != 0
	if ts.Granularity != "" {
		if ts.Granularity.Rank() == 0 {
			return mongoerr.New(mongoerr.BadValue, "'timeseries.granularity' must be one of \"seconds\", \"minutes\", \"hours\"; got %q", string(ts.Granularity))
		}
		if !custom {
			return nil
		}
		span, rounding := ts.Granularity.SpanAndRounding()
		if ts.BucketMaxSpanSeconds != 0 && ts.BucketMaxSpanSeconds != span {
			return invalid("'timeseries.bucketMaxSpanSeconds' cannot be set to a value other than the default of %d for the granularity %q; got %d",
				span, ts.Granularity, ts.BucketMaxSpanSeconds)
		}
		if ts.BucketRoundingSeconds != 0 && ts.BucketRoundingSeconds != rounding {
			return invalid("'timeseries.bucketRoundingSeconds' cannot be set to a value other than the default of %d for the granularity %q; got %d",
				rounding, ts.Granularity, ts.BucketRoundingSeconds)
		}
		return nil
	}
	if !custom {
		return nil
	}
	if ts.BucketMaxSpanSeconds == 0 || ts.BucketRoundingSeconds == 0 {
		return invalid("'timeseries.bucketMaxSpanSeconds' and 'timeseries.bucketRoundingSeconds' must be given together (and equal), or a 'granularity' instead")
	}
	if ts.BucketMaxSpanSeconds != ts.BucketRoundingSeconds {
		return invalid("'timeseries.bucketMaxSpanSeconds' (%d) and 'timeseries.bucketRoundingSeconds' (%d) must be equal",
			ts.BucketMaxSpanSeconds, ts.BucketRoundingSeconds)
	}
	return nil
}

// bucketRange checks a bucket value that was given (not 0): within
// [1, MaxBucketSpanSeconds], else BadValue (2), as MongoDB's command
// parser answers a value outside a field's range.
func bucketRange(field string, v int64) error {
	if v != 0 && (v < 1 || v > MaxBucketSpanSeconds) {
		return mongoerr.New(mongoerr.BadValue, "'timeseries.%s' must be within [1, %d]; got %d", field, MaxBucketSpanSeconds, v)
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

// ParseExpireAfterSecondsOption reads the expireAfterSeconds of a create or
// a collMod (field names it in messages: "create.expireAfterSeconds",
// "collMod.index.expireAfterSeconds"): a value that is not a number is
// TypeMismatch (14), as MongoDB's command parser answers a wrong type; a
// number outside [0, MaxExpireAfterSeconds], or NaN, is InvalidOptions
// (72).
func ParseExpireAfterSecondsOption(field string, v any) (int64, error) {
	if _, ok := jsonNumber(v); !ok {
		return 0, wrongType(field, v, numberTypes)
	}
	return ParseExpireAfterSeconds(v, mongoerr.InvalidOptions)
}

// ParseCollModExpire reads collMod's collection-level expireAfterSeconds:
// "off" (off true), or a number as ParseExpireAfterSecondsOption reads it.
// Another string is InvalidOptions (72), another type TypeMismatch (14), as
// in MongoDB.
func ParseCollModExpire(v any) (seconds *int64, off bool, err error) {
	if s, ok := v.(string); ok {
		if s == "off" {
			return nil, true, nil
		}
		return nil, false, invalid("'expireAfterSeconds' takes a number of seconds or \"off\"; got %q", s)
	}
	e, err := ParseExpireAfterSecondsOption("collMod.expireAfterSeconds", v)
	if err != nil {
		return nil, false, err
	}
	return &e, false, nil
}

// numberTypes are the BSON types MongoDB's command parser takes for a
// number, as its type errors list them.
const numberTypes = "[long, int, decimal, double]"

// wrongType is MongoDB's refusal of a command field of the wrong type:
// TypeMismatch (14), naming the field, the type given and the one wanted.
func wrongType(field string, v any, want string) error {
	if strings.HasPrefix(want, "[") {
		return mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s' is the wrong type '%s', expected types '%s'", field, typeName(v), want)
	}
	return mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type '%s'", field, typeName(v), want)
}

// typeName is the BSON type name of a value decoded from JSON or BSON.
func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case float64:
		return "double"
	case int, int64, json.Number:
		f, _ := jsonNumber(x)
		switch {
		case f != math.Trunc(f):
			return "double"
		case f >= math.MinInt32 && f <= math.MaxInt32:
			return "int"
		}
		return "long"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case time.Time:
		return "date"
	}
	return fmt.Sprintf("%T", v)
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
// options, refusing unknown options and wrong types as MongoDB's create
// does: a value of the wrong type is TypeMismatch (14), an unknown field of
// timeseries 40415, a bucket value out of range BadValue (2), an unknown
// option InvalidOptions (72). It does not fill in defaults or run Validate.
func ParseCollectionOptions(raw map[string]any) (CollectionOptions, error) {
	var o CollectionOptions
	for _, k := range sortedKeys(raw) {
		v := raw[k]
		switch k {
		case "timeseries":
			ts, err := parseTimeSeriesOptions(v, "create.timeseries")
			if err != nil {
				return o, err
			}
			o.TimeSeries = ts
		case "expireAfterSeconds":
			e, err := ParseExpireAfterSecondsOption("create.expireAfterSeconds", v)
			if err != nil {
				return o, err
			}
			o.ExpireAfterSeconds = &e
		case "archive":
			b, ok := v.(bool)
			if !ok {
				return o, wrongType("create.archive", v, "bool")
			}
			o.Archive = b
		case "capped":
			b, ok := v.(bool)
			if !ok {
				return o, wrongType("create.capped", v, "bool")
			}
			o.Capped = b
		case "size", "max":
			if _, ok := jsonNumber(v); !ok {
				return o, wrongType("create."+k, v, numberTypes)
			}
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

// ParseCollModTimeSeries reads the timeseries document of a collMod (the
// fields of create's, with the same refusals); what may change is for
// ValidateTimeSeriesChange to say.
func ParseCollModTimeSeries(v any) (*model.TimeSeriesOptions, error) {
	return parseTimeSeriesOptions(v, "collMod.timeseries")
}

// parseTimeSeriesOptions reads a timeseries document; field is its name
// in messages ("create.timeseries").
func parseTimeSeriesOptions(v any, field string) (*model.TimeSeriesOptions, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, wrongType(field, v, "object")
	}
	ts := &model.TimeSeriesOptions{}
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch k {
		case "timeField", "metaField", "granularity":
			s, ok := v.(string)
			if !ok {
				return nil, wrongType(field+"."+k, v, "string")
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
			f, ok := jsonNumber(v)
			if !ok {
				return nil, wrongType(field+"."+k, v, numberTypes)
			}
			if f != math.Trunc(f) || f < 1 || f > MaxBucketSpanSeconds {
				return nil, mongoerr.New(mongoerr.BadValue, "'timeseries.%s' must be a whole number within [1, %d]; got %s",
					k, MaxBucketSpanSeconds, strconv.FormatFloat(f, 'f', -1, 64))
			}
			if k == "bucketMaxSpanSeconds" {
				ts.BucketMaxSpanSeconds = int64(f)
			} else {
				ts.BucketRoundingSeconds = int64(f)
			}
		default:
			return nil, mongoerr.New(mongoerr.UnknownField, "BSON field '%s.%s' is an unknown field.", field, k)
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
// time and meta fields never change. A granularity may come with its own
// bucket values, as at create.
func ValidateTimeSeriesChange(old, next *model.TimeSeriesOptions) error {
	if next.TimeField != "" && next.TimeField != old.TimeField {
		return invalid("'timeseries.timeField' cannot be changed")
	}
	if next.MetaField != "" && next.MetaField != old.MetaField {
		return invalid("'timeseries.metaField' cannot be changed")
	}
	if err := validateBucketing(next); err != nil {
		return err
	}
	if next.Granularity != "" {
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
		if next.BucketMaxSpanSeconds*1e9 < old.Span() || next.BucketRoundingSeconds*1e9 < old.Rounding() {
			return invalid("custom bucket values can only grow: bucketMaxSpanSeconds %d -> %d refused", old.Span()/1e9, next.BucketMaxSpanSeconds)
		}
	}
	return nil
}
