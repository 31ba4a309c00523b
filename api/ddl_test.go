package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestCreateCodesHTTP: PUT /v1/collections/{name} refuses what MongoDB's
// create refuses with MongoDB's code (jstests/core/timeseries/
// timeseries_create_collection.js), 400 and a message naming the field,
// and creates nothing; a granularity with its own span is the granularity.
func TestCreateCodesHTTP(t *testing.T) {
	s := newTestServer(t, nil)
	for i, c := range []struct {
		body string
		code int
		msg  string
	}{
		{`{"timeseries": ""}`, 14, "'create.timeseries' is the wrong type 'string', expected type 'object'"},
		{`{"timeseries": {"timeField": 100}}`, 14, "'create.timeseries.timeField' is the wrong type"},
		{`{"timeseries": {"timeField": "time", "metaField": 100}}`, 14, "'create.timeseries.metaField' is the wrong type"},
		{`{"timeseries": {"timeField": "time"}, "expireAfterSeconds": ""}`, 14, "'create.expireAfterSeconds' is the wrong type"},
		{`{"timeseries": {"timeField": "time"}, "expireAfterSeconds": {}}`, 14, "'create.expireAfterSeconds' is the wrong type 'object'"},
		{`{"timeseries": {"timeField": "time", "invalidOption": {}}}`, 40415, "BSON field 'create.timeseries.invalidOption' is an unknown field."},
		{`{"timeseries": {"timeField": "time", "bucketMaxSpanSeconds": 31536001, "bucketRoundingSeconds": 31536001}}`, 2, "within [1, 31536000]; got 31536001"},
		{`{"timeseries": {"timeField": "time", "bucketMaxSpanSeconds": 0, "bucketRoundingSeconds": 0}}`, 2, "within [1, 31536000]; got 0"},
		{`{"timeseries": {"timeField": "time", "granularity": "minutes", "bucketMaxSpanSeconds": 3600}}`, 72, "default of 86400"},
		{`{"timeseries": {"timeField": "time", "bucketMaxSpanSeconds": 3600}}`, 72, "must be given together"},
	} {
		name := fmt.Sprintf("c%d", i)
		r := s.do("PUT", "/v1/collections/"+name, []byte(c.body))
		if r.status != 400 || r.errorCode(t) != c.code || !strings.Contains(string(r.body), c.msg) {
			t.Errorf("PUT %s: %d %s; want 400, code %d, %q", c.body, r.status, r.body, c.code, c.msg)
		}
		if e, _ := r.json(t)["error"].(map[string]any); c.code == 40415 && e["codeName"] != "IDLUnknownField" {
			t.Errorf("PUT %s: codeName %v, want IDLUnknownField", c.body, e["codeName"])
		}
		if r := s.do("GET", "/v1/collections/"+name, nil); r.status != 404 {
			t.Errorf("PUT %s refused, yet the collection exists: %d", c.body, r.status)
		}
	}
	s.mustDo(201, "PUT", "/v1/collections/g", `{"timeseries": {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 2592000, "bucketRoundingSeconds": 86400}}`)
	s.mustDo(200, "PUT", "/v1/collections/g", `{"timeseries": {"timeField": "t", "granularity": "hours"}}`)
}

// TestCollModAllOrNoneHTTP: PATCH /v1/collections/{name} of the
// collection's TTL, an index's and the granularity at once changes nothing
// when any part is refused, everything when none is; an index's
// expireAfterSeconds of the wrong type is TypeMismatch, as in MongoDB's
// collmod_convert_to_ttl.js.
func TestCollModAllOrNoneHTTP(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "s", "granularity": "minutes"}}`)
	s.mustDo(201, "POST", "/v1/collections/m/indexes", `{"key": {"t": 1}, "name": "ttl_a", "expireAfterSeconds": 3600, "partialFilterExpression": {"s": "a"}}`)
	// state is the collection's indexes, options and TTL rules.
	state := func() string {
		m := s.mustDo(200, "GET", "/v1/collections/m", "").json(t)
		return string(s.mustDo(200, "GET", "/v1/collections/m/indexes", "").body) + fmt.Sprint(m["options"], m["ttl"])
	}
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"expireAfterSeconds": 600, "index": {"name": "ttl_a", "expireAfterSeconds": 60}, "timeseries": {"granularity": "seconds"}}`, 72},
		{`{"expireAfterSeconds": 600, "index": {"name": "nope", "expireAfterSeconds": 60}, "timeseries": {"granularity": "hours"}}`, 27},
		{`{"expireAfterSeconds": 600, "index": {"name": "ttl_a", "expireAfterSeconds": "60"}}`, 14},
		{`{"expireAfterSeconds": 600, "index": {"name": "ttl_a", "expireAfterSeconds": 60}, "timeseries": {"granularity": "hours", "bucketMaxSpanSeconds": 3600}}`, 72},
	} {
		before := state()
		r := s.do("PATCH", "/v1/collections/m", []byte(c.body))
		if r.status/100 != 4 || r.errorCode(t) != c.code {
			t.Errorf("PATCH %s: %d %s; want code %d", c.body, r.status, r.body, c.code)
		}
		if state() != before {
			t.Errorf("PATCH %s refused, yet changed the collection", c.body)
		}
	}
	r := s.mustDo(200, "PATCH", "/v1/collections/m", `{"expireAfterSeconds": 600, "index": {"name": "ttl_a", "expireAfterSeconds": 60}, "timeseries": {"granularity": "hours"}}`)
	if m := r.json(t); m["expireAfterSeconds_new"] == nil || m["timeseries_new"].(map[string]any)["granularity"] != "hours" || m["index"] == nil {
		t.Fatalf("PATCH replied %s", r.body)
	}
	ttl := s.mustDo(200, "GET", "/v1/collections/m", "").json(t)["ttl"].(map[string]any)
	if ttl["expireAfterSeconds"].(float64) != 600 || ttl["indexes"].([]any)[0].(map[string]any)["expireAfterSeconds"].(float64) != 60 {
		t.Fatalf("after PATCH: %v", ttl)
	}
}
