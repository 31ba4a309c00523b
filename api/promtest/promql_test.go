package promtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPromQLDifferential runs Prometheus scraping itself every second and
// remote-writing to Hourglass, then asks both the queries of
// testdata/promql.txt, each as an instant query and as a range query, at
// the same times, inside the window both hold: the answers must be equal
// (labels, timestamps, values to 1e-9 relative, the order of sort and
// sort_desc; an error an error of the same type). Prometheus 2.42 answers
// from its own TSDB, Hourglass with Prometheus' engine over its storage.
// Prometheus remote-writes each sample twice, to prometheus and to the
// collection mirror: Hourglass answers over every collection (the two
// merged, each sample of a timestamp once) and over prometheus alone
// (?collection=), both as Prometheus.
func TestPromQLDifferential(t *testing.T) {
	bin := requirePrometheus(t)
	corpus := readCorpus(t, "testdata/promql.txt")
	const token = "promql-diff-token"
	_, hs := serveHourglass(t, token)

	// One shard sends the batches one after the other, in the order of
	// Prometheus' log: once a scrape's up has arrived, every sample of
	// that scrape and of those before it has.
	port := freePort(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['127.0.0.1:%d']
remote_write:
  - url: %s/api/v1/write
    authorization:
      credentials: %s
    queue_config:
      min_shards: 1
      max_shards: 1
      batch_send_deadline: 500ms
  - url: %s/api/v1/write?collection=mirror
    authorization:
      credentials: %s
    queue_config:
      min_shards: 1
      max_shards: 1
      batch_send_deadline: 500ms
`, port, hs.URL, token, hs.URL, token)
	startPrometheus(t, bin, t.TempDir(), port, cfg)
	promURL := fmt.Sprintf("http://127.0.0.1:%d", port)

	// Wait for 20 s of samples in Hourglass.
	var first, last int64
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		first, last = upBounds(t, hs.URL, token)
		if last-first >= 20000 {
			break
		}
	}
	if last-first < 20000 {
		t.Fatalf("after 45 s, Hourglass holds up from %d to %d only", first, last)
	}
	// Half a second off the scrape grid, 1.5 s before the last scrape
	// Hourglass holds, and from 10.5 s after the first (see the corpus).
	end := last - 1500
	start := end - 8000
	t.Logf("%d queries at %s, and from %s to %s every second", len(corpus),
		time.UnixMilli(end).UTC().Format(time.RFC3339Nano), time.UnixMilli(start).UTC().Format(time.RFC3339Nano),
		time.UnixMilli(end).UTC().Format(time.RFC3339Nano))

	secs := func(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }
	// The answers over every collection merge mirror's samples.
	if r := promGet(t, hs.URL+"/api/v1/query?"+url.Values{"query": {"count_over_time(up[10s])"},
		"time": {secs(end)}, "collection": {"mirror"}}.Encode(), token); r.Status != "success" || len(r.Data.Result) < 10 {
		t.Fatalf("mirror holds no up in the window: %s", r.raw)
	}
	var failed int
	for _, q := range corpus {
		for _, req := range []struct{ path, form string }{
			{"/api/v1/query", url.Values{"query": {q}, "time": {secs(end)}}.Encode()},
			{"/api/v1/query_range", url.Values{"query": {q}, "start": {secs(start)}, "end": {secs(end)}, "step": {"1"}}.Encode()},
		} {
			want := promGet(t, promURL+req.path+"?"+req.form, "")
			for _, form := range []string{req.form, req.form + "&collection=prometheus"} {
				got := promGet(t, hs.URL+req.path+"?"+form, token)
				if diff := comparePromReplies(want, got, strings.HasPrefix(q, "sort")); diff != "" {
					failed++
					t.Errorf("%s?%s: %s\nprometheus: %.600s\nhourglass:  %.600s", req.path, form, diff, want.raw, got.raw)
				}
			}
		}
	}
	if failed == 0 {
		t.Logf("%d queries, instant and range: the same answers", len(corpus))
	}
}

// readCorpus reads one query a line, leaving out blank lines and comments.
func readCorpus(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var qs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			qs = append(qs, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return qs
}

// upBounds returns the times (ms) of the first and last samples of up in
// Hourglass, 0 before any.
func upBounds(t *testing.T, base, token string) (first, last int64) {
	t.Helper()
	get := func(order int) int64 {
		body := fmt.Sprintf(`{"filter": {"labels.__name__": "up"}, "sort": {"t": %d}, "limit": 1}`, order)
		req, _ := http.NewRequest("POST", base+"/v1/collections/prometheus/find", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rows []struct {
			T struct {
				Date string `json:"$date"`
			} `json:"t"`
		}
		if json.NewDecoder(resp.Body).Decode(&rows) != nil || len(rows) == 0 {
			return 0
		}
		ts, err := time.Parse(time.RFC3339Nano, rows[0].T.Date)
		if err != nil {
			t.Fatal(err)
		}
		return ts.UnixMilli()
	}
	return get(1), get(-1)
}

// promReply is a reply of the query API.
type promReply struct {
	raw       []byte
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

func promGet(t *testing.T, u, token string) promReply {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := promReply{raw: b}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return r
}

// promEntry is a series of a result: its labels, and its points (one for
// a vector, a scalar or a string).
type promEntry struct {
	key    string
	points [][2]any
}

// promEntries reads a result into entries, in the result's order.
func promEntries(r promReply) ([]promEntry, error) {
	switch r.Data.ResultType {
	case "scalar", "string":
		var p [2]any
		if err := json.Unmarshal(r.Data.Result, &p); err != nil {
			return nil, err
		}
		return []promEntry{{points: [][2]any{p}}}, nil
	}
	var series []struct {
		Metric map[string]string `json:"metric"`
		Value  *[2]any           `json:"value"`
		Values [][2]any          `json:"values"`
	}
	if err := json.Unmarshal(r.Data.Result, &series); err != nil {
		return nil, err
	}
	out := make([]promEntry, len(series))
	for i, s := range series {
		names := make([]string, 0, len(s.Metric))
		for k := range s.Metric {
			names = append(names, k)
		}
		slices.Sort(names)
		var key strings.Builder
		for _, k := range names {
			fmt.Fprintf(&key, "%s=%q,", k, s.Metric[k])
		}
		out[i].key = key.String()
		if s.Value != nil {
			out[i].points = [][2]any{*s.Value}
		} else {
			out[i].points = s.Values
		}
	}
	return out, nil
}

// comparePromReplies returns how got differs from want, "" when it does
// not; ordered says the order of the series matters.
func comparePromReplies(want, got promReply, ordered bool) string {
	if want.Status != got.Status || want.ErrorType != got.ErrorType {
		return fmt.Sprintf("status %s %s, want %s %s", got.Status, got.ErrorType, want.Status, want.ErrorType)
	}
	if want.Status != "success" {
		return ""
	}
	if want.Data.ResultType != got.Data.ResultType {
		return fmt.Sprintf("resultType %s, want %s", got.Data.ResultType, want.Data.ResultType)
	}
	we, err1 := promEntries(want)
	ge, err2 := promEntries(got)
	if err1 != nil || err2 != nil {
		return fmt.Sprintf("cannot read the results: %v, %v", err1, err2)
	}
	if !ordered {
		byKey := func(a, b promEntry) int { return strings.Compare(a.key, b.key) }
		slices.SortFunc(we, byKey)
		slices.SortFunc(ge, byKey)
	}
	if len(we) != len(ge) {
		return fmt.Sprintf("%d series, want %d", len(ge), len(we))
	}
	for i := range we {
		if we[i].key != ge[i].key {
			return fmt.Sprintf("series %d is {%s}, want {%s}", i, ge[i].key, we[i].key)
		}
		if len(we[i].points) != len(ge[i].points) {
			return fmt.Sprintf("{%s}: %d points, want %d", we[i].key, len(ge[i].points), len(we[i].points))
		}
		for k, wp := range we[i].points {
			gp := ge[i].points[k]
			if wp[0] != gp[0] {
				return fmt.Sprintf("{%s} point %d at %v, want %v", we[i].key, k, gp[0], wp[0])
			}
			if !sameValue(wp[1], gp[1]) {
				return fmt.Sprintf("{%s} at %v: %v, want %v", we[i].key, wp[0], gp[1], wp[1])
			}
		}
	}
	return ""
}

// sameValue: the same string, or floats within 1e-9 relative (float
// rounding: sums taken in another order), NaN equal to NaN.
func sameValue(a, b any) bool {
	as, ok1 := a.(string)
	bs, ok2 := b.(string)
	if !ok1 || !ok2 {
		return false
	}
	if as == bs {
		return true
	}
	x, err1 := strconv.ParseFloat(as, 64)
	y, err2 := strconv.ParseFloat(bs, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
		return math.IsNaN(x) && math.IsNaN(y)
	}
	return math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y))
}
