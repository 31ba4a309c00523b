package timeseries

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble"
)

// A store of an older format version is raised to this build's on open,
// before anything is written; one of a newer version is refused.
func TestFormatVersionOnOpen(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	setFormat := func(v byte) {
		t.Helper()
		p, err := pebble.Open(filepath.Join(dir, "store"), &pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Set(keyFormat, []byte{v}, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	setFormat(1)
	db = openTest(t, dir, nil)
	v, closer, err := db.pdb.Get(keyFormat)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || v[0] != formatVersion {
		t.Fatalf("format %v after opening a version-1 store; want [%d]", v, formatVersion)
	}
	closer.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	setFormat(formatVersion + 1)
	if _, err := Open(Options{Dir: dir, NoSync: true}); !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("open of a version-%d store: %v, want ErrNewerFormat", formatVersion+1, err)
	}
}
