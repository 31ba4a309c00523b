//go:build !linux

package bench

import "errors"

func mountTmpfs(dir string, size int64) (unmount func() error, err error) {
	return nil, errors.New("a scenario that fills its filesystem mounts a tmpfs, which needs Linux")
}
