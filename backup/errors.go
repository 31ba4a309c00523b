package backup

import (
	"errors"
	"fmt"
	"strings"
)

// Errors.
var (
	// ErrNoBackup is returned (wrapped) when the target holds no complete
	// backup, or none with the ID asked for.
	ErrNoBackup = errors.New("backup: no complete backup")
	// ErrDamaged is returned (wrapped, in a *DamagedError) when a backup's
	// manifest or one of its files does not match its checksum or size,
	// or a file is missing.
	ErrDamaged = errors.New("backup: the backup is damaged")
	// ErrTarget is returned (wrapped) when the target cannot be written or
	// read; the message names it.
	ErrTarget = errors.New("backup: target not usable")
	// ErrDataDir is returned (wrapped) by Restore for a data directory it
	// will not write: one that holds files already.
	ErrDataDir = errors.New("backup: data directory not usable")
)

// DamagedError lists what is wrong with a backup: one line per file
// (missing, wrong size, wrong checksum) or the manifest's own damage.
type DamagedError struct {
	ID       string
	Problems []string
	// Files is the number of files the manifest lists (0 when the
	// manifest itself is damaged).
	Files int
}

func (e *DamagedError) Error() string {
	const show = 10
	p := e.Problems
	more := ""
	if len(p) > show {
		more = fmt.Sprintf("; and %d more", len(p)-show)
		p = p[:show]
	}
	if e.Files == 0 {
		return fmt.Sprintf("backup %s is damaged: %s%s", e.ID, strings.Join(p, "; "), more)
	}
	return fmt.Sprintf("backup %s is damaged: %d of its %d files: %s%s", e.ID, len(e.Problems), e.Files, strings.Join(p, "; "), more)
}

func (e *DamagedError) Unwrap() error { return ErrDamaged }
