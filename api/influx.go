package api

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/api/lineproto"
	"github.com/hourglassdb/hourglass/internal/keep"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// influxError is InfluxDB's error body. Error repeats Message for v1
// clients, which read "error".
type influxError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Error   string `json:"error,omitempty"`
}

// influxCode names a status the way InfluxDB's error bodies do.
func influxCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not found"
	case http.StatusRequestTimeout:
		return "request timeout"
	case http.StatusRequestEntityTooLarge:
		return "request too large"
	case http.StatusUnsupportedMediaType:
		return "unsupported media type"
	case http.StatusTooManyRequests:
		return "too many requests"
	case http.StatusServiceUnavailable, http.StatusInsufficientStorage:
		// InfluxDB has no code for a full disk; it passes with time.
		return "unavailable"
	}
	return "internal error"
}

func (s *Server) writeInfluxError(w http.ResponseWriter, r *http.Request, err error, line int) {
	c := s.classify(err)
	if c.Internal {
		s.log.Error("write failed", "path", r.URL.Path, "err", err)
	}
	setHeaders(w, c)
	w.Header().Set("X-Influxdb-Error", c.Message)
	writeJSON(w, c.HTTPStatus, influxError{Code: influxCode(c.HTTPStatus), Message: c.Message, Line: line, Error: c.Message})
}

// results recycles decode results (measurement and field slices).
var results = sync.Pool{New: func() any { return new(lineproto.Result) }}

// handleInfluxWrite serves /write (v1) and /api/v2/write (v2): line
// protocol into the collection named by db or bucket, created on first
// write as a time series with timeField "time" and metaField "tags".
func (s *Server) handleInfluxWrite(v2 bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		param := "db"
		if v2 {
			param = "bucket"
		}
		name := q.Get(param)
		if name == "" {
			s.writeInfluxError(w, r, badRequest("the %q query parameter is required", param), 0)
			return
		}
		prec, err := lineproto.ParsePrecision(q.Get("precision"), v2)
		if err != nil {
			s.writeInfluxError(w, r, badRequest("%v", err), 0)
			return
		}
		if err := s.influxCollection(r, name); err != nil {
			s.writeInfluxError(w, r, err, 0)
			return
		}
		o := s.beginOp("insert", name, r, "line protocol")
		defer s.endOp(o)

		// The body is read before a slot is taken (see handleInsert).
		buf, err := s.readBody(w, r, s.opts.MaxBody)
		if err != nil {
			s.writeInfluxError(w, r, err, 0)
			return
		}
		defer putBody(buf)
		s.metrics.bodyIn.Add(float64(len(buf.b)))
		if err := s.cmd.Ingest().Acquire(r.Context()); err != nil {
			s.writeInfluxError(w, r, err, 0)
			return
		}
		defer s.cmd.Ingest().Release()
		s.metrics.opInsert.Add(1)

		dec := s.lineDecoders.Get()
		res := results.Get().(*lineproto.Result)
		defer func() {
			res.Reset()
			results.Put(res)
			s.lineDecoders.Put(dec)
		}()
		s.writeLines(w, r, name, buf.b, prec, dec, res, o)
	}
}

// writeLines decodes and stores body insertChunkBytes of its text at a
// time (lineproto.Decoder.DecodeChunk), so that the measurements of the
// whole body never exist at once, and answers as one decode and insert of
// the whole body would: 204, or a partial write naming the first bad line
// and the counts. A storage error after some chunks were stored answers
// with its status and a message saying which lines were written.
func (s *Server) writeLines(w http.ResponseWriter, r *http.Request, name string, body []byte, prec lineproto.Precision,
	dec *lineproto.Decoder, res *lineproto.Result, o *command.Op) {
	now := s.opts.Now() // one clock for the lines of the body without a timestamp
	var lines, dropped, wrote, bad int
	var msg string
	for pos, line, first := 0, 0, true; first || pos < len(body); first = false {
		res.Reset()
		from := line
		pos, line = dec.DecodeChunk(body, pos, line, insertChunkBytes, prec, now, res)
		if chunkDecoded != nil {
			chunkDecoded()
		}
		o.Docs.Add(int64(len(res.Measurements)))
		var ins timeseries.InsertResult
		if len(res.Measurements) > 0 || first {
			var err error
			ins, err = s.w.Insert(r.Context(), name, timeseries.Batch{Measurements: res.Measurements}, timeseries.InsertOptions{Unordered: true})
			if err != nil {
				if wrote == 0 {
					s.writeInfluxError(w, r, err, 0) // nothing stored: the error alone
					return
				}
				s.metrics.docsInserted.Add(int64(wrote))
				s.metrics.inserted.WithLabelValues("line").Add(float64(wrote))
				s.writeInfluxError(w, r, partialStore(s, r, err, from, wrote), from+1)
				return
			}
		}
		lines += res.Lines
		wrote += ins.Inserted
		dropped += res.Dropped + len(ins.Errors)
		if bad == 0 {
			// Name the first bad line: a parse failure or a refusal by
			// the collection, whichever comes first in the body.
			if res.First != nil {
				bad, msg = res.First.Line, fmt.Sprintf("unable to parse '%s': %v", res.First.Text, res.First.Err)
			}
			if len(ins.Errors) > 0 {
				we := ins.Errors[0]
				if l := res.LineOf(we.Index); bad == 0 || l < bad {
					bad, msg = l, fmt.Sprintf("line %d refused: %v", l, we.Err)
				}
			}
		}
	}
	s.metrics.docsInserted.Add(int64(wrote))
	s.metrics.inserted.WithLabelValues("line").Add(float64(wrote))
	if dropped == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.metrics.refused.WithLabelValues("line").Add(float64(dropped))
	s.writeInfluxError(w, r, badRequest("partial write: %s; dropped %d of %d lines, wrote %d",
		msg, dropped, lines, wrote), bad)
}

// partialStore is err, a storage error after the lines of the body before
// line from+1 were stored (wrote measurements), with its status and a
// message that says so.
func partialStore(s *Server, r *http.Request, err error, from, wrote int) error {
	c := s.classify(err)
	if c.Internal {
		s.log.Error("write failed", "path", r.URL.Path, "err", err)
	}
	return &httpError{status: c.HTTPStatus, code: c.Code, msg: fmt.Sprintf(
		"%s; lines 1 to %d of the body were written (%d measurements), the lines from %d on were not", c.Message, from, wrote, from+1)}
}

// influxCollection checks that the collection a line-protocol write goes
// to is a time series with a metaField, creating it if it does not exist.
// It looks the collection up without its size on disk (DescribeShallow):
// this runs on every write.
func (s *Server) influxCollection(r *http.Request, name string) error {
	if err := timeseries.ValidateName(name); err != nil {
		return err
	}
	info, err := s.db.DescribeShallow(r.Context(), name)
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
		if _, err := s.w.CreateCollection(r.Context(), name, influxCollectionOptions()); err != nil {
			return err
		}
		s.log.Info("collection created by line-protocol write", "collection", name)
		info, err = s.db.DescribeShallow(r.Context(), name)
	}
	if err != nil {
		return err
	}
	ts := info.Options.TimeSeries
	if ts == nil {
		return badRequest("collection %q is a plain collection; line protocol writes into time-series collections", name)
	}
	if ts.MetaField == "" {
		return badRequest("collection %q has no metaField to hold the line-protocol measurement and tags", name)
	}
	return nil
}

func influxCollectionOptions() timeseries.CollectionOptions {
	return timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "time", MetaField: "tags"}}
}

var (
	createDatabaseRE = regexp.MustCompile(`(?i)^\s*CREATE\s+DATABASE\s+("(?:[^"\\]|\\.)+"|[A-Za-z0-9_.\-]+)(\s+WITH\b.*)?\s*$`)
	showDatabasesRE  = regexp.MustCompile(`(?i)^\s*SHOW\s+DATABASES\s*$`)
)

// handleInfluxQuery answers the InfluxQL statements clients send before
// writing: CREATE DATABASE and SHOW DATABASES.
func (s *Server) handleInfluxQuery(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "cannot parse the query form: " + err.Error()})
		return
	}
	qs := strings.TrimSpace(r.Form.Get("q"))
	if qs == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `missing required parameter "q"`})
		return
	}
	var results []map[string]any
	for i, stmt := range strings.Split(qs, ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		res := map[string]any{"statement_id": i}
		switch {
		case createDatabaseRE.MatchString(stmt):
			name := strings.Trim(createDatabaseRE.FindStringSubmatch(stmt)[1], `"`)
			if err := timeseries.ValidateName(name); err != nil {
				res["error"] = err.Error()
				break
			}
			_, err := s.w.CreateCollection(r.Context(), name, influxCollectionOptions())
			if err != nil && mongoerr.CodeOf(err) != mongoerr.NamespaceExists {
				res["error"] = s.classify(err).Message
			}
		case showDatabasesRE.MatchString(stmt):
			infos, err := s.db.ListCollections(r.Context())
			if err != nil {
				res["error"] = err.Error()
				break
			}
			values := make([][]string, 0, len(infos))
			for _, info := range infos {
				if info.Options.TimeSeries != nil {
					values = append(values, []string{info.Name})
				}
			}
			res["series"] = []map[string]any{{"name": "databases", "columns": []string{"name"}, "values": values}}
		default:
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf(
				"unsupported statement %q: only CREATE DATABASE and SHOW DATABASES are answered; query with POST /v1/collections/{name}/find", strings.TrimSpace(stmt))})
			return
		}
		results = append(results, res)
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": results})
}

// newLineDecoders returns a keeper of n line-protocol decoders sharing one
// series cache: a fleet's sensors are found whichever decoder takes their
// request, and their meta values are held once.
func newLineDecoders(n int) *keep.Keeper[*lineproto.Decoder] {
	cache := lineproto.NewSeriesCache(lineproto.DefaultSeriesCacheBytes)
	return keep.New(n, func() *lineproto.Decoder { return lineproto.NewDecoderSharing(cache) })
}
