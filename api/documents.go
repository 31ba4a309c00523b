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

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/document"
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
	o := s.beginOp("insert", name, r, "")
	defer s.endOp(o)

	// The body is read before a slot is taken: a slow client holds its
	// connection and its bytes, never a slot others need.
	buf, err := s.readBody(w, r, s.opts.MaxBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer putBody(buf)
	s.metrics.bodyIn.Add(float64(len(buf.b)))
	if err := s.cmd.Ingest().Acquire(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	defer s.cmd.Ingest().Release()
	if err := validateDocuments(buf.b, ndjson); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.opInsert.Add(1)
	var reply insertReply
	if ts == nil {
		reply, err = insertInChunks(newRawDocuments(buf.b, ndjson), ordered, o, plainDocument,
			func(docs []orderedDoc) (timeseries.InsertResult, error) {
				b := timeseries.Batch{Documents: make([]document.Doc, len(docs)), Orders: make([]*document.Order, len(docs))}
				for i, d := range docs {
					b.Documents[i], b.Orders[i] = d.doc, d.order
				}
				return s.w.Insert(r.Context(), name, b, timeseries.InsertOptions{Unordered: !ordered})
			})
	} else {
		// Measurements are converted from the documents' text, without a
		// map per document, by a decoder whose caches outlive the request.
		md := s.docDecoders.Get()
		defer func() {
			md.Reset()
			s.docDecoders.Put(md)
		}()
		reply, err = insertInChunks(newRawDocuments(buf.b, ndjson), ordered, o,
			func(raw []byte) (model.Measurement, error) {
				return md.Decode(ts, raw)
			},
			func(ms []model.Measurement) (timeseries.InsertResult, error) {
				defer md.Reset()
				return s.w.Insert(r.Context(), name, timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{Unordered: !ordered})
			})
	}
	s.writeInsertReply(w, r, &reply, err)
}

// writeInsertReply answers an insert of either kind of collection (see
// insertInChunks). An error with nothing stored is answered as an error;
// one after some documents were stored is answered with its status and the
// reply, whose last write error names it and whose count says what was
// stored.
func (s *Server) writeInsertReply(w http.ResponseWriter, r *http.Request, reply *insertReply, err error) {
	if err != nil && reply.Inserted == 0 {
		s.writeError(w, r, err)
		return
	}
	s.metrics.docsInserted.Add(int64(reply.Inserted))
	s.metrics.inserted.WithLabelValues("json").Add(float64(reply.Inserted))
	if len(reply.WriteErrors) > 0 {
		s.metrics.refused.WithLabelValues("json").Add(float64(len(reply.WriteErrors)))
	}
	switch {
	case err != nil:
		c := s.classify(err)
		if c.Internal {
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		writeJSON(w, c.HTTPStatus, reply)
	case len(reply.WriteErrors) > 0:
		writeJSON(w, http.StatusBadRequest, reply)
	default:
		writeJSON(w, http.StatusOK, reply)
	}
}

// insertChunkBytes is the body text decoded, converted and stored at a
// time. Decoded documents take some 20-30 times their text as Go values:
// 1 MiB keeps those to a few tens of MiB whatever the body's size, while
// a 64 MiB body is still stored in 64 writes to the log.
const insertChunkBytes = 1 << 20

// chunkDecoded, when set (by tests), is called after each chunk of an
// insert is decoded and converted, before it is stored: the moment a
// request holds the most.
var chunkDecoded func()

// insertInChunks stores the documents of a body that validateDocuments
// accepted, about insertChunkBytes of its text at a time: each chunk is
// decoded, converted (conv; its refusals are write errors) and stored
// (insert) before the next is decoded, so the Go values of the whole body
// never exist at once. The reply is the one a single insert of all the
// documents gives: the count stored, the write errors in document order,
// and an ordered insert stops at its first refusal and reports that one
// only. A non-nil error is the storage's (nothing could be attempted for
// that chunk); the reply then holds what earlier chunks stored, with a
// write error at the first document of the chunk that failed.
func insertInChunks[D, T any](dec chunkDecoder[D], ordered bool, o *command.Op, conv func(D) (T, error),
	insert func([]T) (timeseries.InsertResult, error)) (insertReply, error) {
	var reply insertReply
	var docs []D
	for base := 0; ; base += len(docs) {
		var err error
		docs, err = dec.next(docs[:0], insertChunkBytes)
		if err != nil {
			return reply, err // validateDocuments accepted the body: a broken invariant
		}
		if len(docs) == 0 {
			return reply, nil
		}
		var part insertReply
		vals, idx := convertDocuments(docs, ordered, &part, conv)
		if chunkDecoded != nil {
			chunkDecoded()
		}
		clear(docs)
		o.Docs.Add(int64(len(vals)))
		var res timeseries.InsertResult
		if len(vals) > 0 || base == 0 {
			if res, err = insert(vals); err != nil {
				if reply.Inserted > 0 {
					reply.WriteErrors = append(reply.WriteErrors, writeErrorOf(base, err))
				}
				return reply, err
			}
		}
		mergeWriteErrors(&part, idx, ordered, res)
		reply.Inserted += part.Inserted
		for _, we := range part.WriteErrors {
			we.Index += base
			reply.WriteErrors = append(reply.WriteErrors, we)
		}
		if ordered && len(part.WriteErrors) > 0 {
			return reply, nil
		}
	}
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
func convertDocuments[D, T any](docs []D, ordered bool, reply *insertReply, conv func(D) (T, error)) ([]T, []int) {
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

// writeErrorOf is the write error of document i, refused with err (a
// refusal of the document itself: its class needs no replica set).
func writeErrorOf(i int, err error) writeErrorReply {
	c := command.Classify(err, command.HTTP)
	return writeErrorReply{Index: i, Code: int(c.Code), CodeName: c.CodeName, Message: c.Message}
}

// maxDocuments bounds the documents of one request, whatever their size.
const maxDocuments = 1 << 20

// validateDocuments checks a whole insert body before anything of it is
// decoded into values: a JSON array of objects or NDJSON (one object per
// line, blank lines skipped). Any syntax error, an element that is not an
// object, more than maxDocuments, no document at all, or what
// checkJSONText refuses (bytes that are not UTF-8, a field named twice in
// one object, NUL in a name) refuses the whole body: nothing of it is
// stored. It allocates next to nothing for a valid body.
func validateDocuments(body []byte, ndjson bool) error {
	if ndjson {
		return validateNDJSON(body)
	}
	fast := fastValid(body, '[')
	if !fast && !json.Valid(body) {
		return arraySyntaxError(body)
	}
	i := model.SkipJSONSpace(body, 0)
	if body[i] != '[' {
		return errNotArray()
	}
	n := 0
	for i++; ; {
		i = model.SkipJSONSpace(body, i)
		if body[i] == ']' {
			break
		}
		if body[i] == ',' {
			i++
			continue
		}
		if body[i] != '{' {
			return badRequest("document %d: a document must be a JSON object", n)
		}
		if n == maxDocuments {
			return errTooManyDocuments()
		}
		n++
		i = model.SkipJSONValue(body, i)
	}
	if n == 0 {
		return badRequest("the array holds no documents")
	}
	if fast {
		return nil
	}
	return checkJSONText(body, 0)
}

func errNotArray() error {
	return badRequest("the body must be a JSON array of documents (or NDJSON with Content-Type application/x-ndjson)")
}

func errTooManyDocuments() error {
	return badRequest("more than %d documents in one request; send smaller batches", maxDocuments)
}

// arraySyntaxError names what is wrong with a body that is not valid JSON,
// as the decoder finds it reading the array element by element: the
// first element that is not an object, the syntax error, or the data after
// the array, whichever comes first.
func arraySyntaxError(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err, dec.InputOffset())
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return errNotArray()
	}
	var raw json.RawMessage
	for n := 0; dec.More(); n++ {
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			return jsonError(err, dec.InputOffset())
		}
		if len(raw) == 0 || raw[0] != '{' {
			return badRequest("document %d: a document must be a JSON object", n)
		}
		if n == maxDocuments {
			return errTooManyDocuments()
		}
	}
	if _, err := dec.Token(); err != nil {
		return jsonError(err, dec.InputOffset())
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("malformed JSON: unexpected data after the array at byte %d", dec.InputOffset())
	}
	return badRequest("malformed JSON") // json.Valid refused it: not reached
}

func validateNDJSON(body []byte) error {
	n, line := 0, 0
	for len(body) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			l, body = body[:i], body[i+1:]
		} else {
			l, body = body, nil
		}
		i := model.SkipJSONSpace(l, 0)
		if i == len(l) {
			continue
		}
		if fastValid(l, '{') {
			if n == maxDocuments {
				return errTooManyDocuments()
			}
			n++
			continue
		}
		if !json.Valid(l) {
			if _, err := decodeJSON(l); err != nil {
				return badRequest("line %d: %v", line, err)
			}
			return badRequest("line %d: malformed JSON", line) // not reached
		}
		if err := checkJSONText(l, 0); err != nil {
			return badRequest("line %d: %v", line, err)
		}
		if l[i] != '{' {
			return badRequest("line %d: a document must be a JSON object", line)
		}
		if n == maxDocuments {
			return errTooManyDocuments()
		}
		n++
	}
	if n == 0 {
		return badRequest("the body holds no documents")
	}
	return nil
}

// chunkDecoder hands out the documents of a body that validateDocuments
// accepted, a chunk at a time: next appends to dst the documents of the
// next maxBytes of body text (at least one document, unless none is left).
type chunkDecoder[D any] interface {
	next(dst []D, maxBytes int64) ([]D, error)
}

// rawDocuments splits a body that validateDocuments accepted into the
// text of its documents, without decoding them.
type rawDocuments struct {
	body   []byte
	i      int
	ndjson bool
}

func newRawDocuments(body []byte, ndjson bool) *rawDocuments {
	d := &rawDocuments{body: body, ndjson: ndjson}
	if !ndjson {
		d.i = model.SkipJSONSpace(body, 0) + 1 // past '['
	}
	return d
}

func (d *rawDocuments) next(dst [][]byte, maxBytes int64) ([][]byte, error) {
	start := d.i
	if d.ndjson {
		// One document a line, blank lines between.
		for int64(d.i-start) < maxBytes && d.i < len(d.body) {
			line := d.body[d.i:]
			if j := bytes.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			d.i += len(line) + 1
			if k := model.SkipJSONSpace(line, 0); k < len(line) {
				dst = append(dst, line[k:])
			}
		}
		return dst, nil
	}
	for int64(d.i-start) < maxBytes {
		d.i = model.SkipJSONSpace(d.body, d.i)
		if !d.ndjson && d.i < len(d.body) && d.body[d.i] == ',' {
			d.i = model.SkipJSONSpace(d.body, d.i+1)
		}
		if d.i >= len(d.body) || d.body[d.i] != '{' {
			break // the end of the body, or of the array
		}
		end := model.SkipJSONValue(d.body, d.i)
		dst = append(dst, d.body[d.i:end])
		d.i = end
	}
	return dst, nil
}

// orderedDoc is a document of a plain collection and the order its
// fields were written in.
type orderedDoc struct {
	doc   document.Doc
	order *document.Order
}

// plainDocument decodes the text of one document (validateDocuments
// accepted the body) with its field order, in one walk.
func plainDocument(text []byte) (orderedDoc, error) {
	m, order, err := document.ParseJSONOrdered(text)
	if err != nil {
		return orderedDoc{}, err
	}
	doc, err := document.FromJSON(m)
	return orderedDoc{doc: doc, order: order}, err
}
