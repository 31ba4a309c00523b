package partialfilter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRequiredStrings checks, on random documents and filters, that a
// document a filter matches holds one string of each required group, and
// that the groups are those of the equality and string $in conjuncts.
func TestRequiredStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b", "c", "x"}
	value := func(depth int) any {
		switch rng.IntN(5) {
		case 0:
			return int64(rng.IntN(3))
		case 1:
			return []any{words[rng.IntN(len(words))], int64(1)}
		case 2:
			if depth < 2 {
				return map[string]any{"k": words[rng.IntN(len(words))]}
			}
		}
		return words[rng.IntN(len(words))]
	}
	var strs func(v any, out []string) []string
	strs = func(v any, out []string) []string {
		switch x := v.(type) {
		case string:
			return append(out, x)
		case []any:
			for _, e := range x {
				out = strs(e, out)
			}
		case map[string]any:
			for _, e := range x {
				out = strs(e, out)
			}
		}
		return out
	}
	checked := 0
	for round := 0; round < 3000; round++ {
		doc := map[string]any{"m": map[string]any{"p": value(0), "q": value(0), "k": value(0)}}
		var terms []string
		for i := rng.IntN(3) + 1; i > 0; i-- {
			path := []string{"m.p", "m.q", "m.k", "m.p.k", "m.q.k"}[rng.IntN(5)]
			w1, w2 := words[rng.IntN(len(words))], words[rng.IntN(len(words))]
			terms = append(terms, []string{
				fmt.Sprintf(`"%s": %q`, path, w1),
				fmt.Sprintf(`"%s": {"$eq": %q}`, path, w1),
				fmt.Sprintf(`"%s": {"$in": [%q, %q]}`, path, w1, w2),
				fmt.Sprintf(`"%s": {"$in": [%q, 1]}`, path, w1),
				fmt.Sprintf(`"%s": {"$ne": %q}`, path, w1),
				fmt.Sprintf(`"%s": 1`, path),
			}[rng.IntN(6)])
		}
		src := "{" + terms[0]
		for _, tm := range terms[1:] {
			src += ", " + tm
		}
		src += "}"
		f := MustParseJSON(src)
		groups := f.RequiredStrings()
		if !f.Match(doc) {
			continue
		}
		checked++
		have := strs(doc, nil)
		for _, g := range groups {
			if !slices.ContainsFunc(g, func(s string) bool { return slices.Contains(have, s) }) {
				t.Fatalf("%s matches %v, which holds none of %q", src, doc, g)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d matching documents checked", checked)
	}
	f := MustParseJSON(`{"m.a": "x", "m.b": {"$in": ["y", "z"]}, "m.c": {"$in": ["w", 2]}, "m.d": {"$ne": "v"}, "m.e": {"$in": [{"$regularExpression": {"pattern": "^u", "options": ""}}, "t"]}}`)
	if got := f.RequiredStrings(); len(got) != 2 || !slices.Equal(got[0], []string{"x"}) || !slices.Equal(got[1], []string{"y", "z"}) {
		t.Fatalf("RequiredStrings = %q", got)
	}
}
