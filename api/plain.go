package api

import (
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/hourglassdb/hourglass/api/render"
	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// parseFind reads the body of POST .../find, on a collection of either
// kind:
//
//	{"filter": {...}, "projection": {...}, "sort": {"a": 1, "b": -1},
//	 "skip": N, "limit": N, "explain": true, "archive": true}
//
// A time series sorts by its timeField alone; explain serves plain
// collections. The command layer checks both.
func parseFind(name string, raw map[string]any, text []byte) (f command.Find, explain bool, err error) {
	f.Collection = name
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		v := raw[k]
		switch k {
		case "filter":
			if f.Filter, err = parseFilter(v); err != nil {
				return f, false, err
			}
		case "projection":
			m, ok := v.(map[string]any)
			if !ok && v != nil {
				return f, false, badRequest("'projection' must be a JSON object")
			}
			f.Projection = m
		case "sort":
			if f.Sort, err = parseSort(v, text); err != nil {
				return f, false, err
			}
		case "skip":
			if f.Skip, err = intValue("skip", v); err != nil {
				return f, false, err
			}
		case "limit":
			if f.Limit, err = intValue("limit", v); err != nil {
				return f, false, err
			}
		case "explain":
			b, ok := v.(bool)
			if !ok {
				return f, false, badRequest("'explain' must be true or false")
			}
			explain = b
		case "archive":
			b, ok := v.(bool)
			if !ok {
				return f, false, badRequest("'archive' must be true or false")
			}
			f.Archive = b
		default:
			return f, false, badRequest("unknown find option %q; accepted: filter, projection, sort, skip, limit, explain, archive", k)
		}
	}
	return f, explain, nil
}

// parseSort reads a find's "sort" member, its keys in the order of the
// request's text.
func parseSort(v any, text []byte) ([]timeseries.SortKey, error) {
	if v == nil {
		return nil, nil
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, badRequest("'sort' must be a JSON object such as {\"field\": 1}")
	}
	keys, vals, _, err := orderedObject(text, "sort")
	if err != nil {
		return nil, badRequest("malformed 'sort': %v", err)
	}
	var out []timeseries.SortKey
	for i, f := range keys {
		d, err := intValue("sort."+f, vals[i])
		if err != nil || d != 1 && d != -1 {
			if n, isNeg := negativeOne(vals[i]); isNeg {
				d = n
			} else {
				return nil, badRequest("'sort' of %q must be 1 or -1", f)
			}
		}
		out = append(out, timeseries.SortKey{Field: f, Desc: d < 0})
	}
	return out, nil
}

// negativeOne reports whether v is the JSON number -1 (intValue reads
// only non-negative numbers).
func negativeOne(v any) (int64, bool) {
	if n, ok := v.(interface{ String() string }); ok && n.String() == "-1" {
		return -1, true
	}
	return 0, false
}

// findPlain answers a find on a plain collection as JSON or NDJSON:
// documents are Extended JSON, _id first. With "explain": true it answers
// the plan and its counters instead of the documents.
func (s *Server) findPlain(w http.ResponseWriter, r *http.Request, q queryRequest, f command.Find,
	cur *timeseries.Cursor, o *command.Op, explain bool) {
	if explain {
		if err := cur.ForEach(func(document.Doc) error { return nil }); err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"queryPlanner": map[string]any{"namespace": q.name,
			"filter": filterString(f.Filter)}, "executionStats": cur.Plan()})
		return
	}
	var err error
	q.format, err = documentFormat(r, q.format, "documents of a plain collection have no fixed columns for %s: ask for application/json or application/x-ndjson",
		render.JSON, render.NDJSON)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var sep []byte
	var open, end string
	if q.format == render.JSON {
		open, end, sep = "[", "]\n", []byte(",")
	}
	// Nothing is written before the first document (or the end): an
	// error found at once still gets its status.
	started := false
	var buf []byte
	flushAt := 32 << 10
	start := func() {
		if !started {
			w.Header().Set("Content-Type", q.format.ContentType())
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusOK)
			started = true
		}
	}
	var n int64
	emit := func(d document.Doc) error {
		if n == 0 {
			buf = append(buf, open...)
		} else {
			buf = append(buf, sep...)
		}
		if enc := cur.Encoded(); enc != nil {
			// The stored bytes as JSON, in their order, without the map.
			var err error
			if buf, err = document.AppendJSONEncoded(buf, enc); err != nil {
				return err
			}
		} else {
			buf = document.AppendJSONOrdered(buf, d, cur.Order())
		}
		if sep == nil {
			buf = append(buf, '\n')
		}
		n++
		o.Docs.Store(n)
		if len(buf) >= flushAt {
			start()
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		return nil
	}
	if err := cur.ForEach(emit); err != nil {
		if !started {
			s.writeError(w, r, err)
			return
		}
		s.abort(r, err)
	}
	if n == 0 {
		buf = append(buf, open...)
	}
	buf = append(buf, end...)
	start()
	if _, err := w.Write(buf); err != nil {
		s.abort(r, err)
	}
	s.metrics.docsReturned.Add(n)
	s.metrics.returned.Add(float64(n))
}

func filterString(f *partialfilter.Filter) string {
	if f == nil {
		return "{}"
	}
	return f.String()
}

// handleUpdate is POST .../update: {"filter": {...}, "update": {"$set":
// ...}, "multi": false} on a plain collection, or a meta update of a
// time-series collection (multi, filter and operators on the metaField;
// the engine refuses others). Reply {"matched": N, "modified": N}.
func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request) {
	name, raw, f, ok := s.readPlainWrite(w, r, "; {} matches every document", "filter", "update", "multi")
	if !ok {
		return
	}
	um, isObj := raw["update"].(map[string]any)
	if !isObj {
		s.writeError(w, r, mongoerr.New(mongoerr.FailedToParse, "'update' must be a document of update operators such as {\"$set\": {...}}"))
		return
	}
	u, err := document.ParseUpdate(um)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if info, err := s.db.DescribeShallow(r.Context(), name); err == nil && info.Options.TimeSeries != nil {
		u.WidenInts() // a meta value's plain integers are int64, as inserts write them
	}
	multi := false
	if v, ok := raw["multi"]; ok {
		if multi, ok = v.(bool); !ok {
			s.writeError(w, r, badRequest("'multi' must be true or false"))
			return
		}
	}
	o := s.beginOp("update", name, r, fmt.Sprintf("update %s", f))
	defer s.endOp(o)
	res, err := s.w.Update(r.Context(), name, timeseries.Update{Filter: f, Operators: u, Multi: multi})
	o.Docs.Store(res.Modified)
	if err != nil {
		s.writeUpdateError(w, r, res, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleReplace is POST .../replace: {"filter": {"_id": ...},
// "replacement": {...}} replaces the first matching document, keeping its
// _id.
func (s *Server) handleReplace(w http.ResponseWriter, r *http.Request) {
	name, raw, f, ok := s.readPlainWrite(w, r, `, such as {"_id": ...}`, "filter", "replacement")
	if !ok {
		return
	}
	rm, isObj := raw["replacement"].(map[string]any)
	if !isObj {
		s.writeError(w, r, badRequest("'replacement' must be a document"))
		return
	}
	repl, err := document.FromJSON(rm)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o := s.beginOp("update", name, r, fmt.Sprintf("replace %s", f))
	defer s.endOp(o)
	res, err := s.w.Update(r.Context(), name, timeseries.Update{Filter: f, Replacement: repl})
	if err != nil {
		s.writeUpdateError(w, r, res, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// writeUpdateError answers a refused update with the counts of what was
// done before it, as MongoDB's writeErrors do.
func (s *Server) writeUpdateError(w http.ResponseWriter, r *http.Request, res timeseries.UpdateResult, err error) {
	c := s.classify(err)
	if c.Internal || res.Matched == 0 {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, c.HTTPStatus, map[string]any{"matched": res.Matched, "modified": res.Modified,
		"writeErrors": []writeErrorReply{{Index: 0, Code: int(c.Code), CodeName: c.CodeName, Message: c.Message}}})
}

// readPlainWrite reads what an update or replace starts with: a JSON
// command on a plain collection, with only the allowed members, and its
// filter, which must not be empty (noFilter says what to send instead). It
// answers the first error itself, and ok is false then.
func (s *Server) readPlainWrite(w http.ResponseWriter, r *http.Request, noFilter string, allowed ...string) (
	name string, raw map[string]any, f *partialfilter.Filter, ok bool) {
	name, raw, _, ok = s.readCommand(w, r)
	if !ok {
		return "", nil, nil, false
	}
	var err error
	for k := range raw {
		if !slices.Contains(allowed, k) {
			err = badRequest("unknown option %q; accepted: %v", k, allowed)
			break
		}
	}
	if err == nil {
		if f, err = parseFilter(raw["filter"]); err == nil && f == nil {
			err = badRequest("'filter' is required%s", noFilter)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return "", nil, nil, false
	}
	return name, raw, f, true
}
