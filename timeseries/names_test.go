package timeseries

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/hourglassdb/hourglass/model"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
)

// TestNameTable checks that buckets store field names as references into
// the collection's name table, and that data written before the table
// existed (names in every bucket, no table in the catalog record) reads
// back and takes new fields after a restart.
func TestNameTable(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	insert := func(db *DB, from, n int, fields ...string) {
		t.Helper()
		var ms []model.Measurement
		for i := from; i < from+n; i++ {
			m := model.Measurement{Time: int64(i) * 10e9, Meta: fmt.Sprintf("s%d", i%3)}
			for j, f := range fields {
				m.Fields = append(m.Fields, model.Field{Name: f, Value: model.Int(int64(i * (j + 1)))})
			}
			ms = append(ms, m)
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	insert(db, 0, 900, "b", "a")
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ab := FindOptions{Fields: []string{"a", "b"}, Filter: mustFilter(t, `{"ts": {"$lt": {"$date": "1970-01-01T02:30:00Z"}}}`)}
	want := findRows(t, db, "m", ab)
	db.mu.RLock()
	names := slices.Clone(db.coll.byName["m"].names)
	db.mu.RUnlock()
	if !slices.Equal(names, []string{"b", "a"}) {
		t.Fatalf("name table %q, want [b a] (first seen first)", names)
	}

	// Every bucket refers to the table; rewrite them all as buckets that
	// hold their names, and drop the table from the catalog record: the
	// store as it was before the table.
	var enc bucket.Encoder
	var r bucket.Reader
	rewrites := 0
	for _, space := range []byte{spaceBucket, spaceOpen} {
		it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{space}, UpperBound: []byte{space + 1}})
		if err != nil {
			t.Fatal(err)
		}
		for it.First(); it.Valid(); it.Next() {
			v := it.Value()
			var cols bucket.Columns
			switch {
			case space == spaceOpen && v[0] == bucket.VersionSnapshot:
				// An open bucket's frozen rows, written as a bucket
				// holding its names as a store of format 1 did.
				kp, err := parseBucketKey(it.Key())
				if err != nil {
					t.Fatal(err)
				}
				db.mu.RLock()
				b, err := decodeSnapshot(v, kp, db.coll.byName["m"])
				db.mu.RUnlock()
				if err != nil {
					t.Fatal(err)
				}
				cols = b.capture().cols
			case v[0] != bucket.VersionRefs:
				t.Fatalf("bucket %x has version %d", it.Key(), v[0])
			default:
				if err := r.ResetNames(v, names); err != nil {
					t.Fatal(err)
				}
				if cols, err = decodeAll(&r); err != nil {
					t.Fatal(err)
				}
			}
			old, err := enc.Encode(nil, &cols)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.pdb.Set(slices.Clone(it.Key()), old, pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			rewrites++
		}
		it.Close()
	}
	if rewrites < 6 {
		t.Fatalf("%d buckets rewritten", rewrites)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	pdb, err := pebble.Open(dir+"/store", &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, closer, err := pdb.Get(catalogKey("m"))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(v, &rec); err != nil {
		t.Fatal(err)
	}
	closer.Close()
	if rec["fieldNames"] == nil {
		t.Fatalf("no name table in the catalog record: %v", rec)
	}
	delete(rec, "fieldNames")
	v, _ = json.Marshal(rec)
	if err := pdb.Set(catalogKey("m"), v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := pdb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, the table is rebuilt from the field types (sorted), old
	// buckets read, and a new field joins the table.
	db = openTest(t, dir, nil)
	defer db.Close()
	if got := findRows(t, db, "m", ab); len(want) != 900 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the rewrite: %d rows, want %d", len(got), len(want))
	}
	insert(db, 900, 600, "c", "a")
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	db.mu.RLock()
	names = slices.Clone(db.coll.byName["m"].names)
	db.mu.RUnlock()
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("name table %q, want [a b c]", names)
	}
	if got := findRows(t, db, "m", FindOptions{}); len(got) != 1500 {
		t.Fatalf("%d rows after new data", len(got))
	}
	if got := findRows(t, db, "m", ab); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("old rows changed after new data")
	}
	// Deletes that rewrite part of a bucket keep it readable.
	if _, err := db.Delete(ctx, "m", mustFilter(t, `{"ts": {"$gte": {"$date": "1970-01-01T02:00:00Z"}, "$lt": {"$date": "1970-01-01T02:10:00Z"}}}`), DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := findRows(t, db, "m", FindOptions{}); len(got) != 1500-60 {
		t.Fatalf("%d rows after a delete, want %d", len(got), 1500-60)
	}
}
