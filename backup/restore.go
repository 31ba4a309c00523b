package backup

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hourglassdb/hourglass/internal/durable"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
)

// Verify checks backup id in st (the newest complete one when id is ""):
// its manifest's checksum, then every file's size and SHA-256. It returns
// the manifest, and a *DamagedError (ErrDamaged) listing every file that
// is missing or does not match.
func Verify(ctx context.Context, st objstore.Store, id string) (*Manifest, error) {
	m, err := resolve(ctx, st, id)
	if err != nil {
		return nil, err
	}
	de := &DamagedError{ID: m.ID, Files: len(m.Files)}
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		err := readFile(ctx, st, f, io.Discard)
		var fe *fileError
		if errors.As(err, &fe) {
			de.Problems = append(de.Problems, fe.msg)
		} else if err != nil {
			return m, err
		}
	}
	if len(de.Problems) > 0 {
		return m, de
	}
	return m, nil
}

// fileError is a file of a backup that is missing or does not match.
type fileError struct{ msg string }

func (e *fileError) Error() string { return e.msg }

// readFile copies f's object to w, checking its size and checksum: a
// mismatch or a missing object is a *fileError, after which w holds
// anything.
func readFile(ctx context.Context, st objstore.Store, f File, w io.Writer) error {
	o, err := st.Open(ctx, f.Key)
	if errors.Is(err, objstore.ErrNotExist) {
		return &fileError{fmt.Sprintf("%s: missing (%s)", f.Path, f.Key)}
	}
	if err != nil {
		return targetErr(st, "read "+f.Key+" from", err)
	}
	defer o.Close()
	if o.Size() != f.Size {
		return &fileError{fmt.Sprintf("%s: %d bytes, the manifest says %d", f.Path, o.Size(), f.Size)}
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(w, h), io.NewSectionReader(o, 0, f.Size)); err != nil {
		return fmt.Errorf("backup: copy %s from %s: %w", f.Key, st, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return &fileError{fmt.Sprintf("%s: checksum mismatch (sha256 %s, the manifest says %s)", f.Path, got, f.SHA256)}
	}
	return nil
}

// Restore writes backup id of st (the newest complete one when id is "")
// into dataDir, which must not exist or be empty. Files are written into
// a directory beside it ("<dataDir>.restore-<hex>"), checked against the
// manifest as they arrive, synced, and the store is opened there once
// (the log replayed over the checkpoint, as after a crash) and closed;
// only then is it renamed to dataDir. A damaged or incomplete backup is
// refused with nothing at dataDir; an interrupted restore leaves only the
// directory beside it.
func Restore(ctx context.Context, st objstore.Store, id, dataDir string, o Options) (*Manifest, error) {
	o.ensureDefaults()
	start := o.Now()
	dataDir = filepath.Clean(dataDir)
	if ents, err := os.ReadDir(dataDir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("%w: %s is not empty: restore into a new directory", ErrDataDir, dataDir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	m, err := resolve(ctx, st, id)
	if err != nil {
		return nil, err
	}
	o.Progress.TotalFiles.Store(int64(len(m.Files)))
	o.Progress.TotalBytes.Store(m.Bytes)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tmp := dataDir + ".restore-" + hex.EncodeToString(rnd[:])
	if err := os.MkdirAll(filepath.Dir(dataDir), 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	de := &DamagedError{ID: m.ID, Files: len(m.Files)}
	for _, sub := range []string{"store", "wal"} {
		if err := os.Mkdir(filepath.Join(tmp, sub), 0o755); err != nil {
			return nil, err
		}
	}
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := restoreFile(ctx, st, f, filepath.Join(tmp, filepath.FromSlash(f.Path)))
		var fe *fileError
		if errors.As(err, &fe) {
			// Every damaged file is named, not only the first.
			de.Problems = append(de.Problems, fe.msg)
			continue
		}
		if err != nil {
			return nil, err
		}
		o.Progress.Files.Add(1)
		o.Progress.Bytes.Add(f.Size)
	}
	if len(de.Problems) > 0 {
		return nil, de
	}
	for _, d := range []string{filepath.Join(tmp, "store"), filepath.Join(tmp, "wal"), tmp} {
		if err := durable.SyncDir(d); err != nil {
			return nil, err
		}
	}
	db, err := timeseries.Open(timeseries.Options{Dir: tmp, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("backup: the restored store of backup %s does not open: %w", m.ID, err)
	}
	if err := db.Close(); err != nil {
		return nil, fmt.Errorf("backup: the restored store of backup %s: %w", m.ID, err)
	}
	if err := os.Remove(dataDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	if err := os.Rename(tmp, dataDir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	done = true
	if err := durable.SyncDir(filepath.Dir(dataDir)); err != nil {
		return nil, err
	}
	o.Logger.Info("restore complete", "backup", m.ID, "from", st.String(), "dataDir", dataDir,
		"files", len(m.Files), "bytes", m.Bytes, "took", o.Now().Sub(start))
	return m, nil
}

// restoreFile writes f to path, checked and synced.
func restoreFile(ctx context.Context, st objstore.Store, f File, path string) error {
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = readFile(ctx, st, f, w)
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}
