package objstore_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/objstore"
)

// FuzzValidKey puts every key ValidKey accepts into a directory store in a
// directory of its own, and checks that nothing lands outside the store's
// root and that the object is found again under its key. A key it refuses
// must be refused by Put with ErrBadKey.
func FuzzValidKey(f *testing.F) {
	for _, k := range []string{"a", "a/b", "sensors/date=2026-01-02/0001.parquet", "..", "../x", "a/../../x",
		"/etc/passwd", `..\x`, "a//b", ".", "./a", "a/.", "...", "..a", "a..", ".hidden", " ", "a\x00", "~", "$HOME", "%2e%2e", ".a.tmp-1"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		base := t.TempDir()
		root := filepath.Join(base, "root")
		st, err := objstore.Open(t.Context(), fileURL(root), objstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		err = st.Put(t.Context(), key, strings.NewReader("x"), 1)
		if objstore.ValidKey(key) != nil {
			if !errors.Is(err, objstore.ErrBadKey) {
				t.Fatalf("Put(%q) of a key ValidKey refuses: %v", key, err)
			}
		} else if err == nil {
			if _, err := st.Stat(t.Context(), key); err != nil {
				t.Fatalf("Stat(%q) after Put: %v", key, err)
			}
			var found bool
			if err := st.List(t.Context(), "", func(in objstore.Info) error {
				found = found || in.Key == key
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !found {
				t.Fatalf("List does not return %q", key)
			}
		}
		// Whether Put took the key or the file system refused it (a name
		// too long), the store's root is all there is in base.
		ents, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 || ents[0].Name() != "root" {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("Put(%q) wrote outside the store's root: %q", key, names)
		}
	})
}
