package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The sessions case: a plain collection, documents with generated ids, a
// TTL index on lastModifiedDate, a refresh with $currentDate, finds that
// use an index and say so.
func TestPlainCollectionOverHTTP(t *testing.T) {
	clk := &clock{}
	clk.Set(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
	s := newTTLServer(t, clk)
	s.mustDo(201, "PUT", "/v1/collections/sessions", `{}`)
	r := s.mustDo(200, "POST", "/v1/collections/sessions/documents", `[
		{"_id": "s1", "user": "ann", "lastModifiedDate": {"$date": "2020-01-01T00:00:00Z"}},
		{"_id": "s2", "user": "bob", "lastModifiedDate": {"$date": "2020-01-01T00:00:00Z"}},
		{"user": "cat", "tags": ["a", "b"]}]`)
	if r.json(t)["inserted"].(float64) != 3 {
		t.Fatalf("%s", r.body)
	}
	// A duplicate _id is a write error with code 11000, the rest of an
	// unordered batch goes in.
	r = s.mustDo(400, "POST", "/v1/collections/sessions/documents?ordered=false", `[{"_id": "s1"}, {"_id": "s4", "user": "dan"}]`)
	m := r.json(t)
	we := m["writeErrors"].([]any)[0].(map[string]any)
	if m["inserted"].(float64) != 1 || we["code"].(float64) != 11000 || we["index"].(float64) != 0 {
		t.Fatalf("%s", r.body)
	}
	s.mustDo(201, "POST", "/v1/collections/sessions/indexes", `{"key": {"user": 1}}`)
	r = s.mustDo(200, "POST", "/v1/collections/sessions/find", `{"filter": {"user": "bob"}, "explain": true}`)
	st := r.json(t)["executionStats"].(map[string]any)
	if st["stage"] != "IXSCAN" || st["index"] != "user_1" || st["docsExamined"].(float64) != 1 || st["nReturned"].(float64) != 1 {
		t.Fatalf("explain: %s", r.body)
	}
	r = s.mustDo(200, "POST", "/v1/collections/sessions/find",
		`{"filter": {"user": {"$gte": "b"}}, "sort": {"user": -1}, "projection": {"user": 1, "_id": 0}, "limit": 2}`)
	if got := strings.TrimSpace(string(r.body)); got != `[{"user":"dan"},{"user":"cat"}]` {
		t.Fatalf("find: %s", got)
	}
	r = s.mustDo(200, "POST", "/v1/collections/sessions/find", `{"filter": {"_id": "s1"}}`, "Accept", "application/x-ndjson")
	if got := string(r.body); got != `{"_id":"s1","user":"ann","lastModifiedDate":{"$date":"2020-01-01T00:00:00Z"}}`+"\n" { // as written
		t.Fatalf("ndjson: %q", got)
	}
	s.mustDo(406, "POST", "/v1/collections/sessions/find", `{}`, "Accept", "text/csv")
	// CSV preferred, NDJSON acceptable: NDJSON.
	r = s.mustDo(200, "POST", "/v1/collections/sessions/find", `{"filter": {"_id": "s1"}, "projection": {"user": 1}}`,
		"Accept", "text/csv, application/x-ndjson;q=0.3")
	if got := string(r.body); got != `{"_id":"s1","user":"ann"}`+"\n" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("CSV preferred, NDJSON acceptable: %s %q", r.header.Get("Content-Type"), got)
	}

	// Expire sessions after an hour: the 2020 ones are gone from reads at
	// once, and the monitor deletes them.
	s.mustDo(201, "POST", "/v1/collections/sessions/indexes", `{"key": {"lastModifiedDate": 1}, "expireAfterSeconds": 3600}`)
	if n := len(s.findDocs("sessions", `{}`)); n != 2 {
		t.Fatalf("%d visible after the TTL index", n)
	}
	// Refresh a session: $currentDate makes it live again... but it was
	// expired, so it is invisible to the update too.
	r = s.mustDo(200, "POST", "/v1/collections/sessions/update",
		`{"filter": {"_id": "s1"}, "update": {"$currentDate": {"lastModifiedDate": true}}}`)
	if got := string(r.body); !strings.Contains(got, `"matched":0`) {
		t.Fatalf("update of an expired session: %s", got)
	}
	r = s.mustDo(200, "POST", "/v1/collections/sessions/update",
		`{"filter": {"user": {"$in": ["cat", "dan"]}}, "update": {"$currentDate": {"lastModifiedDate": true}, "$inc": {"hits": 1}}, "multi": true}`)
	if got := string(r.body); !strings.Contains(got, `"matched":2,"modified":2`) {
		t.Fatalf("refresh: %s", got)
	}
	// The dry run: what a shorter TTL, or a TTL on the user index, would
	// delete now; nothing changes.
	r = s.mustDo(200, "POST", "/v1/collections/sessions/ttl/preview", `{"indexes": {"lastModifiedDate_1": 0}}`)
	if !strings.Contains(string(r.body), `"documents":2`) {
		t.Fatalf("preview: %s", r.body)
	}
	if r := s.do("POST", "/v1/collections/sessions/ttl/preview", []byte(`{"expireAfterSeconds": 5}`)); r.status != 400 || r.errorCode(t) != 72 {
		t.Fatalf("collection-level preview on a plain collection: %d %s", r.status, r.body)
	}
	if r := s.do("POST", "/v1/collections/sessions/ttl/preview", []byte(`{"newIndex": {"key": {"at": 1}, "expireAfterSeconds": 5}}`)); r.status != 400 || r.errorCode(t) != 72 {
		t.Fatalf("a new index previewed on a plain collection: %d %s", r.status, r.body)
	}
	r = s.mustDo(200, "POST", "/v1/admin/ttl/run", ``)
	if !strings.Contains(string(r.body), `"deletedDocuments":2`) {
		t.Fatalf("ttl run: %s", r.body)
	}
	if n := s.count("sessions"); n != 2 {
		t.Fatalf("count after the pass: %d", n)
	}
	r = s.mustDo(200, "GET", "/v1/collections/sessions", ``)
	ttl := r.json(t)["ttl"].(map[string]any)
	if ix := ttl["indexes"].([]any); len(ix) != 1 || ttl["nextExpiry"] == nil {
		t.Fatalf("ttl state: %s", r.body)
	}
	// Replace keeps the _id; another _id is 66.
	r = s.mustDo(200, "POST", "/v1/collections/sessions/replace", `{"filter": {"user": "dan"}, "replacement": {"user": "dan", "v": 2}}`)
	if !strings.Contains(string(r.body), `"modified":1`) {
		t.Fatalf("replace: %s", r.body)
	}
	r = s.mustDo(400, "POST", "/v1/collections/sessions/replace", `{"filter": {"user": "dan"}, "replacement": {"_id": "x"}}`)
	if r.errorCode(t) != 66 {
		t.Fatalf("%s", r.body)
	}
	r = s.mustDo(200, "POST", "/v1/collections/sessions/delete", `{"filter": {"user": "dan"}}`)
	if string(r.body) != `{"deleted":1}`+"\n" {
		t.Fatalf("delete: %s", r.body)
	}
	// Indexes: _id_ first; it cannot be dropped or get a TTL.
	r = s.mustDo(200, "GET", "/v1/collections/sessions/indexes", ``)
	var specs []map[string]any
	json.Unmarshal(r.body, &specs)
	if len(specs) != 3 || specs[0]["name"] != "_id_" {
		t.Fatalf("indexes: %s", r.body)
	}
	if r := s.mustDo(400, "DELETE", "/v1/collections/sessions/indexes/_id_", ``); r.errorCode(t) != 72 {
		t.Fatalf("%s", r.body)
	}
	if r := s.do("POST", "/v1/collections/sessions/indexes", []byte(`{"key": {"_id": 1}, "expireAfterSeconds": 5}`)); r.status != 400 || r.errorCode(t) != 197 {
		t.Fatalf("TTL on _id: %d %s", r.status, r.body)
	}
}

// Bad requests on plain collections get 4xx and change nothing.
func TestPlainBadInput(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/p", `{}`)
	s.mustDo(200, "POST", "/v1/collections/p/documents", `[{"_id": 1, "a": 1}]`)
	for _, c := range []struct {
		path, body string
		status     int
		code       int
	}{
		{"/documents", `[{"$bad": 1}]`, 400, 2},
		{"/documents", `[{"_id": [1]}]`, 400, 2},
		{"/documents", `[{"d": {"$date": "nope"}}]`, 400, 2},
		{"/find", `{"sort": {"a": 2}}`, 400, 2},
		{"/find", `{"projection": {"a": 1, "b": 0}}`, 400, 2},
		{"/find", `{"filter": {"a": {"$bogus": 1}}}`, 400, 2},
		{"/find", `{"unknown": 1}`, 400, 2},
		{"/update", `{"filter": {}, "update": {"a": 1}}`, 400, 9},
		{"/update", `{"filter": {}, "update": {"$set": {"_id": 2}}}`, 400, 66},
		{"/update", `{"filter": {}, "update": {"$inc": {"a": "x"}}}`, 400, 14},
		{"/update", `{"update": {"$set": {"a": 2}}}`, 400, 2},
		{"/update", `{"filter": {}, "update": {"$set": {"a": 2}}, "multi": "yes"}`, 400, 2},
		{"/replace", `{"filter": {}, "replacement": 5}`, 400, 2},
		{"/aggregate", `{"window": "1m"}`, 400, 2},
	} {
		r := s.do("POST", "/v1/collections/p"+c.path, []byte(c.body))
		code := 0
		if c.path == "/documents" {
			// Refused documents are write errors.
			var m struct{ WriteErrors []struct{ Code int } }
			json.Unmarshal(r.body, &m)
			if len(m.WriteErrors) == 1 {
				code = m.WriteErrors[0].Code
			}
		} else {
			code = r.errorCode(t)
		}
		if r.status != c.status || code != c.code {
			t.Errorf("%s %s: %d %s, want %d code %d", c.path, c.body, r.status, r.body, c.status, c.code)
		}
	}
	if got := s.findDocs("p", `{}`); len(got) != 1 || fmt.Sprint(got[0]) != "map[_id:1 a:1]" {
		t.Fatalf("changed: %v", got)
	}
	r := s.do("POST", "/v1/collections/ts/update", []byte(`{"filter": {}, "update": {"$set": {"a": 1}}}`))
	if r.status != 404 {
		t.Fatalf("missing collection: %d", r.status)
	}
}

// Capped collections keep the newest documents in insertion order.
func TestCappedOverHTTP(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/log", `{"capped": true, "size": 100000, "max": 3}`)
	for i := 0; i < 5; i++ {
		s.mustDo(200, "POST", "/v1/collections/log/documents", fmt.Sprintf(`[{"_id": %d, "msg": "m%d"}]`, 10-i, i))
	}
	var ids []string
	for _, d := range s.findDocs("log", `{}`) {
		ids = append(ids, fmt.Sprint(d["_id"]))
	}
	if strings.Join(ids, ",") != "8,7,6" {
		t.Fatalf("capped order: %v", ids)
	}
	r := s.do("POST", "/v1/collections/log/indexes", []byte(`{"key": {"at": 1}, "expireAfterSeconds": 5}`))
	if r.status != 400 || r.errorCode(t) != 67 {
		t.Fatalf("TTL on capped: %d %s", r.status, r.body)
	}
}

func (s *testServer) findDocs(name, body string) []map[string]any {
	s.t.Helper()
	r := s.mustDo(200, "POST", "/v1/collections/"+name+"/find", body)
	var out []map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		s.t.Fatalf("%v: %s", err, r.body)
	}
	return out
}

// TestPlainInsertWriteErrors mixes refusals of the conversion (a field
// name with '$') and of the storage (a duplicate _id) in one insert: they
// come back in document order, and an ordered insert reports the first
// only, here the storage's, although the conversion refused first.
func TestPlainInsertWriteErrors(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/p", `{}`)
	s.mustDo(200, "POST", "/v1/collections/p/documents", `[{"_id": "a"}]`)

	r := s.mustDo(400, "POST", "/v1/collections/p/documents?ordered=false", `[{"_id": "a"}, {"$x": 1}, {"_id": "b"}]`)
	if got, want := string(r.body), `{"inserted":1,"writeErrors":[`+
		`{"index":0,"code":11000,"codeName":"DuplicateKey","message":`; !strings.HasPrefix(got, want) ||
		!strings.Contains(got, `},{"index":1,"code":2,"codeName":"BadValue","message":"field name`) {
		t.Fatalf("unordered: %s", got)
	}
	r = s.mustDo(400, "POST", "/v1/collections/p/documents", `[{"_id": "a"}, {"$x": 1}, {"_id": "c"}]`)
	m := r.json(t)
	wes := m["writeErrors"].([]any)
	if m["inserted"].(float64) != 0 || len(wes) != 1 || wes[0].(map[string]any)["code"].(float64) != 11000 {
		t.Fatalf("ordered: %s", r.body)
	}
	if n := len(s.findDocs("p", `{}`)); n != 2 {
		t.Fatalf("%d documents, want a and b", n)
	}
}
