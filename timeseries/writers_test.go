package timeseries

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
)

// insertWithin inserts one measurement of sensor a at time ts into
// collection name and fails the test when the insert has not returned
// within d; stuck is called then, to let it finish.
func insertWithin(t *testing.T, db *DB, name string, ts int64, d time.Duration, stuck func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := db.Insert(ctx, name, []Measurement{{Time: ts, Meta: sensor("a"), Fields: []Field{{"v", Int(1)}}}}, InsertOptions{})
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
	mustCreate(t, db, "a", TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	mustCreate(t, db, "b", TimeSeriesOptions{TimeField: "t", MetaField: "s"})
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
