package timeseries

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/hourglassdb/hourglass/objstore"
)

// Options configure a DB. The zero value of every field means its default.
type Options struct {
	// Dir is the data directory: Pebble's files and the log under Dir/wal.
	// Required.
	Dir string

	// MemoryBudget bounds the memory of the series (their structs, meta
	// keys and decoded meta values, which stay in memory) and of the
	// buckets held in memory (open ones and sealed ones not yet
	// checkpointed, with their structs and column headers). Over budget,
	// open buckets are sealed early and a checkpoint runs; writers wait
	// while the budget is exceeded. Buckets keep at least an eighth of it
	// whatever the series take, so past that many series memory exceeds
	// the budget by what the series take over seven eighths of it.
	// Outside it, reads keep time-sorted copies of open buckets whose
	// rows came out of order, shared until the bucket next changes, up to
	// an eighth of it. Default 256 MiB: room for 1000-row buckets of
	// about 30,000 series of 10 fields.
	MemoryBudget int64

	// CheckpointInterval is how often open and sealed buckets are written
	// to Pebble and the log truncated. Default 1 minute: recovery replays at
	// most about that much of the log. An open bucket not written for a
	// CheckpointInterval (since a checkpoint at least that old) is sealed
	// by the next checkpoint and leaves memory.
	CheckpointInterval time.Duration

	// CheckpointLogBytes starts a checkpoint once the log holds this many
	// bytes. Default 128 MiB.
	CheckpointLogBytes int64

	// BucketMaxCount and BucketMaxBytes are MongoDB's bucket limits [1000
	// measurements, 128000 bytes].
	BucketMaxCount int
	BucketMaxBytes int

	// MaxOpenBucketsPerSeries bounds the buckets one series keeps open for
	// out-of-order data. Default 4.
	MaxOpenBucketsPerSeries int

	// LogSegmentSize is the size of one log segment. Default 64 MiB.
	LogSegmentSize int64

	// NoSync skips fsync of the log: an acknowledged write may be lost in
	// a crash. For tests and benchmarks.
	NoSync bool
	// ManualRollups leaves rollups to DB.CatchUpRollups: no background
	// recomputation. For tests and tools.
	ManualRollups bool

	// ExternalLog writes no log at all: a write is durable at the next
	// checkpoint (Close makes one), and a crash loses what came after
	// the last. For an engine whose writes are logged elsewhere and which
	// is rebuilt from that log after a crash: a replica set member's,
	// whose raft log is its durable record.
	ExternalLog bool

	// Archive is where TTL rules with archive set move expiring data
	// (archive.go, docs/archive.md). Nil: such rules archive nothing
	// and delete nothing; their TTL state says why.
	Archive objstore.Store

	// Logger receives the DB's logs. Default: discard.
	Logger *slog.Logger

	// SymbolCacheBytes bounds the cache of decoded shared symbol blocks
	// (bucket.SymbolCache): a read of one field of a bucket decodes the
	// symbols of all its fields, and dashboards read the same buckets again.
	// Default 16 MiB, about 3,500 buckets of 10 fields x 360 rows; negative
	// disables it.
	SymbolCacheBytes int64

	// QueryMemoryBytes bounds the memory one find or aggregate may hold:
	// the series it matches, the buckets a sorted find keeps open to merge
	// the series' time orders, bucket copies sorted in memory, and an
	// aggregate's groups and cells. Past it the query fails with
	// QueryExceededMemoryLimitNoDiskUseAllowed (292), naming the limit.
	// Default 100 MiB, MongoDB's limit for a blocking sort or a stage of
	// an aggregation, and the limit of a sort on a plain collection
	// (MaxSortBytes).
	QueryMemoryBytes int64

	// QueryMemoryTotalBytes bounds what all finds and aggregates running
	// at once may hold together (each within QueryMemoryBytes). A query
	// that would pass it fails with IngressRequestRateLimitExceeded
	// (462; HTTP 429) and may be retried once others are done. Default
	// four times QueryMemoryBytes.
	QueryMemoryTotalBytes int64

	// QueryConcurrency is how many finds and aggregates work at once
	// (a find while it plans and fills a batch, an aggregate for its
	// run); others wait for a slot, or until their context ends. Default
	// half the processors (GOMAXPROCS), at least one: queries take turns
	// and writers keep the rest.
	QueryConcurrency int

	// AggregateMaxCells bounds the (group, window) cells one aggregate may
	// make, and so its windows and groups with data. Past it the aggregate
	// fails with ExceededMemoryLimit (146). Default MaxAggregateCells.
	AggregateMaxCells int

	// DiskReserve is the free space, in bytes, the DB keeps on the
	// filesystem of Dir. While less is free, writes (inserts, deletes,
	// catalog changes, TTL passes) are refused with OutOfDiskSpace (14031)
	// before they touch the disk, and Open opens the DB read-only. The
	// reserve is what Pebble needs to flush its memtables (two of 32 MiB)
	// and compact them: a Pebble flush that hits a full disk retries
	// forever, and a failed write of its manifest is fatal. Default 128
	// MiB; negative disables the check (writes then fail only when the
	// disk returns ENOSPC).
	DiskReserve int64

	// Now is the clock. Default time.Now.
	Now func() time.Time

	// FS is the file system holding Dir, for the store and the log alike.
	// Default vfs.Default, the OS's. Tests pass vfs.NewStrictMem, which
	// forgets what was not synced when told to, as a power cut does.
	FS vfs.FS

	// tableCheckpoint is the fewest buckets a checkpoint writes as a
	// table for the store to ingest rather than as a batch (0:
	// defaultTableCheckpoint and tableCheckpointBytes, -1: never; set,
	// the bytes are not counted). Tests set it.
	tableCheckpoint int
	// tableCheckpointBytes, when set, replaces the constant of that name
	// in the default rule. Tests set it.
	tableCheckpointBytes int
}

// EnsureDefaults fills in the zero fields.
func (o *Options) EnsureDefaults() {
	if o.MemoryBudget == 0 {
		o.MemoryBudget = 256 << 20
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = time.Minute
	}
	if o.SymbolCacheBytes == 0 {
		o.SymbolCacheBytes = 16 << 20
	}
	if o.CheckpointLogBytes == 0 {
		o.CheckpointLogBytes = 128 << 20
	}
	if o.BucketMaxCount == 0 {
		o.BucketMaxCount = 1000
	}
	if o.BucketMaxBytes == 0 {
		o.BucketMaxBytes = 128000
	}
	if o.MaxOpenBucketsPerSeries == 0 {
		o.MaxOpenBucketsPerSeries = 4
	}
	if o.LogSegmentSize == 0 {
		o.LogSegmentSize = 64 << 20
	}
	if o.QueryMemoryBytes == 0 {
		o.QueryMemoryBytes = 100 << 20
	}
	if o.QueryConcurrency == 0 {
		o.QueryConcurrency = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if o.QueryMemoryTotalBytes == 0 {
		o.QueryMemoryTotalBytes = 4 * o.QueryMemoryBytes
	}
	if o.AggregateMaxCells == 0 {
		o.AggregateMaxCells = MaxAggregateCells
	}
	if o.DiskReserve == 0 {
		o.DiskReserve = 128 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
}

// Validate checks the options after EnsureDefaults.
func (o *Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("timeseries: Options.Dir is required"))
	}
	if o.MemoryBudget < 1<<20 {
		errs = append(errs, fmt.Errorf("timeseries: MemoryBudget %d is below the minimum of 1 MiB", o.MemoryBudget))
	}
	if o.BucketMaxCount < 1 || o.BucketMaxCount > 1<<20 {
		errs = append(errs, fmt.Errorf("timeseries: BucketMaxCount %d is outside [1, %d]", o.BucketMaxCount, 1<<20))
	}
	if o.BucketMaxBytes < 1 {
		errs = append(errs, fmt.Errorf("timeseries: BucketMaxBytes %d must be positive", o.BucketMaxBytes))
	}
	if o.MaxOpenBucketsPerSeries < 1 {
		errs = append(errs, fmt.Errorf("timeseries: MaxOpenBucketsPerSeries %d must be positive", o.MaxOpenBucketsPerSeries))
	}
	if o.QueryConcurrency < 0 {
		errs = append(errs, fmt.Errorf("timeseries: QueryConcurrency %d must be positive", o.QueryConcurrency))
	}
	if o.QueryMemoryTotalBytes < 0 {
		errs = append(errs, fmt.Errorf("timeseries: QueryMemoryTotalBytes %d must be positive", o.QueryMemoryTotalBytes))
	}
	if o.QueryMemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("timeseries: QueryMemoryBytes %d must be positive", o.QueryMemoryBytes))
	}
	if o.AggregateMaxCells < 0 {
		errs = append(errs, fmt.Errorf("timeseries: AggregateMaxCells %d must be positive", o.AggregateMaxCells))
	}
	if o.CheckpointInterval < 0 || o.CheckpointLogBytes < 0 {
		errs = append(errs, errors.New("timeseries: checkpoint settings must not be negative"))
	}
	return errors.Join(errs...)
}
