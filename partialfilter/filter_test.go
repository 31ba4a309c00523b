package partialfilter

import (
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
)

func TestValidateForPartialIndex(t *testing.T) {
	tests := []struct {
		filter string
		frag   string // "" = allowed
	}{
		{`{}`, ""},
		{`{"sensor": "40.761873, -73.984287"}`, ""},
		{`{"sensor": {"$eq": "x"}}`, ""},
		{`{"sensor.id": {"$gt": 1, "$lte": 9}}`, ""},
		{`{"sensor": {"$gte": 1, "$lt": 2}}`, ""},
		{`{"sensor": {"$in": [1, 2]}}`, ""},
		{`{"sensor": {"$exists": true}}`, ""},
		{`{"sensor": {"$type": "string"}}`, ""},
		{`{"$and": [{"a": 1}, {"b": {"$gt": 2}}]}`, ""},
		{`{"$or": [{"a": 1}, {"$and": [{"b": 2}, {"c": {"$exists": true}}]}]}`, ""},
		{`{"sensor": {"$ne": 1}}`, "$ne"},
		{`{"sensor": {"$nin": [1]}}`, "$nin"},
		{`{"sensor": {"$not": {"$gt": 1}}}`, "$not"},
		{`{"sensor": {"$regex": "^x"}}`, "$regex"},
		{`{"sensor": {"$regularExpression": {"pattern": "^x", "options": ""}}}`, "$regex"},
		{`{"sensor": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}]}}`, "$in with a regex"},
		{`{"sensor": {"$eq": {"$regularExpression": {"pattern": "^x", "options": ""}}}}`, "$eq to a regex"},
		{`{"sensor": {"$exists": false}}`, "$exists: false"},
		{`{"$nor": [{"a": 1}]}`, "$nor"},
		{`{"sensor": {"$elemMatch": {"$gt": 1}}}`, "$elemMatch"},
		{`{"sensor": {"$size": 1}}`, "$size"},
		{`{"sensor": {"$all": [1]}}`, "$all"},
		{`{"$and": [{"a": 1}, {"b": {"$ne": 2}}]}`, "$ne (field 'b')"},
		{`{"$or": [{"a": 1}, {"$and": [{"b": 2}, {"c": {"$exists": false}}]}]}`, "$exists: false (field 'c')"},
		{`{"$or": [{"$or": [{"$or": [{"$or": [{"$or": [{"a": 1}]}]}]}]}]}`, "nested deeper"},
	}
	for _, tt := range tests {
		f := MustParseJSON(tt.filter)
		err := f.ValidateForPartialIndex()
		if tt.frag == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.filter, err)
			}
			continue
		}
		if mongoerr.CodeOf(err) != mongoerr.CannotCreateIndex {
			t.Errorf("%s: got %v, want code 67", tt.filter, err)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "Expression not supported in partial index") || !strings.Contains(msg, tt.frag) {
			t.Errorf("%s: message %q, want it to contain %q", tt.filter, msg, tt.frag)
		}
	}
}

func TestRefersOnlyTo(t *testing.T) {
	tests := []struct {
		filter, field string
		want          bool
	}{
		{`{"sensor": 1}`, "sensor", true},
		{`{"sensor.id": 1}`, "sensor", true},
		{`{"sensor.id.x": 1, "sensor": {"$exists": true}}`, "sensor", true},
		{`{"sensorX": 1}`, "sensor", false},
		{`{"sensor": 1}`, "sensor.id", false},
		{`{"sensor.id": 1}`, "sensor.id", true},
		{`{"sensor.idx": 1}`, "sensor.id", false},
		{`{"sensor": 1, "temp": 2}`, "sensor", false},
		{`{"$or": [{"sensor": 1}, {"sensor.b": 2}]}`, "sensor", true},
		{`{"$or": [{"sensor": 1}, {"ts": 2}]}`, "sensor", false},
		{`{"$nor": [{"sensor": {"$not": {"$gt": 1}}}]}`, "sensor", true},
		{`{}`, "sensor", true},
	}
	for _, tt := range tests {
		if got := MustParseJSON(tt.filter).RefersOnlyTo(tt.field); got != tt.want {
			t.Errorf("%s RefersOnlyTo(%q) = %v, want %v", tt.filter, tt.field, got, tt.want)
		}
	}
}

func TestPaths(t *testing.T) {
	f := MustParseJSON(`{"b": 1, "a.x": {"$gt": 1, "$lt": 3}, "$or": [{"c": 1}, {"b": 2}], "e": {"$elemMatch": {"z": 1}}}`)
	if got, want := f.Paths(), []string{"a.x", "b", "c", "e"}; !slices.Equal(got, want) {
		t.Fatalf("Paths = %v, want %v", got, want)
	}
}

func TestConjunctsAndAnd(t *testing.T) {
	f := MustParseJSON(`{"a": {"$gt": 1, "$lt": 5}, "$and": [{"b": 1}, {"$and": [{"c": 2}]}], "$or": [{"d": 1}, {"e": 1}]}`)
	cs := f.Conjuncts()
	var got []string
	for _, c := range cs {
		got = append(got, c.String())
	}
	sort.Strings(got)
	want := []string{
		`{"$or":[{"d":{"$eq":1}},{"e":{"$eq":1}}]}`,
		`{"a":{"$gt":1}}`, `{"a":{"$lt":5}}`,
		`{"b":{"$eq":1}}`, `{"c":{"$eq":2}}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Conjuncts = %q, want %q", got, want)
	}
	if g := And(cs...); g.String() != f.String() {
		t.Fatalf("And(Conjuncts) = %s, want %s", g, f)
	}
	if !And().IsEmpty() || !And(nil, &Filter{}).IsEmpty() || And().String() != "{}" {
		t.Fatal("And of nothing is empty")
	}
	if MustParseJSON(`{}`).Conjuncts() != nil {
		t.Fatal("empty filter has no conjuncts")
	}
}

func TestStringCanonical(t *testing.T) {
	same := [][]string{
		{`{"a": 1, "b": {"$gt": 2}}`, `{"b": {"$gt": 2}, "a": {"$eq": 1}}`, `{"$and": [{"b": {"$gt": 2}}, {"a": 1}]}`},
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"$or": [{"b": 2}, {"a": 1}]}`},
		{`{"t": {"$gte": {"$date": "2024-05-01T14:00:00+02:00"}}}`, `{"t": {"$gte": {"$date": {"$numberLong": "1714564800000"}}}}`},
	}
	for _, group := range same {
		want := MustParseJSON(group[0]).String()
		for _, s := range group[1:] {
			if got := MustParseJSON(s).String(); got != want {
				t.Errorf("String(%s) = %s, want %s", s, got, want)
			}
		}
	}
	differ := []string{`{"a": 1}`, `{"a": 1.5}`, `{"a": "1"}`, `{"a": {"$gte": 1}}`, `{"a": {"$numberDouble": "NaN"}}`, `{"a": {"$ne": 1}}`}
	seen := map[string]string{}
	for _, s := range differ {
		r := MustParseJSON(s).String()
		if prev, dup := seen[r]; dup {
			t.Errorf("%s and %s both render as %s", prev, s, r)
		}
		seen[r] = s
	}
	// Doubles keep their type through String.
	f := MustParseJSON(`{"a": {"$type": "double"}, "b": 2.0}`)
	if s := f.String(); !strings.Contains(s, `2.0`) {
		t.Errorf("String = %s, want a double literal", s)
	}
	two := MustParseJSON(`{"$and": [{"a": 1}, {"a": 2}], "$or": [{"x": 1}], "b": {"$regex": "q", "$options": "i"}}`)
	if got, want := two.String(), `{"$and":[{"a":{"$eq":2}}],"$or":[{"x":{"$eq":1}}],"a":{"$eq":1},"b":{"$options":"i","$regex":"q"}}`; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
}

func date(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestRange(t *testing.T) {
	d1, d2 := date("2024-01-01T00:00:00Z"), date("2024-02-01T00:00:00Z")
	tests := []struct {
		filter string
		want   Range
		exact  bool
	}{
		{`{}`, Range{}, true},
		{`{"m": 1}`, Range{}, true},
		{`{"t": {"$gte": {"$date": "2024-01-01T00:00:00Z"}, "$lt": {"$date": "2024-02-01T00:00:00Z"}}}`,
			Range{Min: d1, Max: d2, MinInclusive: true, HasMin: true, HasMax: true}, true},
		{`{"t": {"$gt": 1, "$gte": 3}, "$and": [{"t": {"$lte": 9}}, {"t": {"$lt": 9}}]}`,
			Range{Min: int64(3), Max: int64(9), MinInclusive: true, HasMin: true, HasMax: true}, true},
		{`{"t": 5, "m": 2}`, Range{Min: int64(5), Max: int64(5), MinInclusive: true, MaxInclusive: true, HasMin: true, HasMax: true}, true},
		{`{"t": {"$gt": 5, "$lt": 5}}`, Range{Min: int64(5), Max: int64(5), HasMin: true, HasMax: true, Empty: true}, true},
		{`{"t": {"$gt": 5, "$lt": "a"}}`, Range{Min: int64(5), HasMin: true, Empty: true}, true},
		{`{"t": {"$in": [3, 1, 2]}}`, Range{Min: int64(1), Max: int64(3), MinInclusive: true, MaxInclusive: true, HasMin: true, HasMax: true}, false},
		{`{"t": {"$gt": 1}, "t.x": 1}`, Range{Min: int64(1), HasMin: true}, false},
		{`{"t": {"$gt": 1, "$ne": 4}}`, Range{Min: int64(1), HasMin: true}, false},
		{`{"t": {"$gt": 1}, "$or": [{"t": 1}, {"u": 2}]}`, Range{Min: int64(1), HasMin: true}, false},
		{`{"t": null}`, Range{}, false},
		{`{"t": {"$gt": {"$numberDouble": "NaN"}}}`, Range{}, false},
	}
	for _, tt := range tests {
		r, exact := MustParseJSON(tt.filter).Range("t")
		if exact != tt.exact || !rangeEqual(r, tt.want) {
			t.Errorf("Range(%s) = %+v, %v; want %+v, %v", tt.filter, r, exact, tt.want, tt.exact)
		}
	}
}

func rangeEqual(a, b Range) bool {
	return Compare(a.Min, b.Min) == 0 && Compare(a.Max, b.Max) == 0 &&
		a.MinInclusive == b.MinInclusive && a.MaxInclusive == b.MaxInclusive &&
		a.HasMin == b.HasMin && a.HasMax == b.HasMax && a.Empty == b.Empty
}

func TestRangeContains(t *testing.T) {
	r, _ := MustParseJSON(`{"t": {"$gte": 1, "$lt": 5}}`).Range("t")
	for v, want := range map[any]bool{int64(1): true, 4.99: true, int64(5): false, 0.5: false, "2": false, nil: false, math.NaN(): false} {
		if got := r.Contains(v); got != want {
			t.Errorf("Contains(%v) = %v, want %v", v, got, want)
		}
	}
	if !(Range{}).Contains(nil) || (Range{Empty: true}).Contains(int64(1)) {
		t.Error("zero range contains everything, empty range nothing")
	}
}

// TestSplit checks that meta, time and residual recombine to the filter and
// that evaluating them the documented way equals Match.
func TestSplit(t *testing.T) {
	f := MustParseJSON(`{"sensor.id": {"$in": [1, 2]}, "$or": [{"sensor": {"loc": "a"}}, {"sensor.id": 2}],
		"ts": {"$gte": {"$date": "2024-01-01T00:00:00Z"}, "$lt": {"$date": "2024-02-01T00:00:00Z"}, "$exists": true},
		"temp": {"$gt": 20}, "sensorX": 1}`)
	meta, tm, rest := f.Split("sensor", "ts")
	if got, want := meta.String(), `{"$or":[{"sensor":{"$eq":{"loc":"a"}}},{"sensor.id":{"$eq":2}}],"sensor.id":{"$in":[1,2]}}`; got != want {
		t.Errorf("meta = %s, want %s", got, want)
	}
	if got, want := tm.String(), `{"ts":{"$gte":{"$date":"2024-01-01T00:00:00Z"},"$lt":{"$date":"2024-02-01T00:00:00Z"}}}`; got != want {
		t.Errorf("time = %s, want %s", got, want)
	}
	if got, want := rest.String(), `{"sensorX":{"$eq":1},"temp":{"$gt":20},"ts":{"$exists":true}}`; got != want {
		t.Errorf("rest = %s, want %s", got, want)
	}
	tr, exact := tm.Range("ts")
	if !exact {
		t.Fatal("time conjuncts must be exact")
	}
	metas := []any{map[string]any{"id": int64(2)}, map[string]any{"id": int64(1), "loc": "a"}, map[string]any{"id": int64(1)}, nil}
	times := []any{date("2023-12-31T23:59:59Z"), date("2024-01-01T00:00:00Z"), date("2024-02-01T00:00:00Z"), "2024-01-05"}
	for _, m := range metas {
		for _, ts := range times {
			for _, temp := range []any{int64(21), 19.5} {
				d := map[string]any{"sensor": m, "ts": ts, "temp": temp, "sensorX": int64(1)}
				md := map[string]any{"sensor": m}
				got := meta.Match(md) && tr.Contains(ts) && rest.Match(d)
				if want := f.Match(d); got != want {
					t.Errorf("split evaluation of %v = %v, Match = %v", d, got, want)
				}
			}
		}
	}
	if m, tt, r := MustParseJSON(`{"a": 1}`).Split("", "t"); !m.IsEmpty() || !tt.IsEmpty() || r.IsEmpty() {
		t.Error("no metaField: nothing is meta")
	}
}

func TestCompareOrder(t *testing.T) {
	// Sorted ascending in MongoDB's order.
	sorted := []any{
		nil,
		math.Inf(-1), int64(math.MinInt64), -1.5, int64(0), 0.5, int64(1), 1.5,
		int64(9007199254740992), int64(9007199254740993), 9007199254740994.0, int64(math.MaxInt64), 9223372036854775808.0, math.Inf(1),
		"", "A", "B", "a", "ab", "b",
		map[string]any{}, map[string]any{"a": int64(1)}, map[string]any{"a": int64(2)}, map[string]any{"a": int64(2), "b": int64(1)}, map[string]any{"b": int64(0)}, map[string]any{"a": "x"},
		[]any{}, []any{int64(1)}, []any{int64(1), int64(2)}, []any{int64(2)}, []any{"a"},
		false, true,
		date("1969-12-31T23:59:59Z"), date("2024-01-01T00:00:00Z"),
		Regex{Pattern: "a"},
	}
	for i := range sorted {
		for j := range sorted {
			want := cmpInt(i, j)
			if got := Compare(sorted[i], sorted[j]); got != want {
				t.Errorf("Compare(%#v, %#v) = %d, want %d", sorted[i], sorted[j], got, want)
			}
		}
	}
	eq := [][2]any{
		{int64(1), 1.0}, {math.NaN(), math.NaN()}, {0.0, math.Copysign(0, -1)}, {int64(2), 2},
		{map[string]any{"a": int64(1), "b": int64(2)}, map[string]any{"b": 2.0, "a": int64(1)}},
	}
	for _, p := range eq {
		if Compare(p[0], p[1]) != 0 {
			t.Errorf("Compare(%v, %v) != 0", p[0], p[1])
		}
	}
	if Compare(math.NaN(), math.Inf(-1)) >= 0 || Compare(math.NaN(), int64(math.MinInt64)) >= 0 {
		t.Error("NaN sorts below every number")
	}
}
