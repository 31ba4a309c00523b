package api

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/klauspost/compress/snappy"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/command/promstore"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// The collection remote-written samples go to unless ?collection= names
// another, and its fields (API.md, "Prometheus").
const (
	promCollection = "prometheus"
	promTimeField  = promstore.TimeField
	promMetaField  = promstore.MetaField
	promValueField = promstore.ValueField
)

// promChunk is how many samples one insert of a remote write stores: the
// measurements of a whole request never exist at once, and one chunk's
// (about 64 bytes a sample) stay near insertChunkBytes.
const promChunk = 16 << 10

// promError is the Prometheus HTTP API's error body.
type promError struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
}

// writePromError replies with err in Prometheus' error shape, its status
// and errorType from the one table (command.Classify).
func (s *Server) writePromError(w http.ResponseWriter, r *http.Request, err error) {
	c := s.classify(err)
	if c.Internal {
		s.log.Error("remote write failed", "path", r.URL.Path, "err", err)
	}
	if c.ErrorType == "" {
		// An error of the HTTP layer (body limits, media types): its
		// status says what Prometheus' errorType does.
		switch {
		case c.Retry: // 429, 503, 507: the server's state, not the request
			c.ErrorType = "unavailable"
		case c.HTTPStatus >= 500:
			c.ErrorType = "internal"
		default:
			c.ErrorType = "bad_data"
		}
	}
	setHeaders(w, c)
	writeJSON(w, c.HTTPStatus, promError{Status: "error", ErrorType: c.ErrorType, Error: c.Message})
}

// promBatch is the scratch space of one remote write's inserts.
type promBatch struct {
	ms     []model.Measurement
	fields []model.Field
	buf    []byte
}

var promBatches = sync.Pool{New: func() any { return new(promBatch) }}

// handlePromWrite serves POST /api/v1/write: Prometheus remote write 1.0,
// a snappy-compressed (block format) protobuf WriteRequest. Each series'
// labels become the meta document labels, each sample a measurement
// {t: timestamp (ms), labels: {...}, value: float}, stored bit for bit
// (staleness markers included). The whole body is decoded and checked
// before anything is stored: a body that does not decode is 400 bad_data
// and writes nothing. 204 once every sample is durable.
func (s *Server) handlePromWrite(w http.ResponseWriter, r *http.Request) {
	name, ok := s.promTarget(w, r, "write")
	if !ok {
		return
	}
	if err := promContentType(r.Header.Get("Content-Type")); err != nil {
		s.writePromError(w, r, err)
		return
	}
	o := s.beginDoorOp(command.Prometheus, "insert", name, r, "remote write")
	defer s.endOp(o)

	// The body is read before a slot is taken (see handleInsert).
	buf, err := s.readBodyAs(w, r, s.opts.MaxBody, "")
	if err != nil {
		s.writePromError(w, r, err)
		return
	}
	defer putBody(buf)
	s.metrics.bodyIn.Add(float64(len(buf.b)))

	req := getPromReq()
	defer putPromReq(req)
	release, err := s.decodePromWrite(buf.b, buf.held, req)
	defer release()
	if err != nil {
		s.writePromError(w, r, err)
		return
	}
	b := promBatches.Get().(*promBatch)
	defer promBatches.Put(b)
	samples, err := b.check(req)
	promKeys.add(req.series)
	if err != nil {
		s.writePromError(w, r, err)
		return
	}
	if err := s.promCollection(r, name); err != nil {
		s.writePromError(w, r, err)
		return
	}
	if err := s.cmd.Ingest().Acquire(r.Context()); err != nil {
		s.writePromError(w, r, err)
		return
	}
	defer s.cmd.Ingest().Release()
	s.metrics.opInsert.Add(1)

	wrote, err := s.insertProm(r, name, req, b, o)
	s.metrics.docsInserted.Add(int64(wrote))
	s.metrics.inserted.WithLabelValues("prometheus").Add(float64(wrote))
	if err != nil {
		if wrote > 0 {
			c := s.classify(err)
			err = &httpError{status: c.HTTPStatus, code: c.Code, msg: fmt.Sprintf(
				"%s; %d of the request's %d samples were written", c.Message, wrote, samples)}
			if c.Internal {
				s.log.Error("remote write failed", "path", r.URL.Path, "err", err)
			}
		}
		s.writePromError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// promContentType refuses a body that is not remote write 1.0 with 415:
// remote write 2.0 (proto=io.prometheus.write.v2.Request), whose fields a
// 1.0 decoder would skip as unknown, storing nothing; its senders fall
// back to 1.0 on 415. No Content-Type is taken as 1.0.
func promContentType(ct string) error {
	if ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return newHTTPError(http.StatusUnsupportedMediaType, mongoerr.BadValue, "malformed Content-Type %q: %v", ct, err)
	}
	if mt != "application/x-protobuf" {
		return newHTTPError(http.StatusUnsupportedMediaType, mongoerr.BadValue,
			"unsupported Content-Type %q: remote write sends application/x-protobuf", ct)
	}
	if p, ok := params["proto"]; ok && p != "prometheus.WriteRequest" {
		return newHTTPError(http.StatusUnsupportedMediaType, mongoerr.BadValue,
			"unsupported Content-Type %q: only remote write 1.0 (proto=prometheus.WriteRequest) is served", ct)
	}
	return nil
}

// decodePromWrite decompresses body (snappy's block format) and decodes
// the WriteRequest into req, whose labels are then slices of the
// decompressed bytes: those are held, with their memory taken from the
// body budget, until release is called (also on error). The decompressed
// length, which the block announces first, is checked against the body
// limit and taken from the budget before anything is allocated for it, so
// that a small body announcing a large one costs nothing (bodyHeld is
// what the body itself holds of the budget). The decoded
// request can take more memory than its bytes (a series of two bytes is
// a struct of over 100): the decode takes the memory of its elements
// from the budget too, as it decodes them (promReq.need). A request
// that could never fit is 413, one that does not fit now 429.
func (s *Server) decodePromWrite(body []byte, bodyHeld int64, req *promReq) (release func(), err error) {
	budget := s.cmd.Bodies()
	var held int64
	var dst []byte // the decompressed body, pooled
	release = func() {
		budget.Give(held)
		held = 0
		if dst != nil {
			command.PutBuffer(dst)
			dst = nil
		}
	}
	take := func(n int64) error {
		if bodyHeld+held+n > budget.Max() {
			return newHTTPError(http.StatusRequestEntityTooLarge, mongoerr.BSONObjectTooLarge,
				"the decoded request would take %d bytes, over the server's body memory of %d; send smaller batches", n, budget.Max())
		}
		if !budget.TryTake(n) {
			return errBodyBudget(budget.Max())
		}
		held += n
		return nil
	}
	if len(body) == 0 {
		return release, badRequest("empty body: remote write sends a snappy-compressed WriteRequest")
	}
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return release, badRequest("cannot decompress the body (snappy block format): %v", err)
	}
	if int64(n) > s.opts.MaxBody {
		return release, tooLarge(s.opts.MaxBody)
	}
	class := int64(command.BufferClass(max(n, 1)))
	if err := take(class); err != nil {
		return release, err
	}
	dst = command.GetBuffer(max(n, 1))
	pb, err := snappy.Decode(dst[:cap(dst)], body)
	if err != nil {
		return release, badRequest("cannot decompress the body (snappy block format): %v", err)
	}
	if err := req.decode(pb, take, promKeys); err != nil {
		var budgetErr *promBudgetError
		if errors.As(err, &budgetErr) {
			return release, budgetErr.err
		}
		return release, badRequest("cannot decode the WriteRequest: %v", err)
	}
	return release, nil
}

// promBudgetError is a decode stopped by the body budget: the error take
// returned, answered as it is.
type promBudgetError struct{ err error }

func (e *promBudgetError) Error() string { return e.err.Error() }

// Sizes of the decoded request's elements, whose memory a decode takes
// from the body budget as it decodes them (promReq.need).
var (
	sizeSeries = int64(unsafe.Sizeof(promWSeries{}))
	sizeLabel  = int64(unsafe.Sizeof(promLabel{}))
	sizeSample = int64(unsafe.Sizeof(promSample{}))
)

// check checks every series of req as the collection would and makes
// the meta key of each series whose key promKeys did not give; it
// returns the number of samples. Label names must be non-empty UTF-8, not
// start with '$' nor hold a NUL byte (a meta document's field names),
// label values UTF-8; a name given twice, a series with no labels and a
// timestamp beyond the engine's range (nanoseconds in an int64) are
// refused (native histograms were, by the decode). Labels with an empty
// value are left out, as Prometheus treats them as absent. A series whose
// key promKeys gave, or whose encoded labels are those of the series
// before, passed these checks before: only its timestamps are checked.
func (b *promBatch) check(req *promReq) (int, error) {
	samples := 0
	var last *promWSeries // the series before with encoded labels
	for i := range req.series {
		ts := &req.series[i]
		if ts.wire != nil {
			if !ts.cached && last != nil && bytes.Equal(ts.wire, last.wire) {
				// The labels of the series before, which passed.
				ts.key = last.key
			}
			last = ts
		}
		if ts.key == nil {
			labels := req.labels[ts.l0:ts.l1]
			// In name order, as the meta key is written; Prometheus sends
			// them so, and checking costs one pass.
			if !slices.IsSortedFunc(labels, labelOrder) {
				slices.SortStableFunc(labels, labelOrder)
			}
			for j, l := range labels {
				switch {
				case len(l.name) == 0:
					return 0, badRequest("series %d: empty label name", i)
				case !utf8.Valid(l.name):
					return 0, badRequest("series %d: label name %q is not valid UTF-8", i, l.name)
				case !utf8.Valid(l.value):
					return 0, badRequest("series %d: the value of label %q is not valid UTF-8", i, l.name)
				case l.name[0] == '$' || bytes.IndexByte(l.name, 0) >= 0:
					return 0, badRequest("series %d: label name %q cannot start with '$' or hold a NUL byte", i, l.name)
				case j > 0 && bytes.Equal(l.name, labels[j-1].name):
					return 0, badRequest("series %d: label %q is given twice", i, l.name)
				}
			}
			key, err := b.metaKey(labels)
			if err != nil {
				return 0, badRequest("series %d: %v", i, err)
			}
			ts.key = key
		}
		if ts.badTime {
			for _, sm := range req.samples[ts.s0:ts.s1] {
				if sm.t > math.MaxInt64/int64(1e6) || sm.t < math.MinInt64/int64(1e6) {
					return 0, badRequest("series %d: timestamp %d ms is out of range", i, sm.t)
				}
			}
		}
		samples += ts.s1 - ts.s0
	}
	return samples, nil
}

func labelOrder(a, b promLabel) int { return bytes.Compare(a.name, b.name) }

// metaKey is the canonical meta key (model.CanonicalMeta) of the
// document {name: value} of labels, which are in name order, without
// those of empty value, boxed.
func (b *promBatch) metaKey(labels []promLabel) (any, error) {
	dst := append(b.buf[:0], '{')
	for _, l := range labels {
		if len(l.value) == 0 {
			continue
		}
		if len(dst) > 1 {
			dst = append(dst, ',')
		}
		dst = model.AppendMetaString(dst, model.StringView(l.name))
		dst = append(dst, ':')
		dst = model.AppendMetaString(dst, model.StringView(l.value))
	}
	dst = append(dst, '}')
	if cap(dst) <= model.MaxMetaBytes+1024 {
		b.buf = dst
	}
	switch {
	case len(dst) == 2:
		return nil, errors.New("no labels")
	case len(dst) > model.MaxMetaBytes:
		return nil, fmt.Errorf("labels of %d bytes exceed the limit of %d", len(dst), model.MaxMetaBytes)
	}
	return model.MetaKey(dst), nil
}

// insertProm stores the samples of req, checked by b.check, promChunk at
// a time; it returns how many were stored. A sample the collection
// refuses is an error naming it (the checks of b.check leave none the
// engine refuses on its own).
func (s *Server) insertProm(r *http.Request, name string, req *promReq, b *promBatch, o *command.Op) (int, error) {
	wrote := 0
	flush := func() error {
		if len(b.ms) == 0 {
			return nil
		}
		if chunkDecoded != nil {
			chunkDecoded()
		}
		ins, err := s.w.Insert(r.Context(), name, timeseries.Batch{Measurements: b.ms}, timeseries.InsertOptions{Unordered: true})
		wrote += ins.Inserted
		o.Docs.Add(int64(ins.Inserted))
		if err == nil && len(ins.Errors) > 0 {
			s.metrics.refused.WithLabelValues("prometheus").Add(float64(len(ins.Errors)))
			err = badRequest("sample refused: %v", ins.Errors[0].Err)
		}
		clear(b.ms) // drop the meta keys
		b.ms, b.fields = b.ms[:0], b.fields[:0]
		return err
	}
	if cap(b.fields) < promChunk {
		b.fields = make([]model.Field, 0, promChunk)
		b.ms = make([]model.Measurement, 0, promChunk)
	}
	for i := range req.series {
		ts := &req.series[i]
		for _, sm := range req.samples[ts.s0:ts.s1] {
			if len(b.ms) == promChunk {
				if err := flush(); err != nil {
					return wrote, err
				}
			}
			// One field a measurement, cut from one slab.
			b.fields = append(b.fields, model.Field{Name: promValueField, Value: model.Float(sm.v)})
			f := len(b.fields)
			b.ms = append(b.ms, model.Measurement{Time: sm.t * 1e6, Meta: ts.key, Fields: b.fields[f-1 : f : f], Slot: ts.slot})
		}
	}
	return wrote, flush()
}

// promTarget returns the collection a remote write or read (what) goes
// to, prometheus or ?collection=, once its name and the body's encoding
// are ones the door takes; otherwise it answers the refusal.
func (s *Server) promTarget(w http.ResponseWriter, r *http.Request, what string) (string, bool) {
	name := r.URL.Query().Get("collection")
	if name == "" {
		name = promCollection
	}
	if err := timeseries.ValidateName(name); err != nil {
		s.writePromError(w, r, err)
		return "", false
	}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "snappy":
	default:
		s.writePromError(w, r, newHTTPError(http.StatusUnsupportedMediaType, mongoerr.BadValue,
			"unsupported Content-Encoding %q: remote %s bodies are snappy-compressed protobuf", enc, what))
		return "", false
	}
	return name, true
}

// promCollection checks that the collection remote write goes to is a
// time series with timeField t and metaField labels, creating it if it
// does not exist.
func (s *Server) promCollection(r *http.Request, name string) error {
	info, err := s.db.DescribeShallow(r.Context(), name)
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
		opts := timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: promTimeField, MetaField: promMetaField}}
		switch _, cerr := s.w.CreateCollection(r.Context(), name, opts); {
		case cerr == nil:
			s.log.Info("collection created by remote write", "collection", name)
		case mongoerr.CodeOf(cerr) != mongoerr.NamespaceExists: // not created by a concurrent write
			return cerr
		}
		info, err = s.db.DescribeShallow(r.Context(), name)
	}
	if err != nil {
		return err
	}
	ts := info.Options.TimeSeries
	if ts == nil || ts.TimeField != promTimeField || ts.MetaField != promMetaField {
		return badRequest("collection %q is not a time series with timeField %q and metaField %q; remote write needs one",
			name, promTimeField, promMetaField)
	}
	return nil
}
