package timeseries

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/vfs"
)

// createDir creates dir and its missing parents and syncs the directory
// holding each one it created: Pebble syncs the directory it is given,
// never its parent, so without this a power cut after the first Open could
// lose the store's directory with everything in it.
func createDir(fs vfs.FS, dir string) error {
	var missing []string
	for d := dir; ; {
		_, err := fs.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("timeseries: create %s: %w", dir, err)
		}
		missing = append(missing, d)
		parent := fs.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("timeseries: create %s: %w", dir, err)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		parent := fs.PathDir(missing[i])
		if parent == missing[i] {
			continue
		}
		d, err := fs.OpenDir(parent)
		if err != nil {
			return fmt.Errorf("timeseries: open %s: %w", parent, err)
		}
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("timeseries: sync %s: %w", parent, err)
		}
	}
	return nil
}
