package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// handlePromRead serves POST /api/v1/read: Prometheus remote read, a
// snappy-compressed protobuf ReadRequest answered with a ReadResponse of
// the SAMPLES response type. Each query's matchers select the series of
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
	s.metrics.bodyIn.Add(float64(len(buf.b)))
	var req prompb.ReadRequest
	if err := decodePromRead(buf.b, s.opts.MaxBody, &req); err != nil {
		s.writePromError(w, r, err)
		return
	}
	s.metrics.opQuery.Add(1)
	resp := prompb.ReadResponse{Results: make([]*prompb.QueryResult, len(req.Queries))}
	left := s.opts.MaxReadSamples
	for i, q := range req.Queries {
		res, n, err := s.promQuery(r, name, q, left)
		if err != nil {
			s.writePromError(w, r, err)
			return
		}
		left -= n
		o.Docs.Add(n)
		resp.Results[i] = res
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
	n := s.opts.MaxReadSamples - left
	s.metrics.docsReturned.Add(n)
	s.metrics.returned.Add(float64(n))
}

// decodePromRead decompresses body (snappy's block format) and decodes
// the ReadRequest into req, whose decompressed length is bounded by
// limit. The request asks for the SAMPLES response type, or for none
// (which older clients mean as SAMPLES): the STREAMED_XOR_CHUNKS type
// alone is refused, as Prometheus refuses a request none of whose types
// it serves. Every error is a 400 (or 413) for the client.
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
	if len(req.AcceptedResponseTypes) > 0 && !slices.Contains(req.AcceptedResponseTypes, prompb.ReadRequest_SAMPLES) {
		return badRequest("none of the accepted response types %v is served: only SAMPLES is", req.AcceptedResponseTypes)
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

// promMatcher is a label matcher of a remote read, checked in Go on each
// series' labels: the filter the engine is given holds the matchers on
// label names it can name as a path, and every matcher is checked again
// here, so that a label name holding a dot is matched exactly too.
type promMatcher struct {
	name  string
	typ   prompb.LabelMatcher_Type
	value string
	re    *regexp.Regexp // RE, NRE: the pattern anchored at both ends
}

// matches reports whether a series whose label m names has the value v
// ("" when it lacks the label, as Prometheus sees it) matches.
func (m *promMatcher) matches(v string) bool {
	switch m.typ {
	case prompb.LabelMatcher_EQ:
		return v == m.value
	case prompb.LabelMatcher_NEQ:
		return v != m.value
	case prompb.LabelMatcher_RE:
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

// filter is m as a condition on the meta field meta, or nil when the
// label name cannot be a path (it holds a dot, starts with '$' or holds
// a NUL byte). A series lacking the label matches as one whose value is
// "" (remote write stores no label of empty value).
func (m *promMatcher) filter(meta string) map[string]any {
	if strings.ContainsAny(m.name, ".\x00") || m.name[0] == '$' {
		return nil
	}
	path := meta + "." + m.name
	absent := map[string]any{path: map[string]any{"$exists": false}}
	present := map[string]any{path: map[string]any{"$exists": true}}
	switch m.typ {
	case prompb.LabelMatcher_EQ:
		if m.value == "" {
			return absent
		}
		return map[string]any{path: m.value}
	case prompb.LabelMatcher_NEQ:
		if m.value == "" {
			return present
		}
		return map[string]any{path: map[string]any{"$ne": m.value}} // $ne matches the series lacking it
	case prompb.LabelMatcher_RE:
		re := map[string]any{path: map[string]any{"$regex": m.re.String()}}
		if m.re.MatchString("") {
			return map[string]any{"$or": []any{re, absent}}
		}
		return re
	default:
		not := map[string]any{path: map[string]any{"$not": map[string]any{"$regex": m.re.String()}}}
		if m.re.MatchString("") {
			return map[string]any{"$and": []any{not, present}}
		}
		return not
	}
}

// promQuery answers one query of a remote read on the collection name:
// its series, their samples, and their count, which may not pass left.
func (s *Server) promQuery(r *http.Request, name string, q *prompb.Query, left int64) (*prompb.QueryResult, int64, error) {
	res := &prompb.QueryResult{}
	ms := make([]promMatcher, len(q.Matchers))
	for i, m := range q.Matchers {
		ms[i] = promMatcher{name: m.Name, typ: m.Type, value: m.Value}
		if m.Type == prompb.LabelMatcher_RE || m.Type == prompb.LabelMatcher_NRE {
			// Prometheus' regexes are RE2, anchored at both ends.
			re, err := regexp.Compile("^(?s:" + m.Value + ")$")
			if err != nil {
				return nil, 0, badRequest("invalid regular expression %q for label %q: %v", m.Value, m.Name, err)
			}
			ms[i].re = re
		}
	}
	info, err := s.db.DescribeShallow(r.Context(), name)
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
		return res, 0, nil // no series, as Prometheus holds none of a name it never saw
	}
	if err != nil {
		return nil, 0, err
	}
	ts := info.Options.TimeSeries
	if ts == nil || ts.MetaField == "" {
		return nil, 0, badRequest("collection %q is not a time series with a metaField; remote read reads the labels from it", name)
	}
	// The engine's times are nanoseconds in an int64.
	const maxMs = math.MaxInt64 / int64(1e6)
	start, end := min(max(q.StartTimestampMs, -maxMs), maxMs), min(max(q.EndTimestampMs, -maxMs), maxMs)
	if start > end {
		return res, 0, nil
	}
	conds := []any{map[string]any{ts.TimeField: map[string]any{"$gte": time.UnixMilli(start).UTC(), "$lte": time.UnixMilli(end).UTC()}}}
	for i := range ms {
		if f := ms[i].filter(ts.MetaField); f != nil {
			conds = append(conds, f)
		}
	}
	filter, err := partialfilter.Parse(map[string]any{"$and": conds})
	if err != nil {
		return nil, 0, badRequest("cannot select the series: %v", err)
	}
	cur, err := s.cmd.Find(r.Context(), command.Find{Collection: name, Filter: filter})
	if err != nil {
		return nil, 0, err
	}
	defer cur.Close()
	var (
		n       int64
		lastKey string
		series  *prompb.TimeSeries // the series of lastKey; nil when it does not match
		seen    bool
	)
	for cur.Next() {
		rec := cur.Record()
		sc := rec.Schema()
		ti, mi, vi := sc.FieldIndices(ts.TimeField), sc.FieldIndices(ts.MetaField), sc.FieldIndices(promValueField)
		if len(ti) == 0 || len(mi) == 0 || len(vi) == 0 {
			continue // no value field: no samples
		}
		times, ok1 := rec.Column(ti[0]).(*array.Timestamp)
		metas, ok2 := rec.Column(mi[0]).(*array.String)
		values, ok3 := rec.Column(vi[0]).(*array.Float64)
		if !ok1 || !ok2 || !ok3 {
			continue // a value field that is not numbers holds no samples
		}
		for j := range int(rec.NumRows()) {
			if metas.IsNull(j) || values.IsNull(j) {
				continue
			}
			if key := metas.Value(j); !seen || key != lastKey {
				seen, lastKey, series = true, key, nil
				labels, err := promLabels(key)
				if err == nil && matchAll(ms, labels) {
					series = &prompb.TimeSeries{Labels: labels}
					res.Timeseries = append(res.Timeseries, series)
				}
			}
			if series == nil {
				continue
			}
			if n++; n > left {
				return nil, 0, newHTTPError(http.StatusBadRequest, mongoerr.ExceededMemoryLimit,
					"exceeded sample limit (%d): the read returns more samples than --max-read-samples; narrow its matchers or time range", s.opts.MaxReadSamples)
			}
			series.Samples = append(series.Samples, prompb.Sample{Timestamp: int64(times.Value(j)) / 1e6, Value: values.Value(j)})
		}
	}
	if err := cur.Err(); err != nil {
		return nil, 0, err
	}
	// In label set order, as Prometheus' own storage returns series.
	slices.SortFunc(res.Timeseries, func(a, b *prompb.TimeSeries) int { return compareLabels(a.Labels, b.Labels) })
	res.Timeseries = mergeSeries(res.Timeseries)
	return res, n, nil
}

// mergeSeries merges the series of equal label sets, adjacent in all (in
// label set order), into one whose samples are in time order: two meta
// values can give one label set (a number and its text, or a label of
// empty value and none), and Prometheus holds one series a label set.
func mergeSeries(all []*prompb.TimeSeries) []*prompb.TimeSeries {
	out := all[:0]
	for _, ts := range all {
		if k := len(out) - 1; k >= 0 && compareLabels(out[k].Labels, ts.Labels) == 0 {
			out[k].Samples = append(out[k].Samples, ts.Samples...)
			slices.SortStableFunc(out[k].Samples, func(a, b prompb.Sample) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
			continue
		}
		out = append(out, ts)
	}
	clear(all[len(out):])
	return all[:len(out)]
}

// compareLabels orders label sets as Prometheus' labels.Compare does:
// label by label, by name then value, a prefix first.
func compareLabels(a, b []prompb.Label) int {
	for i := range min(len(a), len(b)) {
		if c := strings.Compare(a[i].Name, b[i].Name); c != 0 {
			return c
		}
		if c := strings.Compare(a[i].Value, b[i].Value); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// matchAll reports whether labels, in name order, match every matcher.
func matchAll(ms []promMatcher, labels []prompb.Label) bool {
	for i := range ms {
		v := ""
		if j, ok := slices.BinarySearchFunc(labels, ms[i].name, func(l prompb.Label, name string) int { return strings.Compare(l.Name, name) }); ok {
			v = labels[j].Value
		}
		if !ms[i].matches(v) {
			return false
		}
	}
	return true
}

// promLabels decodes a series' meta key (the JSON of its meta document)
// into its labels, in name order: each field of a string, number or
// boolean value, with its text; a field holding a document or an array,
// or of empty text, is not a label. A meta value that is not a document
// is an error: the series is left out.
func promLabels(key string) ([]prompb.Label, error) {
	d := json.NewDecoder(strings.NewReader(key))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		return nil, err
	}
	if len(doc) == 0 {
		return nil, errors.New("no labels")
	}
	labels := make([]prompb.Label, 0, len(doc))
	for k, v := range doc {
		var text string
		switch v := v.(type) {
		case string:
			text = v
		case json.Number:
			text = v.String()
		case bool:
			text = strconv.FormatBool(v)
		default:
			continue
		}
		if text != "" {
			labels = append(labels, prompb.Label{Name: k, Value: text})
		}
	}
	slices.SortFunc(labels, labelOrder)
	return labels, nil
}
