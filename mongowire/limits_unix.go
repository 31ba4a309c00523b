//go:build unix

package mongowire

import "syscall"

// availableConnections is how many connections the server could hold:
// Hourglass sets no limit of its own, so, as MongoDB computes it, 80% of
// the open-file limit (a connection is a file descriptor).
func availableConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 20
	}
	return int(rl.Cur * 8 / 10)
}
