package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/timeseries"
)

// requirePrometheus returns the prometheus binary on PATH, and fails the
// test (skips it under -short) when there is none.
func requirePrometheus(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("prometheus")
	if err == nil {
		return path
	}
	const what = "the prometheus server: run `make test`, which installs Debian's prometheus, or `apt-get install prometheus`"
	if testing.Short() {
		t.Skipf("-short: skipping; missing: %s (%v)", what, err)
	}
	t.Fatalf("this test needs %s (%v); `go test -short` skips it", what, err)
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPrometheusRemoteWrite runs Prometheus scraping itself every second
// with remote_write to a Hourglass server that requires a token, and
// waits for its own series (up, prometheus_build_info) to arrive with
// their labels, then for the staleness marker that ends up once the
// scrape job is gone.
func TestPrometheusRemoteWrite(t *testing.T) {
	bin := requirePrometheus(t)
	const token = "prom-e2e-token"
	_, hs := serveHourglass(t, token)

	dir := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['127.0.0.1:%d', 'localhost:%d']
remote_write:
  - url: %s/api/v1/write
    authorization:
      credentials: %s
    queue_config:
      batch_send_deadline: 1s
`, port, port, hs.URL, token)
	cmd := startPrometheus(t, bin, dir, port, cfg)

	find := func(filter string) []map[string]any {
		req, _ := http.NewRequest("POST", hs.URL+"/v1/collections/prometheus/find",
			strings.NewReader(`{"filter": `+filter+`, "sort": {"t": 1}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusNotFound {
			return nil // no remote write yet
		}
		var rows []map[string]any
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatalf("find: %d %s", resp.StatusCode, b)
		}
		return rows
	}
	var up, build []map[string]any
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		up = find(fmt.Sprintf(`{"labels.__name__": "up", "labels.job": "prometheus", "labels.instance": "127.0.0.1:%d"}`, port))
		build = find(`{"labels.__name__": "prometheus_build_info"}`)
		if len(up) >= 2 && len(build) >= 1 {
			break
		}
	}
	if len(up) < 2 || len(build) < 1 {
		t.Fatalf("after 90s: %d samples of up, %d of prometheus_build_info", len(up), len(build))
	}
	labels := up[0]["labels"].(map[string]any)
	if labels["instance"] != fmt.Sprintf("127.0.0.1:%d", port) || up[0]["value"] != 1.0 {
		t.Fatalf("up: %v", up[0])
	}
	if bl := build[0]["labels"].(map[string]any); bl["version"] == nil || bl["goversion"] == nil {
		t.Fatalf("prometheus_build_info: %v", build[0])
	}
	// One sample a scrape: timestamps a second apart, in order.
	t0, _ := time.Parse(time.RFC3339Nano, up[0]["t"].(map[string]any)["$date"].(string))
	t1, _ := time.Parse(time.RFC3339Nano, up[1]["t"].(map[string]any)["$date"].(string))
	if d := t1.Sub(t0); d < 500*time.Millisecond || d > 3*time.Second {
		t.Fatalf("up samples %v apart: %v", d, up[:2])
	}
	t.Logf("%d samples of up, %d of prometheus_build_info", len(up), len(build))

	// Without its second target (a reload), Prometheus ends that target's
	// series with staleness markers, which arrive bit for bit.
	oneTarget := strings.Replace(cfg, fmt.Sprintf(", 'localhost:%d'", port), "", 1)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(oneTarget), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var bits []uint64
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if bits = upBits(t, hs.URL, token, fmt.Sprintf("localhost:%d", port)); len(bits) > 0 && bits[len(bits)-1] == staleNaN {
			break
		}
	}
	if len(bits) == 0 || bits[len(bits)-1] != staleNaN {
		t.Fatalf("no staleness marker ends up of the removed target after the reload: %x", bits)
	}
}

// staleNaN is Prometheus' staleness marker (model/value.StaleNaN).
const staleNaN = 0x7ff0000000000002

// upBits returns the bits of the values of up{instance=instance} in time
// order, read as Arrow, which keeps them.
func upBits(t *testing.T, url, token, instance string) []uint64 {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/collections/prometheus/find",
		strings.NewReader(fmt.Sprintf(`{"filter": {"labels.__name__": "up", "labels.instance": %q}, "sort": {"t": 1}}`, instance)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.apache.arrow.stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("find as Arrow: %d %s", resp.StatusCode, b)
	}
	rd, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var bits []uint64
	for rd.Next() {
		col := rd.Record().Column(rd.Schema().FieldIndices("value")[0]).(*array.Float64)
		for j := 0; j < col.Len(); j++ {
			bits = append(bits, math.Float64bits(col.Value(j)))
		}
	}
	return bits
}

// TestPrometheusRemoteRead runs Prometheus with remote_read from a
// Hourglass server that requires a token and holds samples Prometheus
// never scraped: PromQL through Prometheus' own HTTP API (a range vector,
// a regex matcher, an aggregation) returns exactly them.
func TestPrometheusRemoteRead(t *testing.T) {
	bin := requirePrometheus(t)
	const token = "prom-e2e-token"
	_, hs := serveHourglass(t, token)

	// Two series of 5 samples, 15 s apart, ending a minute ago.
	now := time.Now().Truncate(time.Second)
	end := now.Add(-time.Minute).UnixMilli()
	var wreq prompb.WriteRequest
	for i, inst := range []string{"a", "b"} {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "hourglass_e2e"}, {Name: "instance", Value: inst}, {Name: "job", Value: "e2e"}}}
		for k := range 5 {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: end - int64(4-k)*15000, Value: float64(10*(i+1) + k)})
		}
		wreq.Timeseries = append(wreq.Timeseries, ts)
	}
	pb, err := wreq.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", hs.URL+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, pb)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Encoding", "snappy")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("remote write: %d", resp.StatusCode)
	}

	dir := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
remote_read:
  - url: %s/api/v1/read
    read_recent: true
    authorization:
      credentials: %s
`, hs.URL, token)
	startPrometheus(t, bin, dir, port, cfg)
	promURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	ready := false
	for deadline := time.Now().Add(60 * time.Second); !ready && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(promURL + "/-/ready"); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
	}
	if !ready {
		t.Fatal("prometheus not ready after 60s")
	}

	type series struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
		Value  [2]any            `json:"value"`
	}
	query := func(q string) []series {
		t.Helper()
		u := fmt.Sprintf("%s/api/v1/query?query=%s&time=%d", promURL, url.QueryEscape(q), now.Unix())
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var r struct {
			Status string `json:"status"`
			Data   struct {
				Result []series `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &r); err != nil || r.Status != "success" {
			t.Fatalf("%s: %d %s", q, resp.StatusCode, b)
		}
		return r.Data.Result
	}

	// Every sample of both series, through a range vector.
	got := query(`hourglass_e2e[5m]`)
	if len(got) != 2 {
		t.Fatalf("hourglass_e2e[5m]: %v", got)
	}
	for i, s := range got {
		inst := []string{"a", "b"}[i]
		if s.Metric["instance"] != inst || s.Metric["job"] != "e2e" || s.Metric["__name__"] != "hourglass_e2e" {
			t.Fatalf("series %d: %v", i, s.Metric)
		}
		if len(s.Values) != 5 {
			t.Fatalf("series %s: %d samples: %v", inst, len(s.Values), s.Values)
		}
		for k, v := range s.Values {
			wantT := float64(end-int64(4-k)*15000) / 1000
			wantV := fmt.Sprint(10*(i+1) + k)
			if v[0].(float64) != wantT || v[1].(string) != wantV {
				t.Fatalf("series %s sample %d: %v, want [%v %s]", inst, k, v, wantT, wantV)
			}
		}
	}
	// A regex matcher, and an aggregation over the last samples.
	if got := query(`hourglass_e2e{instance=~"b|c"}`); len(got) != 1 || got[0].Metric["instance"] != "b" || got[0].Value[1] != "24" {
		t.Fatalf(`hourglass_e2e{instance=~"b|c"}: %v`, got)
	}
	if got := query(`sum(hourglass_e2e)`); len(got) != 1 || got[0].Value[1] != "38" {
		t.Fatalf(`sum(hourglass_e2e): %v`, got)
	}
	if got := query(`hourglass_e2e{instance="a", job!="e2e"}`); len(got) != 0 {
		t.Fatalf(`hourglass_e2e{job!="e2e"}: %v`, got)
	}
}

// startPrometheus runs Prometheus (bin) with configuration cfg and its
// data in dir, its web API on port, until the test ends; the test's log
// gets Prometheus' when it fails. It returns the running command.
func startPrometheus(t *testing.T, bin, dir string, port int, cfg string) *exec.Cmd {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	return cmd
}

// serveHourglass serves a Hourglass store of its own, with auth token,
// over a loopback HTTP server; both are closed when the test ends.
func serveHourglass(t *testing.T, token string) (*timeseries.DB, *httptest.Server) {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{DB: db, AuthToken: token})
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
	return db, hs
}
