package objstore_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hourglassdb/hourglass/objstore"
)

// TestDirLeftoverTemp: the temporary file a crash left between create and
// rename is not an object, and the next Put of its key removes it.
func TestDirLeftoverTemp(t *testing.T) {
	root := t.TempDir()
	st := open(t, fileURL(root), objstore.Options{})
	put(t, st, "d/k", []byte("old"))
	left := filepath.Join(root, "d", `.k\tmp-0123456789abcdef`)
	if err := os.WriteFile(left, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := list(t, st, ""); !slices.Equal(got, []string{"d/k"}) {
		t.Fatalf("List = %q", got)
	}
	put(t, st, "d/k", []byte("new"))
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the leftover temporary file is still there: %v", err)
	}
	if got := get(t, st, "d/k"); string(got) != "new" {
		t.Fatalf("got %q", got)
	}
}
