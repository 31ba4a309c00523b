package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/vfs"
)

// The crash tests kill the process, which leaves the page cache to write
// the data out later: they would pass with fdatasync doing nothing. The test
// here looks at the page cache itself. Once an append is acknowledged, no
// page of the log may still be dirty: dirty pages are what a power loss
// takes with it. The kernel tells which physical page backs a mapped virtual
// page (/proc/self/pagemap) and that page's flags (/proc/kpageflags); both
// need root (CAP_SYS_ADMIN).

// kpfDirty is the KPF_DIRTY bit of /proc/kpageflags
// (include/uapi/linux/kernel-page-flags.h).
const kpfDirty = 4

// pageProbe reads the dirty bit of the page-cache pages of a file.
type pageProbe struct {
	pagemap, kpageflags *os.File
}

func newPageProbe() (*pageProbe, error) {
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return nil, err
	}
	kf, err := os.Open("/proc/kpageflags")
	if err != nil {
		pm.Close()
		return nil, err
	}
	return &pageProbe{pagemap: pm, kpageflags: kf}, nil
}

func (p *pageProbe) Close() {
	p.pagemap.Close()
	p.kpageflags.Close()
}

// probeSink keeps the reads that fault pages in from being optimised away.
var probeSink byte

// dirtyPages returns the offsets of the pages of the file at path that are
// dirty in the page cache.
func (p *pageProbe) dirtyPages(path string) ([]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := int(fi.Size())
	if size == 0 {
		return nil, nil
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	defer syscall.Munmap(m)
	ps := os.Getpagesize()
	var dirty []int64
	for off := 0; off < size; off += ps {
		probeSink += m[off] // maps the page-cache page
		vpage := uint64(uintptr(unsafe.Pointer(&m[off]))) / uint64(ps)
		var b [8]byte
		if _, err := p.pagemap.ReadAt(b[:], int64(vpage*8)); err != nil {
			return nil, fmt.Errorf("read pagemap: %w", err)
		}
		e := binary.LittleEndian.Uint64(b[:])
		if e>>63 == 0 {
			return nil, fmt.Errorf("page at offset %d of %s not present after reading it", off, path)
		}
		pfn := e & (1<<55 - 1)
		if pfn == 0 {
			return nil, errors.New("pagemap hides page frame numbers (no CAP_SYS_ADMIN)")
		}
		if _, err := p.kpageflags.ReadAt(b[:], int64(pfn*8)); err != nil {
			return nil, fmt.Errorf("read kpageflags: %w", err)
		}
		if binary.LittleEndian.Uint64(b[:])>>kpfDirty&1 == 1 {
			dirty = append(dirty, int64(off))
		}
	}
	return dirty, nil
}

// skipOrFail skips with the reason, except in CI, where the test must run.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("cannot check durability in CI: %s", msg)
	}
	t.Skipf("SKIPPED, durability of acknowledged appends NOT checked: %s", msg)
}

// checkProbe shows that the probe sees a written page as dirty and, after
// a plain fdatasync, as clean, in the directory the test uses (a tmpfs, for
// one, never cleans its pages).
func checkProbe(t *testing.T, p *pageProbe, dir string) {
	t.Helper()
	path := filepath.Join(dir, "probe")
	if err := os.WriteFile(path, make([]byte, 3*os.Getpagesize()+1), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	dirty, err := p.dirtyPages(path)
	if err != nil {
		skipOrFail(t, "page flags unreadable: %v", err)
	}
	if len(dirty) == 0 {
		skipOrFail(t, "a page just written does not show as dirty in %s", dir)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = syscall.Fdatasync(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if dirty, err = p.dirtyPages(path); err != nil {
		t.Fatal(err)
	}
	if len(dirty) != 0 {
		skipOrFail(t, "pages stay dirty after fdatasync in %s (tmpfs?)", dir)
	}
}

// TestAcknowledgedAppendsLeaveNoDirtyPages appends records of many sizes,
// one at a time and in batches, across segment rolls and Cut, and after
// every acknowledgement checks that no page of any segment file is dirty in
// the page cache. It fails if fdatasync is skipped or does nothing.
func TestAcknowledgedAppendsLeaveNoDirtyPages(t *testing.T) {
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root to read /proc/kpageflags")
	}
	p, err := newPageProbe()
	if err != nil {
		skipOrFail(t, "%v", err)
	}
	defer p.Close()
	dir := t.TempDir()
	checkProbe(t, p, dir)

	check := func(what string) {
		t.Helper()
		nums, err := listSegments(vfs.Default, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nums {
			dirty, err := p.dirtyPages(segmentPath(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			if len(dirty) > 0 {
				t.Fatalf("after %s: segment %d has %d dirty pages (first at offset %d): acknowledged data not synced",
					what, n, len(dirty), dirty[0])
			}
		}
	}

	l := openT(t, Options{Dir: dir, SegmentSize: 64 << 10, Compression: CompressionNone})
	check("Open")
	id := uint64(0)
	for i, size := range []int{0, 1, 100, 4000, 4096, 10000, 30000, 70000, 7, 500} {
		id++
		if _, err := l.Append(idRecord(id, size)); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("Append %d (%d bytes)", i, size))
	}
	for i := range 5 {
		var recs [][]byte
		for j := range 4 {
			id++
			recs = append(recs, idRecord(id, 3000*j+i))
		}
		if _, err := l.AppendBatch(recs); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("AppendBatch %d", i))
	}
	id++
	if _, err := l.Append(idRecord(id, 2000)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Cut(); err != nil {
		t.Fatal(err)
	}
	check("Cut")
	id++
	if _, err := l.Append(idRecord(id, 2000)); err != nil {
		t.Fatal(err)
	}
	check("Append after Cut")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if nums, _ := listSegments(vfs.Default, dir); len(nums) < 3 {
		t.Fatalf("%d segments; the test means to roll segments", len(nums))
	}
}
