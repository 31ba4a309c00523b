package api

import (
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/prometheus/procfs"

	"github.com/hourglassdb/hourglass/ttl"
)

// handleStatus is serverStatus: the server's identity, uptime, operation
// counters, memory, and the storage engine's figures.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	now := s.opts.Now()
	host, _ := os.Hostname()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := s.metrics
	colls, err := s.db.ListCollections(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var count, buckets, storage int64
	for _, c := range colls {
		count += c.Count
		buckets += c.Buckets
		storage += c.StorageBytes
	}
	up := now.Sub(s.started)
	writeJSON(w, http.StatusOK, map[string]any{
		"host":         host,
		"version":      s.opts.Version,
		"build":        s.opts.Build.reply(),
		"process":      "hourglass",
		"pid":          os.Getpid(),
		"uptime":       int64(up / time.Second),
		"uptimeMillis": int64(up / time.Millisecond),
		"localTime":    map[string]string{"$date": formatDate(now)},
		"opcounters": map[string]int64{
			"insert": m.opInsert.Load(), "query": m.opQuery.Load(),
			"delete": m.opDelete.Load(), "command": m.opCommand.Load(),
		},
		"mem": memStatus(&ms),
		"ingest": map[string]any{
			"inProgress": s.cmd.Ingest().InUse(),
			"queued":     s.cmd.Ingest().Waiting(),
			"slots":      s.cmd.Ingest().Slots(),
			"queueLimit": s.cmd.Ingest().QueueLimit(),
		},
		"storageEngine": map[string]any{
			"name":         "hourglass",
			"collections":  len(colls),
			"measurements": count,
			"buckets":      buckets,
			"storageBytes": storage,
		},
		"metrics": map[string]any{
			"document": map[string]int64{
				"inserted": m.docsInserted.Load(), "deleted": m.docsDeleted.Load(), "returned": m.docsReturned.Load(),
			},
			"ttl": s.ttlStats(),
		},
		"ok": 1,
	})
}

// Build is what a binary knows of how it was built, from the information Go
// embeds in it (runtime/debug.ReadBuildInfo; what `go version -m` shows).
type Build struct {
	// Module is the main module's version as Go stamped it: a tag, a
	// pseudo-version (v0.0.0-date-commit, with "+dirty" for a modified
	// tree) or "(devel)" when it knew none.
	Module string
	// Revision is the commit the binary was built from; "" when the binary
	// carries no version control information (go run, go build
	// -buildvcs=false, or a build outside a git checkout). Time is the
	// commit's time and Modified whether the tree had uncommitted changes.
	Revision string
	Time     time.Time
	Modified bool
	// Go is the toolchain's version, such as "go1.26.8".
	Go string
}

// reply is the "build" member of /v1/status: vcs is null without version
// control information.
func (b Build) reply() map[string]any {
	out := map[string]any{"module": b.Module, "go": b.Go, "vcs": nil}
	if b.Revision != "" {
		out["vcs"] = map[string]any{"revision": b.Revision, "time": formatDate(b.Time), "modified": b.Modified}
	}
	return out
}

// ttlStats are the TTL monitor's counters (zeros without a monitor).
func (s *Server) ttlStats() ttl.Stats {
	if s.opts.TTL == nil {
		return ttl.Stats{}
	}
	return s.opts.TTL.Stats()
}

// memStatus is serverStatus' mem: MongoDB's resident and peak resident
// sizes in MiB (from /proc on Linux; absent elsewhere) and the Go heap.
func memStatus(ms *runtime.MemStats) map[string]any {
	m := map[string]any{
		"bits":       64,
		"heapBytes":  ms.HeapAlloc,
		"sysBytes":   ms.Sys,
		"goroutines": runtime.NumGoroutine(),
	}
	if p, err := procfs.Self(); err == nil {
		if st, err := p.NewStatus(); err == nil {
			m["resident"] = int64(st.VmRSS >> 20)
			m["residentPeak"] = int64(st.VmHWM >> 20)
		}
	}
	return m
}
