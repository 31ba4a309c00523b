package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// fuzzNow is the fixed clock of the fuzz servers: documents expire, or
// not, the same way before and after a request.
var fuzzNow = time.Date(2024, 5, 1, 12, 0, 30, 0, time.UTC)

// fuzzServer is an in-process server over a real DB, shared by the inputs
// of one fuzz target. Each input gets collections of its own, named by the
// input's number and made by setup, so that it behaves, and fails, the same
// on its own as in a run. Making or dropping a collection flushes Pebble,
// whose background work (flushes, compactions, table statistics) would then
// run during later inputs and make the coverage the fuzzer sees differ from
// run to run; so the collections of fuzzPool inputs are made at once, on a
// fresh DB, and nothing is dropped: the DB is closed and a new one opened
// when the pool is used up, which also bounds what a long run holds.
type fuzzServer struct {
	srv   *api.Server
	db    *timeseries.DB
	dir   string      // holds the DB's directory
	bases []string    // the collections an input reads, without its number
	setup [][3]string // method, path, body; each answered with a 2xx; "{n}" in a path is the input's number
	n     int         // this input's number
	made  int         // the inputs numbered below made have their collections
	pool  int         // how many inputs' collections open made last
}

// fuzzPool is how many inputs' collections are made at once, at most: the
// few milliseconds each collection or index costs are paid in one go, then
// about a thousand inputs run without any. The pool starts at 8 and doubles,
// so that replaying the seeds (go test without -fuzz) makes few more
// collections than it needs. Making them stops after fuzzPoolTime: the
// fuzzer takes an input that runs for 10 s for a hang.
const (
	fuzzPool     = 1024
	fuzzPoolTime = time.Second
)

// tsSetup makes the time-series collection s{n}.
var tsSetup = [][3]string{{"PUT", "/v1/collections/s{n}", `{"timeseries": {"timeField": "timestamp", "metaField": "sensor"}}`}}

func newFuzzServer(f *testing.F, bases []string, setup [][3]string) *fuzzServer {
	z := &fuzzServer{dir: f.TempDir(), bases: bases, setup: setup}
	f.Cleanup(func() {
		if z.db != nil {
			z.db.Close()
		}
	})
	if err := z.open(); err != nil {
		f.Fatal(err)
	}
	return z
}

// open closes the DB, if any, removes its files, opens a fresh one and
// makes the collections of the next inputs of the pool.
func (z *fuzzServer) open() error {
	if z.db != nil {
		if err := z.db.Close(); err != nil {
			return err
		}
		z.db = nil
	}
	dir := filepath.Join(z.dir, "db")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	now := func() time.Time { return fuzzNow }
	db, err := timeseries.Open(timeseries.Options{Dir: dir, NoSync: true, Now: now, CheckpointInterval: time.Hour})
	if err != nil {
		return err
	}
	srv, err := api.New(api.Options{DB: db, MaxBody: 1 << 20, Now: now})
	if err != nil {
		db.Close()
		return err
	}
	z.db, z.srv = db, srv
	z.pool = min(max(2*z.pool, 8), fuzzPool)
	first, start := z.n, time.Now()
	for z.n-first < z.pool && (z.n == first || time.Since(start) < fuzzPoolTime) {
		z.n++
		if err := z.do(z.setup); err != nil {
			return err
		}
	}
	z.n, z.made = first, z.n+1
	return nil
}

// path is p with "{n}" replaced by this input's number, of a fixed width so
// that every input's names and messages have the same length.
func (z *fuzzServer) path(p string) string {
	return strings.ReplaceAll(p, "{n}", fmt.Sprintf("%09d", z.n))
}

func (z *fuzzServer) do(reqs [][3]string) error {
	for _, r := range reqs {
		rec := httptest.NewRecorder()
		z.srv.ServeHTTP(rec, httptest.NewRequest(r[0], z.path(r[1]), bytes.NewBufferString(r[2])))
		if rec.Code >= 300 {
			return fmt.Errorf("%s %s: %d %s", r[0], z.path(r[1]), rec.Code, rec.Body)
		}
	}
	return nil
}

// before numbers a new input, whose collections setup made, and returns
// what they hold.
func (z *fuzzServer) before(t *testing.T) contents {
	t.Helper()
	if z.n+1 == z.made {
		if err := z.open(); err != nil {
			t.Fatal(err)
		}
	}
	z.n++
	return z.readAll(t)
}

// serve sends one request, fails on a 5xx, and returns the status and the
// reply's body.
func serve(t *testing.T, srv *api.Server, method, path, ctype string, body []byte) (int, []byte) {
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
	return rec.Code, rec.Body.Bytes()
}

// contents is what a find returns from every collection: each document,
// as canonical JSON prefixed with its collection's name, and how many times
// it is there.
type contents map[string]int

func (c contents) total() int {
	n := 0
	for _, k := range c {
		n += k
	}
	return n
}

// lost returns how many documents of c are not in d (as a multiset).
func (c contents) lost(d contents) int {
	n := 0
	for doc, k := range c {
		n += max(k-d[doc], 0)
	}
	return n
}

// readAll reads every document of this input's collections from the DB,
// not through the API, so that the checks do not run the code under test (nor
// its timers, which would make the fuzzer's coverage differ from run to
// run).
func (z *fuzzServer) readAll(t *testing.T) contents {
	t.Helper()
	ctx := context.Background()
	out := contents{}
	for _, base := range z.bases {
		info, err := z.db.DescribeShallow(ctx, z.path(base+"{n}"))
		if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
			continue // not made by this input
		}
		if err != nil {
			t.Fatal(err)
		}
		if info.Options.TimeSeries == nil {
			if _, err := timeseries.EachDoc(z.db.Find(ctx, info.Name, timeseries.FindOptions{}))(func(d document.Doc) error {
				out[base+" "+fmt.Sprint(d)]++ // fmt sorts map keys
				return nil
			}); err != nil {
				t.Fatalf("find in %s: %v", info.Name, err)
			}
			continue
		}
		cur, err := z.db.Find(ctx, info.Name, timeseries.FindOptions{})
		if err != nil {
			t.Fatalf("find in %s: %v", info.Name, err)
		}
		for cur.Next() {
			rec := cur.Record()
			for i := range int(rec.NumRows()) {
				var row strings.Builder
				for j, col := range rec.Columns() {
					if col.IsNull(i) {
						continue // a field this measurement does not have
					}
					fmt.Fprintf(&row, "%s=%s ", rec.ColumnName(j), col.ValueStr(i))
				}
				out[base+" "+row.String()]++
			}
		}
		err = cur.Err()
		cur.Close()
		if err != nil {
			t.Fatalf("find in %s: %v", info.Name, err)
		}
	}
	return out
}

// writeCounts are the counts a write's reply reports, -1 where it has none.
type writeCounts struct {
	Inserted, Deleted, Matched, Modified int64
}

func replyCounts(body []byte) writeCounts {
	c := writeCounts{-1, -1, -1, -1}
	var r map[string]any
	if json.Unmarshal(body, &r) != nil {
		return c
	}
	for name, p := range map[string]*int64{"inserted": &c.Inserted, "deleted": &c.Deleted, "matched": &c.Matched, "modified": &c.Modified} {
		if v, ok := r[name].(float64); ok {
			*p = int64(v)
		}
	}
	return c
}

// checkWrite checks a write's effect on the stored documents against its
// reply. A reply that reports no counts (a refusal, a find) changed
// nothing. Otherwise inserts
// added exactly what they report (at most, when exact is false: a TTL index
// hides documents inserted already expired), keeping every document there
// was; deletes removed at most what they report and added nothing; updates
// and replacements kept the count and changed at most the documents they
// report modified.
func checkWrite(t *testing.T, what string, status int, reply []byte, before, after contents, exact bool) {
	t.Helper()
	c := replyCounts(reply)
	changed := fmt.Sprintf("%s: status %d %s: %d documents before, %d after, %d of them gone", what, status, reply,
		before.total(), after.total(), before.lost(after))
	switch {
	case c.Inserted >= 0:
		grown := int64(after.total() - before.total())
		if before.lost(after) != 0 || grown > c.Inserted || exact && grown != c.Inserted {
			t.Fatalf("%s", changed)
		}
	case c.Deleted >= 0:
		if after.lost(before) != 0 || int64(before.lost(after)) > c.Deleted {
			t.Fatalf("%s", changed)
		}
	case c.Matched >= 0:
		if after.total() != before.total() || int64(before.lost(after)) > c.Modified {
			t.Fatalf("%s", changed)
		}
	default:
		// A refusal, or an answer that is not a write (a find).
		if before.lost(after) != 0 || after.lost(before) != 0 {
			t.Fatalf("%s", changed)
		}
	}
}

// FuzzInsertDocuments sends arbitrary bodies to the documents endpoint, as
// JSON arrays and as NDJSON: never a panic, never a 5xx; what the reply
// says was inserted is found, and nothing else changed.
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
	z := newFuzzServer(f, []string{"s"}, tsSetup)
	f.Fuzz(func(t *testing.T, body []byte, ndjson bool) {
		ct := "application/json"
		if ndjson {
			ct = "application/x-ndjson"
		}
		before := z.before(t)
		st, reply := serve(t, z.srv, "POST", z.path("/v1/collections/s{n}/documents?ordered=false"), ct, body)
		checkWrite(t, "insert", st, reply, before, z.readAll(t), true)
	})
}

// FuzzLineProtocolWrite sends arbitrary line protocol to /write: a 204
// stored every line, a partial write the lines it says it wrote, and any
// other refusal nothing.
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
	// The collection a first write would make, made beforehand: see fuzzServer.
	z := newFuzzServer(f, []string{"lp"}, [][3]string{{"PUT", "/v1/collections/lp{n}", `{"timeseries": {"timeField": "time", "metaField": "tags"}}`}})
	f.Fuzz(func(t *testing.T, body []byte, precision string) {
		before := z.before(t)
		st, reply := serve(t, z.srv, "POST", z.path("/write?db=lp{n}&precision=")+url.QueryEscape(precision), "", body)
		after := z.readAll(t)
		grown := after.total() - before.total()
		if before.lost(after) != 0 {
			t.Fatalf("status %d %s: %d measurements gone", st, reply, before.lost(after))
		}
		if st == http.StatusNoContent {
			if want := lineCount(body); grown != want {
				t.Fatalf("status %d: %d measurements stored for %d lines\nbody: %q", st, grown, want, body)
			}
			return
		}
		wrote := 0
		if m := wroteRE.FindSubmatch(reply); m != nil {
			wrote, _ = strconv.Atoi(string(m[1]))
		}
		if grown != wrote {
			t.Fatalf("status %d %s: %d measurements stored\nbody: %q", st, reply, grown, body)
		}
	})
}

// wroteRE finds the lines a partial line-protocol write stored.
var wroteRE = regexp.MustCompile(`partial write: .*, wrote (\d+)`)

// lineCount counts the lines of line protocol in body that hold a point:
// not blank, not a comment.
func lineCount(body []byte) int {
	n := 0
	for line := range bytes.Lines(body) {
		line = bytes.TrimLeft(line, " \t")
		if len(bytes.TrimRight(line, " \t\r\n")) > 0 && line[0] != '#' {
			n++
		}
	}
	return n
}

// FuzzFind sends arbitrary find, aggregate and distinct bodies (the
// window form and pipelines), which change nothing.
func FuzzFind(f *testing.F) {
	for _, s := range []string{
		`{"filter": {"sensor": {"$in": ["a", 1, null]}, "timestamp": {"$gte": {"$date": "2024-05-01T12:00:00Z"}}}, "sort": {"timestamp": -1}, "limit": 2}`,
		`{"filter": {"$or": [{"v": {"$gt": 1}}, {"sensor.x": {"$exists": false}}]}, "projection": {"v": 0}}`,
		`{"filter": {"v": {"$not": {"$type": "string"}}}}`,
		`{"pipeline": [{"$match": {"sensor": "a"}}, {"$setWindowFields": {"partitionBy": "$sensor", "sortBy": {"timestamp": 1}, "output": {"m": {"$avg": "$v", "window": {"documents": [-1, 0]}}}}}]}`,
		`{"pipeline": [{"$densify": {"field": "timestamp", "range": {"step": 1, "unit": "minute", "bounds": "full"}}}, {"$fill": {"sortBy": {"timestamp": 1}, "output": {"v": {"method": "linear"}}}}, {"$set": {"a.b": {"$literal": {"z": 1}}}}]}`,
		`{"pipeline": [{"$group": {"_id": {"t": {"$dateTrunc": {"date": "$timestamp", "unit": "hour"}}, "s": "$sensor"}, "n": {"$sum": 1}}}, {"$sort": {"n": -1}}], "allowDiskUse": true}`,
		`{"key": "sensor.x", "filter": {"timestamp": {"$lt": {"$date": "2024-05-01T12:00:30Z"}}}}`,
		`{"key": "v"}`, `{"key": "a..b"}`,
		`{}`, ``, `[]`,
	} {
		f.Add([]byte(s))
	}
	z := newFuzzServer(f, []string{"s"}, append(tsSetup, [3]string{"POST", "/v1/collections/s{n}/documents", sensorDocs}))
	f.Fuzz(func(t *testing.T, body []byte) {
		before := z.before(t)
		serve(t, z.srv, "POST", z.path("/v1/collections/s{n}/find"), "", body)
		serve(t, z.srv, "POST", z.path("/v1/collections/s{n}/aggregate"), "", body)
		serve(t, z.srv, "POST", z.path("/v1/collections/s{n}/distinct"), "", body)
		if after := z.readAll(t); before.lost(after) != 0 || after.lost(before) != 0 {
			t.Fatalf("a find, aggregate or distinct changed the collection\nbody: %q", body)
		}
	})
}

// FuzzPlainCollection sends arbitrary bodies to every endpoint of a plain
// collection with two indexes, one a TTL index: never a panic, never a 5xx,
// and every write changes what its reply says (checkWrite).
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
	z := newFuzzServer(f, []string{"s", "p"}, append(tsSetup,
		[3]string{"PUT", "/v1/collections/p{n}", `{}`},
		[3]string{"POST", "/v1/collections/p{n}/indexes", `{"key": {"a": 1, "_id": -1}}`},
		[3]string{"POST", "/v1/collections/p{n}/indexes", `{"key": {"at": 1}, "expireAfterSeconds": 60, "partialFilterExpression": {"a": {"$exists": true}}}`},
	))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range []string{"documents?ordered=false", "find", "update", "replace", "delete"} {
			before := z.before(t)
			st, reply := serve(t, z.srv, "POST", z.path("/v1/collections/p{n}/")+p, "", body)
			checkWrite(t, p, st, reply, before, z.readAll(t), false)
		}
	})
}

// FuzzDDL sends arbitrary bodies to the endpoints that change what a
// collection is: create, collMod, an index, a rollup, and the TTL preview
// that reads the rules: never a panic, never a 5xx, and a refusal (4xx)
// changes nothing: the collections listed, the time-series collection's
// description, indexes and rollups are as before.
func FuzzDDL(f *testing.F) {
	for _, s := range []string{
		`{"timeseries": {"timeField": "t", "metaField": "m", "granularity": "minutes"}, "expireAfterSeconds": 60}`,
		`{"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 60}}`,
		`{"expireAfterSeconds": 3600}`, `{"expireAfterSeconds": "off"}`, `{"timeseries": {"granularity": "hours"}}`,
		`{"key": {"sensor": 1}, "expireAfterSeconds": 10, "partialFilterExpression": {"sensor": {"$eq": "a"}}}`,
		`{"key": {"timestamp": 1}, "expireAfterSeconds": 0, "partialFilterExpression": {"sensor.site": {"$in": ["x", "y"]}}, "name": "short"}`,
		`{"window": "1m", "fields": ["v"], "funcs": ["min", "avg", "max", "count"], "expireAfterSeconds": 86400}`,
		`{"window": "1h", "fields": ["v"], "funcs": ["sum"], "partialFilterExpression": {"sensor": "a"}}`,
		`{"expireAfterSeconds": 30, "partialFilterExpression": {"sensor": {"$gte": "b"}}}`,
		`{}`, ``, `[]`, `null`, `{"timeseries": null}`,
	} {
		f.Add([]byte(s))
	}
	z := newFuzzServer(f, []string{"s"}, append(tsSetup,
		[3]string{"POST", "/v1/collections/s{n}/documents", `[{"timestamp": {"$date": "2024-05-01T11:00:00Z"}, "sensor": "a", "v": 1}]`}))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, r := range [][2]string{
			{"PUT", "/v1/collections/c{n}"},
			{"PATCH", "/v1/collections/s{n}"},
			{"POST", "/v1/collections/s{n}/indexes"},
			{"PUT", "/v1/collections/s{n}/rollups/r{n}"},
			{"POST", "/v1/collections/s{n}/ttl/preview"},
		} {
			z.before(t)
			before := z.ddlState(t)
			st, reply := serve(t, z.srv, r[0], z.path(r[1]), "", body)
			if st >= 400 {
				if after := z.ddlState(t); after != before {
					t.Fatalf("%s %s refused (%d %s) but changed the catalog:\n%s\nto\n%s", r[0], r[1], st, reply, before, after)
				}
			}
		}
	})
}

// ddlState is what the DDL endpoints may change, as the API reads it: this
// input's collections listed (others', such as a rollup catching up in
// the background, change on their own), and the time-series collection's
// description, indexes and rollups.
func (z *fuzzServer) ddlState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	st, reply := serve(t, z.srv, "GET", "/v1/collections", "", nil)
	var list []map[string]any
	if err := json.Unmarshal(reply, &list); err != nil {
		t.Fatalf("collections: %d %s: %v", st, reply, err)
	}
	suffix := z.path("{n}")
	for _, c := range list {
		if name, _ := c["name"].(string); strings.HasSuffix(name, suffix) {
			fmt.Fprintf(&b, "%v\n", c)
		}
	}
	for _, p := range []string{"/v1/collections/s{n}", "/v1/collections/s{n}/indexes", "/v1/collections/s{n}/rollups"} {
		st, reply := serve(t, z.srv, "GET", z.path(p), "", nil)
		fmt.Fprintf(&b, "%s %d %s\n", p, st, reply)
	}
	return b.String()
}
