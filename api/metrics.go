package api

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hourglassdb/hourglass/timeseries"
)

// metrics are the server's counters: Prometheus metrics for /metrics and
// plain counters for /v1/status, which reports them in serverStatus shape.
type metrics struct {
	suspended *prometheus.GaugeVec
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	inserted  *prometheus.CounterVec
	refused   *prometheus.CounterVec
	deleted   prometheus.Counter
	returned  prometheus.Counter
	bodyIn    prometheus.Counter

	// serverStatus opcounters and document metrics.
	opInsert, opQuery, opDelete, opCommand  atomic.Int64
	docsInserted, docsDeleted, docsReturned atomic.Int64
}

func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hourglass_http_requests_total", Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hourglass_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"}),
		inserted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hourglass_inserted_measurements_total", Help: "Measurements stored, by ingest protocol.",
		}, []string{"protocol"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hourglass_refused_measurements_total", Help: "Measurements or lines refused as invalid, by ingest protocol.",
		}, []string{"protocol"}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hourglass_deleted_measurements_total", Help: "Measurements removed by delete requests.",
		}),
		returned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hourglass_returned_measurements_total", Help: "Measurements returned by find requests.",
		}),
		bodyIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hourglass_ingest_body_bytes_total", Help: "Ingest request body bytes after decompression.",
		}),
	}
	suspended := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hourglass_ttl_suspended",
		Help: "1 when a time-series collection's expiry is suspended by data outside 1970..2038, else 0.",
	}, []string{"collection"})
	m.suspended = suspended
	cs := []prometheus.Collector{m.requests, m.latency, m.inserted, m.refused, m.deleted, m.returned, m.bodyIn,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hourglass_ingest_requests_in_progress", Help: "Ingest requests holding a slot.",
		}, func() float64 { return float64(s.cmd.Ingest().InUse()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hourglass_ingest_requests_queued", Help: "Ingest requests waiting for a slot.",
		}, func() float64 { return float64(s.cmd.Ingest().Waiting()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hourglass_operations_in_progress", Help: "Operations listed by /v1/currentop.",
		}, func() float64 { return float64(s.cmd.Ops().Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hourglass_uptime_seconds", Help: "Seconds since the server started.",
		}, func() float64 { return s.opts.Now().Sub(s.started).Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hourglass_ttl_deleted_measurements_total", Help: "Measurements deleted by the TTL monitor.",
		}, func() float64 { return float64(s.ttlStats().DeletedDocuments) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hourglass_ttl_deleted_buckets_total", Help: "Buckets deleted by the TTL monitor.",
		}, func() float64 { return float64(s.ttlStats().DeletedBuckets) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hourglass_ttl_passes_total", Help: "TTL monitor passes.",
		}, func() float64 { return float64(s.ttlStats().Passes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hourglass_ttl_subpasses_total", Help: "TTL monitor sub-passes.",
		}, func() float64 { return float64(s.ttlStats().SubPasses) }),
		suspended,
	}
	if s.opts.DB != nil {
		cs = append(cs, newEngineCollector(s.opts.DB))
	}
	if _, ok := reg.(*prometheus.Registry); ok {
		cs = append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// instrument counts requests and their latency by route pattern (never by
// raw path, which would make the label set unbounded).
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			route := "unknown"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
			}
			st := rec.status
			if st == 0 {
				st = http.StatusOK
			}
			s.metrics.requests.WithLabelValues(route, r.Method, strconv.Itoa(st)).Inc()
			s.metrics.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(rec, r)
	})
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if colls, err := s.db.ListCollections(r.Context()); err == nil {
		s.metrics.suspended.Reset()
		for _, c := range colls {
			if c.Options.TimeSeries != nil {
				v := 0.0
				if c.OutOfRangeBuckets > 0 {
					v = 1
				}
				s.metrics.suspended.WithLabelValues(c.Name).Set(v)
			}
		}
	}
	promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{ErrorLog: nil}).ServeHTTP(w, r)
}

// engineCollector reports the engine's counters and the store's, reading
// each set once a scrape (the store's from Pebble's metrics, which a read
// of each of them apart took six times).
type engineCollector struct {
	db     *timeseries.DB
	engine []statMetric[timeseries.EngineStats]
	store  []statMetric[timeseries.StoreStats]
}

// statMetric is a metric whose value is read from a set of statistics S.
type statMetric[S any] struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
	v    func(S) float64
}

func stat[S any](name, help string, kind prometheus.ValueType, v func(S) float64) statMetric[S] {
	return statMetric[S]{prometheus.NewDesc(name, help, nil, nil), kind, v}
}

func newEngineCollector(db *timeseries.DB) *engineCollector {
	type e = timeseries.EngineStats
	type st = timeseries.StoreStats
	const counter, gauge = prometheus.CounterValue, prometheus.GaugeValue
	return &engineCollector{db: db,
		engine: []statMetric[e]{
			stat("hourglass_checkpoints_total", "Checkpoints written.", counter, func(s e) float64 { return float64(s.Checkpoints) }),
			stat("hourglass_buckets_sealed_for_memory_total", "Open buckets sealed early to keep the buckets in memory within --memory-budget.",
				counter, func(s e) float64 { return float64(s.SealedForMemory) }),
			stat("hourglass_buckets_sealed_idle_total", "Open buckets sealed by a checkpoint after a checkpoint interval without writes.",
				counter, func(s e) float64 { return float64(s.SealedIdle) }),
			stat("hourglass_buckets_merged_total", "Small buckets merge passes removed by joining them with their neighbours.",
				counter, func(s e) float64 { return float64(s.Merged) }),
			stat("hourglass_merge_marks_dropped_total", "Small buckets left unmerged because their collection's merge marks were full.",
				counter, func(s e) float64 { return float64(s.MergeMarksDropped) }),
		},
		store: []statMetric[st]{
			stat("hourglass_store_flushed_bytes_total", "Bytes the store's memtable flushes wrote to tables.",
				counter, func(s st) float64 { return float64(s.FlushedBytes) }),
			stat("hourglass_store_compacted_bytes_total", "Bytes the store's compactions wrote to tables.",
				counter, func(s st) float64 { return float64(s.CompactedBytes) }),
			stat("hourglass_store_compactions_total", "Compactions the store ran.", counter, func(s st) float64 { return float64(s.Compactions) }),
			stat("hourglass_store_read_amplification", "Table runs a read of the store may look in: level 0's files and each non-empty level below.",
				gauge, func(s st) float64 { return float64(s.ReadAmp) }),
			stat("hourglass_store_level0_files", "Files in the store's level 0.", gauge, func(s st) float64 { return float64(s.L0Files) }),
			stat("hourglass_store_disk_bytes", "Space the store takes on disk.", gauge, func(s st) float64 { return float64(s.DiskBytes) }),
		},
	}
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	describeStats(ch, c.engine)
	describeStats(ch, c.store)
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	collectStats(ch, c.engine, c.db.Stats())
	collectStats(ch, c.store, c.db.StoreStats())
}

func describeStats[S any](ch chan<- *prometheus.Desc, ms []statMetric[S]) {
	for _, m := range ms {
		ch <- m.desc
	}
}

// collectStats sends the metrics ms of one reading s.
func collectStats[S any](ch chan<- prometheus.Metric, ms []statMetric[S], s S) {
	for _, m := range ms {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.v(s))
	}
}
