package replset

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Status is a member's view of its set.
type Status struct {
	// ID and Addr are this member's raft ID and address; Role its role.
	ID   string
	Addr string
	Role Role
	// LeaderID and LeaderAddr name the leader this member knows of, ""
	// while there is none.
	LeaderID   string
	LeaderAddr string
	// Term is the raft term; CommitIndex the last entry this member knows
	// a majority holds; AppliedIndex the last its engine holds.
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	// SnapshotIndex is the raft index of this member's newest snapshot
	// (0: none); its log starts a few entries (Options.TrailingLogs)
	// before it.
	SnapshotIndex uint64
	// LastContact is when a follower last heard from the leader; zero on
	// the leader and on a member that never heard from one.
	LastContact time.Time
	// Members are the members of the set's configuration, as this member
	// knows it, non-voters among them.
	Members []Member
	// Halted is the engine error that stopped this member applying the
	// log, nil while it applies.
	Halted error
}

// Status returns the member's view of its set.
func (n *Node) Status() Status {
	st := Status{ID: n.opts.ID, Addr: n.Addr(), Role: n.Role(), AppliedIndex: n.AppliedIndex(), Halted: n.Halted()}
	st.LeaderAddr, st.LeaderID = n.Leader()
	stats := n.raft.Stats()
	st.Term, _ = strconv.ParseUint(stats["term"], 10, 64)
	st.CommitIndex, _ = strconv.ParseUint(stats["commit_index"], 10, 64)
	st.SnapshotIndex, _ = strconv.ParseUint(stats["last_snapshot_index"], 10, 64)
	if st.Role != RoleLeader {
		st.LastContact = n.raft.LastContact()
	}
	st.Members = n.Members()
	return st
}

// Members returns the members of the set's configuration as this member
// knows it, non-voters among them, by ID.
func (n *Node) Members() []Member {
	conf, err := n.configuration()
	if err != nil {
		return nil
	}
	var out []Member
	for _, s := range conf.Servers {
		out = append(out, Member{ID: string(s.ID), Addr: string(s.Address), NonVoter: s.Suffrage != raft.Voter})
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}
