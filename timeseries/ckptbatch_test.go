package timeseries

import (
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// TestCheckpointBatchEstimate: the size a checkpoint's batch is made at
// (batchEstimate) holds what the checkpoint writes without growing, and
// is not far over it: open buckets written as their frozen rows, open
// ones encoded (Flush), and sealed ones, of series whose fields come and
// go (frozenLoad). A batch made too small grows by doubling, which is
// what the estimate is for; one made far too large holds memory for
// nothing.
func TestCheckpointBatchEstimate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		series, rows int
		encodeOpen   bool
	}{
		{"open snapshots", 300, 300, false},
		{"open encoded", 300, 300, true},
		{"sealed and open", 300, 800, false}, // the first hour's buckets seal
		{"few plain rows", 3000, 40, false},  // under a freeze: plain rows only
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTest(t, t.TempDir(), func(o *Options) {
				o.CheckpointLogBytes = 1 << 40
				o.CheckpointInterval = time.Hour
			})
			defer db.Close()
			mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
			frozenLoad(t, db, tc.series, tc.rows)
			db.maintMu.Lock()
			defer db.maintMu.Unlock()
			run, err := db.captureCheckpoint(&ckptChange{encodeOpen: tc.encodeOpen})
			if err != nil {
				t.Fatal(err)
			}
			defer db.uncapture(run)
			batch, err := db.encodeCheckpoint(run, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer batch.Close()
			est, got := run.batchEstimate(), batch.Len()
			t.Logf("%d buckets: estimate %d bytes, batch %d (%.2fx)", len(run.work), est, got, float64(est)/float64(got))
			if est < minSizedBatch {
				t.Fatalf("estimate %d under %d: the batch is not sized at all", est, minSizedBatch)
			}
			if c := cap(batch.Repr()); c < est || c > est+64<<10 {
				t.Errorf("batch made with room for %d bytes, not its estimate of %d", c, est)
			}
			if got > est {
				t.Errorf("batch of %d bytes over its estimate of %d: it grew by doubling", got, est)
			}
			if est > 2*got {
				t.Errorf("estimate %d over twice the batch's %d bytes", est, got)
			}
		})
	}
}
