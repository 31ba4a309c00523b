package replset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/partialfilter"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// testSet is a set of members in one process, each with its own directory
// and engine, talking raft over loopback.
type testSet struct {
	t     *testing.T
	nodes []*Node
	opts  []Options
}

func startSet(t *testing.T, size int) *testSet { return startSetWith(t, size, nil) }

// startSetWith starts a set whose members' options mod changes.
func startSetWith(t *testing.T, size int, mod func(*Options)) *testSet {
	t.Helper()
	s := &testSet{t: t}
	var members []Member
	for i := range size {
		// Timeouts twice the defaults: on a loaded machine (the race
		// detector, every package's tests at once on two cores) a leader
		// otherwise misses its lease and steps down mid-test.
		o := Options{ID: fmt.Sprintf("n%d", i+1), Dir: t.TempDir(), Addr: "127.0.0.1:0",
			Engine:           timeseries.Options{NoSync: true},
			HeartbeatTimeout: 2 * DefaultHeartbeatTimeout, ElectionTimeout: 2 * DefaultElectionTimeout,
			LeaderLeaseTimeout: 2 * DefaultLeaderLeaseTimeout}
		if mod != nil {
			mod(&o)
		}
		n, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		o.Addr = n.Addr() // a restart keeps the address
		s.nodes = append(s.nodes, n)
		s.opts = append(s.opts, o)
		members = append(members, Member{ID: o.ID, Addr: o.Addr})
	}
	t.Cleanup(func() {
		for _, n := range s.nodes {
			if n != nil {
				n.Close()
			}
		}
	})
	if err := s.nodes[0].Bootstrap(members); err != nil {
		t.Fatal(err)
	}
	return s
}

// killAndReopen stops member i as a kill would (no clean mark), opens it
// again and checks that it rebuilt its engine.
func (s *testSet) killAndReopen(i int) *Node {
	s.t.Helper()
	if err := s.nodes[i].shutdown(false); err != nil {
		s.t.Fatal(err)
	}
	s.nodes[i] = nil
	n, err := Open(s.opts[i])
	if err != nil {
		s.t.Fatal(err)
	}
	s.nodes[i] = n
	if !n.rebuilt {
		s.t.Fatal("after an unclean stop: the engine was not rebuilt")
	}
	return n
}

// leaderWithCPU waits for the leader, creates the time-series collection
// "cpu" through it, and returns it with its index.
func (s *testSet) leaderWithCPU() (int, *Node) {
	s.t.Helper()
	li := s.leader()
	if _, err := s.nodes[li].CreateCollection(context.Background(), "cpu", sensorOpts); err != nil {
		s.t.Fatal(err)
	}
	return li, s.nodes[li]
}

// leader waits up to 10 s for a member to be leader and returns its index.
func (s *testSet) leader() int {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, n := range s.nodes {
			if n != nil && n.Role() == RoleLeader {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatal("no leader within 10 s")
	return -1
}

// waitCount waits up to 10 s for every running member to hold want
// measurements (or documents, for a plain collection) in coll.
func (s *testSet) waitCount(coll string, want int64) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []int64
		ok := true
		for _, n := range s.nodes {
			if n == nil {
				continue
			}
			c := count(s.t, n.DB(), coll)
			got = append(got, c)
			ok = ok && c == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: members hold %v, want %d on each", coll, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count returns what db holds in coll: measurements of a time-series
// collection, documents of a plain one, -1 when coll does not exist.
func count(t *testing.T, db *timeseries.DB, coll string) int64 {
	t.Helper()
	ctx := context.Background()
	info, err := db.Describe(ctx, coll)
	if err != nil {
		return -1
	}
	var n int64
	// A drop being applied may remove the collection between Describe
	// and Find: that is "none" too.
	if info.Options.TimeSeries == nil {
		_, err := timeseries.EachDoc(db.Find(ctx, coll, timeseries.FindOptions{}))(func(document.Doc) error { n++; return nil })
		if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	cur, err := db.Find(ctx, coll, timeseries.FindOptions{})
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	for cur.Next() {
		n += cur.Record().NumRows()
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

var sensorOpts = timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor"}}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// batch returns n measurements of two sensors, one second apart from
// start seconds after t0.
func batch(start, n int) []model.Measurement {
	ms := make([]model.Measurement, n)
	for i := range ms {
		ms[i] = model.Measurement{
			Time:   t0 + int64(start+i)*int64(time.Second),
			Meta:   fmt.Sprintf("s%d", i%2),
			Fields: []model.Field{{Name: "v", Value: model.Float(float64(start + i))}},
		}
	}
	return ms
}

func insert(t *testing.T, n *Node, start, count int) {
	t.Helper()
	res, err := n.Insert(context.Background(), "cpu", timeseries.Batch{Measurements: batch(start, count)}, timeseries.InsertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Inserted != count || len(res.Errors) != 0 {
		t.Fatalf("inserted %d with %d errors, want %d", res.Inserted, len(res.Errors), count)
	}
}

// Writes through the leader (create, insert, delete, plain documents,
// drop) reach every member, with the leader's results.
func TestReplicatesWrites(t *testing.T) {
	s := startSet(t, 3)
	l := s.nodes[s.leader()]
	ctx := context.Background()
	created, err := l.CreateCollection(ctx, "cpu", sensorOpts)
	if err != nil || !created {
		t.Fatalf("create: %v, %v", created, err)
	}
	insert(t, l, 0, 100)
	s.waitCount("cpu", 100)

	// A refusal is the same answer on every member: nothing stored.
	res, err := l.Insert(ctx, "cpu", timeseries.Batch{Measurements: []model.Measurement{{Time: t0, Meta: "s0",
		Fields: []model.Field{{Name: "t", Value: model.Float(1)}}}}}, timeseries.InsertOptions{})
	if err != nil || len(res.Errors) != 1 || res.Inserted != 0 {
		t.Fatalf("a measurement with a field named as the timeField: %+v, %v", res, err)
	}

	n, err := l.Delete(ctx, "cpu", mustFilter(t, `{"sensor": "s0", "t": {"$lt": {"$date": "2026-01-01T00:00:50Z"}}}`), timeseries.DeleteOptions{})
	if err != nil || n != 25 {
		t.Fatalf("delete: %d, %v; want 25", n, err)
	}
	s.waitCount("cpu", 75)
	// The _id made for each measurement (written without one) is the same
	// on every member: made of the series and the time.
	var madeIDs string
	for i, m := range s.nodes {
		cur, err := m.DB().Find(ctx, "cpu", timeseries.FindOptions{Order: timeseries.SortAscending, Fields: []string{"_id"}})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for cur.Next() {
			rec := cur.Record()
			ids := rec.Column(int(rec.NumCols()) - 1).(*array.FixedSizeBinary)
			for r := range int(rec.NumRows()) {
				fmt.Fprintf(&b, "%x,", ids.Value(r))
			}
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		cur.Close()
		if i == 0 {
			madeIDs = b.String()
		} else if b.String() != madeIDs || strings.Count(madeIDs, ",") != 75 {
			t.Fatalf("member %d's made ids differ from member 0's (%d ids)", i, strings.Count(madeIDs, ","))
		}
	}

	if _, err := l.CreateCollection(ctx, "events", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	docs := []document.Doc{{"k": int64(1)}, {"k": int64(2)}, {"_id": "x", "k": int64(3)}}
	if r, err := l.Insert(ctx, "events", timeseries.Batch{Documents: docs}, timeseries.InsertOptions{}); err != nil || r.Inserted != 3 {
		t.Fatalf("insert documents: %+v, %v", r, err)
	}
	s.waitCount("events", 3)
	// Every member stores the _id the leader gave.
	var ids []string
	for _, m := range s.nodes {
		var got []string
		_, err := timeseries.EachDoc(m.DB().Find(ctx, "events", timeseries.FindOptions{Sort: []timeseries.SortKey{{Field: "k"}}}))(func(d document.Doc) error {
			got = append(got, fmt.Sprint(d["_id"]))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if ids == nil {
			ids = got
		} else if fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Fatalf("member %s holds _ids %v, another %v", m.ID(), got, ids)
		}
	}
	// deleteOne: the first match in _id order, the same on every member.
	if n, err := l.Delete(ctx, "events", mustFilter(t, `{"k": {"$gte": 2}}`), timeseries.DeleteOptions{Limit: 1}); err != nil || n != 1 {
		t.Fatalf("delete one document: %d, %v", n, err)
	}
	s.waitCount("events", 2)
	if n, err := l.Delete(ctx, "events", mustFilter(t, `{"k": {"$gte": 2}}`), timeseries.DeleteOptions{}); err != nil || n != 1 {
		t.Fatalf("delete documents: %d, %v", n, err)
	}
	s.waitCount("events", 1)

	if err := l.DropCollection(ctx, "cpu"); err != nil {
		t.Fatal(err)
	}
	s.waitCount("cpu", -1)
}

// A follower refuses writes and names the leader.
func TestFollowerRefusesWrites(t *testing.T) {
	s := startSet(t, 3)
	li := s.leader()
	f := s.nodes[(li+1)%3]
	// The follower learns who leads with the first heartbeat.
	if _, _, err := f.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := f.CreateCollection(context.Background(), "cpu", sensorOpts)
	var nl *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nl) {
		t.Fatalf("write on a follower: %v, want a NotLeaderError", err)
	}
	if nl.Leader != s.nodes[li].Addr() || nl.LeaderID != s.nodes[li].ID() {
		t.Fatalf("follower names leader %s (%s), want %s (%s)", nl.Leader, nl.LeaderID, s.nodes[li].Addr(), s.nodes[li].ID())
	}
	want := fmt.Sprintf("not the leader; leader is %s", s.nodes[li].Addr())
	if got := err.Error(); !strings.Contains(got, want) {
		t.Fatalf("error %q does not say %q", got, want)
	}
	if c := count(t, f.DB(), "cpu"); c != -1 {
		t.Fatalf("the refused create made a collection on the follower")
	}
	if f.Role() != RoleFollower || s.nodes[li].Role() != RoleLeader {
		t.Fatalf("roles %s and %s", f.Role(), s.nodes[li].Role())
	}
}

// With the leader shut down, the others elect one that accepts writes
// within a few seconds, with default timeouts, and nothing acknowledged
// before is lost.
func TestFailover(t *testing.T) {
	s := startSet(t, 3)
	li := s.leader()
	ctx := context.Background()
	if _, err := s.nodes[li].CreateCollection(ctx, "cpu", sensorOpts); err != nil {
		t.Fatal(err)
	}
	insert(t, s.nodes[li], 0, 50)

	start := time.Now()
	if err := s.nodes[li].Close(); err != nil {
		t.Fatal(err)
	}
	s.nodes[li] = nil
	var took time.Duration
	for {
		if time.Since(start) > 10*time.Second {
			t.Fatal("no member accepted a write within 10 s of the leader's shutdown")
		}
		ni := -1
		for i, n := range s.nodes {
			if n != nil && n.Role() == RoleLeader {
				ni = i
			}
		}
		if ni >= 0 {
			_, err := s.nodes[ni].Insert(ctx, "cpu", timeseries.Batch{Measurements: batch(50, 50)}, timeseries.InsertOptions{})
			if err == nil {
				took = time.Since(start)
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("failover: the leader shut down to a new leader's first acknowledged write in %s", took)
	s.waitCount("cpu", 100)
}

// A member shut down while writes go on catches up from the log when it
// restarts, without applying again what it held.
func TestRestartedMemberCatchesUp(t *testing.T) {
	s := startSet(t, 3)
	li, l := s.leaderWithCPU()
	insert(t, l, 0, 40)
	s.waitCount("cpu", 40)

	fi := (li + 1) % 3
	if err := s.nodes[fi].Close(); err != nil {
		t.Fatal(err)
	}
	// Read once closed: the index may trail the count by a batch.
	applied := s.nodes[fi].AppliedIndex()
	s.nodes[fi] = nil
	for i := range 5 {
		insert(t, l, 40+i*20, 20)
	}
	n, err := Open(s.opts[fi])
	if err != nil {
		t.Fatal(err)
	}
	s.nodes[fi] = n
	// The index recovered before raft started: once started, the member
	// may apply what the leader sends before it is read.
	if got := n.openApplied; got != applied {
		t.Fatalf("restarted member: applied index %d at open, want %d as before its shutdown", got, applied)
	}
	s.waitCount("cpu", 140)
	// The engine holds the rows before the batch's applied index is
	// recorded, so the index may trail the count by one batch for a moment.
	deadline := time.Now().Add(10 * time.Second)
	for n.AppliedIndex() <= applied {
		if time.Now().After(deadline) {
			t.Fatalf("applied index %d did not move past %d", n.AppliedIndex(), applied)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Refusals are answers, and the member goes on; an entry the member cannot
// apply (here, bytes that do not decode) halts it, and it stays halted
// after a restart instead of skipping the entry.
func TestHaltOnFailure(t *testing.T) {
	s := startSet(t, 1)
	n := s.nodes[s.leader()]
	ctx := context.Background()
	if _, err := n.Insert(ctx, "missing", timeseries.Batch{Measurements: batch(0, 1)}, timeseries.InsertOptions{}); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Fatalf("insert into a missing collection: %v, want NamespaceNotFound", err)
	}
	if _, err := n.CreateCollection(ctx, "cpu", timeseries.CollectionOptions{Capped: true}); mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("create with invalid options: %v, want InvalidOptions", err)
	}
	if err := n.Halted(); err != nil {
		t.Fatalf("a refusal halted the member: %v", err)
	}
	if _, err := n.CreateCollection(ctx, "cpu", sensorOpts); err != nil {
		t.Fatal(err)
	}
	applied := n.AppliedIndex()

	f := n.raft.Apply([]byte{commandFormat, 99}, time.Second)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if r := f.Response().(*applyResult); !errors.Is(r.err, ErrHalted) {
		t.Fatalf("an entry that does not decode: %v, want ErrHalted", r.err)
	}
	if !errors.Is(n.Halted(), ErrCorrupt) {
		t.Fatalf("Halted() = %v, want the decoding error", n.Halted())
	}
	if _, err := n.Insert(ctx, "cpu", timeseries.Batch{Measurements: batch(0, 1)}, timeseries.InsertOptions{}); !errors.Is(err, ErrHalted) {
		t.Fatalf("write on a halted member: %v, want ErrHalted", err)
	}
	if got := n.AppliedIndex(); got != applied {
		t.Fatalf("applied index %d moved past %d", got, applied)
	}
	n.Close()
	n, err := Open(s.opts[0])
	if err != nil {
		t.Fatal(err)
	}
	s.nodes[0] = n
	deadline := time.Now().Add(10 * time.Second)
	for n.Halted() == nil {
		if time.Now().After(deadline) {
			t.Fatal("restarted member did not halt on the same entry")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := n.AppliedIndex(); got != applied {
		t.Fatalf("after restart: applied index %d, want %d", got, applied)
	}
}

// A member killed after its engine applied entries but before their
// applied index was recorded rebuilds its engine from the raft log when it
// restarts, rather than applying them twice.
func TestUncleanRestartRebuilds(t *testing.T) {
	s := startSet(t, 3)
	li, l := s.leaderWithCPU()
	insert(t, l, 0, 40)
	s.waitCount("cpu", 40)
	fi := (li + 1) % 3
	f := s.nodes[fi]
	f.fsm.unrecorded.Store(true)
	insert(t, l, 40, 20)
	s.waitCount("cpu", 60) // f's engine holds them; its applied index does not say so
	n := s.killAndReopen(fi)
	insert(t, l, 60, 20)
	s.waitCount("cpu", 80)
	// And a clean restart keeps what it has: once the rebuilt member has
	// recorded the leader's applied index (the count comes first).
	deadline := time.Now().Add(10 * time.Second)
	for n.AppliedIndex() != l.AppliedIndex() {
		if time.Now().After(deadline) {
			t.Fatalf("rebuilt member applied %d, leader %d", n.AppliedIndex(), l.AppliedIndex())
		}
		time.Sleep(5 * time.Millisecond)
	}
	applied := n.AppliedIndex()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n, err := Open(s.opts[fi])
	if err != nil {
		t.Fatal(err)
	}
	s.nodes[fi] = n
	if got := n.AppliedIndex(); n.rebuilt || got < applied || got == 0 {
		t.Fatalf("after a clean stop: rebuilt %v, applied index %d, want %d or more", n.rebuilt, got, applied)
	}
	s.waitCount("cpu", 80)
}

// Updates and replaces of plain documents go through the log: every member
// ends with the same documents, the date a $currentDate set included,
// and the leader's counts.
func TestReplicatesUpdates(t *testing.T) {
	s := startSet(t, 3)
	l := s.nodes[s.leader()]
	ctx := context.Background()
	if _, err := l.CreateCollection(ctx, "p", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	docs := []document.Doc{{"_id": int64(1), "k": int64(1)}, {"_id": int64(2), "k": int64(1)}, {"_id": int64(3), "k": int64(2), "s": "x"}}
	if _, err := l.Insert(ctx, "p", timeseries.Batch{Documents: docs}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := l.Update(ctx, "p", timeseries.Update{Filter: mustFilter(t, `{"k": 1}`),
		Operators: mustUpdate(t, `{"$inc": {"n": 5}, "$set": {"d": {"$date": "2026-01-02T03:04:05.006Z"}, "big": 9007199254740993}, "$currentDate": {"at": true}}`), Multi: true})
	if err != nil || res.Matched != 2 || res.Modified != 2 {
		t.Fatalf("update: %+v, %v", res, err)
	}
	if res, err = l.Update(ctx, "p", timeseries.Update{Filter: mustFilter(t, `{"_id": 3}`), Replacement: document.Doc{"k": int64(9)}}); err != nil || res.Modified != 1 {
		t.Fatalf("replace: %+v, %v", res, err)
	}
	// A refusal: a path through a number, the same on every member.
	if res, err = l.Update(ctx, "p", timeseries.Update{Filter: mustFilter(t, `{}`), Operators: mustUpdate(t, `{"$set": {"k.x": 1}}`), Multi: true}); err == nil {
		t.Fatalf("a path through a number: %+v", res)
	}
	dump := func(n *Node) string {
		var out []string
		_, err := timeseries.EachDoc(n.DB().Find(ctx, "p", timeseries.FindOptions{Sort: []timeseries.SortKey{{Field: "_id"}}}))(func(d document.Doc) error {
			out = append(out, string(document.AppendJSON(nil, d)))
			return nil
		})
		if err != nil {
			return err.Error()
		}
		return strings.Join(out, "\n")
	}
	want := dump(l)
	if !strings.Contains(want, `"n":5`) || !strings.Contains(want, `"at"`) || !strings.Contains(want, `"k":{"$numberLong":"9"}`) ||
		!strings.Contains(want, `"d":{"$date":"2026-01-02T03:04:05.006Z"}`) || !strings.Contains(want, `"big":{"$numberLong":"9007199254740993"}`) {
		t.Fatalf("on the leader:\n%s", want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range s.nodes {
		for dump(n) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s:\n%s\nleader:\n%s", n.ID(), dump(n), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A time-series delete by a measurement field and a meta update go
// through the log like every write: each member applies them to the same
// measurements.
func TestReplicatesTimeSeriesDeleteAndMetaUpdate(t *testing.T) {
	s := startSet(t, 3)
	_, l := s.leaderWithCPU()
	ctx := context.Background()
	insert(t, l, 0, 100)
	s.waitCount("cpu", 100)
	// Both writes give the same result when made again: on a loaded
	// machine an election may come between, and the write is retried on
	// the new leader.
	onLeader := func(what string, write func(l *Node, retry bool) error) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			err := write(s.nodes[s.leader()], attempt > 0)
			if err == nil {
				return
			}
			if !errors.Is(err, ErrNotLeader) || attempt == 3 {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
	// A retry may find the first attempt applied: its counts are not
	// checked.
	onLeader("delete by v", func(l *Node, retry bool) error {
		n, err := l.Delete(ctx, "cpu", mustFilter(t, `{"v": {"$gte": 50}, "sensor": "s1"}`), timeseries.DeleteOptions{})
		if err == nil && !retry && n != 25 {
			t.Fatalf("delete by v: %d; want 25", n)
		}
		return err
	})
	s.waitCount("cpu", 75)
	onLeader("meta update", func(l *Node, retry bool) error {
		res, err := l.Update(ctx, "cpu", timeseries.Update{Filter: mustFilter(t, `{"sensor": "s0"}`), Operators: mustUpdate(t, `{"$set": {"sensor": "s1"}}`), Multi: true})
		if err == nil && !retry && (res.Matched != 50 || res.Modified != 50) {
			t.Fatalf("meta update: %+v", res)
		}
		return err
	})
	// Refused the same way on every member: nothing logged changes.
	if _, err := s.nodes[s.leader()].Update(ctx, "cpu", timeseries.Update{Filter: mustFilter(t, `{}`), Operators: mustUpdate(t, `{"$set": {"v": 1}}`), Multi: true}); err == nil {
		t.Fatal("an update of a measurement field was taken")
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range s.nodes {
		for {
			s1, err1 := m.DB().Count(ctx, "cpu", mustFilter(t, `{"sensor": "s1"}`), timeseries.CountOptions{})
			s0, err0 := m.DB().Count(ctx, "cpu", mustFilter(t, `{"sensor": "s0"}`), timeseries.CountOptions{})
			if err1 == nil && err0 == nil && s1 == 75 && s0 == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: s1 %d (%v), s0 %d (%v); want 75 and 0", m.ID(), s1, err1, s0, err0)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A retried write (the same session and transaction number) is applied
// once, also when the retry reaches the next leader after a failover, and
// answers the first attempt's result; another number is a new write.
func TestRetryableWrites(t *testing.T) {
	s := startSet(t, 3)
	l := s.nodes[s.leader()]
	bg := context.Background()
	if _, err := l.CreateCollection(bg, "p", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateCollection(bg, "cpu", sensorOpts); err != nil {
		t.Fatal(err)
	}
	write := func(n *Node, txn int64) (timeseries.InsertResult, timeseries.UpdateResult, timeseries.InsertResult) {
		t.Helper()
		ctx := WithSession(bg, "9f1c", txn)
		docs, err := n.Insert(ctx, "p", timeseries.Batch{Documents: []document.Doc{{"k": int64(1)}, {"k": int64(2)}}}, timeseries.InsertOptions{})
		if err != nil {
			t.Fatal(err)
		}
		up, err := n.Update(ctx, "p", timeseries.Update{Filter: mustFilter(t, `{}`), Operators: mustUpdate(t, `{"$inc": {"n": 1}}`), Multi: true})
		if err != nil {
			t.Fatal(err)
		}
		ms, err := n.Insert(ctx, "cpu", timeseries.Batch{Measurements: batch(int(txn)*100, 10)}, timeseries.InsertOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return docs, up, ms
	}
	d1, u1, m1 := write(l, 1)
	d2, u2, m2 := write(l, 1) // the driver's retry
	if d2.Inserted != d1.Inserted || u2 != u1 || m2.Inserted != m1.Inserted || d1.Inserted != 2 || u1.Modified != 2 {
		t.Fatalf("retry answered %+v %+v %+v, the first attempt %+v %+v %+v", d2, u2, m2, d1, u1, m1)
	}
	s.waitCount("p", 2)
	s.waitCount("cpu", 10)

	// The leader goes; the retry reaches the next one.
	li := s.leader()
	s.nodes[li].Close()
	s.nodes[li] = nil
	nl := s.nodes[s.leader()]
	if d3, u3, _ := write(nl, 1); d3.Inserted != 2 || u3 != u1 {
		t.Fatalf("retry on the new leader: %+v %+v", d3, u3)
	}
	s.waitCount("p", 2)
	s.waitCount("cpu", 10)
	// A new transaction number writes again.
	if _, u4, _ := write(nl, 2); u4.Modified != 4 {
		t.Fatalf("the next transaction's update: %+v, want 4 modified", u4)
	}
	s.waitCount("p", 4)
	s.waitCount("cpu", 20)
	var ns []any
	_, err := timeseries.EachDoc(nl.DB().Find(bg, "p", timeseries.FindOptions{}))(func(d document.Doc) error {
		ns = append(ns, d["n"].(int32)) // JSON integers are int32, and $inc of one keeps them so
		return nil
	})
	if err != nil || fmt.Sprint(ns) != "[2 2 1 1]" {
		t.Fatalf("n of the documents: %v %v, want [2 2 1 1]: each update applied once", ns, err)
	}
}

// A leader cut off from the others (Partition) loses the lead while it
// keeps running; the others elect a leader and take writes; healed, the
// cut-off member catches up.
func TestPartition(t *testing.T) {
	s := startSet(t, 3)
	li, l := s.leaderWithCPU()
	ctx := context.Background()
	insert(t, l, 0, 10)
	s.waitCount("cpu", 10)
	// Cut off until the others have elected one (at most a heartbeat and
	// an election timeout, each up to twice its setting): a cut that
	// ended first would let the old leader keep its place.
	l.Partition(30 * time.Second)
	deadline := time.Now().Add(25 * time.Second)
	var nl *Node
	for nl == nil {
		for i, n := range s.nodes {
			if i != li && n.Role() == RoleLeader {
				nl = n
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no other leader while the leader was cut off")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l.Role() == RoleLeader {
		t.Fatal("the cut-off leader still leads")
	}
	if _, err := l.Insert(ctx, "cpu", timeseries.Batch{Measurements: batch(10, 10)}, timeseries.InsertOptions{}); err == nil {
		t.Fatal("the cut-off member took a write")
	}
	insert(t, nl, 20, 10)
	l.Partition(0)
	s.waitCount("cpu", 20) // the cut-off member too, once healed
}

// A read barrier passes on the leader once it has applied every write
// acknowledged before it, is refused on a follower, and does not pass on
// a leader cut off from the others, which may already have been replaced
// (a linearizable read must not be served there).
func TestReadBarrier(t *testing.T) {
	s := startSet(t, 3)
	li, l := s.leaderWithCPU()
	ctx := context.Background()
	insert(t, l, 0, 10)
	if err := l.ReadBarrier(ctx); err != nil {
		t.Fatalf("on the leader: %v", err)
	}
	if got := count(t, l.DB(), "cpu"); got != 10 {
		t.Fatalf("after the barrier the leader holds %d, want 10", got)
	}
	var nle *NotLeaderError
	if err := s.nodes[(li+1)%3].ReadBarrier(ctx); !errors.As(err, &nle) {
		t.Fatalf("on a follower: %v, want a NotLeaderError", err)
	}
	l.Partition(3 * time.Second)
	// A response already on its way when the cut came may count; one
	// sent after it cannot.
	time.Sleep(100 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := l.ReadBarrier(cctx); err == nil {
		t.Fatal("a leader cut off from the others passed a read barrier")
	}
}

// mustFilter parses a filter given as JSON.
func mustFilter(t testing.TB, s string) *partialfilter.Filter {
	t.Helper()
	f, err := partialfilter.ParseJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// mustUpdate parses update operators given as JSON.
func mustUpdate(t testing.TB, s string) *document.Update {
	t.Helper()
	u, err := parseUpdateJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A rollup created through the leader exists on every member, and each
// member's copy, maintained from the writes it applies, holds the same
// measurements once caught up: a late write and a delete included.
func TestRollupOnEveryMember(t *testing.T) {
	s := startSet(t, 3)
	_, l := s.leaderWithCPU()
	ctx := context.Background()
	insert(t, l, 0, 200)
	opts, err := timeseries.RollupOptions(sensorOpts.TimeSeries,
		timeseries.RollupSpec{Source: "cpu", Window: "1m", Fields: []string{"v"}, Funcs: []string{"count", "sum", "max"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateCollection(ctx, "cpu_1m", opts); err != nil {
		t.Fatal(err)
	}
	insert(t, l, 300, 50)
	insert(t, l, 10, 5) // late: into windows already rolled up
	if _, err := l.Delete(ctx, "cpu", mustFilter(t, `{"v": {"$gte": 100, "$lt": 120}}`), timeseries.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitCount("cpu", 200+50+5-20)
	var want string
	for i, n := range s.nodes {
		if err := n.DB().CatchUpRollups(ctx); err != nil {
			t.Fatal(err)
		}
		got := rollupText(t, n.DB(), "cpu_1m")
		if i == 0 {
			want = got
			if strings.Count(want, "\n") < 6 {
				t.Fatalf("member 1's rollup holds only %q", want)
			}
		} else if got != want {
			t.Fatalf("member %d's rollup:\n%s\nmember 1's:\n%s", i+1, got, want)
		}
	}
}

// rollupText renders a collection's measurements, sorted, one a line.
func rollupText(t *testing.T, db *timeseries.DB, coll string) string {
	t.Helper()
	var lines []string
	cur, err := db.Find(context.Background(), coll, timeseries.FindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	for cur.Next() {
		rec := cur.Record()
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for c, col := range rec.Columns() {
				if rec.Schema().Field(c).Name == "_id" {
					continue // made of the member's series ids
				}
				fmt.Fprintf(&b, "%s=%v ", rec.Schema().Field(c).Name, col.ValueStr(i))
			}
			lines = append(lines, b.String())
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}
