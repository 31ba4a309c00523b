package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hourglassdb/hourglass/internal/tmpfs"
)

// TestAppendResumesAfterDiskFull fills a small tmpfs with the log until an
// append fails with ENOSPC, checks that appends keep failing while the disk
// is full, frees space, and checks that appends resume without a reopen.
// After a reopen the log holds every acknowledged record, in order, and
// nothing else but records of failed calls (a batch whose first records
// were synced before the next segment could not be created).
func TestAppendResumesAfterDiskFull(t *testing.T) {
	root := tmpfs.Mount(t, 2<<20)
	ballast := filepath.Join(root, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 512<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "wal")
	opts := Options{Dir: dir, SegmentSize: 96 << 10, Compression: CompressionNone}
	l := openT(t, opts)
	var acked []uint64
	id := uint64(0)
	failed := map[uint64]bool{}
	var full error
	for full == nil {
		id++
		if id > 1000 {
			t.Fatal("the disk never filled")
		}
		recs := [][]byte{idRecord(id, 7000)}
		if id%3 == 0 {
			id++
			recs = append(recs, idRecord(id, 5000))
		}
		if _, err := l.AppendBatch(recs); err != nil {
			for _, r := range recs {
				n, _ := checkIDRecord(r)
				failed[n] = true
			}
			full = err
			break
		}
		for _, r := range recs {
			n, _ := checkIDRecord(r)
			acked = append(acked, n)
		}
	}
	if !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", full)
	}
	for range 3 {
		id++
		failed[id] = true
		if _, err := l.Append(idRecord(id, 7000)); err == nil {
			t.Fatal("append succeeded on a full disk")
		} else if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on a full disk: %v, want ENOSPC", err)
		}
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		id++
		if _, err := l.Append(idRecord(id, 7000)); err != nil {
			t.Fatalf("append %d after space was freed: %v", id, err)
		}
		acked = append(acked, id)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openT(t, opts)
	defer l.Close()
	var got []uint64
	for _, r := range replayT(t, l, 0) {
		n, ok := checkIDRecord(r.rec)
		if !ok {
			t.Fatalf("record at %v does not verify", r.pos)
		}
		if !failed[n] {
			got = append(got, n)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(acked) {
		t.Fatalf("replayed %d acknowledged records %v,\nwant %d %v", len(got), got, len(acked), acked)
	}
	if _, err := l.Append(idRecord(id+1, 10)); err != nil {
		t.Fatalf("append after reopen: %v", err)
	}
}
