package partialfilter

import (
	"testing"
	"time"
)

// fuzzDocs are the fixed documents every fuzzed filter is evaluated on.
var fuzzDocs = []map[string]any{
	{},
	{"a": int64(1), "b": "x", "c": nil},
	{"a": []any{int64(1), 2.5, "s", []any{int64(1)}, map[string]any{"b": int64(1)}}, "t": time.Unix(1714564800, 0).UTC()},
	{"a": map[string]any{"b": []any{map[string]any{"c": true}}, "0": int64(3)}, "sensor": map[string]any{"id": int64(7)}},
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"a": 1}`, `{"a": {"$gt": 1, "$lt": 5}}`, `{"a.b": null}`,
		`{"$or": [{"a": 1}, {"b": {"$in": [1, "x", null]}}]}`,
		`{"$nor": [{"a": {"$exists": false}}]}`,
		`{"a": {"$not": {"$regex": "^x", "$options": "i"}}}`,
		`{"a": {"$regularExpression": {"pattern": "a+", "options": "s"}}}`,
		`{"t": {"$gte": {"$date": "2024-05-01T12:00:00Z"}}}`,
		`{"t": {"$date": {"$numberLong": "1714564800000"}}}`,
		`{"a": {"$type": ["string", 18, "number"]}}`,
		`{"a": {"$elemMatch": {"b": 1}}, "c": {"$size": 2}, "d": {"$all": [1, 2]}}`,
		`{"a": {"$elemMatch": {"$gt": 1, "$ne": 3}}}`,
		`{"a": {"$numberDouble": "NaN"}, "b": 1e400, "c": -0.0}`,
		`{"a": {"$eq": {"$gt": 1}}, "b": [1, {"c": 2}]}`,
		`{"a": {"$nin": [1]}, "b": {"$ne": "x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		flt, err := ParseJSON(data)
		if err != nil {
			return
		}
		s := flt.String()
		again, err := ParseJSON([]byte(s))
		if err != nil {
			t.Fatalf("String %s of %q does not parse: %v", s, data, err)
		}
		if s2 := again.String(); s2 != s {
			t.Fatalf("String not stable: %s -> %s", s, s2)
		}
		for _, d := range fuzzDocs {
			if a, b := flt.Match(d), again.Match(d); a != b {
				t.Fatalf("%q and its String %s disagree on %v: %v vs %v", data, s, d, a, b)
			}
		}
		_ = flt.Paths()
		_ = flt.ValidateForPartialIndex()
		for _, c := range flt.Conjuncts() {
			_ = c.String()
		}
		_, _ = flt.Range("a")
		_, _, _ = flt.Split("sensor", "t")
	})
}
