package ui_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestConsoleEndToEnd drives the console in headless Chromium
// (e2e/console.mjs, with playwright-core) against a real server holding
// known data: the token prompt, the collections list with a suspended
// collection, a bad TTL value and the API's message, a per-sensor rule with
// its dry run, a TTL pass and the count dropping by the dry run's figure,
// a rollup made with the form (a bad window refused with the API's
// message first), listed, caught up, then read by the chart of the sensor
// whose raw data expired, named on its own page and stopped; the chart of
// a known series, the table and downloads, the server page.
// Screenshots of every page go to ui/e2e/artifacts/.
//
// It fails, rather than skips, when Chromium or the npm packages are
// missing (`make test` installs them); -short skips it.
func TestConsoleEndToEnd(t *testing.T) {
	node := requireNode(t)
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core", "package.json")); err != nil {
		missing(t, "playwright-core in ui/node_modules (`npm ci --prefix ui`)", err)
	}
	chromium := chromiumPath()
	if _, err := os.Stat(chromium); err != nil {
		missing(t, "Chromium at "+chromium+" (`apt-get install chromium`, or set HOURGLASS_CHROMIUM)", err)
	}

	const token = "e2e-token"
	s := startServer(t, token)
	north, south := seed(t, s)

	shots, err := filepath.Abs(filepath.Join("e2e", "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("e2e", "console.mjs"))
	cmd.Env = append(os.Environ(),
		"HOURGLASS_URL="+s.url, "HOURGLASS_TOKEN="+token, "SCREENSHOT_DIR="+shots, "CHROMIUM="+chromium,
		"E2E_COLLECTION=weather", "E2E_SENSOR=south", fmt.Sprintf("E2E_EXPECT_DELETE=%d", south))
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("console.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("console.mjs: %v (screenshots so far in %s)", err, shots)
	}

	// What the browser did, seen through the API.
	var idx []struct {
		Name               string         `json:"name"`
		ExpireAfterSeconds *int64         `json:"expireAfterSeconds"`
		Filter             map[string]any `json:"partialFilterExpression"`
	}
	s.must(t, "GET", "/v1/collections/weather/indexes", nil, &idx)
	if len(idx) != 1 || idx[0].Name != "south_day" || idx[0].ExpireAfterSeconds == nil || *idx[0].ExpireAfterSeconds != 86400 || idx[0].Filter["sensor"] != "south" {
		t.Errorf("indexes after the console's rule: %+v", idx)
	}
	var c struct {
		Count int `json:"count"`
	}
	s.must(t, "GET", "/v1/collections/weather", nil, &c)
	if want := north + 1000; c.Count != want { // the script inserts 2 x 500 on the server page
		t.Errorf("count after the TTL pass: %d, want %d", c.Count, want)
	}
	// The rollup: made, then stopped; its collection stays with what it
	// holds; the refused one made nothing.
	var rollups []map[string]any
	s.must(t, "GET", "/v1/collections/weather/rollups", nil, &rollups)
	if len(rollups) != 0 {
		t.Errorf("rollups after Stop: %+v", rollups)
	}
	var hourly struct {
		Count   int            `json:"count"`
		Options map[string]any `json:"options"`
	}
	s.must(t, "GET", "/v1/collections/weather_hourly", nil, &hourly)
	if _, ok := hourly.Options["rollupOf"]; ok || hourly.Count == 0 {
		t.Errorf("weather_hourly after Stop: count %d, options %v", hourly.Count, hourly.Options)
	}
	if st := s.do(t, "GET", "/v1/collections/weather_bad", nil, nil); st != 404 {
		t.Errorf("GET weather_bad: %d, want 404", st)
	}
	for _, name := range []string{"token", "collections", "collection-error", "collection-dry-run", "collection", "collection-rollups", "collection-suspended", "explore", "explore-rollup", "explore-table", "server"} {
		if fi, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || fi.Size() < 5000 {
			t.Errorf("screenshot %s.png: %v", name, err)
		}
	}
}

// seed creates the collections the script works on, through the API:
// "weather" with sensor north (one point a minute over the last 48 hours)
// and south (one a minute from 60 to 30 hours ago: all of it older than a
// day), and "legacy", whose 1960 measurement suspends its expiry. It
// returns how many measurements north and south hold.
func seed(t *testing.T, s *testServer) (north, south int) {
	t.Helper()
	s.must(t, "PUT", "/v1/collections/weather", map[string]any{
		"timeseries": map[string]any{"timeField": "timestamp", "metaField": "sensor"}}, nil)
	now := time.Now().UTC().Truncate(time.Minute)
	var docs []map[string]any
	add := func(sensor string, from, to time.Time, base float64) int {
		n := 0
		for ts := from; ts.Before(to); ts = ts.Add(time.Minute) {
			m := ts.Unix() / 60
			docs = append(docs, map[string]any{
				"timestamp": map[string]any{"$date": ts.Format(time.RFC3339)},
				"sensor":    sensor,
				// A daily wave with some noise: the band shows.
				"temp": base + 6*sinApprox(float64(m%1440)/1440) + float64(m*7919%13)/4,
			})
			n++
		}
		return n
	}
	north = add("north", now.Add(-48*time.Hour), now, 12)
	south = add("south", now.Add(-60*time.Hour), now.Add(-30*time.Hour), 18)
	s.must(t, "POST", "/v1/collections/weather/documents", docs, nil)

	// On disk, so that the sizes shown are real.
	s.must(t, "POST", "/v1/collections/weather/compact", nil, nil)

	s.must(t, "PUT", "/v1/collections/legacy", map[string]any{
		"timeseries": map[string]any{"timeField": "t", "metaField": "meter"}, "expireAfterSeconds": 3600}, nil)
	s.must(t, "POST", "/v1/collections/legacy/documents", []map[string]any{
		{"t": map[string]any{"$date": "1960-03-01T00:00:00Z"}, "meter": "m1", "kwh": 1.5},
		{"t": map[string]any{"$date": now.Add(-2 * time.Hour).Format(time.RFC3339)}, "meter": "m1", "kwh": 2.5},
	}, nil)

	// "archived" archives what expires, into an archive that cannot be
	// written: once its buckets are stored (checkpoints a second apart
	// seal idle ones), a pass suspends its archiving.
	s.must(t, "PUT", "/v1/collections/archived", map[string]any{
		"timeseries": map[string]any{"timeField": "t", "metaField": "meter"}, "expireAfterSeconds": 3600, "archive": true}, nil)
	s.must(t, "POST", "/v1/collections/archived/documents", []map[string]any{
		{"t": map[string]any{"$date": now.Add(-48 * time.Hour).Format(time.RFC3339)}, "meter": "m2", "kwh": 3.5},
	}, nil)
	for i := 0; ; i++ {
		time.Sleep(1200 * time.Millisecond)
		s.must(t, "POST", "/v1/collections/archived/compact", nil, nil)
		s.must(t, "POST", "/v1/admin/ttl/run", nil, nil)
		var c struct {
			TTL struct {
				Suspended bool `json:"suspended"`
			} `json:"ttl"`
		}
		s.must(t, "GET", "/v1/collections/archived", nil, &c)
		if c.TTL.Suspended {
			break
		}
		if i == 10 {
			t.Fatal("the archived collection's archiving was never suspended")
		}
	}
	return north, south
}

// sinApprox is sin(2πx) for x in [0, 1), close enough for test data.
func sinApprox(x float64) float64 {
	return math.Sin(2 * math.Pi * x)
}
