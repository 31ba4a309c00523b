package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchChaos runs a short chaos run on the binary built from this
// checkout: three faults on a three-member replica set under load, a
// partition of the leader first, every member checked after each and at
// the end.
func TestBenchChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three binaries")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "chaos", "--binary", bin, "--data-dir", filepath.Join(t.TempDir(), "set"),
		"--cycles", "3", "--duration", "1s", "--seed", "11"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	// Seed 11's first fault cuts the leader off while it runs.
	for _, want := range []string{"seed 11", "cycle 1/3: partition of the leader", "cycle 3/3", "final check", "expired rows gone everywhere"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr.String())
		}
	}
	if !strings.Contains(stdout.String(), "chaos clean: seed 11, 3 cycles") {
		t.Errorf("summary: %s", stdout.String())
	}
}
