package main

import (
	"io"
	"runtime"
	"testing"
)

// TestRuntimeMemoryLimit checks the Go runtime limit serve derives from its
// flags: the budget, the request bodies' memory and the fixed overhead by
// default, --memory-limit when given (0: none), nothing when GOMEMLIMIT is
// set; only the default follows the live heap. The default leaves out
// what Pebble holds outside the Go heap (offHeap: its cache and
// memtables, 128 MiB in a cgo build).
func TestRuntimeMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		args       []string
		gomemlimit string
		want       int64
		dflt       bool
	}{
		{nil, "", 256*mib + int64(2*runtime.GOMAXPROCS(0))*64*mib + memoryOverhead - offHeap, true},
		{[]string{"--memory-budget", "64MiB", "--max-body-memory", "128MiB"}, "", 64*mib + 128*mib + memoryOverhead - offHeap, true},
		{[]string{"--max-concurrent-writes", "3", "--max-body", "1MiB"}, "", 256*mib + 3*mib + memoryOverhead - offHeap, true},
		{[]string{"--memory-limit", "1GiB"}, "", 1 << 30, false},
		{[]string{"--memory-limit", "0"}, "", 0, false},
		{nil, "2GiB", 0, false},
		{[]string{"--memory-limit", "1GiB"}, "2GiB", 0, false},
	} {
		var cfg serveConfig
		fs := serveFlags(&cfg)
		if err := parseFlags(fs, c.args, io.Discard); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got, dflt := runtimeMemoryLimit(&cfg, fs, c.gomemlimit); got != c.want || dflt != c.dflt {
			t.Errorf("%q, GOMEMLIMIT=%q: limit %d, default %v; want %d, %v", c.args, c.gomemlimit, got, dflt, c.want, c.dflt)
		}
	}
}
