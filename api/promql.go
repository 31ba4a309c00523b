package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/command/promstore"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// The Prometheus HTTP API's error types (web/api/v1), with the statuses
// Prometheus 2 answers them with: a client of Prometheus reads both.
const (
	promBadData   = "bad_data"
	promExecution = "execution"
	promTimeout   = "timeout"
	promCanceled  = "canceled"
	promInternal  = "internal"
)

// promAPIError is an error of the PromQL endpoints with its errorType and
// status, as Prometheus' API answers it.
type promAPIError struct {
	typ    string
	status int
	err    error
}

func (e *promAPIError) Error() string { return e.err.Error() }
func (e *promAPIError) Unwrap() error { return e.err }

// promBad is a bad_data (400) error.
func promBad(format string, args ...any) *promAPIError {
	return &promAPIError{typ: promBadData, status: http.StatusBadRequest, err: fmt.Errorf(format, args...)}
}

// promParamError is Prometheus' "invalid parameter" error.
func promParamError(err error, param string) *promAPIError {
	return &promAPIError{typ: promBadData, status: http.StatusBadRequest, err: fmt.Errorf("invalid parameter %q: %w", param, err)}
}

// The bounds of a range the client leaves open, Prometheus' own (web/api/v1
// MinTime and MaxTime), so that clients that send them back are understood.
var (
	promMinTime = time.Unix(math.MinInt64/1000+62135596801, 0).UTC()
	promMaxTime = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC()
)

// maxPromPoints bounds the points of one series of a range query, as
// Prometheus does: 60 s steps for a week, or 1 h steps for a year.
const maxPromPoints = 11000

// maxFormBytes bounds a form body (POST application/x-www-form-urlencoded):
// Go's own bound of a form body, which a query's text and its match[]
// fit in many times.
const maxFormBytes = 10 << 20

// promParser parses the selectors of match[] as the engine parses
// queries (its default options).
var promParser = parser.NewParser(parser.Options{})

// newPromEngine is the PromQL engine of the server: Prometheus' own, set
// as Prometheus 2.42 and later run it by default (@ and negative offsets
// on, a 5 minute lookback, a subquery's default step of 1 minute, the
// default evaluation interval), with the server's limits.
func newPromEngine(o *Options) *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{
		Logger:                   o.Logger,
		MaxSamples:               o.PromQLMaxSamples,
		Timeout:                  o.PromQLTimeout,
		LookbackDelta:            5 * time.Minute,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		Parser:                   promParser,
	})
}

// promForm parses the parameters of a PromQL request (the query string,
// and a form body on POST) and returns the collection it reads: the one
// ?collection= names, or "" (every time-series collection) without it.
// A form body is held in the request memory every door shares until the
// request ends (release).
func (s *Server) promForm(w http.ResponseWriter, r *http.Request) (name string, release func(), err error) {
	release = func() {}
	if r.Body != nil && r.Body != http.NoBody {
		limit := min(s.opts.MaxBody, maxFormBytes)
		n := r.ContentLength
		if n < 0 || n > limit {
			n = limit
		}
		budget := s.cmd.Bodies()
		if n > 0 {
			if !budget.TryTake(n) {
				return "", release, errBodyBudget(budget.Max())
			}
			release = func() { budget.Give(n) }
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	if err := r.ParseForm(); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return "", release, &promAPIError{typ: promBadData, status: http.StatusRequestEntityTooLarge,
				err: fmt.Errorf("form body over %d bytes", mb.Limit)}
		}
		return "", release, promBad("error parsing form values: %v", err)
	}
	name = r.FormValue("collection")
	if name == "" {
		return "", release, nil
	}
	if err := timeseries.ValidateName(name); err != nil {
		return "", release, err
	}
	return name, release, nil
}

// promQueryable is the Queryable of the collection name for one request,
// or of every time-series collection when name is "" (merged by
// Prometheus' merge querier, see promstore.AllQueryable): the samples its
// queriers read count in o and against the server's limits (the max
// samples of a query, the request memory), summed over the collections.
func (s *Server) promQueryable(name string, o *command.Op) (storage.Queryable, error) {
	opts := promstore.Options{MaxSamples: int64(s.opts.PromQLMaxSamples), Memory: s.cmd.Bodies(),
		Read: &o.Docs}
	if name == "" {
		return promstore.NewAll(s.cmd, opts)
	}
	return promstore.New(s.cmd, name, opts)
}

// handlePromInstant serves GET|POST /api/v1/query: one PromQL expression
// evaluated at time (default now).
func (s *Server) handlePromInstant(w http.ResponseWriter, r *http.Request) {
	name, release, err := s.promForm(w, r)
	defer release()
	if err != nil {
		s.writePromAPIError(w, r, err)
		return
	}
	ts, err := promTimeParam(r, "time", s.opts.Now())
	if err != nil {
		s.writePromAPIError(w, r, promParamError(err, "time"))
		return
	}
	s.promEval(w, r, name, "promql query", func(ctx context.Context, q storage.Queryable, opts promql.QueryOpts) (promql.Query, error) {
		return s.promEngine.NewInstantQuery(ctx, q, opts, r.FormValue("query"), ts)
	})
}

// handlePromRange serves GET|POST /api/v1/query_range: one PromQL
// expression evaluated at every step from start to end.
func (s *Server) handlePromRange(w http.ResponseWriter, r *http.Request) {
	name, release, err := s.promForm(w, r)
	defer release()
	if err != nil {
		s.writePromAPIError(w, r, err)
		return
	}
	start, err := promTime(r.FormValue("start"))
	if err != nil {
		s.writePromAPIError(w, r, promParamError(err, "start"))
		return
	}
	end, err := promTime(r.FormValue("end"))
	if err != nil {
		s.writePromAPIError(w, r, promParamError(err, "end"))
		return
	}
	if end.Before(start) {
		s.writePromAPIError(w, r, promParamError(errors.New("end timestamp must not be before start time"), "end"))
		return
	}
	step, err := promDuration(r.FormValue("step"))
	if err != nil {
		s.writePromAPIError(w, r, promParamError(err, "step"))
		return
	}
	if step <= 0 {
		s.writePromAPIError(w, r, promParamError(errors.New("zero or negative query resolution step widths are not accepted. Try a positive integer"), "step"))
		return
	}
	if end.Sub(start)/step > maxPromPoints {
		s.writePromAPIError(w, r, promBad("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"))
		return
	}
	s.promEval(w, r, name, "promql query_range", func(ctx context.Context, q storage.Queryable, opts promql.QueryOpts) (promql.Query, error) {
		return s.promEngine.NewRangeQuery(ctx, q, opts, r.FormValue("query"), start, end, step)
	})
}

// promEval runs the query newQuery makes over the collection name and
// replies with its result, listed by currentop (desc) while it runs.
func (s *Server) promEval(w http.ResponseWriter, r *http.Request, name, desc string,
	newQuery func(context.Context, storage.Queryable, promql.QueryOpts) (promql.Query, error)) {
	ctx := r.Context()
	if v := r.FormValue("timeout"); v != "" {
		d, err := promDuration(v)
		if err != nil {
			s.writePromAPIError(w, r, promParamError(err, "timeout"))
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var lookback time.Duration
	if v := r.FormValue("lookback_delta"); v != "" {
		d, err := promDuration(v)
		if err != nil {
			s.writePromAPIError(w, r, promBad("error parsing lookback delta duration: %v", err))
			return
		}
		lookback = d
	}
	o := s.beginDoorOp(command.Prometheus, "query", name, r, desc)
	defer s.endOp(o)
	q, err := s.promQueryable(name, o)
	if err != nil {
		s.writePromAPIError(w, r, err)
		return
	}
	qry, err := newQuery(ctx, q, promql.NewPrometheusQueryOpts(false, lookback, nil))
	if err != nil {
		s.writePromAPIError(w, r, promQueryError(err))
		return
	}
	defer qry.Close()
	// A turn among the evaluations, once the query parsed, waited for
	// within the query's time, as Prometheus' query queue is.
	wait, cancel := context.WithTimeout(ctx, s.opts.PromQLTimeout)
	select {
	case s.promSlots <- struct{}{}:
		cancel()
		defer func() { <-s.promSlots }()
	case <-wait.Done():
		cancel()
		if errors.Is(ctx.Err(), context.Canceled) {
			s.writePromAPIError(w, r, promql.ErrQueryCanceled("query queue"))
		} else {
			s.writePromAPIError(w, r, promql.ErrQueryTimeout("query queue"))
		}
		return
	}
	if s.promStarted != nil {
		s.promStarted()
	}
	s.metrics.opQuery.Add(1)
	res := qry.Exec(ctx)
	if res.Err != nil {
		s.writePromAPIError(w, r, res.Err)
		return
	}
	warnings, infos := res.Warnings.AsStrings(r.FormValue("query"), 10, 10)
	n := promResultSamples(res.Value)
	s.metrics.docsReturned.Add(n)
	s.metrics.returned.Add(float64(n))
	if err := writePromResult(w, res.Value, warnings, infos); err != nil {
		s.abort(r, err)
	}
}

// promQueryError is the error of a query that cannot be made: a parse
// error is bad_data, as Prometheus answers it.
func promQueryError(err error) error {
	var (
		eqt promql.ErrQueryTimeout
		eqc promql.ErrQueryCanceled
	)
	if errors.As(err, &eqt) || errors.As(err, &eqc) {
		return err
	}
	return promParamError(err, "query")
}

// handlePromSeries serves GET|POST /api/v1/series: the label sets of the
// series match[] selects (at least one) with samples in [start, end].
func (s *Server) handlePromSeries(w http.ResponseWriter, r *http.Request) {
	s.promLabelRequest(w, r, "series", func(ctx context.Context, q storage.Querier, start, end int64, sets [][]*labels.Matcher) (any, error) {
		if len(sets) == 0 {
			return nil, promBad("no match[] parameter provided")
		}
		hints := &storage.SelectHints{Start: start, End: end, Func: "series"}
		var all []labels.Labels
		for _, ms := range sets {
			ss := q.Select(ctx, true, hints, ms...)
			for ss.Next() {
				all = append(all, ss.At().Labels())
			}
			if err := ss.Err(); err != nil {
				return nil, err
			}
		}
		slices.SortFunc(all, labels.Compare)
		all = slices.CompactFunc(all, labels.Equal)
		if all == nil {
			all = []labels.Labels{}
		}
		return all, nil
	})
}

// handlePromLabels serves GET|POST /api/v1/labels: the label names of the
// series with samples in [start, end] (of those match[] selects, when
// given).
func (s *Server) handlePromLabels(w http.ResponseWriter, r *http.Request) {
	s.promLabelRequest(w, r, "labels", func(ctx context.Context, q storage.Querier, _, _ int64, sets [][]*labels.Matcher) (any, error) {
		return promLabelUnion(sets, func(ms []*labels.Matcher) ([]string, error) {
			names, _, err := q.LabelNames(ctx, nil, ms...)
			return names, err
		})
	})
}

// handlePromLabelValues serves GET /api/v1/label/{name}/values: the
// values of label name among the series with samples in [start, end] (of
// those match[] selects, when given).
func (s *Server) handlePromLabelValues(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if strings.HasPrefix(name, "U__") {
		name = model.UnescapeName(name, model.ValueEncodingEscaping)
	}
	if name == "" || !utf8.ValidString(name) {
		s.writePromAPIError(w, r, promBad("invalid label name: %q", name))
		return
	}
	s.promLabelRequest(w, r, "label values", func(ctx context.Context, q storage.Querier, _, _ int64, sets [][]*labels.Matcher) (any, error) {
		return promLabelUnion(sets, func(ms []*labels.Matcher) ([]string, error) {
			vals, _, err := q.LabelValues(ctx, name, nil, ms...)
			return vals, err
		})
	})
}

// promLabelUnion is the sorted union of what get returns for each matcher
// set, or for none when there is no set.
func promLabelUnion(sets [][]*labels.Matcher, get func([]*labels.Matcher) ([]string, error)) ([]string, error) {
	if len(sets) == 0 {
		sets = [][]*labels.Matcher{nil}
	}
	out := []string{}
	for _, ms := range sets {
		vals, err := get(ms)
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// promLabelRequest parses what the series and label endpoints share
// (start and end, default the whole time; match[]; limit) and replies
// with what answer returns for a Querier of the range, truncated to limit.
func (s *Server) promLabelRequest(w http.ResponseWriter, r *http.Request, desc string,
	answer func(ctx context.Context, q storage.Querier, start, end int64, sets [][]*labels.Matcher) (any, error)) {
	name, release, err := s.promForm(w, r)
	defer release()
	if err != nil {
		s.writePromAPIError(w, r, err)
		return
	}
	limit := 0
	if v := r.FormValue("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 0 {
			s.writePromAPIError(w, r, promParamError(errors.New("limit must be a non-negative integer"), "limit"))
			return
		}
	}
	start, err := promTimeParam(r, "start", promMinTime)
	if err != nil {
		s.writePromAPIError(w, r, promParamError(err, "start"))
		return
	}
	end, err := promTimeParam(r, "end", promMaxTime)
	if err != nil {
		s.writePromAPIError(w, r, promParamError(err, "end"))
		return
	}
	sets, err := promMatcherSets(r.Form["match[]"])
	if err != nil {
		s.writePromAPIError(w, r, err)
		return
	}
	o := s.beginDoorOp(command.Prometheus, "query", name, r, desc)
	defer s.endOp(o)
	if s.promStarted != nil {
		s.promStarted()
	}
	s.metrics.opQuery.Add(1)
	store, err := s.promQueryable(name, o)
	if err != nil {
		s.writePromAPIError(w, r, err)
		return
	}
	mint, maxt := start.UnixMilli(), end.UnixMilli()
	q, err := store.Querier(mint, maxt)
	if err != nil {
		s.writePromAPIError(w, r, err)
		return
	}
	defer q.Close()
	data, err := answer(r.Context(), q, mint, maxt, sets)
	if err != nil {
		s.writePromAPIError(w, r, err)
		return
	}
	var warnings []string
	switch d := data.(type) {
	case []string:
		if limit > 0 && len(d) > limit {
			data, warnings = d[:limit], []string{"results truncated due to limit"}
		}
	case []labels.Labels:
		if limit > 0 && len(d) > limit {
			d, warnings = d[:limit], []string{"results truncated due to limit"}
		}
		writePromLabelSets(w, d, warnings)
		return
	}
	writeJSON(w, http.StatusOK, promSuccess{Status: "success", Data: data, Warnings: warnings})
}

// promMatcherSets parses match[] selectors; each must hold a matcher that
// does not match the empty string, as Prometheus asks, so that a selector
// cannot select every series by accident.
func promMatcherSets(selectors []string) ([][]*labels.Matcher, error) {
	var sets [][]*labels.Matcher
	for _, sel := range selectors {
		ms, err := promParser.ParseMetricSelector(sel)
		if err != nil {
			return nil, promParamError(err, "match[]")
		}
		if !slices.ContainsFunc(ms, func(m *labels.Matcher) bool { return !m.Matches("") }) {
			return nil, promBad("match[] must contain at least one non-empty matcher")
		}
		sets = append(sets, ms)
	}
	return sets, nil
}

// handlePromMetadata serves GET /api/v1/metadata: Hourglass keeps no
// metric metadata (remote write's metadata is accepted and not stored), so
// the answer is the empty object Prometheus gives when it knows none.
func (s *Server) handlePromMetadata(w http.ResponseWriter, r *http.Request) {
	_, release, err := s.promForm(w, r)
	defer release()
	if err != nil {
		s.writePromAPIError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, promSuccess{Status: "success", Data: map[string]any{}})
}

// promBuildInfo is the data of /api/v1/status/buildinfo, in Prometheus'
// shape.
type promBuildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Branch    string `json:"branch"`
	BuildUser string `json:"buildUser"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
}

// handlePromBuildInfo serves GET /api/v1/status/buildinfo. The version is
// that of the Prometheus whose engine evaluates PromQL here (clients such
// as Grafana choose the features they use by it); the revision and branch
// say which Hourglass answers.
func (s *Server) handlePromBuildInfo(w http.ResponseWriter, r *http.Request) {
	info := promBuildInfo{Version: promEngineVersion(), Revision: s.opts.Build.Revision,
		Branch: "hourglass-" + s.opts.Version, BuildUser: "hourglass", GoVersion: runtime.Version()}
	if !s.opts.Build.Time.IsZero() {
		info.BuildDate = s.opts.Build.Time.UTC().Format("20060102-15:04:05")
	}
	writeJSON(w, http.StatusOK, promSuccess{Status: "success", Data: info})
}

// promEngineVersion is the version of Prometheus whose engine the binary
// holds: module version v0.MMM.P of github.com/prometheus/prometheus is
// Prometheus M.MM.P (v0.316.0 is 3.16.0).
func promEngineVersion() string {
	const fallback = "3.16.0" // the module go.mod requires
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fallback
	}
	for _, m := range bi.Deps {
		if m.Path != "github.com/prometheus/prometheus" {
			continue
		}
		parts := strings.SplitN(strings.TrimPrefix(m.Version, "v"), ".", 3)
		if len(parts) != 3 || parts[0] != "0" {
			return fallback
		}
		minor, err := strconv.Atoi(parts[1])
		if err != nil || minor < 100 {
			return fallback
		}
		patch, _, _ := strings.Cut(parts[2], "-")
		return fmt.Sprintf("%d.%d.%s", minor/100, minor%100, patch)
	}
	return fallback
}

// promSuccess is a successful reply of Prometheus' HTTP API.
type promSuccess struct {
	Status   string   `json:"status"`
	Data     any      `json:"data"`
	Warnings []string `json:"warnings,omitempty"`
	Infos    []string `json:"infos,omitempty"`
}

// writePromAPIError replies with err as Prometheus' HTTP API does: its
// errorType and status from the engine's errors (a timeout, a cancel,
// too many samples, an evaluation error), from the storage's (the one
// table, command.Classify: a fault is internal, 500), or from the
// request (bad_data, 400).
func (s *Server) writePromAPIError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		pe  *promAPIError
		se  *promstore.StorageError
		eqt promql.ErrQueryTimeout
		eqc promql.ErrQueryCanceled
		ets promql.ErrTooManySamples
	)
	switch {
	case errors.As(err, &pe):
	case errors.As(err, &eqt), errors.Is(err, context.DeadlineExceeded):
		pe = &promAPIError{typ: promTimeout, status: http.StatusServiceUnavailable, err: err}
	case errors.As(err, &eqc), errors.Is(err, context.Canceled):
		pe = &promAPIError{typ: promCanceled, status: http.StatusServiceUnavailable, err: err}
	case errors.As(err, &ets):
		pe = &promAPIError{typ: promExecution, status: http.StatusUnprocessableEntity, err: err}
	case errors.Is(err, promstore.ErrSampleLimit):
		pe = &promAPIError{typ: promExecution, status: http.StatusUnprocessableEntity,
			err: fmt.Errorf("query processing would load too many samples into memory in query execution: the query reads more than --promql-max-samples (%d); narrow its selectors or time range", s.opts.PromQLMaxSamples)}
	case errors.Is(err, promstore.ErrMemoryLimit):
		pe = &promAPIError{typ: promExecution, status: http.StatusUnprocessableEntity,
			err: fmt.Errorf("%v: the samples the query reads would take more than --max-body-memory (%d bytes); narrow its selectors or time range", err, s.cmd.Bodies().Max())}
	case errors.Is(err, promstore.ErrMemoryBusy):
		s.writePromError(w, r, errBodyBudget(s.cmd.Bodies().Max()))
		return
	case errors.As(err, &se):
		s.writePromError(w, r, se.Err)
		return
	case isPromEvalError(err):
		// The engine's own error: the query is valid, its evaluation is not
		// (a many-to-many match, a duplicate label set).
		pe = &promAPIError{typ: promExecution, status: http.StatusUnprocessableEntity, err: err}
	default:
		s.writePromError(w, r, err)
		return
	}
	writeJSON(w, pe.status, promError{Status: "error", ErrorType: pe.typ, Error: pe.err.Error()})
}

// isPromEvalError reports whether err is the engine's own, not one of the
// storage or of the server (which carry types of their own).
func isPromEvalError(err error) bool {
	var me *mongoerr.Error
	var he *httpError
	return !errors.As(err, &me) && !errors.As(err, &he) && !errors.Is(err, timeseries.ErrClosed)
}

// promTimeParam is the time of parameter name, or def when absent.
func promTimeParam(r *http.Request, name string, def time.Time) (time.Time, error) {
	v := r.FormValue(name)
	if v == "" {
		return def, nil
	}
	t, err := promTime(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid time value for '%s': %w", name, err)
	}
	return t, nil
}

// promTime parses a time as Prometheus' API does: seconds since the epoch
// (a float, to the millisecond) or RFC 3339.
func promTime(s string) (time.Time, error) {
	if t, err := strconv.ParseFloat(s, 64); err == nil {
		sec, ns := math.Modf(t)
		ns = math.Round(ns*1000) / 1000
		if math.IsNaN(t) || math.IsInf(t, 0) || sec > math.MaxInt64/1e3 || sec < math.MinInt64/1e3 {
			return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
		}
		return time.Unix(int64(sec), int64(ns*float64(time.Second))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	switch s {
	case promMinTime.Format(time.RFC3339Nano):
		return promMinTime, nil
	case promMaxTime.Format(time.RFC3339Nano):
		return promMaxTime, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

// promDuration parses a duration as Prometheus' API does: seconds (a
// float) or a Prometheus duration (5m, 1h30m).
func promDuration(s string) (time.Duration, error) {
	if d, err := strconv.ParseFloat(s, 64); err == nil {
		ts := d * float64(time.Second)
		if math.IsNaN(ts) || ts >= float64(math.MaxInt64) || ts < float64(math.MinInt64) {
			return 0, fmt.Errorf("cannot parse %q to a valid duration. It overflows int64", s)
		}
		return time.Duration(ts), nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
}

// promResultSamples counts the samples of a result.
func promResultSamples(v parser.Value) int64 {
	switch v := v.(type) {
	case promql.Matrix:
		var n int64
		for _, s := range v {
			n += int64(len(s.Floats) + len(s.Histograms))
		}
		return n
	case promql.Vector:
		return int64(len(v))
	}
	return 1
}
