package bench

import (
	"testing"
	"time"
)

func TestSoakFigures(t *testing.T) {
	mk := func(rss ...float64) []SoakSample {
		var out []SoakSample
		for i, r := range rss {
			out = append(out, SoakSample{Elapsed: time.Duration(i) * time.Second, RSSMiB: r, FDs: 20, Goroutines: 30})
		}
		return out
	}
	// Second quarter (samples 2, 3) peaks at 100: the limit is 100 x 1.2 + 16.
	figs, flat := soakFigures(mk(50, 80, 100, 90, 110, 136, 120, 130), 0.2)
	if !flat || figs[0].WarmMax != 100 || figs[0].LastHalfMax != 136 || figs[0].Limit != 136 {
		t.Fatalf("flat run: %v %+v", flat, figs)
	}
	figs, flat = soakFigures(mk(50, 80, 100, 90, 110, 137, 120, 130), 0.2)
	if flat || figs[0].Flat || !figs[1].Flat || !figs[2].Flat {
		t.Fatalf("RSS one MiB over its limit: %v %+v", flat, figs)
	}
	if _, flat := soakFigures(mk(1, 2, 3), 0.2); flat {
		t.Fatal("three samples judged flat")
	}
}
