package timeseries

import (
	"fmt"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// insertWithin inserts one measurement of sensor a at time ts into
// collection name and fails the test when the insert has not returned
// within d; stuck is called then, to let it finish.
func insertWithin(t *testing.T, db *DB, name string, ts int64, d time.Duration, stuck func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := db.Insert(ctx, name, Batch{Measurements: []model.Measurement{{Time: ts, Meta: sensor("a"), Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}}, InsertOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(d):
		stuck()
		<-done
		t.Fatalf("an insert into %q waited more than %v", name, d)
	}
}

// TestDropDoesNotHoldWriters: a drop whose store flush cannot finish (a
// full disk; here the sstable it writes waits) does not hold the writers
// of other collections; it returns once the flush does.
func TestDropDoesNotHoldWriters(t *testing.T) {
	fs := newBlockFS(vfs.Default)
	db := openTest(t, t.TempDir(), func(o *Options) { o.FS = fs })
	defer db.Close()
	defer fs.release()
	mustCreate(t, db, "a", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	mustCreate(t, db, "b", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	insertWithin(t, db, "a", t0, 5*time.Second, func() {})
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}

	fs.block()
	dropped := make(chan error, 1)
	go func() { dropped <- db.DropCollection(ctx, "a") }()
	select {
	case <-fs.waiting:
	case err := <-dropped:
		t.Fatalf("the drop returned (%v) without flushing the store", err)
	}
	insertWithin(t, db, "b", t0, 5*time.Second, fs.release)
	select {
	case err := <-dropped:
		t.Fatalf("the drop returned (%v) before its flush finished", err)
	default:
	}
	fs.release()
	if err := <-dropped; err != nil {
		t.Fatal(err)
	}
	if _, err := db.Describe(ctx, "a"); err == nil {
		t.Fatal("a is still there after its drop")
	}
	if info, err := db.Describe(ctx, "b"); err != nil || info.Count != 1 {
		t.Fatalf("b: count %d, %v; want 1", info.Count, err)
	}
}

// TestDeleteFieldTypesWithWriters: a delete recomputes the collection's
// field types (here reading every stored bucket, as the only string value
// of v goes) with writers of the collection let in; a string value of v
// inserted meanwhile keeps v's string type.
func TestDeleteFieldTypesWithWriters(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.BucketMaxCount = 10 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) int64 { return t0.Add(time.Duration(i) * time.Minute).UnixNano() }
	var ms []model.Measurement
	for i := range 50 {
		v := model.Int(int64(i))
		if i == 17 {
			v = model.String("oops")
		}
		ms = append(ms, model.Measurement{Time: at(i), Meta: sensor("a"), Fields: []model.Field{{Name: "v", Value: v}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}

	scanning, resume := make(chan struct{}), make(chan struct{})
	db.hooks.fieldTypesScan = func() {
		close(scanning)
		<-resume
	}
	deleted := make(chan error, 1)
	go func() {
		_, err := db.Delete(ctx, "m", mustFilter(t, `{"t": {"$gte": {"$date": "2024-01-01T00:17:00Z"}, "$lt": {"$date": "2024-01-01T00:18:00Z"}}}`), DeleteOptions{})
		deleted <- err
	}()
	select {
	case <-scanning:
	case err := <-deleted:
		t.Fatalf("the delete returned (%v) without reading the stored buckets", err)
	}
	release := func() {
		select {
		case <-resume:
		default:
			close(resume)
		}
	}
	defer release()
	insertWithin(t, db, "m", at(60), 5*time.Second, release)
	// A string value of v, inserted while the recomputation runs.
	done := make(chan error, 1)
	go func() {
		_, err := db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{{Time: at(61), Meta: sensor("b"), Fields: []model.Field{{Name: "v", Value: model.String("late")}}}}}, InsertOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		release()
		t.Fatal("an insert waited for the delete's recomputation of field types")
	}
	release()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if got := fieldsOf(t, db, "m")["v"]; len(got) != 2 {
		t.Fatalf("v's types after the delete and a racing string insert: %v; want long and string", got)
	}
}

// TestCloseSkipsMergeAfterAbandonedFlush: when Close abandons the
// background checkpoint's store flush (one that cannot finish), the
// checkpointer stops there and runs no merge pass.
func TestCloseSkipsMergeAfterAbandonedFlush(t *testing.T) {
	fs := newBlockFS(vfs.Default)
	db := openTest(t, t.TempDir(), func(o *Options) { o.FS = fs })
	defer fs.release()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, ts := range []int64{0, 1, 2, int64(5 * time.Hour)} { // the last seals a small bucket
		insertWithin(t, db, "m", t0+ts, 5*time.Second, func() {})
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if !db.mergePending.Load() {
		t.Fatal("the checkpoint marked no small bucket to merge")
	}
	insertWithin(t, db, "m", t0+int64(5*time.Hour)+1, 5*time.Second, func() {})

	fs.block()
	db.wakeCheckpointer()
	<-fs.waiting // the background checkpoint's flush
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	<-db.done
	fs.release() // for the final checkpoint
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := db.stats.mergeReads.Load(); n != 0 {
		t.Fatalf("a merge pass read %d series after the flush was abandoned", n)
	}
}

// TestMemoryWaitNoFalseDiskFull: a writer waiting for memory is not told
// the disk is full when the mark of a skipped checkpoint is stale (space
// was freed since): it waits for the checkpoint that frees memory.
func TestMemoryWaitNoFalseDiskFull(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.MemoryBudget = 1 << 20 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var ms []model.Measurement
	for i := range 20000 {
		ms = append(ms, model.Measurement{Time: t0 + int64(i)*1e9, Meta: sensor(fmt.Sprint(i % 500)),
			Fields: []model.Field{{Name: "v", Value: model.Float(float64(i))}, {Name: "pad", Value: model.String(fmt.Sprintf("%0100d", i))}}})
	}
	// No checkpoint runs until the writer has waited a while (one woken by
	// this insert would free the memory before the writer below waits);
	// the last one was skipped for lack of space, which there is now.
	db.maintMu.Lock()
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		db.maintMu.Unlock()
		t.Fatal(err)
	}
	if db.headMem.Load() <= db.opts.MemoryBudget {
		db.maintMu.Unlock()
		t.Fatalf("%d bytes in memory, not over the budget", db.headMem.Load())
	}
	db.noRoom.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := db.Insert(ctx, "m", Batch{Measurements: ms[:1]}, InsertOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		db.maintMu.Unlock()
		t.Fatalf("the writer stopped waiting for memory: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	db.maintMu.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("insert after the checkpoint: %v", err)
	}
}

// TestInsertsRaceDDL: inserts look up their collection, options and series
// without DB.mu (DB.coll, lookupMu) while collMod changes the options, new
// series are added, and other collections are created and dropped. Under
// the race detector a read of these without its lock fails the test; every
// insert either stores all its rows or (the dropped collection) finds no
// collection, and the rows stored are all there.
func TestInsertsRaceDDL(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	const writers, batches = 3, 40
	errs := make(chan error, writers+2)
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		go func() {
			for b := 0; b < batches; b++ {
				var ms []model.Measurement
				for i := 0; i < 50; i++ { // new series in every batch
					ms = append(ms, model.Measurement{Time: t0 + int64(b*50+i)*1e9, Meta: sensor(fmt.Sprint(w, "-", b, "-", i%7)), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
				}
				res, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{})
				if err == nil && res.Inserted != len(ms) {
					err = fmt.Errorf("%d of %d inserted: %v", res.Inserted, len(ms), res.Errors)
				}
				if err != nil {
					errs <- err
					return
				}
				if _, err := db.Insert(ctx, "other", Batch{Measurements: ms[:1]}, InsertOptions{}); err != nil && mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	go func() { // collMod of the options the inserts read
		defer func() { errs <- nil }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ttl := int64(1<<30 + i%1000) // decades: nothing expires
			if _, err := db.CollMod(ctx, "m", CollModOptions{ExpireAfterSeconds: &ttl}); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // another collection created and dropped
		defer func() { errs <- nil }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := db.CreateCollection(ctx, "other", CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "s"}}); err != nil {
				errs <- err
				return
			}
			if err := db.DropCollection(ctx, "other"); err != nil {
				errs <- err
				return
			}
		}
	}()
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			close(stop)
			t.Fatal(err)
		}
	}
	close(stop)
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if rows := findRows(t, db, "m", FindOptions{}); len(rows) != writers*batches*50 {
		t.Fatalf("%d rows, want %d", len(rows), writers*batches*50)
	}
}
