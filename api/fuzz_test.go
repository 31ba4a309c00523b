package api_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/timeseries"
)

// fuzzServer is an in-process server over a real DB, shared by the inputs
// of one fuzz target.
func fuzzServer(f *testing.F) *api.Server {
	db, err := timeseries.Open(timeseries.Options{Dir: f.TempDir(), NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	srv, err := api.New(api.Options{DB: db, MaxBody: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/collections/s",
		bytes.NewBufferString(`{"timeseries": {"timeField": "timestamp", "metaField": "sensor"}}`)))
	if rec.Code != http.StatusCreated {
		f.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	return srv
}

func serve(t *testing.T, srv *api.Server, method, path, ctype string, body []byte) {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("%s %s: status %d: %s\nbody: %q", method, path, rec.Code, rec.Body, body)
	}
}

// FuzzInsertDocuments sends arbitrary bodies to the documents endpoint, as
// JSON arrays and as NDJSON: never a panic, never a 5xx.
func FuzzInsertDocuments(f *testing.F) {
	for _, s := range []string{
		sensorDocs,
		`[{"timestamp": {"$date": {"$numberLong": "-1"}}, "sensor": {"b": 1, "a": [1, "x", null]}, "v": 1e308}]`,
		`[{"timestamp": 1714564800000, "sensor": null, "v": -0, "w": "", "x": true, "y": {"$date": "1969-12-31T23:59:59.999999999Z"}}]`,
		`{"timestamp": "2024-05-01T12:00:00Z"}` + "\n" + `{"timestamp": "bad"}`,
		`[{"timestamp": {"$date": "2024-05-01T12:00:00Z"}, "v": 9223372036854775808}]`,
		`[{"timestamp": {"$date": 5}, "$bad": 1, "": 2}]`,
		`[[]]`, `[`, `null`, ``,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte, ndjson bool) {
		ct := "application/json"
		if ndjson {
			ct = "application/x-ndjson"
		}
		serve(t, srv, "POST", "/v1/collections/s/documents?ordered=false", ct, body)
	})
}

// FuzzLineProtocolWrite sends arbitrary line protocol to /write.
func FuzzLineProtocolWrite(f *testing.F) {
	for _, s := range []string{
		"cpu,host=a usage=1.5,idle=2i,ok=true,s=\"x\" 1714564800000000000\n",
		"cpu v=1\ncpu v=\ncpu\n# comment\n\n",
		"m,t\\ a=b\\,c f\\=x=\"q\\\"uote\" -1\n",
		"m f=18446744073709551615u 9223372036854775807\n",
		"m time=1,tags=2 1\n",
		"m,_measurement=x f=1\n",
	} {
		f.Add([]byte(s), "ns")
		f.Add([]byte(s), "s")
	}
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte, precision string) {
		serve(t, srv, "POST", "/write?db=lp&precision="+url.QueryEscape(precision), "", body)
	})
}

// FuzzFind sends arbitrary find bodies.
func FuzzFind(f *testing.F) {
	for _, s := range []string{
		`{"filter": {"sensor": {"$in": ["a", 1, null]}, "timestamp": {"$gte": {"$date": "2024-05-01T12:00:00Z"}}}, "sort": {"timestamp": -1}, "limit": 2}`,
		`{"filter": {"$or": [{"v": {"$gt": 1}}, {"sensor.x": {"$exists": false}}]}, "projection": {"v": 0}}`,
		`{"filter": {"v": {"$not": {"$type": "string"}}}}`,
		`{}`, ``, `[]`,
	} {
		f.Add([]byte(s))
	}
	srv := fuzzServer(f)
	req := httptest.NewRequest("POST", "/v1/collections/s/documents", bytes.NewBufferString(sensorDocs))
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		f.Fatalf("insert: %d %s", rec.Code, rec.Body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		serve(t, srv, "POST", "/v1/collections/s/find", "", body)
		serve(t, srv, "POST", "/v1/collections/s/aggregate", "", body)
	})
}

// FuzzPlainCollection sends arbitrary bodies to every endpoint of a plain
// collection with two indexes, one a TTL index: never a panic, never a 5xx.
func FuzzPlainCollection(f *testing.F) {
	for _, s := range []string{
		`[{"_id": 1, "a": [1, {"b": 2}], "at": {"$date": "2024-05-01T12:00:00Z"}}, {"a": "x", "o": {"$oid": "65a1b2c3d4e5f60718293a4b"}}]`,
		`{"filter": {"a": {"$gt": 0, "$lt": 5}}, "sort": {"a": -1, "_id": 1}, "projection": {"a.b": 1}, "skip": 1, "limit": 2, "explain": true}`,
		`{"filter": {"_id": {"$in": [1, 2]}}, "update": {"$set": {"x.y": 1}, "$inc": {"n": 1.5}, "$unset": {"a": ""}, "$currentDate": {"at": true}}, "multi": true}`,
		`{"filter": {"_id": 1}, "replacement": {"_id": 1, "a": [[]]}}`,
		`{"filter": {"a": {"$elemMatch": {"b": 2}}}}`,
		`{}`, ``, `[]`, `[{}]`,
	} {
		f.Add([]byte(s))
	}
	srv := fuzzServer(f)
	for _, req := range [][2]string{
		{"PUT", `/v1/collections/p|{}`},
		{"POST", `/v1/collections/p/indexes|{"key": {"a": 1, "_id": -1}}`},
		{"POST", `/v1/collections/p/indexes|{"key": {"at": 1}, "expireAfterSeconds": 60, "partialFilterExpression": {"a": {"$exists": true}}}`},
	} {
		path, body, _ := bytes.Cut([]byte(req[1]), []byte("|"))
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(req[0], string(path), bytes.NewReader(body)))
		if rec.Code >= 300 {
			f.Fatalf("%s %s: %d %s", req[0], path, rec.Code, rec.Body)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range []string{"documents?ordered=false", "find", "update", "replace", "delete"} {
			serve(t, srv, "POST", "/v1/collections/p/"+p, "", body)
		}
	})
}
