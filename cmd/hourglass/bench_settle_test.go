package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/bench"
)

// TestBenchIngestSettled loads a real server and the embedded engine and
// checks that both report a settled size and CPU time: the server's
// process found from its port, its data directory read off its command
// line, the size taken once it stayed the same for --settle.
func TestBenchIngestSettled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dataDir := t.TempDir()
	srv := startServer(t, dataDir)
	var stdout, stderr bytes.Buffer
	// 200 sensors, 2 fields, an hour: 144,000 points.
	args := []string{"bench", "ingest", "--workload", "iot", "--sensors", "200", "--hours", "1", "--settle", "1s", "--json", srv.url}
	start := time.Now()
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	took := time.Since(start)
	var reports []targetReport
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 1 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	r := reports[0]
	if r.Points != 144_000 || r.Errors != 0 {
		t.Fatalf("report %+v", r)
	}
	if r.PID != srv.cmd.Process.Pid || !strings.Contains(r.Server, bench.KindHourglass) || !slices.Equal(r.DataDirs, []string{dataDir}) {
		t.Fatalf("process %+v; the server is pid %d on %s", r, srv.cmd.Process.Pid, dataDir)
	}
	// The collection's size as before, and the directory's, settled.
	if r.StorageBytes <= 0 || r.BytesPerPoint != float64(r.StorageBytes)/float64(r.Points) ||
		r.DiskBytes <= 0 || r.SettledBytesPerPoint != float64(r.DiskBytes)/float64(r.Points) || r.SettleTimedOut {
		t.Fatalf("sizes %+v", r)
	}
	// Settled: the wait was at least --settle, and the size is about what
	// the directory holds now (a background pass may have written since).
	if r.SettleSeconds < 1 || r.SettleSeconds > took.Seconds() {
		t.Fatalf("settled %.2f s after the load, the run took %v", r.SettleSeconds, took)
	}
	if now, err := bench.DirsUsage(dataDir); err != nil || now < r.DiskBytes*9/10 || now > r.DiskBytes*11/10 {
		t.Fatalf("%s holds %d bytes now (%v), the report %d", dataDir, now, err, r.DiskBytes)
	}
	// CPU of the server during the load, apart from the compaction's.
	if r.CPUSeconds <= 0 || r.CPUSeconds > r.Seconds*float64(runtime.NumCPU())+0.1 ||
		r.CPUSecondsPerMPoint != r.CPUSeconds/float64(r.Points)*1e6 || r.SettleCPUSeconds < 0 {
		t.Fatalf("CPU %+v", r)
	}

	// The text report has the columns, and the embedded target fills them
	// too.
	stdout.Reset()
	args = []string{"bench", "ingest", "--scale", "20", "--hours", "2", "--settle", "300ms", "--collection", "text", srv.url, "embedded"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if !strings.Contains(lines[0], "settled bytes/point") || !strings.Contains(lines[0], "CPU s/Mpoint") {
		t.Fatalf("header %q", lines[0])
	}
	for _, target := range []string{srv.url, "embedded"} {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), target+" ") })
		if i < 0 {
			t.Fatalf("no row for %s:\n%s", target, stdout.String())
		}
		f := strings.Fields(lines[i])
		for _, col := range f[len(f)-5:] { // bytes/point ... CPU s/Mpoint
			if col == "-" {
				t.Fatalf("a column left empty for %s:\n%s", target, stdout.String())
			}
		}
		if !strings.Contains(stdout.String(), target+": CPU ") {
			t.Fatalf("no CPU line for %s:\n%s", target, stdout.String())
		}
	}
	stdout.Reset()
	args = []string{"bench", "ingest", "--scale", "20", "--hours", "2", "--settle", "300ms", "--json", "embedded"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	reports = nil
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 1 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if r := reports[0]; r.DiskBytes <= 0 || r.SettledBytesPerPoint != float64(r.DiskBytes)/float64(r.Points) || r.SettleSeconds < 0.3 ||
		r.CPUSeconds <= 0 || r.CPUSecondsPerMPoint <= 0 || r.PeakRSSMiB <= 0 || r.BytesPerPoint <= 0 {
		t.Fatalf("embedded %+v", r)
	}
}

// TestBenchIngestSettledDefaultDir finds the data directory of a server
// started without --data-dir: HOURGLASS_DATA_DIR in its environment,
// relative to its working directory.
func TestBenchIngestSettledDefaultDir(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--mongo-listen", "127.0.0.1:0", "--log-format", "json")
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "HOURGLASS_DATA_DIR=from-env")
	url := startCommand(t, cmd)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bench", "ingest", "--scale", "2", "--hours", "1", "--settle", "0", "--json", url}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var reports []targetReport
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 1 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	want := filepath.Join(cwd, "from-env")
	if r := reports[0]; !slices.Equal(r.DataDirs, []string{want}) || r.DiskBytes <= 0 {
		t.Fatalf("report %+v, want the data directory %s", r, want)
	}
}

// startCommand starts a "hourglass serve" command made by the caller and
// returns its URL once it serves; the process is killed at the test's end.
func startCommand(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.StderrPipe()
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
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "hourglass serving" {
				addr <- rec["listen"].(string)
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("the server exited at start")
		}
		return "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not start")
	}
	return ""
}
