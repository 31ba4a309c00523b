package replset

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/timeseries"
)

func writeTestFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// streamOf returns the stream of the files under dir.
func streamOf(t testing.TB, dir string) []byte {
	t.Helper()
	names, err := snapshotFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeStream(&buf, dir, names); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The stream of a directory unpacks into the same files, and its length
// is what streamSize says (raft sends that size ahead of the bytes).
func TestSnapshotStreamRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{"state": `{"applied":7}`, "engine/store/000001.sst": "sst bytes", "engine/store/MANIFEST-000001": "",
		"engine/big": string(bytes.Repeat([]byte("x"), 300000))}
	writeTestFiles(t, src, files)
	stream := streamOf(t, src)
	names, _ := snapshotFiles(src)
	size, err := streamSize(src, names)
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(stream)) {
		t.Fatalf("streamSize %d, stream %d bytes", size, len(stream))
	}
	dst := t.TempDir()
	if err := readStream(bytes.NewReader(stream), dst); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(name)))
		if err != nil || string(got) != want {
			t.Fatalf("%s: %d bytes, %v; want %d bytes", name, len(got), err, len(want))
		}
	}
}

// A stream that was cut, altered or names a file outside its directory is
// refused as corrupt.
func TestSnapshotStreamRefusesBadInput(t *testing.T) {
	src := t.TempDir()
	writeTestFiles(t, src, map[string]string{"state": `{"applied":7}`, "engine/a": "abcdef"})
	good := streamOf(t, src)
	entry := func(name, content string) []byte {
		b := binary.AppendUvarint([]byte(streamMagic), uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendUvarint(b, uint64(len(content)))
		b = append(b, content...)
		return append(b, 0, 0, 0, 0)
	}
	flipped := bytes.Clone(good)
	flipped[bytes.Index(flipped, []byte("abcdef"))] ^= 1
	for name, in := range map[string][]byte{
		"empty":     nil,
		"magic":     []byte("HGSNAP2\n\x00"),
		"cut":       good[:len(good)-3],
		"no end":    good[:len(good)-1],
		"checksum":  flipped,
		"dotdot":    entry("../x", "a"),
		"absolute":  entry("/etc/x", "a"),
		"dot":       entry("engine/./a", "a"),
		"meta.json": entry("meta.json", "{}"),
	} {
		if err := readStream(bytes.NewReader(in), t.TempDir()); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzReadStream(f *testing.F) {
	src := f.TempDir()
	writeTestFiles(f, src, map[string]string{"state": `{"applied":7}`, "engine/a": "abc"})
	f.Add(streamOf(f, src))
	f.Add([]byte(streamMagic + "\x01a\x01b\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		dir := t.TempDir()
		if err := readStream(bytes.NewReader(in), dir); err != nil {
			return
		}
		// What it accepted, written again, is the same stream.
		if out := streamOf(t, dir); !bytes.Equal(in, out) {
			t.Fatalf("accepted %q, writes back %q", in, out)
		}
	})
}

// The snapshot store lists complete snapshots newest first, keeps the
// newest two, and cleans up what a stopped member left half written.
func TestSnapshotStore(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	s, err := newSnapshotStore(dir, 2, log)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		sink, err := s.Create(1, i*10, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		src := t.TempDir()
		writeTestFiles(t, src, map[string]string{"state": `{"applied":` + string(rune('0'+i)) + `}`, "engine/f": "data"})
		if _, err := sink.Write(streamOf(t, src)); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A snapshot cancelled, and one never finished.
	sink, _ := s.Create(1, 40, 1, raft.Configuration{}, 1, nil)
	sink.Write([]byte(streamMagic))
	if err := sink.Cancel(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(1, 50, 1, raft.Configuration{}, 1, nil); err != nil {
		t.Fatal(err)
	}
	metas, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 2 || metas[0].Index != 30 || metas[1].Index != 20 {
		t.Fatalf("listed %+v, want indexes 30 and 20", metas)
	}
	_, st, err := s.latest()
	if err != nil || st.Applied != 3 {
		t.Fatalf("latest: %+v, %v", st, err)
	}
	m, rc, err := s.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if int64(len(b)) != m.Size {
		t.Fatalf("stream of %d bytes, meta says %d", len(b), m.Size)
	}
	// A stream with bytes after its end is not a snapshot.
	sink, _ = s.Create(1, 60, 1, raft.Configuration{}, 1, nil)
	sink.Write(append(b, 'x'))
	if err := sink.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("close of a stream with a trailing byte: %v", err)
	}
	if _, err := newSnapshotStore(dir, 2, log); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("after a reopen: %d entries in the store, want the 2 snapshots", len(ents))
	}
}

// snapshotOpts makes members take snapshots often and keep few entries.
func snapshotOpts(o *Options) {
	o.SnapshotThreshold = 16
	o.SnapshotInterval = 50 * time.Millisecond
	o.TrailingLogs = 4
}

// A member that was stopped while the leader took snapshots and dropped
// the log before them catches up from a snapshot, documents, indexes and
// deletes included, and then from the log.
func TestCatchUpFromSnapshot(t *testing.T) {
	s := startSetWith(t, 3, snapshotOpts)
	li, l := s.leaderWithCPU()
	ctx := context.Background()
	if _, err := l.CreateCollection(ctx, "events", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	insert(t, l, 0, 10)
	s.waitCount("cpu", 10)

	fi := (li + 1) % 3
	if err := s.nodes[fi].Close(); err != nil {
		t.Fatal(err)
	}
	s.nodes[fi] = nil
	for i := range 40 {
		insert(t, l, 10+i*10, 10)
	}
	if _, err := l.Insert(ctx, "events", timeseries.Batch{Documents: []document.Doc{{"k": int64(1)}, {"k": int64(2)}}}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Delete(ctx, "cpu", mustFilter(t, `{"sensor": "s0", "t": {"$lt": {"$date": "2026-01-01T00:00:20Z"}}}`), timeseries.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every running member compacts its log, so that whichever leads when
	// the member comes back has to send a snapshot.
	s.waitCount("cpu", 400)
	for _, n := range s.nodes {
		if n == nil {
			continue
		}
		if err := n.Snapshot(); err != nil && !errors.Is(err, ErrNothingToSnapshot) {
			t.Fatal(err)
		}
		first, err := n.store.FirstIndex()
		if err != nil || first <= 10 {
			t.Fatalf("after a snapshot %s's log starts at %d (%v): not compacted", n.ID(), first, err)
		}
	}

	n, err := Open(s.opts[fi])
	if err != nil {
		t.Fatal(err)
	}
	s.nodes[fi] = n
	s.waitCount("cpu", 400)
	s.waitCount("events", 2)
	// A restore counts once its state is written, after the engine it
	// swapped in already answers: wait for the count.
	deadline := time.Now().Add(10 * time.Second)
	for n.fsm.restores.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the member caught up without a snapshot")
		}
		time.Sleep(10 * time.Millisecond)
	}
	insert(t, l, 1000, 10)
	s.waitCount("cpu", 410)
	if _, err := n.DB().Describe(ctx, "events"); err != nil {
		t.Fatal(err)
	}
}

// A member that stops uncleanly after snapshots compacted the log
// rebuilds its engine from its newest snapshot and the log after it.
func TestUncleanRestartFromSnapshot(t *testing.T) {
	s := startSetWith(t, 3, snapshotOpts)
	li, l := s.leaderWithCPU()
	for i := range 30 {
		insert(t, l, i*2, 2)
	}
	s.waitCount("cpu", 60)
	fi := (li + 1) % 3
	f := s.nodes[fi]
	// The member snapshots by itself every 50 ms: one may have just
	// covered everything it applied, which serves as well.
	if err := f.Snapshot(); err != nil && !errors.Is(err, ErrNothingToSnapshot) {
		t.Fatal(err)
	}
	f.fsm.unrecorded.Store(true)
	insert(t, l, 60, 20)
	s.waitCount("cpu", 80)
	s.killAndReopen(fi)
	insert(t, l, 80, 20)
	s.waitCount("cpu", 100)
}
