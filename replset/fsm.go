package replset

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble"
	"github.com/hashicorp/raft"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// appliedKey is the stable-store key of the last raft index whose command
// the engine holds (durably: every engine write returns once it is in the
// engine's log). After a restart raft hands the FSM the log again from
// its last snapshot; entries up to this index are skipped, not applied
// twice.
var appliedKey = []byte("applied")

// appliedTermKey is the stable-store key of the term of the entry at
// appliedKey, recorded with it (a backup of the member records both: seedState).
var appliedTermKey = []byte("appliedTerm")

// Result is what a replicated command did, on the member that applied it.
type Result struct {
	// Created is CreateCollection's answer: false when the collection
	// existed with the same options.
	Created bool
	// Insert is the result of OpInsert and OpInsertDocuments: refusals of
	// single measurements or documents are here, not in the error.
	Insert timeseries.InsertResult
	// Deleted counts what OpDelete, OpDeleteDocuments and OpDeleteOne
	// removed.
	Deleted int64
	// IndexName is the name of the index OpCreateIndex made or found.
	IndexName string
	// Update is what OpUpdateDocuments and OpReplaceDocument matched and
	// changed; with an error, what they did before it.
	Update timeseries.UpdateResult
	// Indexes is what OpCreateIndexes did with each index.
	Indexes []timeseries.IndexCreated
	// CollMod and IndexMod are what OpCollMod (and OpCollModIndexed) and
	// OpCollModIndex changed.
	CollMod  timeseries.CollModResult
	IndexMod timeseries.IndexModResult
}

// applyResult is what the FSM returns to raft for one entry; the leader's
// Apply hands it to the caller.
type applyResult struct {
	res Result
	err error
}

// fsm applies committed commands to the engine through its exported API.
// raft calls ApplyBatch from one goroutine; mu guards applied and halted
// against Node's readers. applyMu is held while the engine is changed (a
// batch applied, a snapshot restored), so that a holder sees the engine
// at exactly the applied index (Node.backupState).
type fsm struct {
	db    *timeseries.DB
	store *logStore
	log   *slog.Logger
	// snapDir holds the snapshot store and the checkpoints taken for it;
	// restoreDir is where a received snapshot is unpacked.
	snapDir, restoreDir string
	// onHalt is called once, in its own goroutine, when the member halts.
	onHalt func(error)

	applyMu sync.Mutex

	mu      sync.Mutex
	applied uint64 // last index applied and recorded under appliedKey
	// term is the term of the entry at applied (appliedTermKey); 0 when
	// unknown (recorded by an older version, or nothing applied).
	term uint64
	// unrecorded, set by tests, applies entries without recording the
	// applied index: a member killed between the two.
	unrecorded atomic.Bool
	halted     error // the engine error that stopped this member, nil while it applies
	// restores counts the snapshots restored.
	restores atomic.Int64
	// members is the address table OpMember entries build.
	members *memberTable
	// sessions are the retryable writes applied (sessions.go).
	sessions *sessionTable
	// offered holds the leader's own commands by their entry's data
	// (offer): what this member would decode from the entry, applied
	// without decoding it.
	offered sync.Map // *byte -> *handoff
}

// A handoff is a command offered to the state machine along with its
// encoding, until the state machine takes it or its writer withdraws it.
type handoff struct {
	c     *Command
	state atomic.Int32  // handoffOffered, then handoffTaken or handoffWithdrawn
	done  chan struct{} // closed once a taken command is no longer used
}

const (
	handoffOffered int32 = iota
	handoffTaken
	handoffWithdrawn
)

// offer makes c the command applied for the entry whose data is data (the
// very slice given to raft, which hands the leader's state machine the
// same one), instead of decoding data. c must be what decoding data gives.
// The caller must withdraw it before it reuses anything c refers to.
func (f *fsm) offer(data []byte, c *Command) *handoff {
	h := &handoff{c: c, done: make(chan struct{})}
	f.offered.Store(unsafe.SliceData(data), h)
	return h
}

// withdraw ends an offer: it returns at once if the state machine did not
// take the command, else once it no longer uses it.
func (f *fsm) withdraw(data []byte, h *handoff) {
	f.offered.Delete(unsafe.SliceData(data))
	if !h.state.CompareAndSwap(handoffOffered, handoffWithdrawn) {
		<-h.done
	}
}

// take returns the command offered for data, if any is still offered.
func (f *fsm) take(data []byte) *handoff {
	v, ok := f.offered.LoadAndDelete(unsafe.SliceData(data))
	if !ok {
		return nil
	}
	h := v.(*handoff)
	if !h.state.CompareAndSwap(handoffOffered, handoffTaken) {
		return nil
	}
	return h
}

func newFSM(db *timeseries.DB, store *logStore, snapDir, restoreDir string, log *slog.Logger, onHalt func(error)) (*fsm, error) {
	applied, err := store.GetUint64(appliedKey)
	if err != nil {
		return nil, fmt.Errorf("replset: read applied index: %w", err)
	}
	members, err := loadMemberTable(store)
	if err != nil {
		return nil, err
	}
	term, err := store.GetUint64(appliedTermKey)
	if err != nil {
		return nil, fmt.Errorf("replset: read applied term: %w", err)
	}
	sessions, err := loadSessions(store)
	if err != nil {
		return nil, err
	}
	return &fsm{db: db, store: store, snapDir: snapDir, restoreDir: restoreDir, log: log, onHalt: onHalt, applied: applied,
		term: term, members: members, sessions: sessions}, nil
}

// Apply applies one entry (raft.FSM).
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries in order and records the last
// applied index once for the batch (raft.BatchingFSM).
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	out := make([]any, len(logs))
	f.mu.Lock()
	applied, halted, term := f.applied, f.halted, f.term
	f.mu.Unlock()
	last := applied
	// Every entry selected at the start is taken from next, whether it is
	// applied or not, so that the decoding goroutine always finishes.
	wasHalted := halted != nil
	next, taken := f.decodeAhead(logs, applied, wasHalted)
	defer func() {
		for _, h := range taken() {
			close(h.done)
		}
	}()
	for i, l := range logs {
		var (
			c   *Command
			err error
		)
		if toDecode(l, applied, wasHalted) {
			c, err = next()
		}
		switch {
		case halted != nil:
			out[i] = &applyResult{err: fmt.Errorf("%w: %v", ErrHalted, halted)}
			continue
		case l.Index <= applied:
			// Applied before a restart; the engine holds it.
			out[i] = &applyResult{}
			continue
		case l.Type != raft.LogCommand:
			last, term = l.Index, l.Term
			continue
		}
		var r *applyResult
		switch {
		case err != nil:
			r = &applyResult{err: fmt.Errorf("replset: entry %d: %w", l.Index, err)}
		case c.Session != "" && f.hasSession(c.Session):
			// A retried write applied before: its first result.
			st, _ := f.sessions.get(c.Session)
			r = st.applyResult()
		default:
			r = f.apply(c)
		}
		if r.err != nil && !deterministic(r.err) {
			halted = fmt.Errorf("entry %d: %w", l.Index, r.err)
			out[i] = &applyResult{err: fmt.Errorf("%w: %v", ErrHalted, halted)}
			continue
		}
		last, term = l.Index, l.Term
		out[i] = r
		if c != nil && c.Session != "" {
			f.sessions.put(c.Session, toStored(l.Index, r))
		}
	}
	if last > applied && !f.unrecorded.Load() {
		if err := f.record(last, term); err != nil && halted == nil {
			halted = fmt.Errorf("record applied index %d: %w", last, err)
		}
	}
	f.mu.Lock()
	f.applied, f.term = last, term
	first := f.halted == nil && halted != nil
	f.halted = halted
	f.mu.Unlock()
	if first {
		f.log.Error("replset: member halted: an engine error other members may not have had; restart it once the cause is fixed, it resumes after the last applied entry",
			"applied", last, "err", halted)
		go f.onHalt(halted)
	}
	return out
}

// toDecode reports whether ApplyBatch decodes l's command.
func toDecode(l *raft.Log, applied uint64, halted bool) bool {
	return !halted && l.Index > applied && l.Type == raft.LogCommand
}

// decodeAhead returns a function that returns, call by call, the decoded
// commands of the entries of logs that toDecode selects, in order, and one
// that returns the offers taken in their place (offer), once every command
// was returned. With two or more, they are decoded on another goroutine,
// at most two ahead of the caller: a member catching up applies one entry
// while the next is decoded (decoding is about a third of applying an
// insert). The caller calls next once for each selected entry.
func (f *fsm) decodeAhead(logs []*raft.Log, applied uint64, halted bool) (next func() (*Command, error), taken func() []*handoff) {
	var sel []*raft.Log
	for _, l := range logs {
		if toDecode(l, applied, halted) {
			sel = append(sel, l)
		}
	}
	var hs []*handoff
	decode := func(l *raft.Log) (*Command, error) {
		if h := f.take(l.Data); h != nil {
			hs = append(hs, h)
			return h.c, nil
		}
		return decodeCommand(l.Data)
	}
	taken = func() []*handoff { return hs }
	if len(sel) < 2 {
		return func() (*Command, error) {
			l := sel[0]
			sel = sel[1:]
			return decode(l)
		}, taken
	}
	type decoded struct {
		c   *Command
		err error
	}
	ch := make(chan decoded, 2)
	go func() {
		for _, l := range sel {
			c, err := decode(l)
			ch <- decoded{c, err}
		}
	}()
	return func() (*Command, error) {
		d := <-ch
		return d.c, d.err
	}, taken
}

// hasSession reports whether a retryable write's key was applied.
func (f *fsm) hasSession(key string) bool {
	_, ok := f.sessions.get(key)
	return ok
}

// record writes the applied index, its entry's term and the session keys
// applied since the last record, in one synced batch.
func (f *fsm) record(applied, term uint64) error {
	b := f.store.db.NewBatch()
	defer b.Close()
	if err := b.Set(stableKey(appliedKey), binary.BigEndian.AppendUint64(nil, applied), nil); err != nil {
		return err
	}
	if err := b.Set(stableKey(appliedTermKey), binary.BigEndian.AppendUint64(nil, term), nil); err != nil {
		return err
	}
	if err := f.sessions.flush(b); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// apply runs one command on the engine. It has no deadline: an entry is
// applied whole on every member, or the member halts.
func (f *fsm) apply(c *Command) *applyResult {
	ctx := context.Background()
	var r applyResult
	switch c.Op {
	case OpCreateCollection:
		r.res.Created, r.err = f.db.CreateCollection(ctx, c.Collection, c.Options)
	case OpDropCollection:
		r.err = f.db.DropCollection(ctx, c.Collection)
	case OpInsert, OpInsertKeyed:
		r.res.Insert, r.err = f.db.Insert(ctx, c.Collection, timeseries.Batch{Measurements: c.Measurements}, timeseries.InsertOptions{Unordered: c.Unordered})
	case OpInsertDocuments:
		r.res.Insert, r.err = f.db.Insert(ctx, c.Collection, timeseries.Batch{Documents: c.Documents, Orders: c.Orders}, timeseries.InsertOptions{Unordered: c.Unordered})
	case OpCreateIndex:
		r.res.Created, r.res.IndexName, r.err = f.db.CreateIndex(ctx, c.Collection, c.Index)
	case OpDropIndex:
		r.err = f.db.DropIndex(ctx, c.Collection, c.Index.Name)
	case OpCreateIndexes:
		r.res.Indexes, r.err = f.db.CreateIndexes(ctx, c.Collection, c.Indexes)
	case OpDropIndexes:
		r.err = f.db.DropIndexes(ctx, c.Collection, c.IndexNames)
	case OpCollMod, OpCollModIndexed:
		r.res.CollMod, r.err = f.db.CollMod(ctx, c.Collection, c.CollMod)
	case OpCollModIndex:
		r.res.IndexMod, r.err = f.db.CollModIndex(ctx, c.Collection, c.IndexMod)
	case OpMember:
		r.err = f.members.apply(f.store, c.Member)
	case OpExpireDocuments:
		// Every member holds the same documents (same _ids, same index
		// entries), so the engine's expiry at the leader's time, without
		// a budget, removes the same ones everywhere.
		var b ttl.Batch
		b, r.err = f.db.Expire(ctx, ttl.Target{Collection: c.Collection, Index: c.Index.Name}, time.Unix(0, c.Now), ttl.Budget{})
		r.res.Deleted = b.Docs
	case OpUpdateDocuments, OpReplaceDocument:
		var flt *partialfilter.Filter
		if flt, r.err = partialfilter.ParseJSON(c.Filter); r.err != nil {
			break
		}
		u := timeseries.Update{Filter: flt, Replacement: c.Replacement, ReplacementOrder: c.ReplacementOrder}
		if c.Op == OpUpdateDocuments {
			if u.Operators, r.err = parseUpdateJSON(c.Update); r.err != nil {
				break
			}
			u.Multi, u.Now = c.Multi, time.Unix(0, c.Now)
		}
		r.res.Update, r.err = f.db.Update(ctx, c.Collection, u)
	case OpDelete, OpDeleteDocuments, OpDeleteOne:
		// OpDelete and OpDeleteDocuments both delete every match, of a
		// collection of either kind (DB.Delete serves both).
		var flt *partialfilter.Filter
		if flt, r.err = partialfilter.ParseJSON(c.Filter); r.err != nil {
			break
		}
		var opts timeseries.DeleteOptions
		if c.Op == OpDeleteOne {
			opts.Limit = 1
		}
		r.res.Deleted, r.err = f.db.Delete(ctx, c.Collection, flt, opts)
	}
	return &r
}

// parseUpdateJSON parses update operators in JSON, numbers kept exact.
func parseUpdateJSON(b []byte) (*document.Update, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "update: %v", err)
	}
	return document.ParseUpdate(raw)
}

// deterministic reports whether err is an answer every member gives to the
// same command on the same state (a refusal: unknown collection, bad
// options, a filter the engine does not take), as opposed to a failure of
// this member (I/O, a full disk, corruption, closing), after which it must
// not apply further entries. An entry that does not decode is corruption
// (ErrCorrupt wraps mongoerr.ErrCorrupt).
func deterministic(err error) bool {
	switch mongoerr.CodeOf(err) {
	case 0, mongoerr.InternalError, mongoerr.ShutdownInProgress, mongoerr.ExceededMemoryLimit,
		mongoerr.QueryExceededMemoryLimit, mongoerr.IngressRequestRateLimitExceeded,
		mongoerr.DataCorruptionDetected, mongoerr.OutOfDiskSpace:
		return false
	}
	return true
}

// lastApplied returns the last applied index and the halting error.
func (f *fsm) state() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied, f.halted
}

// Snapshot copies the engine at the last applied entry into a directory
// of the snapshot store (raft.FSM). raft calls it between two entries, so
// the copy holds exactly the entries up to the applied index; the copy is
// a Pebble checkpoint (hard links), and Persist moves it into place.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	applied, term, halted := f.applied, f.term, f.halted
	f.mu.Unlock()
	if halted != nil {
		return nil, fmt.Errorf("%w: %v", ErrHalted, halted)
	}
	dir, err := os.MkdirTemp(f.snapDir, pendingDir+"-")
	if err != nil {
		return nil, fmt.Errorf("replset: snapshot: %w", err)
	}
	start := time.Now()
	if err := f.db.CheckpointTo(filepath.Join(dir, engineDir)); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("replset: snapshot at %d: %w", applied, err)
	}
	b, err := json.Marshal(snapshotState{Applied: applied, Term: term, Members: f.members.list(), Sessions: f.sessions.entries()})
	if err == nil {
		err = writeFileSync(filepath.Join(dir, stateFile), b)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("replset: snapshot at %d: %w", applied, err)
	}
	f.log.Info("replset: snapshot taken", "applied", applied, "took", time.Since(start))
	return &fsmSnapshot{dir: dir}, nil
}

// Restore replaces the engine's content with a snapshot's (raft.FSM):
// raft calls it on a member the leader sent a snapshot to, because the
// entries it misses are no longer in the leader's log. A stream that does
// not decode changes nothing; a failure while the engine's content is
// being replaced halts the member, and its restart rebuilds the engine
// from the snapshot, which the store keeps.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if _, halted := f.state(); halted != nil {
		return fmt.Errorf("%w: %v", ErrHalted, halted)
	}
	start := time.Now()
	dir := f.restoreDir
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("replset: restore: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("replset: restore: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := readStream(rc, dir); err != nil {
		return fmt.Errorf("replset: restore: %w", err)
	}
	st, err := readState(dir)
	if err != nil {
		return err
	}
	// The engine changes from here: a backup waits (the stream above
	// does not hold it up).
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	err = f.db.ReplaceFrom(filepath.Join(dir, engineDir))
	if err == nil {
		err = f.members.replace(f.store, st.Members)
	}
	if err == nil {
		err = f.sessions.replace(f.store, st.Sessions)
	}
	if err == nil {
		err = f.store.SetUint64(appliedTermKey, st.Term)
	}
	if err == nil {
		err = f.store.SetUint64(appliedKey, st.Applied)
	}
	f.mu.Lock()
	first := err != nil && f.halted == nil
	if err != nil {
		f.halted = fmt.Errorf("restore of a snapshot at %d: %w", st.Applied, err)
	} else {
		f.applied, f.term = st.Applied, st.Term
		f.restores.Add(1)
	}
	halted := f.halted
	f.mu.Unlock()
	if first {
		f.log.Error("replset: member halted: restoring a snapshot failed; restart it once the cause is fixed, it rebuilds its engine from the snapshot",
			"err", halted)
		go f.onHalt(halted)
		return halted
	}
	f.log.Info("replset: snapshot restored", "applied", st.Applied, "took", time.Since(start))
	return nil
}
