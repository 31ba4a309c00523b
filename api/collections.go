package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// maxCommandBody bounds the body of commands and queries (everything but
// ingest): a filter of a megabyte is already absurd.
const maxCommandBody = 1 << 20

// collectionName returns the {name} URL parameter, validated.
func collectionName(r *http.Request) (string, error) {
	name := chi.URLParam(r, "name")
	if err := timeseries.ValidateName(name); err != nil {
		return "", err
	}
	return name, nil
}

// pathCollection is collectionName for a handler: it answers the error
// itself, and ok is false then.
func (s *Server) pathCollection(w http.ResponseWriter, r *http.Request) (name string, ok bool) {
	name, err := collectionName(r)
	if err != nil {
		s.writeError(w, r, err)
		return "", false
	}
	return name, true
}

// readCommand reads what a command on a collection starts with: the
// collection's name from the URL, then the JSON request (raw, and its text
// for the members whose order matters). It answers the first error itself,
// and ok is false then.
func (s *Server) readCommand(w http.ResponseWriter, r *http.Request) (name string, raw map[string]any, text []byte, ok bool) {
	name, err := collectionName(r)
	if err == nil {
		text, err = s.readJSONRequest(w, r, maxCommandBody, &raw)
	}
	if err != nil {
		s.writeError(w, r, err)
		return "", nil, nil, false
	}
	return name, raw, text, true
}

// decodeJSON decodes one JSON value with numbers as json.Number, refusing
// trailing data and what checkJSONText refuses. Errors name the byte
// offset.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, jsonError(err, dec.InputOffset())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest("malformed JSON: unexpected data after the value at byte %d", dec.InputOffset())
	}
	if err := checkJSONText(b, 0); err != nil {
		return nil, err
	}
	return v, nil
}

func jsonError(err error, offset int64) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return badRequest("malformed JSON at byte %d: %v", se.Offset, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return badRequest("malformed JSON: the body ends early (after %d bytes)", offset)
	}
	return badRequest("malformed JSON at byte %d: %v", offset, err)
}

// collectionReply is a collection's description as the API shows it.
type collectionReply struct {
	Name         string                       `json:"name"`
	Type         string                       `json:"type"`
	Options      timeseries.CollectionOptions `json:"options"`
	Count        int64                        `json:"count"`
	Buckets      int64                        `json:"buckets"`
	StorageBytes int64                        `json:"storageBytes"`
	DataBytes    int64                        `json:"dataBytes,omitempty"`
	Fields       map[string][]string          `json:"fields,omitempty"`
	Created      string                       `json:"created"`
	TTL          any                          `json:"ttl,omitempty"`
	Archive      *archiveReply                `json:"archive,omitempty"`
}

// archiveReply is what archive passes moved out of a collection.
type archiveReply struct {
	Files        int64 `json:"files"`
	Bytes        int64 `json:"bytes"`
	Measurements int64 `json:"measurements"`
}

func describeReply(info timeseries.CollectionInfo) collectionReply {
	typ := "collection"
	if info.Options.TimeSeries != nil {
		typ = "timeseries"
	}
	out := collectionReply{
		Name: info.Name, Type: typ, Options: info.Options, Count: info.Count, Buckets: info.Buckets,
		StorageBytes: info.StorageBytes, DataBytes: info.DataBytes, Fields: info.Fields, Created: formatDate(info.Created),
	}
	if a := info.Archived; a != nil {
		out.Archive = &archiveReply{Files: a.Files, Bytes: a.Bytes, Measurements: a.Measurements}
	}
	return out
}

func (s *Server) handleCreateCollection(w http.ResponseWriter, r *http.Request) {
	name, raw, _, ok := s.readCommand(w, r)
	if !ok {
		return
	}
	opts, err := timeseries.ParseCollectionOptions(raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.opCommand.Add(1)
	created, err := s.w.CreateCollection(r.Context(), name, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := s.db.Describe(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		s.log.Info("collection created", "collection", name)
	}
	writeJSON(w, status, describeReply(info))
}

func (s *Server) handleListCollections(w http.ResponseWriter, r *http.Request) {
	s.metrics.opCommand.Add(1)
	infos, err := s.db.ListCollections(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]collectionReply, len(infos))
	for i, info := range infos {
		out[i] = describeReply(info)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDescribeCollection(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathCollection(w, r)
	if !ok {
		return
	}
	s.metrics.opCommand.Add(1)
	info, err := s.db.Describe(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	reply := describeReply(info)
	st, err := s.db.TTLState(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if st != nil {
		reply.TTL = ttlReply(st)
	}
	writeJSON(w, http.StatusOK, reply)
}

func (s *Server) handleDropCollection(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathCollection(w, r)
	if !ok {
		return
	}
	s.metrics.opCommand.Add(1)
	o := s.beginOp("command", name, r, "drop")
	defer s.endOp(o)
	if err := s.w.DropCollection(r.Context(), name); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("collection dropped", "collection", name)
	writeJSON(w, http.StatusOK, map[string]any{"dropped": name})
}

// handleCollMod is MongoDB's collMod: the collection-level
// expireAfterSeconds (a number or "off") and the time-series bucketing.
func (s *Server) handleCollMod(w http.ResponseWriter, r *http.Request) {
	name, raw, text, ok := s.readCommand(w, r)
	if !ok {
		return
	}
	var idx *timeseries.IndexMod
	if v, ok := raw["index"]; ok {
		im, err := parseIndexMod(text, v)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		idx = &im
		delete(raw, "index")
	}
	var m timeseries.CollModOptions
	if idx == nil || len(raw) > 0 {
		var err error
		if m, err = parseCollMod(raw); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	s.metrics.opCommand.Add(1)
	mod := command.CollMod{Index: idx}
	if idx == nil || len(raw) > 0 {
		mod.Collection = &m
	}
	res, err := s.cmd.CollMod(r.Context(), name, mod)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	reply := map[string]any{}
	if res.Index != nil {
		reply["index"] = map[string]any{"name": res.Index.Name}
		reply["expireAfterSeconds_old"] = expireValue(res.Index.OldExpireAfterSeconds)
		reply["expireAfterSeconds_new"] = res.Index.NewExpireAfterSeconds
	}
	if c := res.Collection; c != nil {
		if m.ExpireAfterSeconds != nil || m.ExpireOff {
			reply["expireAfterSeconds_old"] = expireValue(c.OldExpireAfterSeconds)
			reply["expireAfterSeconds_new"] = expireValue(c.NewExpireAfterSeconds)
		}
		if m.TimeSeries != nil {
			reply["timeseries_old"] = c.OldTimeSeries
			reply["timeseries_new"] = c.NewTimeSeries
		}
	}
	writeJSON(w, http.StatusOK, reply)
}

func expireValue(v *int64) any {
	if v == nil {
		return "off"
	}
	return *v
}

func parseCollMod(raw map[string]any) (timeseries.CollModOptions, error) {
	var m timeseries.CollModOptions
	if len(raw) == 0 {
		return m, mongoerr.New(mongoerr.InvalidOptions, "collMod needs at least one of 'expireAfterSeconds', 'index', 'timeseries'")
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		v := raw[k]
		switch k {
		case "expireAfterSeconds":
			var err error
			if m.ExpireAfterSeconds, m.ExpireOff, err = timeseries.ParseCollModExpire(v); err != nil {
				return m, err
			}
		case "timeseries":
			var err error
			if m.TimeSeries, err = timeseries.ParseCollModTimeSeries(v); err != nil {
				return m, err
			}
		case "archive":
			b, ok := v.(bool)
			if !ok {
				return m, mongoerr.New(mongoerr.TypeMismatch, "'archive' must be true or false")
			}
			m.Archive = &b
		default:
			return m, mongoerr.New(mongoerr.InvalidOptions, "unknown collMod option %q; accepted: 'expireAfterSeconds', 'archive', 'index', 'timeseries'", k)
		}
	}
	return m, nil
}

// handleCompact writes every bucket to disk and compacts the store, so that
// deleted ranges give their space back and the size on disk settles. It
// works on the whole store; the collection must exist.
func (s *Server) handleCompact(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathCollection(w, r)
	if !ok {
		return
	}
	if _, err := s.db.DescribeShallow(r.Context(), name); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.opCommand.Add(1)
	o := s.beginOp("command", name, r, "compact")
	defer s.endOp(o)
	start := time.Now()
	if err := s.db.Flush(); err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := s.db.Describe(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"compacted": name, "storageBytes": info.StorageBytes,
		"tookMillis": time.Since(start).Milliseconds()})
}
