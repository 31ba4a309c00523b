//go:build !linux

package wal

import "github.com/cockroachdb/pebble/vfs"

// fdatasync falls back to fsync where fdatasync is not available.
func fdatasync(f vfs.File, name string) error { return f.Sync() }
