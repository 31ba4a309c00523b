package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/mongowire"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/replset"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// serveConfig holds the flags of "hourglass serve".
type serveConfig struct {
	listen              string
	mongoListen         string
	mongoMaxConnections int
	dataDir             string
	archiveURL          string
	archiveS3Endpoint   string
	backupS3Endpoint    string
	authToken           string
	insecure            bool
	maxBody             byteSize
	maxBodyMemory       byteSize
	minBodyRate         byteSize
	bodyRateGrace       time.Duration
	memoryBudget        byteSize
	memoryLimit         sizeOrZero
	queryMemory         byteSize
	queryMemoryTotal    byteSize
	queryConcurrency    int
	diskReserve         sizeOrZero
	aggregateMaxCells   int
	maxConcurrentWrites int
	maxQueuedWrites     int
	maxReadSamples      int64
	promqlMaxSamples    int
	promqlTimeout       time.Duration
	promqlConcurrency   int
	checkpointInterval  time.Duration
	shutdownTimeout     time.Duration
	logFormat           string
	logLevel            string
	// The TTL monitor, under MongoDB's parameter names and defaults.
	ttlEnabled    bool
	ttlSleep      time.Duration
	ttlTargetDocs int64
	ttlTargetTime time.Duration
	ttlSubPass    time.Duration
	// A replica set member (docs/replication.md).
	replica replicaConfig
}

func serveFlags(cfg *serveConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg.maxBody = 64 << 20
	cfg.memoryBudget = 256 << 20
	cfg.queryMemory = 100 << 20
	cfg.diskReserve = 128 << 20
	cfg.minBodyRate = 16 << 10
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:7700", "`address` to serve HTTP on; a non-loopback address needs --auth-token or --insecure")
	fs.StringVar(&cfg.mongoListen, "mongo-listen", "127.0.0.1:27017", "`address` to serve the MongoDB wire protocol on (docs/mongodb.md); empty: off; a non-loopback address needs --auth-token or --insecure")
	fs.IntVar(&cfg.mongoMaxConnections, "mongo-max-connections", 0, "MongoDB connections open at once (`n`; 0: 10000, or 80% of the open-file limit when lower; MongoDB's maxIncomingConnections); one more is closed when accepted")
	fs.StringVar(&cfg.dataDir, "data-dir", "./hourglass-data", "`directory` holding the data; created if missing")
	fs.StringVar(&cfg.archiveURL, "archive-url", "", "where TTL rules with \"archive\": true move expiring data, as Parquet (docs/archive.md): file:///dir or s3://bucket/prefix (`url`; default file://<data-dir>/archive)")
	fs.StringVar(&cfg.backupS3Endpoint, "backup-s3-endpoint", "", "`url` of the S3-compatible server of s3:// targets of POST /v1/admin/backup (http://host:port); empty: AWS. Credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION")
	fs.StringVar(&cfg.archiveS3Endpoint, "archive-s3-endpoint", "", "`url` of the S3-compatible server of an s3:// --archive-url (http://host:port); empty: AWS. Credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION")
	fs.StringVar(&cfg.authToken, "auth-token", "", "bearer `token` required on every endpoint but /healthz and /ping; MongoDB clients log in as user hourglass with the token as password (SCRAM-SHA-256)")
	fs.BoolVar(&cfg.replica.faultInjection, "fault-injection", false, "replica set: serve POST /v1/replset/partition, which cuts this member's raft traffic for a while (chaos runs only, never on a production set)")
	fs.BoolVar(&cfg.insecure, "insecure", false, "allow a non-loopback --listen address without --auth-token")
	fs.Var(&cfg.maxBody, "max-body", "largest request body accepted, after decompression (`size`, e.g. 64MiB)")
	fs.Var(&cfg.maxBodyMemory, "max-body-memory", "request bodies and MongoDB messages held in memory at once, across connections (`size`; default --max-concurrent-writes x --max-body); past it, 429 (HTTP) or IngressRequestRateLimitExceeded after a 5 s wait (MongoDB)")
	fs.Var(&cfg.minBodyRate, "min-body-rate", "slowest a request body or MongoDB message may arrive after --body-rate-grace (`size` per second); slower bodies get 408, slower messages close their connection")
	fs.DurationVar(&cfg.bodyRateGrace, "body-rate-grace", 10*time.Second, "time a request body may take before --min-body-rate applies (`duration`)")
	fs.Var(&cfg.memoryBudget, "memory-budget", "memory for series and buckets not yet written to disk (`size`); over it, buckets are sealed early")
	fs.Var(&cfg.memoryLimit, "memory-limit", "soft limit of the Go runtime's memory (`size`, 0: none; default: after each collection 1.25 x the heap found live + a slack, at most --memory-budget + --max-body-memory + 256MiB, less the 128MiB the store's cache holds outside the Go heap in a cgo build, so that the process stays within the sum; the slack starts at 64MiB and, over windows of 5 s, halves (down to 32MiB) while the collector takes under a twentieth of the CPU and quadruples (up to the sum) while it takes over a tenth); near it the collector runs more often and returns freed memory to the system. Given, the limit is fixed. GOMEMLIMIT, when set, takes precedence")
	fs.IntVar(&cfg.queryConcurrency, "query-concurrency", 0, "finds and aggregates working at once (`n`; 0: half the processors, at least 1); others wait their turn, so that queries do not crowd out writes")
	fs.Var(&cfg.queryMemoryTotal, "query-memory-total", "memory all finds and aggregates running at once may hold together (`size`; default 4 x --query-memory); a query that would pass it is answered 429 code 462, to retry")
	fs.Var(&cfg.queryMemory, "query-memory", "memory one find or aggregate may hold: series matched, buckets open or sorted, groups and cells (`size`); past it, 400 code 292")
	fs.Var(&cfg.diskReserve, "disk-reserve", "free space kept on the data directory's filesystem (`size`, 0: no check); below it writes get 507 and a restart opens read-only")
	fs.IntVar(&cfg.aggregateMaxCells, "aggregate-max-cells", timeseries.MaxAggregateCells, "(group, window) cells one aggregate may make (`n`); past it, 400 code 146")
	fs.IntVar(&cfg.maxConcurrentWrites, "max-concurrent-writes", 0, "writes stored at once, HTTP ingest requests and MongoDB inserts alike (`n`, 0: 2 x CPUs)")
	fs.Int64Var(&cfg.maxReadSamples, "max-read-samples", 5_000_000, "samples one Prometheus remote read may return before 400 (`n`)")
	fs.IntVar(&cfg.promqlMaxSamples, "promql-max-samples", 50_000_000, "samples one PromQL query (/api/v1/query, ...) may hold in memory or read before 422, as Prometheus' --query.max-samples (`n`); the samples read also take from --max-body-memory")
	fs.IntVar(&cfg.promqlConcurrency, "promql-max-concurrency", 20, "PromQL queries evaluated at once; others wait within their timeout, as with Prometheus' --query.max-concurrency (`n`)")
	fs.DurationVar(&cfg.promqlTimeout, "promql-timeout", 2*time.Minute, "time one PromQL query may take before 503 timeout, as Prometheus' --query.timeout (`duration`)")
	fs.IntVar(&cfg.maxQueuedWrites, "max-queued-writes", 64, "writes that may wait for a slot before 429 (HTTP) or IngressRequestRateLimitExceeded (MongoDB) (`n`, -1: none)")
	fs.DurationVar(&cfg.checkpointInterval, "checkpoint-interval", time.Minute, "how often buckets are written to disk and the log truncated (`duration`)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a shutdown waits for requests in progress (`duration`)")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log `format`: text or json")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.BoolVar(&cfg.ttlEnabled, "ttl-monitor-enabled", true, "run the TTL monitor, which deletes expired data (ttlMonitorEnabled)")
	fs.DurationVar(&cfg.ttlSleep, "ttl-monitor-sleep", 60*time.Second, "time between TTL passes (`duration`; ttlMonitorSleepSecs)")
	fs.Int64Var(&cfg.ttlTargetDocs, "ttl-index-delete-target-docs", 50000, "measurements a TTL rule deletes before the next rule's turn (`n`, 0: no limit; ttlIndexDeleteTargetDocs)")
	fs.DurationVar(&cfg.ttlTargetTime, "ttl-index-delete-target-time", time.Second, "time a TTL rule deletes before the next rule's turn (`duration`, 0: no limit; ttlIndexDeleteTargetTimeMS)")
	fs.DurationVar(&cfg.ttlSubPass, "ttl-subpass-target", 60*time.Second, "length of a TTL sub-pass before the rules are listed again (`duration`, 0: no limit; ttlMonitorSubPassTargetSecs)")
	fs.StringVar(&cfg.replica.name, "replica-set", "", "`name` of the replica set this server is a member of (docs/replication.md); with --node-id, --raft-listen and --members")
	fs.StringVar(&cfg.replica.nodeID, "node-id", "", "this member's `id` in the replica set, kept across restarts")
	fs.StringVar(&cfg.replica.raftListen, "raft-listen", "", "`address` to exchange the replica set's raft traffic on; this member's raft address in --members")
	fs.Uint64Var(&cfg.replica.snapshotThreshold, "snapshot-threshold", replset.DefaultSnapshotThreshold, "replica set: log entries past the last snapshot that make the member take one (`n`), after which its log before it is deleted")
	fs.Uint64Var(&cfg.replica.trailingLogs, "trailing-logs", replset.DefaultTrailingLogs, "replica set: log entries kept before a snapshot (`n`); a member further behind is sent the snapshot")
	fs.StringVar(&cfg.replica.join, "join", "", "HTTP `address` of a member of an existing replica set to join, instead of --members: this member is added as a non-voter, catches up (from a snapshot when it is far behind) and then becomes a voter; the others reach it at its --listen and --mongo-listen, which must name a host")
	fs.StringVar(&cfg.replica.members, "members", "", "every member of the replica set, this one included, the same on each member and at every start: `list` of id=raft-host:port/http-host:port[/mongo-host:port], comma-separated; a member that never ran makes a new set of them; a member's HTTP address is the --listen others reach it at; with MongoDB addresses (all or none), each member serves the wire protocol on its own and hello names them all")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, `Usage: hourglass serve [flags]

Runs the Hourglass server: the HTTP API of docs/api.md on --listen and the
MongoDB wire protocol of docs/mongodb.md on --mongo-listen, with the data in
--data-dir (embedded storage, nothing else to install).

SIGINT or SIGTERM stops it cleanly: requests in progress finish, buckets are
written to disk. A second signal exits at once; acknowledged writes are safe
in the log either way.

With --replica-set, --node-id, --raft-listen and --members (or --join), the
server is a member of a replica set (docs/replication.md): writes go to the leader and
are applied on every member, followers answer writes with 421 and the
leader's address, the TTL monitor deletes on the leader only. The MongoDB
wire protocol is served when --members gives every member's MongoDB address:
hello describes the set (drivers given replicaSet=<name> find the primary),
secondaries answer writes with NotWritablePrimary. A member started with
--join instead of --members joins a running set; members are removed with
DELETE /v1/replset/members/{id} on the leader.

Flags:
`)
		printFlags(w, fs)
	}
	return fs
}

func runServe(args []string, stdout, stderr io.Writer) error {
	var cfg serveConfig
	fs := serveFlags(&cfg)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	log, err := newLogger(stderr, cfg.logFormat, cfg.logLevel)
	if err != nil {
		return err
	}
	if err := checkListen("--listen", cfg.listen, cfg.authToken, cfg.insecure); err != nil {
		return err
	}
	var members []replicaMember
	mongoSet := false
	fs.Visit(func(f *flag.Flag) { mongoSet = mongoSet || f.Name == "mongo-listen" })
	if cfg.replica.enabled() && cfg.replica.join != "" {
		mongo := ""
		if mongoSet {
			mongo = cfg.mongoListen
		}
		if members, err = cfg.replica.parseJoin(cfg.listen, mongo); err != nil {
			return err
		}
		if err := checkListen("--raft-listen", cfg.replica.raftListen, "", cfg.insecure); err != nil {
			return fmt.Errorf("%w (raft traffic is not authenticated: keep it on a private network)", err)
		}
		cfg.mongoListen = mongo
	} else if cfg.replica.enabled() {
		if members, err = cfg.replica.parse(); err != nil {
			return err
		}
		if err := checkListen("--raft-listen", cfg.replica.raftListen, "", cfg.insecure); err != nil {
			return fmt.Errorf("%w (raft traffic is not authenticated: keep it on a private network)", err)
		}
		// The wire protocol is served when --members gives the members'
		// MongoDB addresses: hello names them to drivers. This member's
		// is where it listens.
		var own string
		for _, m := range members {
			if m.id == cfg.replica.nodeID {
				own = m.mongo
			}
		}
		switch {
		case own == "" && mongoSet && cfg.mongoListen != "":
			return errors.New("--mongo-listen on a replica set member: give every member's MongoDB address in --members (id=raft/http/mongo), which drivers are told of")
		case own != "" && mongoSet && cfg.mongoListen != own:
			return fmt.Errorf("--mongo-listen %q differs from this member's MongoDB address in --members, %s: leave --mongo-listen out", cfg.mongoListen, own)
		}
		cfg.mongoListen = own
	}
	if cfg.mongoListen != "" {
		if err := checkListen("--mongo-listen", cfg.mongoListen, cfg.authToken, cfg.insecure); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}
	defer ln.Close()
	var mln net.Listener
	if cfg.mongoListen != "" {
		if mln, err = net.Listen("tcp", cfg.mongoListen); err != nil {
			return fmt.Errorf("--mongo-listen on %s: %w", cfg.mongoListen, err)
		}
		defer mln.Close()
	}

	if limit, dflt := runtimeMemoryLimit(&cfg, fs, os.Getenv("GOMEMLIMIT")); limit > 0 {
		debug.SetMemoryLimit(limit)
		log.Info("go runtime memory limit", "bytes", limit, "follows_live_heap", dflt)
		if dflt {
			stopLive := make(chan struct{})
			defer close(stopLive)
			liveLimit{factor: liveFactor, slack: liveSlack, minSlack: minLiveSlack, ceiling: limit,
				maxGCShare: maxGCShare, window: gcWindow}.follow(stopLive)
		}
	}

	start := time.Now()
	engine := timeseries.Options{
		Dir: cfg.dataDir, MemoryBudget: int64(cfg.memoryBudget), CheckpointInterval: cfg.checkpointInterval,
		QueryMemoryBytes: int64(cfg.queryMemory), QueryMemoryTotalBytes: int64(cfg.queryMemoryTotal), QueryConcurrency: cfg.queryConcurrency, DiskReserve: diskReserve(cfg.diskReserve), AggregateMaxCells: cfg.aggregateMaxCells,
		Logger: log.With("component", "storage"),
	}
	if members == nil {
		// A replica set does not archive yet (docs/archive.md).
		st, err := openArchive(cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		engine.Archive = st
	} else if cfg.archiveURL != "" {
		return errors.New("--archive-url on a replica set member: a replica set does not archive yet (docs/archive.md)")
	}
	var (
		db       *timeseries.DB
		node     *replset.Node
		store    ttl.Store
		replica  *api.ReplicaSet
		closeAll func() error

		mongoReplica *mongowire.ReplicaSet
	)
	// joinCtx ends what a joining member does in the background.
	joinCtx, stopJoin := context.WithCancel(context.Background())
	defer stopJoin()
	if members == nil {
		if db, err = timeseries.Open(engine); err != nil {
			return fmt.Errorf("open data directory %s: %w", cfg.dataDir, err)
		}
		store, closeAll = db, db.Close
	} else {
		addrs := make([]replset.MemberAddrs, len(members))
		for i, m := range members {
			addrs[i] = replset.MemberAddrs{ID: m.id, Raft: m.raft, HTTP: m.http, Mongo: m.mongo}
		}
		node, err = replset.Open(replset.Options{ID: cfg.replica.nodeID, Dir: cfg.dataDir, Addr: cfg.replica.raftListen,
			Addrs: addrs, Engine: engine, Logger: log.With("component", "replset"),
			SnapshotThreshold: cfg.replica.snapshotThreshold, TrailingLogs: cfg.replica.trailingLogs})
		if errors.Is(err, replset.ErrStandaloneDir) {
			return fmt.Errorf("open replica set member in %s: %w (hourglass restore --member makes a member's directory of a backup taken on a member)", cfg.dataDir, err)
		}
		if err != nil {
			return fmt.Errorf("open replica set member in %s: %w", cfg.dataDir, err)
		}
		created := false
		if cfg.replica.join == "" {
			if created, err = bootstrap(node, members); err != nil {
				node.Close()
				return err
			}
		} else if err := joinSet(joinCtx, node, joinURL(cfg.replica.join), cfg.authToken, cfg.replica.name, members[0], log.With("component", "replset")); err != nil {
			node.Close()
			return err
		}
		db, store, closeAll = node.DB(), node, node.Close
		replica = &api.ReplicaSet{Name: cfg.replica.name, Node: node, FaultInjection: cfg.replica.faultInjection}
		if members[0].mongo != "" {
			mongoReplica = &mongowire.ReplicaSet{Name: cfg.replica.name, Node: node}
		}
		log.Info("replica set member", "set", cfg.replica.name, "id", cfg.replica.nodeID, "raft_listen", node.Addr(),
			"members", len(members), "new_set", created)
	}
	opened := time.Since(start)
	// What opening a large store decoded and dropped (a million series'
	// records) would otherwise stay resident until the heap next doubled:
	// collect it and give it back now.
	debug.FreeOSMemory()
	log.Info("storage open", "dir", cfg.dataDir, "took", opened.Round(time.Millisecond),
		"collected", (time.Since(start) - opened).Round(time.Millisecond))

	unlimited := func(v int64) int64 {
		if v == 0 {
			return ttl.Unlimited
		}
		return v
	}
	monitor, err := ttl.New(ttl.Options{
		Store: store, Disabled: !cfg.ttlEnabled, Sleep: cfg.ttlSleep,
		TargetDocs: unlimited(cfg.ttlTargetDocs), TargetTime: time.Duration(unlimited(int64(cfg.ttlTargetTime))),
		SubPassTarget: time.Duration(unlimited(int64(cfg.ttlSubPass))), Logger: log.With("component", "ttl"),
	})
	if err != nil {
		closeAll()
		return err
	}
	monitor.Start()
	defer monitor.Close() // a second time after the shutdown below: harmless
	apiOpts := api.Options{
		DB: db, TTL: monitor, AuthToken: cfg.authToken, MaxBody: int64(cfg.maxBody),
		MaxBodyMemory: int64(cfg.maxBodyMemory), MinBodyRate: int64(cfg.minBodyRate), BodyRateGrace: cfg.bodyRateGrace,
		MaxConcurrentWrites: cfg.maxConcurrentWrites, MaxQueuedWrites: cfg.maxQueuedWrites, MaxReadSamples: cfg.maxReadSamples, BackupS3Endpoint: cfg.backupS3Endpoint,
		PromQLMaxSamples: cfg.promqlMaxSamples, PromQLTimeout: cfg.promqlTimeout, PromQLMaxConcurrency: cfg.promqlConcurrency,
		Version: versionString(), Build: thisBuild(), Logger: log.With("component", "api"), ReplicaSet: replica,
	}
	// One command layer for both doors: their operations are listed
	// together, their writes share the ingest slots, HTTP bodies and
	// MongoDB messages one request memory budget (at the same minimum
	// rate), and writes go through one writer (the member on a replica
	// set).
	apiOpts.EnsureDefaults()
	co := command.Options{DB: db, TTL: monitor, Bodies: command.NewBudget(apiOpts.MaxBodyMemory),
		MaxConcurrentWrites: apiOpts.MaxConcurrentWrites, MaxQueuedWrites: apiOpts.MaxQueuedWrites, Logger: log.With("component", "command")}
	if node != nil {
		co.Node, co.SetName = node, cfg.replica.name
	}
	cmdLayer, err := command.New(co)
	if err != nil {
		closeAll()
		return err
	}
	apiOpts.Commands, apiOpts.Bodies = cmdLayer, cmdLayer.Bodies()
	srv, err := api.New(apiOpts)
	if err != nil {
		closeAll()
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		// Bodies of up to --max-body on slow links; queries stream, so
		// there is no write timeout.
		ReadTimeout:    5 * time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 1 << 20,
		// OPTIONS * reaches the API, which refuses it (docs/api.md).
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Signals are caught before the first request is served: a client
	// that sees the server answer may stop it cleanly at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	served := make(chan error, 2)
	go func() { served <- hs.Serve(ln) }()
	var ms *mongowire.Server
	mongoAddr := ""
	if mln != nil {
		ms, err = mongowire.New(mongowire.Options{DB: db, TTL: monitor, AuthToken: cfg.authToken, Version: versionString(),
			Logger: log.With("component", "mongowire"), ReplicaSet: mongoReplica, Commands: cmdLayer,
			MinMessageRate: apiOpts.MinBodyRate, MessageRateGrace: apiOpts.BodyRateGrace,
			MaxConnections: cfg.mongoMaxConnections})
		if err != nil {
			closeAll()
			return err
		}
		go func() { served <- ms.Serve(mln) }()
		mongoAddr = mln.Addr().String()
	}
	log.Info("hourglass serving", "version", versionString(), "commit", commitString(thisBuild()),
		"listen", ln.Addr().String(), "mongo_listen", mongoAddr, "auth", cfg.authToken != "")

	defer signal.Stop(sigs)
	var serveErr error
	select {
	case sig := <-sigs:
		log.Info("shutting down; a second signal exits at once", "signal", sig.String())
		go func() {
			sig := <-sigs
			log.Warn("exiting at once; acknowledged writes are in the log", "signal", sig.String())
			os.Exit(1)
		}()
	case serveErr = <-served:
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	// The two front doors drain at once, within the same timeout.
	mongoDone := make(chan struct{})
	go func() {
		defer close(mongoDone)
		if ms != nil {
			if err := ms.Shutdown(ctx); err != nil {
				log.Warn("MongoDB commands still in progress at the shutdown timeout", "err", err)
			}
		}
	}()
	if err := hs.Shutdown(ctx); err != nil {
		log.Warn("requests still in progress at the shutdown timeout", "err", err)
		hs.Close()
	}
	<-mongoDone
	monitor.Close()
	start = time.Now()
	// Closing writes a final checkpoint; it must not outlast the shutdown
	// timeout (a disk that stops taking writes, say). Acknowledged writes
	// are in the log whether it finishes or not.
	closed := make(chan error, 1)
	go func() { closed <- closeAll() }()
	select {
	case err := <-closed:
		if err != nil {
			return fmt.Errorf("close storage: %w", err)
		}
	case <-time.After(cfg.shutdownTimeout):
		return fmt.Errorf("close storage: not done after --shutdown-timeout %v; acknowledged writes are in the log", cfg.shutdownTimeout)
	}
	log.Info("storage closed", "took", time.Since(start).Round(time.Millisecond))
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) && !errors.Is(serveErr, mongowire.ErrServerClosed) {
		return serveErr
	}
	return nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// checkListen refuses to serve a non-loopback address (given by flag)
// without a token, unless insecure is set.
func checkListen(flag, addr, token string, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %v", flag, addr, err)
	}
	if token != "" || insecure || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("%s %q is reachable from other machines: set --auth-token (or HOURGLASS_AUTH_TOKEN), or pass --insecure to serve without authentication", flag, addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// byteSize is a size flag: a number of bytes with an optional unit (KiB,
// MiB, GiB, or KB, MB, GB as powers of 1000).
type byteSize int64

func (b *byteSize) String() string {
	v := int64(*b)
	for _, u := range []struct {
		s string
		n int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.n && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	units := []struct {
		s string
		n int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.s) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.s)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return errors.New("want a positive size such as 1048576, 512KiB or 64MiB")
	}
	*b = byteSize(n * mult)
	return nil
}

// memoryOverhead is what the process's memory holds beyond --memory-budget
// and --max-body-memory: Pebble's block cache and memtables (128 MiB), the
// checkpoint's write batch, the line-protocol decoders' caches, the symbol
// cache (16 MiB), queries and the runtime.
const memoryOverhead = 256 << 20

// runtimeMemoryLimit returns the soft memory limit serve gives the Go
// runtime, or 0 to leave the runtime's own: --memory-limit when set (0:
// none), else --memory-budget + the request bodies' memory +
// memoryOverhead, less what the store holds outside the Go heap
// (timeseries.StoreOffHeapBytes), so that the whole process stays within
// the sum; unless the GOMEMLIMIT environment variable (gomemlimit) sets
// one. dflt tells that the limit is that default sum, under which serve
// lets the limit follow the live heap (liveLimit). fs holds cfg's parsed
// flags.
func runtimeMemoryLimit(cfg *serveConfig, fs *flag.FlagSet, gomemlimit string) (limit int64, dflt bool) {
	if gomemlimit != "" {
		return 0, false
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "memory-limit" })
	if set {
		return int64(cfg.memoryLimit), false
	}
	bodies := int64(cfg.maxBodyMemory)
	if bodies == 0 {
		writes := cfg.maxConcurrentWrites
		if writes == 0 {
			writes = 2 * runtime.GOMAXPROCS(0)
		}
		bodies = int64(writes) * int64(cfg.maxBody)
	}
	return int64(cfg.memoryBudget) + bodies + memoryOverhead - timeseries.StoreOffHeapBytes(), true
}

// sizeOrZero is a byteSize that also takes 0, meaning off.
type sizeOrZero byteSize

func (s *sizeOrZero) String() string { return (*byteSize)(s).String() }

func (s *sizeOrZero) Set(v string) error {
	if strings.TrimSpace(v) == "0" {
		*s = 0
		return nil
	}
	return (*byteSize)(s).Set(v)
}

// diskReserve maps --disk-reserve to Options.DiskReserve, where 0 means the
// default and a negative value turns the check off.
func diskReserve(s sizeOrZero) int64 {
	if s == 0 {
		return -1
	}
	return int64(s)
}

// openArchive opens the store --archive-url names, by default
// <data-dir>/archive: a URL that does not parse, or a bucket that does not
// exist, stops the server with a message saying so.
func openArchive(cfg serveConfig) (objstore.Store, error) {
	u := cfg.archiveURL
	if u == "" {
		dir, err := filepath.Abs(filepath.Join(cfg.dataDir, "archive"))
		if err != nil {
			return nil, fmt.Errorf("--archive-url: %w", err)
		}
		u = "file://" + filepath.ToSlash(dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := objstore.Open(ctx, u, objstore.Options{S3Endpoint: cfg.archiveS3Endpoint})
	if err != nil {
		return nil, fmt.Errorf("--archive-url: %w", err)
	}
	return st, nil
}
