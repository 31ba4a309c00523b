package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

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
	code := run([]string{"bench", "ingest", "--duration", "300ms", "--collection", "dur", "--json", srv.url}, &stdout, &stderr)
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
	code = run([]string{"bench", "ingest", "--duration", "50ms", "--scale", "10", "--hours", "6", "--batch", "10", "--json", "embedded"}, &stdout, &stderr)
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
	if code := run([]string{"bench", "ingest", "--duration", "300ms", "--collection", "dur2", srv.url}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "stopped by --duration") {
		t.Fatalf("exit %d: %s\n%s", code, stdout.String(), stderr.String())
	}
	// Stopped before the first batch was even generated: an empty report,
	// not a failed run.
	stdout.Reset()
	if code := run([]string{"bench", "ingest", "--duration", "1ns", "--collection", "dur3", "--json", srv.url}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	reports = nil
	if err := json.Unmarshal(stdout.Bytes(), &reports); err != nil || len(reports) != 1 || !reports[0].StoppedByDuration ||
		reports[0].Points > 50_000 || reports[0].Errors != 0 {
		t.Fatalf("%v: %s", err, stdout.String())
	}
}
