package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/objstore"
)

// Info describes a backup in a target.
type Info struct {
	ID string
	// Complete is set when its manifest is there: only a complete backup
	// is verified, restored or kept by Prune. An incomplete one was
	// interrupted, or is being taken.
	Complete bool
	// Manifest is the complete backup's manifest; nil when Err is set.
	Manifest *Manifest
	// Err is why the manifest could not be read (damaged).
	Err error
	// Started is when an incomplete backup began (its marker's time).
	Started time.Time
}

// List returns the backups in st, oldest first: complete ones with their
// manifests, incomplete ones without.
func List(ctx context.Context, st objstore.Store) ([]Info, error) {
	byID := map[string]*Info{}
	err := st.List(ctx, backupsPrefix, func(in objstore.Info) error {
		rest := strings.TrimPrefix(in.Key, backupsPrefix)
		id, name, ok := strings.Cut(rest, "/")
		if !ok || !ValidID(id) {
			return nil
		}
		b := byID[id]
		if b == nil {
			b = &Info{ID: id}
			byID[id] = b
		}
		switch name {
		case manifestName:
			b.Complete = true
		case pendingName:
			b.Started = in.ModTime
		}
		return nil
	})
	if err != nil {
		return nil, targetErr(st, "list", err)
	}
	out := make([]Info, 0, len(byID))
	for _, b := range byID {
		if b.Complete {
			b.Manifest, b.Err = readManifest(ctx, st, b.ID)
			if b.Err != nil && !errors.Is(b.Err, ErrDamaged) {
				return nil, b.Err
			}
		}
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// ReadManifest returns the manifest of backup id in st, or of the newest
// complete backup when id is "", checked against its own checksum (its
// files are not read: Verify reads them).
func ReadManifest(ctx context.Context, st objstore.Store, id string) (*Manifest, error) {
	return resolve(ctx, st, id)
}

// resolve returns the manifest of backup id, or of the newest complete
// backup when id is "".
func resolve(ctx context.Context, st objstore.Store, id string) (*Manifest, error) {
	if id != "" {
		if !ValidID(id) {
			return nil, fmt.Errorf("%w: %q is not a backup ID (like 20260102T030405.678Z-9abc)", ErrNoBackup, id)
		}
		return readManifest(ctx, st, id)
	}
	all, err := List(ctx, st)
	if err != nil {
		return nil, err
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Complete {
			// The newest complete one: a damaged manifest is reported,
			// not skipped for an older backup.
			if all[i].Err != nil {
				return nil, all[i].Err
			}
			return all[i].Manifest, nil
		}
	}
	return nil, fmt.Errorf("%w in %s", ErrNoBackup, st)
}

// PruneResult is what Prune did.
type PruneResult struct {
	// Removed are the backups removed: complete ones beyond the kept and
	// incomplete ones older than PendingGrace.
	Removed []string
	// Kept are the complete backups kept.
	Kept []string
	// Files and Bytes are the file objects removed, no backup naming them.
	Files int
	Bytes int64
	// FilesSkipped is set when files were not collected because a backup
	// is under way (an incomplete one younger than PendingGrace).
	FilesSkipped bool
}

// PendingGrace is how long an incomplete backup is taken to be under way:
// Prune removes files no backup names only when no incomplete backup is
// younger, and removes incomplete backups older.
const PendingGrace = 24 * time.Hour

// Prune keeps the keep newest complete backups in st (keep >= 1), removes
// the older ones (their manifests first) and incomplete backups older
// than PendingGrace, then removes the file objects no kept backup names.
// A backup taken while Prune runs is safe: files are not collected while
// an incomplete backup is younger than PendingGrace, and Create checks the
// files it reuses before it writes its manifest.
func Prune(ctx context.Context, st objstore.Store, keep int, now time.Time) (PruneResult, error) {
	var res PruneResult
	if keep < 1 {
		return res, fmt.Errorf("backup: prune must keep at least one backup, not %d", keep)
	}
	all, err := List(ctx, st)
	if err != nil {
		return res, err
	}
	var complete []Info
	for _, b := range all {
		if b.Complete {
			complete = append(complete, b)
		}
	}
	drop := max(len(complete)-keep, 0)
	removeBackup := func(id string) error {
		// The manifest first: from then on the backup is incomplete.
		if err := st.Delete(ctx, manifestKey(id)); err != nil {
			return targetErr(st, "delete from", err)
		}
		var keys []string
		err := st.List(ctx, backupsPrefix+id+"/", func(in objstore.Info) error {
			keys = append(keys, in.Key)
			return nil
		})
		if err != nil {
			return targetErr(st, "list", err)
		}
		for _, k := range keys {
			if err := st.Delete(ctx, k); err != nil {
				return targetErr(st, "delete from", err)
			}
		}
		res.Removed = append(res.Removed, id)
		return nil
	}
	for _, b := range complete[:drop] {
		if err := removeBackup(b.ID); err != nil {
			return res, err
		}
	}
	referenced := map[string]bool{}
	for _, b := range complete[drop:] {
		if b.Err != nil {
			return res, fmt.Errorf("backup: prune collects no files while a kept backup's manifest is damaged (its files are unknown): %w", b.Err)
		}
		res.Kept = append(res.Kept, b.ID)
		for _, f := range b.Manifest.Files {
			referenced[f.Key] = true
		}
	}
	for _, b := range all {
		if b.Complete {
			continue
		}
		if now.Sub(b.Started) < PendingGrace {
			res.FilesSkipped = true
			continue
		}
		if err := removeBackup(b.ID); err != nil {
			return res, err
		}
	}
	if res.FilesSkipped {
		return res, nil
	}
	var victims []objstore.Info
	err = st.List(ctx, filesPrefix, func(in objstore.Info) error {
		if !referenced[in.Key] {
			victims = append(victims, in)
		}
		return nil
	})
	if err != nil {
		return res, targetErr(st, "list", err)
	}
	for _, in := range victims {
		if err := st.Delete(ctx, in.Key); err != nil {
			return res, targetErr(st, "delete from", err)
		}
		res.Files++
		res.Bytes += in.Size
	}
	return res, nil
}
