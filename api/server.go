package api

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql"

	"github.com/hourglassdb/hourglass/api/lineproto"
	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/internal/keep"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
	"github.com/hourglassdb/hourglass/ui"
)

// Options configure a Server. The zero value of every field but DB means
// its default.
type Options struct {
	// DB is the storage engine the server serves. Required.
	DB *timeseries.DB

	// TTL is the TTL monitor, for /v1/admin/ttl/run, its counters in
	// /v1/status and /metrics, and its batches in /v1/currentop. Nil: the
	// server has none.
	TTL *ttl.Monitor

	// AuthToken, when set, is required as "Authorization: Bearer <token>"
	// on every endpoint but /healthz and /ping (the line-protocol endpoints
	// also take InfluxDB's "Token <token>", HTTP Basic with the token as
	// password, and the v1 "p" query parameter).
	AuthToken string

	// MaxBody bounds a request body after decompression. Default 64 MiB,
	// the size of the largest batch a client is expected to send at once.
	MaxBody int64

	// MinBodyRate is the slowest a request body may arrive, in bytes per
	// second, once BodyRateGrace has passed: a body that falls behind
	// rate x (elapsed - grace) is refused with 408 and its connection
	// closed. Default 16 KiB/s, which a sender on any working link keeps
	// up while a client that trickles bytes to hold the server's buffers
	// is cut off; -1 means no minimum (the http.Server's ReadTimeout
	// still applies).
	MinBodyRate int64

	// BodyRateGrace is the time a body may take before MinBodyRate
	// applies. Default 10 s: a small body never meets the rate, and a slow
	// start (TLS, a client's own batching) is forgiven.
	BodyRateGrace time.Duration

	// MaxBodyMemory bounds the bytes of request bodies held in memory at
	// once, across all connections; a body that would pass it is refused
	// with 429 and Retry-After. Default MaxConcurrentWrites x MaxBody,
	// what the ingest slots held when bodies were read inside them.
	MaxBodyMemory int64

	// Bodies is the request memory budget, shared with the other front
	// doors (the MongoDB wire protocol's messages take from it too); when
	// set, MaxBodyMemory is its size. Default: a budget of MaxBodyMemory
	// of the server's own.
	Bodies *command.Budget

	// MaxConcurrentWrites is the number of ingest requests decoded and
	// stored at once. Default 2 x GOMAXPROCS: enough to keep every core
	// busy while others wait on the log's fsync.
	MaxConcurrentWrites int

	// MaxQueuedWrites is the number of ingest requests that may wait for a
	// slot; beyond it the server answers 429 with Retry-After. 0 means the
	// default, 64; -1 means no queue: a request that finds every slot
	// taken is refused at once.
	// Together with MaxConcurrentWrites and MaxBody it bounds the memory
	// ingest can take.
	MaxQueuedWrites int

	// MaxReadSamples bounds the samples one Prometheus remote read
	// returns, across its queries; a read over it is refused with 400,
	// as Prometheus refuses one over --storage.remote.read-sample-limit.
	// Default 5,000,000: the reply is built whole, and at about 16 bytes
	// a decoded sample that is 80 MB, near MaxBody's order.
	MaxReadSamples int64
	// BackupS3Endpoint is the S3-compatible server of s3:// backup
	// targets (POST /v1/admin/backup); empty: AWS.
	BackupS3Endpoint string

	// PromQLMaxSamples bounds the samples one PromQL query may hold in
	// memory while it is evaluated, and the samples it may read; past it
	// the query fails with 422, as Prometheus' --query.max-samples, whose
	// default it takes: 50,000,000 (at 16 bytes a sample, 800 MB; the
	// samples read are also bounded by the request memory, MaxBodyMemory).
	PromQLMaxSamples int

	// PromQLTimeout bounds the time one PromQL query may take; past it
	// the query fails with 503 errorType timeout. Default 2 minutes,
	// Prometheus' --query.timeout.
	PromQLTimeout time.Duration

	// PromQLMaxConcurrency bounds the PromQL queries (query, query_range)
	// evaluated at once; others wait their turn, within their timeout.
	// Default 20, Prometheus' --query.max-concurrency: each evaluation
	// may hold up to PromQLMaxSamples, so their number bounds the memory
	// queries take together.
	PromQLMaxConcurrency int

	// Version is reported by /v1/status and /ping. Default "dev".
	Version string

	// Build describes the binary for /v1/status ("build"). The zero value
	// reports no module version and no version control information.
	Build Build

	// Logger receives request errors. Default: discard.
	Logger *slog.Logger

	// Registerer receives the server's Prometheus metrics; Gatherer serves
	// /metrics. Default: a new registry with the Go and process collectors.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer

	// Now is the clock. Default time.Now.
	Now func() time.Time

	// Commands is the command layer the server runs requests through,
	// shared with the other front doors (its operations, admission,
	// request memory, writer). Default: one of its own over DB, with
	// ReplicaSet's member, TTL, Bodies, MaxConcurrentWrites and
	// MaxQueuedWrites.
	Commands *command.Service

	// ReplicaSet, when set, makes the server a member of a replica set:
	// writes go through its Node (DB must be the Node's) and are the
	// leader's to answer, and /v1/replset reports and changes the set.
	ReplicaSet *ReplicaSet
}

// EnsureDefaults fills in the zero fields.
func (o *Options) EnsureDefaults() {
	if o.Commands != nil {
		if o.DB == nil {
			o.DB = o.Commands.DB()
		}
		if o.Bodies == nil {
			o.Bodies = o.Commands.Bodies()
		}
	}
	if o.MaxBody == 0 {
		o.MaxBody = 64 << 20
	}
	if o.MinBodyRate == 0 {
		o.MinBodyRate = 16 << 10
	}
	if o.BodyRateGrace == 0 {
		o.BodyRateGrace = 10 * time.Second
	}
	if o.MaxConcurrentWrites == 0 {
		o.MaxConcurrentWrites = 2 * runtime.GOMAXPROCS(0)
	}
	if o.Bodies != nil {
		o.MaxBodyMemory = o.Bodies.Max()
	}
	if o.MaxBodyMemory == 0 {
		o.MaxBodyMemory = int64(o.MaxConcurrentWrites) * o.MaxBody
	}
	if o.Bodies == nil {
		o.Bodies = command.NewBudget(o.MaxBodyMemory)
	}
	if o.MaxReadSamples == 0 {
		o.MaxReadSamples = 5_000_000
	}
	if o.MaxQueuedWrites == 0 {
		o.MaxQueuedWrites = 64
	}
	if o.PromQLMaxSamples == 0 {
		o.PromQLMaxSamples = 50_000_000
	}
	if o.PromQLTimeout == 0 {
		o.PromQLTimeout = 2 * time.Minute
	}
	if o.PromQLMaxConcurrency == 0 {
		o.PromQLMaxConcurrency = 20
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registerer == nil && o.Gatherer == nil {
		reg := prometheus.NewRegistry()
		o.Registerer, o.Gatherer = reg, reg
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate checks the options after EnsureDefaults.
func (o *Options) Validate() error {
	var errs []error
	if o.DB == nil {
		errs = append(errs, errors.New("api: Options.DB is required"))
	}
	if o.Commands != nil && o.Commands.DB() != o.DB {
		errs = append(errs, errors.New("api: Options.Commands must be the command layer of Options.DB"))
	}
	if o.ReplicaSet != nil && (o.ReplicaSet.Node == nil || o.ReplicaSet.Node.DB() != o.DB) {
		errs = append(errs, errors.New("api: Options.ReplicaSet.Node is required and its DB must be Options.DB"))
	}
	if o.MaxBody < 1024 {
		errs = append(errs, fmt.Errorf("api: MaxBody %d is below the minimum of 1024 bytes", o.MaxBody))
	}
	if o.MaxBodyMemory < o.MaxBody {
		errs = append(errs, fmt.Errorf("api: MaxBodyMemory %d is below MaxBody %d", o.MaxBodyMemory, o.MaxBody))
	}
	if o.MinBodyRate < -1 || o.BodyRateGrace < 0 {
		errs = append(errs, fmt.Errorf("api: MinBodyRate %d must be positive or -1, BodyRateGrace %s not negative",
			o.MinBodyRate, o.BodyRateGrace))
	}
	if o.MaxConcurrentWrites < 1 || o.MaxQueuedWrites < -1 {
		errs = append(errs, fmt.Errorf("api: MaxConcurrentWrites %d must be positive and MaxQueuedWrites %d at least -1",
			o.MaxConcurrentWrites, o.MaxQueuedWrites))
	}
	if o.MaxReadSamples < 1 || o.PromQLMaxSamples < 1 || o.PromQLMaxConcurrency < 1 || o.PromQLTimeout < 0 {
		errs = append(errs, fmt.Errorf("api: MaxReadSamples %d, PromQLMaxSamples %d and PromQLMaxConcurrency %d must be positive, PromQLTimeout %s not negative",
			o.MaxReadSamples, o.PromQLMaxSamples, o.PromQLMaxConcurrency, o.PromQLTimeout))
	}
	if (o.Registerer == nil) != (o.Gatherer == nil) {
		errs = append(errs, errors.New("api: Registerer and Gatherer are set together"))
	}
	return errors.Join(errs...)
}

// Server serves the HTTP API of a DB. It is safe for concurrent use.
type Server struct {
	opts    Options
	db      *timeseries.DB
	w       Writer       // db, or the replica set's Node
	peers   *http.Client // asks the other members of a replica set for their state
	log     *slog.Logger
	router  chi.Router
	cmd     *command.Service
	metrics *metrics
	started time.Time

	// promEngine evaluates PromQL (Prometheus' own engine); safe for
	// concurrent use.
	promEngine *promql.Engine
	// promSlots holds a token for each PromQL evaluation running
	// (PromQLMaxConcurrency).
	promSlots chan struct{}
	// promStarted, when set (by tests), is called once a PromQL request
	// is listed by currentop, before it reads.
	promStarted func()

	// Decoders kept with their caches, one per write slot; the
	// line-protocol decoders share one series cache (newLineDecoders).
	lineDecoders *keep.Keeper[*lineproto.Decoder]
	docDecoders  *keep.Keeper[*model.MeasurementDecoder]
}

// New returns a server for opts.DB.
func New(opts Options) (*Server, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cmd := opts.Commands
	if cmd == nil {
		co := command.Options{DB: opts.DB, TTL: opts.TTL, Bodies: opts.Bodies, MaxConcurrentWrites: opts.MaxConcurrentWrites,
			MaxQueuedWrites: opts.MaxQueuedWrites, Now: opts.Now, Logger: opts.Logger}
		if rs := opts.ReplicaSet; rs != nil {
			co.Node, co.SetName = rs.Node, rs.Name
		}
		var err error
		if cmd, err = command.New(co); err != nil {
			return nil, err
		}
	}
	s := &Server{
		opts: opts, db: opts.DB, w: cmd.Writer(), log: opts.Logger, cmd: cmd,
		peers:   &http.Client{Timeout: peerTimeout},
		started: opts.Now(),

		promEngine: newPromEngine(&opts),
		promSlots:  make(chan struct{}, opts.PromQLMaxConcurrency),

		lineDecoders: newLineDecoders(opts.MaxConcurrentWrites),
		docDecoders:  keep.New(opts.MaxConcurrentWrites, model.NewMeasurementDecoder),
	}
	m, err := newMetrics(opts.Registerer, s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.router = s.routes()
	return s, nil
}

// ServeHTTP implements http.Handler. A request for "*" (OPTIONS *, the
// server-wide form) is answered 400, as net/http's ServeMux does: the API
// has no server-wide options to report. An http.Server answers OPTIONS *
// itself unless its DisableGeneralOptionsHandler is set.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.RequestURI == "*" {
		w.Header().Set("Connection", "close")
		s.writeError(w, r, badRequest("%s * is not served: the API has no server-wide options; name an endpoint", r.Method))
		return
	}
	s.router.ServeHTTP(w, r)
}

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.recoverer)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, newHTTPError(http.StatusNotFound, mongoerr.BadValue, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, newHTTPError(http.StatusMethodNotAllowed, mongoerr.BadValue, "method %s is not allowed on %s", r.Method, r.URL.Path))
	})

	// Open endpoints.
	r.Get("/healthz", s.handleHealthz)
	r.Get("/ping", s.handlePing)
	r.Head("/ping", s.handlePing)
	// The web console: the static assets embedded in the binary, the same
	// bytes on every server, with no data and no token in them; its API
	// calls carry the token (TestConsoleAssetsHoldNoData).
	console := ui.Handler()
	r.Handle("/ui", console)
	r.Handle("/ui/*", console)
	r.Get("/", http.RedirectHandler(ui.Prefix, http.StatusFound).ServeHTTP)

	// InfluxDB-compatible endpoints take InfluxDB's credentials too.
	r.Group(func(r chi.Router) {
		r.Use(s.auth(authInflux))
		r.Use(s.instrument)
		r.With(s.primaryOnlyInflux).Post("/write", s.handleInfluxWrite(false))
		r.With(s.primaryOnlyInflux).Post("/api/v2/write", s.handleInfluxWrite(true))
		r.Get("/query", s.handleInfluxQuery)
		r.Post("/query", s.handleInfluxQuery)
	})

	// Prometheus' endpoints answer in its error shape (docs/prometheus.md).
	r.Group(func(r chi.Router) {
		r.Use(s.auth(authPrometheus))
		r.Use(s.instrument)
		r.With(s.primaryOnlyProm).Post("/api/v1/write", s.handlePromWrite)
		r.Post("/api/v1/read", s.handlePromRead)
		// The query API (Prometheus' web/api/v1), GET or a POSTed form.
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			r.MethodFunc(m, "/api/v1/query", s.handlePromInstant)
			r.MethodFunc(m, "/api/v1/query_range", s.handlePromRange)
			r.MethodFunc(m, "/api/v1/series", s.handlePromSeries)
			r.MethodFunc(m, "/api/v1/labels", s.handlePromLabels)
			r.MethodFunc(m, "/api/v1/label/{name}/values", s.handlePromLabelValues)
			r.MethodFunc(m, "/api/v1/metadata", s.handlePromMetadata)
			r.MethodFunc(m, "/api/v1/status/buildinfo", s.handlePromBuildInfo)
		}
	})

	r.Group(func(r chi.Router) {
		r.Use(s.auth(authAPI))
		r.Use(s.instrument)
		r.Get("/metrics", s.handleMetrics)
		// Go's profiler, behind the same authentication as the API.
		r.HandleFunc("/debug/pprof/*", pprof.Index)
		r.HandleFunc("/debug/pprof/profile", pprof.Profile)
		r.HandleFunc("/debug/pprof/trace", pprof.Trace)
		r.Get("/v1/status", s.handleStatus)
		r.Get("/v1/currentop", s.handleCurrentOp)
		r.Get("/v1/replset", s.handleReplSet)
		r.Post("/v1/replset/members", s.handleAddMember)
		r.Delete("/v1/replset/members/{id}", s.handleRemoveMember)
		r.Post("/v1/replset/snapshot", s.handleSnapshot)
		r.Post("/v1/replset/partition", s.handlePartition)
		r.Get("/v1/collections", s.handleListCollections)
		r.Route("/v1/collections/{name}", func(r chi.Router) {
			w := r.With(s.primaryOnly) // writes: the leader's, on a replica set
			w.Put("/", s.handleCreateCollection)
			r.Get("/", s.handleDescribeCollection)
			w.Delete("/", s.handleDropCollection)
			w.Patch("/", s.handleCollMod)
			w.Post("/documents", s.handleInsert)
			r.Post("/find", s.handleFind)
			r.Get("/find", s.handleFind)
			r.Head("/find", s.handleFind)
			r.Post("/aggregate", s.handleAggregate)
			r.Get("/aggregate", s.handleAggregate)
			r.Head("/aggregate", s.handleAggregate)
			r.Post("/distinct", s.handleDistinct)
			r.Get("/distinct", s.handleDistinct)
			r.Head("/distinct", s.handleDistinct)
			w.Post("/delete", s.handleDelete)
			w.Post("/update", s.handleUpdate)
			w.Post("/replace", s.handleReplace)
			r.Post("/compact", s.handleCompact)
			w.Post("/indexes", s.handleCreateIndex)
			r.Get("/indexes", s.handleListIndexes)
			w.Delete("/indexes/{index}", s.handleDropIndex)
			r.Post("/ttl/preview", s.handleTTLPreview)
			w.Put("/rollups/{rollup}", s.handleCreateRollup)
			r.Get("/rollups", s.handleListRollups)
			w.Delete("/rollups/{rollup}", s.handleDropRollup)
		})
		r.Post("/v1/admin/ttl/run", s.handleTTLRun)
		r.Post("/v1/admin/backup", s.handleBackup)
	})
	return r
}

// recoverer turns a panic in a handler into a 500, so that a broken
// invariant in one request does not kill the server. http.ErrAbortHandler
// passes through: it aborts a response already under way.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				buf := make([]byte, 8<<10)
				buf = buf[:runtime.Stack(buf, false)]
				s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(buf))
				s.writeError(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// authDoor says which credentials an endpoint takes and in which shape it
// refuses a request without them.
type authDoor int

const (
	authAPI        authDoor = iota // the bearer token; the API's error shape
	authInflux                     // InfluxDB's credential forms too; InfluxDB's error shape
	authPrometheus                 // the bearer token; Prometheus' error shape
)

// auth checks the bearer token (and, for authInflux, InfluxDB's
// credential forms).
func (s *Server) auth(door authDoor) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if s.opts.AuthToken == "" {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, ok := credential(r, door == authInflux)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="hourglass"`)
				s.writeAuthError(w, r, door, "authentication required: send 'Authorization: Bearer <token>'")
				return
			}
			if subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.AuthToken)) != 1 {
				s.writeAuthError(w, r, door, "invalid token")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func (s *Server) writeAuthError(w http.ResponseWriter, r *http.Request, door authDoor, msg string) {
	switch door {
	case authInflux:
		writeJSON(w, http.StatusUnauthorized, influxError{Code: "unauthorized", Message: msg})
	case authPrometheus:
		writeJSON(w, http.StatusUnauthorized, promError{Status: "error", ErrorType: "bad_data", Error: msg})
	default:
		s.writeError(w, r, newHTTPError(http.StatusUnauthorized, mongoerr.AuthenticationFailed, "%s", msg))
	}
}

// credential extracts the token a request presents.
func credential(r *http.Request, influx bool) (string, bool) {
	h := r.Header.Get("Authorization")
	if tok, ok := cutPrefixFold(h, "Bearer "); ok {
		return strings.TrimSpace(tok), true
	}
	if !influx {
		return "", false
	}
	if tok, ok := cutPrefixFold(h, "Token "); ok {
		return strings.TrimSpace(tok), true
	}
	if enc, ok := cutPrefixFold(h, "Basic "); ok {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
		if err != nil {
			return "", false
		}
		_, pass, _ := strings.Cut(string(raw), ":")
		return pass, true
	}
	if p := r.URL.Query().Get("p"); p != "" {
		return p, true
	}
	return "", false
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

// writeJSON replies with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":1,"codeName":"InternalError","message":"cannot encode the reply"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handlePing(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Influxdb-Version", "1.8.10-hourglass-"+s.opts.Version)
	w.Header().Set("X-Influxdb-Build", "OSS")
	w.WriteHeader(http.StatusNoContent)
}
