package wal_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/hourglassdb/hourglass/timeseries/wal"
)

// The logs in ../../testdata were written by earlier versions
// (testdata/README.md); every later version must read the same records.

type fixtureRecord struct {
	Segment uint64 `json:"segment"`
	Offset  int64  `json:"offset"`
	Len     int    `json:"len"`
	SHA256  string `json:"sha256"`
	Kind    int    `json:"kind"`
}

var walFixtures = []struct {
	dir, expected string
	kinds         bool // records are the store's: the first byte is a record kind
}{
	{"wal/v1", "wal/v1.json", false},
	{"v1/logonly/wal", "v1/logonly.wal.json", true},
	{"v2/logonly/wal", "v2/logonly.wal.json", true},
	{"v3/logonly/wal", "v3/logonly.wal.json", true},
	{"v4/logonly/wal", "v4/logonly.wal.json", true},
	{"v5/logonly/wal", "v5/logonly.wal.json", true},
	{"v6/logonly/wal", "v6/logonly.wal.json", true},
	{"v7/logonly/wal", "v7/logonly.wal.json", true},
	{"v8/logonly/wal", "v8/logonly.wal.json", true},
	{"v9/logonly/wal", "v9/logonly.wal.json", true},
	{"v10/logonly/wal", "v10/logonly.wal.json", true},
	{"v11/logonly/wal", "v11/logonly.wal.json", true},
}

func readFixtureRecords(t *testing.T, path string) []fixtureRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	var recs []fixtureRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatalf("%s: no records", path)
	}
	return recs
}

// copyFixtureDir copies a fixture log to a new directory: Open may repair
// the last segment.
func copyFixtureDir(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", dir)
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestFormatFixtures replays each fixture log and compares its records.
func TestFormatFixtures(t *testing.T) {
	for _, f := range walFixtures {
		t.Run(f.dir, func(t *testing.T) {
			want := readFixtureRecords(t, f.expected)
			dir := copyFixtureDir(t, f.dir)
			l, err := wal.Open(wal.Options{Dir: dir, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var got []fixtureRecord
			err = l.Replay(0, func(pos wal.Pos, rec []byte) error {
				sum := sha256.Sum256(rec)
				r := fixtureRecord{Segment: pos.Segment, Offset: pos.Offset, Len: len(rec), SHA256: hex.EncodeToString(sum[:])}
				if f.kinds && len(rec) > 0 {
					r.Kind = int(rec[0])
				}
				got = append(got, r)
				return nil
			})
			if err != nil {
				t.Fatalf("Replay: %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("record %d: %+v, want %+v", i, got[i], want[i])
				}
			}
			// The log takes appends after the old records.
			pos, err := l.Append([]byte("after"))
			if err != nil {
				t.Fatal(err)
			}
			last := want[len(want)-1]
			if pos.Segment < last.Segment || (pos.Segment == last.Segment && pos.Offset <= last.Offset) {
				t.Errorf("append at %+v, before the last record %+v", pos, last)
			}
		})
	}
}

// TestFormatFixturesLayout reads the fixture segments byte by byte as
// docs/format/wal.md draws them: header, record frames and their CRCs.
func TestFormatFixturesLayout(t *testing.T) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	types := map[byte]int{}
	for _, f := range walFixtures {
		want := readFixtureRecords(t, f.expected)
		i := 0
		for seg := want[0].Segment; seg <= want[len(want)-1].Segment; seg++ {
			name := filepath.Join("..", "..", "testdata", f.dir, fmt.Sprintf("%020d.wal", seg))
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < 8 || !bytes.Equal(b[:4], []byte("HGWL")) || b[4] != 1 || !bytes.Equal(b[5:8], []byte{0, 0, 0}) {
				t.Fatalf("%s: header % x", name, b[:min(8, len(b))])
			}
			for off := 8; off < len(b); {
				if len(b)-off < 17 {
					t.Fatalf("%s offset %d: %d bytes left, a header is 17", name, off, len(b)-off)
				}
				h := b[off : off+17]
				typ, n, raw := h[0], int(binary.LittleEndian.Uint32(h[1:])), int(binary.LittleEndian.Uint32(h[5:]))
				if got := crc32.Checksum(h[:13], castagnoli); got != binary.LittleEndian.Uint32(h[13:]) {
					t.Fatalf("%s offset %d: header crc %08x, stored %08x", name, off, got, binary.LittleEndian.Uint32(h[13:]))
				}
				if off+17+n > len(b) {
					t.Fatalf("%s offset %d: payload of %d bytes past the end", name, off, n)
				}
				payload := b[off+17 : off+17+n]
				if got := crc32.Checksum(payload, castagnoli); got != binary.LittleEndian.Uint32(h[9:]) {
					t.Fatalf("%s offset %d: data crc %08x, stored %08x", name, off, got, binary.LittleEndian.Uint32(h[9:]))
				}
				switch {
				case typ == 1 && n == raw:
				case typ == 2 && n < raw:
				default:
					t.Fatalf("%s offset %d: type %d, len %d, raw_len %d", name, off, typ, n, raw)
				}
				if i >= len(want) {
					t.Fatalf("%s offset %d: more records than %s lists", name, off, f.expected)
				}
				if w := want[i]; w.Segment != seg || w.Offset != int64(off) || w.Len != raw {
					t.Fatalf("%s offset %d: record of %d bytes, %s has %+v", name, off, raw, f.expected, w)
				}
				if typ == 1 {
					sum := sha256.Sum256(payload)
					if hex.EncodeToString(sum[:]) != want[i].SHA256 {
						t.Fatalf("%s offset %d: raw payload differs from %s", name, off, f.expected)
					}
				}
				types[typ]++
				i++
				off += 17 + n
			}
		}
		if i != len(want) {
			t.Errorf("%s: %d records in the segments, %s lists %d", f.dir, i, f.expected, len(want))
		}
	}
	if types[1] == 0 || types[2] == 0 {
		t.Errorf("fixtures hold %d raw and %d S2 records; want both kinds", types[1], types[2])
	}
}
