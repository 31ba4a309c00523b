package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseOrder(t *testing.T) {
	for _, o := range []Order{OrderAsc, OrderDesc, OrderShuffle} {
		if got, err := ParseOrder(o.String()); err != nil || got != o {
			t.Errorf("ParseOrder(%q) = %v, %v", o.String(), got, err)
		}
	}
	if _, err := ParseOrder("random"); !errors.Is(err, ErrInvalidWorkload) {
		t.Errorf("ParseOrder(random): %v", err)
	}
}

func TestLineReorderer(t *testing.T) {
	body := func(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }
	in := []string{"a 1", "b 2", "c 3", "d 4", "e 5", "f 6", "g 7", "h 8"}
	if got := newLineReorderer(OrderAsc).apply(body(in...)); string(got) != string(body(in...)) {
		t.Fatalf("asc: %q", got)
	}
	r := newLineReorderer(OrderDesc)
	first := r.apply(body(in...))
	rev := slices.Clone(in)
	slices.Reverse(rev)
	if string(first) != string(body(rev...)) {
		t.Fatalf("desc: %q", first)
	}
	// The result stays the caller's: the next batch is built elsewhere.
	second := r.apply(body("x 1", "y 2"))
	if string(first) != string(body(rev...)) || string(second) != string(body("y 2", "x 1")) {
		t.Fatalf("desc, second batch: %q, first now %q", second, first)
	}
	got := newLineReorderer(OrderShuffle).apply(body(in...))
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if slices.Equal(lines, in) {
		t.Fatalf("shuffle kept the order: %q", got)
	}
	slices.Sort(lines)
	if !slices.Equal(lines, in) {
		t.Fatalf("shuffle changed the lines: %q", got)
	}
}

// TestLoadOrder checks that Load sends each batch's lines in the order
// asked: the same lines, in reverse for OrderDesc.
func TestLoadOrder(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	w := Workload{Scale: 2}
	w.EnsureDefaults()
	w.End = w.Start.Add(10 * time.Minute)
	sent := map[Order][]string{}
	for _, o := range []Order{OrderAsc, OrderDesc} {
		bodies = nil
		if _, err := Load(context.Background(), LoadConfig{Workload: w, URL: srv.URL, Workers: 1, BatchRows: 30, Order: o}); err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			sent[o] = append(sent[o], b)
		}
	}
	if len(sent[OrderAsc]) != 4 || len(sent[OrderDesc]) != 4 {
		t.Fatalf("%d and %d batches, want 4 (120 rows by 30)", len(sent[OrderAsc]), len(sent[OrderDesc]))
	}
	for i, b := range sent[OrderAsc] {
		lines := strings.SplitAfter(b, "\n")
		lines = lines[:len(lines)-1]
		slices.Reverse(lines)
		if strings.Join(lines, "") != sent[OrderDesc][i] {
			t.Fatalf("batch %d sent in descending order is not the ascending one reversed", i)
		}
	}
}

// TestIngestOrder loads the same rows in time order, newest first and
// shuffled inside each batch: the store holds the same rows in as many
// buckets.
func TestIngestOrder(t *testing.T) {
	w := Workload{Scale: 3}
	w.EnsureDefaults()
	w.End = w.Start.Add(3 * time.Hour)
	var buckets []int64
	for _, o := range []Order{OrderAsc, OrderDesc, OrderShuffle} {
		// One writer: two may apply batches out of order.
		res, err := Ingest(context.Background(), IngestConfig{Workload: w, Dir: filepath.Join(t.TempDir(), "data"), BatchRows: 300, Workers: 1, NoSync: true, Order: o})
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != 3*1080 || res.Buckets <= 0 || res.BucketsPer1000() != 1000*float64(res.Buckets)/float64(res.Rows) {
			t.Fatalf("%v: %+v", o, res)
		}
		buckets = append(buckets, res.Buckets)
	}
	if buckets[1] != buckets[0] || buckets[2] != buckets[0] {
		t.Fatalf("buckets asc, desc, shuffle: %v", buckets)
	}
}
