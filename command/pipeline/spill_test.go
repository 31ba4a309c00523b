package pipeline

import (
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// TestSortSpills: with AllowDiskUse, a stage's sort past MaxMemory writes
// sorted runs to disk and merges them: the same documents in the same
// order as the sort in memory (stable: ties keep their input order),
// every value's type kept, also when the runs are merged as they come
// (maxOpenRuns); without it, 292. The runs' files are gone after
// (unlinked at once).
func TestSortSpills(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	t.Cleanup(func() { maxOpenRuns = 64 })
	for iter := range 50 {
		docs := randomDocs(r, 200+r.IntN(800), r.IntN(2) == 0)
		edge := Doc{"_id": int32(-1), "p": int32(0), "t": int64(5), "v": nil, "e": []any{}, "m": map[string]any{},
			"n": map[string]any{"z": int32(1), "a": []any{int64(1) << 40, "x", nil}},
			"d": time.UnixMilli(1700000000123).UTC(), "dec": partialfilter.Decimal128{H: 0x3040000000000000, L: 15},
			"oid": partialfilter.ObjectID{1, 2, 3}, OrderKey: &document.Order{Keys: []string{"_id", "n", "p"}, Sub: map[string]*document.Order{"n": {Keys: []string{"z", "a"}}}}}
		docs = append(docs, edge, Doc{})
		spec, err := ParseSetWindowFields(map[string]any{"partitionBy": "$p", "sortBy": map[string]any{"t": int32(1)},
			"output": map[string]any{"s": map[string]any{"$sum": "$v", "window": map[string]any{"documents": []any{int32(-2), int32(1)}}}}})
		if err != nil {
			t.Fatal(err)
		}
		want, err := Collect(SetWindowFields(Slice(clone(docs)), spec, Options{}))
		if err != nil {
			t.Fatal(err)
		}
		small := Options{MaxMemory: 2 << 10 << r.IntN(4), AllowDiskUse: true, SpillDir: dir}
		// Some sorts merge their runs as they go, as one of a few
		// dozen runs would.
		maxOpenRuns = []int{64, 4, 8}[iter%3]
		got, err := Collect(SetWindowFields(Slice(clone(docs)), spec, small))
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		if !reflect.DeepEqual(got, want) {
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("iteration %d: document %d is\n%#v\nwant\n%#v", iter, i, got[i], want[i])
				}
			}
			t.Fatalf("iteration %d: %d documents, want %d", iter, len(got), len(want))
		}
		_, err = Collect(SetWindowFields(Slice(clone(docs)), spec, Options{MaxMemory: small.MaxMemory}))
		if !errors.Is(err, mongoerr.New(292, "")) {
			t.Fatalf("iteration %d: without AllowDiskUse: %v, want 292", iter, err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left in the spill directory", len(left))
	}
}

// clone copies docs' maps: a stage may change the documents it reads.
func clone(docs []Doc) []Doc {
	out := make([]Doc, len(docs))
	for i, d := range docs {
		c := make(Doc, len(d))
		for k, v := range d {
			c[k] = v
		}
		out[i] = c
	}
	return out
}

// TestSortSpillOpenRuns: a sort that spills many runs keeps at most
// maxOpenRuns of them open, merging them as they come.
func TestSortSpillOpenRuns(t *testing.T) {
	t.Cleanup(func() { maxOpenRuns = 64 })
	maxOpenRuns = 3
	docs := randomDocs(rand.New(rand.NewPCG(5, 6)), 500, false)
	s := &sortingIter{in: Slice(docs), order: order{sortBy: []SortKey{{Field: "t"}}}, max: 1 << 10, spill: &spillOptions{dir: t.TempDir()}}
	if err := s.fill(); err != nil {
		t.Fatal(err)
	}
	if s.merge == nil || len(s.merge.runs) >= maxOpenRuns {
		t.Fatalf("runs open after the input: %v, want fewer than %d", s.merge, maxOpenRuns)
	}
	got, err := Collect(s)
	if err != nil || len(got) != len(docs) {
		t.Fatalf("%d documents, %v; want %d", len(got), err, len(docs))
	}
	for i := 1; i < len(got); i++ {
		if c := s.order.compare(got[i-1], got[i]); c > 0 || c == 0 && got[i-1]["_id"].(int32) > got[i]["_id"].(int32) {
			t.Fatalf("documents %d and %d out of order: %v, %v", i-1, i, got[i-1], got[i])
		}
	}
}

// TestSpillsClose: a pipeline given up in the middle of a spilled sort
// closes its runs' files through Options.Spills, at once.
func TestSpillsClose(t *testing.T) {
	docs := randomDocs(rand.New(rand.NewPCG(7, 8)), 500, false)
	spec, err := ParseSetWindowFields(map[string]any{"sortBy": map[string]any{"t": int32(1)},
		"output": map[string]any{"n": map[string]any{"$count": map[string]any{}, "window": map[string]any{"documents": []any{int32(-1), int32(0)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	sp := &Spills{}
	it := SetWindowFields(Slice(docs), spec, Options{MaxMemory: 4 << 10, AllowDiskUse: true, SpillDir: t.TempDir(), Spills: sp})
	if d, err := it.Next(); err != nil || d == nil {
		t.Fatalf("first document: %v, %v", d, err)
	}
	sp.mu.Lock()
	runs := slices.Clone(sp.runs)
	sp.mu.Unlock()
	if len(runs) == 0 {
		t.Fatal("no run spilled")
	}
	sp.Close()
	sp.Close() // twice is harmless
	for i, r := range runs {
		if err := r.f.Close(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("run %d still open after Close: %v", i, err)
		}
	}
}
