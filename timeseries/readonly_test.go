package timeseries

import (
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// A store reopened with less free space than its reserve opens read-only:
// with inserts in its log it opens and answers reads; with a delete in its
// log, which a read-only store cannot apply, it refuses to open with
// OutOfDiskSpace naming the collection, never Pebble's bare read-only error.
func TestReadOnlyOpenReplay(t *testing.T) {
	for _, withDelete := range []bool{false, true} {
		dir := t.TempDir()
		db := openTest(t, dir, func(o *Options) { o.CheckpointInterval = time.Hour })
		mustCreate(t, db, "m", TimeSeriesOptions{TimeField: "t", MetaField: "s"})
		t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		var ms []Measurement
		for i := range 20 {
			ms = append(ms, Measurement{Time: t0 + int64(i)*int64(time.Minute), Meta: sensor("a"), Fields: []Field{{Name: "v", Value: Int(int64(i))}}})
		}
		if _, err := db.Insert(ctx, "m", ms, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		if withDelete {
			f := mustFilter(t, `{"t": {"$lt": {"$date": "2024-05-01T00:05:00Z"}}}`)
			if _, err := db.Delete(ctx, "m", f); err != nil {
				t.Fatal(err)
			}
		}
		crashed := crashCopy(t, db, dir)
		ro, err := Open(Options{Dir: crashed, DiskReserve: 1 << 62})
		if withDelete {
			if err == nil {
				ro.Close()
				t.Fatal("a read-only open applied a delete from the log")
			}
			if mongoerr.CodeOf(err) != mongoerr.OutOfDiskSpace {
				t.Fatalf("read-only open with a delete in the log: %v, want OutOfDiskSpace", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("read-only open: %v", err)
		}
		if got := len(findRows(t, ro, "m", FindOptions{})); got != 20 {
			t.Errorf("read-only open: %d measurements found, want 20", got)
		}
		if _, err := ro.Insert(ctx, "m", ms[:1], InsertOptions{}); mongoerr.CodeOf(err) != mongoerr.OutOfDiskSpace {
			t.Errorf("insert into a read-only store: %v, want OutOfDiskSpace", err)
		}
		ro.Close()
	}
}
