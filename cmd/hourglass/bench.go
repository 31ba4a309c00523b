package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/hourglassdb/hourglass/bench"
)

const benchUsage = `Usage: hourglass bench ingest [flags] target...
       hourglass bench query [flags] target...
       hourglass bench crash [flags]   (kill -9 loop: hourglass bench crash --help)
       hourglass bench chaos [flags]   (replica set faults: hourglass bench chaos --help)
       hourglass bench soak [flags]    (long mixed load: hourglass bench soak --help)
       hourglass bench hostile [flags] (attacks on the doors: hourglass bench hostile --help)

Loads a workload into each target in turn and prints a side-by-side report.
--workload cpu-only (the default) is the peers harness's TSBS shape: hosts x
10 fields, 10 tags, one row per host every 10 s; iot is many sensors with 1
to 3 fields, jittered timestamps and a share of late, out-of-order points;
high-cardinality is 1M series (--sensors) of 10 points each.
Targets:

  embedded            the storage engine in this process, in a temporary
                      directory (no HTTP); the load generator runs in this
                      process too
  http://host:port    a Hourglass server: line protocol to /write into
                      --collection, then a compaction and its size on disk
  influx=URL          any InfluxDB line-protocol write URL, used as given:
                      influx=http://127.0.0.1:8428/write (VictoriaMetrics),
                      influx=http://127.0.0.1:8086/write?db=benchmark (InfluxDB)
  remote=URL          any Prometheus remote write URL, used as given, with
                      --format prom: remote=http://127.0.0.1:8428/api/v1/write
                      (VictoriaMetrics)

--format prom sends Prometheus remote write 1.0 (snappy protobuf): each
field of a row a series <measurement>_<field> with the row's tags as
labels, one sample a series (as Prometheus sends a scrape), to a Hourglass
target's /api/v1/write?collection= and to remote= targets.

Example, side by side with a local VictoriaMetrics:
  hourglass bench ingest http://127.0.0.1:7700 influx=http://127.0.0.1:8428/write

--order desc or shuffle reorders each batch's rows (newest first, or at
random), so each series' rows inside a batch are out of time order.

--queries N runs N query clients against a Hourglass target while it
loads: each sends one of the workload's "bench query" queries at random
(the fleet queries for iot and high-cardinality) and reads the whole
answer. The report adds, per query, answers, errors (with the first
refusal), latency p50/p99/max and the largest answer; compare points/s
with a run without --queries for the cost of the reads to ingest.

--together loads every HTTP target at once, each with its own load
generator, the loads starting together once all are ready to send (their
bodies made with --pregenerate, their collections and rollups created).
On a shared machine whose speed moves from run to run, two servers (two
builds, or two settings) loaded at once see the same machine: compare
their points/s and CPU s/Mpoint as ratios. Each rate is then that of a
machine shared by all the loads, not of the target alone; with
--duration, the loads end together too. Not with the embedded target.
A Hourglass target may set its own rollups after a '#', to compare a load
with rollups and one without at once:
  hourglass bench ingest --together --workload iot \
    'http://127.0.0.1:7711#rollups=0' 'http://127.0.0.1:7712#rollups=2'

The report gives points acknowledged, points/s, batch latency (p50, p99,
max), bytes/point on disk, buckets per 1000 rows (Hourglass targets), peak
RSS, settled bytes/point and CPU s/Mpoint. For a Hourglass server,
bytes/point is its collection's size after a compaction (storageBytes, as
in earlier reports) and the peak RSS its VmHWM (the peak since the server
started, from /v1/status). For an influx= or remote= target on a loopback
address, the process listening on the URL's port is found through /proc
(the same user or root is needed to see it): its peak RSS is the highest
VmRSS sampled every 100 ms from the start of the load until its size is
measured (its VmHWM since it started is in the JSON report). When its data
directories are known from its command line (VictoriaMetrics'
-storageDataPath; InfluxDB 1.x's [meta] dir, [data] dir and wal-dir of its
configuration file), their allocated size after the load gives bytes/point:
VictoriaMetrics is first told to flush (/internal/force_flush), then, for
either, the size is taken once it has not changed for --settle (background
flushes and merges go on for seconds after a load).

Settled bytes/point measures every target the same way: the allocated
size of its data directories once it has not changed for --settle (read
every second, 5 minutes at most), over the points acknowledged. For a peer
it is its bytes/point; a Hourglass server on a loopback address is found
through /proc as a peer is, its directory is its --data-dir (from its
command line, else HOURGLASS_DATA_DIR in its environment, else
hourglass-data in its working directory), and the wait starts after the
compaction; the embedded target's directory is waited for after its flush,
still open (its bytes/point is the directory's size once closed). Start a
server on an empty data directory: everything in it is counted.

CPU s/Mpoint is the CPU time (user and system, utime and stime of
/proc/PID/stat) the target's process spent during the load alone, per
million points acknowledged; the CPU time spent after the load until the
size settled is reported apart. For the embedded target it is this
process's, which also turns the workload's rows into measurements and
writes them: the load generator's CPU is counted with the engine's (the
rows are generated before the load starts); its peak RSS is this process's
highest VmRSS sampled, the generated workload included.

Any target, or process, not found leaves these columns empty, with a note.

"bench query" then times queries on the loaded data; median and p99 of
--runs runs each. On cpu-only (the default): the peers harness's q1 (max of
usage_user for host_0 over one hour) and q2 (its 1-minute averages over 12
hours), and TSBS-style single-groupby-1-1-1, 1-1-12, 5-1-1, lastpoint and
high-cpu-1. With --workload iot (and the --sensors and --hours the load was
given), fleet queries on the line-protocol load (Hourglass and prom= targets): one sensor's raw values
over the last 3 hours (sensor-raw-3h) and its 1-minute averages over the
whole load (sensor-avg-1m), the last value of every sensor (lastpoint),
hourly averages of the 1% of sensors of one site (site-avg-1h), and the
sensors a meta filter on kind and site selects that report in the last
10 minutes (sensors-by-meta: a distinct of tags.sensor on Hourglass,
/api/v1/series on a Prometheus API). Each gives the same answer on both
targets. Targets:

  http://host:port    a Hourglass server (--collection)
  prom=URL            a Prometheus API: prom=http://127.0.0.1:8428
  influxql=URL        an InfluxDB 1.x /query URL with its db:
                      influxql=http://127.0.0.1:8086/query?db=benchmark

Flags:
`

type benchConfig struct {
	scale, hours      int
	values            string
	workers, batch    int
	gzip, jsonOut     bool
	limit             int
	collection, token string
	replace           bool
	htmlOut           string
	workload          string
	format            string
	sensors, fields   int
	late              float64
	precision         time.Duration
	order             string
	duration, settle  time.Duration
	queries           int
	rollups           int
	pregenerate       byteSize
	together          bool
}

// targetReport is one row of the report.
type targetReport struct {
	Target          string  `json:"target"`
	Rows            int64   `json:"rows"`
	Points          int64   `json:"points"`
	Seconds         float64 `json:"seconds"`
	PointsPerSecond float64 `json:"pointsPerSecond"`
	MBPerSecond     float64 `json:"mbPerSecond,omitempty"`
	P50Millis       float64 `json:"batchP50Millis,omitempty"`
	P99Millis       float64 `json:"batchP99Millis,omitempty"`
	MaxMillis       float64 `json:"batchMaxMillis,omitempty"`
	Retries         int64   `json:"retries"`
	Errors          int64   `json:"errors"`
	FirstError      string  `json:"firstError,omitempty"`
	BytesPerPoint   float64 `json:"bytesPerPoint,omitempty"`
	// Buckets is the collection's bucket count after the load and its
	// compaction (Hourglass targets), BucketsPer1000 the same per 1000
	// rows (measurements).
	Buckets        int64   `json:"buckets,omitempty"`
	BucketsPer1000 float64 `json:"bucketsPer1000,omitempty"`
	// StoppedByDuration is set when --duration ended the load before the
	// workload was sent: Rows and Points are what was acknowledged.
	StoppedByDuration bool `json:"stoppedByDuration,omitempty"`
	// LoadStart is when the load's first request could go (after its
	// bodies were made, and with --together after every target's were).
	LoadStart string `json:"loadStart,omitempty"`
	// PeakRSSMiB is a Hourglass server's peak resident size since it
	// started (VmHWM), as its /v1/status reports; for a local influx=
	// target, the highest VmRSS of its process sampled during the load.
	PeakRSSMiB int64 `json:"peakRSSMiB,omitempty"`
	// Queries are the concurrent queries --queries ran during the load
	// (Hourglass targets).
	Queries []bench.QueryLoadResult `json:"queries,omitempty"`
	// RollupCatchUpSeconds is how long the --rollups took to catch up
	// once the load was acknowledged.
	RollupCatchUpSeconds float64 `json:"rollupCatchUpSeconds,omitempty"`
	// A local influx= target's process, its VmHWM (peak resident size
	// since it started) after the load, and the allocated size of its data
	// directories before and after the load.
	PID             int      `json:"pid,omitempty"`
	Server          string   `json:"server,omitempty"`
	VmHWMMiB        int64    `json:"vmHWMMiB,omitempty"`
	DataDirs        []string `json:"dataDirs,omitempty"`
	DiskBytes       int64    `json:"diskBytes,omitempty"`
	DiskBytesBefore int64    `json:"diskBytesBefore,omitempty"`
	// StorageBytes is a Hourglass server's collection's size after its
	// compaction (its storageBytes), which BytesPerPoint divides for a
	// Hourglass server, as before the settled size was measured.
	StorageBytes int64 `json:"storageBytes,omitempty"`
	// SettledBytesPerPoint is DiskBytes per point: the allocated size of
	// the target's data directories once it stayed the same for --settle
	// after the load, measured the same way for every target whose
	// directory is known (for a local peer it is also BytesPerPoint).
	SettledBytesPerPoint float64 `json:"settledBytesPerPoint,omitempty"`
	// SettleSeconds is the time from the end of the load to the settled
	// size: the flush (a Hourglass compaction, VictoriaMetrics'
	// force_flush) and the wait; SettleTimedOut is set if the size was
	// still changing after 5 minutes.
	SettleSeconds  float64 `json:"settleSeconds,omitempty"`
	SettleTimedOut bool    `json:"settleTimedOut,omitempty"`
	// CPUSeconds is the CPU time (user and system) the target's process
	// spent during the load alone, CPUSecondsPerMPoint the same per
	// million points acknowledged, and SettleCPUSeconds the CPU time it
	// spent after the load until its size settled. For the embedded
	// target the process is this one, load generator included.
	CPUSeconds          float64 `json:"cpuSeconds,omitempty"`
	CPUSecondsPerMPoint float64 `json:"cpuSecondsPerMPoint,omitempty"`
	SettleCPUSeconds    float64 `json:"settleCPUSeconds,omitempty"`
}

// setCPU fills the report's CPU columns from the CPU time spent during
// the load and after it.
func (r *targetReport) setCPU(load, settle time.Duration) {
	r.CPUSeconds, r.SettleCPUSeconds = load.Seconds(), settle.Seconds()
	if r.Points > 0 {
		r.CPUSecondsPerMPoint = load.Seconds() / float64(r.Points) * 1e6
	}
}

// setSettled fills the report's settled size.
func (r *targetReport) setSettled(s bench.Settled) {
	r.DiskBytes, r.SettleTimedOut = s.Bytes, s.TimedOut
	if r.Points > 0 {
		r.SettledBytesPerPoint = float64(s.Bytes) / float64(r.Points)
	}
}

// cpuMeter reads a local target's CPU time (bench.ProcessCPU) at the
// start of its load, at its end, and once its size settled.
type cpuMeter struct {
	pid           int
	start, loaded time.Duration
	err           error
}

func startCPU(pid int) *cpuMeter {
	c := &cpuMeter{pid: pid}
	c.start, c.err = bench.ProcessCPU(pid)
	return c
}

// loadDone marks the end of the load.
func (c *cpuMeter) loadDone() {
	if c.err == nil {
		c.loaded, c.err = bench.ProcessCPU(c.pid)
	}
}

// settleDone fills rep's CPU columns; a process that could not be read
// leaves them empty, with a note.
func (c *cpuMeter) settleDone(rep *targetReport, stderr io.Writer) {
	var now time.Duration
	if c.err == nil {
		now, c.err = bench.ProcessCPU(c.pid)
	}
	if c.err != nil {
		fmt.Fprintf(stderr, "[%s] CPU time of pid %d not measured: %v\n", rep.Target, c.pid, c.err)
		return
	}
	rep.setCPU(c.loaded-c.start, now-c.loaded)
}

func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "query":
			return runBenchQuery(args[1:], stdout, stderr)
		case "crash":
			return runBenchCrash(args[1:], stdout, stderr)
		case "chaos":
			return runBenchChaos(args[1:], stdout, stderr)
		case "soak":
			return runBenchSoak(args[1:], stdout, stderr)
		case "hostile":
			return runBenchHostile(args[1:], stdout, stderr)
		}
	}
	if len(args) == 0 || args[0] != "ingest" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, benchUsage)
			printFlags(stdout, benchFlags(&benchConfig{}))
			return nil
		}
		fmt.Fprint(stderr, benchUsage)
		printFlags(stderr, benchFlags(&benchConfig{}))
		return errUsage
	}
	var cfg benchConfig
	fs := benchFlags(&cfg)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		printFlags(fs.Output(), fs)
	}
	targets, err := parseTargets(fs, args[1:])
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		fmt.Fprintln(stderr, "no target: name embedded, http://host:port or influx=URL")
		return errUsage
	}
	var w bench.Workload
	w.Scale = cfg.scale
	switch cfg.values {
	case "int":
		w.Values = bench.ValuesInt
	case "float":
		w.Values = bench.ValuesFloat
	default:
		return fmt.Errorf("--values %q: want int or float", cfg.values)
	}
	w.EnsureDefaults()
	w.End = w.Start.Add(time.Duration(cfg.hours) * time.Hour)
	if err := w.Validate(); err != nil {
		return err
	}
	order, err := bench.ParseOrder(cfg.order)
	if err != nil {
		return fmt.Errorf("--order: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var src bench.LineSource = w
	desc := fmt.Sprintf("cpu-only, %d hosts, %d h, %s values", cfg.scale, cfg.hours, cfg.values)
	switch cfg.workload {
	case "cpu-only":
	case "iot":
		iot := bench.IoT{Sensors: cfg.sensors, Fields: cfg.fields, Span: time.Duration(cfg.hours) * time.Hour, Late: cfg.late, Precision: cfg.precision}
		if err := iot.Validate(); err != nil {
			return err
		}
		iot.EnsureDefaults()
		src = iot
		desc = fmt.Sprintf("iot, %d sensors, %d fields, %d h, %.1f%% late, times in %v", iot.Sensors, iot.Fields, cfg.hours, 100*iot.Late, iot.Precision)
	case "high-cardinality":
		// Many series, few points each: one point a minute for 10 minutes.
		n := cfg.sensors
		if n == 0 {
			n = 1_000_000
		}
		iot := bench.IoT{Sensors: n, Fields: 1, Interval: time.Minute, Span: 10 * time.Minute, Late: cfg.late, Precision: cfg.precision}
		if err := iot.Validate(); err != nil {
			return err
		}
		src = iot
		desc = fmt.Sprintf("high-cardinality, %d series, 10 points each", n)
	default:
		return fmt.Errorf("--workload %q: want cpu-only, iot or high-cardinality", cfg.workload)
	}
	rows := src.Rows()
	if cfg.limit > 0 && cfg.limit < rows {
		rows = cfg.limit
	}
	if cfg.duration < 0 || cfg.settle < 0 {
		return errors.New("--duration and --settle must not be negative")
	}
	upTo := ""
	if cfg.duration > 0 {
		upTo = fmt.Sprintf(" (for at most %v a target)", cfg.duration)
	}
	if order != bench.OrderAsc {
		desc += fmt.Sprintf(", %s inside each batch", order)
	}
	fmt.Fprintf(stderr, "workload: %s: %d rows, %d points%s\n", desc, rows, rows*src.FieldsPerRow(), upTo)
	reports, series, err := loadTargets(ctx, &cfg, w, src, order, targets, stderr)
	if err != nil {
		return err
	}
	if cfg.htmlOut != "" {
		f, err := os.Create(cfg.htmlOut)
		if err != nil {
			return err
		}
		title := "hourglass bench ingest: " + desc
		if err := errors.Join(bench.WriteHTML(f, title, series), f.Close()); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "chart written to %s\n", cfg.htmlOut)
	}
	if cfg.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	printReport(stdout, reports)
	return nil
}

// loadTargets loads each target in turn, or all at once with --together:
// each with its own generator, every load starting once all are ready to
// send (bodies made, collections and rollups created).
func loadTargets(ctx context.Context, cfg *benchConfig, w bench.Workload, src bench.LineSource, order bench.Order, targets []string, stderr io.Writer) ([]targetReport, []bench.Series, error) {
	reports, series := make([]targetReport, len(targets)), make([]bench.Series, len(targets))
	one := func(i int, ready func(context.Context) error) error {
		series[i].Target = targets[i]
		target, tcfg, err := targetOptions(targets[i], cfg)
		if err != nil {
			return fmt.Errorf("target %s: %w", targets[i], err)
		}
		r, err := benchTarget(ctx, tcfg, w, src, order, target, stderr, func(p bench.Progress) {
			series[i].Samples = append(series[i].Samples, bench.Sample{Elapsed: p.Elapsed, Points: p.Points, Batches: p.Batches, Latency: p.Latency})
		}, ready)
		r.Target = targets[i]
		reports[i] = r
		if err != nil {
			return fmt.Errorf("target %s: %w", targets[i], err)
		}
		return nil
	}
	if !cfg.together {
		for i := range targets {
			if err := one(i, nil); err != nil {
				return nil, nil, err
			}
		}
		return reports, series, nil
	}
	if slices.Contains(targets, "embedded") {
		return nil, nil, errors.New("--together loads targets over HTTP: the embedded target shares this process with their load generators")
	}
	stderr = &lockedWriter{w: stderr} // the loads' progress lines, at once
	start := newStartLine(len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready, leave := start.runner()
			defer leave()
			errs[i] = one(i, ready)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return reports, series, nil
}

// targetOptions splits the options a Hourglass target may carry after a
// '#' (rollups=N: this target's --rollups) from it, and returns the
// configuration for it: cfg, or a copy with the options set.
func targetOptions(target string, cfg *benchConfig) (string, *benchConfig, error) {
	base, opts, ok := strings.Cut(target, "#")
	if !ok {
		return target, cfg, nil
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return "", nil, errors.New("only a Hourglass target (http://host:port) takes options after '#'")
	}
	c := *cfg
	for _, o := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(o, "=")
		n, err := strconv.Atoi(v)
		if k != "rollups" || err != nil {
			return "", nil, fmt.Errorf("target option %q: want rollups=N", o)
		}
		c.rollups = n
	}
	return base, &c, nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// startLine starts loads together: each waits there until all arrived
// (or left, having failed before).
type startLine struct {
	mu   sync.Mutex
	left int
	all  chan struct{}
}

func newStartLine(n int) *startLine { return &startLine{left: n, all: make(chan struct{})} }

func (s *startLine) arrive() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left--; s.left == 0 {
		close(s.all)
	}
}

// runner returns one load's ready (bench.LoadConfig.Ready) and leave, to
// call when it is done: leave arrives for a load that failed before it
// was ready, so that the others do not wait for it.
func (s *startLine) runner() (ready func(context.Context) error, leave func()) {
	var arrived bool
	ready = func(ctx context.Context) error {
		arrived = true
		s.arrive()
		select {
		case <-s.all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	leave = func() {
		if !arrived {
			s.arrive()
		}
	}
	return ready, leave
}

func benchFlags(cfg *benchConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("bench ingest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.workload, "workload", "cpu-only", "`name`: cpu-only (TSBS hosts, 10 fields), iot (sensors, 1-3 fields, jittered and late points) or high-cardinality (1M series of 10 points)")
	fs.IntVar(&cfg.scale, "scale", bench.DefaultScale, "cpu-only: hosts in the workload (`n`)")
	fs.IntVar(&cfg.hours, "hours", 24, "hours of data (`n`; cpu-only from 2016-01-01, iot from 2024-01-01)")
	fs.StringVar(&cfg.format, "format", "lp", "what a Hourglass target is sent: `lp` (line protocol to /write), json (NDJSON documents, the meta value a sub-document; iot only) or prom (Prometheus remote write to /api/v1/write; also what remote= targets are sent)")
	fs.IntVar(&cfg.sensors, "sensors", 0, "iot and high-cardinality: sensors (`n`; 0: 10,000 for iot, 1,000,000 for high-cardinality)")
	fs.IntVar(&cfg.fields, "fields", 2, "iot: fields per sensor (`n`, 1 to 3)")
	fs.Float64Var(&cfg.late, "late", 0.01, "iot: share of points sent late, out of order (`fraction`)")
	fs.DurationVar(&cfg.precision, "time-precision", time.Nanosecond, "iot and high-cardinality: times are rounded down to a multiple of this `unit` (1ns: the jitter's nanoseconds kept; 1ms: as a device reporting milliseconds, or a BSON date)")
	fs.StringVar(&cfg.order, "order", "asc", "order of each series' rows inside a batch: `asc` (time order), desc (newest first) or shuffle (random, seeded)")
	fs.StringVar(&cfg.values, "values", "int", "field values: `int` (58i, as TSBS writes) or float (full precision)")
	fs.IntVar(&cfg.workers, "workers", 2, "concurrent writers (`n`)")
	fs.IntVar(&cfg.batch, "batch", 5000, "rows per request (`n`)")
	fs.BoolVar(&cfg.gzip, "gzip", false, "gzip request bodies")
	fs.IntVar(&cfg.limit, "limit", 0, "stop after this many rows (`n`, 0: the whole workload; HTTP targets)")
	fs.DurationVar(&cfg.duration, "duration", 0, "stop each target's load after this `time` (e.g. 30s; 0: the whole workload): no batch is sent after it, those in flight are waited for, and the report counts the points acknowledged")
	fs.DurationVar(&cfg.settle, "settle", 10*time.Second, "every target whose data directory is known (the embedded one, a local Hourglass server, VictoriaMetrics or InfluxDB): after the load (and Hourglass' compaction or flush, VictoriaMetrics' /internal/force_flush), take its size on disk once it has stayed the same for this `time`, checked every second, 5 minutes at most (0: at once)")
	fs.StringVar(&cfg.collection, "collection", "bench_cpu", "collection a Hourglass target is loaded into (`name`)")
	fs.BoolVar(&cfg.replace, "replace", false, "drop --collection first if it exists on a Hourglass target")
	fs.StringVar(&cfg.token, "token", "", "auth `token` for HTTP targets")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print the report as JSON")
	fs.IntVar(&cfg.rollups, "rollups", 0, "Hourglass HTTP targets: this many rollups (`n`, 0 to 2: windows of 1m, then 1h; min, avg, max and count of the workload's first field) kept on --collection during the load; the report adds the time they took to catch up after it")
	fs.IntVar(&cfg.queries, "queries", 0, "Hourglass targets, line protocol: this many clients (`n`) send the workload's queries (bench query's, picked at random) to the collection while it loads, each reading whole answers; the report adds their counts, errors and latencies")
	fs.BoolVar(&cfg.together, "together", false, "HTTP targets: load them all at once, each with its own generator, every load starting once all are ready to send (bodies made with --pregenerate, collections created), rather than one after the other: targets sharing this machine then share its noise, and two builds or settings compare as a ratio (the rates are then of a machine shared by all the loads)")
	fs.Var(&cfg.pregenerate, "pregenerate", "HTTP targets: make every request body of the load before sending the first, holding at most this `size` of them (e.g. 2GiB; a load that needs more fails before sending anything), so that the generator does not share the CPU with a target on this machine during the load, as TSBS loads files made beforehand; off by default: bodies are made as the load goes")
	fs.StringVar(&cfg.htmlOut, "html", "", "also draw points/s and batch latency (p50, p99 per second) over time per target into this HTML `file`")
	return fs
}

func benchTarget(ctx context.Context, cfg *benchConfig, w bench.Workload, src bench.LineSource, order bench.Order, target string, stderr io.Writer,
	sample func(bench.Progress), ready func(context.Context) error) (targetReport, error) {
	rep := targetReport{Target: target}
	var bar *progressbar.ProgressBar
	if isTerminal(stderr) && !cfg.together {
		// A live bar on a terminal: points, points/s, ETA.
		bar = progressbar.NewOptions64(int64(src.Rows()*src.FieldsPerRow()), progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription(target), progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionFullWidth())
		defer func() {
			bar.Finish()
			fmt.Fprintln(stderr)
		}()
	}
	progress := func(p bench.Progress) {
		sample(p)
		if bar != nil {
			// The bar's own rate would count from its first update; show
			// the load's.
			bar.Describe(fmt.Sprintf("%s %.2fM points/s", target, float64(p.Points)/p.Elapsed.Seconds()/1e6))
			bar.ChangeMax64(p.TotalRows * int64(src.FieldsPerRow()))
			bar.Set64(p.Points)
			return
		}
		pct := 100 * float64(p.Rows) / float64(max(p.TotalRows, 1))
		rate := float64(p.Points) / p.Elapsed.Seconds()
		eta := "?"
		if p.Rows > 0 {
			left := time.Duration(float64(p.Elapsed) * float64(p.TotalRows-p.Rows) / float64(p.Rows))
			if cfg.duration > 0 {
				left = max(0, min(left, cfg.duration-p.Elapsed))
			}
			eta = left.Round(time.Second).String()
		}
		fmt.Fprintf(stderr, "[%s] %d/%d rows (%.0f%%), %.2fM points/s, ETA %s, %d retries, %d errors\n",
			target, p.Rows, p.TotalRows, pct, rate/1e6, eta, p.Retrys, p.Errors)
	}
	if cfg.pregenerate > 0 && target != "embedded" {
		fmt.Fprintf(stderr, "[%s] making every request body before the load (--pregenerate)\n", target)
	}
	switch {
	case target == "embedded":
		dir, err := os.MkdirTemp("", "hourglass-bench-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(dir)
		if cfg.limit > 0 {
			return rep, errors.New("--limit applies to HTTP targets; shrink the embedded workload with --scale and --hours")
		}
		if cfg.workload != "cpu-only" {
			return rep, errors.New("the embedded target runs the cpu-only workload; load iot over HTTP")
		}
		// This process's resident size, the workload generated in memory
		// included.
		rss := bench.WatchRSS(os.Getpid(), rssEvery)
		res, err := bench.Ingest(ctx, bench.IngestConfig{Workload: w, Dir: dir + "/data", Workers: cfg.workers, BatchRows: cfg.batch,
			Duration: cfg.duration, Order: order, Progress: progress, Settle: cfg.settle})
		peak, _, rssErr := rss.Stop()
		if err != nil {
			return rep, err
		}
		rep.Rows, rep.Points, rep.Seconds = int64(res.Rows), int64(res.Points), res.Elapsed.Seconds()
		rep.PointsPerSecond, rep.StoppedByDuration = res.PointsPerSecond(), res.Stopped
		if res.Points > 0 {
			rep.BytesPerPoint = res.BytesPerPoint()
			rep.Buckets, rep.BucketsPer1000 = res.Buckets, res.BucketsPer1000()
			rep.setSettled(bench.Settled{Bytes: res.SettledBytes, Waited: res.SettleWaited, TimedOut: res.SettleTimedOut})
			rep.SettleSeconds = (res.FlushElapsed + res.SettleWaited).Seconds()
		}
		if res.CPU > 0 {
			rep.setCPU(res.CPU, res.SettleCPU)
		}
		if rssErr == nil {
			rep.PeakRSSMiB = peak >> 20
		}
		return rep, nil
	case strings.HasPrefix(target, "remote="):
		if cfg.format != "prom" {
			return rep, errors.New("a remote= target needs --format prom")
		}
		u := strings.TrimPrefix(target, "remote=")
		return rep, loadPeer(ctx, cfg, remoteWrite(loadConfig(cfg, src, order, u, progress, ready)), &rep, stderr)
	case strings.HasPrefix(target, "influx="):
		if cfg.format == "prom" {
			return rep, errors.New("an influx= target takes line protocol: use remote=URL with --format prom")
		}
		u := strings.TrimPrefix(target, "influx=")
		return rep, loadPeer(ctx, cfg, loadConfig(cfg, src, order, u, progress, ready), &rep, stderr)
	case strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://"):
		base := strings.TrimRight(target, "/")
		if err := prepareCollection(ctx, base, cfg); err != nil {
			return rep, err
		}
		// Its process, when it runs on this machine: its CPU time and
		// its data directory.
		hg := watchHourglass(base, &rep, stderr)
		if err := prepareRollups(ctx, base, cfg, src); err != nil {
			return rep, err
		}
		lc := loadConfig(cfg, src, order, base+"/write?db="+url.QueryEscape(cfg.collection), progress, ready)
		if cfg.format == "prom" {
			lc = remoteWrite(lc)
			lc.URL = base + "/api/v1/write?collection=" + url.QueryEscape(cfg.collection)
			lc.Bearer = true
		} else if cfg.format == "json" {
			iot, ok := src.(bench.IoT)
			if !ok {
				return rep, errors.New("--format json needs --workload iot")
			}
			coll := base + "/v1/collections/" + url.PathEscape(cfg.collection)
			if err := apiCallBody(ctx, cfg, http.MethodPut, coll, `{"timeseries": {"timeField": "time", "metaField": "sensor"}}`); err != nil {
				return rep, err
			}
			lc.Source, lc.URL, lc.ContentType, lc.Bearer = iot.JSON(), coll+"/documents", "application/x-ndjson", true
		} else if cfg.format != "lp" {
			return rep, fmt.Errorf("--format %q: want lp or json", cfg.format)
		}
		var queried chan []bench.QueryLoadResult
		loadCtx, loaded := context.WithCancel(ctx)
		if cfg.queries > 0 {
			if cfg.format != "lp" {
				loaded()
				return rep, errors.New("--queries needs --format lp: the queries name the line-protocol load's fields")
			}
			qc := bench.QueryConfig{Dialect: bench.Hourglass, Base: base, Collection: cfg.collection, Token: cfg.token}
			if iot, ok := src.(bench.IoT); ok {
				qc.Queries = iot.Queries()
			}
			queried = make(chan []bench.QueryLoadResult, 1)
			go func() {
				// The queries start once the first batch made the
				// collection.
				coll := base + "/v1/collections/" + url.PathEscape(cfg.collection)
				for loadCtx.Err() == nil && apiCall(loadCtx, cfg, http.MethodGet, coll, nil) != nil {
					select {
					case <-loadCtx.Done():
					case <-time.After(50 * time.Millisecond):
					}
				}
				queried <- bench.RunQueryLoad(loadCtx, qc, cfg.queries, 1)
			}()
		}
		res, err := bench.Load(ctx, lc)
		if hg != nil {
			hg.loadDone()
		}
		loaded()
		if queried != nil {
			rep.Queries = <-queried
		}
		fill(&rep, res)
		if err != nil {
			return rep, err
		}
		if cfg.rollups > 0 {
			start := time.Now()
			if err := waitRollups(ctx, base, cfg); err != nil {
				return rep, err
			}
			rep.RollupCatchUpSeconds = max(time.Since(start).Seconds(), 0.001)
		}
		// Settle the size on disk: write every bucket and compact. A load
		// stopped by --duration before any batch was acknowledged created
		// no collection: there is no size to take.
		if rep.Points > 0 {
			var c struct {
				StorageBytes int64 `json:"storageBytes"`
			}
			coll := base + "/v1/collections/" + url.PathEscape(cfg.collection)
			if err := apiCall(ctx, cfg, http.MethodPost, coll+"/compact", &c); err != nil {
				return rep, err
			}
			rep.StorageBytes, rep.BytesPerPoint = c.StorageBytes, float64(c.StorageBytes)/float64(rep.Points)
			var info struct {
				Buckets int64 `json:"buckets"`
			}
			if err := apiCall(ctx, cfg, http.MethodGet, coll, &info); err != nil {
				return rep, err
			}
			rep.Buckets, rep.BucketsPer1000 = info.Buckets, 1000*float64(info.Buckets)/float64(rep.Rows)
			if hg != nil {
				if err := hg.settle(ctx, cfg, &rep, stderr); err != nil {
					return rep, err
				}
			}
		}
		if hg != nil {
			hg.cpu.settleDone(&rep, stderr)
		}
		var st struct {
			Mem struct {
				ResidentPeak int64 `json:"residentPeak"`
			} `json:"mem"`
		}
		if err := apiCall(ctx, cfg, http.MethodGet, base+"/v1/status", &st); err != nil {
			return rep, err
		}
		rep.PeakRSSMiB = st.Mem.ResidentPeak
		return rep, nil
	}
	return rep, fmt.Errorf("unknown target %q: want embedded, http://host:port or influx=URL", target)
}

// loadPeer loads a remote= or influx= target and measures its process
// when it runs on this machine (peerWatch, cpuMeter).
func loadPeer(ctx context.Context, cfg *benchConfig, lc bench.LoadConfig, rep *targetReport, stderr io.Writer) error {
	peer, err := watchPeer(lc.URL)
	if err != nil {
		fmt.Fprintf(stderr, "[%s] peak RSS, bytes/point and CPU time not measured: %v\n", rep.Target, err)
	}
	var cpu *cpuMeter
	if peer != nil {
		cpu = startCPU(peer.srv.PID)
	}
	res, err := bench.Load(ctx, lc)
	fill(rep, res)
	if peer == nil {
		return err
	}
	cpu.loadDone()
	start := time.Now()
	peer.finish(ctx, cfg, lc.URL, err == nil, rep, stderr)
	if rep.DiskBytes > 0 {
		rep.SettleSeconds = time.Since(start).Seconds()
		rep.SettledBytesPerPoint = rep.BytesPerPoint
	}
	cpu.settleDone(rep, stderr)
	return err
}

// hourglassWatch measures the process of a Hourglass server on this
// machine: its CPU time, and the size of its data directory (as
// peerWatch measures a peer's).
type hourglassWatch struct {
	srv    *bench.LocalServer
	cpu    *cpuMeter
	dirs   []string
	before int64
	loaded time.Time // the end of the load
}

// loadDone marks the end of the load.
func (h *hourglassWatch) loadDone() {
	h.cpu.loadDone()
	h.loaded = time.Now()
}

// watchHourglass finds the process listening on base's port and starts
// reading its CPU time. It returns nil, with a note, when there is no
// such process or it cannot be read.
func watchHourglass(base string, rep *targetReport, stderr io.Writer) *hourglassWatch {
	note := func(format string, args ...any) {
		fmt.Fprintf(stderr, "[%s] "+format+"\n", append([]any{rep.Target}, args...)...)
	}
	srv, err := bench.FindLocalServer(base)
	if err != nil {
		note("settled bytes/point and CPU time not measured: %v", err)
		return nil
	}
	h := &hourglassWatch{srv: srv, cpu: startCPU(srv.PID)}
	rep.PID = srv.PID
	kind, dirs, err := srv.DataDirs()
	rep.Server = "?"
	if len(srv.Argv) > 0 {
		rep.Server = filepath.Base(srv.Argv[0])
	}
	if kind != "" {
		rep.Server += ", " + kind
	}
	switch {
	case err != nil:
		note("settled bytes/point not measured: pid %d (%s): %v", srv.PID, rep.Server, err)
	case kind != bench.KindHourglass:
		note("settled bytes/point not measured: pid %d (%s) is not \"hourglass serve\"", srv.PID, rep.Server)
	default:
		if h.before, err = bench.DirsUsage(dirs...); err != nil {
			note("settled bytes/point not measured: %v", err)
		} else {
			h.dirs = dirs
		}
	}
	return h
}

// settle takes the size of the server's data directory once it has
// stayed the same for --settle, after the load's compaction.
func (h *hourglassWatch) settle(ctx context.Context, cfg *benchConfig, rep *targetReport, stderr io.Writer) error {
	if len(h.dirs) == 0 {
		return nil
	}
	if cfg.settle > 0 {
		fmt.Fprintf(stderr, "[%s] waiting for the size of %s (pid %d) to stay the same for %v\n", rep.Target, strings.Join(h.dirs, ", "), h.srv.PID, cfg.settle)
	}
	s, err := bench.SettleUsage(ctx, h.dirs, bench.SettleConfig{Quiet: cfg.settle, Max: maxSettle})
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		fmt.Fprintf(stderr, "[%s] settled bytes/point not measured: %v\n", rep.Target, err)
		return nil
	}
	rep.setSettled(s)
	rep.DataDirs, rep.DiskBytesBefore = h.dirs, h.before
	rep.SettleSeconds = time.Since(h.loaded).Seconds()
	fmt.Fprintf(stderr, "[%s] %d bytes on disk in %s, %v after the compaction\n", rep.Target, s.Bytes, strings.Join(h.dirs, ", "), s.Waited.Round(100*time.Millisecond))
	if s.TimedOut {
		fmt.Fprintf(stderr, "[%s] the size was still changing after %v; measured anyway\n", rep.Target, maxSettle)
	}
	if h.before > 1<<20 {
		fmt.Fprintf(stderr, "[%s] the data directory held %.1f MiB before the load: settled bytes/point counts it too; start the server on an empty one\n",
			rep.Target, float64(h.before)/(1<<20))
	}
	return nil
}

func loadConfig(cfg *benchConfig, src bench.LineSource, order bench.Order, u string, progress func(bench.Progress), ready func(context.Context) error) bench.LoadConfig {
	return bench.LoadConfig{Source: src, URL: u, Workers: cfg.workers, BatchRows: cfg.batch, Gzip: cfg.gzip, Order: order,
		Limit: cfg.limit, Duration: cfg.duration, Token: cfg.token, Progress: progress, Pregenerate: int64(cfg.pregenerate), Ready: ready}
}

// remoteWrite makes lc send Prometheus remote write requests.
func remoteWrite(lc bench.LoadConfig) bench.LoadConfig {
	lc.NewEncode, lc.ContentType, lc.Headers = bench.RemoteWriteEncoder, bench.RemoteWriteContentType, bench.RemoteWriteHeaders
	return lc
}

func fill(rep *targetReport, res bench.LoadResult) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rep.Rows, rep.Points, rep.Seconds = res.Rows, res.Points, res.Elapsed.Seconds()
	rep.PointsPerSecond, rep.MBPerSecond = res.PointsPerSecond(), res.MBPerSecond()
	rep.P50Millis, rep.P99Millis, rep.MaxMillis = ms(res.Latency.P50), ms(res.Latency.P99), ms(res.Latency.Max)
	rep.Retries, rep.Errors, rep.FirstError = res.Retries, res.Errors, res.FirstError
	rep.StoppedByDuration = res.Stopped
	if !res.Start.IsZero() {
		rep.LoadStart = res.Start.UTC().Format(time.RFC3339Nano)
	}
}

// prepareRollups creates the collection and its --rollups before the
// load: windows of 1m and 1h over the workload's first field.
func prepareRollups(ctx context.Context, base string, cfg *benchConfig, src bench.LineSource) error {
	if cfg.rollups == 0 {
		return nil
	}
	if cfg.rollups < 0 || cfg.rollups > 2 {
		return fmt.Errorf("--rollups %d: want 0, 1 or 2", cfg.rollups)
	}
	if cfg.format == "prom" {
		return errors.New("--rollups takes --format lp or json")
	}
	coll := base + "/v1/collections/" + url.PathEscape(cfg.collection)
	opts, field := `{"timeseries": {"timeField": "time", "metaField": "tags"}}`, "usage_user"
	if _, ok := src.(bench.IoT); ok {
		field = "value"
		if cfg.format == "json" {
			opts = `{"timeseries": {"timeField": "time", "metaField": "sensor"}}`
		}
	}
	if err := apiCallBody(ctx, cfg, http.MethodPut, coll, opts); err != nil {
		return err
	}
	for _, w := range []string{"1m", "1h"}[:cfg.rollups] {
		if cfg.replace {
			// A rollup of a collection dropped before stays, and
			// takes the name.
			err := apiCall(ctx, cfg, http.MethodDelete, base+"/v1/collections/"+url.PathEscape(cfg.collection+"_"+w), nil)
			var he *httpStatusError
			if err != nil && !(errors.As(err, &he) && he.status == http.StatusNotFound) {
				return err
			}
		}
		body := fmt.Sprintf(`{"window": %q, "fields": [%q], "funcs": ["min", "avg", "max", "count"]}`, w, field)
		r := coll + "/rollups/" + url.PathEscape(cfg.collection+"_"+w)
		if err := apiCallBody(ctx, cfg, http.MethodPut, r, body); err != nil {
			return fmt.Errorf("rollup %s: %w", w, err)
		}
	}
	return nil
}

// waitRollups waits until the collection's rollups have caught up.
func waitRollups(ctx context.Context, base string, cfg *benchConfig) error {
	u := base + "/v1/collections/" + url.PathEscape(cfg.collection) + "/rollups"
	for {
		var list []struct {
			Pending int    `json:"pendingSeries"`
			Err     string `json:"lastError"`
		}
		if err := apiCall(ctx, cfg, http.MethodGet, u, &list); err != nil {
			return err
		}
		done := true
		for _, r := range list {
			if r.Err != "" {
				return fmt.Errorf("rollup: %s", r.Err)
			}
			done = done && r.Pending == 0
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// prepareCollection makes sure the Hourglass target's collection is new,
// dropping it with --replace.
func prepareCollection(ctx context.Context, base string, cfg *benchConfig) error {
	u := base + "/v1/collections/" + url.PathEscape(cfg.collection)
	err := apiCall(ctx, cfg, http.MethodGet, u, nil)
	var he *httpStatusError
	switch {
	case errors.As(err, &he) && he.status == http.StatusNotFound:
		return nil
	case err != nil:
		return err
	case !cfg.replace:
		return fmt.Errorf("collection %q exists on %s: use --replace to drop it first, or another --collection", cfg.collection, base)
	}
	return apiCall(ctx, cfg, http.MethodDelete, u, nil)
}

type httpStatusError struct {
	status int
	body   string
}

func (e *httpStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

// apiCallBody sends a JSON body and expects a 2xx.
func apiCallBody(ctx context.Context, cfg *benchConfig, method, u, body string) error {
	return apiRequest(ctx, cfg, method, u, strings.NewReader(body), nil)
}

func apiCall(ctx context.Context, cfg *benchConfig, method, u string, out any) error {
	return apiRequest(ctx, cfg, method, u, nil, out)
}

func apiRequest(ctx context.Context, cfg *benchConfig, method, u string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cfg.token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return &httpStatusError{resp.StatusCode, strings.TrimSpace(string(reply))}
	}
	if out != nil {
		return json.Unmarshal(reply, out)
	}
	return nil
}

func printReport(w io.Writer, reports []targetReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tpoints\tseconds\tpoints/s\tMB/s\tbatch p50 ms\tp99 ms\tmax ms\tretries\terrors\tbytes/point\tbuckets/1000\tpeak RSS MiB\tsettled bytes/point\tCPU s/Mpoint\t")
	opt := func(v float64, format string) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.Target, r.Points, r.Seconds, r.PointsPerSecond,
			opt(r.MBPerSecond, "%.1f"), opt(r.P50Millis, "%.1f"), opt(r.P99Millis, "%.1f"), opt(r.MaxMillis, "%.1f"),
			r.Retries, r.Errors, opt(r.BytesPerPoint, "%.3f"), opt(r.BucketsPer1000, "%.2f"), opt(float64(r.PeakRSSMiB), "%.0f"),
			opt(r.SettledBytesPerPoint, "%.3f"), opt(r.CPUSecondsPerMPoint, "%.2f"))
	}
	tw.Flush()
	for _, r := range reports {
		if r.StoppedByDuration {
			fmt.Fprintf(w, "%s: stopped by --duration after %.2f s\n", r.Target, r.Seconds)
		}
		if r.PID != 0 && r.PeakRSSMiB > 0 && r.VmHWMMiB > 0 {
			fmt.Fprintf(w, "%s: peak RSS is the highest VmRSS sampled of pid %d (%s); its VmHWM since it started: %d MiB\n",
				r.Target, r.PID, r.Server, r.VmHWMMiB)
		}
		if r.CPUSeconds > 0 {
			who := fmt.Sprintf("pid %d", r.PID)
			if r.Target == "embedded" {
				who = "this process, the load included"
			}
			fmt.Fprintf(w, "%s: CPU %.2f s during the load, %.2f s in the %.1f s after it until its size settled (%s)\n",
				r.Target, r.CPUSeconds, r.SettleCPUSeconds, r.SettleSeconds, who)
		}
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s: first error: %s\n", r.Target, r.FirstError)
		}
		if len(r.Queries) > 0 {
			fmt.Fprintf(w, "%s: queries during the load:\n%s", r.Target, bench.QueryLoadTable(r.Queries))
		}
		if r.RollupCatchUpSeconds > 0 {
			fmt.Fprintf(w, "%s: rollups caught up %.2f s after the load\n", r.Target, r.RollupCatchUpSeconds)
		}
	}
}

type queryReport struct {
	Target       string  `json:"target"`
	Query        string  `json:"query"`
	Runs         int     `json:"runs"`
	MedianMillis float64 `json:"medianMillis"`
	P99Millis    float64 `json:"p99Millis"`
	Bytes        int     `json:"responseBytes"`
}

func runBenchQuery(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench query", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runs := fs.Int("runs", 20, "measured runs of each query (`n`), after 2 unmeasured ones")
	collection := fs.String("collection", "bench_cpu", "collection the workload was loaded into on a Hourglass target (`name`)")
	token := fs.String("token", "", "auth `token` for the targets")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	only := fs.String("queries", "", "comma-separated `names` of the queries to run (default all of the workload's; cpu-only: "+
		bench.QueryNames(bench.Queries)+"; iot: "+bench.QueryNames(bench.IoT{}.Queries())+")")
	workload := fs.String("workload", "cpu-only", "`name` of the workload loaded: cpu-only (TSBS devops queries) or iot (fleet queries)")
	sensors := fs.Int("sensors", 0, "iot: sensors loaded (`n`; 0: 10,000), as given to bench ingest")
	hours := fs.Int("hours", 24, "iot: hours loaded (`n`, from 2024-01-01), as given to bench ingest")
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		printFlags(fs.Output(), fs)
	}
	targets, err := parseTargets(fs, args)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		fmt.Fprintln(stderr, "no target: name http://host:port, prom=URL or influxql=URL")
		return errUsage
	}
	var queries []bench.Query
	switch *workload {
	case "cpu-only":
		queries = bench.Queries
	case "iot":
		iot := bench.IoT{Sensors: *sensors, Span: time.Duration(*hours) * time.Hour}
		if err := iot.Validate(); err != nil {
			return fmt.Errorf("--sensors, --hours: %w", err)
		}
		queries = iot.Queries()
	default:
		return fmt.Errorf("--workload %q: want cpu-only or iot", *workload)
	}
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
		for _, n := range names {
			if !slices.ContainsFunc(queries, func(q bench.Query) bool { return q.Name == n }) {
				return fmt.Errorf("--queries: no query %q in --workload %s (%s)", n, *workload, bench.QueryNames(queries))
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var reports []queryReport
	for _, t := range targets {
		cfg := bench.QueryConfig{Collection: *collection, Runs: *runs, Token: *token, Queries: queries, Only: names}
		switch {
		case strings.HasPrefix(t, "prom="):
			cfg.Dialect, cfg.Base = bench.PromQL, strings.TrimPrefix(t, "prom=")
		case strings.HasPrefix(t, "influxql="):
			cfg.Dialect, cfg.Base = bench.InfluxQL, strings.TrimPrefix(t, "influxql=")
		case strings.HasPrefix(t, "http://") || strings.HasPrefix(t, "https://"):
			cfg.Dialect, cfg.Base = bench.Hourglass, t
		default:
			return fmt.Errorf("unknown target %q: want http://host:port, prom=URL or influxql=URL", t)
		}
		fmt.Fprintf(stderr, "[%s] %d runs of each query\n", t, *runs)
		res, err := bench.RunQueries(ctx, cfg)
		if err != nil {
			return fmt.Errorf("target %s: %w", t, err)
		}
		for _, r := range res {
			reports = append(reports, queryReport{Target: t, Query: r.Name, Runs: r.Runs,
				MedianMillis: float64(r.Median.Microseconds()) / 1000, P99Millis: float64(r.P99.Microseconds()) / 1000, Bytes: r.Bytes})
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tquery\truns\tmedian ms\tp99 ms\tresponse bytes\t")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%d\t\n", r.Target, r.Query, r.Runs, r.MedianMillis, r.P99Millis, r.Bytes)
	}
	return tw.Flush()
}

// parseTargets parses flags (from the environment, then args) and
// positional targets given in any order.
func parseTargets(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := applyEnv(fs); err != nil {
		return nil, err
	}
	var targets []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) > 0 {
			targets = append(targets, args[0])
			args = args[1:]
		}
	}
	return targets, nil
}

// isTerminal reports whether w is a terminal, where progress is drawn as a
// live bar rather than written as lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
