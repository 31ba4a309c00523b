package mongowire

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/hourglassdb/hourglass/api"
)

// The MongoDB clients' benchmarks (docs/benchmarks.md, "MongoDB clients"):
// the same iot documents inserted and read back through the Go driver and
// through the HTTP API, on one engine, both on loopback listeners; and, when
// HG_FERRETDB_URI names a running FerretDB, through the driver against it
// (a plain collection: it has no time-series collections).

// perfBatch is the documents of one insertMany or POST: what a collector
// sends at a time.
const perfBatch = 1000

// perfSensors is the number of series of the iot documents.
const perfSensors = 100

var perfRegions = []string{"north", "south", "east", "west"}

// perfStart is the time of the first document; document i is at perfStart
// plus (i / perfSensors) * 10 s.
var perfStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func perfDoc(i int) bson.D {
	s := i % perfSensors
	return bson.D{{Key: "ts", Value: perfStart.Add(time.Duration(i/perfSensors) * 10 * time.Second)},
		{Key: "sensor", Value: bson.D{{Key: "id", Value: int32(s)}, {Key: "region", Value: perfRegions[s%4]}}},
		{Key: "temp", Value: 15 + float64(i%97)/8}, {Key: "hum", Value: 40 + float64(i%53)/4}, {Key: "battery", Value: int32(100 - i%100)}}
}

// perfJSON appends document i as the HTTP API's JSON.
func perfJSON(dst []byte, i int) []byte {
	s := i % perfSensors
	dst = append(dst, `{"ts":{"$date":"`...)
	dst = perfStart.Add(time.Duration(i/perfSensors)*10*time.Second).AppendFormat(dst, time.RFC3339)
	dst = append(dst, `"},"sensor":{"id":`...)
	dst = strconv.AppendInt(dst, int64(s), 10)
	dst = append(dst, `,"region":"`...)
	dst = append(dst, perfRegions[s%4]...)
	dst = append(dst, `"},"temp":`...)
	dst = strconv.AppendFloat(dst, 15+float64(i%97)/8, 'f', -1, 64)
	dst = append(dst, `,"hum":`...)
	dst = strconv.AppendFloat(dst, 40+float64(i%53)/4, 'f', -1, 64)
	dst = append(dst, `,"battery":`...)
	dst = strconv.AppendInt(dst, int64(100-i%100), 10)
	return append(dst, '}')
}

// perfTargets serves one engine on a MongoDB and an HTTP listener.
type perfTargets struct {
	mongo *mongo.Client
	http  string // base URL
}

func newPerfTargets(b *testing.B) *perfTargets {
	b.Helper()
	db, _, addr := startServer(b, Options{})
	h, err := api.New(api.Options{DB: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(h)
	b.Cleanup(hs.Close)
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cl.Disconnect(context.Background()) })
	return &perfTargets{mongo: cl, http: hs.URL}
}

func createIoT(b *testing.B, db *mongo.Database, name string, timeSeries bool) *mongo.Collection {
	b.Helper()
	opts := options.CreateCollection()
	if timeSeries {
		opts.SetTimeSeriesOptions(options.TimeSeries().SetTimeField("ts").SetMetaField("sensor"))
	}
	db.Collection(name).Drop(context.Background())
	if err := db.CreateCollection(context.Background(), name, opts); err != nil {
		b.Fatal(err)
	}
	return db.Collection(name)
}

func ferretDB(b *testing.B) *mongo.Client {
	b.Helper()
	uri := os.Getenv("HG_FERRETDB_URI")
	if uri == "" {
		b.Skip("HG_FERRETDB_URI is not set (e.g. mongodb://127.0.0.1:27018/)")
	}
	cl, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cl.Disconnect(context.Background()) })
	return cl
}

func reportDocs(b *testing.B, n int) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "docs/s")
}

// insertDriver inserts b.N batches with insertMany.
func insertDriver(b *testing.B, coll *mongo.Collection) {
	ctx := context.Background()
	docs := make([]any, perfBatch)
	b.ResetTimer()
	for k := range b.N {
		for j := range docs {
			docs[j] = perfDoc(k*perfBatch + j)
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	reportDocs(b, b.N*perfBatch)
}

// BenchmarkInsertMany inserts the iot documents, 1000 a request, through
// the Go driver and as a JSON array over HTTP, into a time-series
// collection and into a plain one, and through the driver into FerretDB's
// plain collection.
func BenchmarkInsertMany(b *testing.B) {
	for _, c := range []struct {
		suffix     string
		timeSeries bool
	}{{"", true}, {"-plain", false}} {
		b.Run("driver"+c.suffix, func(b *testing.B) {
			p := newPerfTargets(b)
			insertDriver(b, createIoT(b, p.mongo.Database("bench"), "iot", c.timeSeries))
		})
		name := "http-json"
		if !c.timeSeries {
			name = "http-plain"
		}
		b.Run(name, func(b *testing.B) {
			p := newPerfTargets(b)
			createIoT(b, p.mongo.Database("bench"), "iot", c.timeSeries)
			insertHTTP(b, p.http+"/v1/collections/iot/documents")
		})
	}
	b.Run("ferretdb", func(b *testing.B) {
		cl := ferretDB(b)
		insertDriver(b, createIoT(b, cl.Database("bench"), "iot", false))
	})
}

// insertHTTP posts the iot documents to url, 1000 a JSON array, b.N times.
func insertHTTP(b *testing.B, url string) {
	var body []byte
	b.ResetTimer()
	for k := range b.N {
		body = append(body[:0], '[')
		for j := range perfBatch {
			if j > 0 {
				body = append(body, ',')
			}
			body = perfJSON(body, k*perfBatch+j)
		}
		body = append(body, ']')
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		reply, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("POST: %d %s", resp.StatusCode, reply)
		}
	}
	reportDocs(b, b.N*perfBatch)
}

// perfFindCount is the measurements BenchmarkFind reads: 1M, or
// HG_BENCH_FIND_N.
func perfFindCount(b *testing.B) int {
	n := 1_000_000
	if s := os.Getenv("HG_BENCH_FIND_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	return n
}

// fill inserts n iot documents with insertMany, 10,000 a request.
func fill(b *testing.B, coll *mongo.Collection, n int) {
	b.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 10_000 {
		docs := make([]any, 0, 10_000)
		for i := start; i < min(n, start+10_000); i++ {
			docs = append(docs, perfDoc(i))
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
}

// findDriver reads every document of coll through a cursor.
func findDriver(b *testing.B, coll *mongo.Collection, n int) {
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		cur, err := coll.Find(ctx, bson.D{})
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for cur.Next(ctx) {
			got++
		}
		if err := cur.Err(); err != nil || got != n {
			b.Fatalf("read %d documents, want %d: %v", got, n, err)
		}
		cur.Close(ctx)
	}
	reportDocs(b, b.N*n)
}

// findHTTP reads every document of the collection name as NDJSON, b.N
// times.
func findHTTP(b *testing.B, url, name string, n int) {
	b.ResetTimer()
	for range b.N {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/collections/"+name+"/find", bytes.NewReader([]byte(`{}`)))
		req.Header.Set("Accept", "application/x-ndjson")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		got := 0
		for sc.Scan() {
			if len(sc.Bytes()) > 0 {
				got++
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil || got != n || resp.StatusCode != http.StatusOK {
			b.Fatalf("read %d documents, want %d: %d %v", got, n, resp.StatusCode, err)
		}
	}
	reportDocs(b, b.N*n)
}

// BenchmarkFind streams every measurement of a collection of the iot
// documents (1M, or HG_BENCH_FIND_N) through a driver cursor (batches of
// up to 16 MiB, getMore) and as NDJSON over HTTP, and from FerretDB
// through the driver.
func BenchmarkFind(b *testing.B) {
	n := perfFindCount(b)
	// The time series, then the same documents in a plain collection
	// (the engine's document cursor), each through the driver and over
	// HTTP.
	for _, c := range []struct {
		suffix, coll string
		timeSeries   bool
	}{{"", "iot", true}, {"-plain", "plain", false}} {
		b.Run("driver"+c.suffix, func(b *testing.B) {
			p := newPerfTargets(b)
			coll := createIoT(b, p.mongo.Database("bench"), c.coll, c.timeSeries)
			fill(b, coll, n)
			findDriver(b, coll, n)
		})
		name := "http-ndjson"
		if !c.timeSeries {
			name = "http-plain"
		}
		b.Run(name, func(b *testing.B) {
			p := newPerfTargets(b)
			fill(b, createIoT(b, p.mongo.Database("bench"), c.coll, c.timeSeries), n)
			findHTTP(b, p.http, c.coll, n)
		})
	}
	b.Run("ferretdb", func(b *testing.B) {
		cl := ferretDB(b)
		coll := createIoT(b, cl.Database("bench"), "find", false)
		fill(b, coll, n)
		findDriver(b, coll, n)
	})
}

// BenchmarkWindowPipeline reads a moving average by sensor
// ($setWindowFields partitioned by the metaField, sorted by the
// timeField: streamed in the engine's order) over every measurement,
// through the driver and as NDJSON over HTTP (the same pipeline, the
// same command layer); HG_BENCH_FIND_N sets the measurements (default
// 1,000,000).
func BenchmarkWindowPipeline(b *testing.B) {
	const stages = `[{"$setWindowFields": {"partitionBy": "$sensor", "sortBy": {"ts": 1},
		"output": {"avg": {"$avg": "$temp", "window": {"documents": [-5, 0]}}}}}]`
	n := perfFindCount(b)
	p := newPerfTargets(b)
	coll := createIoT(b, p.mongo.Database("bench"), "iot", true)
	fill(b, coll, n)
	b.Run("driver", func(b *testing.B) {
		var doc struct{ P bson.A }
		if err := bson.UnmarshalExtJSON([]byte(`{"p": `+stages+`}`), false, &doc); err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			cur, err := coll.Aggregate(ctx, doc.P)
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for cur.Next(ctx) {
				got++
			}
			if err := cur.Err(); err != nil || got != n {
				b.Fatalf("%d documents, want %d: %v", got, n, err)
			}
			cur.Close(ctx)
		}
		reportDocs(b, n*b.N)
	})
	b.Run("http-ndjson", func(b *testing.B) {
		body := []byte(`{"pipeline": ` + stages + `}`)
		b.ResetTimer()
		for range b.N {
			req, _ := http.NewRequest(http.MethodPost, p.http+"/v1/collections/iot/aggregate", bytes.NewReader(body))
			req.Header.Set("Accept", "application/x-ndjson")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			got := 0
			for sc.Scan() {
				got++
			}
			resp.Body.Close()
			if err := sc.Err(); err != nil || got != n || resp.StatusCode != http.StatusOK {
				b.Fatalf("read %d documents, want %d: %d %v", got, n, resp.StatusCode, err)
			}
		}
		reportDocs(b, n*b.N)
	})
}
