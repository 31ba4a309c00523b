package wal

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// FuzzReplay treats arbitrary bytes as the only segment of a log. Open and
// Replay must not panic; every length read from the file is checked against
// the file size before it is allocated (and a record against MaxRecordSize
// only once its CRCs match). When Open succeeds the segment has been
// repaired: Replay then succeeds, and a second Open changes nothing.
//
// Each input makes a directory; on a journaling file system fuzz with
// TMPDIR=/dev/shm (about 100 times as many executions per second).
func FuzzReplay(f *testing.F) {
	for _, recs := range [][][]byte{
		nil,
		{{}},
		{[]byte("cpu,host=a usage_idle=1i 1\n"), bytes.Repeat([]byte("x"), 300), {1, 2, 3}},
	} {
		for _, c := range []Compression{CompressionS2, CompressionNone} {
			dir := f.TempDir()
			l, err := Open(Options{Dir: dir, NoSync: true, Compression: c})
			if err != nil {
				f.Fatal(err)
			}
			for _, r := range recs {
				if _, err := l.Append(r); err != nil {
					f.Fatal(err)
				}
			}
			l.Close()
			b, err := os.ReadFile(segmentPath(dir, 1))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
			f.Add(b[:len(b)-1])
		}
	}
	f.Add([]byte{})
	f.Add([]byte("HGWL"))

	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(segmentPath(dir, 1), data, 0o644); err != nil {
			t.Fatal(err)
		}
		replay := func() ([][]byte, error) {
			l, err := Open(Options{Dir: dir, NoSync: true})
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerFormat) {
					t.Fatalf("Open: unexpected error class: %v", err)
				}
				return nil, err
			}
			defer l.Close()
			var recs [][]byte
			err = l.Replay(0, func(_ Pos, rec []byte) error {
				recs = append(recs, bytes.Clone(rec))
				return nil
			})
			if err != nil {
				t.Fatalf("Replay after a successful Open: %v", err)
			}
			return recs, nil
		}
		first, err := replay()
		if err != nil {
			return
		}
		second, err := replay()
		if err != nil {
			t.Fatalf("second Open: %v", err)
		}
		if len(first) != len(second) {
			t.Fatalf("second Open replays %d records, first %d", len(second), len(first))
		}
		for i := range first {
			if !bytes.Equal(first[i], second[i]) {
				t.Fatalf("record %d differs between opens", i)
			}
		}
	})
}
