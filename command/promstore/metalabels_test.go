package promstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/model"
)

// FuzzMetaLabelTexts checks the label texts read from a canonical meta
// key as it is against those of a JSON decoder (the texts a meta
// document's strings, numbers and booleans give), for every key
// CanonicalMeta writes.
func FuzzMetaLabelTexts(f *testing.F) {
	for _, s := range []string{
		`{"sensor": "s000001", "site": "site-3", "n": 3, "x": 2.5, "big": 1e300, "neg": -0.5, "ok": true, "no": false}`,
		`{"e": "", "doc": {"a": 1}, "arr": [1], "nil": null, "q": "a\"b", "u": "é\u2028"}`,
		`{"id": {"$numberInt": "7"}, "d": {"$date": "2024-01-01T00:00:00Z"}, "s": "x"}`,
		`{"__name__": "up", "_measurement": "cpu", "job": "api"}`,
		`"scalar"`, `7`, `{}`, `null`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := model.DecodeMeta(s)
		if err != nil {
			return
		}
		key, err := model.CanonicalMeta(v)
		if err != nil {
			return
		}
		var got []string
		ok := metaLabelTexts(key, func(name, text string) { got = append(got, name+"="+text) })
		d := json.NewDecoder(strings.NewReader(key))
		d.UseNumber()
		var doc map[string]any
		wantOK := d.Decode(&doc) == nil && doc != nil
		var want []string
		for k, v := range doc {
			if text, ok := labelText(v); ok && text != "" {
				want = append(want, k+"="+text)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if ok != wantOK || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q: %v %q, want %v %q", key, ok, got, wantOK, want)
		}
	})
}
