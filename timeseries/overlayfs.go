package timeseries

import (
	"errors"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
)

// overlayFS is the file system of a store opened read-only: files are read
// from base until written, and everything written (Pebble's manifest, its
// options, the sstables of its memtable flushes) goes to memory, as do
// removals and renames. base is never written. It lets Pebble open
// read-write over a full disk, so that replaying the log may apply
// document writes and deletes to the store in memory: what the log holds
// is readable, and the next open with space free replays it again into
// the store on disk.
type overlayFS struct {
	base vfs.FS
	mem  vfs.FS
	mu   sync.Mutex
	// hidden holds the names of base files removed, renamed or replaced
	// by a file in mem.
	hidden map[string]bool
}

func newOverlayFS(base vfs.FS) *overlayFS {
	return &overlayFS{base: base, mem: vfs.NewMem(), hidden: map[string]bool{}}
}

var _ vfs.FS = (*overlayFS)(nil)

func (fs *overlayFS) inMem(name string) bool {
	_, err := fs.mem.Stat(name)
	return err == nil
}

// inBase reports whether name is a visible file of base. fs.mu is held.
func (fs *overlayFS) inBase(name string) bool {
	if fs.hidden[name] {
		return false
	}
	_, err := fs.base.Stat(name)
	return err == nil
}

// copyUp copies the base file old to new in mem. fs.mu is held.
func (fs *overlayFS) copyUp(old, new string) error {
	src, err := fs.base.Open(old)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := fs.mem.MkdirAll(fs.mem.PathDir(new), 0o755); err != nil {
		return err
	}
	dst, err := fs.mem.Create(new)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	fs.hidden[new] = true
	return dst.Close()
}

func (fs *overlayFS) Create(name string) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.mem.MkdirAll(fs.mem.PathDir(name), 0o755); err != nil {
		return nil, err
	}
	fs.hidden[name] = true
	return fs.mem.Create(name)
}

func (fs *overlayFS) Link(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.inMem(oldname) {
		return fs.mem.Link(oldname, newname)
	}
	if !fs.inBase(oldname) {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: os.ErrNotExist}
	}
	return fs.copyUp(oldname, newname)
}

func (fs *overlayFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.inMem(name) {
		return fs.mem.Open(name, opts...)
	}
	if fs.hidden[name] {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	return fs.base.Open(name, opts...)
}

func (fs *overlayFS) OpenReadWrite(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.inMem(name) {
		if fs.inBase(name) {
			if err := fs.copyUp(name, name); err != nil {
				return nil, err
			}
		} else if err := fs.mem.MkdirAll(fs.mem.PathDir(name), 0o755); err != nil {
			return nil, err
		}
	}
	fs.hidden[name] = true
	return fs.mem.OpenReadWrite(name, opts...)
}

// OpenDir opens name in mem (syncing a directory of base writes nothing
// that matters here).
func (fs *overlayFS) OpenDir(name string) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.mem.MkdirAll(name, 0o755); err != nil {
		return nil, err
	}
	return fs.mem.OpenDir(name)
}

func (fs *overlayFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	inBase := fs.inBase(name)
	if fs.inMem(name) {
		if err := fs.mem.Remove(name); err != nil {
			return err
		}
	} else if !inBase {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	fs.hidden[name] = true
	return nil
}

func (fs *overlayFS) RemoveAll(name string) error {
	names, err := fs.List(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, n := range names {
		if err := fs.RemoveAll(fs.PathJoin(name, n)); err != nil {
			return err
		}
	}
	if err := fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (fs *overlayFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.inMem(oldname) {
		if err := fs.mem.MkdirAll(fs.mem.PathDir(newname), 0o755); err != nil {
			return err
		}
		if err := fs.mem.Rename(oldname, newname); err != nil {
			return err
		}
	} else if !fs.inBase(oldname) {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrNotExist}
	} else if err := fs.copyUp(oldname, newname); err != nil {
		return err
	}
	fs.hidden[oldname], fs.hidden[newname] = true, true
	return nil
}

func (fs *overlayFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	if err := fs.Rename(oldname, newname); err != nil {
		return nil, err
	}
	return fs.OpenReadWrite(newname)
}

func (fs *overlayFS) MkdirAll(dir string, perm os.FileMode) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mem.MkdirAll(dir, perm)
}

// Lock locks name in mem: the DB's own log, opened beside, keeps other
// processes out of the directory.
func (fs *overlayFS) Lock(name string) (io.Closer, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.mem.MkdirAll(fs.mem.PathDir(name), 0o755); err != nil {
		return nil, err
	}
	return fs.mem.Lock(name)
}

func (fs *overlayFS) List(dir string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	seen := map[string]bool{}
	baseNames, berr := fs.base.List(dir)
	for _, n := range baseNames {
		if !fs.hidden[fs.base.PathJoin(dir, n)] {
			seen[n] = true
		}
	}
	memNames, merr := fs.mem.List(dir)
	for _, n := range memNames {
		seen[n] = true
	}
	if berr != nil && merr != nil {
		return nil, berr
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func (fs *overlayFS) Stat(name string) (os.FileInfo, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fi, err := fs.mem.Stat(name); err == nil {
		return fi, nil
	}
	if fs.hidden[name] {
		return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
	}
	return fs.base.Stat(name)
}

func (fs *overlayFS) PathBase(path string) string    { return fs.base.PathBase(path) }
func (fs *overlayFS) PathJoin(elem ...string) string { return fs.base.PathJoin(elem...) }
func (fs *overlayFS) PathDir(path string) string     { return fs.base.PathDir(path) }
func (fs *overlayFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	return fs.base.GetDiskUsage(path)
}
