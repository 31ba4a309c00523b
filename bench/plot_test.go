package bench

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

// TestWriteHTML renders two series and reads the chart back as SVG.
func TestWriteHTML(t *testing.T) {
	series := []Series{
		{Target: "http://127.0.0.1:7700", Samples: []Sample{{time.Second, 4e6}, {2 * time.Second, 9e6}, {3 * time.Second, 13e6}}},
		{Target: "influx=<vm>", Samples: []Sample{{time.Second, 2e6}, {2 * time.Second, 4e6}}},
		{Target: "empty"},
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "ingest", series); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	start, end := strings.Index(page, "<svg"), strings.Index(page, "</svg>")
	if start < 0 || end < 0 {
		t.Fatalf("no svg in %s", page)
	}
	var svg struct {
		Lines []struct {
			Target string `xml:"data-target,attr"`
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
		Texts []string `xml:"text"`
	}
	if err := xml.Unmarshal([]byte(page[start:end+len("</svg>")]), &svg); err != nil {
		t.Fatalf("the chart is not well-formed SVG: %v", err)
	}
	if len(svg.Lines) != 2 || svg.Lines[1].Target != "influx=<vm>" {
		t.Fatalf("lines %+v", svg.Lines)
	}
	if n := len(strings.Fields(svg.Lines[0].Points)); n != 3 {
		t.Fatalf("first line has %d points, want 3", n)
	}
	// The y axis tops at a round value over the fastest rate (5M points/s).
	if !strings.Contains(strings.Join(svg.Texts, " "), "5.0M") {
		t.Fatalf("axis labels %q", svg.Texts)
	}
	xs, ys := series[0].rates()
	if len(xs) != 3 || ys[0] != 4e6 || ys[1] != 5e6 || ys[2] != 4e6 {
		t.Fatalf("rates %v %v", xs, ys)
	}
}
