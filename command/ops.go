package command

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Op is an operation in progress, from any front door: the one registry
// behind MongoDB's currentOp and the HTTP API's /v1/currentop lists every
// door's operations, each door showing them in its clients' shape.
type Op struct {
	ID int64
	// Kind is MongoDB's name of the operation: insert, query, update,
	// remove, getmore or command.
	Kind string
	// DB and Collection name what the operation works on; Collection is
	// empty for a command on a database.
	DB, Collection string
	Door           Door
	// Client is the client's address.
	Client string
	// ConnID is the MongoDB connection's id (currentOp's connectionId); 0
	// for other doors.
	ConnID int64
	// Desc describes the operation ("find", "delete {...}", the MongoDB
	// command's name).
	Desc string
	// Command, when set, renders the operation's command as MongoDB's
	// currentOp shows it; it is called while the operation is listed and
	// must be safe to call until End.
	Command func() map[string]any
	Start   time.Time
	// Docs counts the measurements or documents handled so far.
	Docs atomic.Int64
}

// Registry holds the operations in progress. It is safe for concurrent
// use.
type Registry struct {
	now  func() time.Time
	next atomic.Int64
	mu   sync.Mutex // guards ops
	ops  map[int64]*Op
}

func newRegistry(now func() time.Time) *Registry {
	return &Registry{now: now, ops: make(map[int64]*Op)}
}

// Begin lists o, giving it its ID and start time; the caller must End it.
func (r *Registry) Begin(o *Op) *Op {
	o.ID = r.next.Add(1)
	o.Start = r.now()
	r.mu.Lock()
	r.ops[o.ID] = o
	r.mu.Unlock()
	return o
}

// End removes o from the list.
func (r *Registry) End(o *Op) {
	r.mu.Lock()
	delete(r.ops, o.ID)
	r.mu.Unlock()
}

// OpInfo is a listed operation, as of the listing.
type OpInfo struct {
	*Op
	Age time.Duration
	// CommandDoc is the operation's command rendered (nil when it has
	// none).
	CommandDoc map[string]any
}

// List returns the operations in progress, by ID.
func (r *Registry) List() []OpInfo {
	now := r.now()
	r.mu.Lock()
	out := make([]OpInfo, 0, len(r.ops))
	for _, o := range r.ops {
		info := OpInfo{Op: o, Age: now.Sub(o.Start)}
		if o.Command != nil {
			info.CommandDoc = o.Command()
		}
		out = append(out, info)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Len returns how many operations are in progress.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}
