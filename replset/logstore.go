package replset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/hashicorp/raft"
)

// logStore keeps a member's raft log and stable state (current term, last
// vote, the applied index of the engine) in one Pebble store, Dir/raft. It
// implements raft.LogStore and raft.StableStore. Every write is synced:
// raft acknowledges an entry to the leader once StoreLogs returns.
//
// Keys (docs/replication.md):
//
//	'l' + index (8 bytes, big endian)  -> encoded raft.Log (encodeLog)
//	's' + key                          -> stable value
type logStore struct {
	db *pebble.DB
}

const (
	prefixLog    byte = 'l'
	prefixStable byte = 's'

	// logFormat is the version byte of an encoded raft.Log.
	logFormat byte = 1
)

// errStableNotFound is what raft expects from StableStore.Get for a key
// never set: it compares the message, "not found".
var errStableNotFound = errors.New("not found")

// openLogStore opens the store in dir; Pebble's messages go to log.
// Entries are stored without compression: the log is short-lived (deleted
// after each snapshot), and compressing it cost a tenth of a leader's CPU
// under ingest (Pebble's compactions of entries already varint-packed).
func openLogStore(dir string, log *slog.Logger) (*logStore, error) {
	o := &pebble.Options{Logger: pebbleLogger{log}}
	o.Levels = make([]pebble.LevelOptions, 7)
	for i := range o.Levels {
		o.Levels[i].Compression = pebble.NoCompression
	}
	o.EnsureDefaults()
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, fmt.Errorf("replset: open raft store %s: %w", dir, err)
	}
	return &logStore{db: db}, nil
}

func (s *logStore) Close() error { return s.db.Close() }

// pebbleLogger passes Pebble's messages to a slog logger: its informative
// ones (a WAL replayed at open) at Debug level.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is called by Pebble for states it cannot continue from.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

func logKey(index uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], index)
	return k
}

func stableKey(key []byte) []byte {
	return append([]byte{prefixStable}, key...)
}

// encodeLog appends l's encoding to dst: a version byte, then index, term
// (uvarints), type (one byte), the append time (varint nanoseconds, 0 for
// none), data and extensions (uvarint length, bytes).
func encodeLog(dst []byte, l *raft.Log) []byte {
	dst = append(dst, logFormat)
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = append(dst, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	dst = binary.AppendVarint(dst, at)
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	return append(dst, l.Extensions...)
}

// decodeLog decodes b into l. l's Data and Extensions are copies.
func decodeLog(b []byte, l *raft.Log) error {
	d := decoder{b: b}
	if v := d.byte1(); v != logFormat {
		return fmt.Errorf("%w: raft log entry format %d, want %d", ErrCorrupt, v, logFormat)
	}
	l.Index = d.uvarint()
	l.Term = d.uvarint()
	l.Type = raft.LogType(d.byte1())
	l.AppendedAt = time.Time{}
	if at := d.varint(); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	l.Data = d.bytes()
	l.Extensions = d.bytes()
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d bytes after a raft log entry", ErrCorrupt, len(d.b))
	}
	return d.err
}

// FirstIndex returns the first index written, 0 for none.
func (s *logStore) FirstIndex() (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLog}, UpperBound: []byte{prefixLog + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.First() {
		return 0, it.Error()
	}
	return binary.BigEndian.Uint64(it.Key()[1:]), nil
}

// LastIndex returns the last index written, 0 for none.
func (s *logStore) LastIndex() (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLog}, UpperBound: []byte{prefixLog + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Error()
	}
	return binary.BigEndian.Uint64(it.Key()[1:]), nil
}

// GetLog reads the entry at index into l; raft.ErrLogNotFound if absent.
func (s *logStore) GetLog(index uint64, l *raft.Log) error {
	v, closer, err := s.db.Get(logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	if err := decodeLog(v, l); err != nil {
		return fmt.Errorf("replset: raft log entry %d: %w", index, err)
	}
	return nil
}

// StoreLog stores one entry, synced.
func (s *logStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries in one synced Pebble batch.
func (s *logStore) StoreLogs(logs []*raft.Log) error {
	b := s.db.NewBatch()
	defer b.Close()
	var buf []byte
	for _, l := range logs {
		buf = encodeLog(buf[:0], l)
		if err := b.Set(logKey(l.Index), buf, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// DeleteRange deletes the entries min..max, inclusive. raft calls it
// after a snapshot (and to drop a conflicting suffix); the range is
// compacted at once, so that the log's disk space is given back after
// each snapshot rather than whenever Pebble's own compactions reach it.
func (s *logStore) DeleteRange(min, max uint64) error {
	if max < min {
		return nil
	}
	end := []byte{prefixLog + 1}
	if max != ^uint64(0) {
		end = logKey(max + 1)
	}
	if err := s.db.DeleteRange(logKey(min), end, pebble.Sync); err != nil {
		return err
	}
	return s.db.Compact(logKey(min), end, false)
}

// Set stores a stable value, synced.
func (s *logStore) Set(key, val []byte) error {
	return s.db.Set(stableKey(key), val, pebble.Sync)
}

// Get returns a stable value; an error "not found" for a key never set.
func (s *logStore) Get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, errStableNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// SetUint64 stores a stable integer, synced.
func (s *logStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns a stable integer, 0 for a key never set.
func (s *logStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if errors.Is(err, errStableNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable value %q has %d bytes, want 8", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
