package wal

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// crashT simulates a power cut on fs: whatever was not synced is gone. The
// Log written before it must not be used again.
func crashT(fs *vfs.MemFS) {
	fs.ResetToSyncedState()
}

// TestPowerLoss appends, cuts and truncates on a file system that forgets
// everything not synced, cuts the power at random points and checks that
// every acknowledged record is replayed after reopening, in order, and
// that nothing is replayed twice.
func TestPowerLoss(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	fs := vfs.NewStrictMem()
	opts := Options{Dir: "/data/wal", FS: fs, SegmentSize: 8 << 10}
	l := openT(t, opts)
	var acked []uint64 // ids of acknowledged records not truncated, in log order
	from := uint64(0)  // first segment still replayed
	next := uint64(1)
	for round := 0; round < 40; round++ {
		for i, n := 0, rng.IntN(30); i < n; i++ {
			switch rng.IntN(10) {
			case 0:
				seg, err := l.Cut()
				if err != nil {
					t.Fatal(err)
				}
				// As a checkpoint does: drop the records before seg.
				if rng.IntN(2) == 0 {
					if err := l.Truncate(seg); err != nil {
						t.Fatal(err)
					}
					from = seg
					acked = acked[:0]
				}
			default:
				id := next
				next++
				if _, err := l.Append(idRecord(id, rng.IntN(2000))); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, id)
			}
		}
		crashT(fs)
		l = openT(t, opts)
		got := replayT(t, l, from)
		// Records are acknowledged in order, so the replay is exactly the
		// acknowledged ones: none lost, none from before the truncation.
		if len(got) != len(acked) {
			t.Fatalf("round %d: replayed %d records, %d acknowledged", round, len(got), len(acked))
		}
		for i, r := range got {
			id, ok := checkIDRecord(r.rec)
			if !ok || id != acked[i] {
				t.Fatalf("round %d: record %d is id %d (intact %v), want %d", round, i, id, ok, acked[i])
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPowerLossNoSync checks that the strict file system does lose what a
// power cut loses: with NoSync, acknowledged records are gone after the
// crash. It keeps TestPowerLoss from passing on a file system that keeps
// everything.
func TestPowerLossNoSync(t *testing.T) {
	fs := vfs.NewStrictMem()
	opts := Options{Dir: "/data/wal", FS: fs}
	l := openT(t, opts)
	if _, err := l.Append([]byte("synced")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	opts.NoSync = true
	l = openT(t, opts)
	if _, err := l.Append([]byte("not synced")); err != nil {
		t.Fatal(err)
	}
	crashT(fs)
	opts.NoSync = false
	l = openT(t, opts)
	defer l.Close()
	got := replayT(t, l, 0)
	if len(got) != 1 || !bytes.Equal(got[0].rec, []byte("synced")) {
		t.Fatalf("replayed %d records after the crash, want only the synced one", len(got))
	}
}

// TestPowerLossNewDirectory checks that the log's directory and first
// segment survive a power cut right after Open created them.
func TestPowerLossNewDirectory(t *testing.T) {
	fs := vfs.NewStrictMem()
	opts := Options{Dir: "/a/b/wal", FS: fs}
	l := openT(t, opts)
	if _, err := l.Append([]byte("first")); err != nil {
		t.Fatal(err)
	}
	crashT(fs)
	l = openT(t, opts)
	defer l.Close()
	if got := replayT(t, l, 0); len(got) != 1 {
		t.Fatalf("replayed %d records after the crash, want 1", len(got))
	}
}
