package pipeline

import (
	"errors"
	"testing"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// countingIter yields n documents of one partition, t ascending, made
// on demand, so that only the stage holds them.
type countingIter struct{ i, n int }

func (c *countingIter) Next() (Doc, error) {
	if c.i == c.n {
		return nil, nil
	}
	c.i++
	return Doc{"t": int64(c.i), "v": float64(c.i % 7)}, nil
}

// TestWindowHoldsOnlyTheWindow runs windows over 200,000 sorted
// documents and checks the most documents held at once: hi-lo+1 for a
// document window, the documents within the range for a range window, a
// handful for a running total.
func TestWindowHoldsOnlyTheWindow(t *testing.T) {
	const n = 200_000
	for _, c := range []struct {
		name string
		win  Window
		max  int
	}{
		{"documents [-5, 5]", Window{Lo: Bound{N: -5}, Hi: Bound{N: 5}}, 11},
		{"documents [-100, 0]", Window{Lo: Bound{N: -100}, Hi: Bound{Kind: BoundCurrent}}, 101},
		{"range [-10, 0]", Window{Range: true, Lo: Bound{N: -10}, Hi: Bound{Kind: BoundCurrent}}, 12},
		{"documents [unbounded, current]", Window{Lo: Bound{Kind: BoundUnbounded}, Hi: Bound{Kind: BoundCurrent}}, 2},
	} {
		spec := &WindowSpec{SortBy: []SortKey{{Field: "t"}}, Outputs: []Output{{Field: "s", Op: "$sum", Input: Expr{Path: "v"}, Window: c.win}}}
		it := SetWindowFields(&countingIter{n: n}, spec, Options{Sorted: true})
		count := 0
		for {
			d, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if d == nil {
				break
			}
			count++
		}
		if count != n {
			t.Fatalf("%s: %d documents, want %d", c.name, count, n)
		}
		t.Logf("%s: at most %d documents held", c.name, Peak(it))
		if p := Peak(it); p > c.max {
			t.Errorf("%s: held %d documents at once, want at most %d", c.name, p, c.max)
		}
	}
}

// TestWindowMemoryLimits checks the errors past Options.MaxMemory: the
// sort of an unsorted input (292), and a window that holds a whole
// partition (5414201).
func TestWindowMemoryLimits(t *testing.T) {
	spec := &WindowSpec{SortBy: []SortKey{{Field: "t"}}, Outputs: []Output{{Field: "s", Op: "$sum", Input: Expr{Path: "v"},
		Window: Window{Lo: Bound{Kind: BoundUnbounded}, Hi: Bound{Kind: BoundUnbounded}}}}}
	limit := int64(1 << 20)
	_, err := Collect(SetWindowFields(&countingIter{n: 100_000}, spec, Options{MaxMemory: limit}))
	var me *mongoerr.Error
	if !errors.As(err, &me) || me.Code != 292 {
		t.Errorf("unsorted input past the limit: %v, want code 292", err)
	}
	_, err = Collect(SetWindowFields(&countingIter{n: 100_000}, spec, Options{MaxMemory: limit, Sorted: true}))
	if !errors.As(err, &me) || me.Code != 5414201 {
		t.Errorf("a whole partition past the limit: %v, want code 5414201", err)
	}
	// A bounded window over the same documents stays within it.
	spec.Outputs[0].Window = Window{Lo: Bound{N: -3}, Hi: Bound{N: 3}}
	if _, err := Collect(SetWindowFields(&countingIter{n: 100_000}, spec, Options{MaxMemory: limit, Sorted: true})); err != nil {
		t.Errorf("a bounded window: %v", err)
	}
}

// TestWindowRefusesUnsortedInput checks the promise of Options.Sorted.
func TestWindowRefusesUnsortedInput(t *testing.T) {
	spec := &WindowSpec{PartitionBy: "p", SortBy: []SortKey{{Field: "t"}}, Outputs: []Output{{Field: "s", Op: "$count",
		Window: Window{Lo: Bound{N: -1}, Hi: Bound{Kind: BoundCurrent}}}}}
	for _, docs := range [][]Doc{
		{{"p": 1, "t": 2}, {"p": 1, "t": 1}},
		{{"p": 1, "t": 1}, {"p": 2, "t": 1}, {"p": 1, "t": 2}},
	} {
		if _, err := Collect(SetWindowFields(Slice(docs), spec, Options{Sorted: true})); err == nil {
			t.Errorf("%v: no error", docs)
		}
	}
}

// BenchmarkSetWindowFields runs a moving average over 1,000,000 sorted
// documents, reporting documents per second and the most held at once:
//
//	go test ./command/pipeline -run '^$' -bench SetWindowFields -benchtime 3x
//
// docs/benchmarks.md "Window stages" has its figures.
func BenchmarkSetWindowFields(b *testing.B) {
	const n = 1_000_000
	for _, c := range []struct {
		name string
		win  Window
	}{
		{"documents[-9,0]", Window{Lo: Bound{N: -9}, Hi: Bound{Kind: BoundCurrent}}},
		{"range[-60,0]", Window{Range: true, Lo: Bound{N: -60}, Hi: Bound{Kind: BoundCurrent}}},
		{"running", Window{Lo: Bound{Kind: BoundUnbounded}, Hi: Bound{Kind: BoundCurrent}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			spec := &WindowSpec{SortBy: []SortKey{{Field: "t"}}, Outputs: []Output{{Field: "avg", Op: "$avg", Input: Expr{Path: "v"}, Window: c.win}}}
			for range b.N {
				it := SetWindowFields(&countingIter{n: n}, spec, Options{Sorted: true})
				for {
					d, err := it.Next()
					if err != nil {
						b.Fatal(err)
					}
					if d == nil {
						break
					}
				}
				b.ReportMetric(float64(Peak(it)), "held")
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}
