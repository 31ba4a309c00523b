package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/hourglassdb/hourglass/backup"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
)

// handleBackup takes an online backup and replies once its manifest is
// durable:
//
//	POST /v1/admin/backup {"to": "file:///var/backups/hourglass" | "s3://bucket/prefix", "maxBytesPerSecond": n}
//	-> {"backup": "<id>", "files": N, "bytes": B, "copiedBytes": C, "tookMillis": T, "ok": 1}
//
// maxBytesPerSecond (optional, 0: no limit) paces the backup's reads of
// the store's files. A target that does not parse, or that cannot be opened or written, is
// 400 BadValue naming it; a backup while another runs is 409. The backup
// goes on if the client goes away (a backup cut short is wasted work);
// /v1/currentop lists it, the files copied so far as documentsHandled.
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	var raw map[string]any
	if _, err := s.readJSONRequest(w, r, maxCommandBody, &raw); err != nil {
		s.writeError(w, r, err)
		return
	}
	to, ok := raw["to"].(string)
	var rate int64
	for k, v := range raw {
		switch k {
		case "to":
		case "maxBytesPerSecond":
			n, err := nonNegativeInt(v)
			if err != nil {
				s.writeError(w, r, badRequest("maxBytesPerSecond: %v", err))
				return
			}
			rate = n
		default:
			s.writeError(w, r, badRequest("unknown field %q: a backup takes {\"to\": \"file:///dir\" | \"s3://bucket/prefix\", \"maxBytesPerSecond\": n}", k))
			return
		}
	}
	if !ok || to == "" {
		s.writeError(w, r, badRequest(`"to" must name the backup's target as a string: "file:///dir" or "s3://bucket/prefix"`))
		return
	}
	// The backup is not tied to the request: it finishes, or fails, on
	// its own.
	ctx := context.WithoutCancel(r.Context())
	st, err := objstore.Open(ctx, to, objstore.Options{S3Endpoint: s.opts.BackupS3Endpoint})
	if err != nil {
		if errors.Is(err, objstore.ErrBadURL) {
			s.writeError(w, r, badRequest("backup target %q: %v", to, err))
			return
		}
		s.writeError(w, r, badRequest("backup target %q cannot be written: %v", to, err))
		return
	}
	defer st.Close()

	var progress backup.Progress
	o := s.beginOp("command", "", r, "backup to "+st.String())
	defer s.endOp(o)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				o.Docs.Store(progress.Files.Load())
			}
		}
	}()
	res, err := backup.Create(ctx, s.opts.DB, st, backup.Options{Logger: s.log, Now: s.opts.Now,
		Version: s.opts.Version, Progress: &progress, MaxBytesPerSecond: rate})
	switch {
	case errors.Is(err, timeseries.ErrBackupRunning):
		s.writeError(w, r, newHTTPError(http.StatusConflict, mongoerr.IllegalOperation,
			"a backup is already running; one runs at a time: retry once it is done (see /v1/currentop)"))
		return
	case errors.Is(err, backup.ErrTarget):
		s.writeError(w, r, badRequest("%v", err))
		return
	case err != nil:
		s.writeError(w, r, err)
		return
	}
	o.Docs.Store(int64(res.Files))
	writeJSON(w, http.StatusOK, map[string]any{"backup": res.ID, "files": res.Files, "bytes": res.Bytes,
		"copiedBytes": res.CopiedBytes, "tookMillis": res.Took.Milliseconds(), "ok": 1})
}

// nonNegativeInt is a JSON number that is a whole number >= 0.
func nonNegativeInt(v any) (int64, error) {
	var f float64
	switch v := v.(type) {
	case json.Number:
		n, err := v.Int64()
		if err == nil && n >= 0 {
			return n, nil
		}
		f, _ = v.Float64()
	case float64:
		f = v
	default:
		return 0, fmt.Errorf("must be a number, not %T", v)
	}
	if f < 0 || f != math.Trunc(f) || f > math.MaxInt64/2 {
		return 0, fmt.Errorf("must be a whole number >= 0, not %v", v)
	}
	return int64(f), nil
}
