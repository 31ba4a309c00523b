package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// Sample is the progress of one target at one moment: the points
// acknowledged so far, and the batches acknowledged since the previous
// sample with their latencies (Progress.Batches and Progress.Latency).
type Sample struct {
	Elapsed time.Duration
	Points  int64
	Batches int64
	Latency Latency
}

// Series is the progress of one target over a run.
type Series struct {
	Target  string
	Samples []Sample
}

// rates returns the points/s of each interval between samples, at the
// interval's end.
func (s Series) rates() (xs []float64, ys []float64) {
	var prev Sample
	for _, c := range s.Samples {
		dt := (c.Elapsed - prev.Elapsed).Seconds()
		if dt <= 0 {
			continue
		}
		xs = append(xs, c.Elapsed.Seconds())
		ys = append(ys, float64(c.Points-prev.Points)/dt)
		prev = c
	}
	return xs, ys
}

// latencies returns, at the end of each interval in which batches were
// acknowledged, their median and 99th percentile latency in milliseconds.
func (s Series) latencies() (xs, p50, p99 []float64) {
	for _, c := range s.Samples {
		if c.Batches == 0 {
			continue
		}
		xs = append(xs, c.Elapsed.Seconds())
		p50 = append(p50, float64(c.Latency.P50)/1e6)
		p99 = append(p99, float64(c.Latency.P99)/1e6)
	}
	return xs, p50, p99
}

// markersUpTo is the most points a line may have for them to be marked.
const markersUpTo = 30

var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// plotLine is one line of a chart.
type plotLine struct {
	target, class, dash string
	color               string
	xs, ys              []float64
}

// WriteHTML draws two SVG line charts in a self-contained HTML page (no
// scripts, no external files), both over the time since each load began:
// points/s for each series, and below it the median (solid) and 99th
// percentile (dashed) latency of the batches acknowledged in each sampling
// interval.
func WriteHTML(w io.Writer, title string, series []Series) error {
	var maxX float64
	var rateLines, latLines []plotLine
	for i, s := range series {
		color := plotColors[i%len(plotColors)]
		xs, ys := s.rates()
		rateLines = append(rateLines, plotLine{target: s.Target, class: "series", color: color, xs: xs, ys: ys})
		lx, p50, p99 := s.latencies()
		latLines = append(latLines,
			plotLine{target: s.Target, class: "latency p50", color: color, xs: lx, ys: p50},
			plotLine{target: s.Target, class: "latency p99", color: color, dash: "6 4", xs: lx, ys: p99})
		for _, l := range [][]float64{xs, lx} {
			for _, x := range l {
				maxX = math.Max(maxX, x)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n", html.EscapeString(title))
	b.WriteString("<style>body{font-family:sans-serif;margin:2em}svg text{font-size:12px}</style></head><body>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(title))
	b.WriteString("<h2>Points acknowledged per second</h2>\n")
	writeChart(&b, "rate", "points/s", humanRate, maxX, rateLines, series)
	b.WriteString("<h2>Batch latency per sampling interval: median (solid) and 99th percentile (dashed)</h2>\n")
	writeChart(&b, "latency", "batch latency, ms", humanMillis, maxX, latLines, series)
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeChart writes one SVG line chart of lines, the x axis in seconds up
// to maxX, the y axis from 0 to a round value over the highest y, with a
// legend of the series' targets.
func writeChart(b *strings.Builder, id, ylabel string, yfmt func(float64) string, maxX float64, lines []plotLine, series []Series) {
	const (
		width, height          = 900.0, 420.0
		left, right, top, bott = 80.0, 20.0, 30.0, 50.0
	)
	var maxY float64
	for _, l := range lines {
		for _, y := range l.ys {
			maxY = math.Max(maxY, y)
		}
	}
	if maxX == 0 {
		maxX = 1
	}
	if maxY == 0 {
		maxY = 1
	}
	maxY = niceCeil(maxY)
	px := func(x float64) float64 { return left + x/maxX*(width-left-right) }
	py := func(y float64) float64 { return height - bott - y/maxY*(height-top-bott) }

	fmt.Fprintf(b, `<svg id="%s" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", id, width, height, width, height)
	// Axes and grid.
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, height-bott, width-right, height-bott)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top, left, height-bott)
	for i := 0; i <= 4; i++ {
		y := maxY * float64(i) / 4
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, py(y), width-right, py(y))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py(y)+4, yfmt(y))
		x := maxX * float64(i) / 4
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%.1f s</text>`+"\n", px(x), height-bott+18, x)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">time since the load began</text>`+"\n", (left+width-right)/2, height-8)
	fmt.Fprintf(b, `<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`+"\n", (top+height-bott)/2, (top+height-bott)/2, ylabel)
	for _, l := range lines {
		if len(l.xs) == 0 {
			continue
		}
		var pts strings.Builder
		for j := range l.xs {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(l.xs[j]), py(l.ys[j]))
		}
		dash := ""
		if l.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, l.dash)
		}
		fmt.Fprintf(b, `<polyline class="%s" data-target="%s" fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n",
			l.class, html.EscapeString(l.target), l.color, dash, strings.TrimSpace(pts.String()))
		if len(l.xs) <= markersUpTo {
			// Few points (a short load has one): mark them, or a line of
			// one point would not show.
			for j := range l.xs {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(l.xs[j]), py(l.ys[j]), l.color)
			}
		}
	}
	for i, s := range series {
		color := plotColors[i%len(plotColors)]
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			left+10, top+float64(i)*18, color, left+28, top+float64(i)*18+10, html.EscapeString(s.Target))
	}
	b.WriteString("</svg>\n")
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func humanRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// humanMillis labels a latency axis in milliseconds.
func humanMillis(v float64) string {
	switch {
	case v == 0 || v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2g", v)
}
