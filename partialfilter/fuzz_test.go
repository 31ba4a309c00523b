package partialfilter

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
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
		for _, c := range flt.Conjuncts() {
			_ = c.String()
		}
		paths := flt.Paths()
		docs := fuzzDocsFor(flt, paths)
		checkPaths(t, flt, paths, docs)
		checkRanges(t, flt, paths, docs)
		checkSplit(t, flt, "sensor", "t", docs)
		if ps := usablePaths(paths); len(ps) >= 2 {
			checkSplit(t, flt, ps[0], ps[1], docs)
			checkSplit(t, flt, ps[1], ps[0], docs)
		}
		checkPartialIndex(t, flt, again)
	})
}

// fuzzValues are the values the generated documents put at a path, beside
// the bounds of the filter's ranges.
var fuzzValues = []any{nil, int64(-1), int64(0), int64(1), int64(3), 2.5, math.NaN(), math.Inf(1), "", "s", "x", true, false,
	time.Unix(1714564800, 0).UTC(), map[string]any{"b": int64(1)}}

// fuzzDocsFor returns fuzzDocs and documents made of the filter's paths
// (and a, t and sensor) holding each of fuzzValues and the bounds of the
// filter's ranges: one path at a time, and all of them at once. Their
// paths go through objects only, never arrays.
func fuzzDocsFor(flt *Filter, paths []string) []map[string]any {
	paths = append(usablePaths(paths), "a", "t", "sensor")
	vals := slices.Clone(fuzzValues)
	for _, p := range paths {
		r, _ := flt.Range(p)
		if r.HasMin {
			vals = append(vals, r.Min)
		}
		if r.HasMax {
			vals = append(vals, r.Max)
		}
	}
	docs := slices.Clone(fuzzDocs)
	for _, v := range vals {
		all := map[string]any{}
		for _, p := range paths {
			docs = append(docs, setPath(map[string]any{}, p, v))
			setPath(all, p, v)
		}
		docs = append(docs, all)
	}
	return docs
}

// usablePaths returns the first six paths that have no empty segment:
// Match does not find a field named "" ({"": 1} does not match itself),
// so documents with such fields test nothing.
func usablePaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if len(out) < 6 && !slices.Contains(strings.Split(p, "."), "") {
			out = append(out, p)
		}
	}
	return out
}

// setPath sets the dotted path in d to v, making objects on the way.
func setPath(d map[string]any, path string, v any) map[string]any {
	cur := d
	parts := strings.Split(path, ".")
	for _, k := range parts[:len(parts)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[parts[len(parts)-1]] = v
	return d
}

// scalarAt returns the value at path in d (nil when missing) and whether
// the path leads to a single value: no array on the way or at the end.
func scalarAt(d map[string]any, path string) (any, bool) {
	var cur any = d
	for _, k := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[k]
			if !ok {
				return nil, true
			}
			cur = v
		case []any:
			return nil, false
		default:
			return nil, true
		}
	}
	if _, isArr := cur.([]any); isArr {
		return nil, false
	}
	return cur, true
}

// readsPath reports whether a filter on paths reads path, a parent of it or
// a sub-path.
func readsPath(paths []string, path string) bool {
	for _, q := range paths {
		if q == path || strings.HasPrefix(path, q+".") || strings.HasPrefix(q, path+".") {
			return true
		}
	}
	return false
}

// checkPaths: the evaluation reads nothing outside Paths: a document cut
// down to the top-level fields the paths start with matches the same.
func checkPaths(t *testing.T, flt *Filter, paths []string, docs []map[string]any) {
	roots := map[string]bool{}
	for _, p := range paths {
		root, _, _ := strings.Cut(p, ".")
		roots[root] = true
	}
	for _, d := range docs {
		cut := map[string]any{}
		for k, v := range d {
			if roots[k] {
				cut[k] = v
			}
		}
		if flt.Match(d) != flt.Match(cut) {
			t.Fatalf("%s reads outside its Paths %q: %v matches %v, %v matches %v", flt, paths, d, flt.Match(d), cut, flt.Match(cut))
		}
	}
}

// checkRanges: a matching document whose path holds a single value has it
// inside Range(path); when Range says it is exact, the range decides for
// the conjuncts that touch the path.
func checkRanges(t *testing.T, flt *Filter, paths []string, docs []map[string]any) {
	for _, p := range append(usablePaths(paths), "a", "t") {
		r, exact := flt.Range(p)
		var others []*Filter
		for _, c := range flt.Conjuncts() {
			if !readsPath(c.Paths(), p) {
				others = append(others, c)
			}
		}
		rest := And(others...)
		for _, d := range docs {
			v, single := scalarAt(d, p)
			if !single {
				continue
			}
			m := flt.Match(d)
			if m && !r.Contains(v) {
				t.Fatalf("%s matches %v, whose %s (%v) is outside Range %+v", flt, d, p, v, r)
			}
			if exact && m != (rest.Match(d) && r.Contains(v)) {
				t.Fatalf("%s: Range(%s) %+v said exact, but on %v the filter says %v, the range and the other conjuncts (%s) %v",
					flt, p, r, d, m, rest, !m)
			}
		}
	}
}

// checkSplit: the three parts AND together to the filter; the meta part
// reads only the meta field; the time part is exactly its time range.
func checkSplit(t *testing.T, flt *Filter, metaField, timeField string, docs []map[string]any) {
	if metaField == timeField {
		return
	}
	meta, tm, rest := flt.Split(metaField, timeField)
	whole := And(meta, tm, rest)
	r, exact := tm.Range(timeField)
	if !exact {
		t.Fatalf("%s: Split(%s, %s) time part %s is not exact for its range", flt, metaField, timeField, tm)
	}
	for _, d := range docs {
		if a, b := flt.Match(d), whole.Match(d); a != b {
			t.Fatalf("%s: Split(%s, %s) parts %s, %s, %s together say %v on %v, the filter %v", flt, metaField, timeField, meta, tm, rest, b, d, a)
		}
		series := map[string]any{}
		if v, ok := d[metaField]; ok {
			series[metaField] = v
		}
		if strings.Contains(metaField, ".") {
			series = d // a dotted meta field is no series key; only the part's paths matter
		}
		if meta.Match(d) != meta.Match(series) {
			t.Fatalf("%s: Split(%s, %s) meta part %s reads more than the meta field of %v", flt, metaField, timeField, meta, d)
		}
		if v, single := scalarAt(d, timeField); single && tm.Match(d) != r.Contains(v) {
			t.Fatalf("%s: Split(%s, %s) time part %s says %v on %v, its range %+v the opposite", flt, metaField, timeField, tm, tm.Match(d), d, r)
		}
	}
	for _, p := range meta.Paths() {
		if p != metaField && !strings.HasPrefix(p, metaField+".") {
			t.Fatalf("%s: Split(%s, %s) meta part %s reads %s", flt, metaField, timeField, meta, p)
		}
	}
}

// checkPartialIndex: ValidateForPartialIndex accepts or refuses a filter and its
// String alike, refuses with CannotCreateIndex naming the expression, and
// accepts a filter only when it accepts each of its conjuncts.
func checkPartialIndex(t *testing.T, flt, again *Filter) {
	err := flt.ValidateForPartialIndex()
	if (err == nil) != (again.ValidateForPartialIndex() == nil) {
		t.Fatalf("%s: ValidateForPartialIndex %v, on its String %v", flt, err, again.ValidateForPartialIndex())
	}
	if err != nil {
		var me *mongoerr.Error
		if !errors.As(err, &me) || me.Code != mongoerr.CannotCreateIndex || !strings.HasPrefix(me.Message, "Expression not supported in partial index: ") {
			t.Fatalf("%s: ValidateForPartialIndex: %#v", flt, err)
		}
		return
	}
	for _, c := range flt.Conjuncts() {
		if cerr := c.ValidateForPartialIndex(); cerr != nil {
			t.Fatalf("%s accepted for a partial index, its conjunct %s refused: %v", flt, c, cerr)
		}
	}
}
