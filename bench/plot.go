package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// Sample is the progress of one target at one moment.
type Sample struct {
	Elapsed time.Duration
	Points  int64
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

var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// WriteHTML draws points/s over time for each series as an SVG line chart
// in a self-contained HTML page (no scripts, no external files).
func WriteHTML(w io.Writer, title string, series []Series) error {
	const (
		width, height          = 900.0, 420.0
		left, right, top, bott = 80.0, 20.0, 30.0, 50.0
	)
	var maxX, maxY float64
	for _, s := range series {
		xs, ys := s.rates()
		for i := range xs {
			maxX = math.Max(maxX, xs[i])
			maxY = math.Max(maxY, ys[i])
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

	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n", html.EscapeString(title))
	b.WriteString("<style>body{font-family:sans-serif;margin:2em}svg text{font-size:12px}</style></head><body>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", width, height, width, height)
	// Axes and grid.
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, height-bott, width-right, height-bott)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top, left, height-bott)
	for i := 0; i <= 4; i++ {
		y := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, py(y), width-right, py(y))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py(y)+4, humanRate(y))
		x := maxX * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%.1f s</text>`+"\n", px(x), height-bott+18, x)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">time since the load began</text>`+"\n", (left+width-right)/2, height-8)
	fmt.Fprintf(&b, `<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">points/s</text>`+"\n", (top+height-bott)/2, (top+height-bott)/2)
	for i, s := range series {
		xs, ys := s.rates()
		color := plotColors[i%len(plotColors)]
		if len(xs) > 0 {
			var pts strings.Builder
			for j := range xs {
				fmt.Fprintf(&pts, "%.1f,%.1f ", px(xs[j]), py(ys[j]))
			}
			fmt.Fprintf(&b, `<polyline class="series" data-target="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n",
				html.EscapeString(s.Target), color, strings.TrimSpace(pts.String()))
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			left+10, top+float64(i)*18, color, left+28, top+float64(i)*18+10, html.EscapeString(s.Target))
	}
	b.WriteString("</svg>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
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
