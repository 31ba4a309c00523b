package pipeline

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
)

// densifyDocs makes documents with partitions p, values x (numbers or
// dates, with gaps, duplicates, off-grid values, and some missing).
func densifyDocs(r *rand.Rand, n int, dates bool) []Doc {
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var docs []Doc
	for i := range n {
		d := Doc{"_id": int32(i), "p": int32(r.IntN(3))}
		if r.IntN(8) > 0 {
			v := int64(r.IntN(30))
			if dates {
				d["x"] = base.Add(time.Duration(v) * time.Minute)
			} else if r.IntN(4) == 0 {
				d["x"] = float64(v) + 0.5
			} else {
				d["x"] = v
			}
		}
		docs = append(docs, d)
	}
	return docs
}

// densifyLoop is $densify by plain loops: each partition's grid, the
// points no document holds, merged in value order.
func densifyLoop(docs []Doc, spec *DensifySpec) []Doc {
	ord := order{parts: spec.PartitionBy, sortBy: []SortKey{{Field: spec.Field}}}
	docs = slices.Clone(docs)
	slices.SortStableFunc(docs, ord.compare)
	val := func(d Doc) (float64, bool) {
		v, ok := d[spec.Field]
		if !ok || v == nil {
			return 0, false
		}
		x, _ := numericKey(v)
		return x, true
	}
	step := spec.Step * msPer(spec.Unit)
	gmin, gmax := math.Inf(1), math.Inf(-1)
	for _, d := range docs {
		if x, ok := val(d); ok {
			gmin, gmax = min(gmin, x), max(gmax, x)
		}
	}
	var out []Doc
	for start := 0; start < len(docs); {
		end := start + 1
		for end < len(docs) && ord.samePartition(docs[start], docs[end]) {
			end++
		}
		part := docs[start:end]
		have := map[float64]bool{}
		pmin, pmax := math.Inf(1), math.Inf(-1)
		for _, d := range part {
			if x, ok := val(d); ok {
				have[x] = true
				pmin, pmax = min(pmin, x), max(pmax, x)
			}
		}
		var grid []float64
		switch spec.Bounds {
		case DensifyExplicit:
			for k := 0; spec.Lo+float64(k)*step < spec.Hi; k++ {
				grid = append(grid, spec.Lo+float64(k)*step)
			}
		case DensifyPartition:
			for k := 0; pmin+float64(k)*step <= pmax; k++ {
				grid = append(grid, pmin+float64(k)*step)
			}
		case DensifyFull:
			for k := 0; gmin+float64(k)*step <= gmax; k++ {
				grid = append(grid, gmin+float64(k)*step)
			}
		}
		var gen []Doc
		for _, g := range grid {
			if have[g] {
				continue
			}
			d := Doc{"p": part[0]["p"]}
			if len(spec.PartitionBy) == 0 {
				d = Doc{}
			}
			if spec.Unit != 0 {
				d[spec.Field] = time.UnixMilli(int64(g)).UTC()
			} else {
				d[spec.Field] = g
			}
			gen = append(gen, d)
		}
		// Merge: a document before the grid points above its value.
		i := 0
		for _, d := range part {
			x, ok := val(d)
			for ok && i < len(gen) {
				g, _ := numericKey(gen[i][spec.Field])
				if g >= x {
					break
				}
				out = append(out, gen[i])
				i++
			}
			out = append(out, d)
		}
		out = append(out, gen[i:]...)
		start = end
	}
	return out
}

// TestDensifyMatchesLoop compares $densify with the plain loop over
// random documents and bounds, from shuffled and from sorted input.
func TestDensifyMatchesLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for iter := range 2000 {
		dates := r.IntN(2) == 0
		docs := densifyDocs(r, r.IntN(30), dates)
		spec := &DensifySpec{Field: "x", Step: float64(1 + r.IntN(4)), Bounds: []string{DensifyFull, DensifyPartition, DensifyExplicit}[r.IntN(3)]}
		if r.IntN(3) > 0 {
			spec.PartitionBy = []string{"p"}
		}
		if dates {
			spec.Unit = time.Minute
		}
		if spec.Bounds == DensifyExplicit {
			lo := float64(r.IntN(20)) - 5
			hi := lo + float64(r.IntN(25))
			if dates {
				lo = float64(base.UnixMilli()) + lo*60000
				hi = float64(base.UnixMilli()) + hi*60000
			}
			spec.Lo, spec.Hi = lo, hi
		}
		want := densifyLoop(docs, spec)
		what := fmt.Sprintf("iteration %d, spec %+v", iter, *spec)
		got, err := Collect(Densify(Slice(docs), spec, Options{}))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sameDocs(t, got, want, what+" (unsorted input)")
		sorted := slices.Clone(docs)
		slices.SortStableFunc(sorted, order{parts: spec.PartitionBy, sortBy: []SortKey{{Field: "x"}}}.compare)
		got, err = Collect(Densify(Slice(sorted), spec, Options{Sorted: true}))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sameDocs(t, got, want, what+" (sorted input)")
	}
}

// TestDensifyGeneratedOrder: a document $densify makes has MongoDB's field
// order, the partition's fields in partitionByFields' order, then the
// field (not name order).
func TestDensifyGeneratedOrder(t *testing.T) {
	docs := []Doc{{"z": int32(1), "p": Doc{"y": "a", "b": int32(2)}, "x": int32(0)}, {"z": int32(1), "p": Doc{"y": "a", "b": int32(2)}, "x": int32(3)}}
	spec, err := ParseDensify(Doc{"field": "x", "partitionByFields": []any{"z", "p.y"}, "range": Doc{"step": int32(1), "bounds": "partition"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Collect(Densify(Slice(docs), spec, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("%d documents, want 4: %v", len(got), got)
	}
	o, ok := got[1][OrderKey].(*document.Order)
	if !ok {
		t.Fatalf("a generated document has no order: %v", got[1])
	}
	if !slices.Equal(o.Keys, []string{"z", "p", "x"}) || o.Child("p") == nil || !slices.Equal(o.Child("p").Keys, []string{"y"}) {
		t.Errorf("generated order %v, p %v; want [z p x], p [y]", o.Keys, o.Child("p"))
	}
}
