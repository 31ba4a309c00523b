package api

import (
	"regexp"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// TestPromMatcherFilter: the filter a matcher gives the engine selects
// exactly the label sets the matcher itself matches (a label lacking
// being ""), so that the engine reads no series the read leaves out and
// leaves out none it keeps.
func TestPromMatcherFilter(t *testing.T) {
	sets := []map[string]any{
		{"job": "node"}, {"job": "node", "code": "200"}, {"job": "prometheus", "code": "500"}, {"code": "2"}, {"job": "x\ny"},
	}
	matchers := []promMatcher{}
	for _, typ := range []prompb.LabelMatcher_Type{prompb.LabelMatcher_EQ, prompb.LabelMatcher_NEQ, prompb.LabelMatcher_RE, prompb.LabelMatcher_NRE} {
		for _, v := range []string{"", "node", "200", "2..|", "2.*", "no.*", "x.y", ".*", ".+", "5..|node"} {
			for _, name := range []string{"job", "code"} {
				m := promMatcher{name: name, typ: typ, value: v}
				if typ == prompb.LabelMatcher_RE || typ == prompb.LabelMatcher_NRE {
					m.re = regexp.MustCompile("^(?s:" + v + ")$")
				} else if v != "" && v != "node" && v != "200" {
					continue
				}
				matchers = append(matchers, m)
			}
		}
	}
	for _, m := range matchers {
		f, err := partialfilter.Parse(m.filter("labels"))
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		for _, set := range sets {
			v, _ := set[m.name].(string)
			if got, want := f.Match(map[string]any{"labels": set}), m.matches(v); got != want {
				t.Errorf("matcher %s %d %q on %v: the filter %v matches: %v, the matcher: %v", m.name, m.typ, m.value, set, f, got, want)
			}
		}
	}
	if f := (&promMatcher{name: "a.b", typ: prompb.LabelMatcher_EQ, value: "x"}).filter("labels"); f != nil {
		t.Fatalf("a label name with a dot is not a path: %v", f)
	}
}
