package timeseries

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// TestCheckpointBatchSized: a checkpoint of many buckets makes its batch
// at the size its first window of encoded buckets measures (sizedBatch),
// which holds what it writes without growing and is not far over it: open
// buckets written as their frozen rows, open ones encoded (Flush, where
// encoding shrinks the frozen rows most), sealed ones, plain rows only,
// and more buckets than one window. A batch made too small grows by
// doubling, which is what the size is for; one made far too large holds
// memory for nothing.
func TestCheckpointBatchSized(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one processor: checkpoints encode on one goroutine and grow their batch")
	}
	for _, tc := range []struct {
		name         string
		series, rows int
		encodeOpen   bool
		regular      bool // regularLoad, not frozenLoad
	}{
		{"open snapshots", 1500, 300, false, false},
		{"open encoded", 1500, 300, true, false},
		{"sealed and open", 1200, 800, false, false}, // the first hour's buckets seal
		{"plain rows, windows", 6000, 40, false, false},
		{"encoded, windows", 5000, 200, true, false},
		{"regular, encoded, windows", 5000, 200, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTest(t, t.TempDir(), func(o *Options) {
				o.CheckpointLogBytes = 1 << 40
				o.CheckpointInterval = time.Hour
			})
			defer db.Close()
			mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
			if tc.regular {
				regularLoad(t, db, tc.series, tc.rows)
			} else {
				frozenLoad(t, db, tc.series, tc.rows)
			}
			db.maintMu.Lock()
			defer db.maintMu.Unlock()
			run, err := db.captureCheckpoint(&ckptChange{encodeOpen: tc.encodeOpen})
			if err != nil {
				t.Fatal(err)
			}
			defer db.uncapture(run)
			if len(run.work) < minParallelEncode {
				t.Fatalf("%d buckets: under %d, the batch is not sized", len(run.work), minParallelEncode)
			}
			batch, err := db.encodeCheckpoint(run, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer batch.Close()
			size, got := run.batchSize, batch.Len()
			t.Logf("%d buckets: batch made at %d bytes, written %d (%.2fx)", len(run.work), size, got, float64(size)/float64(got))
			if c := cap(batch.Repr()); c < size || c > size+64<<10 {
				t.Errorf("batch made with room for %d bytes, not its size of %d", c, size)
			}
			if got > size {
				t.Errorf("batch of %d bytes over its size of %d: it grew by doubling", got, size)
			}
			if size > got*3/2 {
				t.Errorf("batch made at %d bytes, over 1.5 times the %d written", size, got)
			}
		})
	}
}

// regularLoad writes series of readings every 10 s, each series' value
// constant and a counter: what encoding shrinks most against frozen rows.
func regularLoad(t *testing.T, db *DB, series, rows int) {
	t.Helper()
	base := int64(1_735_689_600e9)
	batch := make([]model.Measurement, 0, 1000)
	for r := range rows {
		for s := range series {
			batch = append(batch, model.Measurement{Time: base + int64(r)*10e9, Meta: sensor(fmt.Sprintf("s%d", s)),
				Fields: []model.Field{{Name: "v", Value: model.Float(float64(s) / 4)}, {Name: "n", Value: model.Int(int64(r))}}})
			if len(batch) == cap(batch) {
				if _, err := db.Insert(ctx, "m", Batch{Measurements: batch}, InsertOptions{}); err != nil {
					t.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: batch}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
}
