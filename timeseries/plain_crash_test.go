package timeseries

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/partialfilter"
)

const (
	crashPlainEnv  = "HOURGLASS_CRASH_PLAIN"
	crashPlainDocs = 20 // documents per batch
)

// crashPlainChild inserts numbered batches of documents into a plain
// collection with two indexes (one multikey), and after each insert marks
// the previous batch done with an update; it prints a batch number once
// both are acknowledged.
func crashPlainChild(dir string) {
	start, _ := strconv.Atoi(os.Getenv("HOURGLASS_CRASH_START"))
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	db, err := Open(Options{Dir: dir, CheckpointInterval: 50 * time.Millisecond, CheckpointLogBytes: 256 << 10})
	if err != nil {
		fail(err)
	}
	if _, err := db.CreateCollection(ctx, "p", CollectionOptions{}); err != nil {
		fail(err)
	}
	for _, k := range []string{"k", "tags"} {
		if _, _, err := db.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{k, 1}}}); err != nil {
			fail(err)
		}
	}
	done, err := document.ParseUpdate(map[string]any{"$set": map[string]any{"done": true}, "$inc": map[string]any{"k": int64(1)}})
	if err != nil {
		fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	for b := start; ; b++ {
		docs := make([]document.Doc, crashPlainDocs)
		for i := range docs {
			docs[i] = document.Doc{"_id": fmt.Sprintf("%d-%d", b, i), "batch": int64(b), "k": int64(i % 7),
				"tags": []any{int64(i), int64(i + 1)}}
		}
		res, err := db.Insert(ctx, "p", Batch{Documents: docs}, InsertOptions{})
		if err != nil || len(res.Errors) > 0 {
			fail(fmt.Errorf("insert: %v %v", err, res.Errors))
		}
		if b > start {
			f := partialfilter.MustParseJSON(fmt.Sprintf(`{"batch": %d}`, b-1))
			if _, err := db.Update(ctx, "p", Update{Filter: f, Operators: done, Multi: true}); err != nil {
				fail(err)
			}
		}
		fmt.Fprintln(out, b)
		out.Flush()
	}
}

// TestPlainCrashRecovery kills the child with SIGKILL at random points and
// checks, after each restart: every acknowledged batch is there whole, no
// batch is there in part, the update acknowledged with it is there, and
// both indexes answer exactly what a collection scan answers.
func TestPlainCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	acked := map[int]bool{}
	from := map[int]int{} // the first batch of the child that acknowledged a batch
	next := 0
	for round := 0; round < 5; round++ {
		start := next
		for _, n := range runCrashChild(t, exe, rng, 300*time.Millisecond, crashChildEnv+"="+dir, crashPlainEnv+"=1", "HOURGLASS_CRASH_START="+strconv.Itoa(next)) {
			acked[n], from[n] = true, start
			next = max(next, n+1)
		}
		next += 1000

		db := openTest(t, dir, func(o *Options) { o.NoSync = false })
		perBatch := map[int]int{}
		doneBatch := map[int]int{}
		var all []document.Doc
		if _, err := EachDoc(db.Find(ctx, "p", FindOptions{}))(func(d document.Doc) error {
			all = append(all, d)
			b := int(d["batch"].(int64))
			perBatch[b]++
			if d["done"] == true {
				doneBatch[b]++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for b := range acked {
			if perBatch[b] != crashPlainDocs {
				t.Fatalf("round %d: acknowledged batch %d has %d of %d documents", round, b, perBatch[b], crashPlainDocs)
			}
			// Batch b's acknowledgement covered the update of b-1, if the
			// same child wrote both.
			if b > from[b] && doneBatch[b-1] != crashPlainDocs {
				t.Fatalf("round %d: batch %d acknowledged but batch %d is done in %d of %d documents", round, b, b-1, doneBatch[b-1], crashPlainDocs)
			}
		}
		for b, n := range perBatch {
			if n != crashPlainDocs {
				t.Fatalf("round %d: batch %d is there in part: %d documents", round, b, n)
			}
			if d := doneBatch[b]; d != 0 && d != crashPlainDocs {
				t.Fatalf("round %d: the update of batch %d is there in part: %d documents", round, b, d)
			}
		}
		if info, _ := db.Describe(ctx, "p"); info.Count != int64(len(all)) {
			t.Fatalf("round %d: count %d, %d documents stored", round, info.Count, len(all))
		}
		// The indexes answer as a scan does.
		for _, q := range []string{`{"k": %d}`, `{"tags": %d}`} {
			for v := 0; v < 9; v++ {
				f := mustFilter(t, fmt.Sprintf(q, v))
				ids, plan := findIDs(t, db, "p", FindOptions{Filter: f, Sort: []SortKey{{Field: "_id"}}})
				if plan.Stage != "IXSCAN" {
					t.Fatalf("%s did not use an index: %+v", f, plan)
				}
				var want []string
				for _, d := range all {
					if f.Match(d) {
						want = append(want, renderValue(d["_id"]))
					}
				}
				if strings.Join(ids, ",") != strings.Join(want, ",") {
					t.Fatalf("round %d: %s through the index: %d documents, a scan finds %d", round, f, len(ids), len(want))
				}
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d batches acknowledged so far, %d stored", round, len(acked), len(perBatch))
	}
}
