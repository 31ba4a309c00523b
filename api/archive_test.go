package api_test

import (
	"strings"
	"testing"
)

// The archive option over HTTP: on create and collMod beside the
// collection's TTL, on a TTL index, shown by GET; refused without a TTL or
// with a value that is not a boolean, changing nothing.
func TestArchiveOptionsOverHTTP(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/w", `{"timeseries": {"timeField": "t", "metaField": "sensor"}, "expireAfterSeconds": 60, "archive": true}`)
	m := s.mustDo(200, "GET", "/v1/collections/w", "").json(t)
	if m["options"].(map[string]any)["archive"] != true {
		t.Fatalf("options %v", m["options"])
	}
	a, ok := m["archive"].(map[string]any)
	if !ok || a["files"] != float64(0) || a["bytes"] != float64(0) || a["measurements"] != float64(0) {
		t.Fatalf("archive %v", m["archive"])
	}
	// Turning the TTL off turns archiving off with it.
	s.mustDo(200, "PATCH", "/v1/collections/w", `{"expireAfterSeconds": "off"}`)
	if m := s.mustDo(200, "GET", "/v1/collections/w", "").json(t); m["options"].(map[string]any)["archive"] != nil || m["archive"] != nil {
		t.Fatalf("after TTL off: %v", m)
	}
	s.mustDo(200, "PATCH", "/v1/collections/w", `{"expireAfterSeconds": 60, "archive": true}`)

	// A partial TTL index that archives one sensor.
	s.mustDo(201, "POST", "/v1/collections/w/indexes", `{"key": {"t": 1}, "name": "north", "expireAfterSeconds": 10, "partialFilterExpression": {"sensor": "north"}, "archive": true}`)
	r := s.mustDo(200, "GET", "/v1/collections/w/indexes", "")
	if !strings.Contains(string(r.body), `"name":"north","expireAfterSeconds":10,"partialFilterExpression":{"sensor":"north"},"archive":true`) {
		t.Fatalf("indexes %s", r.body)
	}

	for _, c := range []struct {
		method, path, body string
		code               float64
	}{
		{"PUT", "/v1/collections/x", `{"timeseries": {"timeField": "t"}, "archive": true}`, 72},
		{"PUT", "/v1/collections/x", `{"timeseries": {"timeField": "t"}, "expireAfterSeconds": 5, "archive": "yes"}`, 14},
		{"PUT", "/v1/collections/x", `{"archive": true}`, 72},
		{"PATCH", "/v1/collections/w", `{"archive": 1}`, 14},
		{"POST", "/v1/collections/w/indexes", `{"key": {"t": 1}, "name": "i", "archive": true}`, 67},
		{"POST", "/v1/collections/w/indexes", `{"key": {"t": 1}, "name": "i", "expireAfterSeconds": 5, "archive": "no"}`, 67},
	} {
		r := s.mustDo(400, c.method, c.path, c.body)
		if e := r.json(t)["error"].(map[string]any); e["code"] != c.code {
			t.Errorf("%s %s %s: %v, want code %v", c.method, c.path, c.body, e, c.code)
		}
	}
	s.mustDo(404, "GET", "/v1/collections/x", "")
	s.mustDo(200, "PATCH", "/v1/collections/w", `{"expireAfterSeconds": "off"}`)
	r = s.mustDo(400, "PATCH", "/v1/collections/w", `{"archive": true}`)
	if e := r.json(t)["error"].(map[string]any); e["code"] != float64(72) {
		t.Fatalf("archive without a TTL: %v", e)
	}
}
