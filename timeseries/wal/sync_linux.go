package wal

import (
	"os"
	"syscall"

	"github.com/cockroachdb/pebble/vfs"
)

// fdatasync flushes the data of f, an OS file named name, and the metadata
// needed to read it back (the size), but not its timestamps.
func fdatasync(f vfs.File, name string) error {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return f.SyncData()
	}
	for {
		err := syscall.Fdatasync(int(fd))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: name, Err: err}
			}
			return nil
		}
	}
}
