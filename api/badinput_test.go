package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/api"
)

// state is what a refused request must leave unchanged: the collections,
// their options and their counts.
func (s *testServer) state() string {
	s.t.Helper()
	r := s.mustDo(200, "GET", "/v1/collections", "")
	var list []map[string]any
	if err := json.Unmarshal(r.body, &list); err != nil {
		s.t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range list {
		o, _ := json.Marshal(c["options"])
		fmt.Fprintf(&b, "%s %s count=%v\n", c["name"], o, c["count"])
	}
	return b.String()
}

func TestBadInputChangesNothing(t *testing.T) {
	const maxBody = 4096
	s := newTestServer(t, func(o *api.Options) { o.MaxBody = maxBody })
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)

	big := `[` + strings.Repeat(`{"timestamp": "2024-05-01T12:00:00Z", "sensor": "z", "v": 1},`, 200) + `{"timestamp": "2024-05-01T12:00:00Z", "sensor": "z", "v": 1}]`
	bigGz := string(gzipped(t, []byte(big)))
	if len(bigGz) > maxBody {
		t.Fatalf("compressed body %d bytes is over the limit; the test needs it under", len(bigGz))
	}
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status, code             int
	}{
		{"malformed JSON", "POST", "/v1/collections/s/documents", `[{"timestamp": `, nil, 400, 2},
		{"not an array", "POST", "/v1/collections/s/documents", `{"timestamp": "2024-05-01T12:00:00Z"}`, nil, 400, 2},
		{"element not an object", "POST", "/v1/collections/s/documents", `[{"timestamp": "2024-05-01T12:00:00Z", "sensor": "q"}, 5]`, nil, 400, 2},
		{"trailing data", "POST", "/v1/collections/s/documents", `[{"timestamp": "2024-05-01T12:00:00Z", "sensor": "q"}] x`, nil, 400, 2},
		{"empty array", "POST", "/v1/collections/s/documents", `[]`, nil, 400, 2},
		{"ndjson bad line", "POST", "/v1/collections/s/documents", "{\"timestamp\": \"2024-05-01T12:00:00Z\", \"sensor\": \"q\"}\n{oops\n", []string{"Content-Type", "application/x-ndjson"}, 400, 2},
		{"bad date", "POST", "/v1/collections/s/documents", `[{"timestamp": {"$date": "yesterday"}, "sensor": "q"}]`, nil, 400, 0},
		{"wrong field name", "POST", "/v1/collections/s/documents", `[{"timestamp": "2024-05-01T12:00:00Z", "sensor": "q", "v": {"$x": 2}}]`, nil, 400, 0},
		{"array _id", "POST", "/v1/collections/s/documents", `[{"timestamp": "2024-05-01T12:00:00Z", "sensor": "q", "_id": [1]}]`, nil, 400, 0},
		{"unknown collection insert", "POST", "/v1/collections/nope/documents", sensorDocs, nil, 404, 26},
		{"unknown collection find", "POST", "/v1/collections/nope/find", `{}`, nil, 404, 26},
		{"unknown collection aggregate", "POST", "/v1/collections/nope/aggregate", `{"window": "1m"}`, nil, 404, 26},
		{"unknown collection delete", "POST", "/v1/collections/nope/delete", `{"filter": {}}`, nil, 404, 26},
		{"unknown collection collMod", "PATCH", "/v1/collections/nope", `{"expireAfterSeconds": 5}`, nil, 404, 26},
		{"invalid name create", "PUT", "/v1/collections/system.x", `{"timeseries": {"timeField": "t"}}`, nil, 400, 73},
		{"invalid name chars", "PUT", "/v1/collections/a%20b", `{"timeseries": {"timeField": "t"}}`, nil, 400, 73},
		{"name too long", "PUT", "/v1/collections/" + strings.Repeat("x", 121), `{}`, nil, 400, 73},
		{"create unknown option", "PUT", "/v1/collections/n", `{"timeseries": {"timeField": "t"}, "color": "red"}`, nil, 400, 72},
		{"create meta is _id", "PUT", "/v1/collections/n", `{"timeseries": {"timeField": "t", "metaField": "_id"}}`, nil, 400, 72},
		{"create bad granularity mix", "PUT", "/v1/collections/n", `{"timeseries": {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 60}}`, nil, 400, 72},
		{"create expire negative", "PUT", "/v1/collections/n", `{"timeseries": {"timeField": "t"}, "expireAfterSeconds": -1}`, nil, 400, 72},
		{"create body not JSON", "PUT", "/v1/collections/n", `{timeseries`, nil, 400, 2},
		{"create wrong media", "PUT", "/v1/collections/n", `{}`, []string{"Content-Type", "text/plain"}, 415, 2},
		{"collMod unknown", "PATCH", "/v1/collections/s", `{"color": 1}`, nil, 400, 72},
		{"collMod expire string", "PATCH", "/v1/collections/s", `{"expireAfterSeconds": "soon"}`, nil, 400, 72},
		{"collMod timeField", "PATCH", "/v1/collections/s", `{"timeseries": {"timeField": "x"}}`, nil, 400, 72},
		{"bad filter operator", "POST", "/v1/collections/s/find", `{"filter": {"sensor": {"$regexx": "a"}}}`, nil, 400, 2},
		{"filter not object", "POST", "/v1/collections/s/find", `{"filter": [1]}`, nil, 400, 2},
		{"bad sort", "POST", "/v1/collections/s/find", `{"sort": {"temp": 1}}`, nil, 400, 2},
		{"bad limit", "POST", "/v1/collections/s/find", `{"limit": -3}`, nil, 400, 2},
		{"mixed projection", "POST", "/v1/collections/s/find", `{"projection": {"a": 1, "b": 0}}`, nil, 400, 2},
		{"unknown find option", "POST", "/v1/collections/s/find", `{"filtre": {}}`, nil, 400, 2},
		{"delete bad filter", "POST", "/v1/collections/s/delete", `{"filter": {"sensor": {"$bogus": 1}}}`, nil, 400, 2},
		{"delete bad operator on a field", "POST", "/v1/collections/s/delete", `{"filter": {"temp": {"$gt": 1, "$nope": 2}}}`, nil, 400, 2},
		{"delete filter not object", "POST", "/v1/collections/s/delete", `{"filter": [1]}`, nil, 400, 2},
		{"invalid UTF-8 in a string", "POST", "/v1/collections/s/documents", "[{\"timestamp\": \"2024-05-01T12:00:00Z\", \"sensor\": \"a\xff\", \"v\": 1}]", nil, 400, 2},
		{"invalid UTF-8 in NDJSON", "POST", "/v1/collections/s/documents", "{\"timestamp\": \"2024-05-01T12:00:00Z\", \"sensor\": \"a\", \"v\xc3\": 1}", []string{"Content-Type", "application/x-ndjson"}, 400, 2},
		{"lone low surrogate escape", "POST", "/v1/collections/s/documents", `[{"timestamp": "2024-05-01T12:00:00Z", "sensor": "a\udc00", "v": 1}]`, nil, 400, 2},
		{"lone high surrogate escape in NDJSON", "POST", "/v1/collections/s/documents", `{"timestamp": "2024-05-01T12:00:00Z", "sensor": "a", "v\ud800x": 1}`, []string{"Content-Type", "application/x-ndjson"}, 400, 2},
		{"surrogates in the wrong order", "POST", "/v1/collections/s/documents", `[{"timestamp": "2024-05-01T12:00:00Z", "sensor": "\udc00\ud800", "v": 1}]`, nil, 400, 2},
		{"lone surrogate escape in a filter", "POST", "/v1/collections/s/find", `{"filter": {"sensor": "\ud83d"}}`, nil, 400, 2},
		{"invalid UTF-8 in a GET filter", "GET", "/v1/collections/s/find?q=%7B%22sensor%22%3A%22%FF%22%7D", ``, nil, 400, 2},
		{"duplicate field", "POST", "/v1/collections/s/documents", `[{"timestamp": "2024-05-01T12:00:00Z", "sensor": "a", "v": 1, "v": 2}]`, nil, 400, 2},
		{"duplicate escaped field", "POST", "/v1/collections/s/documents", `[{"timestamp": "2024-05-01T12:00:00Z", "sensor": {"k": 1, "\u006b": 2}, "v": 1}]`, nil, 400, 2},
		{"duplicate field in NDJSON", "POST", "/v1/collections/s/documents", `{"timestamp": "2024-05-01T12:00:00Z", "sensor": "a", "sensor": "b"}`, []string{"Content-Type", "application/x-ndjson"}, 400, 2},
		{"NUL in a field name", "POST", "/v1/collections/s/documents", `[{"timestamp": "2024-05-01T12:00:00Z", "sensor": "a", "v\u0000x": 1}]`, nil, 400, 2},
		{"duplicate option in a query", "POST", "/v1/collections/s/find", `{"limit": 1, "limit": 2}`, nil, 400, 2},
		{"body too large", "POST", "/v1/collections/s/documents", big, nil, 413, 10334},
		{"gzip body too large after decompression", "POST", "/v1/collections/s/documents", bigGz, []string{"Content-Encoding", "gzip"}, 413, 10334},
		{"corrupt gzip", "POST", "/v1/collections/s/documents", "\x1f\x8b\x08garbage", []string{"Content-Encoding", "gzip"}, 400, 2},
		{"corrupt zstd", "POST", "/v1/collections/s/documents", "garbage", []string{"Content-Encoding", "zstd"}, 400, 2},
		{"unknown encoding", "POST", "/v1/collections/s/documents", sensorDocs, []string{"Content-Encoding", "br"}, 415, 2},
		{"unsupported media type", "POST", "/v1/collections/s/documents", sensorDocs, []string{"Content-Type", "application/xml"}, 415, 2},
		{"malformed content type", "POST", "/v1/collections/s/documents", sensorDocs, []string{"Content-Type", "a/b; ;"}, 415, 2},
		{"ordered not a bool", "POST", "/v1/collections/s/documents?ordered=maybe", sensorDocs, nil, 400, 2},
		{"not acceptable", "POST", "/v1/collections/s/find", `{}`, []string{"Accept", "application/xml"}, 406, 2},
		{"wrong method", "PUT", "/v1/collections/s/find", `{}`, nil, 405, 2},
		{"unknown collection distinct", "POST", "/v1/collections/nope/distinct", `{"key": "sensor"}`, nil, 404, 26},
		{"distinct without key", "POST", "/v1/collections/s/distinct", `{"filter": {}}`, nil, 400, 2},
		{"distinct key not a string", "POST", "/v1/collections/s/distinct", `{"key": 5}`, nil, 400, 2},
		{"distinct empty key part", "POST", "/v1/collections/s/distinct", `{"key": "sensor..x"}`, nil, 400, 2},
		{"distinct unknown option", "POST", "/v1/collections/s/distinct", `{"key": "sensor", "query": {}}`, nil, 400, 2},
		{"distinct bad filter", "POST", "/v1/collections/s/distinct", `{"key": "sensor", "filter": {"v": {"$bogus": 1}}}`, nil, 400, 2},
		{"GET find with bad q", "GET", "/v1/collections/s/find?q=%7Bnope", ``, nil, 400, 2},
	}
	before := s.state()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := s.do(c.method, c.path, []byte(c.body), c.hdr...)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			code := r.errorCodeOrWriteError(t)
			if c.code != 0 && code != c.code {
				t.Fatalf("code %d, want %d: %s", code, c.code, r.body)
			}
			if after := s.state(); after != before {
				t.Fatalf("state changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// errorCodeOrWriteError returns the code of an error reply, or of the first
// write error of an insert reply that stored nothing.
func (r reply) errorCodeOrWriteError(t *testing.T) int {
	t.Helper()
	m := r.json(t)
	if wes, ok := m["writeErrors"].([]any); ok {
		if m["inserted"].(float64) != 0 {
			t.Fatalf("refused insert stored something: %s", r.body)
		}
		we := wes[0].(map[string]any)
		if !bytes.Contains(r.body, []byte("message")) {
			t.Fatalf("write error without message: %s", r.body)
		}
		return int(we["code"].(float64))
	}
	return r.errorCode(t)
}
