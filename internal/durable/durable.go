// Package durable holds the file system steps that make a write survive a
// crash, shared by the packages that write files outside Pebble and the
// log (backups and restores, object stores, replica snapshots).
package durable

import (
	"errors"
	"os"
)

// SyncDir fsyncs directory dir, so that the names created, renamed or
// removed in it are durable.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
