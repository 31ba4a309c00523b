package replset

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
)

// The Pebble store answers raft as its stores must, and keeps what it was
// given across a reopen.
func TestLogStore(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if first, last := indexes(t, s); first != 0 || last != 0 {
		t.Fatalf("empty store: first %d last %d, want 0 0", first, last)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 300; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1 + i/100, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	if err := s.StoreLogs(logs[:299]); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLog(logs[299]); err != nil {
		t.Fatal(err)
	}
	// Index 256 sorts after 255 (big-endian keys), not after 1.
	if first, last := indexes(t, s); first != 1 || last != 300 {
		t.Fatalf("first %d last %d, want 1 300", first, last)
	}
	if err := s.DeleteRange(1, 255); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(290, 300); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(255, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("deleted entry: %v, want ErrLogNotFound", err)
	}
	if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("unset stable key: %v, want \"not found\"", err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); v != 0 || err != nil {
		t.Fatalf("unset stable integer: %d, %v", v, err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = openLogStore(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if first, last := indexes(t, s); first != 256 || last != 289 {
		t.Fatalf("after deletes and reopen: first %d last %d, want 256 289", first, last)
	}
	if err := s.GetLog(280, &l); err != nil || l.Index != 280 || l.Term != 3 || l.Data[0] != 280-256 {
		t.Fatalf("entry 280: %+v, %v", l, err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); v != 7 || err != nil {
		t.Fatalf("CurrentTerm %d, %v; want 7", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); string(v) != "n2" || err != nil {
		t.Fatalf("LastVoteCand %q, %v", v, err)
	}
}

func indexes(t *testing.T, s *logStore) (first, last uint64) {
	t.Helper()
	first, err := s.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if last, err = s.LastIndex(); err != nil {
		t.Fatal(err)
	}
	return first, last
}
