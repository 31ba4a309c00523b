package replset

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/backup"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
)

// contentText is every row of coll on db, one line each, sorted: two
// members hold the same data when their texts are equal.
func contentText(t *testing.T, db *timeseries.DB, coll string) string {
	t.Helper()
	ctx := context.Background()
	info, err := db.Describe(ctx, coll)
	if err != nil {
		t.Fatalf("describe %s: %v", coll, err)
	}
	var rows []string
	if info.Options.TimeSeries == nil {
		_, err := timeseries.EachDoc(db.Find(ctx, coll, timeseries.FindOptions{}))(func(d document.Doc) error {
			rows = append(rows, string(document.AppendJSON(nil, d)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		cur, err := db.Find(ctx, coll, timeseries.FindOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for cur.Next() {
			rec := cur.Record()
			for r := range int(rec.NumRows()) {
				var sb strings.Builder
				for c := range int(rec.NumCols()) {
					sb.WriteString(rec.ColumnName(c) + "=" + rec.Column(c).ValueStr(r) + " ")
				}
				rows = append(rows, sb.String())
			}
		}
		err = cur.Err()
		cur.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(rows)
	return strings.Join(rows, "\n")
}

// seedSet writes to a set of three, backs up a follower, writes more
// (after is called then, on the leader), restores the backup into a new
// directory, seeds a fourth member from it, adds it, and waits until every
// member holds what the leader holds. It returns the set, the seeded
// member and the backup's index.
//
// With replace, the follower the backup was taken on is removed from the
// set, stopped and its directory deleted, and the seeded member takes its
// ID: a wiped member brought back from a backup.
func seedSet(t *testing.T, mod func(*Options), replace bool, after func(s *testSet, l *Node, index uint64)) (*testSet, *Node, uint64) {
	s := startSetWith(t, 3, mod)
	li, l := s.leaderWithCPU()
	ctx := context.Background()
	if _, err := l.CreateCollection(ctx, "events", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		insert(t, l, i*10, 10)
	}
	// A retryable write before the backup (a document without _id: each
	// attempt gets a new one): its retry after the backup must not be
	// applied again on the seeded member.
	sctx := WithSession(ctx, "c0ffee", 1)
	if _, err := l.Insert(sctx, "events", timeseries.Batch{Documents: []document.Doc{{"k": "before"}}}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitCount("cpu", 200)
	s.waitCount("events", 1)

	fi := (li + 1) % 3
	f := s.nodes[fi]
	st, err := objstore.Open(ctx, "file://"+t.TempDir(), objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A writer goes on while the follower takes the backup: the image
	// holds the entries up to the index the manifest names, and none
	// after it.
	var (
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		written atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.Insert(ctx, "cpu", timeseries.Batch{Measurements: batch(10000+i*5, 5)}, timeseries.InsertOptions{}); err != nil {
				t.Errorf("insert during the backup: %v", err)
				return
			}
			written.Add(5)
		}
	}()
	for written.Load() < 50 {
		time.Sleep(time.Millisecond)
	}
	// Entries keep coming between the member's state and its image, which
	// a member that applied them meanwhile would hold beyond the index.
	f.DB().SetBackupHook(func() ([]byte, func(), error) {
		state, release, err := f.backupState()
		time.Sleep(100 * time.Millisecond)
		return state, release, err
	})
	res, err := backup.Create(ctx, f.DB(), st, backup.Options{})
	f.DB().SetBackupHook(f.backupState)
	for w := written.Load(); written.Load() < w+50 && err == nil; {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	m, err := backup.ReadManifest(ctx, st, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ParseSeed(m.Member)
	if err != nil {
		t.Fatalf("the manifest of a member's backup: %v (%s)", err, m.Member)
	}
	if info.Member != f.ID() || info.Index == 0 || info.Index > f.AppliedIndex() || len(info.Configuration) != 3 {
		t.Fatalf("seed info %+v of %s, applied %d", info, f.ID(), f.AppliedIndex())
	}

	// More writes after the backup, while the backup is restored.
	for i := range 10 {
		insert(t, l, 200+i*10, 10)
	}
	if _, err := l.Insert(ctx, "events", timeseries.Batch{Documents: []document.Doc{{"_id": int64(2), "k": "after"}}}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Delete(ctx, "cpu", mustFilter(t, `{"sensor": "s0", "t": {"$lt": {"$date": "2026-01-01T00:00:20Z"}}}`), timeseries.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	retry := WithSession(ctx, "c0ffee", 1) // the driver's retry: the same command again
	if _, err := l.Insert(retry, "events", timeseries.Batch{Documents: []document.Doc{{"k": "before"}}}, timeseries.InsertOptions{}); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if after != nil {
		after(s, l, info.Index)
	}
	id := "n4"
	if replace {
		id = f.ID()
		if err := l.RemoveMember(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(s.opts[fi].Dir); err != nil {
			t.Fatal(err)
		}
		s.nodes[fi] = nil
		insert(t, l, 900, 10) // while the member is gone
	}

	dir := filepath.Join(t.TempDir(), "n4")
	if _, err := backup.Restore(ctx, st, res.ID, filepath.Join(dir, "engine"), backup.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Seed(dir, m.Member, nil); err != nil {
		t.Fatal(err)
	}
	o := Options{ID: id, Dir: dir, Addr: "127.0.0.1:0", Engine: timeseries.Options{NoSync: true}}
	if mod != nil {
		mod(&o)
	}
	n4, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	o.Addr = n4.Addr()
	s.nodes = append(s.nodes, n4)
	s.opts = append(s.opts, o)
	if got := n4.AppliedIndex(); got != info.Index {
		t.Fatalf("the seeded member starts at index %d, the backup's is %d", got, info.Index)
	}
	if got := count(t, n4.DB(), "cpu"); got <= 200 {
		t.Fatalf("the seeded member holds %d measurements before it joins, the backup more than 200", got)
	}
	if err := l.AddMember(ctx, MemberAddrs{ID: id, Raft: n4.Addr()}, false); err != nil {
		t.Fatal(err)
	}
	insert(t, l, 1000, 10)
	want := count(t, l.DB(), "cpu")
	s.waitCount("cpu", want)
	s.waitCount("events", 2)
	if err := n4.WaitApplied(ctx, l.AppliedIndex()); err != nil {
		t.Fatal(err)
	}
	// The log it received starts after the backup's index (or after the
	// snapshot it was sent).
	if first, err := n4.store.FirstIndex(); err != nil || first != info.Index+1 && n4.fsm.restores.Load() == 0 {
		t.Fatalf("the seeded member's log starts at %d (%v), the backup's index is %d", first, err, info.Index)
	}
	first, _ := n4.store.FirstIndex()
	t.Logf("backup of %s at index %d, term %d; leader at %d; the seeded member's log starts at %d; snapshots installed: %d",
		info.Member, info.Index, info.Term, l.AppliedIndex(), first, n4.fsm.restores.Load())
	for _, coll := range []string{"cpu", "events"} {
		if got, want := contentText(t, n4.DB(), coll), contentText(t, l.DB(), coll); got != want {
			t.Fatalf("%s on the seeded member:\n%s\nthe leader's:\n%s", coll, got, want)
		}
	}
	return s, n4, info.Index
}

// A member seeded from a backup of a follower catches up from the log:
// the leader sends the entries after the backup's index, no snapshot, and
// the member then holds exactly what the leader holds, a retried write
// applied once.
func TestSeedFromBackup(t *testing.T) {
	s, n4, index := seedSet(t, nil, false, nil)
	if got := n4.fsm.restores.Load(); got != 0 {
		t.Fatalf("the seeded member installed %d snapshots; the leader's log still held the entries after index %d", got, index)
	}
	// It stays a member across a clean restart and a kill.
	i := len(s.nodes) - 1
	if err := n4.Close(); err != nil {
		t.Fatal(err)
	}
	if s.nodes[i], _ = Open(s.opts[i]); s.nodes[i] == nil {
		t.Fatal("the seeded member does not reopen")
	}
	l := s.nodes[s.leader()]
	insert(t, l, 2000, 10)
	s.waitCount("cpu", count(t, l.DB(), "cpu"))
	s.killAndReopen(i)
	insert(t, l, 3000, 10)
	s.waitCount("cpu", count(t, l.DB(), "cpu"))
}

// When the leader's log no longer reaches back to the backup's index, the
// seeded member is sent a snapshot, as a new member is.
func TestSeedFromBackupBehindTheLog(t *testing.T) {
	_, n4, _ := seedSet(t, snapshotOpts, false, func(s *testSet, l *Node, index uint64) {
		// Enough entries that every member's log starts after the
		// backup's index once it has snapshotted.
		for i := range 20 {
			insert(t, l, 500+i*10, 10)
		}
		s.waitCount("cpu", count(t, l.DB(), "cpu"))
		for _, n := range s.nodes {
			if n == nil {
				continue
			}
			if err := n.Snapshot(); err != nil && !errors.Is(err, ErrNothingToSnapshot) {
				t.Fatal(err)
			}
			if first, err := n.store.FirstIndex(); err != nil || first <= index+1 {
				t.Fatalf("%s's log starts at %d (%v), the backup's index is %d", n.ID(), first, err, index)
			}
		}
	})
	if got := n4.fsm.restores.Load(); got != 1 {
		t.Fatalf("the seeded member installed %d snapshots, want 1: the leader's log did not reach back to its index", got)
	}
}

// A member removed from the set and wiped comes back under its own ID
// from a backup taken on it, and catches up from the log.
func TestSeedReplacesAWipedMember(t *testing.T) {
	s, n4, index := seedSet(t, nil, true, nil)
	if got := n4.fsm.restores.Load(); got != 0 {
		t.Fatalf("the seeded member installed %d snapshots; the leader's log still held the entries after index %d", got, index)
	}
	// It can be given its vote, and the set goes on.
	l := s.nodes[s.leader()]
	if err := l.AddMember(context.Background(), MemberAddrs{ID: n4.ID(), Raft: n4.Addr()}, true); err != nil {
		t.Fatal(err)
	}
	insert(t, l, 5000, 10)
	s.waitCount("cpu", count(t, l.DB(), "cpu"))
}

// A backup of a server that is not a member seeds nothing, and a member
// does not start on a standalone store.
func TestSeedRefusals(t *testing.T) {
	if _, err := ParseSeed(nil); !errors.Is(err, ErrNotSeedable) {
		t.Fatalf("no member state: %v", err)
	}
	for _, state := range []string{`{`, `{"member":"n1","index":0,"term":1}`, `{"member":"n1","index":5,"term":0}`,
		`{"member":"n1","index":5,"term":1,"configuration":[{"ID":"n1","Addr":"a:1"}],"state":{"applied":4}}`} {
		if _, err := Seed(t.TempDir(), []byte(state), nil); !errors.Is(err, ErrNotSeedable) {
			t.Fatalf("state %s: %v", state, err)
		}
	}
	ctx := context.Background()
	dir := t.TempDir()
	db, err := timeseries.Open(timeseries.Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "cpu", sensorOpts); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{ID: "n1", Dir: dir, Addr: "127.0.0.1:0"})
	if !errors.Is(err, ErrStandaloneDir) {
		t.Fatalf("a member opened on a standalone store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "raft")); err == nil {
		t.Fatal("the refused directory was written to")
	}
}
