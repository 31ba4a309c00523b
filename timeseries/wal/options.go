package wal

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/cockroachdb/pebble/vfs"
)

// Compression selects how records are stored. The values are not written
// to disk: every record carries its own type byte.
type Compression uint8

const (
	// CompressionDefault is the zero value and means CompressionS2.
	CompressionDefault Compression = 0
	// CompressionS2 stores records S2-compressed (klauspost/compress/s2,
	// block format) unless that does not make them smaller. Line protocol
	// shrinks to a fraction of its size (BenchmarkAppend reports disk-B/B),
	// and at durable-ingest rates the disk, not the CPU, is what an
	// uncompressed log runs out of first.
	CompressionS2 Compression = 1
	// CompressionNone stores records as given.
	CompressionNone Compression = 2
)

// String returns the option's name.
func (c Compression) String() string {
	switch c {
	case CompressionDefault:
		return "default"
	case CompressionS2:
		return "s2"
	case CompressionNone:
		return "none"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

const (
	// DefaultSegmentSize is the default Options.SegmentSize. 64 MiB holds
	// dozens of 2 MB batches, so the file creation and directory fsync of a
	// roll are rare; it is small enough that Truncate frees space in fine
	// steps and that recovery, which verifies the whole last segment, reads
	// at most this much before the first append.
	DefaultSegmentSize = 64 << 20
	// MinSegmentSize is the smallest accepted Options.SegmentSize.
	MinSegmentSize = 1 << 10
	// MaxSegmentSize is the largest accepted Options.SegmentSize: record
	// offsets stay far from any overflow and a segment is still a file one
	// can copy.
	MaxSegmentSize = 1 << 40
	// MaxRecordSize is the largest record Append accepts, before
	// compression. Replay allocates at most this much for one record, so
	// it also bounds the memory a damaged length field can claim. An insert
	// batch is at most a few megabytes.
	MaxRecordSize = 256 << 20
)

// Options configure a Log. The zero value of every field except Dir means
// its default.
type Options struct {
	// Dir is the directory holding the segment files; created if missing.
	// Files in it whose names are not segment names are ignored. Required.
	Dir string

	// SegmentSize is the size past which appends go to a new segment file.
	// A segment exceeds it only when it holds a single larger record.
	// Default DefaultSegmentSize (64 MiB, see there).
	SegmentSize int64

	// NoSync skips fdatasync after writes. For tests and benchmarks only:
	// Append then returns once the data is in the OS page cache, and a
	// machine crash may lose acknowledged records. Recovery is unchanged.
	NoSync bool

	// Compression is how records are stored. Default CompressionS2.
	Compression Compression

	// Logger receives recovery warnings (a torn tail dropped). Default:
	// discard.
	Logger *slog.Logger

	// FS is the file system holding Dir. Default vfs.Default, the OS's,
	// whose files are synced with fdatasync(2). Tests pass a
	// vfs.NewStrictMem to lose what was not synced, as a power cut does.
	FS vfs.FS
}

// EnsureDefaults fills in the zero fields.
func (o *Options) EnsureDefaults() {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.Compression == CompressionDefault {
		o.Compression = CompressionS2
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
}

// Validate reports options that cannot work. Call it after EnsureDefaults.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return fmt.Errorf("%w: Dir is required", ErrInvalidOptions)
	}
	if o.SegmentSize < MinSegmentSize || o.SegmentSize > MaxSegmentSize {
		return fmt.Errorf("%w: SegmentSize %d outside [%d, %d]",
			ErrInvalidOptions, o.SegmentSize, MinSegmentSize, int64(MaxSegmentSize))
	}
	switch o.Compression {
	case CompressionDefault, CompressionS2, CompressionNone:
	default:
		return fmt.Errorf("%w: unknown %v", ErrInvalidOptions, o.Compression)
	}
	return nil
}
