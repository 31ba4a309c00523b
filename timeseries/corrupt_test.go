package timeseries

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hourglassdb/hourglass/model"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries/wal"
)

// TestIsCorrupt checks that the corruption of every layer, and Pebble's, is
// corruption to IsCorrupt, and that other errors are not.
func TestIsCorrupt(t *testing.T) {
	for _, err := range []error{ErrCorrupt, bucket.ErrCorrupt, wal.ErrCorrupt, document.ErrCorrupt, pebble.ErrCorruption} {
		wrapped := fmt.Errorf("collection %q: %w: at 12", "c", err)
		if !IsCorrupt(wrapped) {
			t.Errorf("%v: not corruption", wrapped)
		}
		if err != pebble.ErrCorruption && !errors.Is(wrapped, mongoerr.ErrCorrupt) {
			t.Errorf("%v: not mongoerr.ErrCorrupt", wrapped)
		}
	}
	for _, err := range []error{ErrClosed, ErrNewerFormat, bucket.ErrVersion, mongoerr.New(mongoerr.BadValue, "x"), context.Canceled} {
		if IsCorrupt(err) {
			t.Errorf("%v is corruption", err)
		}
	}
}

// TestFindCorruptBucket overwrites a stored bucket (sealed or open) in Pebble and checks that a
// find over it fails with an error that is corruption.
// damagedStore writes a collection "c" of 2500 measurements of sensor "a",
// one a second from the epoch, and overwrites its first stored bucket with
// bytes that say one row and no field and end there. It returns the
// directory.
func damagedStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "c", CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}}); err != nil {
		t.Fatal(err)
	}
	ms := make([]model.Measurement, 2500)
	for i := range ms {
		ms[i] = model.Measurement{Time: int64(i) * 1e9, Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}}
	}
	if _, err := db.Insert(ctx, "c", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	p, err := pebble.Open(filepath.Join(dir, "store"), &pebble.Options{Logger: quietPebble{t}})
	if err != nil {
		t.Fatal(err)
	}
	it, err := p.NewIter(&pebble.IterOptions{LowerBound: []byte{0x03}, UpperBound: []byte{0x05}})
	if err != nil {
		t.Fatal(err)
	}
	var key []byte
	if it.First() {
		key = append(key, it.Key()...)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if key == nil {
		t.Fatal("no bucket in Pebble")
	}
	// A bucket that says it holds one row and no field, and ends there.
	if err := p.Set(key, []byte{bucket.VersionRefs, 1}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	return dir
}

func TestFindCorruptBucket(t *testing.T) {
	dir := damagedStore(t)
	ctx := context.Background()
	db, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cur, err := db.Find(ctx, "c", FindOptions{})
	if err == nil {
		for cur.Next() {
		}
		err = cur.Err()
		cur.Close()
	}
	if !IsCorrupt(err) || !errors.Is(err, bucket.ErrCorrupt) {
		t.Fatalf("find over a damaged bucket: %v, want bucket corruption", err)
	}
}

// quietPebble drops Pebble's info lines and fails the test on a fatal one.
type quietPebble struct{ t *testing.T }

func (quietPebble) Infof(string, ...any) {}

func (q quietPebble) Fatalf(format string, args ...any) { q.t.Fatalf(format, args...) }

// A delete that fails on a damaged stored bucket has still removed its rows
// in memory (it is logged): the collection's count drops by them, so the
// next checkpoint does not persist a count too high.
func TestDeleteFailureKeepsCount(t *testing.T) {
	dir := damagedStore(t)
	ctx := context.Background()
	db, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before, err := db.Describe(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	// Ten more rows, in memory, after the stored ones.
	more := make([]model.Measurement, 10)
	for i := range more {
		more[i] = model.Measurement{Time: int64(5000+i) * 1e9, Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}
	}
	if _, err := db.Insert(ctx, "c", Batch{Measurements: more}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	// From the middle of the damaged bucket's span to after the new rows:
	// the stored part must be decoded and fails.
	f, err := partialfilter.ParseJSON([]byte(`{"t": {"$gte": {"$date": "1970-01-01T00:00:00.5Z"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "c", f, DeleteOptions{}); err == nil {
		t.Fatal("a delete over a damaged bucket succeeded")
	}
	after, err := db.Describe(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	// Left: the two sealed buckets in Pebble (rows 0-1999; the batch that
	// would have rewritten them failed). Gone: everything in memory, the
	// open bucket reloaded at open (rows 2000-2499) and the 10 new rows.
	if after.Count != 2000 || before.Count != 2500 {
		t.Fatalf("count %d before, %d after the failed delete; want 2500, then 2000", before.Count, after.Count)
	}
}
