package api

import (
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/command/promstore"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// handlePromRead serves POST /api/v1/read: Prometheus remote read, a
// snappy-compressed protobuf ReadRequest answered with a ReadResponse of
// the SAMPLES response type, or a stream of STREAMED_XOR_CHUNKS frames
// (promread_stream.go). Each query's matchers select the series of
// the collection (prometheus, or ?collection=) by their meta document,
// its time range (both ends included) their samples; each result holds
// its series with their labels in name order and their samples in time
// order, the series in label set order. A collection that does not exist holds no series. The samples of
// a read are bounded by MaxReadSamples: a read over it is 400; its reply
// takes from the request memory (429 while other requests hold it).
func (s *Server) handlePromRead(w http.ResponseWriter, r *http.Request) {
	name, ok := s.promTarget(w, r, "read")
	if !ok {
		return
	}
	o := s.beginDoorOp(command.Prometheus, "query", name, r, "remote read")
	defer s.endOp(o)

	buf, err := s.readBodyAs(w, r, s.opts.MaxBody, "")
	if err != nil {
		s.writePromError(w, r, err)
		return
	}
	defer putBody(buf)
	var req prompb.ReadRequest
	if err := decodePromRead(buf.b, s.opts.MaxBody, &req); err != nil {
		s.writePromError(w, r, err)
		return
	}
	s.metrics.opQuery.Add(1)
	resp := prompb.ReadResponse{Results: make([]*prompb.QueryResult, len(req.Queries))}
	store, err := promstore.New(s.cmd, name, promstore.Options{MaxSamples: s.opts.MaxReadSamples})
	if err != nil {
		s.writePromError(w, r, err)
		return
	}
	// One Querier for the read, so that its queries' samples count
	// against the limit together; its ranges are each query's own.
	qr := store.NewQuerier(math.MinInt64, math.MaxInt64)
	defer qr.Close()
	// Every query is read before the reply starts, so that a limit met
	// is an error reply, not a stream cut short.
	series := make([][]promstore.Series, len(req.Queries))
	for i, q := range req.Queries {
		all, err := promSeries(r, qr, q)
		if errors.Is(err, promstore.ErrSampleLimit) {
			err = newHTTPError(http.StatusBadRequest, mongoerr.ExceededMemoryLimit,
				"exceeded sample limit (%d): the read returns more samples than --max-read-samples; narrow its matchers or time range", s.opts.MaxReadSamples)
		}
		if err != nil {
			s.writePromError(w, r, err)
			return
		}
		series[i] = all
	}
	n := qr.Samples()
	o.Docs.Add(n)
	if typ, _ := promResponseType(req.AcceptedResponseTypes); typ == prompb.ReadRequest_STREAMED_XOR_CHUNKS {
		if err := writePromStream(w, series); err != nil {
			s.abort(r, err)
		}
		s.metrics.docsReturned.Add(n)
		s.metrics.returned.Add(float64(n))
		return
	}
	for i, all := range series {
		resp.Results[i] = promResult(all)
	}
	// The reply is held twice (marshalled, then compressed) until sent:
	// that memory is taken from the request memory the doors share.
	held := 2 * int64(resp.Size())
	budget := s.cmd.Bodies()
	if held > budget.Max() {
		s.writePromError(w, r, badRequest("the reply would take %d bytes, over the server's body memory of %d; narrow the read", held, budget.Max()))
		return
	}
	if !budget.TryTake(held) {
		s.writePromError(w, r, errBodyBudget(budget.Max()))
		return
	}
	defer budget.Give(held)
	pb, err := resp.Marshal()
	if err != nil {
		s.writePromError(w, r, err)
		return
	}
	out := snappy.Encode(nil, pb)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Header().Set("Content-Encoding", "snappy")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(out); err != nil {
		s.abort(r, err)
	}
	s.metrics.docsReturned.Add(n)
	s.metrics.returned.Add(float64(n))
}

// decodePromRead decompresses body (snappy's block format) and decodes
// the ReadRequest into req, whose decompressed length is bounded by
// limit. The request asks for the SAMPLES or STREAMED_XOR_CHUNKS
// response type, or for none (which older clients mean as SAMPLES); a
// request none of whose types is served is refused, as Prometheus refuses
// it. Every error is a 400 (or 413) for the client.
func decodePromRead(body []byte, limit int64, req *prompb.ReadRequest) error {
	if len(body) == 0 {
		return badRequest("empty body: remote read sends a snappy-compressed ReadRequest")
	}
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return badRequest("cannot decompress the body (snappy block format): %v", err)
	}
	if int64(n) > limit {
		return tooLarge(limit)
	}
	pb, err := snappy.Decode(make([]byte, n), body)
	if err != nil {
		return badRequest("cannot decompress the body (snappy block format): %v", err)
	}
	if err := req.Unmarshal(pb); err != nil {
		return badRequest("cannot decode the ReadRequest: %v", err)
	}
	if _, err := promResponseType(req.AcceptedResponseTypes); err != nil {
		return err
	}
	for i, q := range req.Queries {
		if q == nil {
			return badRequest("query %d is empty", i)
		}
		for _, m := range q.Matchers {
			if m == nil {
				return badRequest("query %d: empty matcher", i)
			}
			if m.Name == "" {
				return badRequest("query %d: matcher with an empty label name", i)
			}
			switch m.Type {
			case prompb.LabelMatcher_EQ, prompb.LabelMatcher_NEQ, prompb.LabelMatcher_RE, prompb.LabelMatcher_NRE:
			default:
				return badRequest("query %d: unknown matcher type %d", i, m.Type)
			}
		}
	}
	return nil
}

// promSeries answers one query of a remote read on the Querier's
// collection: its series, with their samples; the samples of every query
// of a read count against MaxReadSamples together (the Querier's limit).
func promSeries(r *http.Request, qr *promstore.Querier, q *prompb.Query) ([]promstore.Series, error) {
	ms := make([]*labels.Matcher, len(q.Matchers))
	for i, m := range q.Matchers {
		var typ labels.MatchType
		switch m.Type {
		case prompb.LabelMatcher_EQ:
			typ = labels.MatchEqual
		case prompb.LabelMatcher_NEQ:
			typ = labels.MatchNotEqual
		case prompb.LabelMatcher_RE:
			typ = labels.MatchRegexp
		default:
			typ = labels.MatchNotRegexp
		}
		lm, err := labels.NewMatcher(typ, m.Name, m.Value)
		if err != nil {
			return nil, badRequest("invalid regular expression %q for label %q: %v", m.Value, m.Name, err)
		}
		ms[i] = lm
	}
	return qr.Read(r.Context(), q.StartTimestampMs, q.EndTimestampMs, ms...)
}

// promResult is the SAMPLES result of one query's series.
func promResult(all []promstore.Series) *prompb.QueryResult {
	res := &prompb.QueryResult{Timeseries: make([]*prompb.TimeSeries, len(all))}
	for i := range all {
		s := &all[i]
		ts := &prompb.TimeSeries{Labels: make([]prompb.Label, 0, s.Labels.Len()), Samples: make([]prompb.Sample, len(s.Samples))}
		s.Labels.Range(func(l labels.Label) { ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value}) })
		for k := range s.Samples {
			ts.Samples[k] = prompb.Sample{Timestamp: s.Samples[k].T(), Value: s.Samples[k].F()}
		}
		res.Timeseries[i] = ts
	}
	return res
}
