package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/bench"
)

// TestMain runs the test binary as a fake VictoriaMetrics when
// HOURGLASS_TEST_FAKE_VM is set (see startFakeVM).
func TestMain(m *testing.M) {
	if os.Getenv("HOURGLASS_TEST_FAKE_VM") != "" {
		fakeVM()
		return
	}
	os.Exit(m.Run())
}

// fakeVM serves like VictoriaMetrics, as far as "bench ingest" can tell:
// it takes line protocol on /write into its -storageDataPath, answers
// /internal/force_flush by writing a file there and another 300 ms later,
// and tells the lines it took at /count. It prints its port and serves
// until killed.
func fakeVM() {
	var dir string
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "-storageDataPath="); ok {
			dir = v
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "data.lp"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	var lines atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.Write(b)
		lines.Add(int64(bytes.Count(b, []byte{'\n'})))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /internal/force_flush", func(w http.ResponseWriter, r *http.Request) {
		f.Sync()
		os.WriteFile(filepath.Join(dir, "flushed"), make([]byte, 10_000), 0o644)
		// A background merge, a little later.
		time.AfterFunc(100*time.Millisecond, func() {
			os.WriteFile(filepath.Join(dir, "merged"), make([]byte, 200_000), 0o644)
		})
	})
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, lines.Load()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("port", ln.Addr().(*net.TCPAddr).Port)
	http.Serve(ln, mux)
}

// startFakeVM runs a fake VictoriaMetrics on dataDir and returns its
// process and base URL.
func startFakeVM(t *testing.T, dataDir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-storageDataPath="+dataDir, "-retentionPeriod=100y")
	cmd.Env = append(os.Environ(), "HOURGLASS_TEST_FAKE_VM=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	var port int
	if _, serr := fmt.Sscanf(line, "port %d", &port); err != nil || serr != nil {
		t.Fatalf("fake VictoriaMetrics: %q %v %v", line, err, serr)
	}
	return cmd, fmt.Sprintf("http://127.0.0.1:%d", port)
}

// TestBenchIngestLocalPeer loads a local (fake) VictoriaMetrics and checks
// that its process is found from the port, its resident size sampled, and
// its data directory, read off its command line, measured after a flush.
func TestBenchIngestLocalPeer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	dataDir := t.TempDir()
	vm, base := startFakeVM(t, dataDir)
	target := "influx=" + base + "/write"
	html := filepath.Join(t.TempDir(), "run.html")
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "ingest", "--scale", "2", "--hours", "1", "--batch", "100", "--settle", "1s", "--html", html, "--json", target}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var reports []targetReport
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 1 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	r := reports[0]
	resp, err := http.Get(base + "/count")
	if err != nil {
		t.Fatal(err)
	}
	took, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if r.Points != 2*360*10 || string(took) != "720" {
		t.Fatalf("report %+v; the server took %s lines", r, took)
	}
	if r.PID != vm.Process.Pid || !strings.Contains(r.Server, bench.KindVictoriaMetrics) || r.PeakRSSMiB <= 0 || r.VmHWMMiB < r.PeakRSSMiB {
		t.Fatalf("process: %+v (the fake is pid %d)", r, vm.Process.Pid)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "flushed")); err != nil {
		t.Fatalf("no force_flush before measuring: %v", err)
	}
	// The size was taken once it settled: after the merge, which the fake
	// makes 100 ms after the flush, well inside the 1 s settle window.
	if _, err := os.Stat(filepath.Join(dataDir, "merged")); err != nil {
		t.Fatalf("the size was taken before the fake's merge: %v", err)
	}
	disk, err := bench.DirsUsage(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.DataDirs, []string{dataDir}) || r.DiskBytes != disk || r.BytesPerPoint != float64(disk)/float64(r.Points) ||
		r.SettledBytesPerPoint != r.BytesPerPoint || r.SettleSeconds < 1 {
		t.Fatalf("disk: %+v; %s holds %d bytes", r, dataDir, disk)
	}
	// The chart has both a rate and a latency line for the target.
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"rate", "latency"} {
		start := bytes.Index(page, []byte(`<svg id="`+id+`"`))
		if start < 0 {
			t.Fatalf("no %s chart", id)
		}
		var svg struct {
			Lines []struct {
				Target string `xml:"data-target,attr"`
				Points string `xml:"points,attr"`
			} `xml:"polyline"`
		}
		end := bytes.Index(page[start:], []byte("</svg>"))
		if err := xml.Unmarshal(page[start:start+end+len("</svg>")], &svg); err != nil {
			t.Fatal(err)
		}
		if len(svg.Lines) == 0 || svg.Lines[0].Target != target || len(strings.Fields(svg.Lines[0].Points)) == 0 {
			t.Fatalf("%s chart lines %+v", id, svg.Lines)
		}
	}
	// The text report says where the peak RSS comes from.
	stdout.Reset()
	if code := run([]string{"bench", "ingest", "--scale", "1", "--hours", "1", "--settle", "0", target}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), fmt.Sprintf("highest VmRSS sampled of pid %d", vm.Process.Pid)) {
		t.Fatalf("exit %d: %s", code, stdout.String())
	}
}

// TestBenchIngestPeerNotFound loads targets whose process cannot be
// measured: the run succeeds with the columns empty.
func TestBenchIngestPeerNotFound(t *testing.T) {
	var lines atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		lines.Add(int64(bytes.Count(b, []byte{'\n'})))
		w.WriteHeader(http.StatusNoContent)
	})
	// On loopback, this very process: found, sampled, but no data directory.
	srv := httptest.NewServer(h)
	defer srv.Close()
	targets := []string{"influx=" + srv.URL + "/write"}
	// On another address of the machine, if it has one: not loopback.
	if ip := nonLoopbackIP(); ip != nil {
		if ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0")); err == nil {
			other := httptest.NewUnstartedServer(h)
			other.Listener.Close()
			other.Listener = ln
			other.Start()
			defer other.Close()
			targets = append(targets, "influx="+other.URL+"/write")
		}
	}
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"bench", "ingest", "--scale", "1", "--hours", "1", "--json"}, targets...), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var reports []targetReport
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != len(targets) {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if r := reports[0]; runtime.GOOS == "linux" && (r.PID != os.Getpid() || r.PeakRSSMiB <= 0 || r.BytesPerPoint != 0 || r.DiskBytes != 0) {
		t.Fatalf("this process as a target: %+v", r)
	}
	if len(reports) > 1 {
		if r := reports[1]; r.PID != 0 || r.PeakRSSMiB != 0 || r.BytesPerPoint != 0 || r.Points != 3600 {
			t.Fatalf("a target off loopback: %+v", r)
		}
		if !strings.Contains(stderr.String(), "not a loopback address") {
			t.Fatalf("no note: %s", stderr.String())
		}
	}
	if lines.Load() != int64(360*len(targets)) {
		t.Fatalf("%d lines taken", lines.Load())
	}
}

func nonLoopbackIP() net.IP {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	return nil
}

// TestBenchIngestDuration stops loads by time, over HTTP and in process,
// and checks the server holds what the report counts.
func TestBenchIngestDuration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServer(t, t.TempDir())
	var stdout, stderr bytes.Buffer
	// The default workload, 8.64M points: far more than 300 ms of loading.
	start := time.Now()
	code := run([]string{"bench", "ingest", "--duration", "300ms", "--settle", "0", "--collection", "dur", "--json", srv.url}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var reports []targetReport
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 1 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	r := reports[0]
	if !r.StoppedByDuration || r.Points <= 0 || r.Points >= 8_640_000 || r.Points != r.Rows*10 || r.Seconds < 0.3 || r.Errors != 0 {
		t.Fatalf("report %+v", r)
	}
	if el := time.Since(start); el > 60*time.Second {
		t.Fatalf("a 300 ms load took %v", el)
	}
	resp, err := http.Get(srv.url + "/v1/collections/dur")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct{ Count int64 }
	json.NewDecoder(resp.Body).Decode(&info)
	if info.Count != r.Rows {
		t.Fatalf("the server holds %d measurements, the report says %d", info.Count, r.Rows)
	}
	// In process: 2,160 batches of 10 rows, each fsynced.
	stdout.Reset()
	code = run([]string{"bench", "ingest", "--duration", "50ms", "--settle", "0", "--scale", "10", "--hours", "6", "--batch", "10", "--json", "embedded"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("embedded: exit %d: %s", code, stderr.String())
	}
	reports = nil
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 1 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if r := reports[0]; !r.StoppedByDuration || r.Points <= 0 || r.Points >= 216_000 || r.BytesPerPoint <= 0 {
		t.Fatalf("embedded report %+v", r)
	}
	// The text report says so.
	stdout.Reset()
	if code := run([]string{"bench", "ingest", "--duration", "300ms", "--settle", "0", "--collection", "dur2", srv.url}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "stopped by --duration") {
		t.Fatalf("exit %d: %s\n%s", code, stdout.String(), stderr.String())
	}
	// Stopped before the first batch was even generated: an empty report,
	// not a failed run.
	stdout.Reset()
	if code := run([]string{"bench", "ingest", "--duration", "1ns", "--settle", "0", "--collection", "dur3", "--json", srv.url}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	reports = nil
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 1 || !reports[0].StoppedByDuration ||
		reports[0].Points > 50_000 || reports[0].Errors != 0 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
}

// TestBenchIngestOrder loads the embedded store with each --order and
// checks that the report gives its buckets per 1000 rows, the same for
// every order, and that an unknown order is refused.
func TestBenchIngestOrder(t *testing.T) {
	var per1000 []float64
	for _, o := range []string{"asc", "desc", "shuffle"} {
		var stdout, stderr bytes.Buffer
		args := []string{"bench", "ingest", "--order", o, "--settle", "0", "--scale", "3", "--hours", "3", "--batch", "300", "--workers", "1", "--json", "embedded"}
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("--order %s: exit %d: %s", o, code, stderr.String())
		}
		var reports []targetReport
		if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 1 {
			t.Fatalf("%v: %s", err, stdout.String())
		}
		r := reports[0]
		if r.Buckets <= 0 || r.BucketsPer1000 != 1000*float64(r.Buckets)/float64(r.Rows) {
			t.Fatalf("--order %s: report %+v", o, r)
		}
		per1000 = append(per1000, r.BucketsPer1000)
	}
	if per1000[1] != per1000[0] || per1000[2] != per1000[0] {
		t.Fatalf("buckets per 1000 rows asc, desc, shuffle: %v", per1000)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bench", "ingest", "--order", "newest", "embedded"}, &stdout, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "--order") {
		t.Fatalf("--order newest: exit %d: %s", code, stderr.String())
	}
}

// TestBenchIngestTogether loads two servers at once: both loads start
// together (once both are ready to send) and both report their points;
// a target that fails before it is ready does not hold the other, and the
// embedded target is refused.
func TestBenchIngestTogether(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	a, b := startServer(t, t.TempDir()), startServer(t, t.TempDir())
	// b is slow to get ready: its collection is looked up through a proxy
	// that holds the lookup 1.5 s. a's load waits for it.
	bu, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(bu)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/collections/") {
			time.Sleep(1500 * time.Millisecond)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer slow.Close()
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "ingest", "--together", "--duration", "1s", "--settle", "0", "--collection", "tog", "--replace", "--json"}
	if code := run(append(args, a.url, slow.URL), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var reports []targetReport
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 2 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	var starts []time.Time
	for i, r := range reports {
		start, err := time.Parse(time.RFC3339Nano, r.LoadStart)
		if err != nil || r.Points <= 0 || r.Errors != 0 || r.Target != []string{a.url, slow.URL}[i] {
			t.Fatalf("report %d: %v: %+v", i, err, r)
		}
		starts = append(starts, start)
	}
	// One after the other, or not waiting for one another, they would
	// start a second or more apart.
	if d := starts[1].Sub(starts[0]).Abs(); d > 300*time.Millisecond {
		t.Fatalf("the loads started %v apart", d)
	}
	// A target that fails before its load is ready: the other loads, the
	// run fails naming it, and does not wait for it.
	stdout.Reset()
	stderr.Reset()
	begin := time.Now()
	code := run(append(args, a.url, "http://127.0.0.1:1"), &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "target http://127.0.0.1:1") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if el := time.Since(begin); el > 60*time.Second {
		t.Fatalf("the run took %v", el)
	}
	stderr.Reset()
	if code := run(append(args, a.url, "embedded"), &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "--together") {
		t.Fatalf("embedded with --together: exit %d: %s", code, stderr.String())
	}
	// A target's own rollups: one load with a rollup, one without, at
	// once; an unknown option is refused.
	stdout.Reset()
	with, without := a.url+"#rollups=1", b.url+"#rollups=0"
	if code := run(append(slices.Clone(args), "--collection", "tog2", with, without), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	reports = nil
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 2 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if r := reports[0]; r.Target != with || r.RollupCatchUpSeconds <= 0 || r.Points <= 0 {
		t.Fatalf("the target with a rollup: %+v", r)
	}
	if r := reports[1]; r.Target != without || r.RollupCatchUpSeconds != 0 || r.Points <= 0 {
		t.Fatalf("the target without: %+v", r)
	}
	for base, want := range map[string]int{a.url: http.StatusOK, b.url: http.StatusNotFound} {
		resp, err := http.Get(base + "/v1/collections/tog2_1m")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("the rollup tog2_1m on %s: HTTP %d, want %d", base, resp.StatusCode, want)
		}
	}
	stderr.Reset()
	if code := run(append(slices.Clone(args), a.url+"#nope=1"), &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "want rollups=N") {
		t.Fatalf("an unknown target option: exit %d: %s", code, stderr.String())
	}
}
