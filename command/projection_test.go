package command

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

func TestApply(t *testing.T) {
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}
	fields := []string{"c", "_id", "a", "b"} // the order the collection saw them in
	for _, c := range []struct {
		name string
		p    map[string]any
		want timeseries.FindOptions
	}{
		{"none", nil, timeseries.FindOptions{}},
		{"_id included", map[string]any{"_id": 1}, timeseries.FindOptions{}},
		{"_id excluded", map[string]any{"_id": 0}, timeseries.FindOptions{Fields: []string{"c", "a", "b"}}},
		{"inclusion", map[string]any{"b": json.Number("1"), "t": true, "_id": 0}, timeseries.FindOptions{Fields: []string{"b"}, OmitMeta: true}},
		{"inclusion of the meta", map[string]any{"m": int32(1), "a": int64(2)}, timeseries.FindOptions{Fields: []string{"_id", "a"}, OmitTime: true}},
		{"inclusion in the collection's order", map[string]any{"b": 1, "c": 1, "a": 1}, timeseries.FindOptions{Fields: []string{"c", "_id", "a", "b"}, OmitTime: true, OmitMeta: true}},
		{"exclusion", map[string]any{"b": 0.0, "m": false}, timeseries.FindOptions{Fields: []string{"c", "_id", "a"}, OmitMeta: true}},
		{"exclusion of the time", map[string]any{"t": json.Number("0"), "_id": 1}, timeseries.FindOptions{Fields: []string{"c", "_id", "a", "b"}, OmitTime: true}},
		{"exclusion of _id", map[string]any{"t": json.Number("0"), "_id": 0}, timeseries.FindOptions{Fields: []string{"c", "a", "b"}, OmitTime: true}},
	} {
		s, err := ParseProjection(c.p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got timeseries.FindOptions
		s.Apply(&got, ts, fields)
		if !slices.Equal(got.Fields, c.want.Fields) || (got.Fields == nil) != (c.want.Fields == nil) ||
			got.OmitTime != c.want.OmitTime || got.OmitMeta != c.want.OmitMeta {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, p := range []map[string]any{
		{"a": 1, "b": 0},
		{"a": "yes"},
		{"a": json.Number("1e999")},
		{"a": map[string]any{"$slice": 1}},
		{"a.b": 1},
		{"$a": 1},
	} {
		_, err := ParseProjection(p)
		var me *mongoerr.Error
		if !errors.As(err, &me) || me.Code != mongoerr.BadValue {
			t.Errorf("ParseProjection(%v) = %v, want BadValue", p, err)
		}
	}
}
