package replset

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// memberOf returns id's entry in n's configuration.
func memberOf(n *Node, id string) (Member, bool) {
	for _, m := range n.Members() {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// While a writer writes through whichever member leads, a fourth member
// joins as a non-voter, catches up from a snapshot (the leader's log no
// longer reaches back to the start), gets its vote, and a follower is
// removed; every acknowledged write is then on every member of the set.
func TestMembershipChanges(t *testing.T) {
	s := startSetWith(t, 3, snapshotOpts)
	l := s.nodes[s.leader()]
	ctx := context.Background()
	if _, err := l.CreateCollection(ctx, "cpu", sensorOpts); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		insert(t, l, i*10, 10)
	}
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}

	var (
		acked atomic.Int64
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		mu    sync.Mutex // guards s.nodes against the writer
	)
	acked.Store(300)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			var ld *Node
			for _, n := range s.nodes {
				if n != nil && n.Role() == RoleLeader {
					ld = n
				}
			}
			mu.Unlock()
			if ld == nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			start := 300 + int(acked.Load())
			res, err := ld.Insert(ctx, "cpu", timeseries.Batch{Measurements: batch(start, 5)}, timeseries.InsertOptions{})
			if err == nil && res.Inserted == 5 {
				acked.Add(5)
			} else if err == nil || !(errors.Is(err, ErrNotLeader) || errors.Is(err, ErrClosed) || errors.Is(err, ErrLeadershipLost)) {
				t.Errorf("insert: %+v, %v", res, err)
				return
			}
		}
	}()

	// A member that never ran, with no set of its own.
	o := Options{ID: "n4", Dir: t.TempDir(), Addr: "127.0.0.1:0", Engine: timeseries.Options{NoSync: true}}
	snapshotOpts(&o)
	n4, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	o.Addr = n4.Addr()
	mu.Lock()
	s.nodes = append(s.nodes, n4)
	s.opts = append(s.opts, o)
	mu.Unlock()
	a := MemberAddrs{ID: "n4", Raft: n4.Addr(), HTTP: "127.0.0.1:7704", Mongo: "127.0.0.1:27104"}

	// Refusals first: on a follower, with another member's raft address,
	// an unknown member.
	var f *Node
	for _, n := range s.nodes[:3] {
		if n != l {
			f = n
		}
	}
	if err := f.AddMember(ctx, a, false); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AddMember on a follower: %v", err)
	}
	if err := l.AddMember(ctx, MemberAddrs{ID: "n9", Raft: f.Addr()}, false); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Fatalf("AddMember with another member's raft address: %v", err)
	}
	if err := l.RemoveMember(ctx, "n9"); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Fatalf("RemoveMember of an unknown member: %v", err)
	}

	if err := l.AddMember(ctx, a, false); err != nil {
		t.Fatal(err)
	}
	if m, ok := memberOf(l, "n4"); !ok || !m.NonVoter {
		t.Fatalf("n4 after AddMember: %+v, %v; want a non-voter", m, ok)
	}
	// Its addresses went through the log: every member knows them.
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range s.nodes {
		for n.MemberAddrs("n4").HTTP != a.HTTP {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not know n4's addresses: %+v", n.ID(), n.MemberAddrs("n4"))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// It catches up from a snapshot.
	for n4.fsm.restores.Load() == 0 || n4.AppliedIndex() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("n4 restored %d snapshots, applied %d", n4.fsm.restores.Load(), n4.AppliedIndex())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.AddMember(ctx, a, true); err != nil {
		t.Fatal(err)
	}
	if m, _ := memberOf(l, "n4"); m.NonVoter {
		t.Fatal("n4 is still a non-voter after AddMember with voter")
	}
	// A voter is never demoted by adding it again.
	if err := l.AddMember(ctx, a, false); err != nil {
		t.Fatal(err)
	}
	if m, _ := memberOf(l, "n4"); m.NonVoter {
		t.Fatal("AddMember without voter demoted n4")
	}

	// Remove a follower while the writer goes on.
	time.Sleep(200 * time.Millisecond)
	fid := f.ID()
	if err := l.RemoveMember(ctx, fid); err != nil {
		t.Fatal(err)
	}
	if _, ok := memberOf(l, fid); ok {
		t.Fatalf("%s still in the configuration after RemoveMember", fid)
	}
	mu.Lock()
	for i, n := range s.nodes {
		if n == f {
			s.nodes[i] = nil
		}
	}
	mu.Unlock()
	f.Close()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if acked.Load() <= 300 {
		t.Fatal("the writer acknowledged nothing while members changed")
	}
	s.waitCount("cpu", acked.Load())
	if got := l.MemberAddrs(fid); got.ID != "" {
		t.Fatalf("the removed member's addresses are still known: %+v", got)
	}
}

// The leader records the addresses the members were started with in the
// log, so that every member's table holds them, not only their own.
func TestAddressesPublished(t *testing.T) {
	addrs := []MemberAddrs{{ID: "n1", HTTP: "h:1"}, {ID: "n2", HTTP: "h:2"}, {ID: "n3", HTTP: "h:3"}}
	s := startSetWith(t, 3, func(o *Options) { o.Addrs = addrs })
	s.leader()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range s.nodes {
		for _, a := range addrs {
			for {
				got, ok := n.fsm.members.get(a.ID)
				if ok && got.HTTP == a.HTTP {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s's table lacks %s: %+v", n.ID(), a.ID, got)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}
