package tmpfs

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size bytes on a fresh directory and unmounts it
// when the test ends. It needs root; where it cannot mount, the test skips,
// except with CI=true, where it fails.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot check a full disk in CI: %s", msg)
		}
		t.Skipf("SKIPPED, behaviour on a full disk NOT checked: %s", msg)
	}
	if os.Geteuid() != 0 {
		skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		skip("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
