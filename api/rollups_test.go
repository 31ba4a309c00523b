package api_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRollupsOverHTTP: a rollup made over HTTP holds, per sensor and
// window, what the source's aggregate answers for that window, existing
// data and later writes included; it is listed with its lag, stopped by
// DELETE (the collection stays) and refused with 400 code 2 (bad input)
// or 409 code 48 (a name taken) without creating anything.
func TestRollupsOverHTTP(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "sensor"}}`)
	var body strings.Builder
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 240 {
		for _, sensor := range []string{"a", "b"} {
			body.WriteString(`{"t": {"$date": "` + t0.Add(time.Duration(i)*time.Minute).Format(time.RFC3339) + `"}, "sensor": "` + sensor + `", "temp": ` + strconv.Itoa(i*7%50) + `.5}` + "\n")
		}
	}
	s.mustDo(200, "POST", "/v1/collections/m/documents", body.String(), "Content-Type", "application/x-ndjson")

	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"window": "1x", "fields": ["temp"], "funcs": ["avg"]}`, 400, `"code":2`},
		{`{"window": "1h", "fields": ["temp"], "funcs": ["median"]}`, 400, `"code":2`},
		{`{"window": "1h", "fields": ["nope"], "funcs": ["avg"]}`, 400, `"code":2`},
		{`{"window": "1h", "fields": ["temp"], "funcs": ["avg"], "partialFilterExpression": {"temp": 1}}`, 400, `"code":2`},
		{`{"window": "1h", "fields": ["temp"], "funcs": ["avg"], "bogus": 1}`, 400, `"code":2`},
		{`{"fields": ["temp"], "funcs": ["avg"]}`, 400, `"code":2`},
	} {
		r := s.do("PUT", "/v1/collections/m/rollups/hourly", []byte(c.body))
		if r.status != c.status || !strings.Contains(string(r.body), c.code) {
			t.Errorf("%s: %d %s, want %d %s", c.body, r.status, r.body, c.status, c.code)
		}
	}
	s.mustDo(404, "GET", "/v1/collections/hourly", "")
	s.mustDo(404, "PUT", "/v1/collections/nope/rollups/hourly", `{"window": "1h", "fields": ["temp"], "funcs": ["avg"]}`)

	spec := `{"window": "1h", "fields": ["temp"], "funcs": ["count", "min", "avg", "max", "first", "last"], "expireAfterSeconds": 31536000}`
	s.mustDo(201, "PUT", "/v1/collections/m/rollups/hourly", spec)
	s.mustDo(200, "PUT", "/v1/collections/m/rollups/hourly", spec)
	r := s.mustDo(409, "PUT", "/v1/collections/m/rollups/hourly", `{"window": "2h", "fields": ["temp"], "funcs": ["avg"]}`)
	if !strings.Contains(string(r.body), `"code":48`) {
		t.Errorf("another rollup of the name: %s", r.body)
	}
	s.mustDo(409, "PUT", "/v1/collections/m/rollups/m", spec)

	waitCaughtUp(t, s, "m")
	// Later writes, one late.
	s.mustDo(200, "POST", "/v1/collections/m/documents",
		`{"t": {"$date": "2026-01-01T00:30:30Z"}, "sensor": "a", "temp": 99}
{"t": {"$date": "2026-01-01T04:00:00Z"}, "sensor": "b", "temp": -3}
`, "Content-Type", "application/x-ndjson")
	waitCaughtUp(t, s, "m")

	want := s.mustDo(200, "POST", "/v1/collections/m/aggregate",
		`{"window": "1h", "fields": ["temp"], "funcs": ["count", "min", "avg", "max", "first", "last"]}`, "Accept", "application/x-ndjson")
	got := s.mustDo(200, "POST", "/v1/collections/hourly/find", `{"sort": {"t": 1}, "projection": {"_id": 0}}`, "Accept", "application/x-ndjson")
	// The aggregate writes its window times flat, find as Extended JSON.
	flat := regexp.MustCompile(`\{"\$date":("[^"]*")\}`).ReplaceAllString(string(got.body), "$1")
	if norm([]byte(flat)) != norm(want.body) {
		t.Errorf("rollup:\n%s\nthe source's aggregate:\n%s", got.body, want.body)
	}
	var list []map[string]any
	if err := json.Unmarshal(s.mustDo(200, "GET", "/v1/collections/m/rollups", "").body, &list); err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	if list[0]["name"] != "hourly" || list[0]["lagSeconds"] != 0.0 || list[0]["watermark"] == nil || list[0]["expireAfterSeconds"] != 31536000.0 {
		t.Errorf("list: %v", list)
	}
	s.mustDo(200, "DELETE", "/v1/collections/m/rollups/hourly", "")
	s.mustDo(404, "DELETE", "/v1/collections/m/rollups/hourly", "")
	if b := s.mustDo(200, "GET", "/v1/collections/m/rollups", "").body; strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("after DELETE: %s", b)
	}
	s.mustDo(200, "GET", "/v1/collections/hourly", "")
}

// waitCaughtUp waits until every rollup of coll has caught up.
func waitCaughtUp(t *testing.T, s *testServer, coll string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list []struct {
			Name       string  `json:"name"`
			LagSeconds float64 `json:"lagSeconds"`
			Pending    int     `json:"pendingSeries"`
		}
		if err := json.Unmarshal(s.mustDo(200, "GET", "/v1/collections/"+coll+"/rollups", "").body, &list); err != nil {
			t.Fatal(err)
		}
		done := true
		for _, r := range list {
			done = done && r.Pending == 0
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollups of %s not caught up: %+v", coll, list)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// norm sorts lines, so that two outputs of the same rows in different
// orders compare equal.
func norm(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
