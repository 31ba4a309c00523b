//go:build !cgo

package timeseries

// cgoEnabled: Pebble allocates its cache and memtables on the Go heap.
const cgoEnabled = false
