package api_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/timeseries"
)

// staleNaN is Prometheus' staleness marker (model/value.StaleNaN).
const staleNaN = 0x7ff0000000000002

// promBody is req marshalled and snappy-compressed, as remote write sends it.
func promBody(t testing.TB, req *prompb.WriteRequest) []byte {
	t.Helper()
	pb, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, pb)
}

func series(samples []prompb.Sample, kv ...string) prompb.TimeSeries {
	ts := prompb.TimeSeries{Samples: samples}
	for i := 0; i+1 < len(kv); i += 2 {
		ts.Labels = append(ts.Labels, prompb.Label{Name: kv[i], Value: kv[i+1]})
	}
	return ts
}

func (s *testServer) promWrite(status int, path string, body []byte) reply {
	s.t.Helper()
	r := s.do("POST", path, body, "Content-Encoding", "snappy", "Content-Type", "application/x-protobuf",
		"X-Prometheus-Remote-Write-Version", "0.1.0")
	if r.status != status {
		s.t.Fatalf("POST %s: status %d, want %d: %s", path, r.status, status, r.body)
	}
	return r
}

// promErrorOf checks that r is Prometheus' error shape and returns it.
func promErrorOf(t *testing.T, r reply) (errorType, msg string) {
	t.Helper()
	var e struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Status != "error" || e.ErrorType == "" || e.Error == "" {
		t.Fatalf("not a Prometheus error reply (%v): %s", err, r.body)
	}
	return e.ErrorType, e.Error
}

const promT0 = int64(1714564800000) // 2024-05-01T12:00:00Z in ms

func TestPromWrite(t *testing.T) {
	s := newTestServer(t, nil)
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series([]prompb.Sample{{Value: 1, Timestamp: promT0}, {Value: 0.5, Timestamp: promT0 + 15000},
			{Value: math.Float64frombits(staleNaN), Timestamp: promT0 + 30000}},
			"__name__", "up", "instance", "localhost:9090", "job", "prometheus"),
		// Labels out of order and one with an empty value (absent).
		series([]prompb.Sample{{Value: -2.25, Timestamp: promT0 + 1}},
			"job", "node", "__name__", "node_load1", "empty", ""),
	}}
	s.promWrite(204, "/api/v1/write", promBody(t, req))

	desc := s.mustDo(200, "GET", "/v1/collections/prometheus", "").json(t)
	ts := desc["options"].(map[string]any)["timeseries"].(map[string]any)
	if ts["timeField"] != "t" || ts["metaField"] != "labels" || desc["count"].(float64) != 4 {
		t.Fatalf("created collection: %v", desc)
	}
	rows := s.findRows("prometheus", `{"filter": {"labels.__name__": "up"}, "sort": {"t": 1}}`)
	if len(rows) != 3 {
		t.Fatalf("rows: %v", rows)
	}
	want := map[string]any{"__name__": "up", "instance": "localhost:9090", "job": "prometheus"}
	for i, row := range rows {
		if !equalJSON(row["labels"], want) {
			t.Fatalf("row %d labels: %v", i, row["labels"])
		}
	}
	if rows[0]["t"].(map[string]any)["$date"] != "2024-05-01T12:00:00Z" || rows[0]["value"].(float64) != 1 ||
		rows[1]["t"].(map[string]any)["$date"] != "2024-05-01T12:00:15Z" || rows[1]["value"].(float64) != 0.5 {
		t.Fatalf("rows: %v", rows)
	}
	rows = s.findRows("prometheus", `{"filter": {"labels.job": "node"}}`)
	if len(rows) != 1 || !equalJSON(rows[0]["labels"], map[string]any{"__name__": "node_load1", "job": "node"}) ||
		rows[0]["t"].(map[string]any)["$date"] != "2024-05-01T12:00:00.001Z" || rows[0]["value"].(float64) != -2.25 {
		t.Fatalf("second series: %v", rows)
	}

	// The staleness marker reads back bit for bit (Arrow keeps float bits).
	r := s.mustDo(200, "POST", "/v1/collections/prometheus/find", `{"filter": {"labels.__name__": "up"}, "sort": {"t": 1}}`,
		"Accept", "application/vnd.apache.arrow.stream")
	rd, err := ipc.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var bits []uint64
	for rd.Next() {
		rec := rd.Record()
		col := rec.Column(rd.Schema().FieldIndices("value")[0]).(*array.Float64)
		for j := 0; j < col.Len(); j++ {
			bits = append(bits, math.Float64bits(col.Value(j)))
		}
	}
	if len(bits) != 3 || bits[0] != math.Float64bits(1) || bits[2] != staleNaN {
		t.Fatalf("value bits %x, want the last %x", bits, uint64(staleNaN))
	}

	// Counted under its own protocol.
	if m := s.mustDo(200, "GET", "/metrics", ""); !strings.Contains(string(m.body), `hourglass_inserted_measurements_total{protocol="prometheus"} 4`) {
		t.Fatalf("metrics: no 4 samples inserted by remote write")
	}

	// Retention per job: a partial TTL index on labels.job
	// (docs/prometheus.md).
	s.mustDo(201, "POST", "/v1/collections/prometheus/indexes",
		`{"key": {"t": 1}, "name": "job_node_30d", "expireAfterSeconds": 2592000, "partialFilterExpression": {"labels.job": "node"}}`)

	// ?collection= names another collection, created the same way.
	s.promWrite(204, "/api/v1/write?collection=prom2", promBody(t, &prompb.WriteRequest{Timeseries: req.Timeseries[1:]}))
	if n := s.count("prom2"); n != 1 {
		t.Fatalf("prom2 holds %d samples", n)
	}
	// A collection of another shape is refused.
	s.createSensors("sensors")
	r = s.promWrite(400, "/api/v1/write?collection=sensors", promBody(t, req))
	if typ, _ := promErrorOf(t, r); typ != "bad_data" {
		t.Fatalf("errorType %q", typ)
	}
}

// TestPromWriteBadBodies: a body that does not decode is 400 bad_data and
// writes nothing, not even the collection.
func TestPromWriteBadBodies(t *testing.T) {
	// Limits set here, not from the machine's processors: 1 MiB bodies,
	// 4 MiB of body memory.
	s := newTestServer(t, func(o *api.Options) { o.MaxBody, o.MaxBodyMemory = 1<<20, 4<<20 })
	good := promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "__name__", "up", "job", "a")}})
	pb, _ := snappy.Decode(nil, good)
	bomb := binary.AppendUvarint(nil, 1<<30) // announces a GiB
	bomb = append(bomb, 0, 0, 0, 0)
	for _, c := range []struct {
		name   string
		body   []byte
		status int
	}{
		{"empty body", nil, 400},
		{"not snappy", []byte("this is not snappy at all"), 400},
		{"uncompressed protobuf", pb, 400},
		{"truncated protobuf", snappy.Encode(nil, pb[:len(pb)-3]), 400},
		{"truncated snappy", good[:len(good)-2], 400},
		{"decompression bomb", bomb, 413},
		// 512 KiB of empty series: two bytes each, a struct of over 100
		// bytes each once decoded.
		{"series bomb", snappy.Encode(nil, bytes.Repeat([]byte{0x0a, 0x00}, 1<<18)), 413},
		{"sample bomb", snappy.Encode(nil, oneSeries(bytes.Repeat([]byte{0x12, 0x00}, 1<<18))), 413},
		{"label bomb", snappy.Encode(nil, oneSeries(bytes.Repeat([]byte{0x0a, 0x00}, 1<<18))), 413},
		{"label name not UTF-8", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "__name__", "up", "jo\xffb", "a")}}), 400},
		{"label value not UTF-8", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "__name__", "up\xc3")}}), 400},
		{"empty label name", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "__name__", "up", "", "a")}}), 400},
		{"label given twice", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "__name__", "up", "job", "a", "job", "b")}}), 400},
		{"label given twice, once empty", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "job", "a", "__name__", "up", "job", "")}}), 400},
		{"no labels", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "job", "")}}), 400},
		{"timestamp out of range", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series([]prompb.Sample{{Value: 1, Timestamp: math.MaxInt64 / 100}}, "__name__", "up")}}), 400},
		{"native histogram", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: []prompb.Label{{Name: "__name__", Value: "h"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: promT0}},
				Histograms: []prompb.Histogram{{Count: &prompb.Histogram_CountInt{CountInt: 1}, Timestamp: promT0}}}}}), 400},
		// A good series first: nothing of the request is written.
		{"bad second series", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "__name__", "up"),
			series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "$bad", "x")}}), 400},
	} {
		r := s.promWrite(c.status, "/api/v1/write", c.body)
		if typ, msg := promErrorOf(t, r); typ != "bad_data" {
			t.Errorf("%s: errorType %q (%s)", c.name, typ, msg)
		}
		s.mustDo(404, "GET", "/v1/collections/prometheus", "")
	}
	// The same checks leave an existing collection as it was.
	s.promWrite(204, "/api/v1/write", good)
	s.promWrite(400, "/api/v1/write", good[:len(good)-2])
	if n := s.count("prometheus"); n != 1 {
		t.Fatalf("count %d after a refused body", n)
	}
	r := s.do("POST", "/api/v1/write", good, "Content-Encoding", "gzip")
	if r.status != http.StatusUnsupportedMediaType {
		t.Fatalf("gzip: %d %s", r.status, r.body)
	}
	// Remote write 2.0 and other media types: 415, nothing written.
	for _, ct := range []string{"application/x-protobuf;proto=io.prometheus.write.v2.Request", "application/json", "text/plain; x"} {
		r := s.do("POST", "/api/v1/write?collection=v2", good, "Content-Type", ct)
		if r.status != http.StatusUnsupportedMediaType {
			t.Fatalf("Content-Type %q: %d %s", ct, r.status, r.body)
		}
		promErrorOf(t, r)
	}
	s.mustDo(404, "GET", "/v1/collections/v2", "")
	s.mustDo(204, "POST", "/api/v1/write?collection=v2", string(good), "Content-Type", "application/x-protobuf;proto=prometheus.WriteRequest")
	// Body memory held by other requests: 429 unavailable, to retry.
	release := s.srv.HoldBodyMemory(4<<20 - 1<<10)
	r = s.promWrite(429, "/api/v1/write", snappy.Encode(nil, bytes.Repeat([]byte{0x0a, 0x00}, 1<<14)))
	release()
	if typ, _ := promErrorOf(t, r); typ != "unavailable" || r.header.Get("Retry-After") == "" {
		t.Fatalf("body memory full: %s %v", r.body, r.header)
	}
	// Every request gave back the body memory it took.
	if n := s.srv.BodyMemoryInUse(); n != 0 {
		t.Fatalf("%d bytes of body memory held after the requests", n)
	}
}

// oneSeries is the WriteRequest of one series whose encoded fields are
// fields.
func oneSeries(fields []byte) []byte {
	return append(binary.AppendUvarint([]byte{0x0a}, uint64(len(fields))), fields...)
}

func TestPromWriteAuth(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) { o.AuthToken = "s3cret" })
	body := promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "__name__", "up")}})
	for _, h := range []string{"", "Bearer wrong", "Token s3cret"} {
		checkPromUnauthorized(t, s, "/api/v1/write", body, h)
	}
	s.mustDo(404, "GET", "/v1/collections/prometheus", "")
	s.promWrite(204, "/api/v1/write", body) // s.do sends the bearer token
}

// TestPromWriteCurrentOp: a remote write in progress is listed in
// currentop with the other doors' operations.
func TestPromWriteCurrentOp(t *testing.T) {
	checkPromCurrentOp(t, "write", "remote write")
}

// checkPromCurrentOp starts a remote write or read (path) whose body stops
// after a byte and checks that currentop lists it with its description
// and the Prometheus door while it runs; the one-byte body is then 400.
func checkPromCurrentOp(t *testing.T, path, desc string) {
	t.Helper()
	s := newTestServer(t, nil)
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		req, _ := http.NewRequest("POST", s.url+"/api/v1/"+path+"?collection=slow", pr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	pw.Write([]byte{1}) // the body has begun
	var found bool
	for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); {
		r := s.mustDo(200, "GET", "/v1/currentop", "")
		found = strings.Contains(string(r.body), `"desc":"`+desc+`"`) && strings.Contains(string(r.body), `"ns":"slow"`)
		if found {
			if doors := s.srv.OpDoors("slow"); len(doors) != 1 || doors[0] != command.Prometheus {
				t.Fatalf("doors of the operation: %v", doors)
			}
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	pw.Close()
	if st := <-done; st != 400 {
		t.Fatalf("a one-byte body: status %d", st)
	}
	if !found {
		t.Fatalf("%s not listed in currentop", desc)
	}
}

func TestPromWriteChunks(t *testing.T) {
	s := newTestServer(t, nil)
	req := promRequest(300, 100) // 30000 samples: more than one insert
	var chunks int
	api.OnChunkDecoded(func() { chunks++ })
	defer api.OnChunkDecoded(nil)
	s.promWrite(204, "/api/v1/write", promBody(t, req))
	if chunks != 2 {
		t.Fatalf("stored in %d inserts, want 2 of at most 16384 samples", chunks)
	}
	if n := s.count("prometheus"); n != 30000 {
		t.Fatalf("count %d", n)
	}
	rows := s.findRows("prometheus", `{"filter": {"labels.instance": "host-299"}, "sort": {"t": -1}, "limit": 1}`)
	if len(rows) != 1 || rows[0]["value"].(float64) != 299*1000+99 {
		t.Fatalf("last sample: %v", rows)
	}
}

// promRequest is a scrape-like request: nSeries series of nSamples
// samples 15s apart, each with the labels a node exporter's series carry.
func promRequest(nSeries, nSamples int) *prompb.WriteRequest {
	req := &prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, nSeries)}
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		ts.Labels = []prompb.Label{
			{Name: "__name__", Value: fmt.Sprintf("node_metric_%d", i%50)},
			{Name: "cpu", Value: fmt.Sprint(i % 8)},
			{Name: "instance", Value: fmt.Sprintf("host-%d", i)},
			{Name: "job", Value: "node"},
			{Name: "mode", Value: "user"},
		}
		ts.Samples = make([]prompb.Sample, nSamples)
		for j := range ts.Samples {
			ts.Samples[j] = prompb.Sample{Value: float64(i*1000 + j), Timestamp: promT0 + int64(j)*15000}
		}
	}
	return req
}

// FuzzRemoteWrite: no body makes the door answer 5xx, a 204 stores every
// sample of the request, and a refusal writes nothing. compress wraps the input in snappy, so that the protobuf
// decoder and the checks see it.
func FuzzRemoteWrite(f *testing.F) {
	good, _ := promRequest(3, 2).Marshal()
	stale, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series([]prompb.Sample{{Value: math.Float64frombits(staleNaN), Timestamp: promT0}}, "__name__", "up")}}).Marshal()
	emptyName, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "", "x")}}).Marshal()
	f.Add(good, true)
	f.Add(emptyName, true)
	f.Add(stale, true)
	f.Add(snappy.Encode(nil, good), false)
	f.Add([]byte{}, false)
	f.Add(good[:len(good)/2], true)
	f.Add([]byte("\x0a\x05\x0a\x03\x0a\x01\xff"), true)
	db, err := timeseries.Open(timeseries.Options{Dir: f.TempDir(), NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	srv, err := api.New(api.Options{DB: db, MaxBody: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	f.Cleanup(func() {
		hs.Close()
		db.Close()
	})
	count := func() int64 {
		n, err := db.Count(context.Background(), "fuzz", nil, timeseries.CountOptions{})
		if err != nil {
			return -1 // no collection
		}
		return n
	}
	f.Fuzz(func(t *testing.T, in []byte, compress bool) {
		body := in
		if compress {
			body = snappy.Encode(nil, in)
		}
		before := count()
		resp, err := http.Post(hs.URL+"/api/v1/write?collection=fuzz", "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch r := (reply{status: resp.StatusCode, body: b}); {
		case r.status >= 500:
			t.Fatalf("status %d: %s", r.status, r.body)
		case r.status == 204:
			// Every sample of the request is stored.
			pb, err := snappy.Decode(nil, body)
			var req prompb.WriteRequest
			if err != nil || req.Unmarshal(pb) != nil {
				t.Fatalf("204 for a body that does not decode (%v)", err)
			}
			want := 0
			for _, ts := range req.Timeseries {
				want += len(ts.Samples)
			}
			if after := count(); after-max(before, 0) != int64(want) {
				t.Fatalf("204 stored %d samples of %d", after-max(before, 0), want)
			}
		default:
			promErrorOf(t, r)
			if after := count(); after != before {
				t.Fatalf("status %d changed the count from %d to %d: %s", r.status, before, after, r.body)
			}
		}
	})
}

// BenchmarkRemoteWrite sends one remote-write request of 10,000 series of
// 10 samples each (snappy-compressed, as Prometheus sends it) per
// iteration through the real handler over loopback, against the same
// samples as one line-protocol body (precision ms), and reports samples/s
// and the bytes allocated per sample. Each iteration writes the same
// samples again: every one is stored (docs/prometheus.md, duplicates).
func BenchmarkRemoteWrite(b *testing.B) {
	const nSeries, nSamples = 10000, 10
	req := promRequest(nSeries, nSamples)
	var lines bytes.Buffer
	for _, ts := range req.Timeseries {
		l := ts.Labels
		for _, sm := range ts.Samples {
			fmt.Fprintf(&lines, "%s,cpu=%s,instance=%s,job=%s,mode=%s value=%g %d\n",
				l[0].Value, l[1].Value, l[2].Value, l[3].Value, l[4].Value, sm.Value, sm.Timestamp)
		}
	}
	for _, c := range []struct {
		name, path, ctype string
		body              []byte
	}{
		{"remote-write", "/api/v1/write", "application/x-protobuf", promBody(b, req)},
		{"line", "/write?db=telegraf&precision=ms", "text/plain", lines.Bytes()},
	} {
		b.Run(c.name, func(b *testing.B) {
			url := benchServer(b)
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			b.SetBytes(int64(len(c.body)))
			b.ResetTimer()
			for range b.N {
				post(b, "POST", url+c.path, c.ctype, c.body, 204)
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			points := float64(nSeries * nSamples * b.N)
			b.ReportMetric(points/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/points, "alloc-bytes/sample")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/points, "allocs/sample")
		})
	}
}

// TestPromWriteOrderAndDuplicates: out-of-order samples are stored at
// their time and duplicates are all stored (docs/prometheus.md);
// exemplars and metadata are accepted and not stored.
func TestPromWriteOrderAndDuplicates(t *testing.T) {
	s := newTestServer(t, nil)
	up := func(samples ...prompb.Sample) *prompb.WriteRequest {
		return &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series(samples, "__name__", "up", "job", "a")}}
	}
	s.promWrite(204, "/api/v1/write", promBody(t, up(prompb.Sample{Value: 1, Timestamp: promT0 + 2000}, prompb.Sample{Value: 2, Timestamp: promT0 + 4000})))
	// An older sample, and one at an existing time with another value.
	s.promWrite(204, "/api/v1/write", promBody(t, up(prompb.Sample{Value: 0, Timestamp: promT0}, prompb.Sample{Value: 3, Timestamp: promT0 + 2000})))
	req := up(prompb.Sample{Value: 5, Timestamp: promT0 + 6000})
	req.Timeseries[0].Exemplars = []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "abc"}}, Value: 5, Timestamp: promT0 + 6000}}
	req.Metadata = []prompb.MetricMetadata{{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "up", Help: "up"}}
	s.promWrite(204, "/api/v1/write", promBody(t, req))

	rows := s.findRows("prometheus", `{"sort": {"t": 1}}`)
	var got []string
	for _, row := range rows {
		got = append(got, fmt.Sprintf("%s=%v", row["t"].(map[string]any)["$date"], row["value"]))
	}
	if len(got) != 5 || got[0] != "2024-05-01T12:00:00Z=0" || got[3] != "2024-05-01T12:00:04Z=2" || got[4] != "2024-05-01T12:00:06Z=5" ||
		!(got[1] == "2024-05-01T12:00:02Z=1" && got[2] == "2024-05-01T12:00:02Z=3" || got[1] == "2024-05-01T12:00:02Z=3" && got[2] == "2024-05-01T12:00:02Z=1") {
		t.Fatalf("samples: %v", got)
	}
}

// TestPromWriteSlots: the measurements of a series written again carry
// its cache entry's slot to the engine, which keeps the series' place
// there (TestSeriesSlot checks what the engine takes from it).
func TestPromWriteSlots(t *testing.T) {
	s := newTestServer(t, nil)
	name := fmt.Sprintf("slot_test_%d", time.Now().UnixNano()) // promKeys is shared by the tests
	for i := range 2 {
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series([]prompb.Sample{{Value: 1, Timestamp: promT0 + int64(i)*1000}}, "__name__", name, "job", "slots")}}
		s.promWrite(204, "/api/v1/write", promBody(t, req))
	}
	found := api.PromKeySlots(name)
	if len(found) != 1 || found[0] == nil || found[0].Load() == 0 {
		t.Fatalf("cache entries of the series: slots %v; want one, filled by the engine", found)
	}
}
