package timeseries

import (
	"errors"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// Sentinel errors. User-facing failures are *mongoerr.Error values built
// with these messages' codes; the ones here are checked with errors.Is.
var (
	// ErrClosed is returned by calls on a closed DB.
	ErrClosed = errors.New("timeseries: db closed")
	// ErrCorrupt reports data on disk that does not parse. It wraps
	// mongoerr.ErrCorrupt, as every layer's corruption does.
	ErrCorrupt = mongoerr.Corrupt("timeseries: corrupt data")
	// ErrNewerFormat is returned when the store was written by a newer
	// version.
	ErrNewerFormat = errors.New("timeseries: store written by a newer format version")
	// errFlushAbandoned is returned by a checkpoint or a catalog change
	// whose store flush was still waiting when the DB closed.
	errFlushAbandoned = errors.New("timeseries: store flush abandoned at close")
	// errNoRoom is returned by a checkpoint skipped because the
	// filesystem has no room for what it would write.
	errNoRoom = errors.New("timeseries: checkpoint skipped: not enough disk space")
)

func notFound(name string) error {
	return mongoerr.New(mongoerr.NamespaceNotFound, "collection %q does not exist", name)
}

// errGone is the error of a write that met its collection dropped, or
// replaced by ReplaceFrom, before it logged anything: nothing of it was
// written (a collection of the same name now is another).
func errGone(name string) error {
	return mongoerr.New(mongoerr.NamespaceNotFound, "collection %q was dropped or replaced while the write ran; nothing was written", name)
}

// IsCorrupt reports whether err reports corrupt data: Hourglass's own, from
// whichever layer found it (errors.Is(err, mongoerr.ErrCorrupt)), or Pebble's
// (pebble.IsCorruptionError), which callers above the storage layer cannot ask
// Pebble about.
func IsCorrupt(err error) bool {
	return errors.Is(err, mongoerr.ErrCorrupt) || pebble.IsCorruptionError(err)
}
