package pipeline

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// fillDocs makes documents with partitions p, distinct times t (with
// gaps) as numbers or dates, and values a and b that are
// often null or missing.
func fillDocs(r *rand.Rand, n int, dates bool) []Doc {
	var next int64 // distinct times, also across partitions
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var docs []Doc
	for i := range n {
		p := r.IntN(3)
		next += 1 + int64(r.IntN(4))
		d := Doc{"_id": int32(i), "p": int32(p)}
		if dates {
			d["t"] = base.Add(time.Duration(next) * time.Minute)
		} else {
			d["t"] = next
		}
		for _, f := range []string{"a", "b"} {
			switch r.IntN(4) {
			case 0:
			case 1:
				d[f] = nil
			default:
				d[f] = float64(r.IntN(50))
			}
		}
		docs = append(docs, d)
	}
	r.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	return docs
}

// fillLoop is $fill by plain loops over each sorted partition.
func fillLoop(docs []Doc, spec *FillSpec) []Doc {
	ord := order{parts: spec.PartitionBy, sortBy: spec.SortBy}
	docs = slices.Clone(docs)
	slices.SortStableFunc(docs, ord.compare)
	var out []Doc
	for start := 0; start < len(docs); {
		end := start + 1
		for end < len(docs) && ord.samePartition(docs[start], docs[end]) {
			end++
		}
		part := docs[start:end]
		res := make([]Doc, len(part))
		for i, d := range part {
			res[i] = Doc{}
			for k, v := range d {
				res[i][k] = v
			}
		}
		for _, o := range spec.Outputs {
			known := func(j int) bool { return part[j][o.Field] != nil }
			for i := range part {
				if known(i) {
					continue
				}
				switch o.Method {
				case "value":
					res[i][o.Field] = o.Value
				case "locf":
					res[i][o.Field] = nil
					for j := i - 1; j >= 0; j-- {
						if known(j) {
							res[i][o.Field] = part[j][o.Field]
							break
						}
					}
				case "linear":
					res[i][o.Field] = nil
					lo, hi := -1, -1
					for j := i - 1; j >= 0 && lo < 0; j-- {
						if known(j) {
							lo = j
						}
					}
					for j := i + 1; j < len(part) && hi < 0; j++ {
						if known(j) {
							hi = j
						}
					}
					if lo >= 0 && hi >= 0 {
						x0, _ := numericKey(part[lo]["t"])
						x1, _ := numericKey(part[hi]["t"])
						x, _ := numericKey(part[i]["t"])
						y0, y1 := part[lo][o.Field].(float64), part[hi][o.Field].(float64)
						res[i][o.Field] = y0 + (y1-y0)*(x-x0)/(x1-x0)
					}
				}
			}
		}
		out = append(out, res...)
		start = end
	}
	return out
}

// TestFillMatchesLoop compares $fill with the plain loop over random
// documents, from shuffled input and from sorted input.
func TestFillMatchesLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	methods := []string{"value", "locf", "linear"}
	for iter := range 2000 {
		docs := fillDocs(r, r.IntN(40), r.IntN(2) == 0)
		spec := &FillSpec{SortBy: []SortKey{{Field: "t", Desc: r.IntN(4) == 0}}}
		if r.IntN(3) > 0 {
			spec.PartitionBy = []string{"p"}
		}
		for _, f := range []string{"a", "b"} {
			if r.IntN(3) > 0 {
				spec.Outputs = append(spec.Outputs, FillOutput{Field: f, Method: methods[r.IntN(3)], Value: "filled"})
			}
		}
		want := fillLoop(docs, spec)
		what := fmt.Sprintf("iteration %d, spec %+v", iter, *spec)
		got, err := Collect(Fill(Slice(docs), spec, Options{}))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sameDocs(t, got, want, what+" (unsorted input)")
		sorted := slices.Clone(docs)
		slices.SortStableFunc(sorted, order{parts: spec.PartitionBy, sortBy: spec.SortBy}.compare)
		got, err = Collect(Fill(Slice(sorted), spec, Options{Sorted: true}))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sameDocs(t, got, want, what+" (sorted input)")
	}
}

// TestFillHoldsOnlyTheGap fills 100,000 sorted documents whose value is
// known every 10th: a linear fill holds the gap, a locf one document.
func TestFillHoldsOnlyTheGap(t *testing.T) {
	for _, method := range []string{"linear", "locf"} {
		spec := &FillSpec{SortBy: []SortKey{{Field: "t"}}, Outputs: []FillOutput{{Field: "v", Method: method}}}
		it := Fill(&gapIter{n: 100_000}, spec, Options{Sorted: true, MaxMemory: 64 << 10})
		n := 0
		for {
			d, err := it.Next()
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			if d == nil {
				break
			}
			n++
		}
		if n != 100_000 {
			t.Fatalf("%s: %d documents", method, n)
		}
	}
	// A gap past the limit is an error.
	spec := &FillSpec{SortBy: []SortKey{{Field: "t"}}, Outputs: []FillOutput{{Field: "v", Method: "linear"}}}
	_, err := Collect(Fill(&gapIter{n: 100_000, every: 50_000}, spec, Options{Sorted: true, MaxMemory: 64 << 10}))
	var me *mongoerr.Error
	if !errors.As(err, &me) || me.Code != codeWindowMemory {
		t.Errorf("a gap past the limit: %v", err)
	}
}

// gapIter yields n documents t = 1..n, with v known every 10th (every).
type gapIter struct{ i, n, every int }

func (g *gapIter) Next() (Doc, error) {
	if g.i == g.n {
		return nil, nil
	}
	g.i++
	every := g.every
	if every == 0 {
		every = 10
	}
	d := Doc{"t": int64(g.i)}
	if g.i%every == 1 {
		d["v"] = float64(g.i)
	}
	return d, nil
}
