package wal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// buildSegment writes records with a fresh log and returns the bytes of
// its only segment and the position of each record.
func buildSegment(t *testing.T, opts Options, recs [][]byte) ([]byte, []Pos) {
	t.Helper()
	opts.Dir = t.TempDir()
	l := openT(t, opts)
	var pos []Pos
	for _, r := range recs {
		p, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(segmentPath(opts.Dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	return b, pos
}

// checkRecovered opens a log whose only segment is seg and checks that it
// replays exactly want, then that an append after the repair replays too.
// It does so on the OS's file system and on a strict in-memory one, whose
// files cannot be truncated in place (Log.truncateSegment rewrites them).
func checkRecovered(t *testing.T, seg []byte, want [][]byte, what string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(segmentPath(dir, 1), seg, 0o644); err != nil {
		t.Fatal(err)
	}
	checkRecoveredIn(t, Options{Dir: dir, NoSync: true}, want, what)

	fs := vfs.NewStrictMem()
	mem := Options{Dir: "/wal", FS: fs}
	if err := fs.MkdirAll(mem.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(segmentPath(mem.Dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Clone(seg)); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.Close()
	syncDir(fs, "/")
	syncDir(fs, mem.Dir)
	checkRecoveredIn(t, mem, want, what+" (strict mem)")
	// The repair was synced: a power cut keeps it.
	fs.ResetToSyncedState()
	l := openT(t, mem)
	defer l.Close()
	if got := replayT(t, l, 0); len(got) != len(want)+1 {
		t.Fatalf("%s (strict mem): after a power cut replayed %d records, want %d", what, len(got), len(want)+1)
	}
}

func checkRecoveredIn(t *testing.T, opts Options, want [][]byte, what string) {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	got := replayT(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("%s: replayed %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].rec, want[i]) {
			t.Fatalf("%s: record %d differs", what, i)
		}
	}
	extra := []byte("after repair")
	if _, err := l.Append(extra); err != nil {
		t.Fatalf("%s: Append after repair: %v", what, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, opts)
	defer l.Close()
	got = replayT(t, l, 0)
	if len(got) != len(want)+1 || !bytes.Equal(got[len(want)].rec, extra) {
		t.Fatalf("%s: after reopen replayed %d records, want %d ending in the new one", what, len(got), len(want)+1)
	}
}

func TestTornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []Compression{CompressionS2, CompressionNone} {
		t.Run(c.String(), func(t *testing.T) {
			recs := [][]byte{lineProtocol(rng, 2000), {}, randomBytes(rng, 700), lineProtocol(rng, 300)}
			seg, pos := buildSegment(t, Options{Compression: c}, recs)
			last := pos[len(pos)-1].Offset
			want := recs[:len(recs)-1]

			// Cut at every offset inside the final record.
			for cut := last; cut < int64(len(seg)); cut++ {
				checkRecovered(t, seg[:cut], want, "truncated")
			}
			// Flip each byte of the final record.
			for i := last; i < int64(len(seg)); i++ {
				b := bytes.Clone(seg)
				b[i] ^= 0xff
				checkRecovered(t, b, want, "flipped")
			}
			// Zeros where the final record should be, as after a crash that
			// extended the file but did not write its pages.
			b := bytes.Clone(seg)
			clear(b[last:])
			checkRecovered(t, append(b, make([]byte, 4096)...), want, "zero-filled")
			// A complete log with trailing zeros keeps every record.
			checkRecovered(t, append(bytes.Clone(seg), make([]byte, 100)...), recs, "trailing zeros")
		})
	}
}

func TestTornSegmentHeader(t *testing.T) {
	for _, n := range []int{0, 3, segmentHeaderLen} {
		b := make([]byte, n)
		copy(b, segmentMagic)
		if n == segmentHeaderLen {
			clear(b)
		}
		checkRecovered(t, b, nil, "torn header")
	}
}

func TestCorruptionNotAtTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	recs := [][]byte{lineProtocol(rng, 3000), lineProtocol(rng, 3000), lineProtocol(rng, 3000)}

	t.Run("earlier segment", func(t *testing.T) {
		dir := t.TempDir()
		l := openT(t, Options{Dir: dir})
		p, _ := l.Append(recs[0])
		l.Cut()
		l.Append(recs[1])
		l.Close()
		b, _ := os.ReadFile(segmentPath(dir, 1))
		b[p.Offset+recordHeaderLen+10] ^= 1
		os.WriteFile(segmentPath(dir, 1), b, 0o644)
		l = openT(t, Options{Dir: dir})
		defer l.Close()
		err := l.Replay(0, func(Pos, []byte) error { return nil })
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Replay = %v, want ErrCorrupt", err)
		}
		t.Log(err)
		// Replay from the intact segment works.
		if got := replayT(t, l, 2); len(got) != 1 {
			t.Fatalf("Replay(2) = %d records", len(got))
		}
		// A torn end of an earlier segment is corruption too.
		l.Close()
		os.WriteFile(segmentPath(dir, 1), b[:len(b)-1], 0o644)
		l = openT(t, Options{Dir: dir})
		defer l.Close()
		if err := l.Replay(0, func(Pos, []byte) error { return nil }); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Replay of a short earlier segment = %v, want ErrCorrupt", err)
		}
	})

	t.Run("middle of last segment", func(t *testing.T) {
		seg, pos := buildSegment(t, Options{}, recs)
		b := bytes.Clone(seg)
		b[pos[1].Offset+recordHeaderLen+5] ^= 0x10
		dir := t.TempDir()
		os.WriteFile(segmentPath(dir, 1), b, 0o644)
		_, err := Open(Options{Dir: dir})
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v, want ErrCorrupt", err)
		}
		t.Log(err)
		// A damaged header in the middle too.
		b = bytes.Clone(seg)
		b[pos[1].Offset+2] ^= 0x10
		os.WriteFile(segmentPath(dir, 1), b, 0o644)
		if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v, want ErrCorrupt", err)
		}
	})

	t.Run("torn write with a zero sector", func(t *testing.T) {
		// Pages of an unsynced write reached the disk out of order: record
		// 1 has a zero-filled sector, record 2 after it is intact. Neither
		// was acknowledged, so both go.
		raw := [][]byte{randomBytes(rng, 3000), randomBytes(rng, 3000), randomBytes(rng, 3000)}
		seg, pos := buildSegment(t, Options{Compression: CompressionNone}, raw)
		b := bytes.Clone(seg)
		start := (pos[1].Offset + sectorSize) / sectorSize * sectorSize
		clear(b[start : start+sectorSize])
		checkRecovered(t, b, raw[:1], "zero sector")
	})
}
