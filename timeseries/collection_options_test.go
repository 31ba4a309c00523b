package timeseries

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/mongoerr"
)

func decodeJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return m
}

func TestCollectionOptions(t *testing.T) {
	for _, tc := range []struct {
		body string
		code mongoerr.Code // 0: valid
		msg  string
		span int64 // expected span in seconds when valid
	}{
		{`{"timeseries": {"timeField": "t"}}`, 0, "", 3600},
		{`{"timeseries": {"timeField": "t", "granularity": "seconds"}}`, 0, "", 3600},
		{`{"timeseries": {"timeField": "t", "granularity": "minutes"}}`, 0, "", 86400},
		{`{"timeseries": {"timeField": "t", "granularity": "hours"}}`, 0, "", 2592000},
		{`{"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 600, "bucketRoundingSeconds": 600}}`, 0, "", 600},
		{`{"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 1, "bucketRoundingSeconds": 1}}`, 0, "", 1},
		{`{"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 31536000, "bucketRoundingSeconds": 31536000}}`, 0, "", 31536000},
		// A granularity with its own span (and rounding), as MongoDB accepts.
		{`{"timeseries": {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}}`, 0, "", 3600},
		{`{"timeseries": {"timeField": "t", "granularity": "minutes", "bucketMaxSpanSeconds": 86400}}`, 0, "", 86400},
		{`{"timeseries": {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 2592000}}`, 0, "", 2592000},
		{`{"timeseries": {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 2592000, "bucketRoundingSeconds": 86400}}`, 0, "", 2592000},
		{`{"timeseries": {"timeField": "t", "metaField": "m"}, "expireAfterSeconds": 0}`, 0, "", 3600},
		{`{"timeseries": {"timeField": "t"}, "expireAfterSeconds": 2147483647}`, 0, "", 3600},
		{`{"timeseries": {"timeField": "t"}, "expireAfterSeconds": 10.7}`, 0, "", 3600},
		{`{}`, 0, "", 0},
		{`{"capped": true, "size": 4096}`, 0, "", 0},

		{`{"timeseries": {}}`, mongoerr.InvalidOptions, "timeField' is required", 0},
		{`{"timeseries": {"timeField": "t", "metaField": "t"}}`, mongoerr.InvalidOptions, "same as the 'timeField'", 0},
		{`{"timeseries": {"timeField": "t", "metaField": "_id"}}`, mongoerr.InvalidOptions, "cannot be '_id'", 0},
		{`{"timeseries": {"timeField": "t", "metaField": "a.b"}}`, mongoerr.InvalidOptions, "embedded fields", 0},
		{`{"timeseries": {"timeField": "a.b"}}`, mongoerr.InvalidOptions, "embedded fields", 0},
		{`{"timeseries": {"timeField": "t\u0000x"}}`, mongoerr.BadValue, "'timeField' cannot contain a NUL byte", 0},
		{`{"timeseries": {"timeField": "t", "metaField": "m\u0000"}}`, mongoerr.BadValue, "'metaField' cannot contain a NUL byte", 0},
		{`{"timeseries": {"timeField": "t", "granularity": "days"}}`, mongoerr.BadValue, "granularity", 0},
		{`{"timeseries": {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 60}}`, mongoerr.InvalidOptions, "other than the default of 2592000", 0},
		{`{"timeseries": {"timeField": "t", "granularity": "minutes", "bucketMaxSpanSeconds": 3600}}`, mongoerr.InvalidOptions, "other than the default of 86400", 0},
		{`{"timeseries": {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 3600, "bucketRoundingSeconds": 30}}`, mongoerr.InvalidOptions, "other than the default of 60", 0},
		{`{"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 30}}`, mongoerr.InvalidOptions, "must be equal", 0},
		{`{"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 60}}`, mongoerr.InvalidOptions, "must be given together", 0},
		{`{"timeseries": {"timeField": "t", "bucketRoundingSeconds": 60}}`, mongoerr.InvalidOptions, "must be given together", 0},
		{`{"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 31536001, "bucketRoundingSeconds": 31536001}}`, mongoerr.BadValue, "within [1, 31536000]; got 31536001", 0},
		{`{"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 0, "bucketRoundingSeconds": 0}}`, mongoerr.BadValue, "within [1", 0},
		{`{"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": -1, "bucketRoundingSeconds": -1}}`, mongoerr.BadValue, "within [1", 0},
		{`{"timeseries": {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 40000000}}`, mongoerr.BadValue, "within [1", 0},
		{`{"timeseries": {"timeField": "t", "bogus": 1}}`, mongoerr.UnknownField, "BSON field 'create.timeseries.bogus' is an unknown field.", 0},
		{`{"timeseries": ""}`, mongoerr.TypeMismatch, "'create.timeseries' is the wrong type 'string', expected type 'object'", 0},
		{`{"timeseries": {"timeField": 5}}`, mongoerr.TypeMismatch, "'create.timeseries.timeField' is the wrong type 'int'", 0},
		{`{"timeseries": {"timeField": "t", "metaField": 100}}`, mongoerr.TypeMismatch, "'create.timeseries.metaField' is the wrong type", 0},
		{`{"timeseries": {"timeField": "t", "granularity": 1}}`, mongoerr.TypeMismatch, "'create.timeseries.granularity' is the wrong type", 0},
		{`{"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": "60", "bucketRoundingSeconds": 60}}`, mongoerr.TypeMismatch, "expected types", 0},
		{`{"bogus": 1}`, mongoerr.InvalidOptions, "unknown collection option", 0},
		{`{"timeseries": {"timeField": "t"}, "expireAfterSeconds": -1}`, mongoerr.InvalidOptions, "within [0, 2147483647]", 0},
		{`{"timeseries": {"timeField": "t"}, "expireAfterSeconds": 2147483648}`, mongoerr.InvalidOptions, "within [0, 2147483647]", 0},
		{`{"timeseries": {"timeField": "t"}, "expireAfterSeconds": "10"}`, mongoerr.TypeMismatch, "'create.expireAfterSeconds' is the wrong type 'string'", 0},
		{`{"timeseries": {"timeField": "t"}, "expireAfterSeconds": ""}`, mongoerr.TypeMismatch, "wrong type 'string'", 0},
		{`{"timeseries": {"timeField": "t"}, "expireAfterSeconds": {}}`, mongoerr.TypeMismatch, "wrong type 'object'", 0},
		{`{"timeseries": {"timeField": "t"}, "expireAfterSeconds": true}`, mongoerr.TypeMismatch, "wrong type 'bool'", 0},
		{`{"timeseries": {"timeField": "t"}, "expireAfterSeconds": null}`, mongoerr.TypeMismatch, "wrong type 'null'", 0},
		{`{"capped": "yes", "size": 10}`, mongoerr.TypeMismatch, "'create.capped' is the wrong type", 0},
		{`{"expireAfterSeconds": 10}`, mongoerr.InvalidOptions, "needs a time-series collection", 0},
		{`{"timeseries": {"timeField": "t"}, "capped": true, "size": 10}`, mongoerr.InvalidOptions, "cannot be capped", 0},
	} {
		t.Run(tc.body, func(t *testing.T) {
			o, err := ParseCollectionOptions(decodeJSON(t, tc.body))
			if err == nil {
				o.EnsureDefaults()
				err = o.Validate()
			}
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if o.TimeSeries != nil && o.TimeSeries.Span() != tc.span*1e9 {
					t.Fatalf("span = %d s, want %d", o.TimeSeries.Span()/1e9, tc.span)
				}
				return
			}
			if got := mongoerr.CodeOf(err); got != tc.code {
				t.Fatalf("code = %d (%v), want %d", got, err, tc.code)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("message %q does not contain %q", err.Error(), tc.msg)
			}
		})
	}
}

func TestExpireAfterSecondsTruncates(t *testing.T) {
	v, err := ParseExpireAfterSeconds(10.9, mongoerr.CannotCreateIndex)
	if err != nil || v != 10 {
		t.Fatalf("got %d, %v; want 10", v, err)
	}
	if _, err := ParseExpireAfterSeconds(json.Number("NaN"), mongoerr.CannotCreateIndex); mongoerr.CodeOf(err) != mongoerr.CannotCreateIndex {
		t.Fatalf("NaN: got %v, want CannotCreateIndex", err)
	}
}

func TestRoundingBefore1970(t *testing.T) {
	for _, tc := range []struct{ t, r, want int64 }{
		{0, 60, 0}, {59, 60, 0}, {60, 60, 60}, {-1, 60, -60}, {-60, 60, -60}, {-61, 60, -120},
	} {
		if got := floorDiv(tc.t, tc.r); got != tc.want {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", tc.t, tc.r, got, tc.want)
		}
	}
}

func TestGranularityChange(t *testing.T) {
	sec := &model.TimeSeriesOptions{TimeField: "t", Granularity: model.GranularitySeconds}
	hrs := &model.TimeSeriesOptions{TimeField: "t", Granularity: model.GranularityHours}
	custom := &model.TimeSeriesOptions{TimeField: "t", BucketMaxSpanSeconds: 600, BucketRoundingSeconds: 600}
	for _, tc := range []struct {
		old  *model.TimeSeriesOptions
		next model.TimeSeriesOptions
		ok   bool
	}{
		{sec, model.TimeSeriesOptions{Granularity: model.GranularityMinutes}, true},
		{sec, model.TimeSeriesOptions{Granularity: model.GranularityHours}, true},
		{sec, model.TimeSeriesOptions{Granularity: model.GranularitySeconds}, true},
		{hrs, model.TimeSeriesOptions{Granularity: model.GranularityMinutes}, false},
		{hrs, model.TimeSeriesOptions{Granularity: model.GranularitySeconds}, false},
		{custom, model.TimeSeriesOptions{BucketMaxSpanSeconds: 1200, BucketRoundingSeconds: 1200}, true},
		{custom, model.TimeSeriesOptions{BucketMaxSpanSeconds: 300, BucketRoundingSeconds: 300}, false},
		{custom, model.TimeSeriesOptions{BucketMaxSpanSeconds: 1200, BucketRoundingSeconds: 600}, false},
		{sec, model.TimeSeriesOptions{TimeField: "other"}, false},
		{sec, model.TimeSeriesOptions{MetaField: "other"}, false},
	} {
		err := ValidateTimeSeriesChange(tc.old, &tc.next)
		if (err == nil) != tc.ok {
			t.Errorf("%+v -> %+v: err = %v, want ok=%v", *tc.old, tc.next, err, tc.ok)
		}
		if err != nil && mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
			t.Errorf("code = %d, want InvalidOptions", mongoerr.CodeOf(err))
		}
	}
}

func TestValidateName(t *testing.T) {
	for name, ok := range map[string]bool{
		"sensors": true, "a.b-c_1": true, strings.Repeat("x", 120): true,
		"": false, strings.Repeat("x", 121): false, "system.x": false, ".x": false, "a b": false, "a/b": false, "ü": false,
	} {
		if err := ValidateName(name); (err == nil) != ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}
