//go:build !cgo

package main

// offHeap: without cgo, Pebble allocates on the Go heap.
const offHeap = 0
