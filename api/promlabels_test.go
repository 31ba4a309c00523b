package api

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// writePromLabelSets writes what writeJSON writes of a promSuccess of the
// same label sets, escapes and warnings included.
func TestWritePromLabelSets(t *testing.T) {
	sets := []labels.Labels{
		labels.FromStrings("__name__", "up", "job", "a<b>&c", "q", `"quoted"\`, "u", "é\u2028\x01", "bad", "\xff"),
		labels.FromStrings("a", ""),
		labels.EmptyLabels(),
	}
	for _, tc := range []struct {
		sets     []labels.Labels
		warnings []string
	}{{sets, nil}, {sets[:1], []string{"results truncated due to limit", "<x>"}}, {[]labels.Labels{}, nil}} {
		rec := httptest.NewRecorder()
		writePromLabelSets(rec, tc.sets, tc.warnings)
		want, err := json.Marshal(promSuccess{Status: "success", Data: tc.sets, Warnings: tc.warnings})
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.String(); got != string(want)+"\n" {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)+1) {
			t.Errorf("Content-Length %s, want %d", cl, len(want)+1)
		}
	}
}
