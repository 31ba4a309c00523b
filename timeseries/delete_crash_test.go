package timeseries

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// crashCopy returns a copy of the store in dir as a crash at this instant
// leaves it: what Pebble has flushed (its memtables are lost: its own WAL
// is off) and the log as written.
func crashCopy(t *testing.T, db *DB, dir string) string {
	t.Helper()
	crashed := t.TempDir()
	if err := db.pdb.Checkpoint(filepath.Join(crashed, "store")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(crashed, "wal"), os.DirFS(filepath.Join(dir, "wal"))); err != nil {
		t.Fatal(err)
	}
	return crashed
}

// checkCount compares collection name's Describe count with the
// measurements a find returns and with want.
func checkCount(t *testing.T, db *DB, name string, want int) {
	t.Helper()
	info, err := db.Describe(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	found := len(findRows(t, db, name, FindOptions{}))
	if info.Count != int64(want) || found != want {
		t.Fatalf("%s: count %d, %d measurements found; want %d", name, info.Count, found, want)
	}
}

// TestDeleteCountAfterCrash: a delete removes buckets a compaction wrote,
// an unrelated catalog write (another collection created) flushes the
// store, and the process dies before the next checkpoint. Replaying the
// delete finds nothing left in Pebble to remove; the count recovered must
// still be what the collection holds.
func TestDeleteCountAfterCrash(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	defer db.Close()
	mustCreate(t, db, "a", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := make([]model.Measurement, 600) // 6 hours, one every 36 s
	for i := range ms {
		ms[i] = model.Measurement{Time: t0.Add(time.Duration(i) * 36 * time.Second).UnixNano(), Meta: "s",
			Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}}
	}
	if _, err := db.Insert(ctx, "a", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil { // what compact does
		t.Fatal(err)
	}
	n, err := db.Delete(ctx, "a", mustFilter(t, `{"t": {"$lt": {"$date": "2024-01-01T03:00:00Z"}}}`), DeleteOptions{})
	if err != nil || n != 300 {
		t.Fatalf("deleted %d, %v; want 300", n, err)
	}
	mustCreate(t, db, "other", model.TimeSeriesOptions{TimeField: "t"})
	checkCount(t, db, "a", 300)

	re := openTest(t, crashCopy(t, db, dir), nil)
	defer re.Close()
	checkCount(t, re, "a", 300)
	// Once more: the recovered store crashes again before a checkpoint.
	re2 := openTest(t, crashCopy(t, re, re.opts.Dir), nil)
	defer re2.Close()
	checkCount(t, re2, "a", 300)
}

// TestDeleteCountRandomCrashes runs random inserts, deletes (by time range
// or by a measurement field), checkpoints,
// compactions, store flushes and catalog writes on two collections, and at
// random points crashes (copies the store as a crash leaves it), reopens
// the copy and goes on there. After every reopen each collection's count
// must equal the measurements found and those of a model.
func TestDeleteCountRandomCrashes(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	db := openTest(t, dir, func(o *Options) { o.BucketMaxCount = 40 })
	defer func() { db.Close() }()
	names := []string{"a", "b"}
	for _, n := range names {
		mustCreate(t, db, n, model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	const hours = 12
	// expect: collection -> sensor -> times stored
	expect := map[string]map[string][]int64{"a": {}, "b": {}}
	others := 0
	crashes := 10
	if testing.Short() {
		crashes = 4
	}
	for cycle := 0; cycle < crashes; cycle++ {
		for step := 0; step < 12; step++ {
			coll := names[rng.Intn(len(names))]
			switch op := rng.Intn(10); {
			case op < 4:
				var ms []model.Measurement
				for range 1 + rng.Intn(150) {
					s := fmt.Sprintf("s%d", rng.Intn(3))
					tm := t0 + rng.Int63n(hours*int64(time.Hour))
					ms = append(ms, model.Measurement{Time: tm, Meta: s, Fields: []model.Field{{Name: "v", Value: model.Int(tm)}}})
					expect[coll][s] = append(expect[coll][s], tm)
				}
				if _, err := db.Insert(ctx, coll, Batch{Measurements: ms}, InsertOptions{}); err != nil {
					t.Fatal(err)
				}
			case op < 7:
				lo := t0 + rng.Int63n(hours*int64(time.Hour))
				hi := lo + rng.Int63n(4*int64(time.Hour))
				f := fmt.Sprintf(`{"t": {"$gte": {"$date": %q}, "$lt": {"$date": %q}}}`,
					time.Unix(0, lo).UTC().Format(time.RFC3339Nano), time.Unix(0, hi).UTC().Format(time.RFC3339Nano))
				var only string
				if rng.Intn(2) == 0 {
					only = fmt.Sprintf("s%d", rng.Intn(3))
					f = fmt.Sprintf(`{"m": %q, "t": {"$gte": {"$date": %q}, "$lt": {"$date": %q}}}`, only,
						time.Unix(0, lo).UTC().Format(time.RFC3339Nano), time.Unix(0, hi).UTC().Format(time.RFC3339Nano))
				}
				if rng.Intn(3) == 0 {
					// The same rows by their field v (= t): matched one
					// by one (a delete by filter, its own log record).
					f = fmt.Sprintf(`{"v": {"$gte": %d, "$lt": %d}}`, lo, hi)
					if only != "" {
						f = fmt.Sprintf(`{"m": %q, "v": {"$gte": %d, "$lt": %d}}`, only, lo, hi)
					}
				}
				var want int64
				for s, ts := range expect[coll] {
					if only != "" && s != only {
						continue
					}
					kept := ts[:0]
					for _, tm := range ts {
						if tm >= lo && tm < hi {
							want++
							continue
						}
						kept = append(kept, tm)
					}
					expect[coll][s] = kept
				}
				n, err := db.Delete(ctx, coll, mustFilter(t, f), DeleteOptions{})
				if err != nil || n != want {
					t.Fatalf("cycle %d: delete %s on %s: %d, %v; want %d", cycle, f, coll, n, err, want)
				}
			case op == 7:
				if err := db.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			case op == 8:
				// A memtable flush, or another collection's catalog write.
				if rng.Intn(2) == 0 {
					if err := db.pdb.Flush(); err != nil {
						t.Fatal(err)
					}
				} else {
					others++
					mustCreate(t, db, fmt.Sprintf("other%d", others), model.TimeSeriesOptions{TimeField: "t"})
				}
			default:
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		crashed := crashCopy(t, db, db.opts.Dir)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = openTest(t, crashed, func(o *Options) { o.BucketMaxCount = 40 })
		for _, n := range names {
			want := 0
			for _, ts := range expect[n] {
				want += len(ts)
			}
			checkCount(t, db, n, want)
		}
	}
}

// TestFailedCheckpointKeepsCount: a checkpoint that fails before its batch
// is applied leaves the catalog's count that of the stored buckets, so a
// delete's batch after it (which carries the catalog record) does not
// persist the rows in memory as stored: after a crash the count is exact.
func TestFailedCheckpointKeepsCount(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	defer db.Close()
	mustCreate(t, db, "a", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	insert := func(from, n int) {
		ms := make([]model.Measurement, n)
		for i := range ms {
			ms[i] = model.Measurement{Time: t0.Add(time.Duration(from+i) * 36 * time.Second).UnixNano(), Meta: "s",
				Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}}
		}
		if _, err := db.Insert(ctx, "a", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	insert(0, 600) // 6 hours
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	insert(800, 100) // in memory, from 8 h
	failed := errors.New("store write failed")
	db.hooks.checkpointWrite = func() error { return failed }
	if err := db.Checkpoint(); !errors.Is(err, failed) {
		t.Fatalf("checkpoint: %v, want the write's failure", err)
	}
	db.hooks.checkpointWrite = nil
	n, err := db.Delete(ctx, "a", mustFilter(t, `{"t": {"$lt": {"$date": "2024-01-01T03:00:00Z"}}}`), DeleteOptions{})
	if err != nil || n != 300 {
		t.Fatalf("deleted %d, %v; want 300", n, err)
	}
	mustCreate(t, db, "other", model.TimeSeriesOptions{TimeField: "t"}) // flushes the store
	checkCount(t, db, "a", 400)

	re := openTest(t, crashCopy(t, db, dir), nil)
	defer re.Close()
	checkCount(t, re, "a", 400)
}
