package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// formatDate renders t as RFC 3339 in UTC with as many fractional digits as
// it needs.
func formatDate(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// writeErrorReply is one refused document of an insert.
type writeErrorReply struct {
	Index    int    `json:"index"`
	Code     int    `json:"code"`
	CodeName string `json:"codeName"`
	Message  string `json:"message"`
}

type insertReply struct {
	Inserted    int               `json:"inserted"`
	WriteErrors []writeErrorReply `json:"writeErrors,omitempty"`
}

// handleInsert stores a JSON array or NDJSON body of documents.
func (s *Server) handleInsert(w http.ResponseWriter, r *http.Request) {
	name, err := collectionName(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ordered := true
	if v := r.URL.Query().Get("ordered"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.writeError(w, r, badRequest("'ordered' must be true or false; got %q", v))
			return
		}
		ordered = b
	}
	mt, err := mediaType(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var ndjson bool
	switch mt {
	case "", "application/json":
	case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines":
		ndjson = true
	default:
		s.writeError(w, r, newHTTPError(http.StatusUnsupportedMediaType, mongoerr.BadValue,
			"unsupported Content-Type %q; send application/json (an array of documents) or application/x-ndjson", mt))
		return
	}
	// The collection must exist before the body is read: a missing one is
	// 404 whatever the body holds. Its size on disk is not needed
	// (DescribeShallow): this runs on every insert.
	info, err := s.db.DescribeShallow(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ts := info.Options.TimeSeries
	o := s.ops.begin("insert", name, r, "")
	defer s.ops.end(o)

	// The body is read before a slot is taken: a slow client holds its
	// connection and its bytes, never a slot others need.
	buf, err := s.readBody(w, r, s.opts.MaxBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer putBody(buf)
	s.metrics.bodyIn.Add(float64(len(buf.b)))
	if err := s.writes.acquire(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	defer s.writes.release()
	docs, err := parseDocuments(buf.b, ndjson)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.opInsert.Add(1)
	if ts == nil {
		s.insertPlain(w, r, name, docs, ordered, o)
		return
	}

	// Convert; refusals of single documents are write errors, as in
	// MongoDB. An ordered insert stops at the first.
	var reply insertReply
	ms, idx := convertDocuments(docs, ordered, &reply, func(d map[string]any) (timeseries.Measurement, error) {
		return timeseries.MeasurementFromDocument(ts, d)
	})
	o.docs.Store(int64(len(ms)))
	res, err := s.db.Insert(r.Context(), name, ms, timeseries.InsertOptions{Unordered: !ordered})
	s.writeInsertReply(w, r, &reply, idx, ordered, res, err)
}

// writeInsertReply answers an insert of either kind of collection: reply
// holds the refusals of the conversion, idx the document index of each
// value stored, res and err what the storage did with them. The write
// errors are in document order; an ordered insert stopped at its first
// refusal and reports that one only, as MongoDB does, whether the
// conversion or the storage refused it.
func (s *Server) writeInsertReply(w http.ResponseWriter, r *http.Request, reply *insertReply, idx []int, ordered bool,
	res timeseries.InsertResult, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	mergeWriteErrors(reply, idx, ordered, res)
	s.metrics.docsInserted.Add(int64(res.Inserted))
	s.metrics.inserted.WithLabelValues("json").Add(float64(res.Inserted))
	if len(reply.WriteErrors) > 0 {
		s.metrics.refused.WithLabelValues("json").Add(float64(len(reply.WriteErrors)))
		writeJSON(w, http.StatusBadRequest, reply)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

// mergeWriteErrors adds the storage's result to reply (see
// writeInsertReply).
func mergeWriteErrors(reply *insertReply, idx []int, ordered bool, res timeseries.InsertResult) {
	reply.Inserted = res.Inserted
	for _, we := range res.Errors {
		reply.WriteErrors = append(reply.WriteErrors, writeErrorOf(idx[we.Index], we.Err))
	}
	slices.SortStableFunc(reply.WriteErrors, func(a, b writeErrorReply) int { return cmp.Compare(a.Index, b.Index) })
	if ordered && len(reply.WriteErrors) > 1 {
		reply.WriteErrors = reply.WriteErrors[:1]
	}
}

// convertDocuments converts the documents of an insert, each refusal a
// write error in reply; an ordered insert stops at the first. It returns the
// converted values and the document index of each.
func convertDocuments[T any](docs []map[string]any, ordered bool, reply *insertReply, conv func(map[string]any) (T, error)) ([]T, []int) {
	out := make([]T, 0, len(docs))
	idx := make([]int, 0, len(docs))
	for i, d := range docs {
		v, err := conv(d)
		if err != nil {
			reply.WriteErrors = append(reply.WriteErrors, writeErrorOf(i, err))
			if ordered {
				break
			}
			continue
		}
		out = append(out, v)
		idx = append(idx, i)
	}
	return out, idx
}

func writeErrorOf(i int, err error) writeErrorReply {
	_, code, msg, _ := classify(err)
	return writeErrorReply{Index: i, Code: int(code), CodeName: code.Name(), Message: msg}
}

// maxDocuments bounds the documents of one request, whatever their size.
const maxDocuments = 1 << 20

// parseDocuments parses a JSON array of objects or NDJSON (one object per
// line, blank lines skipped). Any syntax error, an element that is not an
// object, or what checkJSONText refuses (bytes that are not UTF-8, a field
// named twice in one object, NUL in a name) refuses the whole body: nothing
// of it is stored.
func parseDocuments(body []byte, ndjson bool) ([]map[string]any, error) {
	if ndjson {
		var docs []map[string]any
		line := 0
		for len(body) > 0 {
			line++
			var l []byte
			if i := bytes.IndexByte(body, '\n'); i >= 0 {
				l, body = body[:i], body[i+1:]
			} else {
				l, body = body, nil
			}
			if len(bytes.TrimSpace(l)) == 0 {
				continue
			}
			v, err := decodeJSON(l)
			if err != nil {
				return nil, badRequest("line %d: %v", line, err)
			}
			d, ok := v.(map[string]any)
			if !ok {
				return nil, badRequest("line %d: a document must be a JSON object", line)
			}
			if len(docs) == maxDocuments {
				return nil, badRequest("more than %d documents in one request; send smaller batches", maxDocuments)
			}
			docs = append(docs, d)
		}
		if len(docs) == 0 {
			return nil, badRequest("the body holds no documents")
		}
		return docs, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(err, dec.InputOffset())
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, badRequest("the body must be a JSON array of documents (or NDJSON with Content-Type application/x-ndjson)")
	}
	var docs []map[string]any
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, jsonError(err, dec.InputOffset())
		}
		d, ok := v.(map[string]any)
		if !ok {
			return nil, badRequest("document %d: a document must be a JSON object", len(docs))
		}
		if len(docs) == maxDocuments {
			return nil, badRequest("more than %d documents in one request; send smaller batches", maxDocuments)
		}
		docs = append(docs, d)
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonError(err, dec.InputOffset())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest("malformed JSON: unexpected data after the array at byte %d", dec.InputOffset())
	}
	if len(docs) == 0 {
		return nil, badRequest("the array holds no documents")
	}
	if err := checkJSONText(body, 0); err != nil {
		return nil, err
	}
	return docs, nil
}
