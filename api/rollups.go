package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// handleCreateRollup is PUT /v1/collections/{name}/rollups/{rollup}:
// {"window": "1h", "fields": ["temp"], "funcs": ["min", "avg", "max"],
// "expireAfterSeconds": N, "partialFilterExpression": {...}} (the last
// two optional). 201 when created, 200 when the same rollup exists.
func (s *Server) handleCreateRollup(w http.ResponseWriter, r *http.Request) {
	name, raw, _, ok := s.readCommand(w, r)
	if !ok {
		return
	}
	rollup := chi.URLParam(r, "rollup")
	spec, expire, err := parseRollupSpec(raw)
	if err == nil {
		err = timeseries.ValidateName(rollup)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.opCommand.Add(1)
	created, err := s.cmd.CreateRollup(r.Context(), name, rollup, spec, expire)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, map[string]any{"name": rollup, "created": created})
}

// parseRollupSpec reads the body of a rollup's PUT.
func parseRollupSpec(raw map[string]any) (spec timeseries.RollupSpec, expire *int64, err error) {
	strs := func(k string, v any) ([]string, error) {
		list, ok := v.([]any)
		if !ok {
			return nil, badRequest("'%s' must be an array of strings", k)
		}
		out := make([]string, len(list))
		for i, e := range list {
			if out[i], ok = e.(string); !ok {
				return nil, badRequest("'%s' must be an array of strings; element %d is not one", k, i)
			}
		}
		return out, nil
	}
	for k, v := range raw {
		switch k {
		case "window":
			w, ok := v.(string)
			if !ok {
				return spec, nil, badRequest("'window' must be a duration such as \"1h\"")
			}
			spec.Window = w
		case "fields":
			if spec.Fields, err = strs(k, v); err != nil {
				return spec, nil, err
			}
		case "funcs":
			if spec.Funcs, err = strs(k, v); err != nil {
				return spec, nil, err
			}
		case "expireAfterSeconds":
			e, err := timeseries.ParseExpireAfterSeconds(v, mongoerr.BadValue)
			if err != nil {
				return spec, nil, err
			}
			expire = &e
		case "partialFilterExpression":
			m, ok := v.(map[string]any)
			if !ok {
				return spec, nil, badRequest("'partialFilterExpression' must be an object")
			}
			spec.PartialFilterExpression = m
		default:
			return spec, nil, badRequest("unknown rollup option %q; accepted: window, fields, funcs, expireAfterSeconds, partialFilterExpression", k)
		}
	}
	if spec.Window == "" {
		return spec, nil, badRequest("'window' is required, e.g. \"1h\"")
	}
	return spec, expire, nil
}

// handleListRollups is GET /v1/collections/{name}/rollups.
func (s *Server) handleListRollups(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathCollection(w, r)
	if !ok {
		return
	}
	list, err := s.cmd.ListRollups(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// handleDropRollup is DELETE /v1/collections/{name}/rollups/{rollup}: the
// rollup is no longer maintained; its collection stays.
func (s *Server) handleDropRollup(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathCollection(w, r)
	if !ok {
		return
	}
	rollup := chi.URLParam(r, "rollup")
	s.metrics.opCommand.Add(1)
	if err := s.cmd.DropRollup(r.Context(), name, rollup); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"stopped": rollup})
}
