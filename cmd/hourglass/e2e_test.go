package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildBinary builds the hourglass binary once per test run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "hourglass-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hourglass")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// server is a running hourglass process.
type server struct {
	cmd  *exec.Cmd
	url  string
	logs *bytes.Buffer
	mu   *sync.Mutex
	done chan error
}

func startServer(t *testing.T, dataDir string, extra ...string) *server {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--mongo-listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, logs: new(bytes.Buffer), mu: new(sync.Mutex), done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line + "\n")
			s.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "hourglass serving" {
				addr <- rec["listen"].(string)
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a
	case err := <-s.done:
		t.Fatalf("server exited at start: %v\n%s", err, s.log())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("server did not start:\n%s", s.log())
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

func (s *server) post(t *testing.T, path, ctype, body string) (int, []byte, error) {
	req, err := http.NewRequest("POST", s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (s *server) put(t *testing.T, path, body string) int {
	req, _ := http.NewRequest("PUT", s.url+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestKillAndRestart ingests over HTTP from several clients, kills the
// server with SIGKILL while writes are in flight, restarts it, and finds
// every acknowledged measurement, and nothing that was never sent.
func TestKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	s := startServer(t, dir)
	if st := s.put(t, "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "sensor"}}`); st != 201 {
		t.Fatalf("create: %d", st)
	}
	var mu sync.Mutex
	acked := map[string]bool{} // "sensor/seq"
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// The kill comes once this many measurements are acknowledged, with
	// the writers still sending: a condition, not a time, so that a slow
	// machine still kills the server in the middle of the ingest.
	const killAfter = 1000
	enough := make(chan struct{})
	var enoughOnce sync.Once
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for b := 0; ; b++ {
				select {
				case <-stop:
					return
				default:
				}
				var body strings.Builder
				var keys []string
				for i := 0; i < 50; i++ {
					seq := b*50 + i
					ts := base.Add(time.Duration(seq) * time.Second)
					fmt.Fprintf(&body, `{"t": {"$date": %q}, "sensor": "w%d", "seq": %d}`+"\n", ts.Format(time.RFC3339Nano), w, seq)
					keys = append(keys, fmt.Sprintf("w%d/%d", w, seq))
				}
				st, _, err := s.post(t, "/v1/collections/m/documents", "application/x-ndjson", body.String())
				if err != nil {
					return // the server is gone
				}
				if st != 200 {
					t.Errorf("insert status %d", st)
					return
				}
				mu.Lock()
				for _, k := range keys {
					acked[k] = true
				}
				if len(acked) >= killAfter {
					enoughOnce.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}(w)
	}
	select {
	case <-enough:
	case <-s.done:
		t.Fatalf("server exited during the ingest:\n%s", s.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("fewer than %d measurements acknowledged in 60 s:\n%s", killAfter, s.log())
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
	close(stop)
	wg.Wait()
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if n == 0 {
		t.Fatalf("nothing was acknowledged before the kill:\n%s", s.log())
	}

	s2 := startServer(t, dir)
	st, body, err := s2.post(t, "/v1/collections/m/find", "application/json", `{"projection": {"sensor": 1, "seq": 1}}`)
	if err != nil || st != 200 {
		t.Fatalf("find after restart: %d %v %s", st, err, body)
	}
	var rows []struct {
		Sensor string `json:"sensor"`
		Seq    int    `json:"seq"`
	}
	if err := json.Unmarshal(body, &rows); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, r := range rows {
		k := fmt.Sprintf("%s/%d", r.Sensor, r.Seq)
		if found[k] {
			t.Fatalf("measurement %s found twice", k)
		}
		found[k] = true
	}
	for k := range acked {
		if !found[k] {
			t.Fatalf("acknowledged measurement %s lost (%d acknowledged, %d found)", k, len(acked), len(found))
		}
	}
	// Unacknowledged batches may or may not be there, but whole: a batch is
	// 50 measurements, logged as one record.
	perBatch := map[string]int{}
	for k := range found {
		var w, seq int
		fmt.Sscanf(k, "w%d/%d", &w, &seq)
		perBatch[fmt.Sprintf("%d/%d", w, seq/50)]++
	}
	for b, c := range perBatch {
		if c != 50 {
			t.Fatalf("batch %s is partly visible: %d of 50", b, c)
		}
	}
	t.Logf("%d acknowledged, %d found after kill -9 and restart", len(acked), len(found))

	// A clean stop: SIGTERM drains and closes storage.
	if err := s2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s2.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, s2.log())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("server did not stop after SIGTERM")
	}
	if !strings.Contains(s2.log(), "storage closed") {
		t.Fatalf("no clean close in the log:\n%s", s2.log())
	}
}

func TestHelpAndFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "serve") {
		t.Fatalf("--help: %d %s", code, out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"serve", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("serve --help: exit %d", code)
	}
	for _, want := range []string{"--listen", "HOURGLASS_LISTEN", "--data-dir", "HOURGLASS_DATA_DIR", "--auth-token", "--insecure", "--max-body", "--log-format", "127.0.0.1:7700", "./hourglass-data"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("serve --help lacks %q:\n%s", want, errOut.String())
		}
	}
	errOut.Reset()
	if code := run([]string{"serve", "--bogus"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown flag: exit %d", code)
	}
	errOut.Reset()
	if code := run([]string{"serve", "--listen", "0.0.0.0:0", "--data-dir", t.TempDir()}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "--auth-token") {
		t.Fatalf("non-loopback without a token: exit %d: %s", code, errOut.String())
	}
	t.Setenv("HOURGLASS_MAX_BODY", "lots")
	errOut.Reset()
	if code := run([]string{"serve"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "HOURGLASS_MAX_BODY") {
		t.Fatalf("bad environment value: exit %d: %s", code, errOut.String())
	}
	out.Reset()
	if code := run([]string{"version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "hourglass ") {
		t.Fatalf("version: %d %q", code, out.String())
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "64MiB": 64 << 20, "512KiB": 512 << 10, "1GB": 1e9, "2G": 2 << 30} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("%q: %d %v, want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "-1", "0", "1.5MiB", "MiB", "99999999999PB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// TestBenchIngest runs "hourglass bench ingest" against a real server and
// the embedded engine, and checks the report against what the server holds.
func TestBenchIngest(t *testing.T) {
	srv := startServer(t, t.TempDir())
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "ingest", "--settle", "0", "--scale", "3", "--hours", "1", "--batch", "200", "--json", srv.url, "embedded"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var reports []targetReport
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, stdout.String())
	}
	if len(reports) != 2 {
		t.Fatalf("%d reports", len(reports))
	}
	for _, r := range reports {
		if r.Points != 3*360*10 || r.Errors != 0 || r.PointsPerSecond <= 0 || r.BytesPerPoint <= 0 {
			t.Fatalf("report %+v", r)
		}
	}
	if reports[0].P99Millis < reports[0].P50Millis || reports[0].MBPerSecond <= 0 || reports[0].PeakRSSMiB <= 0 {
		t.Fatalf("HTTP report %+v", reports[0])
	}
	if !strings.Contains(stderr.String(), "rows (100%)") {
		t.Fatalf("no progress lines: %s", stderr.String())
	}
	// The server holds what the report says.
	resp, err := http.Get(srv.url + "/v1/collections/bench_cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct{ Count int64 }
	json.NewDecoder(resp.Body).Decode(&info)
	if info.Count != 3*360 {
		t.Fatalf("server holds %d measurements, want %d", info.Count, 3*360)
	}
	// The harness's queries run on what was loaded.
	stdout.Reset()
	if code := run([]string{"bench", "query", "--runs", "3", "--json", srv.url}, &stdout, &stderr); code != 0 {
		t.Fatalf("bench query: exit %d: %s", code, stderr.String())
	}
	var qs []queryReport
	if err := json.Unmarshal(stdout.Bytes(), &qs); err != nil || len(qs) != 7 || qs[0].Query != "q1" || qs[1].Runs != 3 || qs[1].MedianMillis <= 0 {
		t.Fatalf("query report %v: %s", err, stdout.String())
	}
	// The other workloads, small, into other collections; the iot load
	// with three query clients reading it meanwhile (in batches of 200
	// rows, one writer, so that the load lasts long enough for them to
	// start: in batches of 5000 it can end first on an idle machine).
	for _, wl := range [][]string{{"--workload", "iot", "--sensors", "50", "--hours", "4", "--queries", "3", "--batch", "200", "--workers", "1", "--collection", "iot"},
		{"--workload", "high-cardinality", "--sensors", "300", "--pregenerate", "16MiB", "--collection", "hc"}} {
		stdout.Reset()
		if code := run(append([]string{"bench", "ingest", "--settle", "0", "--json", srv.url}, wl...), &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d: %s", wl, code, stderr.String())
		}
		var rs []targetReport
		if err := json.Unmarshal(stdout.Bytes(), &rs); err != nil || len(rs) != 1 || rs[0].Errors != 0 {
			t.Fatalf("%v: %v %s", wl, err, stdout.String())
		}
		if want := map[string]int64{"iot": 50 * 360 * 4 * 2, "hc": 300 * 10}[wl[len(wl)-1]]; rs[0].Points != want {
			t.Fatalf("%v: %d points, want %d", wl, rs[0].Points, want)
		}
		if slices.Contains(wl, "--pregenerate") && !strings.Contains(stderr.String(), "making every request body before the load") {
			t.Fatalf("%v: no word of the bodies made first: %s", wl, stderr.String())
		}
		if slices.Contains(wl, "--queries") {
			runs := 0
			for _, q := range rs[0].Queries {
				runs += q.Runs
				if q.Errors != 0 {
					t.Errorf("%v: query %s: %d errors, first %q", wl, q.Name, q.Errors, q.FirstError)
				}
			}
			if len(rs[0].Queries) != 5 || runs == 0 {
				t.Fatalf("%v: queries during the load: %+v", wl, rs[0].Queries)
			}
		}
	}
	// A second run refuses to load into the same collection without --replace.
	if code := run([]string{"bench", "ingest", "--settle", "0", "--scale", "1", "--hours", "1", srv.url}, &stdout, &stderr); code != 1 {
		t.Fatalf("second run without --replace: exit %d", code)
	}
}

// TestQueryLimitFlags checks that --query-memory and --aggregate-max-cells
// reach the engine: with tiny limits, a find over 50 series answers 400
// with code 292 naming the limit, and an aggregate of 50 cells 400 with
// code 146; with the defaults both succeed.
func TestQueryLimitFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the binary")
	}
	var docs strings.Builder
	docs.WriteString("[")
	for i := range 50 {
		if i > 0 {
			docs.WriteString(",")
		}
		fmt.Fprintf(&docs, `{"t": {"$date": "2024-05-01T12:%02d:00Z"}, "m": "s%d", "v": %d}`, i, i, i)
	}
	docs.WriteString("]")
	for _, c := range []struct {
		flags      []string
		find, aggr int
		findCode   string
		aggrCode   string
	}{
		{nil, 200, 200, "", ""},
		{[]string{"--query-memory", "1KiB"}, 400, 400, `"code":292`, `"code":292`},
		{[]string{"--aggregate-max-cells", "10"}, 200, 400, "", `"code":146`},
	} {
		s := startServer(t, t.TempDir(), c.flags...)
		if st := s.put(t, "/v1/collections/s", `{"timeseries": {"timeField": "t", "metaField": "m"}}`); st != 201 {
			t.Fatalf("create: %d", st)
		}
		if st, b, err := s.post(t, "/v1/collections/s/documents", "application/json", docs.String()); err != nil || st != 200 {
			t.Fatalf("insert: %d %v %s", st, err, b)
		}
		// A find in time order plans every series at once (a find by
		// series takes them in chunks that fit any limit).
		st, b, err := s.post(t, "/v1/collections/s/find", "application/json", `{"sort": {"t": 1}}`)
		if err != nil || st != c.find || !strings.Contains(string(b), c.findCode) || c.findCode != "" && !strings.Contains(string(b), "1024") {
			t.Fatalf("%v: find: %d %v %.300s", c.flags, st, err, b)
		}
		st, b, err = s.post(t, "/v1/collections/s/aggregate", "application/json", `{"window": "1m", "funcs": ["count"], "fields": ["v"]}`)
		if err != nil || st != c.aggr || !strings.Contains(string(b), c.aggrCode) {
			t.Fatalf("%v: aggregate: %d %v %.300s", c.flags, st, err, b)
		}
		s.cmd.Process.Kill()
		<-s.done
	}
}

// TestDiskReserveFlag checks that --disk-reserve reaches the engine: a
// store restarted with a reserve above the free space of its filesystem
// opens read-only (writes 507 OutOfDiskSpace, reads answered), and with 0
// the check is off.
func TestDiskReserveFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the binary")
	}
	dir := t.TempDir()
	s := startServer(t, dir, "--disk-reserve", "0")
	if got := s.put(t, "/v1/collections/s", `{"timeseries": {"timeField": "t"}}`); got != 201 {
		t.Fatalf("--disk-reserve 0: create answered %d", got)
	}
	if st, b, err := s.post(t, "/v1/collections/s/documents", "application/json", `[{"t": {"$date": "2024-05-01T12:00:00Z"}, "v": 1}]`); err != nil || st != 200 {
		t.Fatalf("--disk-reserve 0: insert: %d %v %s", st, err, b)
	}
	s.cmd.Process.Kill()
	<-s.done

	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	over := strconv.FormatInt(int64(fs.Bavail)*int64(fs.Bsize)+1<<30, 10)
	s = startServer(t, dir, "--disk-reserve", over)
	defer func() {
		s.cmd.Process.Kill()
		<-s.done
	}()
	if st, b, err := s.post(t, "/v1/collections/s/documents", "application/json", `[{"t": {"$date": "2024-05-01T12:01:00Z"}, "v": 2}]`); err != nil || st != 507 || !strings.Contains(string(b), "14031") {
		t.Errorf("--disk-reserve %s: insert answered %d %v %.300s, want 507 with code 14031", over, st, err, b)
	}
	if got := s.put(t, "/v1/collections/other", `{}`); got != 507 {
		t.Errorf("--disk-reserve %s: create answered %d, want 507", over, got)
	}
	if st, b, err := s.post(t, "/v1/collections/s/find", "application/json", `{}`); err != nil || st != 200 || !strings.Contains(string(b), `"v":1`) {
		t.Errorf("--disk-reserve %s: find answered %d %v %.300s, want the stored measurement", over, st, err, b)
	}
}

// TestBenchIngestRemoteWrite loads the iot workload as Prometheus remote
// write: every sample arrives as a measurement of its series, and PromQL
// reads them back under the names line protocol's mapping gives.
func TestBenchIngestRemoteWrite(t *testing.T) {
	srv := startServer(t, t.TempDir())
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "ingest", "--settle", "0", "--format", "prom", "--workload", "iot", "--sensors", "20", "--hours", "1", "--json", srv.url}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var reports []targetReport
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 1 {
		t.Fatalf("report %v: %s", err, stdout.String())
	}
	const samples = 20 * 360 * 2
	if r := reports[0]; r.Points != samples || r.Errors != 0 || r.BytesPerPoint <= 0 {
		t.Fatalf("report %+v", r)
	}
	resp, err := http.Get(srv.url + "/v1/collections/bench_cpu")
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Count int64 }
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if info.Count != samples {
		t.Fatalf("server holds %d measurements, want %d", info.Count, samples)
	}
	resp, err = http.Get(srv.url + "/api/v1/query?collection=bench_cpu&time=1704070800&query=" + url.QueryEscape(`count(count_over_time(iot_value[2h]))`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"20"`) {
		t.Fatalf("count of iot_value series: %s", body)
	}
	// A remote= target takes the same requests (the server's own endpoint
	// here); line protocol does not go there.
	stdout.Reset()
	if code := run([]string{"bench", "ingest", "--settle", "0", "--format", "prom", "--workload", "iot", "--sensors", "5", "--hours", "1", "--json",
		"remote=" + srv.url + "/api/v1/write?collection=other"}, &stdout, &stderr); code != 0 {
		t.Fatalf("remote=: exit %d: %s", code, stderr.String())
	}
	if code := run([]string{"bench", "ingest", "--settle", "0", "--workload", "iot", "--sensors", "5", "--hours", "1", "remote=" + srv.url + "/api/v1/write"}, &stdout, &stderr); code == 0 {
		t.Fatal("remote= without --format prom ran")
	}
}
