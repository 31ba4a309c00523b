package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
)

// Options configure Create and Restore. The zero value is usable.
type Options struct {
	// Logger gets a line per backup or restore. Nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock of IDs and manifests. Nil: time.Now.
	Now func() time.Time
	// Version is the server's version, recorded in the manifest.
	Version string
	// Progress, when set, is updated as files are copied; readers load it
	// while the backup runs (the server's currentop shows it).
	Progress *Progress
	// MaxBytesPerSecond paces Create's reads of the store's files (to
	// checksum and to copy them), so that a backup leaves the disk and
	// the cores to the writers; 0 means no limit: the backup takes what
	// the disk gives (docs/benchmarks.md has writers' latency either way).
	MaxBytesPerSecond int64
}

// Progress counts a backup's or a restore's work so far; its fields are
// read and written atomically.
type Progress struct {
	Files, Bytes, CopiedBytes atomic.Int64
	// TotalFiles and TotalBytes are the whole backup's, once known.
	TotalFiles, TotalBytes atomic.Int64
}

func (o *Options) ensureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Progress == nil {
		o.Progress = new(Progress)
	}
}

// Result is what Create did.
type Result struct {
	ID    string
	Files int
	// Bytes is the backup's size; CopiedBytes what this backup copied
	// (the files the target did not hold already).
	Bytes, CopiedBytes int64
	Took               time.Duration
}

// Create backs up db into st while db keeps serving: every write
// acknowledged before the call is in the backup. It returns once the
// backup's manifest is durable in st; on error no manifest is written,
// and the files copied so far are reused by the next backup (Prune
// removes them if none does). One backup of a DB runs at a time: another
// call meanwhile fails with timeseries.ErrBackupRunning.
func Create(ctx context.Context, db *timeseries.DB, st objstore.Store, o Options) (Result, error) {
	o.ensureDefaults()
	c := &creation{ctx: ctx, st: st, o: o, start: o.Now()}
	c.res.ID = newID(c.start)
	if err := db.Backup(c.copyImage); err != nil {
		return Result{}, err
	}
	// Last: the manifest makes the backup complete.
	m, id := c.m, c.res.ID
	m.Finished = o.Now().UTC()
	b, err := encodeManifest(m)
	if err != nil {
		return Result{}, err
	}
	if err := st.Put(ctx, manifestKey(id), bytes.NewReader(b), int64(len(b))); err != nil {
		return Result{}, targetErr(st, "write", err)
	}
	if err := st.Delete(ctx, pendingKey(id)); err != nil {
		o.Logger.Warn("backup complete; its pending marker was not removed", "backup", id, "target", st.String(), "err", err)
	}
	res := c.res
	res.Files, res.Bytes, res.Took = len(m.Files), m.Bytes, o.Now().Sub(c.start)
	o.Logger.Info("backup complete", "backup", id, "target", st.String(), "files", res.Files,
		"bytes", res.Bytes, "copiedBytes", res.CopiedBytes, "took", res.Took)
	return res, nil
}

// creation is one Create: what copyImage fills in.
type creation struct {
	ctx   context.Context
	st    objstore.Store
	o     Options
	start time.Time
	m     *Manifest
	res   Result
}

// copyImage copies the files of im that st does not hold, and makes the
// manifest (c.m) of them all.
func (c *creation) copyImage(im *timeseries.BackupImage) error {
	ctx, st, o, id := c.ctx, c.st, c.o, c.res.ID
	// The marker tells Prune a backup is under way, and shows an
	// interrupted one for what it is.
	marker, _ := json.Marshal(map[string]any{"id": id, "started": c.start.UTC()})
	if err := st.Put(ctx, pendingKey(id), bytes.NewReader(marker), int64(len(marker))); err != nil {
		return targetErr(st, "write", err)
	}
	have := map[string]int64{}
	err := st.List(ctx, filesPrefix, func(in objstore.Info) error {
		have[in.Key] = in.Size
		return nil
	})
	if err != nil {
		return targetErr(st, "list", err)
	}
	m := &Manifest{Format: manifestFormat, ID: id, Taken: im.Taken.UTC(), Version: o.Version}
	if len(im.State) > 0 {
		if !json.Valid(im.State) {
			return fmt.Errorf("backup: the member state recorded with the image is not JSON (%d bytes)", len(im.State))
		}
		m.Member = json.RawMessage(im.State)
	}
	c.m = m
	for _, f := range im.Files {
		m.Bytes += f.Size
	}
	o.Progress.TotalFiles.Store(int64(len(im.Files)))
	o.Progress.TotalBytes.Store(m.Bytes)
	known := knownSums(ctx, st)
	pace := &pacer{rate: o.MaxBytesPerSecond, start: time.Now()}
	var reused []File
	for _, f := range im.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		bf, err := describeFile(im, f, known, pace)
		if err != nil {
			return err
		}
		if size, ok := have[bf.Key]; ok && size == f.Size {
			reused = append(reused, bf)
		} else {
			if err := putImageFile(ctx, st, im, bf, pace); err != nil {
				return err
			}
			c.res.CopiedBytes += f.Size
			o.Progress.CopiedBytes.Add(f.Size)
		}
		m.Files = append(m.Files, bf)
		o.Progress.Files.Add(1)
		o.Progress.Bytes.Add(f.Size)
	}
	// A file found at the start may have been pruned since (a prune run
	// alongside): it is copied again before the manifest names it.
	for _, f := range reused {
		if _, err := st.Stat(ctx, f.Key); errors.Is(err, objstore.ErrNotExist) {
			if err := putImageFile(ctx, st, im, f, pace); err != nil {
				return err
			}
			c.res.CopiedBytes += f.Size
		} else if err != nil {
			return targetErr(st, "stat", err)
		}
	}
	return nil
}

// describeFile is f as the manifest lists it: its checksum is read from
// known when the newest backup had the same file (path and identity),
// computed otherwise.
func describeFile(im *timeseries.BackupImage, f timeseries.BackupFile, known map[string]string, pace *pacer) (File, error) {
	fi, err := im.Stat(f.Path)
	if err != nil {
		return File{}, fmt.Errorf("backup: %w", err)
	}
	ident := identity(fi)
	sum := ""
	if ident != "" {
		sum = known[f.Path+"\x00"+ident]
	}
	if sum == "" {
		if sum, err = hashImageFile(im, f, pace); err != nil {
			return File{}, err
		}
	}
	return File{Path: f.Path, Size: f.Size, SHA256: sum, Key: fileKey(f.Path, f.Size, sum), Ident: ident}, nil
}

// knownSums maps the path and identity of each file of the newest
// complete backup in st to its checksum; empty when there is none, or its
// manifest does not verify.
func knownSums(ctx context.Context, st objstore.Store) map[string]string {
	known := map[string]string{}
	m, err := resolve(ctx, st, "")
	if err != nil {
		return known
	}
	for _, f := range m.Files {
		if f.Ident != "" {
			known[f.Path+"\x00"+f.Ident] = f.SHA256
		}
	}
	return known
}

// targetErr is an error of the target: ErrTarget naming it.
func targetErr(st objstore.Store, op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: cannot %s %s: %v", ErrTarget, op, st, err)
}

// hashImageFile is the SHA-256 of an image's file, checked against its
// size.
func hashImageFile(im *timeseries.BackupImage, f timeseries.BackupFile, pace *pacer) (string, error) {
	r, err := im.Open(f.Path)
	if err != nil {
		return "", fmt.Errorf("backup: read %s: %w", f.Path, err)
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, pace.reader(r))
	if err != nil {
		return "", fmt.Errorf("backup: read %s: %w", f.Path, err)
	}
	if n != f.Size {
		return "", fmt.Errorf("backup: %s holds %d bytes, the image listed %d", f.Path, n, f.Size)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// putImageFile copies an image's file to its key, checking what it sent
// against the checksum the key names; an object that does not match is
// removed (its key would lie to every later backup).
func putImageFile(ctx context.Context, st objstore.Store, im *timeseries.BackupImage, f File, pace *pacer) error {
	r, err := im.Open(f.Path)
	if err != nil {
		return fmt.Errorf("backup: read %s: %w", f.Path, err)
	}
	defer r.Close()
	h := sha256.New()
	if err := st.Put(ctx, f.Key, io.TeeReader(pace.reader(r), h), f.Size); err != nil {
		return targetErr(st, "write "+f.Key+" to", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		_ = st.Delete(ctx, f.Key)
		return fmt.Errorf("backup: %s changed while it was copied (sha256 %s, then %s)", f.Path, f.SHA256, got)
	}
	return nil
}

// pacer keeps a backup's reads under rate bytes a second on average since
// start (0: no limit). It is used by one goroutine.
type pacer struct {
	rate  int64
	start time.Time
	n     int64
}

// reader is r paced.
func (p *pacer) reader(r io.Reader) io.Reader {
	if p.rate <= 0 {
		return r
	}
	return pacedReader{r: r, p: p}
}

type pacedReader struct {
	r io.Reader
	p *pacer
}

// pacedChunk bounds one read, so that the pause after it stays short.
const pacedChunk = 256 << 10

func (pr pacedReader) Read(b []byte) (int, error) {
	if len(b) > pacedChunk {
		b = b[:pacedChunk]
	}
	n, err := pr.r.Read(b)
	pr.p.n += int64(n)
	due := pr.p.start.Add(time.Duration(float64(pr.p.n) / float64(pr.p.rate) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
	return n, err
}
