package timeseries

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// dirSums returns the SHA-256 of every file under dir, by path.
func dirSums(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sums[p] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// A store reopened with less free space than its reserve opens read-only
// and answers reads with everything its log holds: inserts, a delete of
// stored measurements, document writes and a document delete, all applied
// in memory; its store directory is left as it was. Writes are refused
// with OutOfDiskSpace, and a later open with space free replays the log
// into the store on disk.
func TestReadOnlyOpenReplay(t *testing.T) {
	for _, withDelete := range []bool{false, true} {
		t.Run(fmt.Sprint("delete=", withDelete), func(t *testing.T) {
			dir := t.TempDir()
			db := openTest(t, dir, func(o *Options) { o.CheckpointInterval = time.Hour })
			defer db.Close()
			mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
			if _, err := db.CreateCollection(ctx, "p", CollectionOptions{}); err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			var ms []model.Measurement
			for i := range 20 {
				ms = append(ms, model.Measurement{Time: t0 + int64(i)*int64(time.Minute), Meta: sensor("a"), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
			}
			if _, err := db.Insert(ctx, "m", Batch{Measurements: ms[:10]}, InsertOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := db.Checkpoint(); err != nil { // the delete rewrites stored buckets
				t.Fatal(err)
			}
			if _, err := db.Insert(ctx, "m", Batch{Measurements: ms[10:]}, InsertOptions{}); err != nil {
				t.Fatal(err)
			}
			wantRows, wantDocs := 20, 3
			var docs []document.Doc
			for i := range 3 {
				docs = append(docs, document.Doc{"_id": int64(i), "x": int64(i)})
			}
			if _, err := db.Insert(ctx, "p", Batch{Documents: docs}, InsertOptions{}); err != nil {
				t.Fatal(err)
			}
			if withDelete {
				if _, err := db.Delete(ctx, "m", mustFilter(t, `{"t": {"$lt": {"$date": "2024-05-01T00:05:00Z"}}}`), DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := db.Delete(ctx, "p", mustFilter(t, `{"_id": 1}`), DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				wantRows, wantDocs = 15, 2
			}
			crashed := crashCopy(t, db, dir)
			check := func(what string, db *DB) {
				t.Helper()
				if got := len(findRows(t, db, "m", FindOptions{})); got != wantRows {
					t.Errorf("%s: %d measurements found, want %d", what, got, wantRows)
				}
				checkCount(t, db, "m", wantRows)
				n := 0
				if _, err := EachDoc(db.Find(ctx, "p", FindOptions{}))(func(document.Doc) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
				if n != wantDocs {
					t.Errorf("%s: %d documents found, want %d", what, n, wantDocs)
				}
			}

			before := dirSums(t, filepath.Join(crashed, "store"))
			ro, err := Open(Options{Dir: crashed, DiskReserve: 1 << 62})
			if err != nil {
				t.Fatalf("read-only open: %v", err)
			}
			if !ro.readOnly {
				t.Fatal("the store did not open read-only")
			}
			check("read-only", ro)
			// A flush writes an sstable and a manifest, to memory.
			if err := ro.pdb.Flush(); err != nil {
				t.Fatal(err)
			}
			check("read-only, flushed", ro)
			if _, err := ro.Insert(ctx, "m", Batch{Measurements: ms[:1]}, InsertOptions{}); mongoerr.CodeOf(err) != mongoerr.OutOfDiskSpace {
				t.Errorf("insert into a read-only store: %v, want OutOfDiskSpace", err)
			}
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}
			after := dirSums(t, filepath.Join(crashed, "store"))
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("a read-only open changed the store's files:\nbefore %x\nafter  %x", before, after)
			}

			rw := openTest(t, crashed, nil)
			defer rw.Close()
			check("reopened with space", rw)
		})
	}
}
