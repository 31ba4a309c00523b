package timeseries

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"

	"github.com/cockroachdb/pebble"
)

// snapshotState is what a DB holds, as reads see it: each collection's
// rows and documents, and its indexes.
func snapshotState(t *testing.T, db *DB) string {
	t.Helper()
	infos, err := db.ListCollections(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for _, info := range infos {
		specs, err := db.ListIndexes(ctx, info.Name)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range specs {
			names = append(names, s.Name)
		}
		out += fmt.Sprintf("collection %s count %d indexes %v\n", info.Name, info.Count, names)
		if info.Options.TimeSeries != nil {
			for _, r := range findRows(t, db, info.Name, FindOptions{}) {
				out += r.String() + "\n"
			}
			continue
		}
		ids, _ := findIDs(t, db, info.Name, FindOptions{})
		slices.Sort(ids)
		out += fmt.Sprint(ids) + "\n"
	}
	return out
}

func insertSensors(t *testing.T, db *DB, name string, from, n int, meta string) {
	t.Helper()
	ms := make([]model.Measurement, n)
	for i := range ms {
		ms[i] = model.Measurement{Time: int64(from+i) * 1e9, Meta: fmt.Sprintf(`{"id":%q}`, fmt.Sprint(meta, i%7)),
			Fields: []model.Field{{Name: "v", Value: model.Float(float64(from + i))}}}
	}
	if res, err := db.Insert(ctx, name, Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
}

// TestCheckpointToReplaceFrom copies one DB's content, buckets still in
// memory and documents among it, into another DB with content of its own
// and writes in memory, and checks that the second then reads as the
// first, writes on, and keeps both across a restart and a crash.
func TestCheckpointToReplaceFrom(t *testing.T) {
	a := openTest(t, t.TempDir(), nil)
	defer a.Close()
	mustCreate(t, a, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	insertSensors(t, a, "m", 0, 500, "a")
	if err := a.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	insertSensors(t, a, "m", 500, 300, "a") // in memory only
	mustPlain(t, a, "p", CollectionOptions{})
	insertDocs(t, a, "p", `{"_id": 1, "x": 1}`, `{"_id": 2, "x": 2}`)
	ttl := int64(3600)
	if _, _, err := a.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{Field: "x", Direction: 1}}, ExpireAfterSeconds: &ttl}); err != nil {
		t.Fatal(err)
	}
	want := snapshotState(t, a)

	snap := filepath.Join(t.TempDir(), "snap")
	if err := a.CheckpointTo(snap); err != nil {
		t.Fatal(err)
	}
	// The copy is the state at the call: later writes are not in it.
	insertSensors(t, a, "m", 800, 10, "late")

	bdir := t.TempDir()
	b := openTest(t, bdir, nil)
	mustCreate(t, b, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "other"})
	insertSensors(t, b, "m", 0, 50, "b")
	mustCreate(t, b, "gone", model.TimeSeriesOptions{TimeField: "t"})
	if err := b.ReplaceFrom(snap); err != nil {
		t.Fatal(err)
	}
	if got := snapshotState(t, b); got != want {
		t.Fatalf("after ReplaceFrom:\n%s\nwant:\n%s", got, want)
	}
	// It writes on: new series, buckets and documents with ids of their
	// own, kept by a crash (the log written since the restore is
	// replayed, the one before it is not) and by a clean restart.
	insertSensors(t, b, "m", 900, 20, "new")
	insertDocs(t, b, "p", `{"_id": 3, "x": 3}`)
	want2 := snapshotState(t, b)
	crash(b)
	b = openTest(t, bdir, nil)
	if got := snapshotState(t, b); got != want2 {
		t.Fatalf("after a crash:\n%s\nwant:\n%s", got, want2)
	}
	insertSensors(t, b, "m", 1000, 5, "more")
	want3 := snapshotState(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTest(t, bdir, nil)
	defer b.Close()
	if got := snapshotState(t, b); got != want3 {
		t.Fatalf("after a restart:\n%s\nwant:\n%s", got, want3)
	}
}

// TestReplaceFromInterrupted: a store whose restore did not finish is
// refused at Open, and a ReplaceFrom over it completes it.
func TestReplaceFromInterrupted(t *testing.T) {
	a := openTest(t, t.TempDir(), nil)
	mustCreate(t, a, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	insertSensors(t, a, "m", 0, 100, "a")
	want := snapshotState(t, a)
	snap := filepath.Join(t.TempDir(), "snap")
	if err := a.CheckpointTo(snap); err != nil {
		t.Fatal(err)
	}
	a.Close()

	dir := t.TempDir()
	b := openTest(t, dir, nil)
	b.Close()
	// The first batch of a restore, and nothing after it.
	p, err := pebble.Open(filepath.Join(dir, "store"), &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Set(keyRestoring, nil, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := Open(Options{Dir: dir, NoSync: true}); !errors.Is(err, ErrRestoreInterrupted) {
		t.Fatalf("open of an interrupted restore: %v, want ErrRestoreInterrupted", err)
	}

	// A DB that finishes it: one opened on an empty directory next to it
	// stands for a member starting again from the snapshot.
	c := openTest(t, t.TempDir(), nil)
	defer c.Close()
	if err := c.ReplaceFrom(snap); err != nil {
		t.Fatal(err)
	}
	if got := snapshotState(t, c); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if err := c.ReplaceFrom(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("ReplaceFrom of a missing directory succeeded")
	}
	if got := snapshotState(t, c); got != want {
		t.Fatalf("a failed ReplaceFrom changed the content:\n%s", got)
	}
}

// With ExternalLog the engine writes no log: a clean close keeps every
// write (its checkpoint), a crash keeps what the last checkpoint holds.
func TestExternalLog(t *testing.T) {
	dir := t.TempDir()
	ext := func(o *Options) { o.ExternalLog = true }
	db := openTest(t, dir, ext)
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	insertSensors(t, db, "m", 0, 100, "a")
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	logged := db.wal.Size()
	insertSensors(t, db, "m", 100, 50, "b")
	mustPlain(t, db, "p", CollectionOptions{})
	insertDocs(t, db, "p", `{"_id": 1}`)
	if got := db.wal.Size(); got != logged {
		t.Fatalf("the log grew from %d to %d bytes", logged, got)
	}
	want := snapshotState(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, ext)
	if got := snapshotState(t, db); got != want {
		t.Fatalf("after a clean close:\n%s\nwant:\n%s", got, want)
	}
	// A crash loses what came after the last checkpoint.
	insertSensors(t, db, "m", 200, 10, "c")
	crash(db)
	db = openTest(t, dir, ext)
	defer db.Close()
	if got := snapshotState(t, db); got != want {
		t.Fatalf("after a crash:\n%s\nwant what the last checkpoint held:\n%s", got, want)
	}
}

// TestLookupsRaceReplaceFrom: inserts and describes look collections up
// without DB.mu (DB.coll) while ReplaceFrom swaps the collection map; under
// the race detector a swap without DB.coll fails the test. Every insert
// stores its rows, before or after a restore.
func TestLookupsRaceReplaceFrom(t *testing.T) {
	a := openTest(t, t.TempDir(), nil)
	defer a.Close()
	mustCreate(t, a, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	insertSensors(t, a, "m", 0, 100, "a")
	snap := filepath.Join(t.TempDir(), "snap")
	if err := a.CheckpointTo(snap); err != nil {
		t.Fatal(err)
	}
	b := openTest(t, t.TempDir(), nil)
	defer b.Close()
	mustCreate(t, b, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := b.Describe(ctx, "m"); err != nil {
				done <- err
				return
			}
			ms := []model.Measurement{{Time: int64(i+1) * 1e9, Meta: sensor("w"), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}}}
			if res, err := b.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil || res.Inserted != 1 {
				done <- fmt.Errorf("insert %d: %v, %+v", i, err, res)
				return
			}
		}
	}()
	for range 3 {
		if err := b.ReplaceFrom(snap); err != nil {
			close(stop)
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestLookupWaitsForReplaceFrom: a lookup while ReplaceFrom loads the new
// catalog waits for it and finds the collection, rather than finding none
// in between.
func TestLookupWaitsForReplaceFrom(t *testing.T) {
	a := openTest(t, t.TempDir(), nil)
	defer a.Close()
	mustCreate(t, a, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	snap := filepath.Join(t.TempDir(), "snap")
	if err := a.CheckpointTo(snap); err != nil {
		t.Fatal(err)
	}
	b := openTest(t, t.TempDir(), nil)
	defer b.Close()
	mustCreate(t, b, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	got := make(chan error, 1)
	b.hooks.catalogCleared = func() {
		go func() {
			_, err := b.Collection("m")
			got <- err
		}()
		time.Sleep(50 * time.Millisecond) // the lookup runs meanwhile
	}
	if err := b.ReplaceFrom(snap); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("a lookup during ReplaceFrom: %v", err)
	}
}

// TestReplaceFromInFlightWrites: an insert and a plain collection's write
// that made their log records for the content ReplaceFrom replaces, and
// reach the log after its cut, log nothing of the old content (such a
// record would be replayed over the new one, its series ids naming series
// the new content does not hold): the insert is made again over the new
// content, where the collection of its name takes it, or fails where the
// new content has no such collection. A crash right after leaves a store
// that opens with the new content and what was written to it.
func TestReplaceFromInFlightWrites(t *testing.T) {
	a := openTest(t, t.TempDir(), nil)
	defer a.Close()
	mustCreate(t, a, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	insertSensors(t, a, "m", 0, 70, "a")
	snap := filepath.Join(t.TempDir(), "snap")
	if err := a.CheckpointTo(snap); err != nil {
		t.Fatal(err)
	}
	want := rowStrings(findRows(t, a, "m", FindOptions{}))

	for _, plain := range []bool{false, true} {
		bdir := t.TempDir()
		b := openTest(t, bdir, nil)
		mustCreate(t, b, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
		if _, err := b.CreateCollection(ctx, "p", CollectionOptions{}); err != nil {
			t.Fatal(err)
		}
		insertSensors(t, b, "m", 0, 200, "b") // series b0..b6, made durable below
		if err := b.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		reached, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		b.hooks.logging = func() {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
		done := make(chan error, 1)
		go func() {
			var err error
			if plain {
				_, err = b.Insert(ctx, "p", Batch{Documents: []document.Doc{{"_id": int64(1), "x": int64(2)}}}, InsertOptions{})
			} else {
				_, err = b.Insert(ctx, "m", Batch{Measurements: []model.Measurement{{Time: 500e9, Meta: `{"id":"b3"}`,
					Fields: []model.Field{{Name: "v", Value: model.Float(1)}}}}}, InsertOptions{})
			}
			done <- err
		}()
		<-reached
		if err := b.ReplaceFrom(snap); err != nil {
			t.Fatal(err)
		}
		close(release)
		err := <-done
		wantRows := want
		if plain {
			// The new content has no collection "p".
			if mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
				t.Fatalf("plain: the write across ReplaceFrom: %v", err)
			}
		} else {
			if err != nil {
				t.Fatalf("the insert across ReplaceFrom: %v", err)
			}
			wantRows = append(slices.Clone(want), row{t: 500e9, meta: strconv.Quote(`{"id":"b3"}`), vals: "v=1 "}.String())
			slices.Sort(wantRows)
		}
		b.hooks.logging = nil
		crash(b)
		b = openTest(t, bdir, nil)
		if got := rowStrings(findRows(t, b, "m", FindOptions{})); !slices.Equal(got, wantRows) {
			t.Fatalf("plain %v: after a crash: %d rows, want %d:\n%v", plain, len(got), len(wantRows), got)
		}
		if _, err := b.Collection("p"); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
			t.Fatalf("plain %v: the old content's plain collection after a crash: %v", plain, err)
		}
		b.Close()
	}
}

// TestDropThenReplaceFromInFlightInsert: an insert that made its record
// for a collection DropCollection then removed, and that reaches the log
// after ReplaceFrom has brought a collection of that name (and id) back,
// logs nothing of the dropped one: it goes to the collection of its name
// now, and after a crash that collection holds it once.
func TestDropThenReplaceFromInFlightInsert(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir, nil)
	mustCreate(t, b, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	insertSensors(t, b, "m", 0, 70, "a")
	snap := filepath.Join(t.TempDir(), "snap")
	if err := b.CheckpointTo(snap); err != nil {
		t.Fatal(err)
	}
	want := append(rowStrings(findRows(t, b, "m", FindOptions{})), row{t: 500e9, meta: strconv.Quote(`{"id":"a3"}`), vals: "v=1 "}.String())
	slices.Sort(want)
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.hooks.logging = func() { once.Do(func() { close(reached); <-release }) }
	done := make(chan error, 1)
	go func() {
		_, err := b.Insert(ctx, "m", Batch{Measurements: []model.Measurement{{Time: 500e9, Meta: `{"id":"a3"}`,
			Fields: []model.Field{{Name: "v", Value: model.Float(1)}}}}}, InsertOptions{})
		done <- err
	}()
	<-reached
	if err := b.DropCollection(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if err := b.ReplaceFrom(snap); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the insert across a drop and ReplaceFrom: %v", err)
	}
	b.hooks.logging = nil
	if got := rowStrings(findRows(t, b, "m", FindOptions{})); !slices.Equal(got, want) {
		t.Fatalf("before a crash: %d rows, want %d", len(got), len(want))
	}
	crash(b)
	b = openTest(t, dir, nil)
	if got := rowStrings(findRows(t, b, "m", FindOptions{})); !slices.Equal(got, want) {
		t.Fatalf("after a crash: %d rows, want %d", len(got), len(want))
	}
}

// TestReplaceFromDropsPendingPre: what a meta update whose checkpoint
// failed left for the next checkpoint to write (its stored buckets moved
// to the new series) is of the content ReplaceFrom replaces: the next
// checkpoint leaves the new content's stored buckets as they are.
func TestReplaceFromDropsPendingPre(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.BucketMaxCount = 8 })
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "n"})
	var ms []model.Measurement
	for i := range 40 {
		ms = append(ms, model.Measurement{Time: int64(i) * 60e9, Meta: int64(i%2 + 1), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snap")
	if err := db.CheckpointTo(snap); err != nil {
		t.Fatal(err)
	}
	want := metaRows(t, db, "m")
	db.hooks.checkpointWrite = func() error { return errors.New("injected") }
	if _, err := db.Update(ctx, "m", Update{Filter: mustFilter(t, `{"n": 1}`), Operators: mustUpdate(t, `{"$set": {"n": 9}}`), Multi: true}); err == nil {
		t.Fatal("the update's checkpoint did not fail")
	}
	db.hooks.checkpointWrite = nil
	if len(db.pendingPre) == 0 {
		t.Fatal("the failed update left nothing for the next checkpoint: the test tests nothing")
	}
	if err := db.ReplaceFrom(snap); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := metaRows(t, db, "m"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after ReplaceFrom and a checkpoint: %v, want %v", got, want)
	}
}
