package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/mongowire"
	"github.com/hourglassdb/hourglass/timeseries"
)

// twoDoors serves one engine through one command layer on both doors,
// on loopback: the HTTP API and the MongoDB wire protocol.
type twoDoors struct {
	http  *testServer
	mongo *mongo.Database
}

func newTwoDoors(t *testing.T) *twoDoors {
	return newTwoDoorsWith(t, command.Options{})
}

// newTwoDoorsWith is newTwoDoors with the command layer's options o.
func newTwoDoorsWith(t *testing.T, o command.Options) *twoDoors {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	o.DB = db
	svc, err := command.New(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := serveDB(t, db, func(o *api.Options) { o.Commands = svc })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ms, err := mongowire.New(mongowire.Options{DB: db, Commands: svc, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- ms.Serve(ln) }()
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + ln.Addr().String() + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.Disconnect(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ms.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, mongowire.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return &twoDoors{http: hs, mongo: cl.Database("test")}
}

// viaWire runs a pipeline, given as Extended JSON, through the driver and
// returns its documents as canonical Extended JSON (every type and field
// order shown).
func (d *twoDoors) viaWire(t *testing.T, coll, pipe string) []string {
	t.Helper()
	var p struct {
		Pipeline bson.A `bson:"pipeline"`
	}
	if err := bson.UnmarshalExtJSON([]byte(`{"pipeline": `+pipe+`}`), false, &p); err != nil {
		t.Fatal(err)
	}
	cur, err := d.mongo.Collection(coll).Aggregate(context.Background(), p.Pipeline, options.Aggregate().SetBatchSize(7))
	if err != nil {
		t.Fatalf("wire: %s: %v", pipe, err)
	}
	var out []string
	for cur.Next(context.Background()) {
		out = append(out, canonical(t, cur.Current))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// viaHTTP runs the same pipeline through POST .../aggregate as NDJSON.
func (d *twoDoors) viaHTTP(t *testing.T, coll, pipe string) []string {
	t.Helper()
	r := d.http.do("POST", "/v1/collections/"+coll+"/aggregate", []byte(`{"pipeline": `+pipe+`}`), "Accept", "application/x-ndjson")
	if r.status != 200 {
		t.Fatalf("http: %s: status %d: %s", pipe, r.status, r.body)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		var doc bson.Raw
		if err := bson.UnmarshalExtJSON(sc.Bytes(), false, &doc); err != nil {
			t.Fatalf("http line %q: %v", sc.Text(), err)
		}
		out = append(out, canonical(t, doc))
	}
	return out
}

func canonical(t *testing.T, doc bson.Raw) string {
	t.Helper()
	b, err := bson.MarshalExtJSON(doc, true, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fillWeather makes the time series weather: two sensors, a measurement a
// minute for three hours with every seventh minute missing (gaps for
// $densify and $fill), and the plain collection notes.
func fillWeather(t *testing.T, d *twoDoors) {
	t.Helper()
	ctx := context.Background()
	err := d.mongo.CreateCollection(ctx, "weather", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("ts").SetMetaField("sensor")))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var docs []any
	for i := range 180 {
		if i%7 == 3 {
			continue
		}
		for _, s := range []string{"a", "b"} {
			docs = append(docs, bson.D{{Key: "ts", Value: start.Add(time.Duration(i) * time.Minute)}, {Key: "sensor", Value: s},
				{Key: "temp", Value: 15 + float64(i%13)/2}, {Key: "n", Value: int32(i)}})
		}
	}
	if _, err := d.mongo.Collection("weather").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	var notes []any
	for i := range 20 {
		notes = append(notes, bson.D{{Key: "_id", Value: int32(i)}, {Key: "z", Value: i % 3},
			{Key: "sub", Value: bson.D{{Key: "y", Value: i}, {Key: "b", Value: "x"}}}, {Key: "a", Value: float64(i) / 4}})
	}
	if _, err := d.mongo.Collection("notes").InsertMany(ctx, notes); err != nil {
		t.Fatal(err)
	}
}

// TestPipelineBothDoors runs the same pipelines over HTTP and over the
// wire: each door gives the same documents, types and field order
// included.
func TestPipelineBothDoors(t *testing.T) {
	d := newTwoDoors(t)
	fillWeather(t, d)
	for _, c := range []struct {
		name, coll, pipe string
		want             int // documents
	}{
		{"moving average", "weather", `[{"$setWindowFields": {"partitionBy": "$sensor", "sortBy": {"ts": 1},
			"output": {"avg": {"$avg": "$temp", "window": {"documents": [-2, 0]}}, "k": {"$sum": "$n", "window": {"documents": ["unbounded", "current"]}}}}}]`, 308},
		{"densify and fill", "weather", `[{"$densify": {"field": "ts", "partitionByFields": ["sensor"], "range": {"step": 1, "unit": "minute", "bounds": "partition"}}},
			{"$fill": {"partitionByFields": ["sensor"], "sortBy": {"ts": 1}, "output": {"temp": {"method": "linear"}, "n": {"method": "locf"}}}}]`, 360},
		{"group by hour", "weather", `[{"$match": {"ts": {"$gte": {"$date": "2026-03-01T10:30:00Z"}}}},
			{"$group": {"_id": {"t": {"$dateTrunc": {"date": "$ts", "unit": "hour"}}, "s": "$sensor"}, "avg": {"$avg": "$temp"}, "max": {"$max": "$temp"}, "n": {"$sum": 1}}},
			{"$sort": {"_id.t": 1, "_id.s": 1}}]`, 6},
		{"match and project", "weather", `[{"$match": {"sensor": "a", "temp": {"$gt": 20}}}, {"$project": {"_id": 0, "ts": 1, "temp": 1}}]`, 22},
		{"count", "weather", `[{"$match": {"sensor": "b"}}, {"$count": "n"}]`, 1},
		{"plain, set and unset", "notes", `[{"$match": {"z": {"$ne": 1}}}, {"$set": {"w": {"q": 1, "c": {"$numberLong": "2"}}, "sub.x": true}}, {"$unset": "a"}, {"$limit": 5}]`, 5},
		{"plain, window", "notes", `[{"$setWindowFields": {"partitionBy": "$z", "sortBy": {"_id": -1}, "output": {"s": {"$sum": "$a"}}}}, {"$skip": 2}]`, 18},
		{"plain, find", "notes", `[{"$match": {"a": {"$lt": 2}}}, {"$sort": {"z": 1, "_id": -1}}, {"$project": {"sub": 1}}]`, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			wire, http := d.viaWire(t, c.coll, c.pipe), d.viaHTTP(t, c.coll, c.pipe)
			if len(wire) != c.want {
				t.Errorf("wire: %d documents, want %d", len(wire), c.want)
			}
			if strings.Join(wire, "\n") != strings.Join(http, "\n") {
				t.Errorf("the doors differ:\nwire %d:\n%s\nhttp %d:\n%s", len(wire), strings.Join(wire, "\n"), len(http), strings.Join(http, "\n"))
			}
		})
	}
}

// TestPipelineHTTPFormats reads one pipeline as a JSON array (the
// default) and as CSV.
func TestPipelineHTTPFormats(t *testing.T) {
	d := newTwoDoors(t)
	fillWeather(t, d)
	pipe := `{"pipeline": [{"$match": {"_id": {"$lt": 3}}}, {"$set": {"t": {"$date": "2026-03-01T10:00:00.5Z"}, "s": "a,b"}}]}`
	r := d.http.mustDo(200, "POST", "/v1/collections/notes/aggregate", pipe)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	want := `[{"_id":0,"z":0,"sub":{"y":0,"b":"x"},"a":0.0,"t":{"$date":"2026-03-01T10:00:00.5Z"},"s":"a,b"},`
	if !strings.HasPrefix(string(r.body), want) || !strings.HasSuffix(string(r.body), "]\n") {
		t.Errorf("JSON:\n%s\nwant it to start\n%s", r.body, want)
	}
	r = d.http.mustDo(200, "POST", "/v1/collections/notes/aggregate", pipe, "Accept", "text/csv")
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	wantRows := [][]string{{"_id", "z", "sub", "a", "t", "s"},
		{"0", "0", `{"y":0,"b":"x"}`, "0", "2026-03-01T10:00:00.5Z", "a,b"},
		{"1", "1", `{"y":1,"b":"x"}`, "0.25", "2026-03-01T10:00:00.5Z", "a,b"},
		{"2", "2", `{"y":2,"b":"x"}`, "0.5", "2026-03-01T10:00:00.5Z", "a,b"}}
	if fmt.Sprint(rows) != fmt.Sprint(wantRows) {
		t.Errorf("CSV:\n%q\nwant\n%q", rows, wantRows)
	}
	// A document a stage made (no stored order): _id first, then by name.
	r = d.http.mustDo(200, "POST", "/v1/collections/notes/aggregate", `{"pipeline": [{"$count": "n"}]}`, "Accept", "text/csv")
	if string(r.body) != "n\n20\n" {
		t.Errorf("CSV of a count: %q", r.body)
	}
	// Nothing matched: an empty array, and CSV with no header.
	none := `{"pipeline": [{"$match": {"_id": -1}}]}`
	if r := d.http.mustDo(200, "POST", "/v1/collections/notes/aggregate", none); string(r.body) != "[]\n" {
		t.Errorf("no document: %q", r.body)
	}
	if r := d.http.mustDo(200, "POST", "/v1/collections/notes/aggregate", none, "Accept", "text/csv"); len(r.body) != 0 {
		t.Errorf("no document, CSV: %q", r.body)
	}
	d.http.mustDo(406, "POST", "/v1/collections/notes/aggregate", none, "Accept", "application/vnd.apache.arrow.stream")
	// Arrow preferred, CSV acceptable: CSV.
	r = d.http.mustDo(200, "POST", "/v1/collections/notes/aggregate", `{"pipeline": [{"$count": "n"}]}`,
		"Accept", "application/vnd.apache.arrow.stream, text/csv;q=0.5, application/json;q=0.2")
	if string(r.body) != "n\n20\n" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") {
		t.Errorf("Arrow preferred, CSV acceptable: %s %q", r.header.Get("Content-Type"), r.body)
	}
}

// TestPipelineHTTPRefusals: a bad pipeline is 400 with MongoDB's message
// and code, an unsupported stage named, and nothing is written.
func TestPipelineHTTPRefusals(t *testing.T) {
	d := newTwoDoors(t)
	fillWeather(t, d)
	for _, c := range []struct {
		body     string
		status   int
		code     int
		contains string
	}{
		{`{"pipeline": [{"$lookup": {"from": "x"}}]}`, 400, 238, "$lookup stage is not supported"},
		{`{"pipeline": [{"$frobnicate": {}}]}`, 400, 40324, "Unrecognized pipeline stage name: '$frobnicate'"},
		{`{"pipeline": [{"$limit": -1}]}`, 400, 2, "$limit must be a positive integer"},
		{`{"pipeline": [{"$match": {}, "$limit": 1}]}`, 400, 40323, "exactly one field"},
		{`{"pipeline": [1]}`, 400, 14, "Each element of the 'pipeline' array must be an object"},
		{`{"pipeline": {"$match": {}}}`, 400, 14, "'pipeline' option must be specified as an array"},
		{`{"pipeline": [{"$sort": {"a": 2}}]}`, 400, 15975, "$sort key ordering must be 1"},
		{`{"pipeline": [{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {"x": {"$avg": "$temp", "window": {"documents": [1, 0]}}}}}]}`, 400, 5339900, ""},
		{`{"pipeline": [{"$match": {"ts": {"$date": "yesterday"}}}]}`, 400, 2, "not valid Extended JSON"},
		{`{"pipeline": [], "window": "1m"}`, 400, 2, "a body with 'pipeline' takes only 'allowDiskUse' and 'archive' beside it"},
		{`{"pipeline": [], "allowDiskUse": 1}`, 400, 2, "'allowDiskUse' must be true or false"},
	} {
		r := d.http.do("POST", "/v1/collections/weather/aggregate", []byte(c.body))
		if r.status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.body, r.status, c.status, r.body)
			continue
		}
		if code := r.errorCode(t); code != c.code || !strings.Contains(string(r.body), c.contains) {
			t.Errorf("%s: code %d, want %d, and a message holding %q: %s", c.body, code, c.code, c.contains, r.body)
		}
	}
	d.http.mustDo(404, "POST", "/v1/collections/missing/aggregate", `{"pipeline": []}`)
	if n := d.http.count("weather"); n != 308 {
		t.Errorf("weather holds %d measurements after the refusals, want 308", n)
	}
	// The window form still answers, beside the pipeline.
	r := d.http.mustDo(200, "POST", "/v1/collections/weather/aggregate", `{"window": "1h", "fields": ["temp"], "funcs": ["count"]}`)
	if !bytes.Contains(r.body, []byte(`"temp_count":`)) {
		t.Errorf("window form: %s", r.body)
	}
}

// TestPipelineHTTPAllowDiskUse: with "allowDiskUse": true a window stage
// whose sort passes the stage memory spills and answers; without, 400
// with 292 (QueryExceededMemoryLimitNoDiskUseAllowed), as over the wire;
// a stage in the engine's order streams within that memory.
func TestPipelineHTTPAllowDiskUse(t *testing.T) {
	d := newTwoDoorsWith(t, command.Options{StageMemory: 16 << 10})
	fillWeather(t, d)
	pipe := `"pipeline": [{"$setWindowFields": {"partitionBy": "$sensor", "sortBy": {"temp": 1}, "output": {"k": {"$count": {}, "window": {"documents": ["unbounded", "current"]}}}}}]`
	r := d.http.do("POST", "/v1/collections/weather/aggregate", []byte(`{`+pipe+`}`))
	if r.status != 400 || r.errorCode(t) != 292 {
		t.Errorf("without allowDiskUse: %d %.300s, want 400 and 292", r.status, r.body)
	}
	r = d.http.mustDo(200, "POST", "/v1/collections/weather/aggregate", `{`+pipe+`, "allowDiskUse": true}`, "Accept", "application/x-ndjson")
	if n := bytes.Count(r.body, []byte("\n")); n != 308 {
		t.Errorf("allowDiskUse: %d documents, want 308", n)
	}
	// In the engine's order (by series, in time) the stage streams over
	// HTTP too, holding its window only: within the same 16 KiB, no
	// allowDiskUse needed.
	r = d.http.mustDo(200, "POST", "/v1/collections/weather/aggregate", `{"pipeline": [{"$setWindowFields": {"partitionBy": "$sensor", "sortBy": {"ts": 1},
		"output": {"m": {"$avg": "$temp", "window": {"documents": [-2, 0]}}}}}]}`, "Accept", "application/x-ndjson")
	if n := bytes.Count(r.body, []byte("\n")); n != 308 {
		t.Errorf("streamed: %d documents, want 308", n)
	}
}
