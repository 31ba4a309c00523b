//go:build cgo

package main

// offHeap is the memory Pebble allocates outside the Go heap in a cgo
// build: its cache, with its memtables' room.
const offHeap = 128 << 20
