package api

import (
	"net/http"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/api/render"
	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// parsePipeline reads the body {"pipeline": [<stage>, ...],
// "allowDiskUse": false, "archive": false} of POST
// .../aggregate: MongoDB's stages as relaxed Extended JSON, read by the
// MongoDB driver's own reader into BSON (a JSON integer is an int32 where
// it fits, else an int64; a number with a fraction or an exponent a
// double; fields in the order written), so that the command layer reads
// the stages as the wire door hands them over.
func parsePipeline(name string, raw map[string]any, text []byte) (command.Pipeline, error) {
	p := command.Pipeline{Collection: name, Documents: true}
	for k, v := range raw {
		switch k {
		case "pipeline":
		case "allowDiskUse":
			b, ok := v.(bool)
			if !ok {
				return p, badRequest("'allowDiskUse' must be true or false")
			}
			p.AllowDiskUse = b
		case "archive":
			b, ok := v.(bool)
			if !ok {
				return p, badRequest("'archive' must be true or false")
			}
			p.Archive = b
		default:
			return p, badRequest("a body with 'pipeline' takes only 'allowDiskUse' and 'archive' beside it; got %q (the window form's filter, window, groupBy, fields and funcs are a $match and a $group in the pipeline)", k)
		}
	}
	if _, ok := raw["pipeline"].([]any); !ok {
		return p, mongoerr.New(mongoerr.TypeMismatch, "'pipeline' option must be specified as an array")
	}
	var doc bson.Raw
	if err := bson.UnmarshalExtJSON(text, false, &doc); err != nil {
		return p, badRequest("'pipeline' is not valid Extended JSON: %v", err)
	}
	arr, ok := bsoncore.Document(doc).Lookup("pipeline").ArrayOK()
	if !ok {
		return p, mongoerr.New(mongoerr.TypeMismatch, "'pipeline' option must be specified as an array")
	}
	var err error
	p.Stages, err = command.ParseStages(bsoncore.Document(arr))
	return p, err
}

// documentFormat is the format of an answer made of documents, which
// write only offers: the best of them the Accept header takes (Arrow
// first, JSON at a lower q-value: JSON). None is 406 with msg, which names
// best, the format negotiated among all.
func documentFormat(r *http.Request, best render.Format, msg string, offers ...render.Format) (render.Format, error) {
	f, err := render.NegotiateAmong(r.Header.Get("Accept"), offers...)
	if err != nil {
		return best, newHTTPError(http.StatusNotAcceptable, mongoerr.BadValue, msg, best.ContentType())
	}
	return f, nil
}

// aggregatePipeline answers POST .../aggregate with a pipeline, on a
// collection of either kind: its documents as Extended JSON (a JSON array,
// or NDJSON), each in its field order, or CSV whose columns are the first
// document's fields.
func (s *Server) aggregatePipeline(w http.ResponseWriter, r *http.Request, q queryRequest) {
	p, err := parsePipeline(q.name, q.raw, q.text)
	if err == nil {
		q.format, err = documentFormat(r, q.format, "a pipeline's documents have no fixed columns for %s: ask for application/json, application/x-ndjson or text/csv",
			render.JSON, render.NDJSON, render.CSV)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.opQuery.Add(1)
	o := s.beginOp("query", q.name, r, "aggregate")
	defer s.endOp(o)
	res, err := s.cmd.Pipeline(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer res.Close()
	// The first document is read before the status is sent, so that an
	// error found there (a memory limit, a stage's input) is answered as
	// one.
	d, err := res.Docs.Next()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", q.format.ContentType())
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	enc := docEncoder{format: q.format}
	var n int64
	var buf []byte
	for ; d != nil; d, err = res.Docs.Next() {
		buf = enc.append(buf, d)
		n++
		o.Docs.Store(n)
		if len(buf) >= 32<<10 {
			if _, err := w.Write(buf); err != nil {
				s.abort(r, err)
			}
			buf = buf[:0]
		}
	}
	if err != nil {
		s.abort(r, err)
	}
	buf = enc.finish(buf)
	if _, err := w.Write(buf); err != nil {
		s.abort(r, err)
	}
	s.metrics.docsReturned.Add(n)
	s.metrics.returned.Add(float64(n))
}

// docEncoder writes a pipeline's documents in one format.
type docEncoder struct {
	format render.Format
	n      int
	cols   []string // CSV: the first document's fields
}

func (e *docEncoder) append(b []byte, d map[string]any) []byte {
	o := command.DocOrder(d)
	e.n++
	switch e.format {
	case render.CSV:
		if e.n == 1 {
			if o == nil {
				// As document.AppendJSONOrdered writes it: _id first.
				o = &document.Order{Keys: []string{"_id"}}
			}
			e.cols = o.FieldsOf(d)
			for i, c := range e.cols {
				if i > 0 {
					b = append(b, ',')
				}
				b = render.AppendCSVValue(b, c, nil)
			}
			b = append(b, '\n')
		}
		for i, c := range e.cols {
			if i > 0 {
				b = append(b, ',')
			}
			b = render.AppendCSVValue(b, d[c], o.Child(c))
		}
		return append(b, '\n')
	case render.NDJSON:
		return append(document.AppendJSONOrdered(b, d, o), '\n')
	}
	if e.n == 1 {
		b = append(b, '[')
	} else {
		b = append(b, ',')
	}
	return document.AppendJSONOrdered(b, d, o)
}

func (e *docEncoder) finish(b []byte) []byte {
	if e.format != render.JSON {
		return b
	}
	if e.n == 0 {
		b = append(b, '[')
	}
	return append(b, "]\n"...)
}
