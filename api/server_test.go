package api_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/timeseries"
)

// testServer is a real server on loopback over a real DB in a temp dir.
type testServer struct {
	t     *testing.T
	srv   *api.Server
	db    *timeseries.DB
	url   string
	token string
}

func newTestServer(t *testing.T, mod func(*api.Options)) *testServer {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return serveDB(t, db, mod)
}

// serveDB serves db over a loopback httptest server, closing both when the
// test ends.
func serveDB(t *testing.T, db *timeseries.DB, mod func(*api.Options)) *testServer {
	t.Helper()
	opts := api.Options{DB: db}
	if mod != nil {
		mod(&opts)
	}
	srv, err := api.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return &testServer{t: t, srv: srv, db: db, url: hs.URL, token: opts.AuthToken}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("reply %d is not a JSON object: %v\n%s", r.status, err, r.body)
	}
	return m
}

// errorCode returns the MongoDB code of an error reply.
func (r reply) errorCode(t *testing.T) int {
	t.Helper()
	e, ok := r.json(t)["error"].(map[string]any)
	if !ok {
		t.Fatalf("reply %d has no error object: %s", r.status, r.body)
	}
	for _, k := range []string{"code", "codeName", "message"} {
		if _, ok := e[k]; !ok {
			t.Fatalf("error reply lacks %q: %s", k, r.body)
		}
	}
	return int(e["code"].(float64))
}

// do sends a request; hdr holds header name/value pairs.
func (s *testServer) do(method, path string, body []byte, hdr ...string) reply {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (s *testServer) mustDo(status int, method, path, body string, hdr ...string) reply {
	s.t.Helper()
	r := s.do(method, path, []byte(body), hdr...)
	if r.status != status {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.body)
	}
	return r
}

// count returns a collection's count from its description.
func (s *testServer) count(name string) int64 {
	s.t.Helper()
	r := s.mustDo(200, "GET", "/v1/collections/"+name, "")
	return int64(r.json(s.t)["count"].(float64))
}

func (s *testServer) createSensors(name string) {
	s.t.Helper()
	s.mustDo(201, "PUT", "/v1/collections/"+name, `{"timeseries": {"timeField": "timestamp", "metaField": "sensor"}}`)
}

// findRows runs a find and decodes its JSON array.
func (s *testServer) findRows(name, body string) []map[string]any {
	s.t.Helper()
	r := s.mustDo(200, "POST", "/v1/collections/"+name+"/find", body)
	var rows []map[string]any
	if err := json.Unmarshal(r.body, &rows); err != nil {
		s.t.Fatalf("find reply is not a JSON array: %v\n%s", err, r.body)
	}
	return rows
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zstded(t *testing.T, b []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(b, nil)
}

func TestHealthzAndPing(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(200, "GET", "/healthz", "")
	r := s.mustDo(204, "GET", "/ping", "")
	if r.header.Get("X-Influxdb-Version") == "" {
		t.Error("ping lacks X-Influxdb-Version")
	}
	s.mustDo(204, "HEAD", "/ping", "")
	r = s.mustDo(404, "GET", "/nope", "")
	r.errorCode(t)
}

func TestCollectionLifecycle(t *testing.T) {
	s := newTestServer(t, nil)
	r := s.mustDo(201, "PUT", "/v1/collections/weather", `{"timeseries": {"timeField": "timestamp", "metaField": "sensor", "granularity": "seconds"}, "expireAfterSeconds": 86400}`)
	desc := r.json(t)
	if desc["name"] != "weather" || desc["count"].(float64) != 0 {
		t.Fatalf("description: %s", r.body)
	}
	// Identical after defaults: an omitted granularity is "seconds".
	s.mustDo(200, "PUT", "/v1/collections/weather", `{"timeseries": {"timeField": "timestamp", "metaField": "sensor"}, "expireAfterSeconds": 86400}`)
	r = s.mustDo(409, "PUT", "/v1/collections/weather", `{"timeseries": {"timeField": "timestamp", "metaField": "sensor", "granularity": "hours"}}`)
	if c := r.errorCode(t); c != 48 {
		t.Fatalf("code %d, want 48", c)
	}
	s.mustDo(201, "PUT", "/v1/collections/plain", ``)

	r = s.mustDo(200, "GET", "/v1/collections", "")
	var list []map[string]any
	if err := json.Unmarshal(r.body, &list); err != nil || len(list) != 2 || list[0]["name"] != "plain" || list[1]["name"] != "weather" {
		t.Fatalf("list: %v %s", err, r.body)
	}

	r = s.mustDo(200, "PATCH", "/v1/collections/weather", `{"expireAfterSeconds": 100}`)
	if m := r.json(t); m["expireAfterSeconds_old"].(float64) != 86400 || m["expireAfterSeconds_new"].(float64) != 100 {
		t.Fatalf("collMod reply: %s", r.body)
	}
	r = s.mustDo(200, "PATCH", "/v1/collections/weather", `{"expireAfterSeconds": "off"}`)
	if m := r.json(t); m["expireAfterSeconds_old"].(float64) != 100 || m["expireAfterSeconds_new"] != "off" {
		t.Fatalf("collMod reply: %s", r.body)
	}
	s.mustDo(200, "PATCH", "/v1/collections/weather", `{"timeseries": {"granularity": "minutes"}}`)
	r = s.mustDo(400, "PATCH", "/v1/collections/weather", `{"timeseries": {"granularity": "seconds"}}`)
	if c := r.errorCode(t); c != 72 {
		t.Fatalf("code %d, want 72", c)
	}
	r = s.mustDo(200, "GET", "/v1/collections/weather", "")
	opts := r.json(t)["options"].(map[string]any)
	if opts["timeseries"].(map[string]any)["granularity"] != "minutes" || opts["expireAfterSeconds"] != nil {
		t.Fatalf("options after collMod: %s", r.body)
	}

	s.mustDo(200, "DELETE", "/v1/collections/weather", "")
	r = s.mustDo(404, "GET", "/v1/collections/weather", "")
	if c := r.errorCode(t); c != 26 {
		t.Fatalf("code %d, want 26", c)
	}
	r = s.mustDo(404, "DELETE", "/v1/collections/weather", "")
	if c := r.errorCode(t); c != 26 {
		t.Fatalf("code %d, want 26", c)
	}
}

const sensorDocs = `[
 {"timestamp": {"$date": "2024-05-01T12:00:00Z"}, "sensor": "a", "temp": 20.5, "n": 1},
 {"timestamp": {"$date": "2024-05-01T12:00:10Z"}, "sensor": "a", "temp": 21.5, "n": 2},
 {"timestamp": {"$date": "2024-05-01T12:00:05Z"}, "sensor": "b", "temp": 10.0, "n": 3},
 {"timestamp": "2024-05-01T12:01:00.5Z", "sensor": "b", "temp": 11.0, "n": 4}
]`

func TestInsertAndFind(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	r := s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	if m := r.json(t); m["inserted"].(float64) != 4 {
		t.Fatalf("insert reply: %s", r.body)
	}
	nd := `{"timestamp": {"$date": {"$numberLong": "1714565000000"}}, "sensor": "c", "temp": 5}` + "\n\n" +
		`{"timestamp": 1714565010000, "sensor": "c", "temp": 6}` + "\n"
	s.mustDo(200, "POST", "/v1/collections/s/documents", nd, "Content-Type", "application/x-ndjson")
	gz := gzipped(t, []byte(`[{"timestamp": "2024-05-01T13:00:00Z", "sensor": "d", "temp": 1}]`))
	s.mustDo(200, "POST", "/v1/collections/s/documents", string(gz), "Content-Encoding", "gzip")
	zs := zstded(t, []byte(`{"timestamp": "2024-05-01T13:00:01Z", "sensor": "d", "temp": 2}`))
	s.mustDo(200, "POST", "/v1/collections/s/documents", string(zs), "Content-Encoding", "zstd", "Content-Type", "application/x-ndjson")
	if n := s.count("s"); n != 8 {
		t.Fatalf("count %d, want 8", n)
	}

	rows := s.findRows("s", `{"filter": {"sensor": "a"}, "sort": {"timestamp": 1}}`)
	if len(rows) != 2 || rows[0]["temp"].(float64) != 20.5 || rows[1]["temp"].(float64) != 21.5 {
		t.Fatalf("rows: %v", rows)
	}
	if d, ok := rows[0]["timestamp"].(map[string]any); !ok || d["$date"] != "2024-05-01T12:00:00Z" {
		t.Fatalf("time rendering: %v", rows[0]["timestamp"])
	}
	if rows[0]["sensor"] != "a" {
		t.Fatalf("meta rendering: %v", rows[0]["sensor"])
	}
	// Global descending order, limit, date range.
	rows = s.findRows("s", `{"filter": {"sensor": {"$in": ["a", "b"]}, "timestamp": {"$gte": {"$date": "2024-05-01T12:00:05Z"}, "$lt": {"$date": "2024-05-01T13:00:00Z"}}}, "sort": {"timestamp": -1}, "limit": 3}`)
	var got []float64
	for _, r := range rows {
		got = append(got, r["n"].(float64))
	}
	if len(got) != 3 || got[0] != 4 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("descending n: %v (rows %v)", got, rows)
	}
	// Skip, as on a plain collection: the same order, the first left out.
	rows = s.findRows("s", `{"filter": {"sensor": {"$in": ["a", "b"]}, "timestamp": {"$gte": {"$date": "2024-05-01T12:00:05Z"}, "$lt": {"$date": "2024-05-01T13:00:00Z"}}}, "sort": {"timestamp": -1}, "skip": 1, "limit": 3}`)
	if len(rows) != 2 || rows[0]["n"].(float64) != 2 || rows[1]["n"].(float64) != 3 {
		t.Fatalf("skip 1: %v", rows)
	}
	if r := s.mustDo(400, "POST", "/v1/collections/s/find", `{"sort": {"temp": 1}}`); r.errorCode(t) != 2 {
		t.Fatalf("a time series sorted by a field: %s", r.body)
	}
	if r := s.mustDo(400, "POST", "/v1/collections/s/find", `{"explain": true}`); r.errorCode(t) != 2 {
		t.Fatalf("explain on a time series: %s", r.body)
	}
	// Inclusion projection: only the named fields, and _id unless
	// excluded.
	rows = s.findRows("s", `{"filter": {"sensor": {"$in": ["b"]}}, "projection": {"temp": 1, "timestamp": 1, "_id": 0}}`)
	if len(rows) != 2 || len(rows[0]) != 2 || rows[0]["temp"] == nil || rows[0]["timestamp"] == nil {
		t.Fatalf("inclusion projection: %v", rows)
	}
	// Exclusion projection.
	rows = s.findRows("s", `{"filter": {"sensor": "b"}, "projection": {"temp": 0, "sensor": false}}`)
	if len(rows) != 2 || rows[0]["temp"] != nil || rows[0]["sensor"] != nil || rows[0]["n"] == nil {
		t.Fatalf("exclusion projection: %v", rows)
	}
	// Residual filter on a field.
	rows = s.findRows("s", `{"filter": {"temp": {"$gt": 20}}}`)
	if len(rows) != 2 {
		t.Fatalf("field filter: %v", rows)
	}

	// NDJSON and CSV.
	r = s.mustDo(200, "POST", "/v1/collections/s/find", `{"filter": {"sensor": "a"}, "sort": {"timestamp": 1}}`, "Accept", "application/x-ndjson")
	if lines := strings.Split(strings.TrimSpace(string(r.body)), "\n"); len(lines) != 2 || r.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("ndjson: %q %s", r.header.Get("Content-Type"), r.body)
	}
	r = s.mustDo(200, "POST", "/v1/collections/s/find", `{"filter": {"sensor": "a"}, "sort": {"timestamp": 1}, "projection": {"timestamp": 1, "temp": 1, "_id": 0}}`, "Accept", "text/csv")
	if want := "timestamp,temp\n2024-05-01T12:00:00Z,20.5\n2024-05-01T12:00:10Z,21.5\n"; string(r.body) != want {
		t.Fatalf("csv:\n%s\nwant:\n%s", r.body, want)
	}
	r = s.mustDo(406, "POST", "/v1/collections/s/find", `{}`, "Accept", "image/png")
	r.errorCode(t)
}

func TestInsertWriteErrors(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	body := `[
 {"timestamp": "2024-05-01T12:00:00Z", "sensor": "a", "v": 1},
 {"sensor": "a", "v": 2},
 {"timestamp": "2024-05-01T12:00:02Z", "sensor": "a", "v": 3},
 {"timestamp": "not a date", "sensor": "a", "v": 4},
 {"timestamp": "2024-05-01T12:00:04Z", "sensor": "a", "v": 5}
]`
	r := s.mustDo(400, "POST", "/v1/collections/s/documents", body)
	m := r.json(t)
	wes := m["writeErrors"].([]any)
	if m["inserted"].(float64) != 1 || len(wes) != 1 {
		t.Fatalf("ordered reply: %s", r.body)
	}
	we := wes[0].(map[string]any)
	if we["index"].(float64) != 1 || we["code"].(float64) != 2 || !strings.Contains(we["message"].(string), "'timestamp' must be present and contain a valid date") {
		t.Fatalf("write error: %v", we)
	}
	if n := s.count("s"); n != 1 {
		t.Fatalf("count after ordered insert %d, want 1", n)
	}
	r = s.mustDo(400, "POST", "/v1/collections/s/documents?ordered=false", body)
	m = r.json(t)
	wes = m["writeErrors"].([]any)
	if m["inserted"].(float64) != 3 || len(wes) != 2 || wes[0].(map[string]any)["index"].(float64) != 1 || wes[1].(map[string]any)["index"].(float64) != 3 {
		t.Fatalf("unordered reply: %s", r.body)
	}
	if n := s.count("s"); n != 4 {
		t.Fatalf("count after unordered insert %d, want 4", n)
	}
}

func TestAggregateFlatRows(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	r := s.mustDo(200, "POST", "/v1/collections/s/aggregate", `{"window": "1m", "funcs": ["count", "avg", "max"], "fields": ["temp"]}`)
	var rows []map[string]any
	if err := json.Unmarshal(r.body, &rows); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	// a: one window (2 points); b: two windows.
	if len(rows) != 3 {
		t.Fatalf("rows: %s", r.body)
	}
	first := rows[0]
	if first["timestamp"] != "2024-05-01T12:00:00Z" || first["sensor"] != "a" || first["temp_count"].(float64) != 2 || first["temp_avg"].(float64) != 21 || first["temp_max"].(float64) != 21.5 {
		t.Fatalf("first row: %v", first)
	}
	r = s.mustDo(200, "POST", "/v1/collections/s/aggregate", `{"window": 3600, "groupBy": null, "funcs": ["sum"], "fields": ["n"]}`, "Accept", "text/csv")
	if want := "timestamp,n_sum\n2024-05-01T12:00:00Z,10\n"; string(r.body) != want {
		t.Fatalf("csv:\n%s\nwant:\n%s", r.body, want)
	}
	for _, bad := range []string{`{}`, `{"window": "soon"}`, `{"window": -1}`, `{"window": "1m", "funcs": ["median"]}`, `{"window": "1m", "groupBy": "other"}`, `{"window": "1m", "bogus": 1}`} {
		r := s.mustDo(400, "POST", "/v1/collections/s/aggregate", bad)
		r.errorCode(t)
	}
}

func TestDeleteByFilter(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	r := s.mustDo(200, "POST", "/v1/collections/s/delete", `{"filter": {"sensor": "b", "timestamp": {"$lt": {"$date": "2024-05-01T12:01:00Z"}}}}`)
	if r.json(t)["deleted"].(float64) != 1 {
		t.Fatalf("delete reply: %s", r.body)
	}
	if n := s.count("s"); n != 3 {
		t.Fatalf("count %d, want 3", n)
	}
	// Any filter: conditions on measurement fields, with or without the
	// metaField, are matched measurement by measurement.
	r = s.mustDo(200, "POST", "/v1/collections/s/delete", `{"filter": {"temp": {"$gte": 21}}}`)
	if r.json(t)["deleted"].(float64) != 1 || s.count("s") != 2 {
		t.Fatalf("delete temp >= 21: %s, count %d", r.body, s.count("s"))
	}
	r = s.mustDo(200, "POST", "/v1/collections/s/delete", `{"filter": {"sensor": "a", "n": {"$in": [3, 4]}}}`)
	if r.json(t)["deleted"].(float64) != 0 || s.count("s") != 2 {
		t.Fatalf("delete a with n 3 or 4 (none): %s", r.body)
	}
	r = s.mustDo(200, "POST", "/v1/collections/s/delete", `{"filter": {"sensor": "b", "n": {"$in": [3, 4]}}}`)
	if r.json(t)["deleted"].(float64) != 1 || s.count("s") != 1 {
		t.Fatalf("delete b with n 3 or 4: %s", r.body)
	}
	found := string(s.mustDo(200, "POST", "/v1/collections/s/find", `{}`).body)
	if !strings.Contains(found, `"n":1`) || strings.Contains(found, `"n":3`) || strings.Contains(found, `"n":2`) {
		t.Fatalf("left after the deletes: %s", found)
	}
	// A bad filter changes nothing.
	r = s.mustDo(400, "POST", "/v1/collections/s/delete", `{"filter": {"temp": {"$bogus": 1}}}`)
	if r.errorCode(t) != 2 || s.count("s") != 1 {
		t.Fatalf("a bad filter: %s, count %d", r.body, s.count("s"))
	}
	r = s.mustDo(400, "POST", "/v1/collections/s/delete", `{}`)
	r.errorCode(t)
	r = s.mustDo(200, "POST", "/v1/collections/s/delete", `{"filter": {}}`)
	if r.json(t)["deleted"].(float64) != 1 || s.count("s") != 0 {
		t.Fatalf("delete all: %s", r.body)
	}
}

// TestMetaUpdateOverHTTP: an update of a time-series collection's
// metaField moves the measurements of the series it selects; an update of
// a measurement field is refused with InvalidOptions (72) and changes
// nothing.
func TestMetaUpdateOverHTTP(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	r := s.mustDo(200, "POST", "/v1/collections/s/update", `{"filter": {"sensor": "a"}, "update": {"$set": {"sensor": "c"}}, "multi": true}`)
	if m := r.json(t); m["matched"].(float64) != 2 || m["modified"].(float64) != 2 {
		t.Fatalf("update reply: %s", r.body)
	}
	r = s.mustDo(200, "POST", "/v1/collections/s/find", `{"filter": {"sensor": "c"}}`)
	if got := strings.Count(string(r.body), `"sensor":"c"`); got != 2 {
		t.Fatalf("%d measurements of c, want 2: %s", got, r.body)
	}
	for _, body := range []string{
		`{"filter": {"sensor": "b"}, "update": {"$set": {"temp": 1}}, "multi": true}`,
		`{"filter": {"temp": {"$gt": 1}}, "update": {"$set": {"sensor": "d"}}, "multi": true}`,
		`{"filter": {"sensor": "b"}, "update": {"$set": {"sensor": "d"}}}`,
	} {
		if r := s.mustDo(400, "POST", "/v1/collections/s/update", body); r.errorCode(t) != 72 {
			t.Fatalf("update %s: %s, want code 72", body, r.body)
		}
	}
	r = s.mustDo(200, "POST", "/v1/collections/s/find", `{"filter": {"sensor": "b"}}`)
	if got := strings.Count(string(r.body), `"sensor":"b"`); got != 2 || s.count("s") != 4 {
		t.Fatalf("after refused updates, b: %s", r.body)
	}
}

// TestCurlDefaultContentType: `curl -d` sends the form media type; JSON
// endpoints take it as JSON.
func TestCurlDefaultContentType(t *testing.T) {
	s := newTestServer(t, nil)
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	s.mustDo(201, "PUT", "/v1/collections/s", `{"timeseries": {"timeField": "timestamp", "metaField": "sensor"}}`, form...)
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs, form...)
	r := s.mustDo(200, "POST", "/v1/collections/s/find", `{"filter": {"sensor": "a"}}`, form...)
	var rows []map[string]any
	if err := json.Unmarshal(r.body, &rows); err != nil || len(rows) != 2 {
		t.Fatalf("find: %v %s", err, r.body)
	}
}

// An NDJSON body of several insert chunks into a time series (validated
// whole, then decoded and stored a chunk at a time): a malformed last line
// refuses it whole, and the write errors of an unordered insert name the
// documents' own lines.
func TestNDJSONBodyOfChunks(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/m", `{"timeseries": {"timeField": "time", "metaField": "sensor"}}`)
	var b strings.Builder
	var refused []int
	n := 0
	for ; b.Len() < 5<<19; n++ { // 2.5 MiB: three chunks
		if n%20000 == 11 {
			fmt.Fprintf(&b, "{\"sensor\": {\"id\": \"s%d\"}, \"v\": %d}\n", n%10, n) // no time
			refused = append(refused, n)
			continue
		}
		fmt.Fprintf(&b, "{\"time\":{\"$date\":\"2024-01-01T%02d:%02d:%02dZ\"},\"sensor\":{\"id\":\"s%d\"},\"v\":%d}\n", n/3600%24, n/60%60, n%60, n%10, n)
	}
	body := b.String()
	r := s.mustDo(400, "POST", "/v1/collections/m/documents?ordered=false", body+`{"time": 1, "v": 01}`+"\n", "Content-Type", "application/x-ndjson")
	if msg := string(r.body); !strings.Contains(msg, fmt.Sprintf("line %d:", n+1)) {
		t.Fatalf("a malformed last line: %s", msg)
	}
	if c := s.mustDo(200, "GET", "/v1/collections/m", "").json(t)["count"].(float64); c != 0 {
		t.Fatalf("%v measurements stored from a refused body", c)
	}
	r = s.mustDo(400, "POST", "/v1/collections/m/documents?ordered=false", body, "Content-Type", "application/x-ndjson")
	var rep struct {
		Inserted    int
		WriteErrors []struct{ Index int }
	}
	if err := json.Unmarshal(r.body, &rep); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, we := range rep.WriteErrors {
		got = append(got, we.Index)
	}
	if rep.Inserted != n-len(refused) || fmt.Sprint(got) != fmt.Sprint(refused) {
		t.Fatalf("inserted %d, write errors at %v; want %d, %v", rep.Inserted, got, n-len(refused), refused)
	}
	if c := s.mustDo(200, "GET", "/v1/collections/m", "").json(t)["count"].(float64); int(c) != n-len(refused) {
		t.Fatalf("count %v, want %d", c, n-len(refused))
	}
}

// TestReplyLength: a query reply the server renders whole (shorter than
// the render's flush size, quicker than its flush interval) goes out with
// its Content-Length, in one write, rather than chunked; a long one
// streams in chunks.
func TestReplyLength(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	var docs strings.Builder
	for i := range 8000 {
		fmt.Fprintf(&docs, "{\"timestamp\": {\"$date\": %d}, \"sensor\": \"s%d\", \"temp\": %d.5}\n", 1714564800000+int64(i)*1000, i%20, i)
	}
	s.mustDo(200, "POST", "/v1/collections/s/documents", docs.String(), "Content-Type", "application/x-ndjson")
	for _, c := range []struct {
		path, body string
		whole      bool
	}{
		{"find", `{"filter": {"sensor": "s1"}}`, true},                                                 // 400 rows, ~30 KB
		{"aggregate", `{"window": "1m", "groupBy": null, "funcs": ["avg"], "fields": ["temp"]}`, true}, // 134 rows
		{"find", `{}`, false}, // 8,000 rows, ~600 KB
	} {
		r := s.mustDo(200, "POST", "/v1/collections/s/"+c.path, c.body)
		cl := r.header.Get("Content-Length")
		if len(r.body) <= 2048 {
			t.Fatalf("%s %s: a reply of %d bytes, too short to tell", c.path, c.body, len(r.body))
		}
		if c.whole && cl != strconv.Itoa(len(r.body)) {
			t.Errorf("%s %s: %d bytes, Content-Length %q", c.path, c.body, len(r.body), cl)
		}
		if !c.whole && cl != "" {
			t.Errorf("%s %s: %d bytes, Content-Length %q: a long reply is not kept whole", c.path, c.body, len(r.body), cl)
		}
	}
}
