package ui_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDistUpToDate builds the console from its sources into a temporary
// directory and checks that the committed dist/ (what go:embed puts in the
// binary) is byte for byte that build.
func TestDistUpToDate(t *testing.T) {
	node := requireNode(t)
	out := t.TempDir()
	cmd := exec.Command(node, "build.mjs", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node build.mjs: %v\n%s", err, b)
	}
	want := readTree(t, out)
	got := readTree(t, "dist")
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("dist/%s is missing", name)
		case !bytes.Equal(g, w):
			t.Errorf("dist/%s differs from a fresh build (%d bytes committed, %d built)", name, len(g), len(w))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("dist/%s is not made by the build", name)
		}
	}
	if t.Failed() {
		t.Log("ui/dist is stale: run `make ui` and commit ui/dist")
	}
}

// TestTypecheck runs the TypeScript compiler over the sources (esbuild
// strips types without checking them).
func TestTypecheck(t *testing.T) {
	node := requireNode(t)
	cmd := exec.Command(node, filepath.Join("node_modules", "typescript", "bin", "tsc"), "--noEmit", "-p", ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, b)
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("%s is empty", strings.TrimSpace(dir))
	}
	return files
}
