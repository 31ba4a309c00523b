package pipeline

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzParseSetWindowFields parses specs from JSON and runs those that
// parse over a few documents: neither may panic, and a spec that parses
// runs or fails with an error.
func FuzzParseSetWindowFields(f *testing.F) {
	for _, s := range []string{
		`{"partitionBy": "$p", "sortBy": {"t": 1}, "output": {"a": {"$avg": "$v", "window": {"documents": [-1, 1]}}}}`,
		`{"sortBy": {"t": -1}, "output": {"a": {"$sum": "$v", "window": {"documents": ["unbounded", "current"]}}}}`,
		`{"sortBy": {"t": 1}, "output": {"a": {"$min": "$v", "window": {"range": [-2.5, "current"]}}, "b": {"$max": "$v"}}}`,
		`{"sortBy": {"d": 1}, "output": {"a": {"$count": {}, "window": {"range": [-1, 1], "unit": "hour"}}}}`,
		`{"sortBy": {"t": 1}, "output": {"a": {"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}}}}`,
		`{"sortBy": {"d": 1}, "output": {"a": {"$integral": {"input": "$v", "unit": "second"}, "window": {"range": ["unbounded", 0], "unit": "minute"}}}}`,
		`{"sortBy": {"t": 1}, "output": {"a": {"$shift": {"output": "$v", "by": -2, "default": 0}}}}`,
		`{"sortBy": {"t": 1}, "output": {"a": {"$expMovingAvg": {"input": "$v", "N": 3}}, "b": {"$expMovingAvg": {"input": "$v", "alpha": 0.2}}}}`,
		`{"sortBy": {"t": 1}, "output": {"a.b": {"$first": "$v"}, "c": {"$last": {"$literal": 5}}}}`,
		`{"output": {"a": {"$sum": 1}}}`,
		`"invalid"`, `{"what": 1}`, `{"sortBy": {"t": 1, "u": 1}, "output": {}}`, `{"output": {"a": {"$summ": 1}}}`,
		`{"sortBy": {"t": 1}, "output": {"a": {"$sum": "$v", "window": {"documents": [1, -1]}}}}`,
		`{"sortBy": {"t": 1}, "output": {"a": {"$sum": "$v", "window": {"range": [1e308, 1e308], "unit": "week"}}}}`,
		`{"sortBy": {"t": 1}, "output": {"a": {"$shift": {"output": "$v", "by": 1e10}}}}`,
		`{"output": {"a": {"$sum": 1}, "a.b": {"$sum": 1}}}`, `{"partitionBy": "$", "output": {}}`,
	} {
		f.Add(s)
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		var arg any
		if json.Unmarshal([]byte(s), &arg) != nil {
			return
		}
		spec, err := ParseSetWindowFields(arg)
		if err != nil {
			if spec != nil {
				t.Fatalf("%s: a spec and an error", s)
			}
			return
		}
		docs := []Doc{
			{"p": "a", "t": 1.0, "d": base, "v": 1.0},
			{"p": "a", "t": 1.0, "d": base, "v": "x"},
			{"p": "b", "t": 3.0, "d": base.Add(time.Hour), "v": int32(2)},
			{"p": nil, "d": base.Add(time.Minute)},
			{"t": "s", "v": map[string]any{"b": 1.0}},
		}
		_, _ = Collect(SetWindowFields(Slice(docs), spec, Options{}))
	})
}

// FuzzParseStages parses the arguments of $fill, $densify, $set and
// $unset from JSON and runs those that parse over a few documents.
func FuzzParseStages(f *testing.F) {
	for _, s := range []string{
		`{"sortBy": {"t": 1}, "partitionByFields": ["p"], "output": {"v": {"method": "linear"}, "w": {"method": "locf"}}}`,
		`{"partitionBy": "$p", "output": {"v": {"value": 0}}}`,
		`{"output": {"v": {"method": "locf"}}}`, `{"partitionBy": "$p", "partitionByFields": ["p"], "output": {}}`,
		`{"field": "t", "partitionByFields": ["p"], "range": {"step": 1, "bounds": "full"}}`,
		`{"field": "t", "range": {"step": 0.5, "bounds": [0, 10]}}`,
		`{"field": "d", "range": {"step": 1, "unit": "minute", "bounds": "partition"}}`,
		`{"field": "t", "range": {"step": 1e-300, "bounds": [0, 1e300]}}`,
		`{"a": "$b", "c.d": 1, "e": {"f": "$t"}}`, `["a", "b.c"]`, `"a"`, `[]`, `{"$x": 1}`,
	} {
		f.Add(s)
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		var arg any
		if json.Unmarshal([]byte(s), &arg) != nil {
			return
		}
		docs := func() []Doc {
			return []Doc{
				{"p": "a", "t": 1.0, "d": base, "v": 1.0},
				{"p": "a", "t": 2.0, "d": base.Add(time.Minute), "v": nil},
				{"p": "b", "t": 3.0, "d": base.Add(time.Hour), "v": 2.0},
				{"p": nil},
				{"t": "s", "v": map[string]any{"b": 1.0}},
			}
		}
		if spec, err := ParseFill(arg); err == nil {
			_, _ = Collect(Fill(Slice(docs()), spec, Options{}))
		}
		if spec, err := ParseDensify(arg); err == nil {
			_, _ = Collect(Densify(Slice(docs()), spec, Options{}))
		}
		if fields, err := ParseSet("$set", arg); err == nil {
			_, _ = Collect(Set(Slice(docs()), fields))
		}
		if paths, err := ParseUnset(arg); err == nil {
			_, _ = Collect(Unset(Slice(docs()), paths))
		}
	})
}
