package wal

import (
	"errors"
	"os"
	"testing"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// TestCorruptIsCorruption checks that a damaged log is corruption to every layer
// (mongoerr.ErrCorrupt).
func TestCorruptIsCorruption(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]byte("record")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A gap in the segment sequence.
	if err := os.WriteFile(segmentPath(dir, 3), appendSegmentHeader(nil), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir})
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, mongoerr.ErrCorrupt) {
		t.Fatalf("Open with a gap = %v, want corruption", err)
	}
	if mongoerr.CodeOf(err) != mongoerr.DataCorruptionDetected {
		t.Fatalf("code %d", mongoerr.CodeOf(err))
	}
}
