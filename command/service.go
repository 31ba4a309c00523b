package command

import (
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/hourglassdb/hourglass/replset"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// Options configure a Service. The zero value of each field means its
// default.
type Options struct {
	// DB is the engine; required. The Service does not close it.
	DB *timeseries.DB
	// Node, when set, makes the server a member of a replica set: writes
	// go through it (its engine must be DB) and are the leader's to
	// answer. SetName is the set's name, for messages.
	Node    *replset.Node
	SetName string
	// TTL is the TTL monitor, whose batch in progress is listed with the
	// operations; nil: none.
	TTL *ttl.Monitor
	// Bodies is the request memory budget every door reads requests into
	// (HTTP bodies, MongoDB messages). Default: a budget of
	// MaxConcurrentWrites x 64 MiB.
	Bodies *Budget
	// MaxConcurrentWrites is the number of batches stored at once, from
	// any door. Default 2 x GOMAXPROCS: enough to keep every core busy
	// while others wait on the log's fsync.
	MaxConcurrentWrites int
	// MaxQueuedWrites is the number of writes that may wait for a slot;
	// beyond it they are refused. 0 means the default, 64; -1 means no
	// queue.
	MaxQueuedWrites int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives internal faults. Default: discard.
	Logger *slog.Logger
	// StageMemory bounds a pipeline's blocking work (Pipeline.MaxMemory)
	// when the door sets no bound of its own. 0 means
	// pipeline.DefaultMaxMemory, 100 MiB, MongoDB's limit of a blocking
	// stage.
	StageMemory int64
}

// Service is the command layer of one engine: what every front door
// shares. It is safe for concurrent use.
type Service struct {
	opts   Options
	db     *timeseries.DB
	w      Writer
	ops    *Registry
	ingest *Ingest

	mu         sync.Mutex // guards reclaimers
	reclaimers []func(need int64) bool
}

// New returns the Service of opts.DB.
func New(opts Options) (*Service, error) {
	if opts.DB == nil {
		return nil, errors.New("command: Options.DB is required")
	}
	if opts.Node != nil && opts.Node.DB() != opts.DB {
		return nil, errors.New("command: Options.Node must be the member whose engine is Options.DB")
	}
	if opts.MaxConcurrentWrites == 0 {
		opts.MaxConcurrentWrites = 2 * runtime.GOMAXPROCS(0)
	}
	if opts.MaxQueuedWrites == 0 {
		opts.MaxQueuedWrites = 64
	}
	if opts.MaxConcurrentWrites < 0 || opts.MaxQueuedWrites < -1 {
		return nil, errors.New("command: MaxConcurrentWrites must be positive and MaxQueuedWrites at least -1")
	}
	if opts.Bodies == nil {
		opts.Bodies = NewBudget(int64(opts.MaxConcurrentWrites) * 64 << 20)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{opts: opts, db: opts.DB, w: opts.DB, ops: newRegistry(opts.Now),
		ingest: newIngest(opts.MaxConcurrentWrites, opts.MaxQueuedWrites)}
	if opts.Node != nil {
		s.w = opts.Node
	}
	s.w = kindChecked{Writer: s.w, db: opts.DB}
	opts.DB.OnQueryMemoryFull(s.reclaim)
	return s, nil
}

// AddReclaimer registers f, which lets go of query memory that queries
// not running hold (a door's idle cursors) and reports whether it let go
// of any. When the memory all queries may hold together is taken, a query
// calls the reclaimers before it is refused, so that clients that leave
// queries open cannot make the queries of others fail. f is called from a
// query's goroutine, with the engine's locks possibly held: it may close
// cursors no other goroutine uses, and must not call the engine.
func (s *Service) AddReclaimer(f func(need int64) bool) {
	s.mu.Lock()
	s.reclaimers = append(s.reclaimers, f)
	s.mu.Unlock()
}

// reclaim asks every reclaimer in turn, until one lets go of memory.
func (s *Service) reclaim(need int64) bool {
	s.mu.Lock()
	rs := s.reclaimers
	s.mu.Unlock()
	for _, f := range rs {
		if f(need) {
			return true
		}
	}
	return false
}

// DB returns the engine, which reads go to.
func (s *Service) DB() *timeseries.DB { return s.db }

// Writer returns what writes go through: the engine, or the replica set
// member.
func (s *Service) Writer() Writer { return s.w }

// Node returns the replica set member, nil outside a replica set.
func (s *Service) Node() *replset.Node { return s.opts.Node }

// SetName returns the replica set's name ("" outside one).
func (s *Service) SetName() string { return s.opts.SetName }

// TTL returns the TTL monitor, nil without one.
func (s *Service) TTL() *ttl.Monitor { return s.opts.TTL }

// Ops returns the registry of operations in progress.
func (s *Service) Ops() *Registry { return s.ops }

// Ingest returns the admission of writes.
func (s *Service) Ingest() *Ingest { return s.ingest }

// Bodies returns the request memory budget.
func (s *Service) Bodies() *Budget { return s.opts.Bodies }

// Now returns the time on the Service's clock.
func (s *Service) Now() time.Time { return s.opts.Now() }

// WakeTTL asks the TTL monitor for a pass now, after a change of the
// rules (an index created, a collMod).
func (s *Service) WakeTTL() {
	if s.opts.TTL != nil {
		s.opts.TTL.Wake()
	}
}
