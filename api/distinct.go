package api

import (
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/hourglassdb/hourglass/api/render"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// handleDistinct serves POST|GET|HEAD /v1/collections/{name}/distinct, body
// {"key": "<dotted path>", "filter": {...}}: the values of key among what
// filter selects, each once, in MongoDB's order of values, as
// {"values": [...]} (command.Service.Distinct; docs/api.md).
func (s *Server) handleDistinct(w http.ResponseWriter, r *http.Request) {
	if !s.secondaryRead(w, r) {
		return
	}
	name, err := collectionName(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The answer is one JSON document: a client that accepts no JSON
	// is 406, as a find would answer it.
	if _, err := render.NegotiateAmong(r.Header.Get("Accept"), render.JSON); err != nil {
		s.writeError(w, r, newHTTPError(http.StatusNotAcceptable, mongoerr.BadValue, "distinct answers JSON: %v", err))
		return
	}
	var raw map[string]any
	if _, err := s.readJSONRequest(w, r, maxCommandBody, &raw); err != nil {
		s.writeError(w, r, err)
		return
	}
	key, filter, err := parseDistinct(raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.opQuery.Add(1)
	o := s.beginOp("query", name, r, "distinct")
	defer s.endOp(o)
	values, err := s.cmd.Distinct(r.Context(), name, key, filter)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o.Docs.Add(int64(len(values)))
	s.metrics.docsReturned.Add(int64(len(values)))
	s.metrics.returned.Add(float64(len(values)))
	b := append(make([]byte, 0, 64+16*len(values)), `{"values":[`...)
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = document.AppendJSONValue(b, v, nil)
	}
	b = append(b, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

// parseDistinct reads a distinct's body: key, a string (what it must
// name is the command's to check), and an optional filter.
func parseDistinct(raw map[string]any) (key string, f *partialfilter.Filter, err error) {
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		v := raw[k]
		switch k {
		case "key":
			s, ok := v.(string)
			if !ok {
				return "", nil, badRequest("'key' must be a string: the dotted path whose values to list")
			}
			key = s
		case "filter":
			if f, err = parseFilter(v); err != nil {
				return "", nil, err
			}
		default:
			return "", nil, badRequest("unknown distinct option %q; accepted: key, filter", k)
		}
	}
	return key, f, nil
}
