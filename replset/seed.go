package replset

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/hourglassdb/hourglass/timeseries"
)

// A backup taken on a member (package backup, through the engine's backup
// hook) records the member's state with the engine's image, taken while
// the member applies nothing: the raft index and term of the last entry
// the image holds, the set's configuration, and what the state machine
// keeps besides the engine (the members' addresses, the retryable writes
// applied). Seed turns a directory holding the restored engine into a
// member's directory whose newest snapshot is that engine at that index:
// started with Open, the member tells the leader its log ends there, and
// the leader sends the entries after it, or its own snapshot when its log
// no longer reaches back that far.
//
// The state, in JSON (backup.Manifest.Member):
//
//	{"member": "n2", "index": 1234, "term": 3,
//	 "configuration": [{"ID": "n1", "Addr": "127.0.0.1:7801", "NonVoter": false}, ...],
//	 "state": {"applied": 1234, "term": 3, "members": [...], "sessions": [...]}}

// seedState is what a backup of a member records.
type seedState struct {
	// Member is the ID of the member the backup was taken on.
	Member string `json:"member"`
	// Index and Term are the raft index and term of the last entry the
	// engine's image holds.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Configuration is the set's members as the member knew them.
	Configuration []Member `json:"configuration"`
	// State is the state machine's state at Index, as a snapshot holds it.
	State snapshotState `json:"state"`
}

// SeedInfo describes the point a backup of a member resumes the log at.
type SeedInfo struct {
	// Member is the ID of the member the backup was taken on.
	Member string
	// Index and Term are the raft index and term of the last entry the
	// backup holds: a member seeded from it is sent the entries after
	// Index.
	Index, Term uint64
	// Configuration is the set's members when the backup was taken.
	Configuration []Member
}

// ParseSeed reads the member state a backup recorded
// (backup.Manifest.Member). Empty state is ErrNotSeedable: the backup was
// taken on a server that is not a replica set member.
func ParseSeed(state []byte) (SeedInfo, error) {
	st, err := parseSeed(state)
	if err != nil {
		return SeedInfo{}, err
	}
	return SeedInfo{Member: st.Member, Index: st.Index, Term: st.Term, Configuration: st.Configuration}, nil
}

func parseSeed(state []byte) (*seedState, error) {
	if len(state) == 0 {
		return nil, fmt.Errorf("%w: it was taken on a server that is not a replica set member, and records no raft index to resume the log from", ErrNotSeedable)
	}
	var st seedState
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, fmt.Errorf("%w: its member state does not decode: %v", ErrNotSeedable, err)
	}
	switch {
	case st.Index == 0:
		return nil, fmt.Errorf("%w: member %s had applied no entry when it was taken", ErrNotSeedable, st.Member)
	case st.Term == 0:
		return nil, fmt.Errorf("%w: the term of entry %d is not recorded", ErrNotSeedable, st.Index)
	case len(st.Configuration) == 0:
		return nil, fmt.Errorf("%w: no configuration recorded", ErrNotSeedable)
	case st.State.Applied != st.Index:
		return nil, fmt.Errorf("%w: the state machine's index %d is not the backup's %d", ErrNotSeedable, st.State.Applied, st.Index)
	}
	return &st, nil
}

// Seed makes dir a member's directory from a restored backup of a member:
// dir/engine holds the restored engine (backup.Restore into it), state is
// what the backup recorded (backup.Manifest.Member). It writes the
// member's snapshot store (one snapshot: a checkpoint of the engine at
// the backup's index and term, with the backup's configuration) and its
// raft store (the applied index and term, the members' addresses, the
// retryable writes applied, the clean-shutdown mark), which dir must not
// hold yet. Open then starts the member on it with its engine as it is;
// it joins the set (AddMember on the leader, serve's --join) under an ID
// of its own, or of a member removed from the set first.
//
// A failure leaves dir partly written: seed into a new directory and move
// it into place once Seed returns.
func Seed(dir string, state []byte, log *slog.Logger) (SeedInfo, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := parseSeed(state)
	if err != nil {
		return SeedInfo{}, err
	}
	info := SeedInfo{Member: st.Member, Index: st.Index, Term: st.Term, Configuration: st.Configuration}
	engine := filepath.Join(dir, "engine")
	if _, err := os.Stat(engine); err != nil {
		return info, fmt.Errorf("replset: seed %s: the restored engine: %w", dir, err)
	}
	for _, sub := range []string{"raft", "snapshots"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); !errors.Is(err, fs.ErrNotExist) {
			return info, fmt.Errorf("replset: seed %s: it holds %s already: seed a new directory", dir, sub)
		}
	}
	if err := seedSnapshot(dir, st, log); err != nil {
		return info, err
	}
	if err := seedRaftStore(dir, st, log); err != nil {
		return info, err
	}
	log.Info("replset: member seeded from a backup", "dir", dir, "from", st.Member, "index", st.Index, "term", st.Term)
	return info, nil
}

// seedSnapshot makes the snapshot of the engine in dir/engine at the
// backup's index: what raft starts from, what the member sends another
// before it took a snapshot of its own, and what it rebuilds its engine
// from after a crash.
func seedSnapshot(dir string, st *seedState, log *slog.Logger) (err error) {
	snaps, err := newSnapshotStore(filepath.Join(dir, "snapshots"), snapshotsKept, log)
	if err != nil {
		return err
	}
	var conf raft.Configuration
	for _, m := range st.Configuration {
		sf := raft.Voter
		if m.NonVoter {
			sf = raft.Nonvoter
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: sf, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Addr)})
	}
	// The configuration may be newer than the index (a change appended,
	// not yet applied); it is replaced as the log after the index comes.
	sink, err := snaps.Create(1, st.Index, st.Term, conf, st.Index, nil)
	if err != nil {
		return err
	}
	d := sink.(*dirSink)
	defer func() {
		if err != nil {
			d.Cancel()
		}
	}()
	// The engine is opened as the member opens it (no log of its own),
	// and its checkpoint links the restored tables into the snapshot.
	db, err := timeseries.Open(timeseries.Options{Dir: filepath.Join(dir, "engine"), ExternalLog: true, Logger: log})
	if err != nil {
		return fmt.Errorf("replset: seed: open the restored engine: %w", err)
	}
	err = db.CheckpointTo(filepath.Join(d.tmp, engineDir))
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("replset: seed: checkpoint the restored engine: %w", err)
	}
	b, err := json.Marshal(st.State)
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(d.tmp, stateFile), b); err != nil {
		return fmt.Errorf("replset: seed: %w", err)
	}
	return d.Close()
}

// seedRaftStore writes the raft store of a member whose engine holds the
// entries up to the backup's index, closed cleanly.
func seedRaftStore(dir string, st *seedState, log *slog.Logger) error {
	store, err := openLogStore(filepath.Join(dir, "raft"), log)
	if err != nil {
		return err
	}
	err = (&memberTable{}).replace(store, st.State.Members)
	if err == nil {
		err = (&sessionTable{}).replace(store, st.State.Sessions)
	}
	if err == nil {
		err = store.SetUint64(appliedTermKey, st.Term)
	}
	if err == nil {
		err = store.SetUint64(appliedKey, st.Index)
	}
	if err == nil {
		err = store.SetUint64(cleanKey, 1)
	}
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("replset: seed the raft store: %w", err)
	}
	return nil
}

// backupState is the engine's backup hook (timeseries.BackupHook): it
// stops the state machine between two batches of entries, so that the
// image the engine makes next holds exactly the entries up to the applied
// index, and returns the member's state at that index (seedState, JSON).
// The release lets the state machine go on.
func (n *Node) backupState() (state []byte, release func(), err error) {
	f := n.fsm
	f.applyMu.Lock()
	defer func() {
		if err != nil {
			f.applyMu.Unlock()
		}
	}()
	f.mu.Lock()
	applied, term, halted := f.applied, f.term, f.halted
	f.mu.Unlock()
	if halted != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrHalted, halted)
	}
	if term == 0 && applied > 0 {
		term = n.termAt(applied)
	}
	st := seedState{Member: n.opts.ID, Index: applied, Term: term,
		State: snapshotState{Applied: applied, Term: term, Members: f.members.list(), Sessions: f.sessions.entries()}}
	for _, s := range n.raft.GetConfiguration().Configuration().Servers {
		st.Configuration = append(st.Configuration, Member{ID: string(s.ID), Addr: string(s.Address), NonVoter: s.Suffrage != raft.Voter})
	}
	if state, err = json.Marshal(st); err != nil {
		return nil, nil, err
	}
	return state, f.applyMu.Unlock, nil
}

// termAt looks up the term of the entry at index, for an applied index
// recorded without its term: in the log, else in the snapshot at index; 0
// when neither has it.
func (n *Node) termAt(index uint64) uint64 {
	var l raft.Log
	if err := n.store.GetLog(index, &l); err == nil {
		return l.Term
	}
	metas, err := n.snaps.List()
	if err == nil {
		for _, m := range metas {
			if m.Index == index {
				return m.Term
			}
		}
	}
	return 0
}
