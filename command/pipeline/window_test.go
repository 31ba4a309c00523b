package pipeline

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// randomDocs makes n documents in random order: partitions p among a few
// values (or missing), times t with gaps and duplicates (numbers, or dates
// when dates), values v of mixed types, and _id their input position.
func randomDocs(r *rand.Rand, n int, dates bool) []Doc {
	docs := make([]Doc, n)
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range docs {
		d := Doc{"_id": int32(i)}
		if k := r.IntN(4); k < 3 {
			d["p"] = []any{int32(0), "a", 2.5}[k]
		}
		t := int64(r.IntN(40))
		if dates {
			d["t"] = base.Add(time.Duration(t) * time.Second)
		} else {
			d["t"] = t
		}
		switch r.IntN(6) {
		case 0:
		case 1:
			d["v"] = "s"
		case 2:
			d["v"] = float64(r.IntN(100)) / 4
		default:
			d["v"] = int32(r.IntN(100) - 20)
		}
		docs[i] = d
	}
	return docs
}

// randomBound is a bound for a window of the given kind.
func randomBound(r *rand.Rand, rng bool) Bound {
	switch r.IntN(5) {
	case 0:
		return Bound{Kind: BoundUnbounded}
	case 1:
		return Bound{Kind: BoundCurrent}
	}
	if rng {
		return Bound{Kind: BoundNumber, N: float64(r.IntN(13) - 6)}
	}
	return Bound{Kind: BoundNumber, N: float64(r.IntN(7) - 3)}
}

func randomOutput(r *rand.Rand, dates bool, field string) Output {
	ops := []string{"$avg", "$sum", "$min", "$max", "$count", "$first", "$last", "$derivative", "$integral", "$shift", "$expMovingAvg"}
	o := Output{Field: field, Op: ops[r.IntN(len(ops))], Input: Expr{Path: "v"}}
	switch o.Op {
	case "$shift":
		o.By = r.IntN(7) - 3
		if r.IntN(2) == 0 {
			o.Default = "none"
		}
		return o
	case "$expMovingAvg":
		o.Alpha = 0.3
		return o
	case "$derivative", "$integral":
		if dates {
			o.Unit = time.Second
		}
	}
	w := Window{Range: r.IntN(2) == 0}
	if w.Range && dates {
		w.Unit = time.Second
	}
	for {
		w.Lo, w.Hi = randomBound(r, w.Range), randomBound(r, w.Range)
		if !backwards(w.Lo, w.Hi) && !(w.Lo.Kind == BoundUnbounded && w.Hi.Kind == BoundUnbounded && r.IntN(3) > 0) {
			break
		}
	}
	o.Window = w
	return o
}

// reference computes spec over docs with plain loops: sort, split into
// partitions, and compute each output of each document over the whole
// partition.
func reference(docs []Doc, spec *WindowSpec) []Doc {
	docs = slices.Clone(docs)
	slices.SortStableFunc(docs, spec.compare)
	var out []Doc
	for start := 0; start < len(docs); {
		end := start + 1
		for end < len(docs) && spec.PartitionBy != "" && partialfilter.Compare(docs[start][spec.PartitionBy], docs[end][spec.PartitionBy]) == 0 {
			end++
		}
		if spec.PartitionBy == "" {
			end = len(docs)
		}
		part := docs[start:end]
		ema := make([]any, len(spec.Outputs))
		for i, d := range part {
			res := Doc{}
			for k, v := range d {
				res[k] = v
			}
			for k, o := range spec.Outputs {
				res[o.Field] = referenceValue(part, i, o, &ema[k])
			}
			out = append(out, res)
		}
		start = end
	}
	return out
}

// msPer is a unit in milliseconds, 1 for none (numbers).
func msPer(u time.Duration) float64 {
	if u == 0 {
		return 1
	}
	return float64(u.Milliseconds())
}

func keyNum(d Doc) float64 {
	switch t := d["t"].(type) {
	case time.Time:
		return float64(t.UnixMilli())
	case int64:
		return float64(t)
	}
	panic("no t")
}

func referenceValue(part []Doc, i int, o Output, ema *any) any {
	switch o.Op {
	case "$shift":
		j := i + o.By
		if j < 0 || j >= len(part) {
			return o.Default
		}
		v, ok := part[j]["v"]
		if !ok {
			return o.Default
		}
		return v
	case "$expMovingAvg":
		if f, ok := asFloat(part[i]["v"]); ok {
			if p, ok := (*ema).(float64); ok {
				*ema = f*o.Alpha + p*(1-o.Alpha)
			} else {
				*ema = f
			}
		}
		return *ema
	}
	var win []Doc
	for j := range part {
		if inWindow(part, i, j, o.Window) {
			win = append(win, part[j])
		}
	}
	return fold(win, o)
}

func inWindow(part []Doc, i, j int, w Window) bool {
	if !w.Range {
		lo, hi := math.MinInt, math.MaxInt
		if w.Lo.Kind != BoundUnbounded {
			lo = i + int(w.Lo.N)
		}
		if w.Hi.Kind != BoundUnbounded {
			hi = i + int(w.Hi.N)
		}
		return j >= lo && j <= hi
	}
	// A number is a distance in sortBy values; "current" is the
	// document itself (time.js: unlike 0, not the documents that tie).
	scale := msPer(w.Unit)
	ki, kj := keyNum(part[i]), keyNum(part[j])
	switch {
	case w.Lo.Kind == BoundCurrent && j < i, w.Lo.Kind == BoundNumber && kj < ki+w.Lo.N*scale:
		return false
	case w.Hi.Kind == BoundCurrent && j > i, w.Hi.Kind == BoundNumber && kj > ki+w.Hi.N*scale:
		return false
	}
	return true
}

func fold(win []Doc, o Output) any {
	var nums []float64
	for _, d := range win {
		if f, ok := asFloat(d["v"]); ok {
			nums = append(nums, f)
		}
	}
	switch o.Op {
	case "$count":
		return float64(len(win))
	case "$sum":
		s := 0.0
		for _, f := range nums {
			s += f
		}
		return s
	case "$avg":
		if len(nums) == 0 {
			return nil
		}
		s := 0.0
		for _, f := range nums {
			s += f
		}
		return s / float64(len(nums))
	case "$min", "$max":
		var best any
		for _, d := range win {
			v, ok := d["v"]
			if !ok || v == nil {
				continue
			}
			c := partialfilter.Compare(v, best)
			if best == nil || (o.Op == "$max" && c > 0) || (o.Op == "$min" && c < 0) {
				best = v
			}
		}
		return best
	case "$first", "$last":
		if len(win) == 0 {
			return nil
		}
		d := win[0]
		if o.Op == "$last" {
			d = win[len(win)-1]
		}
		return d["v"]
	case "$derivative":
		if len(win) < 2 {
			return nil
		}
		a, b := win[0], win[len(win)-1]
		ya, oka := asFloat(a["v"])
		yb, okb := asFloat(b["v"])
		ta, tb := keyNum(a)/msPer(o.Unit), keyNum(b)/msPer(o.Unit)
		if !oka || !okb || ta == tb {
			return nil
		}
		return (yb - ya) / (tb - ta)
	case "$integral":
		if len(win) == 0 {
			return nil
		}
		s := 0.0
		var prev Doc
		for _, d := range win {
			if _, ok := asFloat(d["v"]); !ok {
				continue
			}
			if prev != nil {
				y0, _ := asFloat(prev["v"])
				y1, _ := asFloat(d["v"])
				s += (keyNum(d) - keyNum(prev)) / msPer(o.Unit) * (y0 + y1) / 2
			}
			prev = d
		}
		return s
	}
	panic(o.Op)
}

// sameValue compares numbers as numbers, within rounding.
func sameValue(a, b any) bool {
	fa, oka := asFloat(a)
	fb, okb := asFloat(b)
	if oka && okb {
		return fa == fb || math.Abs(fa-fb) <= 1e-9*math.Max(1, math.Max(math.Abs(fa), math.Abs(fb)))
	}
	return oka == okb && partialfilter.Compare(a, b) == 0 && fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b)
}

func sameDocs(t *testing.T, got, want []Doc, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d documents, want %d", what, len(got), len(want))
	}
	for i := range want {
		// The field order (OrderKey) is a test of its own.
		if fields(got[i]) != fields(want[i]) {
			t.Fatalf("%s: document %d is %v, want %v", what, i, got[i], want[i])
		}
		for k, v := range want[i] {
			if !sameValue(got[i][k], v) {
				t.Fatalf("%s: document %d field %s is %v (%T), want %v (%T)\n got %v\nwant %v", what, i, k, got[i][k], got[i][k], v, v, got[i], want[i])
			}
		}
	}
}

// fields counts a document's fields, its order aside.
func fields(d Doc) int {
	if _, ok := d[OrderKey]; ok {
		return len(d) - 1
	}
	return len(d)
}

// TestSetWindowFieldsMatchesLoop compares the stage with the plain loop
// of reference over random data and random specs, from sorted input
// (streamed) and from shuffled input (sorted by the stage).
func TestSetWindowFieldsMatchesLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		dates := r.IntN(2) == 0
		docs := randomDocs(r, r.IntN(60), dates)
		spec := &WindowSpec{SortBy: []SortKey{{Field: "t"}}}
		if r.IntN(3) > 0 {
			spec.PartitionBy = "p"
		}
		for k := range 1 + r.IntN(3) {
			spec.Outputs = append(spec.Outputs, randomOutput(r, dates, fmt.Sprintf("o%d", k)))
		}
		want := reference(docs, spec)
		what := fmt.Sprintf("iteration %d, spec %+v", iter, *spec)
		got, err := Collect(SetWindowFields(Slice(slices.Clone(docs)), spec, Options{}))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sameDocs(t, got, want, what+" (unsorted input)")
		sorted := slices.Clone(docs)
		slices.SortStableFunc(sorted, spec.compare)
		got, err = Collect(SetWindowFields(Slice(sorted), spec, Options{Sorted: true}))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sameDocs(t, got, want, what+" (sorted input)")
	}
}
