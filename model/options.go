package model

// Granularity is a time-series collection's bucketing granularity.
type Granularity string

// The granularities of MongoDB, from finest to coarsest.
const (
	GranularitySeconds Granularity = "seconds"
	GranularityMinutes Granularity = "minutes"
	GranularityHours   Granularity = "hours"
)

// rank orders granularities from finest to coarsest; 0 is unknown.
func (g Granularity) Rank() int {
	switch g {
	case GranularitySeconds:
		return 1
	case GranularityMinutes:
		return 2
	case GranularityHours:
		return 3
	}
	return 0
}

// spanAndRounding returns MongoDB's bucket span and rounding for g, in
// seconds.
func (g Granularity) SpanAndRounding() (span, rounding int64) {
	switch g {
	case GranularityMinutes:
		return 86400, 3600
	case GranularityHours:
		return 2592000, 86400
	default:
		return 3600, 60
	}
}

// TimeSeriesOptions are the `timeseries` options of a collection.
type TimeSeriesOptions struct {
	TimeField string `json:"timeField"`
	MetaField string `json:"metaField,omitempty"`
	// Granularity is set unless custom bucket values are; after
	// EnsureDefaults exactly one of the two forms is in use.
	Granularity           Granularity `json:"granularity,omitempty"`
	BucketMaxSpanSeconds  int64       `json:"bucketMaxSpanSeconds,omitempty"`
	BucketRoundingSeconds int64       `json:"bucketRoundingSeconds,omitempty"`
}

// Span returns the maximum time span of one bucket in nanoseconds.
func (o *TimeSeriesOptions) Span() int64 {
	if o.Granularity == "" {
		return o.BucketMaxSpanSeconds * 1e9
	}
	s, _ := o.Granularity.SpanAndRounding()
	return s * 1e9
}

// Rounding returns the rounding of bucket minimum times in nanoseconds.
func (o *TimeSeriesOptions) Rounding() int64 {
	if o.Granularity == "" {
		return o.BucketRoundingSeconds * 1e9
	}
	_, r := o.Granularity.SpanAndRounding()
	return r * 1e9
}
