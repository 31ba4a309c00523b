package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// orderedObject returns the members of the object at path in the JSON
// text, in the order written (a Go map forgets it, and an index key
// pattern is ordered). found is false when the path does not exist.
func orderedObject(text []byte, path ...string) (keys []string, vals []any, found bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	for depth := 0; ; depth++ {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false, err
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return nil, nil, false, nil
		}
		if depth == len(path) {
			break
		}
		// Find the member path[depth] of this object.
		for {
			if !dec.More() {
				return nil, nil, false, nil
			}
			kt, err := dec.Token()
			if err != nil {
				return nil, nil, false, err
			}
			if kt.(string) == path[depth] {
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, false, err
			}
		}
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil, false, err
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false, err
		}
		keys = append(keys, kt.(string))
		vals = append(vals, v)
	}
	return keys, vals, true, nil
}

// parseKeyPattern reads an index key pattern ({"field": 1 | -1, ...}) at
// path, in order.
func parseKeyPattern(text []byte, code mongoerr.Code, path ...string) ([]timeseries.IndexKey, error) {
	keys, vals, found, err := orderedObject(text, path...)
	if err != nil {
		return nil, mongoerr.New(code, "malformed index key pattern: %v", err)
	}
	if !found {
		return nil, nil
	}
	if len(keys) == 0 {
		return nil, mongoerr.New(code, "the index key pattern is empty")
	}
	out := make([]timeseries.IndexKey, len(keys))
	for i, k := range keys {
		n, ok := vals[i].(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || (f != 1 && f != -1) {
			return nil, mongoerr.New(code, "index key %q: the value must be 1 or -1; special index types are not supported", k)
		}
		out[i] = timeseries.IndexKey{Field: k, Direction: int(f)}
	}
	return out, nil
}

// indexDoc is an index as listIndexes shows it. The key keeps its order.
type indexDoc struct {
	spec timeseries.IndexSpec
}

func (d indexDoc) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"v":2,"key":{`)
	for i, k := range d.spec.Key {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(k.Field)
		fmt.Fprintf(&b, "%s:%d", name, k.Direction)
	}
	name, _ := json.Marshal(d.spec.Name)
	fmt.Fprintf(&b, "},\"name\":%s", name)
	if d.spec.ExpireAfterSeconds != nil {
		fmt.Fprintf(&b, ",\"expireAfterSeconds\":%d", *d.spec.ExpireAfterSeconds)
	}
	if d.spec.PartialFilterExpression != nil {
		pf, err := json.Marshal(d.spec.PartialFilterExpression)
		if err != nil {
			return nil, err
		}
		b.WriteString(`,"partialFilterExpression":`)
		b.Write(pf)
	}
	if d.spec.Archive {
		b.WriteString(`,"archive":true`)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// handleCreateIndex is createIndex: 201 {"name"} when created, 200 when an
// identical index exists.
func (s *Server) handleCreateIndex(w http.ResponseWriter, r *http.Request) {
	name, raw, text, ok := s.readCommand(w, r)
	if !ok {
		return
	}
	spec, err := parseIndexSpec(text, raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.opCommand.Add(1)
	created, idx, err := s.cmd.CreateIndex(r.Context(), name, spec)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, map[string]any{"name": idx, "created": created})
}

// parseIndexSpec reads an index definition: raw is the object at path in
// text (the request body), whose key order the key pattern keeps.
func parseIndexSpec(text []byte, raw map[string]any, path ...string) (timeseries.IndexSpec, error) {
	var spec timeseries.IndexSpec
	for k, v := range raw {
		switch k {
		case "key":
			if _, ok := v.(map[string]any); !ok {
				return spec, mongoerr.New(mongoerr.CannotCreateIndex, "'key' must be an object such as {\"timestamp\": 1}")
			}
			key, err := parseKeyPattern(text, mongoerr.CannotCreateIndex, append(path[:len(path):len(path)], "key")...)
			if err != nil {
				return spec, err
			}
			spec.Key = key
		case "name":
			n, ok := v.(string)
			if !ok || n == "" {
				return spec, mongoerr.New(mongoerr.CannotCreateIndex, "'name' must be a non-empty string")
			}
			spec.Name = n
		case "expireAfterSeconds":
			e, err := timeseries.ParseExpireAfterSeconds(v, mongoerr.CannotCreateIndex)
			if err != nil {
				return spec, err
			}
			spec.ExpireAfterSeconds = &e
		case "partialFilterExpression":
			m, ok := v.(map[string]any)
			if !ok {
				return spec, mongoerr.New(mongoerr.CannotCreateIndex, "'partialFilterExpression' must be an object")
			}
			spec.PartialFilterExpression = m
		case "archive":
			b, ok := v.(bool)
			if !ok {
				return spec, mongoerr.New(mongoerr.CannotCreateIndex, "'archive' must be true or false")
			}
			spec.Archive = b
		case "v", "background":
			// Accepted and ignored, as mongosh sends them.
		default:
			return spec, mongoerr.New(mongoerr.CannotCreateIndex,
				"unknown index option %q; accepted: key, name, expireAfterSeconds, partialFilterExpression, archive", k)
		}
	}
	if spec.Key == nil {
		return spec, mongoerr.New(mongoerr.CannotCreateIndex, "'key' is required, e.g. {\"key\": {\"timestamp\": 1}}")
	}
	return spec, nil
}

func (s *Server) handleListIndexes(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathCollection(w, r)
	if !ok {
		return
	}
	specs, err := s.db.ListIndexes(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	docs := make([]indexDoc, len(specs))
	for i := range specs {
		docs[i] = indexDoc{specs[i]}
	}
	writeJSON(w, http.StatusOK, docs)
}

func (s *Server) handleDropIndex(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathCollection(w, r)
	if !ok {
		return
	}
	idx := chi.URLParam(r, "index")
	s.metrics.opCommand.Add(1)
	if err := s.w.DropIndex(r.Context(), name, idx); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("index dropped", "collection", name, "index", idx)
	writeJSON(w, http.StatusOK, map[string]any{"dropped": idx})
}

// parseIndexMod reads the "index" member of a collMod body.
func parseIndexMod(text []byte, v any) (timeseries.IndexMod, error) {
	var m timeseries.IndexMod
	obj, ok := v.(map[string]any)
	if !ok {
		return m, mongoerr.New(mongoerr.InvalidOptions, "'index' must be an object: {\"name\" or \"keyPattern\", \"expireAfterSeconds\"}")
	}
	seenExpire := false
	for k, v := range obj {
		switch k {
		case "name":
			n, ok := v.(string)
			if !ok || n == "" {
				return m, mongoerr.New(mongoerr.InvalidOptions, "'index.name' must be a non-empty string")
			}
			m.Name = n
		case "keyPattern":
			if _, ok := v.(map[string]any); !ok {
				return m, mongoerr.New(mongoerr.InvalidOptions, "'index.keyPattern' must be an object")
			}
			key, err := parseKeyPattern(text, mongoerr.InvalidOptions, "index", "keyPattern")
			if err != nil {
				return m, err
			}
			m.KeyPattern = key
		case "expireAfterSeconds":
			e, err := timeseries.ParseExpireAfterSecondsOption("collMod.index.expireAfterSeconds", v)
			if err != nil {
				return m, err
			}
			m.ExpireAfterSeconds, seenExpire = e, true
		default:
			return m, mongoerr.New(mongoerr.InvalidOptions, "unknown collMod index option %q; accepted: name, keyPattern, expireAfterSeconds", k)
		}
	}
	if !seenExpire {
		return m, mongoerr.New(mongoerr.InvalidOptions, "'index.expireAfterSeconds' is required")
	}
	return m, nil
}

// handleTTLRun runs one TTL pass now and replies with what it deleted.
func (s *Server) handleTTLRun(w http.ResponseWriter, r *http.Request) {
	if s.opts.TTL == nil {
		s.writeError(w, r, newHTTPError(http.StatusServiceUnavailable, mongoerr.IllegalOperation, "this server has no TTL monitor"))
		return
	}
	o := s.beginOp("command", "admin", r, "ttl pass")
	defer s.endOp(o)
	res, err := s.opts.TTL.RunPass(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deletedDocuments": res.DeletedDocuments, "deletedBuckets": res.DeletedBuckets,
		"subPasses": res.SubPasses, "tookMillis": res.Took.Milliseconds(), "ok": 1})
}

// handleTTLPreview is the dry run of a TTL change: what would expire now
// if the collection or its indexes had the proposed values, or a proposed
// new TTL index existed.
//
//	{"expireAfterSeconds": 3600 | "off", "indexes": {"sensor_a": 60},
//	 "newIndex": {"key": {"ts": 1}, "name": "b_day", "expireAfterSeconds": 86400,
//	              "partialFilterExpression": {"sensor": "b"}}}
func (s *Server) handleTTLPreview(w http.ResponseWriter, r *http.Request) {
	name, raw, text, ok := s.readCommand(w, r)
	if !ok {
		return
	}
	var p timeseries.TTLProposal
	for k, v := range raw {
		switch k {
		case "expireAfterSeconds":
			if str, ok := v.(string); ok && str == "off" {
				p.ExpireOff = true
				continue
			}
			e, err := timeseries.ParseExpireAfterSeconds(v, mongoerr.InvalidOptions)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			p.ExpireAfterSeconds = &e
		case "indexes":
			m, ok := v.(map[string]any)
			if !ok {
				s.writeError(w, r, mongoerr.New(mongoerr.InvalidOptions, "'indexes' must map index names to expireAfterSeconds"))
				return
			}
			p.Indexes = map[string]int64{}
			for n, iv := range m {
				e, err := timeseries.ParseExpireAfterSeconds(iv, mongoerr.InvalidOptions)
				if err != nil {
					s.writeError(w, r, err)
					return
				}
				p.Indexes[n] = e
			}
		case "newIndex":
			m, ok := v.(map[string]any)
			if !ok {
				s.writeError(w, r, mongoerr.New(mongoerr.InvalidOptions, "'newIndex' must be an index definition, as createIndexes takes"))
				return
			}
			spec, err := parseIndexSpec(text, m, "newIndex")
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			p.NewIndex = &spec
		default:
			s.writeError(w, r, mongoerr.New(mongoerr.InvalidOptions, "unknown option %q; accepted: expireAfterSeconds, indexes, newIndex", k))
			return
		}
	}
	o := s.beginOp("command", name, r, "ttl preview")
	defer s.endOp(o)
	res, err := s.db.PreviewTTL(r.Context(), name, p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// ttlReply is the "ttl" member of a collection description.
func ttlReply(st *timeseries.TTLState) any {
	if st == nil {
		return nil
	}
	out := map[string]any{
		"expireAfterSeconds": st.ExpireAfterSeconds, "indexes": st.Indexes, "suspended": st.Suspended,
		"reason": st.Reason, "outOfRangeBuckets": st.OutOfRangeBuckets, "nextExpiry": nil,
	}
	if st.NextExpiry != nil {
		out["nextExpiry"] = map[string]string{"$date": formatDate(*st.NextExpiry)}
	}
	return out
}
