package replset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// Role is a member's part in the set.
type Role uint8

// The roles. Follower is MongoDB's secondary, Leader its primary.
const (
	RoleFollower  Role = 1
	RoleCandidate Role = 2
	RoleLeader    Role = 3
	RoleShutdown  Role = 4
)

func (r Role) String() string {
	switch r {
	case RoleFollower:
		return "follower"
	case RoleCandidate:
		return "candidate"
	case RoleLeader:
		return "leader"
	case RoleShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// Member names one member of a set: its raft ID and address, and whether
// it is a non-voter (a member that receives the log but counts in no
// majority: AddMember).
type Member struct {
	ID       string
	Addr     string
	NonVoter bool
}

// Node is one member of a replica set: a raft node whose committed log
// entries are applied to its own engine. Writes go through the Node and
// are accepted on the leader only; reads go to DB on any member. A Node is
// safe for concurrent use. Close must be called.
type Node struct {
	opts      Options
	store     *logStore
	transport *raft.NetworkTransport
	layer     *tcpLayer
	raft      *raft.Raft
	fsm       *fsm
	db        *timeseries.DB
	snaps     *snapshotStore

	stopPublish chan struct{} // closed by shutdown: publishAddrs and watchLeadership return
	// readyTerm is the term in which this member, elected, applied every
	// entry committed before it (watchLeadership); Role is leader only
	// then.
	readyTerm atomic.Uint64

	closeOnce sync.Once
	closeErr  error
	opened    bool // Open succeeded
	// openApplied is the applied index the member recovered at Open,
	// before raft started (and could apply entries a leader sent).
	openApplied uint64
	rebuilt     bool // Open rebuilt the engine (recoverEngine)
}

// Open opens (or creates) the member in opts.Dir: its engine in
// Dir/engine, its raft log and stable state in Dir/raft, its snapshots in
// Dir/snapshots, and listens for raft traffic on opts.Addr. A new set is
// started by calling Bootstrap on one member; an existing member rejoins
// the set it was in.
func Open(opts Options) (*Node, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	n := &Node{opts: opts}
	ok := false
	defer func() {
		if !ok {
			n.release()
		}
	}()
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("replset: %w", err)
	}
	if err := checkNotStandalone(opts.Dir); err != nil {
		return nil, err
	}
	eng := opts.Engine
	eng.Dir = filepath.Join(opts.Dir, "engine")
	if eng.Logger == nil {
		eng.Logger = opts.Logger
	}
	// The raft log, synced, is the durable record of every write, and a
	// member that stops uncleanly rebuilds its engine from a snapshot and
	// that log (recoverEngine): the engine writes no log of its own. A
	// clean close checkpoints the engine (Pebble syncs its tables) before
	// the member records that it closed cleanly.
	eng.ExternalLog = true
	var err error
	if n.store, err = openLogStore(filepath.Join(opts.Dir, "raft"), opts.Logger); err != nil {
		return nil, err
	}
	raftLog := &raftLogWriter{log: opts.Logger}
	if n.snaps, err = newSnapshotStore(filepath.Join(opts.Dir, "snapshots"), snapshotsKept, opts.Logger); err != nil {
		return nil, err
	}
	from, err := n.recoverEngine(eng.Dir)
	if err != nil {
		return nil, err
	}
	if n.db, err = timeseries.Open(eng); err != nil {
		return nil, err
	}
	if from != "" {
		if err := n.rebuildFrom(from); err != nil {
			return nil, err
		}
	}
	if n.layer, err = newTCPLayer(opts.Addr); err != nil {
		return nil, fmt.Errorf("replset: listen for raft on %s: %w", opts.Addr, err)
	}
	n.transport = raft.NewNetworkTransport(n.layer, 3, opts.TransportTimeout, raftLog)
	if n.fsm, err = newFSM(n.db, n.store, n.snaps.dir, filepath.Join(opts.Dir, "restore.tmp"), opts.Logger, n.halt); err != nil {
		return nil, err
	}
	n.openApplied, _ = n.fsm.state()
	if n.raft, err = raft.NewRaft(n.raftConfig(raftLog), n.fsm, n.store, n.store, n.snaps, n.transport); err != nil {
		return nil, fmt.Errorf("replset: start raft: %w", err)
	}
	// A backup of the engine records the member's raft state with it, so
	// that a member can be seeded from it (Seed).
	n.db.SetBackupHook(n.backupState)
	ok = true
	n.opened = true
	n.stopPublish = make(chan struct{})
	go n.watchLeadership(n.stopPublish)
	if len(opts.Addrs) > 0 {
		go n.publishAddrs(n.stopPublish)
	}
	return n, nil
}

// checkNotStandalone refuses a directory that holds the store of a server
// that is not a member (store/ at its top, as hourglass restore and a
// standalone server leave it): a member keeps its engine in engine/, and
// would start empty beside it.
func checkNotStandalone(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "store")); err != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "raft")); err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s holds the store of a server that is not a replica set member (store/); a member keeps its engine in engine/ and its raft state in raft/: "+
		"seed a member from a backup taken on a member (docs/replication.md), or start it on an empty directory to be sent a snapshot", ErrStandaloneDir, dir)
}

// cleanKey is the stable-store key set to 1 when a member closes cleanly,
// and to 0 when it opens.
var cleanKey = []byte("clean")

// snapshotsKept is how many snapshots a member keeps: the newest may be
// being sent to a member while the next is taken.
const snapshotsKept = 2

// recoverEngine prepares the rebuild of the engine after a member did not
// close cleanly. The engine logs and syncs every entry's changes, and the
// applied index is recorded after them: a member killed in between holds
// changes its applied index does not cover, and applying those entries
// again would store their measurements twice (inserts of measurements are
// not idempotent). Until the engine records the index with the changes
// themselves (docs/replication.md, engine change 1), a member that
// stopped uncleanly starts again from its newest snapshot (returned, for
// rebuildFrom) or, with none, from an empty engine, and applies the log
// after it: raft compacts its log only up to a snapshot.
func (n *Node) recoverEngine(engineDir string) (snapshot string, err error) {
	applied, err := n.store.GetUint64(appliedKey)
	if err != nil {
		return "", fmt.Errorf("replset: read applied index: %w", err)
	}
	clean, err := n.store.GetUint64(cleanKey)
	if err != nil {
		return "", fmt.Errorf("replset: read the clean-shutdown mark: %w", err)
	}
	_, statErr := os.Stat(engineDir)
	if clean != 1 && (applied > 0 || statErr == nil) {
		dir, st, err := n.snaps.latest()
		if err != nil {
			return "", err
		}
		n.opts.Logger.Warn("replset: the member did not close cleanly: rebuilding its engine from its newest snapshot and the raft log",
			"applied", applied, "engine", engineDir, "snapshot", dir, "snapshotApplied", st.Applied)
		if err := os.RemoveAll(engineDir); err != nil {
			return "", fmt.Errorf("replset: remove the engine to rebuild it: %w", err)
		}
		if err := n.store.SetUint64(appliedKey, 0); err != nil {
			return "", fmt.Errorf("replset: reset the applied index: %w", err)
		}
		if err := n.store.SetUint64(appliedTermKey, 0); err != nil {
			return "", fmt.Errorf("replset: reset the applied term: %w", err)
		}
		// The retryable writes applied are the snapshot's (rebuildFrom)
		// and those the log applies again.
		if err := (&sessionTable{}).replace(n.store, nil); err != nil {
			return "", fmt.Errorf("replset: reset the session table: %w", err)
		}
		n.rebuilt = true
		snapshot = dir
	}
	if err := n.store.SetUint64(cleanKey, 0); err != nil {
		return "", fmt.Errorf("replset: clear the clean-shutdown mark: %w", err)
	}
	return snapshot, nil
}

// rebuildFrom loads the snapshot in dir into the new, empty engine.
func (n *Node) rebuildFrom(dir string) error {
	st, err := readState(dir)
	if err != nil {
		return err
	}
	if err := n.db.ReplaceFrom(filepath.Join(dir, engineDir)); err != nil {
		return fmt.Errorf("replset: rebuild the engine from snapshot %s: %w", dir, err)
	}
	if err := (&sessionTable{}).replace(n.store, st.Sessions); err != nil {
		return fmt.Errorf("replset: the session table of snapshot %s: %w", dir, err)
	}
	if err := n.store.SetUint64(appliedTermKey, st.Term); err != nil {
		return fmt.Errorf("replset: record the applied term: %w", err)
	}
	if err := n.store.SetUint64(appliedKey, st.Applied); err != nil {
		return fmt.Errorf("replset: record the applied index: %w", err)
	}
	return nil
}

func (n *Node) raftConfig(w *raftLogWriter) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(n.opts.ID)
	c.HeartbeatTimeout = n.opts.HeartbeatTimeout
	c.ElectionTimeout = n.opts.ElectionTimeout
	c.LeaderLeaseTimeout = n.opts.LeaderLeaseTimeout
	c.SnapshotThreshold = n.opts.SnapshotThreshold
	c.SnapshotInterval = n.opts.SnapshotInterval
	c.TrailingLogs = n.opts.TrailingLogs
	// The engine keeps its state across restarts (recoverEngine decides
	// when it must start from a snapshot).
	c.NoSnapshotRestoreOnStart = true
	c.BatchApplyCh = true
	c.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Output: w, Level: hclog.Info})
	return c
}

// Bootstrap makes members (this member among them) a new set. It is called
// on one member of a set that has never run, or on each of them with the
// same members (raft keeps one configuration); on a member with state it
// fails with an error wrapping raft.ErrCantBootstrap.
func (n *Node) Bootstrap(members []Member) error {
	var conf raft.Configuration
	for _, m := range members {
		sf := raft.Voter
		if m.NonVoter {
			sf = raft.Nonvoter
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: sf, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Addr)})
	}
	if err := n.raft.BootstrapCluster(conf).Error(); err != nil {
		return fmt.Errorf("replset: bootstrap %s: %w", n.opts.ID, err)
	}
	return nil
}

// ID returns the member's raft ID.
func (n *Node) ID() string { return n.opts.ID }

// Addr returns the address the member listens on for raft traffic: the
// one to give other members (with a port chosen by the system when
// Options.Addr has port 0).
func (n *Node) Addr() string { return string(n.transport.LocalAddr()) }

// DB returns the member's engine, for reads. Writes through it bypass the
// set and make this member diverge: write through the Node.
func (n *Node) DB() *timeseries.DB { return n.db }

// Role returns the member's current role. A member that was just
// elected is a candidate until it has applied every entry committed
// before its term (a barrier): until then its engine may miss writes the
// previous leader acknowledged, so it neither takes writes nor answers
// reads as the primary (MongoDB's new primary drains its oplog the same
// way before it reports isWritablePrimary).
func (n *Node) Role() Role {
	switch n.raft.State() {
	case raft.Leader:
		if n.readyTerm.Load() != n.raft.CurrentTerm() {
			return RoleCandidate
		}
		return RoleLeader
	case raft.Candidate:
		return RoleCandidate
	case raft.Shutdown:
		return RoleShutdown
	}
	return RoleFollower
}

// Leader returns the raft address and ID of the leader this member knows
// of; both are "" while there is none.
func (n *Node) Leader() (addr, id string) {
	a, i := n.raft.LeaderWithID()
	return string(a), string(i)
}

// WaitLeader waits until the member knows a leader and returns it.
func (n *Node) WaitLeader(ctx context.Context) (addr, id string, err error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if addr, id = n.Leader(); addr != "" {
			return addr, id, nil
		}
		if n.Role() == RoleShutdown {
			return "", "", ErrClosed
		}
		select {
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-t.C:
		}
	}
}

// AppliedIndex returns the last raft index this member's engine holds.
func (n *Node) AppliedIndex() uint64 {
	i, _ := n.fsm.state()
	return i
}

// Partition cuts this member off from the others for d while it keeps
// running: its raft connections are closed and no new one is made or
// accepted, as a network partition would (a leader steps down when its
// lease runs out, a follower misses entries and catches up after). For
// fault injection: serve exposes it only with --fault-injection. A
// duration of 0 ends a cut early.
func (n *Node) Partition(d time.Duration) { n.layer.partition(d) }

// Snapshot takes a snapshot now (raft's own schedule takes them every
// Options.SnapshotThreshold entries) and compacts the log before it,
// keeping Options.TrailingLogs entries. It fails with ErrNothingToSnapshot
// when nothing was applied since the last one.
func (n *Node) Snapshot() error {
	stats := n.raft.Stats()
	if stats["applied_index"] != "" && stats["applied_index"] == stats["last_snapshot_index"] {
		return ErrNothingToSnapshot
	}
	err := n.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return ErrNothingToSnapshot
	}
	if err != nil {
		return fmt.Errorf("replset: snapshot: %w", err)
	}
	return nil
}

// WaitApplied waits until this member's engine holds the entries up to
// index (the Hourglass-Applied-Index a write's answer carried), so that a
// read on a follower sees that write; ctx bounds the wait.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for n.AppliedIndex() < index {
		if err := n.Halted(); err != nil {
			return fmt.Errorf("%w: %v", ErrHalted, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Halted returns the engine error that stopped this member applying the
// log, nil while it applies.
func (n *Node) Halted() error {
	_, err := n.fsm.state()
	return err
}

// Apply replicates c and returns once a majority holds it and this member
// (the leader) applied it, with what the engine answered. It fails with a
// *NotLeaderError on a follower, with ErrTimeout when the entry is not
// applied within Options.ApplyTimeout or ctx's deadline (it may still be
// applied later), and with ErrLeadershipLost when this member lost the
// leadership before the entry was committed (it may or may not be).
func (n *Node) Apply(ctx context.Context, c *Command) (Result, error) {
	if err := n.checkLeader(); err != nil {
		return Result{}, err
	}
	sessionKey(ctx, c)
	data, own, err := c.encodeOwn(nil, true)
	if err != nil {
		return Result{}, err
	}
	if own != nil {
		// This member applies c's measurements as they are, not decoded
		// again from data; they are not used once Apply returns.
		defer n.fsm.withdraw(data, n.fsm.offer(data, own))
	}
	timeout := n.opts.ApplyTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	f := n.raft.Apply(data, timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err = <-done:
	case <-timer.C:
		return Result{}, fmt.Errorf("%w: %s on %q not applied within %s", ErrTimeout, c.Op, c.Collection, timeout)
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return Result{}, n.notLeader()
	case errors.Is(err, raft.ErrRaftShutdown):
		return Result{}, ErrClosed
	case errors.Is(err, raft.ErrLeadershipLost):
		return Result{}, fmt.Errorf("%w: %s on %q (it may or may not be applied)", ErrLeadershipLost, c.Op, c.Collection)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return Result{}, fmt.Errorf("%w: %s on %q: %v", ErrTimeout, c.Op, c.Collection, err)
	case err != nil:
		return Result{}, fmt.Errorf("replset: %s on %q: %w", c.Op, c.Collection, err)
	}
	r, ok := f.Response().(*applyResult)
	if !ok {
		return Result{}, fmt.Errorf("replset: %s on %q: no result from the state machine", c.Op, c.Collection)
	}
	return r.res, r.err
}

// CheckLeader answers nil on the leader, and on any other member the error
// a write there gets (*NotLeaderError naming the leader, ErrHalted,
// ErrClosed): front doors answer a write with it before looking at their
// member's own data, which a follower may not have caught up on.
func (n *Node) CheckLeader() error { return n.checkLeader() }

func (n *Node) checkLeader() error {
	if err := n.Halted(); err != nil {
		return fmt.Errorf("%w: %v", ErrHalted, err)
	}
	switch n.Role() {
	case RoleLeader:
		return nil
	case RoleShutdown:
		return ErrClosed
	}
	if n.raft.State() == raft.Leader {
		// Elected, still applying the entries before its term: no
		// member takes writes for a moment, as during an election.
		return &NotLeaderError{}
	}
	return n.notLeader()
}

// ReadBarrier makes a linearizable read possible on the leader: it takes
// the commit index, confirms with a majority that this member still leads
// (so no other member can have committed a write after it), and waits
// until this member has applied that far. A read that starts after it
// returns sees every write acknowledged before it was called. On any
// other member it fails as a write would (CheckLeader).
func (n *Node) ReadBarrier(ctx context.Context) error {
	if err := n.checkLeader(); err != nil {
		return err
	}
	index := n.raft.CommitIndex()
	verified := make(chan error, 1)
	go func() { verified <- n.raft.VerifyLeader().Error() }()
	select {
	case err := <-verified:
		if err != nil {
			if errors.Is(err, raft.ErrRaftShutdown) {
				return ErrClosed
			}
			return n.notLeader()
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	return n.WaitApplied(ctx, index)
}

// watchLeadership marks the member ready to lead (readyTerm) once it has
// applied everything committed before its term, each time it is elected.
func (n *Node) watchLeadership(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case leader := <-n.raft.LeaderCh():
			if !leader {
				continue
			}
			term := n.raft.CurrentTerm()
			if err := n.raft.Barrier(0).Error(); err != nil {
				continue // lost the lead, or shut down
			}
			n.readyTerm.Store(term)
		}
	}
}

func (n *Node) notLeader() error {
	addr, id := n.Leader()
	return &NotLeaderError{Leader: addr, LeaderID: id}
}

// CreateCollection creates a collection on every member
// (timeseries.DB.CreateCollection).
func (n *Node) CreateCollection(ctx context.Context, name string, opts timeseries.CollectionOptions) (created bool, err error) {
	r, err := n.Apply(ctx, &Command{Op: OpCreateCollection, Collection: name, Options: opts})
	return r.Created, err
}

// CreateIndex creates an index on every member (timeseries.DB.CreateIndex),
// a TTL index among them.
func (n *Node) CreateIndex(ctx context.Context, name string, spec timeseries.IndexSpec) (created bool, indexName string, err error) {
	r, err := n.Apply(ctx, &Command{Op: OpCreateIndex, Collection: name, Index: spec})
	return r.Created, r.IndexName, err
}

// CreateIndexes creates indexes on every member, all or none
// (timeseries.DB.CreateIndexes): one entry.
func (n *Node) CreateIndexes(ctx context.Context, name string, specs []timeseries.IndexSpec) ([]timeseries.IndexCreated, error) {
	r, err := n.Apply(ctx, &Command{Op: OpCreateIndexes, Collection: name, Indexes: specs})
	return r.Indexes, err
}

// CollMod changes a collection's options on every member
// (timeseries.DB.CollMod): its expireAfterSeconds, its bucketing, and an
// index's expireAfterSeconds, in one entry. Without an index change it is
// the entry older members apply (OpCollMod).
func (n *Node) CollMod(ctx context.Context, name string, m timeseries.CollModOptions) (timeseries.CollModResult, error) {
	op := OpCollMod
	if m.Index != nil {
		op = OpCollModIndexed
	}
	r, err := n.Apply(ctx, &Command{Op: op, Collection: name, CollMod: m})
	return r.CollMod, err
}

// DropIndex drops an index, by name, on every member
// (timeseries.DB.DropIndex).
func (n *Node) DropIndex(ctx context.Context, name, index string) error {
	_, err := n.Apply(ctx, &Command{Op: OpDropIndex, Collection: name, Index: timeseries.IndexSpec{Name: index}})
	return err
}

// DropIndexes drops indexes, by name, on every member, all or none
// (timeseries.DB.DropIndexes): one entry.
func (n *Node) DropIndexes(ctx context.Context, name string, indexes []string) error {
	_, err := n.Apply(ctx, &Command{Op: OpDropIndexes, Collection: name, IndexNames: indexes})
	return err
}

// CollModIndex changes an index's expireAfterSeconds on every member
// (timeseries.DB.CollModIndex).
func (n *Node) CollModIndex(ctx context.Context, name string, m timeseries.IndexMod) (timeseries.IndexModResult, error) {
	r, err := n.Apply(ctx, &Command{Op: OpCollModIndex, Collection: name, IndexMod: m})
	return r.IndexMod, err
}

// DropCollection drops a collection on every member
// (timeseries.DB.DropCollection).
func (n *Node) DropCollection(ctx context.Context, name string) error {
	_, err := n.Apply(ctx, &Command{Op: OpDropCollection, Collection: name})
	return err
}

// Insert inserts a batch on every member (timeseries.DB.Insert). The
// result is the leader's; every member refuses the same rows. Documents
// without _id get one here, before replication, so that every member
// stores the same _id; the caller's documents are not changed.
func (n *Node) Insert(ctx context.Context, name string, b timeseries.Batch, opts timeseries.InsertOptions) (timeseries.InsertResult, error) {
	if b.Documents == nil {
		r, err := n.Apply(ctx, &Command{Op: OpInsertKeyed, Collection: name, Measurements: b.Measurements, Unordered: opts.Unordered})
		return r.Insert, err
	}
	withID := make([]document.Doc, len(b.Documents))
	now := time.Now()
	for i, d := range b.Documents {
		if _, ok := d["_id"]; ok {
			withID[i] = d
			continue
		}
		c := make(document.Doc, len(d)+1)
		for k, v := range d {
			c[k] = v
		}
		c["_id"] = document.NewObjectID(now)
		withID[i] = c
	}
	r, err := n.Apply(ctx, &Command{Op: OpInsertDocuments, Collection: name, Documents: withID, Orders: b.Orders, Unordered: opts.Unordered})
	return r.Insert, err
}

// Delete removes what f matches on every member (timeseries.DB.Delete).
// The filter travels as the text of f.String(), which parses back into a
// filter matching the same measurements and documents; with opts.Limit 1
// each member deletes the first match in _id order, the same document on
// every member.
func (n *Node) Delete(ctx context.Context, name string, f *partialfilter.Filter, opts timeseries.DeleteOptions) (int64, error) {
	op := OpDelete
	switch opts.Limit {
	case 0:
	case 1:
		op = OpDeleteOne
	default:
		return 0, mongoerr.New(mongoerr.BadValue, "a delete's limit must be 0 (all) or 1 (one); got %d", opts.Limit)
	}
	r, err := n.Apply(ctx, &Command{Op: op, Collection: name, Filter: filterText(f)})
	return r.Deleted, err
}

// Update changes documents of a plain collection, or the meta values of
// a time-series collection's series, on every member
// (timeseries.DB.Update), at a time the leader chooses when u.Now is zero:
// a $currentDate sets the same date everywhere. With an error, the result
// counts what was done before it, the same on every member.
func (n *Node) Update(ctx context.Context, name string, u timeseries.Update) (timeseries.UpdateResult, error) {
	if (u.Operators == nil) == (u.Replacement == nil) {
		return timeseries.UpdateResult{}, mongoerr.New(mongoerr.BadValue, "an update holds either update operators or a replacement document")
	}
	c := &Command{Op: OpReplaceDocument, Collection: name, Filter: filterText(u.Filter), Replacement: u.Replacement, ReplacementOrder: u.ReplacementOrder}
	if u.Operators != nil {
		now := u.Now
		if now.IsZero() {
			now = time.Now()
		}
		c.Op, c.Update, c.Multi, c.Now = OpUpdateDocuments, u.Operators.AppendJSON(nil), u.Multi, now.UnixNano()
	}
	r, err := n.Apply(ctx, c)
	return r.Update, err
}

// filterText is the text a replicated command carries for f: what
// partialfilter.ParseJSON reads back into an equivalent filter; {} for
// none.
func filterText(f *partialfilter.Filter) []byte {
	if f == nil {
		return []byte("{}")
	}
	return []byte(f.String())
}

// halt stops raft on this member after an engine failure, so that it
// neither applies further entries nor stays leader.
func (n *Node) halt(error) {
	n.raft.Shutdown().Error()
}

// Close leaves the set's traffic (raft stops; the others elect a leader
// if this one was) and closes the engine. Close twice is harmless.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.release() })
	return n.closeErr
}

func (n *Node) release() error { return n.shutdown(true) }

// shutdown stops the member; with markClean, a member that opened and did
// not halt records that its engine holds exactly what its applied index
// says (see recoverEngine).
func (n *Node) shutdown(markClean bool) error {
	var errs []error
	if n.stopPublish != nil {
		close(n.stopPublish)
	}
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error())
	}
	if n.transport != nil {
		errs = append(errs, n.transport.Close())
	}
	if n.db != nil {
		n.db.SetBackupHook(nil)
		errs = append(errs, n.db.Close())
	}
	if n.store != nil {
		if markClean && n.opened && n.Halted() == nil && errors.Join(errs...) == nil {
			errs = append(errs, n.store.SetUint64(cleanKey, 1))
		}
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

// raftLogWriter passes the lines of raft's logger to the node's logger.
// Its errors and warnings (a snapshot that failed, a peer unreachable)
// keep their level; the rest is Debug.
type raftLogWriter struct{ log *slog.Logger }

func (w *raftLogWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	level := slog.LevelDebug
	switch {
	case strings.Contains(line, "[ERROR]"):
		level = slog.LevelError
	case strings.Contains(line, "[WARN]"):
		level = slog.LevelWarn
	}
	w.log.Log(context.Background(), level, line, "component", "raft")
	return len(p), nil
}
