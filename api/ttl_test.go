package api_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/internal/ttltest"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// clock is a settable clock shared by the store, the monitor and the API.
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time                         { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Set(t time.Time)                        { c.ns.Store(t.UnixNano()) }
func (c *clock) After(d time.Duration) <-chan time.Time { return make(chan time.Time) } // passes run on demand only

// newTTLServer is a test server whose store and monitor run on clk.
func newTTLServer(t *testing.T, clk *clock) *testServer {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	mon, err := ttl.New(ttl.Options{Store: db, Clock: clk, Disabled: true}) // passes on demand only
	if err != nil {
		t.Fatal(err)
	}
	mon.Start()
	srv, err := api.New(api.Options{DB: db, TTL: mon, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		mon.Close()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return &testServer{t: t, db: db, url: hs.URL}
}

const minuteDocs = `{"timestamp": {"$date": "2024-05-01T00:%02d:00Z"}, "sensor": %q, "v": %d}`

func insertMinutes(s *testServer, sensor string, n int) {
	s.t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, minuteDocs, i, sensor, i)
		b.WriteByte('\n')
	}
	s.mustDo(200, "POST", "/v1/collections/s/documents", b.String(), "Content-Type", "application/x-ndjson")
}

func TestTTLOverHTTP(t *testing.T) {
	clk := &clock{}
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	clk.Set(t0)
	s := newTTLServer(t, clk)
	s.mustDo(201, "PUT", "/v1/collections/s", `{"timeseries": {"timeField": "timestamp", "metaField": "sensor"}, "expireAfterSeconds": 3600}`)
	insertMinutes(s, "a", 60)
	insertMinutes(s, "b", 60)

	// Index endpoints and their errors.
	r := s.mustDo(201, "POST", "/v1/collections/s/indexes", `{"key": {"timestamp": 1}, "name": "a_short", "expireAfterSeconds": 600, "partialFilterExpression": {"sensor": "a"}}`)
	if m := r.json(t); m["name"] != "a_short" {
		t.Fatalf("create index: %s", r.body)
	}
	s.mustDo(200, "POST", "/v1/collections/s/indexes", `{"key": {"timestamp": 1}, "name": "a_short", "expireAfterSeconds": 600, "partialFilterExpression": {"sensor": "a"}}`)
	for _, c := range []struct {
		body         string
		status, code int
	}{
		{`{"key": {"timestamp": 1}, "name": "a_short", "expireAfterSeconds": 60, "partialFilterExpression": {"sensor": "a"}}`, 409, 85},
		{`{"key": {"sensor": 1}, "name": "a_short"}`, 409, 86},
		{`{"key": {"timestamp": 1, "sensor": 1}, "expireAfterSeconds": 60, "partialFilterExpression": {"sensor": "a"}}`, 400, 67},
		{`{"key": {"v": 1}, "expireAfterSeconds": 60, "partialFilterExpression": {"sensor": "a"}}`, 400, 72},
		{`{"key": {"timestamp": 1}, "expireAfterSeconds": 60}`, 400, 72},
		{`{"key": {"timestamp": 1}, "expireAfterSeconds": 60, "partialFilterExpression": {"v": {"$gt": 1}}}`, 400, 72},
		{`{"key": {"timestamp": 1}, "expireAfterSeconds": 60, "partialFilterExpression": {"sensor": {"$nin": ["a"]}}}`, 400, 67},
		{`{"key": {"timestamp": 1}, "expireAfterSeconds": -1, "partialFilterExpression": {"sensor": "a"}}`, 400, 67},
		{`{"key": {"timestamp": 1}, "expireAfterSeconds": "1", "partialFilterExpression": {"sensor": "a"}}`, 400, 67},
		{`{"key": {"timestamp": "2dsphere"}}`, 400, 67},
		{`{"name": "x"}`, 400, 67},
	} {
		r := s.mustDo(c.status, "POST", "/v1/collections/s/indexes", c.body)
		if code := r.errorCode(t); code != c.code {
			t.Errorf("%s: code %d, want %d", c.body, code, c.code)
		}
	}
	s.mustDo(201, "POST", "/v1/collections/s/indexes", `{"key": {"sensor": 1, "timestamp": -1}}`)
	r = s.mustDo(200, "GET", "/v1/collections/s/indexes", "")
	if want := `{"v":2,"key":{"sensor":1,"timestamp":-1},"name":"sensor_1_timestamp_-1"}`; !strings.Contains(string(r.body), want) {
		t.Fatalf("listIndexes lacks %s (key order kept): %s", want, r.body)
	}
	if !strings.Contains(string(r.body), `"name":"a_short","expireAfterSeconds":600,"partialFilterExpression":{"sensor":"a"}`) {
		t.Fatalf("listIndexes: %s", r.body)
	}
	s.mustDo(404, "DELETE", "/v1/collections/s/indexes/nope", "")
	s.mustDo(200, "DELETE", "/v1/collections/s/indexes/sensor_1_timestamp_-1", "")

	// Exact reads: at 00:30, a's measurements before 00:20 are gone.
	clk.Set(t0.Add(30 * time.Minute))
	if rows := s.findRows("s", `{"filter": {"sensor": "a"}}`); len(rows) != 40 {
		t.Fatalf("a: %d rows visible, want 40", len(rows))
	}
	if rows := s.findRows("s", `{"filter": {"sensor": "b"}}`); len(rows) != 60 {
		t.Fatalf("b: %d rows visible", len(rows))
	}
	r = s.mustDo(200, "GET", "/v1/collections/s", "")
	st := r.json(t)["ttl"].(map[string]any)
	if st["expireAfterSeconds"].(float64) != 3600 || st["suspended"] != false || st["reason"] != nil ||
		len(st["indexes"].([]any)) != 1 || st["nextExpiry"].(map[string]any)["$date"] != "2024-05-01T00:10:00Z" {
		t.Fatalf("ttl state: %s", r.body)
	}

	// The dry run of a shorter collection TTL.
	r = s.mustDo(200, "POST", "/v1/collections/s/ttl/preview", `{"expireAfterSeconds": 60}`)
	if !strings.Contains(string(r.body), `"index":null,"expireAfterSeconds":60,"buckets":0,"measurements":0,"hiddenMeasurements":58}`) {
		t.Fatalf("preview: %s", r.body)
	}
	if c := s.count("s"); c != 120 {
		t.Fatalf("preview changed the count: %d", c)
	}

	// The dry run of a new per-sensor rule: at 01:30, one of 60 s on b
	// would delete b's whole bucket (newest 00:59); a's index keeps its own.
	clk.Set(t0.Add(90 * time.Minute))
	r = s.mustDo(200, "POST", "/v1/collections/s/ttl/preview",
		`{"newIndex": {"key": {"timestamp": 1}, "name": "b_min", "expireAfterSeconds": 60, "partialFilterExpression": {"sensor": "b"}}}`)
	for _, want := range []string{
		`{"index":"b_min","expireAfterSeconds":60,"buckets":1,"measurements":60,"hiddenMeasurements":60}`,
		`{"index":"a_short","expireAfterSeconds":600,"buckets":1,"measurements":60,"hiddenMeasurements":60}`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Fatalf("preview of a new index lacks %s: %s", want, r.body)
		}
	}
	for _, c := range []struct {
		body         string
		status, code int
	}{
		{`{"newIndex": {"key": {"timestamp": 1}, "partialFilterExpression": {"sensor": "b"}}}`, 400, 72},
		{`{"newIndex": {"key": {"timestamp": 1}, "name": "a_short", "expireAfterSeconds": 5, "partialFilterExpression": {"sensor": "b"}}}`, 409, 85},
		{`{"newIndex": {"key": {"timestamp": 1}, "expireAfterSeconds": 5, "partialFilterExpression": {"sensor": "a"}}}`, 409, 85},
		{`{"newIndex": {"key": {"timestamp": 1}, "expireAfterSeconds": 5, "partialFilterExpression": {"v": 1}}}`, 400, 72},
		{`{"newIndex": {"key": {"timestamp": 1}, "expireAfterSeconds": -5, "partialFilterExpression": {"sensor": "b"}}}`, 400, 67},
		{`{"newIndex": {"key": {"timestamp": 1}, "expireAfterSeconds": 5, "unique": true}}`, 400, 67},
		{`{"newIndex": 5}`, 400, 72},
	} {
		r := s.mustDo(c.status, "POST", "/v1/collections/s/ttl/preview", c.body)
		if code := r.errorCode(t); code != c.code {
			t.Errorf("%s: code %d, want %d", c.body, code, c.code)
		}
	}
	if r := s.mustDo(200, "GET", "/v1/collections/s/indexes", ""); strings.Contains(string(r.body), "b_min") {
		t.Fatalf("a preview created an index: %s", r.body)
	}

	// A pass at 01:30 deletes a's bucket (newest 00:59 + 600 s).
	r = s.mustDo(200, "POST", "/v1/admin/ttl/run", "")
	if m := r.json(t); m["deletedDocuments"].(float64) != 60 || m["deletedBuckets"].(float64) != 1 {
		t.Fatalf("ttl run: %s", r.body)
	}
	r = s.mustDo(200, "GET", "/v1/status", "")
	ttlm := r.json(t)["metrics"].(map[string]any)["ttl"].(map[string]any)
	if ttlm["deletedDocuments"].(float64) != 60 || ttlm["passes"].(float64) != 1 || ttlm["subPasses"].(float64) < 1 {
		t.Fatalf("status ttl: %v", ttlm)
	}
	r = s.mustDo(200, "GET", "/metrics", "")
	for _, want := range []string{"hourglass_ttl_deleted_measurements_total 60", "hourglass_ttl_passes_total 1", `hourglass_ttl_suspended{collection="s"} 0`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// collMod of the index by key pattern, and of the collection.
	r = s.mustDo(200, "PATCH", "/v1/collections/s", `{"index": {"keyPattern": {"timestamp": 1}, "expireAfterSeconds": 300}}`)
	if m := r.json(t); m["expireAfterSeconds_old"].(float64) != 600 || m["expireAfterSeconds_new"].(float64) != 300 {
		t.Fatalf("collMod index: %s", r.body)
	}
	s.mustDo(404, "PATCH", "/v1/collections/s", `{"index": {"name": "nope", "expireAfterSeconds": 1}}`)
	s.mustDo(400, "PATCH", "/v1/collections/s", `{"index": {"name": "a_short"}}`)
	r = s.mustDo(200, "PATCH", "/v1/collections/s", `{"expireAfterSeconds": "off"}`)
	if m := r.json(t); m["expireAfterSeconds_old"].(float64) != 3600 || m["expireAfterSeconds_new"] != "off" {
		t.Fatalf("collMod off: %s", r.body)
	}
	if rows := s.findRows("s", `{}`); len(rows) != 60 {
		t.Fatalf("after off: %d rows", len(rows))
	}

	// Data outside 1970..2038 suspends expiry, visibly.
	s.mustDo(200, "POST", "/v1/collections/s/documents", `[{"timestamp": {"$date": "1969-12-31T23:59:59Z"}, "sensor": "a", "v": 1}]`)
	r = s.mustDo(200, "GET", "/v1/collections/s", "")
	st = r.json(t)["ttl"].(map[string]any)
	if st["suspended"] != true || st["outOfRangeBuckets"].(float64) != 1 || !strings.Contains(st["reason"].(string), "1970") {
		t.Fatalf("suspended state: %s", r.body)
	}
	r = s.mustDo(200, "GET", "/metrics", "")
	if !strings.Contains(string(r.body), `hourglass_ttl_suspended{collection="s"} 1`) {
		t.Fatal("/metrics does not show the suspension")
	}
}

// SPEC 4.2: TTL deletes in progress appear in currentop.
func TestTTLInCurrentOp(t *testing.T) {
	clk := &clock{}
	clk.Set(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC))
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bs := ttltest.NewBlockingStore(db)
	mon, err := ttl.New(ttl.Options{Store: bs, Clock: clk, Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	srv, err := api.New(api.Options{DB: db, TTL: mon, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	s := &testServer{t: t, db: db, url: hs.URL}
	s.mustDo(201, "PUT", "/v1/collections/s", `{"timeseries": {"timeField": "timestamp", "metaField": "sensor"}, "expireAfterSeconds": 60}`)
	done := make(chan struct{})
	go func() {
		defer close(done)
		mon.RunPass(context.Background())
	}()
	<-bs.Entered
	r := s.mustDo(200, "GET", "/v1/currentop", "")
	if !strings.Contains(string(r.body), `"op":"remove","ns":"s","client":"TTLMonitor"`) {
		t.Fatalf("currentop during a TTL batch: %s", r.body)
	}
	close(bs.Release)
	<-done
	r = s.mustDo(200, "GET", "/v1/currentop", "")
	if strings.Contains(string(r.body), "TTLMonitor") {
		t.Fatalf("currentop after the pass: %s", r.body)
	}
}
