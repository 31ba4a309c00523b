package ui_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// chromiumPath is the browser the end-to-end test drives: Debian's
// chromium, or $HOURGLASS_CHROMIUM.
func chromiumPath() string {
	if p := os.Getenv("HOURGLASS_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// requireNode returns the node binary, and fails the test (skips it under
// -short) when node or the console's npm packages are missing.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("node_modules", "esbuild", "package.json"))
	}
	if err != nil {
		missing(t, "node and the console's npm packages (ui/node_modules): run `make test`, which installs them, or `npm ci --prefix ui`", err)
	}
	return node
}

func missing(t *testing.T, what string, err error) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: skipping; missing: %s (%v)", what, err)
	}
	t.Fatalf("this test needs %s (%v); `go test -short` skips it", what, err)
}
