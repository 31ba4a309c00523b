//go:build !unix

package timeseries

import "syscall"

// errQuota is ENOSPC where the system has no separate quota error.
var errQuota error = syscall.ENOSPC
