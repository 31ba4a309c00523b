package api

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// op is an operation in progress, listed by /v1/currentop.
type op struct {
	id     uint64
	kind   string // insert, query, aggregate, delete, command
	ns     string // collection
	client string
	desc   string
	start  time.Time
	// docs counts the measurements the operation has handled so far.
	docs atomic.Int64
}

// opRegistry holds the operations in progress.
type opRegistry struct {
	now  func() time.Time
	next atomic.Uint64
	mu   sync.Mutex // guards ops
	ops  map[uint64]*op
}

func newOpRegistry(now func() time.Time) *opRegistry {
	return &opRegistry{now: now, ops: make(map[uint64]*op)}
}

// begin registers an operation; the caller must call end.
func (r *opRegistry) begin(kind, ns string, req *http.Request, desc string) *op {
	o := &op{id: r.next.Add(1), kind: kind, ns: ns, desc: desc, start: r.now()}
	if req != nil {
		o.client = req.RemoteAddr
	}
	r.mu.Lock()
	r.ops[o.id] = o
	r.mu.Unlock()
	return o
}

func (r *opRegistry) end(o *op) {
	r.mu.Lock()
	delete(r.ops, o.id)
	r.mu.Unlock()
}

// opInfo is one entry of currentop's "inprog" array, in MongoDB's shape.
type opInfo struct {
	OpID             uint64 `json:"opid"`
	Op               string `json:"op"`
	NS               string `json:"ns,omitempty"`
	Client           string `json:"client,omitempty"`
	Desc             string `json:"desc,omitempty"`
	Active           bool   `json:"active"`
	SecsRunning      int64  `json:"secs_running"`
	MicrosecsRunning int64  `json:"microsecs_running"`
	CurrentOpTime    string `json:"currentOpTime"`
	DocumentsHandled int64  `json:"documentsHandled"`
}

func (r *opRegistry) list() []opInfo {
	now := r.now()
	r.mu.Lock()
	out := make([]opInfo, 0, len(r.ops))
	for _, o := range r.ops {
		age := now.Sub(o.start)
		out = append(out, opInfo{
			OpID: o.id, Op: o.kind, NS: o.ns, Client: o.client, Desc: o.desc, Active: true,
			SecsRunning: int64(age / time.Second), MicrosecsRunning: int64(age / time.Microsecond),
			CurrentOpTime: o.start.UTC().Format(time.RFC3339Nano), DocumentsHandled: o.docs.Load(),
		})
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].OpID < out[j].OpID })
	return out
}

// admission bounds the ingest requests in progress and those waiting, so
// that the server never buffers without limit: past the queue, requests are
// refused with 429 and Retry-After.
type admission struct {
	slots   chan struct{}
	waiting atomic.Int64
	maxWait int64
	// timeout bounds the wait for a slot; past it the answer is 503.
	timeout time.Duration
}

func newAdmission(slots, queue int) *admission {
	return &admission{slots: make(chan struct{}, slots), maxWait: int64(max(queue, 0)), timeout: 30 * time.Second}
}

var errQueueFull = &httpError{status: http.StatusTooManyRequests, code: mongoerr.IngressRequestRateLimitExceeded,
	msg: "too many ingest requests in progress; retry later"}

var errQueueTimeout = &httpError{status: http.StatusServiceUnavailable, code: mongoerr.IngressRequestRateLimitExceeded,
	msg: "the ingest queue did not drain in time; retry later"}

// acquire takes a slot, waiting in the bounded queue if need be. The caller
// must release a slot it got.
func (a *admission) acquire(ctx context.Context) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	default:
	}
	if a.waiting.Add(1) > a.maxWait {
		a.waiting.Add(-1)
		return errQueueFull
	}
	defer a.waiting.Add(-1)
	t := time.NewTimer(a.timeout)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-t.C:
		return errQueueTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *admission) release() { <-a.slots }

func (a *admission) inUse() int { return len(a.slots) }

func (s *Server) handleCurrentOp(w http.ResponseWriter, r *http.Request) {
	ops := s.ops.list()
	if s.opts.TTL != nil {
		if cur := s.opts.TTL.Current(); cur != nil {
			// The TTL monitor's batch, as MongoDB shows it: a remove by the
			// "TTLMonitor" client.
			age := s.opts.Now().Sub(cur.Started)
			ops = append(ops, opInfo{Op: "remove", NS: cur.Target.Collection, Client: "TTLMonitor",
				Desc: "TTLMonitor " + cur.Target.String(), Active: true,
				SecsRunning: int64(age / time.Second), MicrosecsRunning: int64(age / time.Microsecond),
				CurrentOpTime: cur.Started.UTC().Format(time.RFC3339Nano)})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"inprog": ops, "ok": 1})
}

// isClientGone reports errors caused by the client leaving.
func isClientGone(err error) bool {
	return errors.Is(err, context.Canceled)
}
