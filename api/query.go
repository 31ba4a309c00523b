package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/hourglassdb/hourglass/api/render"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// parseFilter parses the "filter" member of a request body.
func parseFilter(v any) (*partialfilter.Filter, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("'filter' must be a JSON object")
	}
	return partialfilter.Parse(m)
}

// intValue reads a non-negative integer request member.
func intValue(name string, v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, badRequest("'%s' must be a number", name)
	}
	i, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<62 {
			return 0, badRequest("'%s' must be an integer; got %s", name, n)
		}
		i = int64(f)
	}
	if i < 0 {
		return 0, badRequest("'%s' must not be negative; got %d", name, i)
	}
	return i, nil
}

// negotiate picks the output format from Accept, refusing with 406.
func negotiate(r *http.Request) (render.Format, error) {
	f, err := render.Negotiate(r.Header.Get("Accept"))
	if err != nil {
		return f, newHTTPError(http.StatusNotAcceptable, 2, "%v", err)
	}
	return f, nil
}

// timeSeriesCollection returns the options of a time-series collection.
func (s *Server) timeSeriesCollection(r *http.Request, name string) (timeseries.CollectionInfo, error) {
	info, err := s.db.DescribeShallow(r.Context(), name)
	if err != nil {
		return info, err
	}
	if info.Options.TimeSeries == nil {
		return info, badRequest("collection %q is a plain collection; this endpoint serves time-series collections", name)
	}
	return info, nil
}

// queryRequest is what find and aggregate read first: the collection, the
// output format and the JSON request.
type queryRequest struct {
	name   string
	format render.Format
	raw    map[string]any
	text   []byte // the JSON request, for members whose order matters
}

// readQuery reads the parts of a find or aggregate request common to both,
// answering the error itself when one is wrong.
func (s *Server) readQuery(w http.ResponseWriter, r *http.Request) (q queryRequest, ok bool) {
	var err error
	if q.name, err = collectionName(r); err == nil {
		if q.format, err = negotiate(r); err == nil {
			q.text, err = s.readJSONRequest(w, r, maxCommandBody, &q.raw)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return q, false
	}
	return q, true
}

func (s *Server) handleFind(w http.ResponseWriter, r *http.Request) {
	if !s.secondaryRead(w, r) {
		return
	}
	q, ok := s.readQuery(w, r)
	if !ok {
		return
	}
	f, explain, err := parseFind(q.name, q.raw, q.text)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Text carries each value's type (Extended JSON); Arrow readers get
	// columns they can compute on.
	f.ExactTypes = q.format != render.Arrow
	s.metrics.opQuery.Add(1)
	o := s.beginOp("query", q.name, r, "find")
	defer s.endOp(o)
	cur, err := s.cmd.Find(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer cur.Close()
	switch {
	case cur.Documents():
		s.findPlain(w, r, q, f, cur, o, explain)
		return
	case explain:
		s.writeError(w, r, badRequest("'explain' serves plain collections; %q is a time-series collection", q.name))
		return
	}
	format := q.format
	// The first record is read before the status is sent, so that an error
	// found there (a memory limit) is answered as one.
	more := cur.Next()
	if !more && cur.Err() != nil {
		s.writeError(w, r, cur.Err())
		return
	}
	n, err := s.stream(w, format, cur.Schema(), render.Options{}, func(yield func(arrow.Record) error) error {
		for ; more; more = cur.Next() {
			rec := cur.Record()
			o.Docs.Add(rec.NumRows())
			if err := yield(rec); err != nil {
				return err
			}
		}
		return cur.Err()
	})
	s.metrics.docsReturned.Add(n)
	s.metrics.returned.Add(float64(n))
	if err != nil {
		s.abort(r, err)
	}
}

// stream writes the records produced by each to w in format, flushing after
// every record. It returns the rows written. An error after the first byte
// cannot change the status any more: the caller aborts the response so the
// client sees a truncated body rather than a complete-looking one.
func (s *Server) stream(w http.ResponseWriter, format render.Format, schema *arrow.Schema, opts render.Options,
	each func(yield func(arrow.Record) error) error) (int64, error) {
	w.Header().Set("Content-Type", format.ContentType())
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// The status goes with the first bytes: a reply the writer keeps
	// whole until its end goes out with its length.
	out, err := render.NewWriter(replyWriter{w}, format, schema, opts)
	if err != nil {
		return 0, err
	}
	var rows int64
	err = each(func(rec arrow.Record) error {
		rows += rec.NumRows()
		return out.Write(rec)
	})
	if err != nil {
		return rows, err
	}
	return rows, out.Close()
}

// replyWriter is a response for render.NewWriter: it can flush, and set
// the length of a reply written whole.
type replyWriter struct{ http.ResponseWriter }

func (w replyWriter) SetLength(n int) { w.Header().Set("Content-Length", strconv.Itoa(n)) }

func (w replyWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// abort ends a response whose body has started, after an error.
func (s *Server) abort(r *http.Request, err error) {
	if !isClientGone(err) {
		s.log.Error("response aborted", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	panic(http.ErrAbortHandler)
}

// aggregateRequest is the body of POST .../aggregate:
//
//	{"filter": {...}, "window": "1m", "origin": <date>, "groupBy": "sensor" | "sensor.id" | null,
//	 "fields": ["temp"], "funcs": ["min", "avg", "max"], "archive": true}
func parseAggregateRequest(raw map[string]any, ts *model.TimeSeriesOptions) (timeseries.AggregateOptions, error) {
	var opts timeseries.AggregateOptions
	var err error
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		v := raw[k]
		switch k {
		case "filter":
			if opts.Filter, err = parseFilter(v); err != nil {
				return opts, err
			}
		case "window":
			if opts.Window, err = parseWindow(v); err != nil {
				return opts, err
			}
		case "origin":
			t, err := parseDateValue(v)
			if err != nil {
				return opts, badRequest("'origin' must be a date ({\"$date\": ...} or an RFC 3339 string): %v", err)
			}
			opts.Origin = t
		case "groupBy":
			switch g := v.(type) {
			case nil:
				opts.Ungrouped = true
			case string:
				opts.GroupBy = g
			default:
				return opts, badRequest("'groupBy' must be a path in the metaField or null")
			}
		case "fields":
			if opts.Fields, err = stringList("fields", v); err != nil {
				return opts, err
			}
		case "funcs":
			names, err := stringList("funcs", v)
			if err != nil {
				return opts, err
			}
			for _, n := range names {
				opts.Funcs = append(opts.Funcs, timeseries.AggFunc(n))
			}
		case "archive":
			b, ok := v.(bool)
			if !ok {
				return opts, badRequest("'archive' must be true or false")
			}
			opts.Archive = b
		default:
			return opts, badRequest("unknown aggregate option %q; accepted: filter, window, origin, groupBy, fields, funcs, archive", k)
		}
	}
	if opts.Window == 0 {
		return opts, badRequest("'window' is required, e.g. \"1m\" or 60 (seconds)")
	}
	if ts.MetaField == "" {
		opts.Ungrouped = true
	}
	return opts, nil
}

func stringList(name string, v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, badRequest("'%s' must be an array of strings", name)
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, badRequest("'%s' must be an array of strings", name)
		}
		out = append(out, s)
	}
	return out, nil
}

// parseWindow reads a window: a Go duration string ("90s", "1h30m"), with
// "d" for days also accepted, or a number of seconds.
func parseWindow(v any) (time.Duration, error) {
	var d time.Duration
	switch x := v.(type) {
	case string:
		s := x
		if days, ok := strings.CutSuffix(s, "d"); ok {
			n, err := strconv.ParseFloat(days, 64)
			if err != nil || n <= 0 || n > 366*100 {
				return 0, badRequest("'window' %q is not a duration", x)
			}
			d = time.Duration(n * 24 * float64(time.Hour))
			break
		}
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, badRequest("'window' %q is not a duration such as \"1m\" or \"1h\"", x)
		}
	case json.Number:
		f, err := x.Float64()
		if err != nil || f > float64(math.MaxInt64)/1e9 {
			return 0, badRequest("'window' %s is not a number of seconds", x)
		}
		d = time.Duration(f * 1e9)
	default:
		return 0, badRequest("'window' must be a duration string such as \"1m\" or a number of seconds")
	}
	if d <= 0 {
		return 0, badRequest("'window' must be positive")
	}
	return d, nil
}

// parseDateValue reads a date request member: Extended JSON {"$date": ...}
// or, as a convenience, an RFC 3339 string.
func parseDateValue(v any) (time.Time, error) {
	if s, ok := v.(string); ok {
		return time.Parse(time.RFC3339Nano, s)
	}
	conv, err := partialfilter.FromExtJSON(v)
	if err != nil {
		return time.Time{}, err
	}
	t, ok := conv.(time.Time)
	if !ok {
		return time.Time{}, errors.New("not a date")
	}
	return t, nil
}

func (s *Server) handleAggregate(w http.ResponseWriter, r *http.Request) {
	if !s.secondaryRead(w, r) {
		return
	}
	q, ok := s.readQuery(w, r)
	if !ok {
		return
	}
	if _, ok := q.raw["pipeline"]; ok {
		s.aggregatePipeline(w, r, q)
		return
	}
	info, err := s.timeSeriesCollection(r, q.name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	name, format, raw := q.name, q.format, q.raw
	opts, err := parseAggregateRequest(raw, info.Options.TimeSeries)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.opQuery.Add(1)
	o := s.beginOp("query", name, r, "aggregate")
	defer s.endOp(o)
	rec, err := s.cmd.Aggregate(r.Context(), name, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer rec.Release()
	_, err = s.stream(w, format, rec.Schema(), render.Options{FlatDates: true}, func(yield func(arrow.Record) error) error {
		return yield(rec)
	})
	if err != nil {
		s.abort(r, err)
	}
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	name, raw, _, ok := s.readCommand(w, r)
	if !ok {
		return
	}
	fv, ok := raw["filter"]
	if !ok {
		s.writeError(w, r, badRequest("'filter' is required; {} deletes everything"))
		return
	}
	for k := range raw {
		if k != "filter" {
			s.writeError(w, r, badRequest("unknown delete option %q; accepted: filter", k))
			return
		}
	}
	f, err := parseFilter(fv)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if f == nil {
		s.writeError(w, r, badRequest("'filter' must be a JSON object; {} deletes everything"))
		return
	}
	if _, err := s.db.DescribeShallow(r.Context(), name); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.opDelete.Add(1)
	o := s.beginOp("remove", name, r, fmt.Sprintf("delete %s", f))
	defer s.endOp(o)
	n, err := s.w.Delete(r.Context(), name, f, timeseries.DeleteOptions{})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o.Docs.Store(n)
	s.metrics.docsDeleted.Add(n)
	s.metrics.deleted.Add(float64(n))
	writeJSON(w, http.StatusOK, map[string]int64{"deleted": n})
}
