//go:build unix

package timeseries

import "syscall"

// errQuota is the error of a write over the user's disk quota.
var errQuota error = syscall.EDQUOT
