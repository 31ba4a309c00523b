package api_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"net/http"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/hourglassdb/hourglass/api"
)

// promReadBody is req marshalled and snappy-compressed, as remote read sends it.
func promReadBody(t testing.TB, req *prompb.ReadRequest) []byte {
	t.Helper()
	pb, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, pb)
}

// promRead posts req and returns the decoded response, checking status 200.
func (s *testServer) promRead(path string, req *prompb.ReadRequest) *prompb.ReadResponse {
	s.t.Helper()
	r := s.do("POST", path, promReadBody(s.t, req), "Content-Encoding", "snappy", "Content-Type", "application/x-protobuf",
		"X-Prometheus-Remote-Read-Version", "0.1.0")
	if r.status != http.StatusOK {
		s.t.Fatalf("POST %s: status %d: %s", path, r.status, r.body)
	}
	if ct, ce := r.header.Get("Content-Type"), r.header.Get("Content-Encoding"); ct != "application/x-protobuf" || ce != "snappy" {
		s.t.Fatalf("Content-Type %q, Content-Encoding %q", ct, ce)
	}
	pb, err := snappy.Decode(nil, r.body)
	if err != nil {
		s.t.Fatal(err)
	}
	var resp prompb.ReadResponse
	if err := resp.Unmarshal(pb); err != nil {
		s.t.Fatal(err)
	}
	return &resp
}

func query(start, end int64, ms ...*prompb.LabelMatcher) *prompb.Query {
	return &prompb.Query{StartTimestampMs: start, EndTimestampMs: end, Matchers: ms}
}

func matcher(typ prompb.LabelMatcher_Type, name, value string) *prompb.LabelMatcher {
	return &prompb.LabelMatcher{Type: typ, Name: name, Value: value}
}

// promReadData is what TestPromRead writes and reads back.
func promReadData() []prompb.TimeSeries {
	return []prompb.TimeSeries{
		series([]prompb.Sample{{Value: 1, Timestamp: promT0}, {Value: 0.5, Timestamp: promT0 + 15000},
			{Value: math.Float64frombits(staleNaN), Timestamp: promT0 + 30000}},
			"__name__", "up", "instance", "a:9090", "job", "prometheus"),
		series([]prompb.Sample{{Value: 0, Timestamp: promT0}, {Value: math.Inf(-1), Timestamp: promT0 + 15000}},
			"__name__", "up", "instance", "b:9100", "job", "node"),
		series([]prompb.Sample{{Value: 42, Timestamp: promT0 + 5000}},
			"__name__", "http_requests_total", "code", "200", "job", "node"),
	}
}

// seriesIDs lists the series of a result by their instance (or __name__).
func seriesIDs(r *prompb.QueryResult) []string {
	var ids []string
	for _, ts := range r.Timeseries {
		id := ""
		for _, l := range ts.Labels {
			if l.Name == "instance" {
				id = l.Value
			}
		}
		if id == "" {
			id = ts.Labels[0].Value
		}
		ids = append(ids, id)
	}
	return ids
}

func TestPromRead(t *testing.T) {
	s := newTestServer(t, nil)
	data := promReadData()
	s.promWrite(204, "/api/v1/write", promBody(t, &prompb.WriteRequest{Timeseries: data}))

	// Everything, bit for bit, labels in name order, samples in time order.
	resp := s.promRead("/api/v1/read", &prompb.ReadRequest{Queries: []*prompb.Query{
		query(promT0-1000, promT0+60000, matcher(prompb.LabelMatcher_RE, "__name__", ".+"))}})
	if len(resp.Results) != 1 {
		t.Fatalf("%d results", len(resp.Results))
	}
	got := map[string]prompb.TimeSeries{}
	for _, ts := range resp.Results[0].Timeseries {
		got[labelsKey(ts.Labels)] = *ts
	}
	if len(got) != len(data) {
		t.Fatalf("%d series, want %d: %v", len(got), len(data), resp.Results[0].Timeseries)
	}
	for _, want := range data {
		g, ok := got[labelsKey(want.Labels)]
		if !ok {
			t.Fatalf("series %v missing", want.Labels)
		}
		if !reflect.DeepEqual(g.Labels, want.Labels) {
			t.Fatalf("labels %v, want %v", g.Labels, want.Labels)
		}
		if len(g.Samples) != len(want.Samples) {
			t.Fatalf("%v: samples %v, want %v", want.Labels, g.Samples, want.Samples)
		}
		for i := range want.Samples {
			if g.Samples[i].Timestamp != want.Samples[i].Timestamp ||
				math.Float64bits(g.Samples[i].Value) != math.Float64bits(want.Samples[i].Value) {
				t.Fatalf("%v: sample %d %v (%#x), want %v (%#x)", want.Labels, i, g.Samples[i], math.Float64bits(g.Samples[i].Value),
					want.Samples[i], math.Float64bits(want.Samples[i].Value))
			}
		}
	}

	// Matchers of every type, and a time range; several queries in one
	// read; series in label set order.
	cases := []struct {
		q    *prompb.Query
		want string // series ids, then samples per series
	}{
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "node")), "http_requests_total=1 b:9100=2"},
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_NEQ, "job", "node")), "a:9090=3"},
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_RE, "instance", "a.*|b:9100")), "a:9090=3 b:9100=2"},
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_RE, "instance", "a")), ""}, // anchored
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_RE, "instance", "9090")), ""},
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_NRE, "instance", "a.*")), "http_requests_total=1 b:9100=2"},
		// A label a series lacks is "".
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "instance", "")), "http_requests_total=1"},
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_NEQ, "code", "")), "http_requests_total=1"},
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_RE, "code", "2..|")), "http_requests_total=1 a:9090=3 b:9100=2"},
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_RE, "instance", "b.*|"),
			matcher(prompb.LabelMatcher_EQ, "job", "node")), "http_requests_total=1 b:9100=2"},
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_NRE, "code", "")), "http_requests_total=1"},
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_NRE, "code", "5..|")), "http_requests_total=1"},
		{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "__name__", "up"),
			matcher(prompb.LabelMatcher_NEQ, "instance", "a:9090")), "b:9100=2"},
		// Time ranges, both ends included.
		{query(promT0+15000, promT0+15000, matcher(prompb.LabelMatcher_EQ, "__name__", "up")), "a:9090=1 b:9100=1"},
		{query(promT0+1, promT0+30000, matcher(prompb.LabelMatcher_EQ, "job", "prometheus")), "a:9090=2"},
		{query(promT0+30001, promT0+90000, matcher(prompb.LabelMatcher_EQ, "__name__", "up")), ""},
		{query(promT0+10000, promT0, matcher(prompb.LabelMatcher_EQ, "__name__", "up")), ""},
		{query(math.MinInt64, math.MaxInt64, matcher(prompb.LabelMatcher_EQ, "job", "prometheus")), "a:9090=3"},
	}
	// SAMPLES first: the client's first served type is answered.
	req := &prompb.ReadRequest{AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_SAMPLES, prompb.ReadRequest_STREAMED_XOR_CHUNKS}}
	for _, c := range cases {
		req.Queries = append(req.Queries, c.q)
	}
	resp = s.promRead("/api/v1/read", req)
	for i, c := range cases {
		var parts []string
		for j, id := range seriesIDs(resp.Results[i]) {
			parts = append(parts, id+"="+strconv.Itoa(len(resp.Results[i].Timeseries[j].Samples)))
		}
		if g := strings.Join(parts, " "); g != c.want {
			t.Errorf("query %d %v: got %q, want %q", i, c.q, g, c.want)
		}
	}

	// A collection that does not exist holds no series.
	resp = s.promRead("/api/v1/read?collection=nothing", &prompb.ReadRequest{Queries: []*prompb.Query{
		query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "node"))}})
	if len(resp.Results) != 1 || len(resp.Results[0].Timeseries) != 0 {
		t.Fatalf("missing collection: %v", resp.Results)
	}
}

func labelsKey(ls []prompb.Label) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Name + "=" + l.Value + ",")
	}
	return b.String()
}

func TestPromReadBadBodies(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) { o.MaxReadSamples = 4 })
	s.promWrite(204, "/api/v1/write", promBody(t, &prompb.WriteRequest{Timeseries: promReadData()}))
	valid := promReadBody(t, &prompb.ReadRequest{Queries: []*prompb.Query{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "node"))}})
	for _, c := range []struct {
		name   string
		body   []byte
		status int
		msg    string
	}{
		{"empty", nil, 400, "empty body"},
		{"not snappy", []byte("\xff\xff\xff\xff\xff"), 400, "decompress"},
		{"not protobuf", snappy.Encode(nil, []byte{0x0a, 0xff}), 400, "ReadRequest"},
		{"no response type served", promReadBody(t, &prompb.ReadRequest{
			AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{5},
			Queries:               []*prompb.Query{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "node"))}}), 400, "none of the accepted response types"},
		{"over the sample limit, streamed", promReadBody(t, &prompb.ReadRequest{
			AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS},
			Queries:               []*prompb.Query{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "__name__", "up"))}}), 400, "exceeded sample limit (4)"},
		{"bad regex", promReadBody(t, &prompb.ReadRequest{Queries: []*prompb.Query{
			query(promT0, promT0+60000, matcher(prompb.LabelMatcher_RE, "job", "("))}}), 400, "regular expression"},
		{"bad matcher type", promReadBody(t, &prompb.ReadRequest{Queries: []*prompb.Query{
			query(promT0, promT0+60000, matcher(7, "job", "x"))}}), 400, "matcher type"},
		{"empty label name", promReadBody(t, &prompb.ReadRequest{Queries: []*prompb.Query{
			query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "", "x"))}}), 400, "empty label name"},
		{"over the sample limit", promReadBody(t, &prompb.ReadRequest{Queries: []*prompb.Query{
			query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "__name__", "up"))}}), 400, "exceeded sample limit (4)"},
		{"over the sample limit across queries", promReadBody(t, &prompb.ReadRequest{Queries: []*prompb.Query{
			query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "node")),
			query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "node"))}}), 400, "exceeded sample limit"},
	} {
		r := s.do("POST", "/api/v1/read", c.body, "Content-Encoding", "snappy")
		if r.status != c.status {
			t.Fatalf("%s: status %d, want %d: %s", c.name, r.status, c.status, r.body)
		}
		typ, msg := promErrorOf(t, r)
		if typ != "bad_data" || !strings.Contains(msg, c.msg) {
			t.Fatalf("%s: %s %q, want bad_data and %q", c.name, typ, msg, c.msg)
		}
	}
	// At the limit is served; nothing was written by the refused reads.
	resp := s.promRead("/api/v1/read", &prompb.ReadRequest{Queries: []*prompb.Query{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "node"))}})
	if len(resp.Results[0].Timeseries) != 2 {
		t.Fatalf("%v", resp.Results)
	}
	r := s.do("POST", "/api/v1/read", valid, "Content-Encoding", "gzip")
	if r.status != http.StatusUnsupportedMediaType {
		t.Fatalf("gzip: status %d", r.status)
	}
	promErrorOf(t, r)
	s.mustDo(404, "GET", "/v1/collections/nothing", "")

	// While other requests hold the request memory, a read is 429: here
	// its body (its length and one byte, the length being announced) fits
	// and its reply does not.
	release := s.srv.HoldBodyMemory(s.srv.BodyMemoryFree() - int64(len(valid)+1) - 100)
	r = s.do("POST", "/api/v1/read", valid, "Content-Encoding", "snappy")
	release()
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("body memory held: status %d, Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if typ, _ := promErrorOf(t, r); typ != "unavailable" {
		t.Fatalf("body memory held: errorType %s", typ)
	}
	s.promRead("/api/v1/read", &prompb.ReadRequest{Queries: []*prompb.Query{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "node"))}})
	if n := s.srv.BodyMemoryInUse(); n != 0 {
		t.Fatalf("%d bytes of body memory held after the reads", n)
	}
}

func TestPromReadAuth(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) { o.AuthToken = "s3cret" })
	body := promReadBody(t, &prompb.ReadRequest{Queries: []*prompb.Query{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "node"))}})
	for _, h := range []string{"", "Bearer wrong"} {
		checkPromUnauthorized(t, s, "/api/v1/read", body, h)
	}
	s.promRead("/api/v1/read", &prompb.ReadRequest{Queries: []*prompb.Query{query(promT0, promT0+60000)}})
}

// FuzzPromRead sends arbitrary bodies to remote read, as they come and
// snappy-compressed (so that the protobuf decoder sees them): never a
// panic, never a 5xx, and the collection read is left as it was.
func FuzzPromRead(f *testing.F) {
	for _, req := range []*prompb.ReadRequest{
		{Queries: []*prompb.Query{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_RE, "__name__", ".+"))}},
		{Queries: []*prompb.Query{query(math.MinInt64, math.MaxInt64, matcher(prompb.LabelMatcher_NRE, "job", "a|"),
			matcher(prompb.LabelMatcher_NEQ, "code", ""), matcher(prompb.LabelMatcher_EQ, "a.b", "x"))},
			AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}},
		{Queries: []*prompb.Query{query(promT0, promT0, matcher(prompb.LabelMatcher_RE, "$x", "(?i)UP"))}},
		{Queries: []*prompb.Query{query(promT0, promT0, matcher(7, "job", "x"))}},
	} {
		pb, err := req.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(pb)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0xff})                         // not a ReadRequest
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // no snappy length
	write := promBody(f, &prompb.WriteRequest{Timeseries: promReadData()})
	z := newFuzzServer(f, []string{"p"}, [][3]string{{"POST", "/api/v1/write?collection=p{n}", string(write)}})
	f.Fuzz(func(t *testing.T, body []byte) {
		before := z.before(t)
		serve(t, z.srv, "POST", z.path("/api/v1/read?collection=p{n}"), "application/x-protobuf", body)
		serve(t, z.srv, "POST", z.path("/api/v1/read?collection=p{n}"), "application/x-protobuf", snappy.Encode(nil, body))
		if after := z.readAll(t); before.lost(after) != 0 || after.lost(before) != 0 {
			t.Fatalf("a remote read changed the collection\nbody: %q", body)
		}
	})
}

// TestPromReadCurrentOp: a remote read in progress is listed in currentop
// as the Prometheus door's.
func TestPromReadCurrentOp(t *testing.T) {
	checkPromCurrentOp(t, "read", "remote read")
}

// TestPromReadCollection reads a time-series collection written by the
// document API: labels from a meta document's strings, numbers and
// booleans (neither an empty string nor a document is one), a label name
// with a dot matched exactly, and a value field that is not numbers
// holding no samples.
func TestPromReadCollection(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "labels"}}`)
	s.mustDo(200, "POST", "/v1/collections/m/documents", `[
		{"t": {"$date": "2024-05-01T12:00:00Z"}, "labels": {"__name__": "temp", "k8s.pod": "a", "n": 3, "ok": true, "e": "", "d": {"x": 1}}, "value": 1.5},
		{"t": {"$date": "2024-05-01T12:00:01Z"}, "labels": {"__name__": "temp", "k8s.pod": "a", "n": 3, "ok": true, "e": "", "d": {"x": 1}}, "value": 2},
		{"t": {"$date": "2024-05-01T12:00:00Z"}, "labels": {"__name__": "temp", "k8s.pod": "b"}, "value": -1}
	]`)
	resp := s.promRead("/api/v1/read?collection=m", &prompb.ReadRequest{Queries: []*prompb.Query{
		query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "k8s.pod", "a")),
		query(promT0, promT0+60000, matcher(prompb.LabelMatcher_NEQ, "k8s.pod", "a")),
		query(promT0, promT0+60000, matcher(prompb.LabelMatcher_RE, "k8s.pod", "a|b")),
		query(promT0, promT0+60000, matcher(prompb.LabelMatcher_NRE, "k8s.pod", "b")),
	}})
	want := []prompb.Label{{Name: "__name__", Value: "temp"}, {Name: "k8s.pod", Value: "a"}, {Name: "n", Value: "3"}, {Name: "ok", Value: "true"}}
	r := resp.Results[0]
	if len(r.Timeseries) != 1 || !reflect.DeepEqual(r.Timeseries[0].Labels, want) {
		t.Fatalf("series: %v", r.Timeseries)
	}
	if smp := r.Timeseries[0].Samples; !reflect.DeepEqual(smp, []prompb.Sample{{Value: 1.5, Timestamp: promT0}, {Value: 2, Timestamp: promT0 + 1000}}) {
		t.Fatalf("samples: %v", smp)
	}
	for i, n := range []int{1, 2, 1} {
		if got := len(resp.Results[i+1].Timeseries); got != n {
			t.Errorf("query %d: %d series, want %d: %v", i+1, got, n, resp.Results[i+1].Timeseries)
		}
	}
	if l := resp.Results[1].Timeseries[0].Labels; len(l) != 2 || l[1].Value != "b" {
		t.Fatalf("NEQ: %v", l)
	}

	// Meta values that give one label set are one series, its samples
	// in time order.
	s.mustDo(200, "POST", "/v1/collections/m/documents", `[
		{"t": {"$date": "2024-05-01T12:00:00.500Z"}, "labels": {"__name__": "temp", "k8s.pod": "a", "n": "3", "ok": "true"}, "value": 7},
		{"t": {"$date": "2024-05-01T12:00:02Z"}, "labels": {"__name__": "temp", "k8s.pod": "a", "n": 3, "ok": true}, "value": 8}
	]`)
	resp = s.promRead("/api/v1/read?collection=m", &prompb.ReadRequest{Queries: []*prompb.Query{
		query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "k8s.pod", "a"))}})
	if r := resp.Results[0]; len(r.Timeseries) != 1 || !reflect.DeepEqual(r.Timeseries[0].Labels, want) ||
		!reflect.DeepEqual(r.Timeseries[0].Samples, []prompb.Sample{{Value: 1.5, Timestamp: promT0}, {Value: 7, Timestamp: promT0 + 500},
			{Value: 2, Timestamp: promT0 + 1000}, {Value: 8, Timestamp: promT0 + 2000}}) {
		t.Fatalf("one label set: %v", r.Timeseries)
	}

	// A value field of strings holds no samples.
	s.mustDo(201, "PUT", "/v1/collections/str", `{"timeseries": {"timeField": "t", "metaField": "labels"}}`)
	s.mustDo(200, "POST", "/v1/collections/str/documents", `[{"t": {"$date": "2024-05-01T12:00:00Z"}, "labels": {"a": "b"}, "value": "text"}]`)
	resp = s.promRead("/api/v1/read?collection=str", &prompb.ReadRequest{Queries: []*prompb.Query{query(promT0, promT0+60000)}})
	if len(resp.Results[0].Timeseries) != 0 {
		t.Fatalf("string values: %v", resp.Results[0].Timeseries)
	}
}

// TestPromReadSeriesOrder: series come in label set order whatever the
// order the engine keeps them in (here, {a: "x!"} before {a: "x", b: "1"}
// by their meta keys' bytes).
func TestPromReadSeriesOrder(t *testing.T) {
	s := newTestServer(t, nil)
	var data []prompb.TimeSeries
	for _, v := range []string{"x!", "x", "w", "x\x01"} {
		data = append(data, series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "__name__", "s", "a", v, "b", "1"))
		data = append(data, series([]prompb.Sample{{Value: 1, Timestamp: promT0}}, "__name__", "s", "a", v))
	}
	s.promWrite(204, "/api/v1/write", promBody(t, &prompb.WriteRequest{Timeseries: data}))
	resp := s.promRead("/api/v1/read", &prompb.ReadRequest{Queries: []*prompb.Query{query(promT0, promT0, matcher(prompb.LabelMatcher_EQ, "__name__", "s"))}})
	var got []string
	for _, ts := range resp.Results[0].Timeseries {
		got = append(got, labelsKey(ts.Labels))
	}
	want := []string{"__name__=s,a=w,", "__name__=s,a=w,b=1,", "__name__=s,a=x,", "__name__=s,a=x,b=1,",
		"__name__=s,a=x\x01,", "__name__=s,a=x\x01,b=1,", "__name__=s,a=x!,", "__name__=s,a=x!,b=1,"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("series order:\n%q\nwant\n%q", got, want)
	}
}

// BenchmarkRemoteRead reads 1,000 series x 1,000 samples (15 s apart,
// node-exporter-like labels) with one remote read of one query through
// the real handler over loopback: decoded request, the find, the
// ReadResponse marshalled and snappy-compressed, and the reply read by
// the client (decoded once, to check it holds every sample).
func BenchmarkRemoteRead(b *testing.B) {
	const nSeries, nSamples = 1000, 1000
	url := benchServer(b)
	wreq := promRequest(nSeries, nSamples)
	post(b, "POST", url+"/api/v1/write", "application/x-protobuf", promBody(b, wreq), 204)
	body := promReadBody(b, &prompb.ReadRequest{Queries: []*prompb.Query{
		query(promT0, promT0+nSamples*15000, matcher(prompb.LabelMatcher_EQ, "job", "node"))}})
	read := func() []byte {
		resp, err := http.Post(url+"/api/v1/read", "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d: %v %.200s", resp.StatusCode, err, out)
		}
		return out
	}
	out := read()
	pb, err := snappy.Decode(nil, out)
	if err != nil {
		b.Fatal(err)
	}
	var rr prompb.ReadResponse
	if err := rr.Unmarshal(pb); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, ts := range rr.Results[0].Timeseries {
		n += len(ts.Samples)
	}
	if len(rr.Results[0].Timeseries) != nSeries || n != nSeries*nSamples {
		b.Fatalf("%d series, %d samples", len(rr.Results[0].Timeseries), n)
	}
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for range b.N {
		read()
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	samples := float64(nSeries * nSamples * b.N)
	b.ReportMetric(samples/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(len(out))/float64(nSeries*nSamples), "reply-bytes/sample")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/samples, "alloc-bytes/sample")
}

// TestPromReadReplyOverBodyMemory: a reply that would take more than the
// whole request memory is 400, whatever the other requests hold.
func TestPromReadReplyOverBodyMemory(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) { o.MaxBodyMemory, o.MaxBody = 2048, 1024 })
	for _, ts := range promReadData() {
		s.promWrite(204, "/api/v1/write", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}))
	}
	req := &prompb.ReadRequest{}
	for range 8 {
		req.Queries = append(req.Queries, query(promT0, promT0+60000, matcher(prompb.LabelMatcher_RE, "__name__", ".+")))
	}
	r := s.do("POST", "/api/v1/read", promReadBody(t, req), "Content-Encoding", "snappy")
	if r.status != http.StatusBadRequest {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if typ, msg := promErrorOf(t, r); typ != "bad_data" || !strings.Contains(msg, "over the server's body memory of 2048") {
		t.Fatalf("%s %q", typ, msg)
	}
	// One query's reply fits.
	s.promRead("/api/v1/read", &prompb.ReadRequest{Queries: []*prompb.Query{query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "node"))}})
}

// checkPromUnauthorized posts body to path with the Authorization header
// h (none when empty) and expects 401 in Prometheus' error shape.
func checkPromUnauthorized(t *testing.T, s *testServer, path string, body []byte, h string) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url+path, bytes.NewReader(body))
	if h != "" {
		req.Header.Set("Authorization", h)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Authorization %q: status %d", h, resp.StatusCode)
	}
	promErrorOf(t, reply{status: resp.StatusCode, body: b})
}

// promStream posts req asking for streamed chunks and decodes the frames:
// each frame's CRC checked, each chunk read with Prometheus' own XOR
// decoder into a SAMPLES-shaped result per query.
func (s *testServer) promStream(path string, req *prompb.ReadRequest) (results []*prompb.QueryResult, frames int) {
	s.t.Helper()
	r := s.do("POST", path, promReadBody(s.t, req), "Content-Encoding", "snappy", "Content-Type", "application/x-protobuf",
		"X-Prometheus-Remote-Read-Version", "0.1.0")
	if r.status != http.StatusOK {
		s.t.Fatalf("POST %s: status %d: %s", path, r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse" || r.header.Get("Content-Encoding") != "" {
		s.t.Fatalf("Content-Type %q, Content-Encoding %q", ct, r.header.Get("Content-Encoding"))
	}
	results = make([]*prompb.QueryResult, len(req.Queries))
	for i := range results {
		results[i] = &prompb.QueryResult{}
	}
	b := r.body
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || len(b) < k+4+int(n) {
			s.t.Fatalf("frame %d: bad length", frames)
		}
		msg := b[k+4 : k+4+int(n)]
		if crc32.Checksum(msg, crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(b[k:]) {
			s.t.Fatalf("frame %d: CRC mismatch", frames)
		}
		b = b[k+4+int(n):]
		frames++
		var resp prompb.ChunkedReadResponse
		if err := resp.Unmarshal(msg); err != nil {
			s.t.Fatal(err)
		}
		res := results[resp.QueryIndex]
		for _, cs := range resp.ChunkedSeries {
			var ts *prompb.TimeSeries
			if l := len(res.Timeseries); l > 0 && labelsKey(res.Timeseries[l-1].Labels) == labelsKey(cs.Labels) {
				ts = res.Timeseries[l-1] // a series split over frames
			} else {
				ts = &prompb.TimeSeries{Labels: cs.Labels}
				res.Timeseries = append(res.Timeseries, ts)
			}
			for _, ch := range cs.Chunks {
				c, err := chunkenc.FromData(chunkenc.EncXOR, ch.Data)
				if err != nil || ch.Type != prompb.Chunk_XOR {
					s.t.Fatalf("chunk: %v %v", ch.Type, err)
				}
				it := c.Iterator(nil)
				first := true
				for it.Next() == chunkenc.ValFloat {
					t, v := it.At()
					if first && t != ch.MinTimeMs {
						s.t.Fatalf("chunk starts at %d, says %d", t, ch.MinTimeMs)
					}
					first = false
					ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
				}
				if n := len(ts.Samples); n == 0 || ts.Samples[n-1].Timestamp != ch.MaxTimeMs {
					s.t.Fatalf("chunk ends at %v, says %d", ts.Samples, ch.MaxTimeMs)
				}
			}
		}
	}
	return results, frames
}

// Streamed remote read (STREAMED_XOR_CHUNKS) answers what SAMPLES
// answers, bit for bit, each series in XOR chunks of at most 120 samples.
func TestPromReadStreamed(t *testing.T) {
	s := newTestServer(t, nil)
	data := promReadData()
	// A long series: chunks of 120 samples and one of 60.
	var long []prompb.Sample
	for i := range 300 {
		long = append(long, prompb.Sample{Timestamp: promT0 + int64(i)*1000, Value: float64(i) / 7})
	}
	data = append(data, series(long, "__name__", "long", "job", "node"))
	s.promWrite(204, "/api/v1/write", promBody(t, &prompb.WriteRequest{Timeseries: data}))
	queries := []*prompb.Query{
		query(promT0-1000, promT0+600000, matcher(prompb.LabelMatcher_RE, "__name__", ".+")),
		query(promT0+15000, promT0+15000, matcher(prompb.LabelMatcher_EQ, "__name__", "up")),
		query(promT0, promT0+60000, matcher(prompb.LabelMatcher_EQ, "job", "none")),
	}
	want := s.promRead("/api/v1/read", &prompb.ReadRequest{Queries: queries})
	got, frames := s.promStream("/api/v1/read", &prompb.ReadRequest{Queries: queries,
		AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS, prompb.ReadRequest_SAMPLES}})
	if frames != 4+2 { // one a series: 4, then 2
		t.Errorf("%d frames", frames)
	}
	for i := range queries {
		w, g := want.Results[i].Timeseries, got[i].Timeseries
		if len(w) != len(g) {
			t.Fatalf("query %d: %d series streamed, %d as samples", i, len(g), len(w))
		}
		for j := range w {
			if labelsKey(w[j].Labels) != labelsKey(g[j].Labels) || len(w[j].Samples) != len(g[j].Samples) {
				t.Fatalf("query %d series %d: %v, want %v", i, j, g[j].Labels, w[j].Labels)
			}
			for k := range w[j].Samples {
				ws, gs := w[j].Samples[k], g[j].Samples[k]
				if ws.Timestamp != gs.Timestamp || math.Float64bits(ws.Value) != math.Float64bits(gs.Value) {
					t.Fatalf("query %d series %d sample %d: %v, want %v", i, j, k, gs, ws)
				}
			}
		}
	}
}
