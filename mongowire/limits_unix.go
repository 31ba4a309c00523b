//go:build unix

package mongowire

import "syscall"

// availableConnections is how many connections the process could hold, as
// MongoDB computes it: 80% of the open-file limit (a connection is a file
// descriptor). Options.MaxConnections is at most that.
func availableConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 20
	}
	return int(rl.Cur * 8 / 10)
}
