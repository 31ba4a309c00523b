package mongowire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/xdg-go/scram"

	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/internal/keep"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("mongowire: server closed")

// DefaultCursorTimeout is how long a cursor may sit unused before it is
// closed: MongoDB's cursorTimeoutMillis default (10 minutes).
const DefaultCursorTimeout = 10 * time.Minute

// reclaimCursors is how many idle cursors a query short of memory closes
// at a time: one, the least recently used, and the engine asks again while
// it is short (up to 64 times a charge), so that no more close than the
// query needs room for (eight at a time closed every cursor of a client
// holding a few small ones).
const reclaimCursors = 1

// holdsQueryMemory reports whether c's query holds engine memory (a find on
// a time series holds its plan and open scans until it is exhausted).
func holdsQueryMemory(c *cursor) bool {
	_, ok := c.src.(*measurementSource)
	return ok
}

// Defaults of the cursor limits: a connection of a driver's pool holds a
// few cursors at a time, and the server's open cursors, each holding
// what its query planned until it is exhausted, are bounded.
const (
	DefaultMaxCursors              = 10000
	DefaultMaxCursorsPerConnection = 1000
)

// Options configure a Server. The zero value of each field means its
// default.
type Options struct {
	// DB is the engine the commands run on; required. The server does not
	// close it.
	DB *timeseries.DB
	// TTL is the TTL monitor the HTTP API also serves: setParameter
	// changes its ttlMonitorEnabled and ttlMonitorSleepSecs, serverStatus
	// reports its counters, currentOp its running batch, and index and
	// collMod changes wake it. Nil: no monitor, and those commands say so.
	TTL *ttl.Monitor
	// AuthToken set means the HTTP API requires authentication, and MongoDB
	// clients authenticate with SCRAM-SHA-256 as AuthUser, the token their
	// password; until they do, every command but the handshake (hello,
	// isMaster, ping, buildInfo, connectionStatus, endSessions) and
	// saslStart and saslContinue is refused with Unauthorized (13).
	AuthToken string
	// CursorTimeout closes cursors unused for this long; default
	// DefaultCursorTimeout.
	CursorTimeout time.Duration
	// MaxCursors bounds the open cursors of the server: past it the least
	// recently used idle one is killed (its getMore answers CursorKilled)
	// to make room. Default DefaultMaxCursors.
	MaxCursors int
	// MaxCursorsPerConnection bounds the open cursors one connection
	// opened: past it a find or aggregate that would leave one open is
	// refused. Default DefaultMaxCursorsPerConnection.
	MaxCursorsPerConnection int
	// Version is Hourglass's version, reported by buildInfo.
	Version string
	// Logger receives connection and error logs; default slog.Default().
	Logger *slog.Logger
	// ReplicaSet, when set, makes the server a member of a replica set.
	ReplicaSet *ReplicaSet
	// Commands is the command layer commands run through, shared with the
	// other front doors (its operations, admission, request memory,
	// writer). Default: one of its own over DB, with ReplicaSet's member,
	// TTL and Messages.
	Commands *command.Service

	// Messages is the request memory budget the messages being received
	// take from, shared with the other front doors (HTTP bodies). Default:
	// a budget of DefaultMessageMemory of the server's own.
	Messages *command.Budget
	// MessageMemoryWait is how long a message waits for room in Messages
	// (the client's bytes wait in its socket meanwhile: back-pressure)
	// before it is read to its end, dropped and refused with
	// IngressRequestRateLimitExceeded. Default 5 s.
	MessageMemoryWait time.Duration
	// MinMessageRate is the slowest a message may arrive, in bytes per
	// second, once MessageRateGrace has passed since its header: a
	// connection whose message falls behind is closed. Default 16 KiB/s
	// (the HTTP API's --min-body-rate); -1: no minimum.
	MinMessageRate int64
	// MessageRateGrace is the time a message may take before
	// MinMessageRate applies. Default 10 s.
	MessageRateGrace time.Duration
	// MaxConnections bounds the open connections (MongoDB's
	// net.maxIncomingConnections): one past it is closed as soon as it is
	// accepted. Default DefaultMaxConnections, or 80% of the process's
	// open-file limit when that is lower, as MongoDB caps it.
	MaxConnections int
	// StageMemory bounds the memory of one stream stage of an aggregate
	// ($setWindowFields, $fill, $densify: the documents its windows or
	// gaps hold, or its sort of an input not in its order) and of the
	// stages after it that gather documents. 0 means
	// pipeline.DefaultMaxMemory, 100 MiB, MongoDB's limit of a blocking
	// stage without allowDiskUse.
	StageMemory int64
}

// Defaults of Options.
const (
	// DefaultMessageMemory is the request memory of a server given no
	// budget: five messages of maxMessageSizeBytes.
	DefaultMessageMemory = 256 << 20
	// DefaultMaxConnections bounds the connections: idle ones cost about
	// 7 KiB each (docs/mongodb.md), 70 MiB at the limit.
	DefaultMaxConnections = 10000
)

// Server answers MongoDB clients over the wire protocol. It is safe for
// concurrent use; Serve may be called on several listeners.
type Server struct {
	opts    Options
	db      *timeseries.DB
	w       command.Writer // db, or the replica set's member
	log     *slog.Logger
	cursors *cursorSet
	cmd     *command.Service
	started time.Time
	// scram checks MongoDB clients' passwords; nil without AuthToken.
	scram  *scram.Server
	nextID atomic.Int64 // connection ids, as hello's connectionId
	reqID  atomic.Int32 // reply request ids
	// cursorsTimedOut counts the cursors closed for idleness
	// (serverStatus' metrics.cursor.timedOut).
	cursorsTimedOut atomic.Int64
	opcounters      opcounters
	// converters keeps measurement converters with their meta caches.
	converters *keep.Keeper[*model.BSONDecoder]
	// replyBufs keeps the buffers getMore replies (up to 16 MiB) are
	// built in.
	replyBufs *keep.Keeper[[]byte]
	// prefetches bounds the batches built ahead at once (each up to
	// 16 MiB); a getMore that finds no slot builds none.
	prefetches chan struct{}
	prefetched atomic.Int64 // batches built ahead, for tests

	// closingFlag is closing, read without mu by connections setting
	// their read deadlines (conn.setReadDeadline).
	closingFlag atomic.Bool
	// refused counts connections closed at accept for MaxConnections;
	// panics the commands that panicked (conn.handleSafely).
	refused, panics atomic.Int64
	// commandHook, for tests, runs before each command's handler.
	commandHook func(name string)

	mu        sync.Mutex // guards the fields below
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closing   bool
	reaperOn  bool
	wg        sync.WaitGroup // connections and the cursor reaper
	stop      chan struct{}  // closed by Shutdown and Close
}

// New returns a Server over opts.DB.
func New(opts Options) (*Server, error) {
	if opts.DB == nil && opts.Commands != nil {
		opts.DB = opts.Commands.DB()
	}
	if opts.DB == nil {
		return nil, errors.New("mongowire: Options.DB is required")
	}
	if opts.Commands != nil && opts.Commands.DB() != opts.DB {
		return nil, errors.New("mongowire: Options.Commands must be the command layer of Options.DB")
	}
	if opts.Messages == nil && opts.Commands != nil {
		opts.Messages = opts.Commands.Bodies()
	}
	if opts.CursorTimeout <= 0 {
		opts.CursorTimeout = DefaultCursorTimeout
	}
	if opts.MaxCursors <= 0 {
		opts.MaxCursors = DefaultMaxCursors
	}
	if opts.MaxCursorsPerConnection <= 0 {
		opts.MaxCursorsPerConnection = DefaultMaxCursorsPerConnection
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Messages == nil {
		opts.Messages = command.NewBudget(DefaultMessageMemory)
	}
	if opts.MessageMemoryWait == 0 {
		opts.MessageMemoryWait = 5 * time.Second
	}
	if opts.MinMessageRate == 0 {
		opts.MinMessageRate = 16 << 10
	}
	if opts.MessageRateGrace == 0 {
		opts.MessageRateGrace = 10 * time.Second
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = min(DefaultMaxConnections, availableConnections())
	}
	if opts.MaxConnections < 0 || opts.MinMessageRate < -1 || opts.MessageRateGrace < 0 {
		return nil, fmt.Errorf("mongowire: MaxConnections %d must be positive, MinMessageRate %d positive or -1, MessageRateGrace %s not negative",
			opts.MaxConnections, opts.MinMessageRate, opts.MessageRateGrace)
	}
	var sc *scram.Server
	if opts.AuthToken != "" {
		var err error
		if sc, err = newSCRAM(opts.AuthToken); err != nil {
			return nil, err
		}
	}
	s := &Server{
		scram: sc, opts: opts, db: opts.DB, log: opts.Logger, started: time.Now(),
		listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}, stop: make(chan struct{}),
		converters: keep.New(2*runtime.GOMAXPROCS(0), model.NewBSONDecoder),
		replyBufs:  keep.New(runtime.GOMAXPROCS(0), func() []byte { return nil }),
	}
	s.cursors = newCursorSet(s.replyBufs.Put, opts.MaxCursors, opts.MaxCursorsPerConnection)
	if rs := opts.ReplicaSet; rs != nil && (rs.Node == nil || rs.Node.DB() != opts.DB) {
		return nil, errors.New("mongowire: Options.ReplicaSet.Node must be the member whose engine is Options.DB")
	}
	s.cmd = opts.Commands
	if s.cmd == nil {
		co := command.Options{DB: opts.DB, TTL: opts.TTL, Bodies: opts.Messages, Logger: opts.Logger}
		if rs := opts.ReplicaSet; rs != nil {
			co.Node, co.SetName = rs.Node, rs.Name
		}
		var err error
		if s.cmd, err = command.New(co); err != nil {
			return nil, err
		}
	}
	s.w = s.cmd.Writer()
	s.cmd.AddReclaimer(func(int64) bool {
		return s.cursors.evictIdle(reclaimCursors, holdsQueryMemory,
			"the server needed the query memory it held for other queries while it was idle") > 0
	})
	s.prefetches = make(chan struct{}, runtime.GOMAXPROCS(0))
	return s, nil
}

// Serve accepts connections on ln until Shutdown or Close, and then returns
// ErrServerClosed; ln is closed either way.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	if !s.reaperOn {
		s.reaperOn = true
		s.wg.Add(1)
		go s.reapLoop()
	}
	s.mu.Unlock()
	defer ln.Close()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		c := &conn{s: s, nc: nc, id: s.nextID.Add(1)}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		if len(s.conns) >= s.opts.MaxConnections {
			s.mu.Unlock()
			n := s.refused.Add(1) // counted before the client can see the close
			nc.Close()
			if n%1000 == 1 {
				s.log.Warn("MongoDB connection refused: too many open connections", "remote", nc.RemoteAddr().String(),
					"max_connections", s.opts.MaxConnections, "refused", s.refused.Load())
			}
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// Shutdown stops accepting connections, lets the commands in progress
// finish and their replies go out, then closes every connection and
// cursor. If ctx ends first, the connections are closed at once and
// ctx.Err() is returned. Calling it again is harmless.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClose()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.cursors.closeAll()
		return nil
	case <-ctx.Done():
		s.closeConns()
		<-done
		s.cursors.closeAll()
		return ctx.Err()
	}
}

// Close closes the listeners, connections and cursors at once.
func (s *Server) Close() error {
	s.beginClose()
	s.closeConns()
	s.wg.Wait()
	s.cursors.closeAll()
	return nil
}

func (s *Server) beginClose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return
	}
	s.closing = true
	s.closingFlag.Store(true)
	close(s.stop)
	for ln := range s.listeners {
		ln.Close()
	}
	// A connection waiting for a request stops reading now; one running a
	// command finishes it, writes its reply, and stops at its next read.
	for c := range s.conns {
		c.nc.SetReadDeadline(time.Now())
	}
}

func (s *Server) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.nc.Close()
	}
}

// reapLoop closes idle cursors, checking a few times per timeout.
func (s *Server) reapLoop() {
	defer s.wg.Done()
	t := time.NewTicker(max(s.opts.CursorTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			if n := s.cursors.reapIdle(now, s.opts.CursorTimeout); n > 0 {
				s.cursorsTimedOut.Add(int64(n))
				s.log.Debug("closed idle cursors", "count", n, "timeout", s.opts.CursorTimeout)
			}
		}
	}
}

// frame wraps a reply document in the message type the request expects.
func (c *conn) frame(dst []byte, req *request, doc []byte) []byte {
	id := c.s.reqID.Add(1)
	if req.opCode == wiremessage.OpQuery {
		return appendOpReply(dst, id, req.header.requestID, doc)
	}
	if req.header.opCode == wiremessage.OpCompressed && req.compressor != wiremessage.CompressorNoOp {
		msg := appendOpMsg(nil, id, req.header.requestID, doc, false)
		return compressMessage(dst, msg, req.compressor)
	}
	return appendOpMsg(dst, id, req.header.requestID, doc, req.flags&flagChecksumPresent != 0)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
