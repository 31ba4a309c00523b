package promstore

import (
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// TestMatcherFilter: the filter a matcher gives the engine selects
// exactly the label sets the matcher itself matches (a label lacking
// being ""), so that the engine reads no series the read leaves out and
// leaves out none it keeps.
func TestMatcherFilter(t *testing.T) {
	sets := []map[string]any{
		{"job": "node"}, {"job": "node", "code": "200"}, {"job": "prometheus", "code": "500"}, {"code": "2"}, {"job": "x\ny"},
	}
	var matchers []*labels.Matcher
	for _, typ := range []labels.MatchType{labels.MatchEqual, labels.MatchNotEqual, labels.MatchRegexp, labels.MatchNotRegexp} {
		for _, v := range []string{"", "node", "200", "2..|", "2.*", "no.*", "x.y", ".*", ".+", "5..|node"} {
			if (typ == labels.MatchEqual || typ == labels.MatchNotEqual) && v != "" && v != "node" && v != "200" {
				continue
			}
			for _, name := range []string{"job", "code"} {
				matchers = append(matchers, labels.MustNewMatcher(typ, name, v))
			}
		}
	}
	for _, m := range matchers {
		f, err := partialfilter.Parse(matcherFilter("labels", m))
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		for _, set := range sets {
			v, _ := set[m.Name].(string)
			if got, want := f.Match(map[string]any{"labels": set}), m.Matches(v); got != want {
				t.Errorf("matcher %s on %v: the filter %v matches: %v, the matcher: %v", m, set, f, got, want)
			}
		}
	}
	if f := matcherFilter("labels", labels.MustNewMatcher(labels.MatchEqual, "a.b", "x")); f != nil {
		t.Fatalf("a label name with a dot is not a path: %v", f)
	}
}
