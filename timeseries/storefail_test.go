package timeseries

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/model"
)

// The store's directory removed under a running DB: Pebble's flushes fail
// for good. The failures are logged at error level, not once per retry;
// the retries are paced instead of taking a core, the checkpointer's too;
// and Close gives up its final checkpoint with the error instead of
// waiting for ever.
func TestStoreFailuresPacedAndCloseGivesUp(t *testing.T) {
	dir := t.TempDir()
	var buf syncBuffer
	db := openTest(t, dir, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	mustCreate(t, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor"})
	ms := []model.Measurement{{Time: int64(time.Hour), Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}
	if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Set([]byte("\xffprobe"), []byte("x"), pebble.NoSync); err != nil { // something for the flush to write
		t.Fatal(err)
	}
	// Every table opened before its file goes: a table Pebble cannot find
	// is fatal (a compaction opening one would stop the process), one it
	// holds open is read from its descriptor.
	it, err := db.pdb.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // Pebble may be writing a file meanwhile
		err := os.RemoveAll(filepath.Join(dir, "store"))
		if err == nil {
			break
		}
		if i == 50 {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := db.pdb.AsyncFlush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	n, last := db.storeFail.state()
	if n < 1 || last == nil {
		t.Fatalf("no flush failure recorded a second after the store's directory went (%d, %v)", n, last)
	}
	// Paced: 10, 20, 40, 80, 160, then 250 ms apart; unpaced, Pebble
	// retries thousands of times a second.
	if n > 12 {
		t.Fatalf("%d failed flushes in a second: retries not paced", n)
	}
	if got := strings.Count(buf.String(), "failed to write its files"); got != 1 || !strings.Contains(buf.String(), "level=ERROR") {
		t.Fatalf("%d error lines for %d failures, want 1:\n%s", got, n, buf.String())
	}
	// The checkpointer, woken by every insert past the log's threshold,
	// retries a failed checkpoint a second later, then two: not at each
	// wake.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		db.wakeCheckpointer()
	}
	if got := strings.Count(buf.String(), "checkpoint failed"); got < 1 || got > 2 {
		t.Fatalf("%d failed checkpoints logged in 2 s, want 1 or 2:\n%s", got, buf.String())
	}
	// A checkpoint does not write to a store that keeps failing (once its
	// memtables are full, a write would wait for ever): it captures
	// nothing.
	db.mu.RLock()
	captures := len(db.mu.captures)
	db.mu.RUnlock()
	if err := db.Checkpoint(); err == nil || !strings.Contains(err.Error(), "cannot write its files") {
		t.Fatalf("Checkpoint = %v, want the store's failure", err)
	}
	db.mu.RLock()
	captured := len(db.mu.captures) - captures
	db.mu.RUnlock()
	if captured != 0 {
		t.Fatalf("a checkpoint on a failing store captured memory (%d captures)", captured)
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		if err == nil || !strings.Contains(err.Error(), "cannot write its files") {
			t.Fatalf("Close = %v, want the store's failure", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close still waiting for a flush 20 s after the store's directory went")
	}
}
