package timeseries

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/vfs"
)

// ErrBackupRunning is what Backup answers while another backup of the same
// DB is running.
var ErrBackupRunning = errors.New("timeseries: a backup is already running")

// backupDirName is the directory under Options.Dir where Backup builds its
// image; whatever a crash left there is removed by the next backup.
const backupDirName = "backup.tmp"

// BackupImage is a consistent image of the store on the store's own
// filesystem, made by Backup: a Pebble checkpoint (store/) and the log
// segments that go with it (wal/). Copied into an empty data directory, in
// the same relative paths, it is a store that Open opens with every write
// acknowledged before Backup was called, as Open recovers a store after a
// crash: the log's records are replayed over the checkpoint.
type BackupImage struct {
	// Files are the image's files, paths relative to the data directory
	// with forward slashes ("store/000012.sst", "wal/00000000000000000007.wal"), sorted.
	// Every file is immutable while the image exists.
	Files []BackupFile
	// Taken is when the log was cut: writes acknowledged before it are in
	// the image.
	Taken time.Time
	// State is what the DB's BackupHook returned for this image (nil
	// without a hook): the state of its owner that goes with exactly
	// these contents, a replica set member's applied raft index among
	// them. The caller must not modify it.
	State []byte

	fs   vfs.FS
	root string
}

// BackupFile is a file of a BackupImage.
type BackupFile struct {
	Path string
	Size int64
}

// Stat describes the image's file at path (one of Files' paths). A
// table of the store is a hard link to the store's own file: the same
// file (its inode) in two images is the same content.
func (im *BackupImage) Stat(path string) (os.FileInfo, error) {
	if !slices.ContainsFunc(im.Files, func(f BackupFile) bool { return f.Path == path }) {
		return nil, fmt.Errorf("timeseries: %s is not a file of the backup image", path)
	}
	return im.fs.Stat(filepath.Join(im.root, filepath.FromSlash(path)))
}

// Open opens the image's file at path (one of Files' paths) for reading.
// The caller closes it.
func (im *BackupImage) Open(path string) (io.ReadCloser, error) {
	if !slices.ContainsFunc(im.Files, func(f BackupFile) bool { return f.Path == path }) {
		return nil, fmt.Errorf("timeseries: %s is not a file of the backup image", path)
	}
	return im.fs.Open(filepath.Join(im.root, filepath.FromSlash(path)))
}

// BackupHook is called by Backup before it makes an image, with none of
// the DB's locks held. It returns the state to record with the image
// (BackupImage.State) and a function Backup calls once the image is made
// (or failed), before the image is handed on. Between the two, the hook's
// owner keeps the DB unchanged: a replica set member stops applying its
// log there, so that the index it returns names exactly what the image
// holds. An error fails the backup.
type BackupHook func() (state []byte, release func(), err error)

// SetBackupHook makes h the hook every later Backup of db calls; nil
// removes it. The DB's owner removes it before it closes the DB. Safe for
// concurrent use; a Backup already past its hook is not affected.
func (db *DB) SetBackupHook(h BackupHook) {
	if h == nil {
		db.backupHook.Store(nil)
		return
	}
	db.backupHook.Store(&h)
}

// Backup makes an image of the store while writers keep going, calls fn
// with it, and removes it once fn returns; fn's error is Backup's. The
// image is made under the lock that checkpoints, deletes, merges, TTL
// passes and DDL take (they wait for it, not for fn): Pebble's tables are
// checkpointed, then the log is cut, and the log's segments below the cut
// are linked beside them (hard links where the file system has them,
// copies elsewhere): the image is the store as a crash
// at the cut would leave it, with no memtable flushed since the
// checkpoint. Writers are never excluded: an insert that lands after the
// Pebble checkpoint is in a log segment the image holds, or after the cut
// and not in the image at all; nothing of a write is in it without its
// log record. The image costs disk space only as the live store compacts
// away from its tables and truncates its log.
//
// With Options.ExternalLog (no log), a checkpoint first writes what is in
// memory to Pebble: the image holds every write applied before the call,
// and whole writes only.
//
// With a BackupHook (SetBackupHook), the hook is called first and its
// state is the image's State; its release runs once the image is made.
//
// One backup runs at a time: a second call while one runs fails with
// ErrBackupRunning. fn may run while the DB closes; the image stays valid.
func (db *DB) Backup(fn func(*BackupImage) error) (err error) {
	if db.closed.Load() {
		return ErrClosed
	}
	if err := db.checkSpace(-1); err != nil {
		return err
	}
	if !db.backupBusy.CompareAndSwap(false, true) {
		return ErrBackupRunning
	}
	defer db.backupBusy.Store(false)
	fs := db.opts.FS
	root := filepath.Join(db.opts.Dir, backupDirName)
	if err := fs.RemoveAll(root); err != nil {
		return fmt.Errorf("timeseries: remove the old backup image %s: %w", root, err)
	}
	defer func() {
		if rerr := fs.RemoveAll(root); rerr != nil && err == nil {
			err = fmt.Errorf("timeseries: remove the backup image %s: %w", root, rerr)
		}
	}()
	var (
		state   []byte
		release func()
	)
	if h := db.backupHook.Load(); h != nil {
		if state, release, err = (*h)(); err != nil {
			return fmt.Errorf("timeseries: backup: %w", err)
		}
	}
	im, err := db.backupImage(root)
	if release != nil {
		release()
	}
	if err != nil {
		return err
	}
	im.State = state
	return fn(im)
}

// backupImage makes the image in root.
func (db *DB) backupImage(root string) (*BackupImage, error) {
	fs := db.opts.FS
	if err := fs.MkdirAll(filepath.Join(root, "wal"), 0o755); err != nil {
		return nil, fmt.Errorf("timeseries: backup image %s: %w", root, db.diskErr(err))
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	if db.opts.ExternalLog {
		// No log holds what is in memory (a replica set member's engine):
		// a checkpoint writes it to Pebble and flushes it, documents of
		// plain collections included, before the tables are linked.
		if err := db.checkpointLocked(db.stop); err != nil {
			return nil, fmt.Errorf("timeseries: backup: checkpoint: %w", err)
		}
	}
	// Every segment the log holds goes with the checkpoint: those from the
	// one its recovery starts at (a checkpoint's own segment, or an older
	// one when a checkpoint's flush failed) are all there, and older ones
	// are skipped by the replay. Documents of plain collections still in
	// Pebble's memtables are not in the checkpoint; their records are in
	// these segments.
	if err := db.pdb.Checkpoint(filepath.Join(root, "store")); err != nil {
		return nil, fmt.Errorf("timeseries: backup: checkpoint the store into %s: %w", root, db.diskErr(err))
	}
	// The cut comes after the checkpoint: every write in the checkpoint has
	// its record below the cut, and every write acknowledged before the
	// call too.
	cut, err := db.wal.Cut()
	if err != nil {
		return nil, fmt.Errorf("timeseries: backup: cut the log: %w", err)
	}
	taken := time.Now()
	walDir := filepath.Join(db.opts.Dir, "wal")
	names, err := fs.List(walDir)
	if err != nil {
		return nil, fmt.Errorf("timeseries: backup: list the log: %w", err)
	}
	slices.Sort(names)
	for _, name := range names {
		n, ok := segmentNumber(name)
		if !ok || n >= cut {
			continue
		}
		if err := vfs.LinkOrCopy(fs, filepath.Join(walDir, name), filepath.Join(root, "wal", name)); err != nil {
			return nil, fmt.Errorf("timeseries: backup: link log segment %d: %w", n, db.diskErr(err))
		}
	}
	im := &BackupImage{Taken: taken, fs: fs, root: root}
	for _, sub := range []string{"store", "wal"} {
		names, err := fs.List(filepath.Join(root, sub))
		if err != nil {
			return nil, fmt.Errorf("timeseries: backup image: %w", err)
		}
		for _, name := range names {
			st, err := fs.Stat(filepath.Join(root, sub, name))
			if err != nil {
				return nil, fmt.Errorf("timeseries: backup image: %w", err)
			}
			if st.IsDir() {
				continue
			}
			im.Files = append(im.Files, BackupFile{Path: sub + "/" + name, Size: st.Size()})
		}
	}
	slices.SortFunc(im.Files, func(a, b BackupFile) int { return strings.Compare(a.Path, b.Path) })
	return im, nil
}

// segmentNumber is the number of a log segment's file name: digits and
// ".wal" (wal's segmentName).
func segmentNumber(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, ".wal")
	if !ok || base == "" || strings.TrimLeft(base, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 10, 64)
	return n, err == nil
}
