package replset

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hourglassdb/hourglass/internal/durable"
)

// A snapshot is a directory of Dir/snapshots:
//
//	<term>-<index>-<unix ms>/meta.json   raft's SnapshotMeta (Size included)
//	<term>-<index>-<unix ms>/state       the FSM's state: snapshotState in JSON
//	<term>-<index>-<unix ms>/engine/     a checkpoint of the engine
//	                                     (timeseries.DB.CheckpointTo)
//
// A snapshot the member takes itself is the engine's checkpoint moved into
// place (hard links to the store's files, no copy). One it receives from
// the leader arrives as a stream (below) and is unpacked into place as it
// arrives. Directories are written under <id>.tmp and renamed when
// complete, so a listed snapshot is whole.
//
// The stream of a snapshot (sent to a member that is behind the log the
// leader keeps, and read by the FSM's Restore):
//
//	"HGSNAP1\n"
//	per file, in name order: uvarint(len(name)) | name | uvarint(size) |
//	                          bytes | crc32c of the bytes (4, big endian)
//	uvarint(0)
//
// Names are relative, slash-separated paths without "." or ".." parts.

const streamMagic = "HGSNAP1\n"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// snapshotState is what the FSM keeps besides the engine.
type snapshotState struct {
	// Applied is the last raft index the engine copy holds.
	Applied uint64 `json:"applied"`
	// Term is the term of the entry at Applied; 0 in a snapshot of an
	// older version.
	Term uint64 `json:"term,omitempty"`
	// Members is the address table (OpMember) at that index.
	Members []MemberAddrs `json:"members,omitempty"`
	// Sessions are the retryable writes applied, oldest first.
	Sessions []sessionEntry `json:"sessions,omitempty"`
}

const (
	metaFile   = "meta.json"
	stateFile  = "state"
	engineDir  = "engine"
	tmpSuffix  = ".tmp"
	pendingDir = ".pending"
)

// snapshotStore is a raft.SnapshotStore of snapshot directories; it keeps
// the newest retain.
type snapshotStore struct {
	dir    string
	retain int
	log    *slog.Logger
	mu     sync.Mutex // publish and reap
}

func newSnapshotStore(dir string, retain int, log *slog.Logger) (*snapshotStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replset: snapshot store: %w", err)
	}
	// Leftovers of a member stopped while writing one.
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("replset: snapshot store: %w", err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), tmpSuffix) || strings.HasPrefix(e.Name(), pendingDir) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("replset: snapshot store: %w", err)
			}
		}
	}
	return &snapshotStore{dir: dir, retain: retain, log: log}, nil
}

// Create starts a snapshot (raft.SnapshotStore).
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration,
	confIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("replset: snapshot version %d not supported", version)
	}
	id := fmt.Sprintf("%d-%d-%d", term, index, time.Now().UnixMilli())
	tmp := filepath.Join(s.dir, id+tmpSuffix)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("replset: create snapshot: %w", err)
	}
	return &dirSink{store: s, tmp: tmp, meta: raft.SnapshotMeta{Version: version, ID: id, Index: index, Term: term,
		Configuration: conf, ConfigurationIndex: confIndex}}, nil
}

// List returns the snapshots, newest first (raft.SnapshotStore).
func (s *snapshotStore) List() ([]*raft.SnapshotMeta, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("replset: list snapshots: %w", err)
	}
	var out []*raft.SnapshotMeta
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), tmpSuffix) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		m, err := readMeta(filepath.Join(s.dir, e.Name()))
		if err != nil {
			s.log.Warn("replset: snapshot skipped", "dir", e.Name(), "err", err)
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *raft.SnapshotMeta) int {
		switch {
		case a.Term != b.Term:
			return cmpDesc(a.Term, b.Term)
		case a.Index != b.Index:
			return cmpDesc(a.Index, b.Index)
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

func readMeta(dir string) (*raft.SnapshotMeta, error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return nil, err
	}
	var m raft.SnapshotMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, metaFile, err)
	}
	return &m, nil
}

// Open returns a snapshot's metadata and its stream (raft.SnapshotStore).
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if strings.ContainsAny(id, `/\`) || strings.HasPrefix(id, ".") {
		return nil, nil, fmt.Errorf("replset: bad snapshot id %q", id)
	}
	dir := filepath.Join(s.dir, id)
	m, err := readMeta(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("replset: open snapshot %s: %w", id, err)
	}
	files, err := snapshotFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeStream(pw, dir, files)) }()
	return m, pr, nil
}

// latest returns the directory and state of the newest snapshot, "" when
// there is none.
func (s *snapshotStore) latest() (string, snapshotState, error) {
	metas, err := s.List()
	if err != nil || len(metas) == 0 {
		return "", snapshotState{}, err
	}
	dir := filepath.Join(s.dir, metas[0].ID)
	st, err := readState(dir)
	return dir, st, err
}

func readState(dir string) (snapshotState, error) {
	var st snapshotState
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st, fmt.Errorf("replset: snapshot state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%w: snapshot state: %v", ErrCorrupt, err)
	}
	return st, nil
}

// reap removes the snapshots beyond the newest retain.
func (s *snapshotStore) reap() {
	metas, err := s.List()
	if err != nil {
		s.log.Warn("replset: list snapshots to remove old ones", "err", err)
		return
	}
	for _, m := range metas[min(s.retain, len(metas)):] {
		if err := os.RemoveAll(filepath.Join(s.dir, m.ID)); err != nil {
			s.log.Warn("replset: remove old snapshot", "id", m.ID, "err", err)
		}
	}
}

// snapshotFiles lists the files under dir that a stream carries (all but
// meta.json), sorted by name.
func snapshotFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); rel != metaFile {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replset: list snapshot files: %w", err)
	}
	slices.Sort(files)
	return files, nil
}

// streamSize is the length of the stream writeStream writes for files.
func streamSize(dir string, files []string) (int64, error) {
	n := int64(len(streamMagic)) + 1
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return 0, fmt.Errorf("replset: snapshot file: %w", err)
		}
		size := fi.Size()
		n += int64(uvarintLen(uint64(len(f)))+len(f)+uvarintLen(uint64(size))) + size + 4
	}
	return n, nil
}

func uvarintLen(x uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], x)
}

// writeStream writes the stream of files under dir to w.
func writeStream(w io.Writer, dir string, files []string) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.WriteString(streamMagic); err != nil {
		return err
	}
	var hdr []byte
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return fmt.Errorf("replset: snapshot file: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		hdr = binary.AppendUvarint(hdr[:0], uint64(len(name)))
		hdr = append(hdr, name...)
		hdr = binary.AppendUvarint(hdr, uint64(fi.Size()))
		if _, err := bw.Write(hdr); err != nil {
			f.Close()
			return err
		}
		h := crc32.New(castagnoli)
		n, err := io.Copy(io.MultiWriter(bw, h), f)
		f.Close()
		if err != nil {
			return err
		}
		if n != fi.Size() {
			return fmt.Errorf("replset: snapshot file %s changed while sent (%d bytes, %d expected)", name, n, fi.Size())
		}
		if _, err := bw.Write(binary.BigEndian.AppendUint32(nil, h.Sum32())); err != nil {
			return err
		}
	}
	if err := bw.WriteByte(0); err != nil {
		return err
	}
	return bw.Flush()
}

// maxSnapshotName bounds a file name in a stream.
const maxSnapshotName = 4096

// readStream unpacks a stream into dir, which exists, and syncs what it
// wrote; it reads r to its end. A stream that does not decode, names a
// file outside dir, fails a checksum or goes on after its end is
// ErrCorrupt.
func readStream(r io.Reader, dir string) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var prev string // names come in ascending order
	magic := make([]byte, len(streamMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != streamMagic {
		return fmt.Errorf("%w: not a snapshot stream", ErrCorrupt)
	}
	for {
		nameLen, err := readMinimalUvarint(br)
		if err != nil {
			return fmt.Errorf("%w: snapshot stream: %v", ErrCorrupt, err)
		}
		if nameLen == 0 {
			if n, _ := io.Copy(io.Discard, br); n > 0 {
				return fmt.Errorf("%w: %d bytes after the end of the snapshot stream", ErrCorrupt, n)
			}
			return nil
		}
		if nameLen > maxSnapshotName {
			return fmt.Errorf("%w: snapshot stream: a name of %d bytes", ErrCorrupt, nameLen)
		}
		nb := make([]byte, nameLen)
		if _, err := io.ReadFull(br, nb); err != nil {
			return fmt.Errorf("%w: snapshot stream: %v", ErrCorrupt, err)
		}
		name := string(nb)
		if !validSnapshotName(name) || name <= prev {
			return fmt.Errorf("%w: snapshot stream: file name %q (after %q)", ErrCorrupt, name, prev)
		}
		prev = name
		size, err := readMinimalUvarint(br)
		if err != nil || size > 1<<50 {
			return fmt.Errorf("%w: snapshot stream: size of %s", ErrCorrupt, name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("replset: snapshot file: %w", err)
		}
		h := crc32.New(castagnoli)
		n, err := io.CopyN(io.MultiWriter(f, h), br, int64(size))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			if n < int64(size) {
				return fmt.Errorf("%w: snapshot stream: %s cut short: %v", ErrCorrupt, name, err)
			}
			return err
		}
		var sum [4]byte
		if _, err := io.ReadFull(br, sum[:]); err != nil {
			return fmt.Errorf("%w: snapshot stream: %v", ErrCorrupt, err)
		}
		if binary.BigEndian.Uint32(sum[:]) != h.Sum32() {
			return fmt.Errorf("%w: snapshot stream: checksum of %s", ErrCorrupt, name)
		}
	}
}

// readMinimalUvarint reads a uvarint in its shortest encoding, the only
// one writeStream writes.
func readMinimalUvarint(br *bufio.Reader) (uint64, error) {
	var b []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		b = append(b, c)
		if c < 0x80 {
			break
		}
		if len(b) == binary.MaxVarintLen64 {
			return 0, errors.New("uvarint overflows")
		}
	}
	x, n := binary.Uvarint(b)
	if n != len(b) || uvarintLen(x) != n {
		return 0, errors.New("uvarint not in its shortest form")
	}
	return x, nil
}

func validSnapshotName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) || path.Clean(name) != name {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "." || part == ".." || part == "" {
			return false
		}
	}
	return name != metaFile
}

// dirSink is a snapshot being written (raft.SnapshotSink): either the
// FSM's checkpoint moved in (adopt) or a stream unpacked as it is
// written.
type dirSink struct {
	store *snapshotStore
	tmp   string
	meta  raft.SnapshotMeta

	pw   *io.PipeWriter
	done chan error // readStream's result
	err  error      // the first failure

	// closed is set by Close, which raft may call after Persist did:
	// the second call returns the first one's result.
	closed   bool
	closeErr error
}

func (d *dirSink) ID() string { return d.meta.ID }

// Write takes the next bytes of a stream.
func (d *dirSink) Write(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	if d.pw == nil {
		pr, pw := io.Pipe()
		d.pw, d.done = pw, make(chan error, 1)
		go func() {
			err := readStream(pr, d.tmp)
			pr.CloseWithError(err)
			d.done <- err
		}()
	}
	n, err := d.pw.Write(p)
	if err != nil {
		d.err = err
	}
	return n, err
}

// adopt moves the FSM's checkpoint in dir (its engine copy and state)
// into the snapshot.
func (d *dirSink) adopt(dir string) error {
	for _, name := range []string{engineDir, stateFile} {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(d.tmp, name)); err != nil {
			return fmt.Errorf("replset: move the checkpoint into the snapshot: %w", err)
		}
	}
	return nil
}

// Close completes the snapshot: it is listed from now on.
func (d *dirSink) Close() error {
	if !d.closed {
		d.closed, d.closeErr = true, d.close()
	}
	return d.closeErr
}

func (d *dirSink) close() error {
	if d.pw != nil {
		d.pw.Close()
		if err := <-d.done; err != nil && d.err == nil {
			d.err = err
		}
	}
	if d.err != nil {
		os.RemoveAll(d.tmp)
		return d.err
	}
	if _, err := readState(d.tmp); err != nil {
		os.RemoveAll(d.tmp)
		return err
	}
	files, err := snapshotFiles(d.tmp)
	if err == nil {
		d.meta.Size, err = streamSize(d.tmp, files)
	}
	var b []byte
	if err == nil {
		b, err = json.Marshal(&d.meta)
	}
	if err == nil {
		err = writeFileSync(filepath.Join(d.tmp, metaFile), b)
	}
	if err == nil {
		err = durable.SyncDir(d.tmp)
	}
	if err != nil {
		os.RemoveAll(d.tmp)
		return fmt.Errorf("replset: complete snapshot %s: %w", d.meta.ID, err)
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Rename(d.tmp, filepath.Join(s.dir, d.meta.ID)); err != nil {
		os.RemoveAll(d.tmp)
		return fmt.Errorf("replset: complete snapshot %s: %w", d.meta.ID, err)
	}
	if err := durable.SyncDir(s.dir); err != nil {
		return err
	}
	s.reap()
	return nil
}

// Cancel abandons the snapshot.
func (d *dirSink) Cancel() error {
	if d.closed {
		return nil
	}
	d.closed, d.closeErr = true, errors.New("replset: snapshot cancelled")
	if d.pw != nil {
		d.pw.CloseWithError(errors.New("replset: snapshot cancelled"))
		<-d.done
	}
	return os.RemoveAll(d.tmp)
}

func writeFileSync(p string, b []byte) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// fsmSnapshot is a checkpoint the FSM took between two entries
// (raft.FSMSnapshot), in a directory of its own until Persist moves it
// into the sink.
type fsmSnapshot struct {
	dir string
}

// Persist puts the checkpoint in the sink: moved when the sink is the
// member's own snapshot store, streamed otherwise.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	var err error
	if ds, ok := sink.(*dirSink); ok {
		err = ds.adopt(s.dir)
	} else {
		var files []string
		if files, err = snapshotFiles(s.dir); err == nil {
			err = writeStream(sink, s.dir, files)
		}
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release removes what Persist left of the checkpoint.
func (s *fsmSnapshot) Release() { os.RemoveAll(s.dir) }
