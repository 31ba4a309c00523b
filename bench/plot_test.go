package bench

import (
	"bytes"
	"encoding/xml"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chart is an SVG chart of the page, as the tests read it back.
type chart struct {
	ID    string `xml:"id,attr"`
	Lines []struct {
		Class  string `xml:"class,attr"`
		Target string `xml:"data-target,attr"`
		Points string `xml:"points,attr"`
	} `xml:"polyline"`
	Markers []struct {
		CX float64 `xml:"cx,attr"`
	} `xml:"circle"`
	Texts []string `xml:"text"`
}

// parseCharts returns the SVG charts of page, failing on malformed SVG.
func parseCharts(t *testing.T, page string) []chart {
	t.Helper()
	var charts []chart
	for {
		start, end := strings.Index(page, "<svg"), strings.Index(page, "</svg>")
		if start < 0 || end < 0 {
			return charts
		}
		var c chart
		if err := xml.Unmarshal([]byte(page[start:end+len("</svg>")]), &c); err != nil {
			t.Fatalf("a chart is not well-formed SVG: %v", err)
		}
		charts = append(charts, c)
		page = page[end+len("</svg>"):]
	}
}

// coords parses a polyline's points, checking each lies in the plot area
// (x in [80, 880], y in [30, 370]).
func coords(t *testing.T, points string) (xs, ys []float64) {
	t.Helper()
	for _, p := range strings.Fields(points) {
		sx, sy, ok := strings.Cut(p, ",")
		x, errx := strconv.ParseFloat(sx, 64)
		y, erry := strconv.ParseFloat(sy, 64)
		if !ok || errx != nil || erry != nil || math.IsNaN(x) || math.IsNaN(y) || x < 80 || x > 880 || y < 30 || y > 370 {
			t.Fatalf("point %q of %q is not in the plot area", p, points)
		}
		xs, ys = append(xs, x), append(ys, y)
	}
	return xs, ys
}

// TestWriteHTML renders two series and reads both charts back as SVG.
func TestWriteHTML(t *testing.T) {
	ms := time.Millisecond
	series := []Series{
		{Target: "http://127.0.0.1:7700", Samples: []Sample{
			{time.Second, 4e6, 80, Latency{P50: 20 * ms, P99: 60 * ms, Max: 70 * ms}},
			{2 * time.Second, 9e6, 100, Latency{P50: 18 * ms, P99: 40 * ms, Max: 41 * ms}},
			{3 * time.Second, 13e6, 80, Latency{P50: 22 * ms, P99: 90 * ms, Max: 95 * ms}}}},
		{Target: "influx=<vm>", Samples: []Sample{
			{time.Second, 2e6, 40, Latency{P50: 25 * ms, P99: 250 * ms, Max: 260 * ms}},
			{2 * time.Second, 2e6, 0, Latency{}}, // no batch acknowledged: no latency point
			{3 * time.Second, 4e6, 40, Latency{P50: 30 * ms, P99: 180 * ms, Max: 200 * ms}}}},
		{Target: "empty"},
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "ingest", series); err != nil {
		t.Fatal(err)
	}
	charts := parseCharts(t, buf.String())
	if len(charts) != 2 || charts[0].ID != "rate" || charts[1].ID != "latency" {
		t.Fatalf("%d charts: %+v", len(charts), charts)
	}

	rate := charts[0]
	if len(rate.Lines) != 2 || rate.Lines[0].Target != "http://127.0.0.1:7700" || rate.Lines[1].Target != "influx=<vm>" {
		t.Fatalf("rate lines %+v", rate.Lines)
	}
	if xs, _ := coords(t, rate.Lines[0].Points); len(xs) != 3 {
		t.Fatalf("first line has %d points, want 3", len(xs))
	}
	// Short lines have their points marked: 3 each here, 3+3+2+2 below.
	if len(rate.Markers) != 6 || len(charts[1].Markers) != 10 {
		t.Fatalf("%d and %d markers", len(rate.Markers), len(charts[1].Markers))
	}
	// The y axis tops at a round value over the fastest rate (5M points/s).
	if !strings.Contains(strings.Join(rate.Texts, " "), "5.0M") {
		t.Fatalf("axis labels %q", rate.Texts)
	}
	xs, ys := series[0].rates()
	if len(xs) != 3 || ys[0] != 4e6 || ys[1] != 5e6 || ys[2] != 4e6 {
		t.Fatalf("rates %v %v", xs, ys)
	}

	// The latency chart: a median and a p99 line per target with samples.
	lat := charts[1]
	type key struct{ target, class string }
	lines := map[key][]float64{}
	var lineXs [][]float64
	for _, l := range lat.Lines {
		xs, ys := coords(t, l.Points)
		lines[key{l.Target, l.Class}] = ys
		lineXs = append(lineXs, xs)
	}
	if len(lat.Lines) != 4 || len(lines) != 4 {
		t.Fatalf("latency lines %+v", lat.Lines)
	}
	hg50, hg99 := lines[key{"http://127.0.0.1:7700", "latency p50"}], lines[key{"http://127.0.0.1:7700", "latency p99"}]
	vm50, vm99 := lines[key{"influx=<vm>", "latency p50"}], lines[key{"influx=<vm>", "latency p99"}]
	if len(hg50) != 3 || len(hg99) != 3 || len(vm50) != 2 || len(vm99) != 2 {
		t.Fatalf("latency lines %+v", lat.Lines)
	}
	// The axis tops at 500 ms (over 250); y grows downwards in SVG: 250 ms
	// is half way up the 340-pixel plot area, 20 ms near the bottom.
	if !strings.Contains(strings.Join(lat.Texts, " "), "500") {
		t.Fatalf("latency axis labels %q", lat.Texts)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 0.2 }
	if !near(vm99[0], 370-250.0/500*340) || !near(hg50[0], 370-20.0/500*340) {
		t.Fatalf("y of 250 ms %v, of 20 ms %v", vm99[0], hg50[0])
	}
	for i := range hg50 {
		if hg99[i] >= hg50[i] {
			t.Fatalf("p99 drawn below p50 at %d: %v %v", i, hg99, hg50)
		}
	}
	// x: the samples at 1 s and 3 s, on a 3-second axis 800 pixels wide.
	if vx := lineXs[2]; !near(vx[0], 80+800.0/3) || !near(vx[1], 880) {
		t.Fatalf("x of the second target's latency points %v", vx)
	}
}
