package bench

import (
	"fmt"
	"syscall"
)

// mountTmpfs mounts a tmpfs of size bytes on dir (Linux, as root), for a
// scenario that fills its data directory's filesystem; unmount undoes it.
func mountTmpfs(dir string, size int64) (unmount func() error, err error) {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		return nil, fmt.Errorf("mount a tmpfs of %d MiB on %s (needs root): %w", size>>20, dir, err)
	}
	return func() error { return syscall.Unmount(dir, syscall.MNT_DETACH) }, nil
}
