//go:build cgo

package timeseries

// cgoEnabled: Pebble allocates its cache and memtables with C's allocator.
const cgoEnabled = true
