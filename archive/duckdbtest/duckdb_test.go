package duckdbtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// node finds node and the installed package, or fails the test (skips it
// with -short), naming what to install.
func node(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("DuckDB's test skipped with -short")
	}
	bin, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run `make deps` (Debian: apt-get install nodejs npm)")
	}
	if _, err := os.Stat("node_modules/@duckdb/node-api/package.json"); err != nil {
		t.Fatal("@duckdb/node-api is not installed: run `make deps` (npm ci --prefix archive/duckdbtest)")
	}
	return bin
}

func do(t *testing.T, url, method, path, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b
}

type sensorAgg struct {
	Sensor string  `json:"sensor"`
	N      string  `json:"n"` // BIGINT, as DuckDB's JSON rows give it
	Avg    float64 `json:"avg"`
}

// DuckDB reads the archive where it lies, and its count and average per
// sensor equal Hourglass' aggregate of the same data before it expired.
func TestDuckDBReadsArchive(t *testing.T) {
	nodeBin := node(t)
	arch := t.TempDir()
	st, err := objstore.Open(t.Context(), "file://"+arch, objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true, Archive: st, CheckpointInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mon, err := ttl.New(ttl.Options{Store: db, Disabled: true}) // passes on demand only
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	srv, err := api.New(api.Options{DB: db, TTL: mon})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		db.Close()
	}()
	u := hs.URL

	do(t, u, "PUT", "/v1/collections/weather", `{"timeseries": {"timeField": "t", "metaField": "sensor", "granularity": "minutes"}}`)
	// Three days of readings, ten days ago, at random times: integers
	// for one sensor, doubles for the others.
	start := time.Now().UTC().Add(-10 * 24 * time.Hour).Truncate(time.Hour)
	rng := rand.New(rand.NewPCG(1, 2))
	var body bytes.Buffer
	n := 0
	for _, s := range []string{"north", "south", "east"} {
		for i := 0; i < 3000; i++ {
			at := start.Add(time.Duration(rng.Int64N(int64(72 * time.Hour)))).Truncate(time.Millisecond)
			var v any = math.Round(rng.Float64()*1000) / 8
			if s == "east" {
				v = rng.IntN(100)
			}
			doc, _ := json.Marshal(map[string]any{"t": map[string]string{"$date": at.Format(time.RFC3339Nano)}, "sensor": s, "v": v})
			body.Write(doc)
			body.WriteByte('\n')
			n++
		}
	}
	req, _ := http.NewRequest("POST", u+"/v1/collections/weather/documents", &body)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("insert: %v %v", err, resp)
	}
	resp.Body.Close()

	// Hourglass' own aggregate, while the data is live.
	agg := do(t, u, "POST", "/v1/collections/weather/aggregate",
		`{"window": "30d", "groupBy": "sensor", "fields": ["v"], "funcs": ["count", "avg"]}`)
	var rows []map[string]any
	if err := json.Unmarshal(agg, &rows); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{}
	for _, r := range rows {
		s := r["sensor"].(string)
		w := want[s]
		c, a := r["v_count"].(float64), r["v_avg"].(float64)
		// Windows of 30 days may cut the range in two: combine them.
		want[s] = [2]float64{w[0] + c, (w[1]*w[0] + a*c) / (w[0] + c)}
	}

	// Expire with archive; checkpoints seal and store the idle buckets,
	// then one TTL pass moves them.
	do(t, u, "PATCH", "/v1/collections/weather", `{"expireAfterSeconds": 86400, "archive": true}`)
	for i := 0; i < 3; i++ {
		time.Sleep(300 * time.Millisecond)
		do(t, u, "POST", "/v1/collections/weather/compact", "")
	}
	do(t, u, "POST", "/v1/admin/ttl/run", "")
	var info struct {
		Count   int64 `json:"count"`
		Archive struct {
			Files, Bytes, Measurements int64
		} `json:"archive"`
	}
	if err := json.Unmarshal(do(t, u, "GET", "/v1/collections/weather", ""), &info); err != nil {
		t.Fatal(err)
	}
	if info.Count != 0 || info.Archive.Measurements != int64(n) || info.Archive.Files < 3 || info.Archive.Bytes <= 0 {
		t.Fatalf("after the pass: %+v, want every one of %d measurements archived, in a file per day", info, n)
	}

	// Hourglass reads the archive back: the same aggregate, and every
	// measurement, with "archive": true; none without.
	again := do(t, u, "POST", "/v1/collections/weather/aggregate",
		`{"window": "30d", "groupBy": "sensor", "fields": ["v"], "funcs": ["count", "avg"], "archive": true}`)
	if !bytes.Equal(again, agg) {
		t.Fatalf("aggregate with the archive:\n%s\nwant, as before it expired:\n%s", again, agg)
	}
	nd := do(t, u, "POST", "/v1/collections/weather/find", `{"archive": true}`)
	if lines := bytes.Count(nd, []byte(`"sensor"`)); lines != n {
		t.Fatalf("find with the archive: %d measurements, want %d", lines, n)
	}
	if live := do(t, u, "POST", "/v1/collections/weather/find", `{}`); strings.TrimSpace(strings.ReplaceAll(string(live), "\n", "")) != "[]" {
		t.Fatalf("find without the archive: %.200s", live)
	}

	cmd := exec.Command(nodeBin, "testdata/per_sensor.mjs", filepath.ToSlash(arch))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, stderr.String())
	}
	got := map[string]sensorAgg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var a sensorAgg
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("duckdb printed %q: %v", sc.Text(), err)
		}
		got[a.Sensor] = a
	}
	if len(got) != len(want) {
		t.Fatalf("duckdb sees sensors %v, Hourglass %v", got, want)
	}
	for s, w := range want {
		g := got[s]
		if g.N != fmt.Sprint(int64(w[0])) || math.Abs(g.Avg-w[1]) > 1e-9*math.Abs(w[1]) {
			t.Errorf("sensor %s: duckdb count %s avg %v, Hourglass count %v avg %v", s, g.N, g.Avg, w[0], w[1])
		}
	}

	// Restore, as docs/archive.md says: DuckDB writes the archived days
	// as NDJSON, which the documents endpoint takes back.
	restored := filepath.Join(t.TempDir(), "restore.ndjson")
	from, to := start.Format(time.DateOnly), start.Add(72*time.Hour).Format(time.DateOnly)
	cmd = exec.Command(nodeBin, "testdata/restore.mjs", filepath.ToSlash(arch), "weather", from, to, restored)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restore export: %v\n%s", err, out)
	}
	do(t, u, "PUT", "/v1/collections/restored", `{"timeseries": {"timeField": "t", "metaField": "sensor", "granularity": "minutes"}}`)
	f, err := os.Open(restored)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	req, _ = http.NewRequest("POST", u+"/v1/collections/restored/documents", f)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != fmt.Sprintf(`{"inserted":%d}`, n) {
		t.Fatalf("restore insert: %d %s", resp.StatusCode, b)
	}
	again = do(t, u, "POST", "/v1/collections/restored/aggregate",
		`{"window": "30d", "groupBy": "sensor", "fields": ["v"], "funcs": ["count", "avg"]}`)
	if !bytes.Equal(again, agg) {
		t.Fatalf("restored aggregate differs:\n%s\nwant\n%s", again, agg)
	}
}
