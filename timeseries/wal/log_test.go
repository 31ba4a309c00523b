package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

func openT(t testing.TB, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

type replayed struct {
	pos Pos
	rec []byte
}

func replayT(t testing.TB, l *Log, from uint64) []replayed {
	t.Helper()
	var out []replayed
	err := l.Replay(from, func(pos Pos, rec []byte) error {
		out = append(out, replayed{pos, bytes.Clone(rec)})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%d): %v", from, err)
	}
	return out
}

// lineProtocol returns n bytes of TSBS cpu-like line protocol.
func lineProtocol(rng *rand.Rand, n int) []byte {
	b := make([]byte, 0, n+256)
	ts := int64(1451606400000000000)
	for len(b) < n {
		b = fmt.Appendf(b, "cpu,hostname=host_%d,region=eu-west-1,datacenter=eu-west-1b,rack=%d,os=Ubuntu16.10,arch=x86,team=LON,service=%d,service_version=1,service_environment=test usage_user=%di,usage_system=%di,usage_idle=%di,usage_nice=%di,usage_iowait=%di,usage_irq=%di,usage_softirq=%di,usage_steal=%di,usage_guest=%di,usage_guest_nice=%di %d\n",
			rng.IntN(4000), rng.IntN(100), rng.IntN(20), rng.IntN(100), rng.IntN(100), rng.IntN(100), rng.IntN(100), rng.IntN(100),
			rng.IntN(100), rng.IntN(100), rng.IntN(100), rng.IntN(100), rng.IntN(100), ts)
		ts += 10e9
	}
	return b[:n]
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, c := range []Compression{CompressionDefault, CompressionNone} {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			recs := [][]byte{
				{},
				{0x42},
				lineProtocol(rng, 100),
				lineProtocol(rng, 300<<10),
				randomBytes(rng, 1<<20), // incompressible
				bytes.Repeat([]byte{0}, 2<<20),
				{},
				append(lineProtocol(rng, 5000), randomBytes(rng, 5000)...),
			}
			dir := t.TempDir()
			l := openT(t, Options{Dir: dir, Compression: c})
			var want []Pos
			for _, r := range recs {
				pos, err := l.Append(r)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, pos)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openT(t, Options{Dir: dir, Compression: c})
			defer l.Close()
			got := replayT(t, l, 0)
			if len(got) != len(recs) {
				t.Fatalf("replayed %d records, want %d", len(got), len(recs))
			}
			for i := range recs {
				if got[i].pos != want[i] || !bytes.Equal(got[i].rec, recs[i]) {
					t.Errorf("record %d: pos %v len %d, want pos %v len %d", i, got[i].pos, len(got[i].rec), want[i], len(recs[i]))
				}
			}
			if c == CompressionDefault && l.Size() > 4<<20 {
				t.Errorf("Size %d: compressible records were not compressed", l.Size())
			}
		})
	}
}

// idRecord returns a record that carries id and can be checked for
// integrity: the 8-byte id, then size bytes derived from it, half of them
// compressible.
func idRecord(id uint64, size int) []byte {
	b := make([]byte, 8+size+8)
	binary.LittleEndian.PutUint64(b, id)
	x := id*0x9e3779b97f4a7c15 + 1
	for i := 8; i < len(b)-8; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v := x
		if i&8 == 0 {
			v = uint64(i)
		}
		binary.LittleEndian.PutUint64(b[i:], v)
	}
	return b[:8+size]
}

func checkIDRecord(rec []byte) (uint64, bool) {
	if len(rec) < 8 {
		return 0, false
	}
	id := binary.LittleEndian.Uint64(rec)
	return id, bytes.Equal(rec, idRecord(id, len(rec)-8))
}

func TestConcurrentAppend(t *testing.T) {
	dir := t.TempDir()
	const writers, perWriter = 16, 150
	l := openT(t, Options{Dir: dir, SegmentSize: 64 << 10})
	acked := make([][]Pos, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				id := uint64(w)<<32 | uint64(i)
				var pos Pos
				var err error
				if i%10 == 9 {
					var ps []Pos
					ps, err = l.AppendBatch([][]byte{idRecord(id, 100+i*7%3000)})
					if err == nil {
						pos = ps[0]
					}
				} else {
					pos, err = l.Append(idRecord(id, 100+i*7%3000))
				}
				if err != nil {
					t.Error(err)
					return
				}
				acked[w] = append(acked[w], pos)
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, Options{Dir: dir, SegmentSize: 64 << 10})
	defer l.Close()
	seen := map[uint64]Pos{}
	var last Pos
	for _, r := range replayT(t, l, 0) {
		id, ok := checkIDRecord(r.rec)
		if !ok {
			t.Fatalf("damaged record at %v", r.pos)
		}
		if _, dup := seen[id]; dup {
			t.Fatalf("record %x replayed twice", id)
		}
		if r.pos.Segment < last.Segment || r.pos.Segment == last.Segment && r.pos.Offset <= last.Offset {
			t.Fatalf("position %v after %v", r.pos, last)
		}
		last = r.pos
		seen[id] = r.pos
	}
	for w := range writers {
		for i, pos := range acked[w] {
			id := uint64(w)<<32 | uint64(i)
			if got, ok := seen[id]; !ok || got != pos {
				t.Fatalf("record %x acknowledged at %v, replayed at %v (found %v)", id, pos, got, ok)
			}
		}
	}
	if len(seen) != writers*perWriter {
		t.Fatalf("replayed %d records, want %d", len(seen), writers*perWriter)
	}
	segs, _ := l.Segments()
	if len(segs) < 3 {
		t.Errorf("segments %v: expected rolling at 64 KiB", segs)
	}
}

func TestCutTruncateReplayFrom(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	defer l.Close()
	rec := func(s string) []byte { return []byte(s) }
	mustAppend := func(s string) Pos {
		t.Helper()
		p, err := l.Append(rec(s))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	records := func(rs []replayed) []string {
		var out []string
		for _, r := range rs {
			out = append(out, string(r.rec))
		}
		return out
	}

	// Cut on an empty segment keeps it.
	n0, err := l.Cut()
	if err != nil || n0 != 1 {
		t.Fatalf("Cut on empty log = %d, %v; want 1", n0, err)
	}
	if p := mustAppend("a"); p.Segment != 1 {
		t.Fatalf("a at %v", p)
	}
	mustAppend("b")
	n1, err := l.Cut()
	if err != nil || n1 != 2 {
		t.Fatalf("Cut = %d, %v; want 2", n1, err)
	}
	if p := mustAppend("c"); p.Segment != n1 {
		t.Fatalf("c at %v, want segment %d", p, n1)
	}
	n2, _ := l.Cut()
	mustAppend("d")
	if segs, _ := l.Segments(); !slices.Equal(segs, []uint64{1, 2, 3}) {
		t.Fatalf("Segments = %v", segs)
	}
	if got := records(replayT(t, l, n1)); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("Replay(%d) = %q", n1, got)
	}
	if got := records(replayT(t, l, n2)); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("Replay(%d) = %q", n2, got)
	}
	size := l.Size()
	if err := l.Truncate(n1); err != nil {
		t.Fatal(err)
	}
	if l.Size() >= size {
		t.Fatalf("Size %d after Truncate, was %d", l.Size(), size)
	}
	if segs, _ := l.Segments(); !slices.Equal(segs, []uint64{2, 3}) {
		t.Fatalf("Segments after Truncate = %v", segs)
	}
	if _, err := os.Stat(segmentPath(dir, 1)); !os.IsNotExist(err) {
		t.Fatalf("segment 1 still on disk: %v", err)
	}
	if got := records(replayT(t, l, 0)); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("Replay(0) after Truncate = %q", got)
	}
	// The active segment is never removed.
	if err := l.Truncate(1000); err != nil {
		t.Fatal(err)
	}
	if segs, _ := l.Segments(); !slices.Equal(segs, []uint64{3}) {
		t.Fatalf("Segments after Truncate(1000) = %v", segs)
	}
	mustAppend("e")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, Options{Dir: dir})
	if got := records(replayT(t, l, 0)); !slices.Equal(got, []string{"d", "e"}) {
		t.Fatalf("Replay after reopen = %q", got)
	}
	want := l.Size()
	var onDisk int64
	for _, n := range []uint64{3} {
		fi, err := os.Stat(segmentPath(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		onDisk += fi.Size()
	}
	if want != onDisk {
		t.Fatalf("Size %d, files hold %d", want, onDisk)
	}
}

func TestSegmentRoll(t *testing.T) {
	dir := t.TempDir()
	const segSize = 4 << 10
	l := openT(t, Options{Dir: dir, SegmentSize: segSize, Compression: CompressionNone})
	rng := rand.New(rand.NewPCG(3, 4))
	var recs [][]byte
	for i := range 40 {
		n := 1000
		if i == 20 {
			n = 3 * segSize // larger than a segment: alone in one
		}
		r := randomBytes(rng, n)
		recs = append(recs, r)
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, Options{Dir: dir, SegmentSize: segSize})
	defer l.Close()
	segs, _ := l.Segments()
	if len(segs) < 10 {
		t.Fatalf("%d segments, want >= 10", len(segs))
	}
	perSeg := map[uint64]int{}
	got := replayT(t, l, 0)
	for i, r := range got {
		perSeg[r.pos.Segment]++
		if !bytes.Equal(r.rec, recs[i]) {
			t.Fatalf("record %d differs", i)
		}
		if i == 20 && r.pos.Offset != segmentHeaderLen {
			t.Fatalf("large record at %v, want a segment start", r.pos)
		}
	}
	if len(got) != len(recs) {
		t.Fatalf("replayed %d, want %d", len(got), len(recs))
	}
	for _, n := range segs {
		fi, err := os.Stat(segmentPath(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > segSize && perSeg[n] != 1 {
			t.Errorf("segment %d has %d bytes and %d records", n, fi.Size(), perSeg[n])
		}
	}
}

func TestErrors(t *testing.T) {
	for _, o := range []Options{{}, {Dir: "x", SegmentSize: 10}, {Dir: "x", Compression: 9}} {
		o.EnsureDefaults()
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Validate(%+v) = %v", o, err)
		}
	}
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	if _, err := l.Append(make([]byte, MaxRecordSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Append of %d bytes = %v", MaxRecordSize+1, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := l.Append(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v", err)
	}
	if _, err := l.Cut(); !errors.Is(err, ErrClosed) {
		t.Errorf("Cut after Close = %v", err)
	}
	if err := l.Replay(0, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Replay after Close = %v", err)
	}

	// A gap in the segment sequence.
	if err := os.WriteFile(segmentPath(dir, 3), appendSegmentHeader(nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open with a gap = %v", err)
	}
	os.Remove(segmentPath(dir, 3))

	// A newer format version.
	hdr := appendSegmentHeader(nil)
	hdr[4] = formatVersion + 1
	if err := os.WriteFile(segmentPath(dir, 2), hdr, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrNewerFormat) {
		t.Errorf("Open of a newer version = %v", err)
	}
	// Other files are ignored.
	os.Remove(segmentPath(dir, 2))
	if err := os.WriteFile(filepath.Join(dir, "LOCK"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openT(t, Options{Dir: dir})
	l.Close()
}
