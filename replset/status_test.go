package replset

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Status names the set's members, the leader and the applied index, on
// the leader and on a follower alike.
func TestStatus(t *testing.T) {
	s := startSet(t, 3)
	li := s.leader()
	l := s.nodes[li]
	f := s.nodes[(li+1)%3]
	if _, _, err := f.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateCollection(context.Background(), "cpu", sensorOpts); err != nil {
		t.Fatal(err)
	}
	insert(t, l, 0, 10)
	s.waitCount("cpu", 10)
	// A follower records its applied index just after the batch's rows
	// reach its engine; wait for it to settle at the leader's.
	deadline := time.Now().Add(10 * time.Second)
	for f.AppliedIndex() != l.AppliedIndex() {
		if time.Now().After(deadline) {
			t.Fatalf("follower applied %d, leader %d", f.AppliedIndex(), l.AppliedIndex())
		}
		time.Sleep(5 * time.Millisecond)
	}
	var want []Member
	for _, n := range s.nodes {
		want = append(want, Member{ID: n.ID(), Addr: n.Addr()})
	}
	for _, n := range []*Node{l, f} {
		st := n.Status()
		if st.ID != n.ID() || st.Addr != n.Addr() || st.Role != n.Role() {
			t.Errorf("%s: status names %s %s %s", n.ID(), st.ID, st.Addr, st.Role)
		}
		if st.LeaderID != l.ID() || st.LeaderAddr != l.Addr() {
			t.Errorf("%s: leader %s %s, want %s %s", n.ID(), st.LeaderID, st.LeaderAddr, l.ID(), l.Addr())
		}
		if !slices.Equal(st.Members, want) {
			t.Errorf("%s: members %v, want %v", n.ID(), st.Members, want)
		}
		if st.AppliedIndex != n.AppliedIndex() || st.AppliedIndex < 3 || st.CommitIndex < st.AppliedIndex || st.Term == 0 {
			t.Errorf("%s: applied %d, commit %d, term %d", n.ID(), st.AppliedIndex, st.CommitIndex, st.Term)
		}
	}
	if st := l.Status(); !st.LastContact.IsZero() {
		t.Errorf("the leader reports a last contact %v", st.LastContact)
	}
	if st := f.Status(); time.Since(st.LastContact) > 5*time.Second {
		t.Errorf("the follower last heard from the leader %v ago", time.Since(st.LastContact))
	}
}
