package wal

import (
	"errors"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// Sentinel errors, checked with errors.Is. Returned errors wrap them with
// the segment, offset and sizes involved.
var (
	// ErrClosed is returned by calls on a closed Log.
	ErrClosed = errors.New("wal: log closed")
	// ErrCorrupt reports log data that does not verify: a bad segment
	// header, a record whose checksum or lengths do not match, a gap in the
	// segment sequence, or damage that is not a torn tail of the last
	// segment. It wraps mongoerr.ErrCorrupt, as every layer's corruption
	// does.
	ErrCorrupt = mongoerr.Corrupt("wal: corrupt log")
	// ErrTooLarge is returned by Append for a record over MaxRecordSize.
	ErrTooLarge = errors.New("wal: record too large")
	// ErrNewerFormat is returned by Open for a segment written by a newer
	// format version.
	ErrNewerFormat = errors.New("wal: segment written by a newer format version")
	// ErrInvalidOptions is returned by Options.Validate.
	ErrInvalidOptions = errors.New("wal: invalid options")
)
