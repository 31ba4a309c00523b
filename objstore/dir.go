package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hourglassdb/hourglass/internal/durable"
)

// dirStore is a Store in a local directory: a key is a path under root.
// A Put writes a temporary file beside its target, syncs it, renames it
// over the target and syncs the directory (and any directory it created),
// so a crash leaves the old object or the new one, plus at most a
// temporary file that List skips and the next Put of the key removes.
type dirStore struct {
	root string
}

// tmpMark is in the name of a Put's temporary file: ".<name>\tmp-<hex>".
// No key holds a backslash (ValidKey), so no object is ever taken for a
// temporary file: not hidden by List, not removed by a Put's sweep.
const tmpMark = `\tmp-`

func openDir(root string) (*dirStore, error) {
	root = filepath.Clean(root)
	if err := mkdirSynced(root); err != nil {
		return nil, fmt.Errorf("objstore: directory %s: %w", root, err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("objstore: directory %s: %w", root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrBadURL, root)
	}
	return &dirStore{root: root}, nil
}

func (d *dirStore) String() string { return "file://" + filepath.ToSlash(d.root) }

func (d *dirStore) Close() error { return nil }

func (d *dirStore) path(key string) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", err
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

func (d *dirStore) Put(ctx context.Context, key string, body io.Reader, size int64) (err error) {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := mkdirSynced(dir); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, "."+filepath.Base(p)+tmpMark+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	n, err := io.Copy(f, io.LimitReader(withContext(ctx, body), size+1))
	if err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	if n != size {
		return fmt.Errorf("objstore: put %s: body holds %d bytes, not the %d announced", key, n, size)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("objstore: put %s: sync: %w", key, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	if err = os.Rename(tmp, p); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	if err = syncDir(dir); err != nil {
		return fmt.Errorf("objstore: put %s: sync directory: %w", key, err)
	}
	d.sweep(dir, filepath.Base(p))
	return nil
}

// sweep removes the temporary files earlier Puts of name left in dir (a
// crash between create and rename).
func (d *dirStore) sweep(dir, name string) {
	old, _ := filepath.Glob(filepath.Join(dir, "."+globEscape(name)+globEscape(tmpMark)+"*"))
	for _, p := range old {
		_ = os.Remove(p)
	}
}

func globEscape(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `\`, `\\`)
	return r.Replace(s)
}

type dirObject struct {
	*os.File
	size int64
}

func (o dirObject) Size() int64 { return o.size }

func (d *dirStore) Open(ctx context.Context, key string) (Object, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotExist, key)
	}
	if err != nil {
		return nil, fmt.Errorf("objstore: open %s: %w", key, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("objstore: open %s: %w", key, err)
	}
	if st.IsDir() {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s (a directory)", ErrNotExist, key)
	}
	return dirObject{File: f, size: st.Size()}, nil
}

func (d *dirStore) Stat(ctx context.Context, key string) (Info, error) {
	p, err := d.path(key)
	if err != nil {
		return Info{}, err
	}
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, fmt.Errorf("%w: %s", ErrNotExist, key)
	}
	if err != nil {
		return Info{}, fmt.Errorf("objstore: stat %s: %w", key, err)
	}
	if st.IsDir() {
		return Info{}, fmt.Errorf("%w: %s (a directory)", ErrNotExist, key)
	}
	return Info{Key: key, Size: st.Size(), ModTime: st.ModTime()}, nil
}

func (d *dirStore) List(ctx context.Context, prefix string, fn func(Info) error) error {
	// Walk from the deepest directory the prefix names whole.
	start := d.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if err := ValidKey(prefix[:i]); err != nil {
			return err
		}
		start = filepath.Join(d.root, filepath.FromSlash(prefix[:i]))
	}
	var out []Info
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.IsDir() || strings.Contains(e.Name(), tmpMark) {
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		st, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted under the walk
		}
		if err != nil {
			return err
		}
		out = append(out, Info{Key: key, Size: st.Size(), ModTime: st.ModTime()})
		return nil
	})
	if err != nil {
		return fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	for _, in := range out {
		if err := fn(in); err != nil {
			return err
		}
	}
	return nil
}

func (d *dirStore) Delete(ctx context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	return syncDir(filepath.Dir(p))
}

// mkdirSynced makes dir and its missing parents, syncing each parent whose
// entries changed, so that a new directory survives a power cut.
func mkdirSynced(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirSynced(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// syncDir is durable.SyncDir for a directory that a concurrent delete may
// have removed meanwhile: nothing is left in it to make durable.
func syncDir(dir string) error {
	if err := durable.SyncDir(dir); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
