package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/command/promstore"
	"github.com/hourglassdb/hourglass/timeseries"
)

// promQLData: two counters of req_total (every 15 s from promT0 to
// promT0+60s) and two series of up, the one of instance a ended by a
// staleness marker at promT0+30s.
func promQLData() []prompb.TimeSeries {
	var ok, bad, upB []prompb.Sample
	for i := range int64(5) {
		ok = append(ok, prompb.Sample{Timestamp: promT0 + i*15000, Value: float64(10 * i)})
		bad = append(bad, prompb.Sample{Timestamp: promT0 + i*15000, Value: float64(i / 2)})
		upB = append(upB, prompb.Sample{Timestamp: promT0 + i*15000, Value: 1})
	}
	return []prompb.TimeSeries{
		series(ok, "__name__", "req_total", "code", "200", "job", "api"),
		series(bad, "__name__", "req_total", "code", "500", "job", "api"),
		series([]prompb.Sample{{Timestamp: promT0, Value: 1}, {Timestamp: promT0 + 15000, Value: 1},
			{Timestamp: promT0 + 30000, Value: math.Float64frombits(staleNaN)}}, "__name__", "up", "instance", "a", "job", "api"),
		series(upB, "__name__", "up", "instance", "b", "job", "api"),
	}
}

// newPromQLServer is a server holding promQLData.
func newPromQLServer(t *testing.T, mod func(*api.Options)) *testServer {
	s := newTestServer(t, mod)
	s.promWrite(204, "/api/v1/write", promBody(t, &prompb.WriteRequest{Timeseries: promQLData()}))
	return s
}

// sec is promT0 plus d seconds, as the API's times are written.
func sec(d float64) string {
	return strconv.FormatFloat(float64(promT0)/1000+d, 'f', -1, 64)
}

// promGet sends GET path?form and checks the status.
func (s *testServer) promGet(status int, path string, form url.Values) reply {
	s.t.Helper()
	return s.mustDo(status, "GET", path+"?"+form.Encode(), "")
}

// promPost sends form as a POSTed form body and checks the status.
func (s *testServer) promPost(status int, path string, form url.Values) reply {
	s.t.Helper()
	return s.mustDo(status, "POST", path, form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
}

// TestPromQLInstant: an instant query's reply, byte for byte as
// Prometheus writes it; a series ended by a staleness marker is gone
// after it; functions and aggregations answer.
func TestPromQLInstant(t *testing.T) {
	s := newPromQLServer(t, nil)
	r := s.promGet(200, "/api/v1/query", url.Values{"query": {"up"}, "time": {sec(20)}})
	want := `{"status":"success","data":{"resultType":"vector","result":[` +
		`{"metric":{"__name__":"up","instance":"a","job":"api"},"value":[1714564820,"1"]},` +
		`{"metric":{"__name__":"up","instance":"b","job":"api"},"value":[1714564820,"1"]}]}}` + "\n"
	if string(r.body) != want {
		t.Fatalf("up at +20s:\n%s\nwant\n%s", r.body, want)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	// After the staleness marker, up{instance="a"} has no value.
	r = s.promGet(200, "/api/v1/query", url.Values{"query": {"up"}, "time": {sec(31.25)}})
	want = `{"status":"success","data":{"resultType":"vector","result":[` +
		`{"metric":{"__name__":"up","instance":"b","job":"api"},"value":[1714564831.250,"1"]}]}}` + "\n"
	if string(r.body) != want {
		t.Fatalf("up after the staleness marker:\n%s\nwant\n%s", r.body, want)
	}
	for _, tc := range []struct{ q, want string }{
		{`sum by (code) (req_total)`, `[{"metric":{"code":"200"},"value":[1714564860,"40"]},{"metric":{"code":"500"},"value":[1714564860,"2"]}]`},
		{`count(up)`, `[{"metric":{},"value":[1714564860,"1"]}]`},
		{`req_total{code="200"} offset 30s`, `[{"metric":{"__name__":"req_total","code":"200","job":"api"},"value":[1714564860,"20"]}]`},
		{`req_total{code="200"} @ 1714564815`, `[{"metric":{"__name__":"req_total","code":"200","job":"api"},"value":[1714564860,"10"]}]`},
		{`increase(req_total{code="200"}[45s])`, `[{"metric":{"code":"200","job":"api"},"value":[1714564860,"30"]}]`},
		{`max_over_time(req_total{code="500"}[1m:15s])`, `[{"metric":{"code":"500","job":"api"},"value":[1714564860,"2"]}]`},
		{`req_total / on(job) group_left up{instance="b"}`, `[{"metric":{"code":"200","job":"api"},"value":[1714564860,"40"]},{"metric":{"code":"500","job":"api"},"value":[1714564860,"2"]}]`},
		{`nothing_here`, `[]`},
	} {
		r := s.promGet(200, "/api/v1/query", url.Values{"query": {tc.q}, "time": {sec(60)}})
		var reply struct {
			Status string
			Data   struct {
				ResultType string
				Result     json.RawMessage
			}
		}
		if err := json.Unmarshal(r.body, &reply); err != nil || reply.Status != "success" || reply.Data.ResultType != "vector" {
			t.Fatalf("%s: %v %s", tc.q, err, r.body)
		}
		if string(reply.Data.Result) != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.q, reply.Data.Result, tc.want)
		}
	}
	// A scalar and a string.
	r = s.promGet(200, "/api/v1/query", url.Values{"query": {"1+1"}, "time": {"1714564800.123"}})
	if want := `{"status":"success","data":{"resultType":"scalar","result":[1714564800.123,"2"]}}` + "\n"; string(r.body) != want {
		t.Fatalf("1+1: %s", r.body)
	}
	r = s.promGet(200, "/api/v1/query", url.Values{"query": {"time()"}, "time": {"1714564800.05"}})
	if want := `{"status":"success","data":{"resultType":"scalar","result":[1714564800.050,"1714564800.05"]}}` + "\n"; string(r.body) != want {
		t.Fatalf("time() at .05: %s", r.body)
	}
	r = s.promPost(200, "/api/v1/query", url.Values{"query": {`"hi"`}, "time": {"1714564800"}})
	if want := `{"status":"success","data":{"resultType":"string","result":[1714564800,"hi"]}}` + "\n"; string(r.body) != want {
		t.Fatalf(`"hi": %s`, r.body)
	}
	// Values as Prometheus writes them.
	r = s.promGet(200, "/api/v1/query", url.Values{"query": {"vector(1/0) or label_replace(vector(-1/0), \"a\", \"b\", \"\", \"\") or label_replace(vector(0/0), \"a\", \"c\", \"\", \"\") or label_replace(vector(1e-7), \"a\", \"d\", \"\", \"\")"}, "time": {"0"}})
	for _, v := range []string{`"+Inf"`, `"-Inf"`, `"NaN"`, `"1e-07"`} {
		if !strings.Contains(string(r.body), v) {
			t.Errorf("no %s in %s", v, r.body)
		}
	}
}

// TestPromQLRange: a range query's matrix, its times at each step (with
// milliseconds), a stale series ending at its marker; GET and POST answer
// the same.
func TestPromQLRange(t *testing.T) {
	s := newPromQLServer(t, nil)
	form := url.Values{"query": {`req_total{code="200"}`}, "start": {sec(0)}, "end": {sec(60)}, "step": {"15s"}}
	r := s.promGet(200, "/api/v1/query_range", form)
	want := `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"req_total","code":"200","job":"api"},"values":[` +
		`[1714564800,"0"],[1714564815,"10"],[1714564830,"20"],[1714564845,"30"],[1714564860,"40"]]}]}}` + "\n"
	if string(r.body) != want {
		t.Fatalf("range:\n%s\nwant\n%s", r.body, want)
	}
	if p := s.promPost(200, "/api/v1/query_range", form); string(p.body) != want {
		t.Fatalf("POST: %s", p.body)
	}
	form = url.Values{"query": {`up{instance="a"}`}, "start": {sec(0.5)}, "end": {sec(60.5)}, "step": {"10"}}
	r = s.promGet(200, "/api/v1/query_range", form)
	want = `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"up","instance":"a","job":"api"},"values":[` +
		`[1714564800.500,"1"],[1714564810.500,"1"],[1714564820.500,"1"]]}]}}` + "\n"
	if string(r.body) != want {
		t.Fatalf("up{instance=a}, which a staleness marker ends:\n%s\nwant\n%s", r.body, want)
	}
	r = s.promGet(200, "/api/v1/query_range", url.Values{"query": {`rate(req_total[30s])`}, "start": {sec(30)}, "end": {sec(60)}, "step": {"30s"}})
	var m struct {
		Data struct {
			Result []struct {
				Metric map[string]string
				Values [][2]any
			}
		}
	}
	if err := json.Unmarshal(r.body, &m); err != nil || len(m.Data.Result) != 2 {
		t.Fatalf("rate: %v %s", err, r.body)
	}
	for _, s := range m.Data.Result {
		if s.Metric["__name__"] != "" || len(s.Values) != 2 {
			t.Fatalf("rate: %s", r.body)
		}
	}
}

// TestPromQLSeriesAndLabels: series, label names and values, with
// match[], start and end, limit; metadata and buildinfo; a collection
// that does not exist holds nothing.
func TestPromQLSeriesAndLabels(t *testing.T) {
	s := newPromQLServer(t, nil)
	data := func(r reply) string {
		var m struct {
			Status   string
			Data     json.RawMessage
			Warnings []string
		}
		if err := json.Unmarshal(r.body, &m); err != nil || m.Status != "success" {
			t.Fatalf("%v %s", err, r.body)
		}
		return string(m.Data) + fmt.Sprint(m.Warnings)
	}
	for _, tc := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/api/v1/series", url.Values{"match[]": {"up"}},
			`[{"__name__":"up","instance":"a","job":"api"},{"__name__":"up","instance":"b","job":"api"}][]`},
		{"/api/v1/series", url.Values{"match[]": {`up{instance="b"}`, `{__name__=~"up|req_total", code="500"}`, `up{instance=~"b|c"}`}},
			`[{"__name__":"req_total","code":"500","job":"api"},{"__name__":"up","instance":"b","job":"api"}][]`},
		{"/api/v1/series", url.Values{"match[]": {"up"}, "start": {sec(45)}, "end": {sec(100)}},
			`[{"__name__":"up","instance":"b","job":"api"}][]`},
		{"/api/v1/series", url.Values{"match[]": {"up"}, "limit": {"1"}},
			`[{"__name__":"up","instance":"a","job":"api"}][results truncated due to limit]`},
		{"/api/v1/labels", nil, `["__name__","code","instance","job"][]`},
		{"/api/v1/labels", url.Values{"match[]": {"up"}}, `["__name__","instance","job"][]`},
		{"/api/v1/labels", url.Values{"start": {sec(1000)}}, `[][]`},
		{"/api/v1/label/__name__/values", nil, `["req_total","up"][]`},
		{"/api/v1/label/code/values", url.Values{"match[]": {`req_total`}, "limit": {"1"}}, `["200"][results truncated due to limit]`},
		{"/api/v1/label/instance/values", url.Values{"start": {"2024-05-01T12:00:45Z"}, "end": {"2024-05-01T13:00:00Z"}}, `["b"][]`},
		{"/api/v1/label/nope/values", nil, `[][]`},
		{"/api/v1/label/job/values", url.Values{"match[]": {"up", "req_total"}}, `["api"][]`},
		{"/api/v1/labels", url.Values{"match[]": {`up{instance="a"}`, "req_total"}}, `["__name__","code","instance","job"][]`},
		{"/api/v1/labels", url.Values{"collection": {"none"}}, `[][]`},
		{"/api/v1/series", url.Values{"match[]": {"up"}, "collection": {"none"}}, `[][]`},
		{"/api/v1/metadata", nil, `{}[]`},
	} {
		if got := data(s.promGet(200, tc.path, tc.form)); got != tc.want {
			t.Errorf("GET %s?%s: %s, want %s", tc.path, tc.form.Encode(), got, tc.want)
		}
		if got := data(s.promPost(200, tc.path, tc.form)); got != tc.want {
			t.Errorf("POST %s %s: %s, want %s", tc.path, tc.form.Encode(), got, tc.want)
		}
	}
	var bi struct {
		Data map[string]string
	}
	if err := json.Unmarshal(s.promGet(200, "/api/v1/status/buildinfo", nil).body, &bi); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "revision", "branch", "buildUser", "buildDate", "goVersion"} {
		if _, ok := bi.Data[k]; !ok {
			t.Errorf("buildinfo lacks %q: %v", k, bi.Data)
		}
	}
	if !strings.HasPrefix(bi.Data["version"], "3.") {
		t.Errorf("buildinfo version %q: want the engine's Prometheus version", bi.Data["version"])
	}
}

// TestPromQLErrors: each refusal in Prometheus' error shape, status and
// errorType.
func TestPromQLErrors(t *testing.T) {
	s := newPromQLServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/plain", `{}`)
	for _, tc := range []struct {
		path   string
		form   url.Values
		status int
		typ    string
		msg    string
	}{
		{"/api/v1/query", url.Values{"query": {"sum("}}, 400, "bad_data", `invalid parameter "query"`},
		{"/api/v1/query", url.Values{"query": {""}}, 400, "bad_data", `invalid parameter "query"`},
		{"/api/v1/query", url.Values{"query": {"up"}, "time": {"yesterday"}}, 400, "bad_data", `invalid parameter "time"`},
		{"/api/v1/query", url.Values{"query": {"up"}, "timeout": {"soon"}}, 400, "bad_data", `invalid parameter "timeout"`},
		{"/api/v1/query", url.Values{"query": {"up"}, "collection": {"$bad"}}, 400, "bad_data", "collection"},
		{"/api/v1/query", url.Values{"query": {"up"}, "collection": {"plain"}}, 400, "bad_data", "metaField"},
		{"/api/v1/query", url.Values{"query": {`req_total + on(job) up`}, "time": {sec(20)}}, 422, "execution", "many-to-many"},
		{"/api/v1/query_range", url.Values{"query": {"up"}, "start": {sec(60)}, "end": {sec(0)}, "step": {"15"}}, 400, "bad_data", "end timestamp must not be before start time"},
		{"/api/v1/query_range", url.Values{"query": {"up"}, "start": {sec(0)}, "end": {sec(60)}, "step": {"0"}}, 400, "bad_data", "zero or negative query resolution step"},
		{"/api/v1/query_range", url.Values{"query": {"up"}, "start": {sec(0)}, "end": {sec(60)}}, 400, "bad_data", `invalid parameter "step"`},
		{"/api/v1/query_range", url.Values{"query": {"up"}, "start": {"0"}, "end": {"1000000"}, "step": {"1"}}, 400, "bad_data", "11,000 points"},
		{"/api/v1/query_range", url.Values{"query": {"up"}, "end": {"0"}, "step": {"1"}}, 400, "bad_data", `invalid parameter "start"`},
		{"/api/v1/query_range", url.Values{"query": {"up[5m]"}, "start": {"0"}, "end": {"10"}, "step": {"1"}}, 400, "bad_data", "range query"},
		{"/api/v1/series", nil, 400, "bad_data", "no match[] parameter provided"},
		{"/api/v1/series", url.Values{"match[]": {`{job=""}`}}, 400, "bad_data", "at least one non-empty matcher"},
		{"/api/v1/series", url.Values{"match[]": {`up{`}}, 400, "bad_data", `invalid parameter "match[]"`},
		{"/api/v1/labels", url.Values{"limit": {"-1"}}, 400, "bad_data", `invalid parameter "limit"`},
		{"/api/v1/labels", url.Values{"end": {"never"}}, 400, "bad_data", `invalid parameter "end"`},
	} {
		r := s.promGet(tc.status, tc.path, tc.form)
		typ, msg := promErrorOf(t, r)
		if typ != tc.typ || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s?%s: %s %q, want %s containing %q", tc.path, tc.form.Encode(), typ, msg, tc.typ, tc.msg)
		}
	}
	// An endpoint the API does not serve is 405 on these paths, not a
	// crash.
	s.mustDo(405, "DELETE", "/api/v1/query", "")
}

// TestPromQLLimits: a query past the max samples, the request memory or
// the time allowed fails as Prometheus' does.
func TestPromQLLimits(t *testing.T) {
	s := newPromQLServer(t, func(o *api.Options) { o.PromQLMaxSamples = 5 })
	r := s.promGet(422, "/api/v1/query", url.Values{"query": {"req_total[1m]"}, "time": {sec(60)}})
	if typ, msg := promErrorOf(t, r); typ != "execution" || !strings.Contains(msg, "too many samples") {
		t.Fatalf("past the max samples: %s %s", typ, msg)
	}
	r = s.promGet(422, "/api/v1/query_range", url.Values{"query": {"sum(req_total)"}, "start": {sec(0)}, "end": {sec(60)}, "step": {"1"}})
	if typ, msg := promErrorOf(t, r); typ != "execution" || !strings.Contains(msg, "too many samples") {
		t.Fatalf("past the max samples, range: %s %s", typ, msg)
	}
	// An instant selector reads the samples of its lookback (5 of each
	// series), holds one a series: the read is over the limit.
	r = s.promGet(422, "/api/v1/query", url.Values{"query": {"req_total"}, "time": {sec(60)}})
	if typ, msg := promErrorOf(t, r); typ != "execution" || !strings.Contains(msg, "--promql-max-samples (5)") {
		t.Fatalf("reading past the max samples: %s %s", typ, msg)
	}
	s.promGet(200, "/api/v1/query", url.Values{"query": {`up{instance="a"}`}, "time": {sec(20)}})

	// 5,200 samples, 83 kB read, over a request memory of 64 KiB; written
	// 400 at a time, which that memory takes.
	small := newPromQLServer(t, func(o *api.Options) { o.MaxBody, o.MaxBodyMemory = 64<<10, 64<<10 })
	for k := range int64(13) {
		var many []prompb.Sample
		for i := range int64(400) {
			many = append(many, prompb.Sample{Timestamp: promT0 + (k*400+i)*1000, Value: float64(i)})
		}
		small.promWrite(204, "/api/v1/write", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series(many, "__name__", "many")}}))
	}
	r = small.promGet(422, "/api/v1/query", url.Values{"query": {"count_over_time(many[2h])"}, "time": {sec(5000)}})
	if typ, msg := promErrorOf(t, r); typ != "execution" || !strings.Contains(msg, "--max-body-memory") {
		t.Fatalf("past the request memory: %s %s", typ, msg)
	}
	small.promGet(200, "/api/v1/query", url.Values{"query": {"count_over_time(many[10m])"}, "time": {sec(5000)}})
	// While other requests hold the request memory: 429, to retry.
	release := small.srv.HoldBodyMemory(small.srv.BodyMemoryFree() - 100)
	r = small.promGet(429, "/api/v1/query", url.Values{"query": {"count_over_time(many[10m])"}, "time": {sec(5000)}})
	release()
	if typ, _ := promErrorOf(t, r); typ != "unavailable" || r.header.Get("Retry-After") == "" {
		t.Fatalf("request memory held by others: %s %v", r.body, r.header)
	}
	if n := small.srv.BodyMemoryFree(); n != 64<<10 {
		t.Fatalf("the queries hold %d bytes of request memory after they ended", 64<<10-n)
	}

	slow := newPromQLServer(t, func(o *api.Options) { o.PromQLTimeout = 1 })
	r = slow.promGet(503, "/api/v1/query", url.Values{"query": {"up"}, "time": {sec(20)}})
	if typ, _ := promErrorOf(t, r); typ != "timeout" {
		t.Fatalf("past the timeout: %s", r.body)
	}
}

// TestPromQLQueue: past PromQLMaxConcurrency a query waits its turn, and
// one whose time runs out while it waits is 503 timeout, as Prometheus'
// query queue answers; a form body takes from the request memory while
// its request runs.
func TestPromQLQueue(t *testing.T) {
	s := newPromQLServer(t, func(o *api.Options) { o.PromQLMaxConcurrency, o.PromQLTimeout = 1, 300*time.Millisecond })
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	letGo := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(letGo) // before the server closes, which waits for the held query
	s.srv.OnPromQuery(func() {
		select {
		case held <- struct{}{}:
			<-hold
		default:
		}
	})
	done := make(chan int)
	go func() {
		resp, err := http.Get(s.url + "/api/v1/query?query=up")
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	for len(held) == 0 {
		time.Sleep(time.Millisecond)
	}
	r := s.promGet(503, "/api/v1/query", url.Values{"query": {"up"}})
	if typ, msg := promErrorOf(t, r); typ != "timeout" || !strings.Contains(msg, "query queue") {
		t.Fatalf("waiting past the timeout: %s %s", typ, msg)
	}
	letGo()
	if st := <-done; st != 200 {
		t.Fatalf("the query holding the slot: %d", st)
	}
	s.promGet(200, "/api/v1/query", url.Values{"query": {"up"}})

	// A form body waits for no memory: 429 while others hold it.
	free := s.srv.BodyMemoryFree()
	release := s.srv.HoldBodyMemory(free - 10)
	r = s.promPost(429, "/api/v1/query", url.Values{"query": {"up"}, "time": {sec(20)}})
	release()
	if typ, _ := promErrorOf(t, r); typ != "unavailable" {
		t.Fatalf("form body without memory: %s", r.body)
	}
	s.promPost(200, "/api/v1/query", url.Values{"query": {"up"}, "time": {sec(20)}})
	if n := s.srv.BodyMemoryFree(); n != free {
		t.Fatalf("%d bytes of request memory kept after the requests", free-n)
	}
}

// TestPromQLAuth: the token is required as on every Prometheus endpoint.
func TestPromQLAuth(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) { o.AuthToken = "sekrit" })
	for _, path := range []string{"/api/v1/query?query=1", "/api/v1/query_range", "/api/v1/series", "/api/v1/labels",
		"/api/v1/label/job/values", "/api/v1/metadata", "/api/v1/status/buildinfo"} {
		r := s.do("GET", path, nil, "Authorization", "")
		if r.status != 401 {
			t.Fatalf("%s without a token: %d", path, r.status)
		}
		if typ, _ := promErrorOf(t, r); typ != "bad_data" {
			t.Fatalf("%s: %s", path, r.body)
		}
	}
	s.mustDo(200, "GET", "/api/v1/query?query=1", "")
}

// TestPromQLGrafana replays the requests of Grafana's Prometheus data
// source (its health check, a panel's range query, the query editor's
// label and series lookups, the version probe) and checks the answers
// have the shape Grafana reads.
func TestPromQLGrafana(t *testing.T) {
	s := newPromQLServer(t, nil)
	decode := func(r reply) any {
		var m struct {
			Status string
			Data   any
		}
		if err := json.Unmarshal(r.body, &m); err != nil || m.Status != "success" {
			t.Fatalf("%v %s", err, r.body)
		}
		return m.Data
	}
	// Health check: GET /api/v1/query?query=1%2B1&time=<now>.
	h := decode(s.mustDo(200, "GET", "/api/v1/query?query=1%2B1&time=1714564860", ""))
	if !reflect.DeepEqual(h, map[string]any{"resultType": "scalar", "result": []any{1714564860.0, "2"}}) {
		t.Fatalf("health check: %v", h)
	}
	// A panel: POST query_range, step in seconds, times in seconds.
	body := "query=sum+by+%28code%29+%28rate%28req_total%5B1m%5D%29%29&start=1714564800&end=1714564860&step=15"
	d := decode(s.mustDo(200, "POST", "/api/v1/query_range", body, "Content-Type", "application/x-www-form-urlencoded")).(map[string]any)
	if d["resultType"] != "matrix" || len(d["result"].([]any)) != 2 {
		t.Fatalf("panel query: %v", d)
	}
	for _, s := range d["result"].([]any) {
		for _, v := range s.(map[string]any)["values"].([]any) {
			p := v.([]any)
			if _, ok := p[0].(float64); !ok {
				t.Fatalf("time %v is not a number", p[0])
			}
			if _, err := strconv.ParseFloat(p[1].(string), 64); err != nil {
				t.Fatalf("value %v: %v", p[1], err)
			}
		}
	}
	// The query editor: label names, metric names, series of a metric,
	// values of a label, in the time range of the dashboard.
	if d := decode(s.mustDo(200, "GET", "/api/v1/labels?start=1714564800&end=1714564860", "")); !reflect.DeepEqual(d, []any{"__name__", "code", "instance", "job"}) {
		t.Fatalf("labels: %v", d)
	}
	if d := decode(s.mustDo(200, "GET", "/api/v1/label/__name__/values?start=1714564800&end=1714564860", "")); !reflect.DeepEqual(d, []any{"req_total", "up"}) {
		t.Fatalf("metric names: %v", d)
	}
	sr := decode(s.mustDo(200, "POST", "/api/v1/series", "match%5B%5D=req_total&start=1714564800&end=1714564860",
		"Content-Type", "application/x-www-form-urlencoded")).([]any)
	if len(sr) != 2 || sr[0].(map[string]any)["code"] != "200" {
		t.Fatalf("series: %v", sr)
	}
	if d := decode(s.mustDo(200, "GET", "/api/v1/label/code/values?match%5B%5D=req_total&start=1714564800&end=1714564860", "")); !reflect.DeepEqual(d, []any{"200", "500"}) {
		t.Fatalf("label values: %v", d)
	}
	if d := decode(s.mustDo(200, "GET", "/api/v1/metadata", "")); !reflect.DeepEqual(d, map[string]any{}) {
		t.Fatalf("metadata: %v", d)
	}
	if d := decode(s.mustDo(200, "GET", "/api/v1/status/buildinfo", "")).(map[string]any); d["version"] == "" {
		t.Fatalf("buildinfo: %v", d)
	}
}

// TestPromQLCurrentOp: a query, a range query and a label lookup are
// listed by currentop while they run, at the Prometheus door, with their
// collection and description, as remote read is.
func TestPromQLCurrentOp(t *testing.T) {
	s := newPromQLServer(t, nil)
	hold := make(chan struct{})
	s.srv.OnPromQuery(func() { <-hold })
	// A request without collection reads every collection: it is listed
	// without one (no ns).
	for _, tc := range []struct{ path, desc, coll, ns string }{
		{"/api/v1/query?query=up&collection=prometheus", "promql query", "prometheus", "prometheus"},
		{"/api/v1/query_range?query=up&start=0&end=60&step=15", "promql query_range", "", ""},
		{"/api/v1/labels?collection=prometheus", "labels", "prometheus", "prometheus"},
		{"/api/v1/series?match[]=up", "series", "", ""},
		{"/api/v1/label/job/values", "label values", "", ""},
	} {
		done := make(chan int)
		go func() {
			req, _ := http.NewRequest("GET", s.url+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		var found bool
		for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); {
			r := s.mustDo(200, "GET", "/v1/currentop", "")
			found = strings.Contains(string(r.body), `"desc":"`+tc.desc+`"`) && (tc.ns == "" || strings.Contains(string(r.body), `"ns":"`+tc.ns+`"`))
			if !found {
				time.Sleep(5 * time.Millisecond)
			}
		}
		doors := s.srv.OpDoors(tc.coll)
		select {
		case hold <- struct{}{}:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s never reached the hook", tc.path)
		}
		if st := <-done; st != 200 {
			t.Fatalf("%s: status %d", tc.path, st)
		}
		if !found || len(doors) != 1 || doors[0] != command.Prometheus {
			t.Fatalf("%s: listed %v, doors %v", tc.desc, found, doors)
		}
	}
}

// BenchmarkPromQLRange: one range query of a dashboard panel, the rate of
// a counter summed by one label, over an hour at a 15 s step, through the
// real handler over loopback: 2,000 series (200 instances x 10 handlers)
// of 240 samples each (an hour scraped every 15 s), 480,000 samples read,
// 10 series of 239 points answered (the first step has one sample, no
// rate).
func BenchmarkPromQLRange(b *testing.B) {
	url0 := benchServer(b)
	writePromRange(b, url0)
	benchPromQLRange(b, url0, "")
}

// The series of BenchmarkPromQLRange: nSeries of nSamples each.
const benchSeries, benchSamples = 2000, 240

// BenchmarkPromQLRangeAll: BenchmarkPromQLRange's query over every
// collection, with a line-protocol collection of 240,000 samples (1,000
// series of cpu fields) beside prometheus, which the query's __name__
// rules out before any read ("all"), and over prometheus alone
// ("collection").
func BenchmarkPromQLRangeAll(b *testing.B) {
	url0 := benchServer(b)
	for k := range 10 {
		var lines strings.Builder
		for h := k * 100; h < (k+1)*100; h++ {
			for j := range 240 {
				fmt.Fprintf(&lines, "cpu,host=h%d usage_user=%d %d\n", h, j, promT0/1000+int64(j)*15)
			}
		}
		post(b, "POST", url0+"/write?db=telegraf&precision=s", "text/plain", []byte(lines.String()), 204)
	}
	writePromRange(b, url0)
	b.Run("all", func(b *testing.B) { benchPromQLRange(b, url0, "") })
	b.Run("collection", func(b *testing.B) { benchPromQLRange(b, url0, "prometheus") })
}

// writePromRange writes BenchmarkPromQLRange's series to url0.
func writePromRange(b *testing.B, url0 string) {
	const nSeries, nSamples = benchSeries, benchSamples
	for k := 0; k < nSeries; k += 200 {
		req := &prompb.WriteRequest{}
		for i := k; i < k+200; i++ {
			ts := series(nil, "__name__", "http_requests_total", "handler", fmt.Sprintf("/api/h%d", i%10),
				"instance", fmt.Sprintf("host-%d:9100", i/10), "job", "api")
			for j := range nSamples {
				ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: promT0 + int64(j)*15000, Value: float64(j * (1 + i%7))})
			}
			req.Timeseries = append(req.Timeseries, ts)
		}
		post(b, "POST", url0+"/api/v1/write", "application/x-protobuf", promBody(b, req), 204)
	}
}

// benchPromQLRange runs BenchmarkPromQLRange's query over collection (""
// for every collection).
func benchPromQLRange(b *testing.B, url0, collection string) {
	const nSeries, nSamples = benchSeries, benchSamples
	form := url.Values{"query": {`sum by (handler) (rate(http_requests_total{job="api"}[5m]))`},
		"start": {sec(0)}, "end": {sec(float64(nSamples-1) * 15)}, "step": {"15"}}
	if collection != "" {
		form.Set("collection", collection)
	}
	query := form.Encode()
	run := func() []byte {
		resp, err := http.Get(url0 + "/api/v1/query_range?" + query)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d: %v %.300s", resp.StatusCode, err, out)
		}
		return out
	}
	var res struct {
		Data struct {
			Result []struct {
				Values [][2]any
			}
		}
	}
	if err := json.Unmarshal(run(), &res); err != nil || len(res.Data.Result) != 10 || len(res.Data.Result[0].Values) != nSamples-1 {
		b.Fatalf("%v: %d series", err, len(res.Data.Result))
	}
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for range b.N {
		run()
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	samples := float64(nSeries * nSamples * b.N)
	b.ReportMetric(samples/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/samples, "alloc-bytes/sample")
}

// FuzzPromQL: whatever the query and the times, the query API answers in
// Prometheus' shape with one of its statuses (200, 400 bad_data, 422
// execution, 503 timeout), never a fault, over data with a staleness
// marker.
func FuzzPromQL(f *testing.F) {
	for _, q := range []string{`up`, `rate(req_total[1m])`, `sum by (code) (req_total) / ignoring(code) group_left up`,
		`label_replace(up, "x", "$1", "instance", "(.*)")`, `histogram_quantile(0.9, req_total)`, `up[5m:1s] @ end()`,
		`{__name__=~".+", job!~"a|"}`, `count_values("v", up) offset -1m`, `sum(`, `"s"`, `1/0`, `time()`, `req_total + on(job) up`} {
		f.Add(q, sec(30), "15s")
	}
	f.Add("up", "-1e300", "0")
	f.Add("up", "2024-05-01T12:00:00Z", "1e-9")
	db, err := timeseries.Open(timeseries.Options{Dir: f.TempDir(), NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	srv, err := api.New(api.Options{DB: db, PromQLTimeout: 2 * time.Second, PromQLMaxSamples: 100_000})
	if err != nil {
		f.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	f.Cleanup(func() {
		hs.Close()
		db.Close()
	})
	post(f, "POST", hs.URL+"/api/v1/write", "application/x-protobuf", promBody(f, &prompb.WriteRequest{Timeseries: promQLData()}), 204)
	f.Fuzz(func(t *testing.T, q, tm, step string) {
		for _, u := range []string{
			"/api/v1/query?" + url.Values{"query": {q}, "time": {tm}}.Encode(),
			"/api/v1/query_range?" + url.Values{"query": {q}, "start": {tm}, "end": {sec(60)}, "step": {step}}.Encode(),
			"/api/v1/series?" + url.Values{"match[]": {q}, "start": {tm}}.Encode(),
			"/api/v1/labels?" + url.Values{"match[]": {q}, "end": {tm}}.Encode(),
		} {
			resp, err := http.Get(hs.URL + u)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var m struct {
				Status    string `json:"status"`
				ErrorType string `json:"errorType"`
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("%s: %d, not JSON: %v %.300s", u, resp.StatusCode, err, b)
			}
			ok := map[int]string{200: "", 400: "bad_data", 422: "execution", 503: "timeout"}
			if want, known := ok[resp.StatusCode]; !known || m.ErrorType != want || (resp.StatusCode == 200) != (m.Status == "success") {
				t.Fatalf("%s: %d %.300s", u, resp.StatusCode, b)
			}
		}
	})
}

// TestPromQLFieldsShape: a collection without remote write's value field
// answers PromQL as API.md maps it: line-protocol data as
// <measurement>_<field> with the tags as labels, another collection's
// numeric fields as <collection>_<field> with the meta document's fields
// as labels, or a scalar meta value as the label named after the
// metaField; text fields are no series.
func TestPromQLFieldsShape(t *testing.T) {
	s := newTestServer(t, nil)
	writeFieldsData(s)
	result := func(collection, q string) string {
		r := s.promGet(200, "/api/v1/query", url.Values{"query": {q}, "time": {sec(10)}, "collection": {collection}})
		var m struct {
			Data struct {
				Result json.RawMessage
			}
		}
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatal(err)
		}
		return string(m.Data.Result)
	}
	for _, tc := range []struct{ coll, q, want string }{
		{"telegraf", `cpu_usage_user`, `[{"metric":{"__name__":"cpu_usage_user","host":"a","region":"eu"},"value":[1714564810,"1.5"]},{"metric":{"__name__":"cpu_usage_user","host":"b"},"value":[1714564810,"3"]}]`},
		{"telegraf", `cpu_usage_system{region="eu"}`, `[{"metric":{"__name__":"cpu_usage_system","host":"a","region":"eu"},"value":[1714564810,"2"]}]`},
		{"telegraf", `sum by (__name__) ({host="a"})`, `[{"metric":{"__name__":"cpu_usage_system"},"value":[1714564810,"2"]},{"metric":{"__name__":"cpu_usage_user"},"value":[1714564810,"1.5"]},{"metric":{"__name__":"mem_used"},"value":[1714564810,"10"]}]`},
		{"telegraf", `cpu_state`, `[]`},
		{"weather", `weather_temp`, `[{"metric":{"__name__":"weather_temp","sensor":"s1"},"value":[1714564810,"21.5"]},{"metric":{"__name__":"weather_temp","sensor":"s2"},"value":[1714564810,"19"]}]`},
	} {
		if got := result(tc.coll, tc.q); got != tc.want {
			t.Errorf("%s in %s:\n%s\nwant\n%s", tc.q, tc.coll, got, tc.want)
		}
	}
	r := s.promGet(200, "/api/v1/label/__name__/values", url.Values{"collection": {"telegraf"}})
	if want := `{"status":"success","data":["cpu_usage_system","cpu_usage_user","mem_used"]}` + "\n"; string(r.body) != want {
		t.Fatalf("names in telegraf: %s", r.body)
	}
	r = s.promGet(200, "/api/v1/series", url.Values{"collection": {"weather"}, "match[]": {`{sensor="s2"}`}})
	if want := `{"status":"success","data":[{"__name__":"weather_temp","sensor":"s2"}]}` + "\n"; string(r.body) != want {
		t.Fatalf("series in weather: %s", r.body)
	}
	// Line-protocol fields named value are m_value, as any other field,
	// in a collection holding other fields or that one alone: only remote
	// write's shape (timeField t, metaField labels) keeps its labels.
	s.mustDo(204, "POST", "/write?db=iot&precision=s", "iot,sensor=s1 value=1.5,battery=90i 1714564800\ntemp,sensor=s2 value=3 1714564800\n")
	s.mustDo(204, "POST", "/write?db=temps&precision=s", "temp,sensor=s2 value=3 1714564800\n")
	for _, tc := range []struct{ coll, want string }{
		{"iot", `[{"__name__":"iot_battery","sensor":"s1"},{"__name__":"iot_value","sensor":"s1"},{"__name__":"temp_value","sensor":"s2"}]`},
		{"temps", `[{"__name__":"temp_value","sensor":"s2"}]`},
	} {
		r = s.promGet(200, "/api/v1/series", url.Values{"collection": {tc.coll}, "match[]": {`{sensor=~"s.*"}`}})
		if got := promData(t, r); got != tc.want {
			t.Errorf("series in %s: %s, want %s", tc.coll, got, tc.want)
		}
	}
	if got := result("iot", `iot_value`); got != `[{"metric":{"__name__":"iot_value","sensor":"s1"},"value":[1714564810,"1.5"]}]` {
		t.Errorf("iot_value in iot: %s", got)
	}
}

// newPromAllServer is a server holding promQLData in prometheus (remote
// write's), line-protocol data in telegraf, a document-API time series
// weather and a plain collection sessions, all at promT0.
func newPromAllServer(t *testing.T, mod func(*api.Options)) *testServer {
	s := newPromQLServer(t, mod)
	writeFieldsData(s)
	s.mustDo(201, "PUT", "/v1/collections/sessions", `{}`)
	s.mustDo(200, "POST", "/v1/collections/sessions/documents", `[{"_id": 1, "up": 5, "t": {"$date": "2024-05-01T12:00:00Z"}}]`)
	return s
}

// promData is the data of a reply of the Prometheus API, as JSON.
func promData(t *testing.T, r reply) string {
	t.Helper()
	var m struct {
		Data json.RawMessage
	}
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatal(err)
	}
	return string(m.Data)
}

// TestPromQLAllCollections: without ?collection= a query sees every
// time-series collection, each as API.md maps it: remote-written series
// with their labels, line-protocol fields as <measurement>_<field>, a
// document time series' numeric fields as <collection>_<field>.
func TestPromQLAllCollections(t *testing.T) {
	s := newPromAllServer(t, nil)
	query := func(q string, extra ...string) string {
		t.Helper()
		form := url.Values{"query": {q}, "time": {sec(10)}}
		for i := 0; i+1 < len(extra); i += 2 {
			form.Set(extra[i], extra[i+1])
		}
		var m struct{ Result json.RawMessage }
		if err := json.Unmarshal([]byte(promData(t, s.promGet(200, "/api/v1/query", form))), &m); err != nil {
			t.Fatal(err)
		}
		return string(m.Result)
	}
	all := `[{"metric":{"__name__":"cpu_usage_user","host":"a","region":"eu"},"value":[1714564810,"1.5"]},` +
		`{"metric":{"__name__":"cpu_usage_user","host":"b"},"value":[1714564810,"3"]},` +
		`{"metric":{"__name__":"up","instance":"a","job":"api"},"value":[1714564810,"1"]},` +
		`{"metric":{"__name__":"up","instance":"b","job":"api"},"value":[1714564810,"1"]},` +
		`{"metric":{"__name__":"weather_temp","sensor":"s1"},"value":[1714564810,"21.5"]},` +
		`{"metric":{"__name__":"weather_temp","sensor":"s2"},"value":[1714564810,"19"]}]`
	if got := query(`{__name__=~"up|cpu_usage_user|weather_temp"}`); got != all {
		t.Fatalf("across the collections:\n%s\nwant\n%s", got, all)
	}
	// Across collections in one expression; the plain collection's up
	// field is no series.
	if got, want := query(`count(up) + count(weather_temp) + count(mem_used)`), `[{"metric":{},"value":[1714564810,"5"]}]`; got != want {
		t.Fatalf("an expression over three collections: %s, want %s", got, want)
	}

	// A __name__ matcher reads only the collections that can hold its
	// names: the others are ruled out by their fields or series index,
	// before any of their samples is read.
	for _, tc := range []struct {
		q     string
		reads int64
	}{
		{`weather_temp`, 1},
		{`cpu_usage_user{host="b"}`, 1},
		{`{__name__=~"weather_.*"}`, 1},
		{`{__name__=~"req_.+", code="500"}`, 1},
		{`no_such_metric`, 0},
		{`{__name__=~"up|mem_used"}`, 2},
		{`{job="api"}`, 3}, // no __name__: every time series is read
	} {
		before := promstore.CollectionsRead.Load()
		query(tc.q)
		if n := promstore.CollectionsRead.Load() - before; n != tc.reads {
			t.Errorf("%s read %d collections, want %d", tc.q, n, tc.reads)
		}
	}

	// ?collection= reads that one only.
	for _, tc := range []struct{ coll, q, want string }{
		{"telegraf", `{__name__=~"up|cpu_usage_user|weather_temp"}`, `[{"metric":{"__name__":"cpu_usage_user","host":"a","region":"eu"},"value":[1714564810,"1.5"]},{"metric":{"__name__":"cpu_usage_user","host":"b"},"value":[1714564810,"3"]}]`},
		{"weather", `up`, `[]`},
		{"prometheus", `count({__name__=~".+"})`, `[{"metric":{},"value":[1714564810,"4"]}]`},
	} {
		if got := query(tc.q, "collection", tc.coll); got != tc.want {
			t.Errorf("%s in %s: %s, want %s", tc.q, tc.coll, got, tc.want)
		}
	}

	// The series and label endpoints answer over every collection too.
	if got, want := promData(t, s.promGet(200, "/api/v1/label/__name__/values", nil)),
		`["cpu_usage_system","cpu_usage_user","mem_used","req_total","up","weather_temp"]`; got != want {
		t.Errorf("names: %s, want %s", got, want)
	}
	if got, want := promData(t, s.promGet(200, "/api/v1/labels", nil)),
		`["__name__","code","host","instance","job","region","sensor"]`; got != want {
		t.Errorf("label names: %s, want %s", got, want)
	}
	if got, want := promData(t, s.promGet(200, "/api/v1/label/host/values", url.Values{"match[]": {`{__name__=~".+_used"}`}})),
		`["a"]`; got != want {
		t.Errorf("host values of *_used: %s, want %s", got, want)
	}
	if got, want := promData(t, s.promGet(200, "/api/v1/series", url.Values{"match[]": {`{__name__=~"up|weather_temp",instance!="a"}`, `mem_used`}})),
		`[{"__name__":"mem_used","host":"a"},{"__name__":"up","instance":"b","job":"api"},{"__name__":"weather_temp","sensor":"s1"},{"__name__":"weather_temp","sensor":"s2"}]`; got != want {
		t.Errorf("series: %s, want %s", got, want)
	}
	if got, want := promData(t, s.promGet(200, "/api/v1/label/__name__/values", url.Values{"collection": {"weather"}})),
		`["weather_temp"]`; got != want {
		t.Errorf("names in weather: %s, want %s", got, want)
	}

	// Two collections holding one label set give one series: the
	// chained merge gives a sample both hold at one timestamp once. prom2
	// holds two of prometheus' samples of up{instance="b"} (at 0 and
	// 15 s) and one more (75 s): six in all.
	var upB []prompb.Sample
	for _, d := range []int64{0, 15, 75} {
		upB = append(upB, prompb.Sample{Timestamp: promT0 + d*1000, Value: 1})
	}
	s.promWrite(204, "/api/v1/write?collection=prom2", promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series(upB, "__name__", "up", "instance", "b", "job", "api")}}))
	r := s.promGet(200, "/api/v1/query", url.Values{"query": {`count_over_time(up{instance="b"}[2m])`}, "time": {sec(75)}})
	if got, want := promData(t, r), `{"resultType":"vector","result":[{"metric":{"instance":"b","job":"api"},"value":[1714564875,"6"]}]}`; got != want {
		t.Errorf("one label set in two collections: %s, want %s", got, want)
	}
}

// TestPromQLAllLimits: the limits of a query (its max samples, the
// request memory) bound the sum of what it reads over the collections.
func TestPromQLAllLimits(t *testing.T) {
	// prometheus holds 18 samples, telegraf 4, weather 2.
	s := newPromAllServer(t, func(o *api.Options) { o.PromQLMaxSamples = 20 })
	s.promGet(200, "/api/v1/query", url.Values{"query": {`count({__name__=~".+"})`}, "time": {sec(60)}, "collection": {"prometheus"}})
	s.promGet(200, "/api/v1/query", url.Values{"query": {`count({__name__=~"cpu_.+|weather_.+"})`}, "time": {sec(60)}})
	r := s.promGet(422, "/api/v1/query", url.Values{"query": {`count({__name__=~".+"})`}, "time": {sec(60)}})
	if typ, msg := promErrorOf(t, r); typ != "execution" || !strings.Contains(msg, "--promql-max-samples (20)") {
		t.Fatalf("past the max samples over the collections: %s %s", typ, msg)
	}

	// 2,600 samples in each of two collections: each read alone fits a
	// request memory of 64 KiB, both do not.
	small := newPromQLServer(t, func(o *api.Options) { o.MaxBody, o.MaxBodyMemory = 64<<10, 64<<10 })
	for _, coll := range []string{"prometheus", "other"} {
		for k := range int64(13) {
			var many []prompb.Sample
			for i := range int64(200) {
				many = append(many, prompb.Sample{Timestamp: promT0 + (k*200+i)*1000, Value: float64(i)})
			}
			small.promWrite(204, "/api/v1/write?collection="+coll, promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
				series(many, "__name__", "many", "in", coll)}}))
		}
	}
	q := url.Values{"query": {"count_over_time(many[2h])"}, "time": {sec(5000)}}
	r = small.promGet(422, "/api/v1/query", q)
	if typ, msg := promErrorOf(t, r); typ != "execution" || !strings.Contains(msg, "--max-body-memory") {
		t.Fatalf("past the request memory over the collections: %s %s", typ, msg)
	}
	q.Set("collection", "other")
	small.promGet(200, "/api/v1/query", q)
	if n := small.srv.BodyMemoryFree(); n != 64<<10 {
		t.Fatalf("the queries hold %d bytes of request memory after they ended", 64<<10-n)
	}
}

// writeFieldsData writes, at promT0, line-protocol data into telegraf
// (cpu with a text field, mem) and a document-API time series weather
// (a scalar meta value, a text field).
func writeFieldsData(s *testServer) {
	s.mustDo(204, "POST", "/write?db=telegraf&precision=s",
		"cpu,host=a,region=eu usage_user=1.5,usage_system=2i,state=\"ok\" 1714564800\n"+
			"cpu,host=b usage_user=3 1714564800\n"+
			"mem,host=a used=10 1714564800\n")
	s.mustDo(201, "PUT", "/v1/collections/weather", `{"timeseries": {"timeField": "t", "metaField": "sensor"}}`)
	s.mustDo(200, "POST", "/v1/collections/weather/documents", `[
		{"t": {"$date": "2024-05-01T12:00:00Z"}, "sensor": "s1", "temp": 21.5, "note": "sunny"},
		{"t": {"$date": "2024-05-01T12:00:00Z"}, "sensor": "s2", "temp": 19}]`)
}
