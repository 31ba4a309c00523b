package timeseries

import (
	"encoding/hex"
	"math/rand"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// TestKeysReloggedWakeCheckpoint writes batches naming series the
// collection holds but no checkpoint has made durable: every record names
// them by their meta keys again. Once those keys pass keysReloggedWake
// bytes an insert wakes the checkpointer (the log's size and the interval
// would not, here), and the records after it name the series by id: a
// batch then adds a small part of its keys' bytes to the log.
func TestKeysReloggedWakeCheckpoint(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.CheckpointLogBytes = 1 << 40 })
	defer db.Close()
	mustCreate(t, db, "c", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
	const series, keyBytes = 256, 2048
	// Keys of random hex: the log's compression finds nothing to repeat
	// in them.
	rng := rand.New(rand.NewSource(1))
	keys := make([]string, series)
	for i := range keys {
		b := make([]byte, keyBytes/2)
		rng.Read(b)
		keys[i] = hex.EncodeToString(b)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	row := 0
	insert := func() {
		t.Helper()
		ms := make([]model.Measurement, series)
		for i := range ms {
			ms[i] = model.Measurement{Time: t0 + int64(row)*int64(time.Second), Meta: keys[i],
				Fields: []model.Field{{Name: "v", Value: model.Float(float64(row))}}}
		}
		row++
		if _, err := db.Insert(ctx, "c", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	insert() // makes the series
	before := db.stats.checkpoints.Load()
	perBatch := int64(series * keyBytes)
	for range keysReloggedWake/perBatch + 2 {
		insert()
	}
	deadline := time.Now().Add(10 * time.Second)
	for db.stats.checkpoints.Load() == before {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint after %d bytes of keys written again (wake at %d)", (keysReloggedWake/perBatch+2)*perBatch, keysReloggedWake)
		}
		time.Sleep(10 * time.Millisecond)
	}
	size := db.wal.Size()
	insert()
	if grew := db.wal.Size() - size; grew > perBatch/8 {
		t.Fatalf("a batch after the checkpoint added %d bytes to the log, its keys are %d", grew, perBatch)
	}
}
