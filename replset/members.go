package replset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// MemberAddrs are the addresses a member is reached at: raft traffic
// (Raft), the HTTP API (HTTP) and the MongoDB wire protocol (Mongo, ""
// when the set serves none). The set records them in its log (OpMember),
// so that every member can name any other to clients, a member that joins
// later included.
type MemberAddrs struct {
	ID    string `json:"id"`
	Raft  string `json:"raft,omitempty"`
	HTTP  string `json:"http,omitempty"`
	Mongo string `json:"mongo,omitempty"`
	// Remove, in an OpMember command, forgets the member's addresses.
	Remove bool `json:"remove,omitempty"`
}

// membersKey is the stable-store key of the address table (JSON: a list
// of MemberAddrs), written when an OpMember entry is applied or a
// snapshot restored.
var membersKey = []byte("members")

// memberTable is the address table the log builds.
type memberTable struct {
	mu sync.RWMutex
	m  map[string]MemberAddrs
}

func loadMemberTable(s *logStore) (*memberTable, error) {
	t := &memberTable{m: map[string]MemberAddrs{}}
	b, err := s.Get(membersKey)
	if errors.Is(err, errStableNotFound) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replset: read member addresses: %w", err)
	}
	var list []MemberAddrs
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("%w: member addresses: %v", ErrCorrupt, err)
	}
	for _, a := range list {
		t.m[a.ID] = a
	}
	return t, nil
}

func (t *memberTable) get(id string) (MemberAddrs, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	a, ok := t.m[id]
	return a, ok
}

func (t *memberTable) list() []MemberAddrs {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := slices.Collect(maps.Values(t.m))
	slices.SortFunc(out, func(a, b MemberAddrs) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}

// apply records a (or forgets it, with Remove) and stores the table.
func (t *memberTable) apply(s *logStore, a MemberAddrs) error {
	t.mu.Lock()
	if a.Remove {
		delete(t.m, a.ID)
	} else {
		t.m[a.ID] = a
	}
	t.mu.Unlock()
	return t.save(s)
}

// replace sets the whole table (a restored snapshot's) and stores it.
func (t *memberTable) replace(s *logStore, list []MemberAddrs) error {
	t.mu.Lock()
	t.m = map[string]MemberAddrs{}
	for _, a := range list {
		t.m[a.ID] = a
	}
	t.mu.Unlock()
	return t.save(s)
}

func (t *memberTable) save(s *logStore) error {
	b, err := json.Marshal(t.list())
	if err != nil {
		return err
	}
	return s.Set(membersKey, b)
}

// MemberAddrs returns the addresses of member id: those the set's log
// recorded, else those Options.Addrs gives; ID is "" when neither knows
// the member.
func (n *Node) MemberAddrs(id string) MemberAddrs {
	if a, ok := n.fsm.members.get(id); ok {
		return a
	}
	for _, a := range n.opts.Addrs {
		if a.ID == id {
			return a
		}
	}
	return MemberAddrs{}
}

// checkAddrs refuses a member without an ID or raft address, and
// addresses that are not host:port.
func checkAddrs(a MemberAddrs) error {
	if a.ID == "" || a.Raft == "" {
		return mongoerr.New(mongoerr.BadValue, "a member needs an id and a raft address")
	}
	for _, addr := range []string{a.Raft, a.HTTP, a.Mongo} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return mongoerr.New(mongoerr.BadValue, "member %s: address %q: %v", a.ID, addr, err)
		}
	}
	return nil
}

// AddMember adds a member to the set, on the leader: its addresses go
// through the log, then raft's configuration takes it, as a non-voter
// unless voter is set. A non-voter receives the log (or a snapshot, when
// it is further behind than the leader's log reaches) and serves reads,
// but counts in no majority: a member joins as one, and asks for its vote
// once it has caught up (serve --join does both), so that a member still
// copying the set's data never holds up writes. Adding a member again with
// the same raft address updates its addresses, and with voter set gives a
// non-voter its vote; a voter is never made a non-voter. A different
// raft address for an existing ID is refused: remove the member first.
func (n *Node) AddMember(ctx context.Context, a MemberAddrs, voter bool) error {
	a.Remove = false
	if err := checkAddrs(a); err != nil {
		return err
	}
	if err := n.checkLeader(); err != nil {
		return err
	}
	cur, err := n.configuration()
	if err != nil {
		return err
	}
	existing := -1
	for i, s := range cur.Servers {
		switch {
		case string(s.ID) == a.ID:
			existing = i
		case string(s.Address) == a.Raft:
			return mongoerr.New(mongoerr.BadValue, "raft address %s is member %s's", a.Raft, s.ID)
		}
	}
	if existing >= 0 && string(cur.Servers[existing].Address) != a.Raft {
		return mongoerr.New(mongoerr.BadValue, "member %s is in the set at raft address %s, not %s: remove it first",
			a.ID, cur.Servers[existing].Address, a.Raft)
	}
	// The new member learns the others' addresses from the log: those
	// this leader was started with may not be in it yet (publishAddrs
	// records them within a moment of an election).
	for _, srv := range cur.Servers {
		if _, logged := n.fsm.members.get(string(srv.ID)); logged {
			continue
		}
		if known := n.MemberAddrs(string(srv.ID)); known.ID != "" {
			if _, err := n.Apply(ctx, &Command{Op: OpMember, Member: known}); err != nil {
				return err
			}
		}
	}
	if _, err := n.Apply(ctx, &Command{Op: OpMember, Member: a}); err != nil {
		return err
	}
	var f raft.IndexFuture
	switch {
	case existing >= 0 && cur.Servers[existing].Suffrage == raft.Voter:
		return nil
	case voter:
		f = n.raft.AddVoter(raft.ServerID(a.ID), raft.ServerAddress(a.Raft), 0, n.opts.ApplyTimeout)
	case existing >= 0:
		return nil
	default:
		f = n.raft.AddNonvoter(raft.ServerID(a.ID), raft.ServerAddress(a.Raft), 0, n.opts.ApplyTimeout)
	}
	return n.configErr(f.Error(), "add member "+a.ID)
}

// RemoveMember removes member id from the set, on the leader; the leader
// may remove itself (it steps down once the change is committed, and the
// others elect a leader). Removing the last voter is refused.
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	if err := n.checkLeader(); err != nil {
		return err
	}
	cur, err := n.configuration()
	if err != nil {
		return err
	}
	found, voters := false, 0
	for _, s := range cur.Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != id {
			voters++
		}
		found = found || string(s.ID) == id
	}
	if !found {
		return mongoerr.New(mongoerr.NamespaceNotFound, "no member %q in the set", id)
	}
	if voters == 0 {
		return mongoerr.New(mongoerr.IllegalOperation, "member %s is the set's last voter", id)
	}
	if err := n.configErr(n.raft.RemoveServer(raft.ServerID(id), 0, n.opts.ApplyTimeout).Error(), "remove member "+id); err != nil {
		return err
	}
	if id == n.opts.ID {
		return nil // no longer a member: the others keep its addresses, unused
	}
	_, err = n.Apply(ctx, &Command{Op: OpMember, Member: MemberAddrs{ID: id, Remove: true}})
	return err
}

func (n *Node) configuration() (raft.Configuration, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, fmt.Errorf("replset: read the set's configuration: %w", err)
	}
	return f.Configuration(), nil
}

// configErr maps the error of a configuration change.
func (n *Node) configErr(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return n.notLeader()
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %s (it may or may not be applied)", ErrLeadershipLost, what)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %s: %v", ErrTimeout, what, err)
	}
	return fmt.Errorf("replset: %s: %w", what, err)
}

// publishAddrs records Options.Addrs of the set's members in the log
// whenever this member leads and the log's table differs from them, so
// that the addresses the members were started with reach members that
// join later.
func (n *Node) publishAddrs(stop <-chan struct{}) {
	t := time.NewTicker(publishEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if n.Role() != RoleLeader {
			continue
		}
		inSet := map[string]bool{}
		for _, m := range n.Members() {
			inSet[m.ID] = true
		}
		for _, a := range n.opts.Addrs {
			if !inSet[a.ID] {
				continue // removed since: its addresses are gone with it
			}
			a.Remove = false
			if got, ok := n.fsm.members.get(a.ID); ok && got == a {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), n.opts.ApplyTimeout)
			_, err := n.Apply(ctx, &Command{Op: OpMember, Member: a})
			cancel()
			if err != nil {
				n.opts.Logger.Debug("replset: record member addresses", "member", a.ID, "err", err)
				break
			}
		}
	}
}

// publishEvery is how often publishAddrs looks.
const publishEvery = 500 * time.Millisecond
