package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/replset"
	"github.com/hourglassdb/hourglass/timeseries"
)

// replicaServers starts a set of three members in process, each served
// over loopback HTTP, and returns them with the index of the leader.
func replicaServers(t *testing.T) ([]*testServer, []*replset.Node, int) {
	t.Helper()
	var (
		nodes   []*replset.Node
		members []replset.Member
		hss     []*httptest.Server
	)
	var addrs []replset.MemberAddrs
	for i := range 3 {
		hs := httptest.NewUnstartedServer(nil)
		t.Cleanup(hs.Close)
		hss = append(hss, hs)
		addrs = append(addrs, replset.MemberAddrs{ID: fmt.Sprintf("n%d", i+1), HTTP: hs.Listener.Addr().String()})
	}
	for i := range 3 {
		n, err := replset.Open(replset.Options{ID: fmt.Sprintf("n%d", i+1), Dir: t.TempDir(), Addr: "127.0.0.1:0",
			Addrs: addrs, Engine: timeseries.Options{NoSync: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
		members = append(members, replset.Member{ID: n.ID(), Addr: n.Addr()})
	}
	var servers []*testServer
	for i, n := range nodes {
		srv, err := api.New(api.Options{DB: n.DB(), ReplicaSet: &api.ReplicaSet{Name: "rs0", Node: n}})
		if err != nil {
			t.Fatal(err)
		}
		hss[i].Config.Handler = srv
		hss[i].Start()
		servers = append(servers, &testServer{t: t, srv: srv, db: n.DB(), url: hss[i].URL})
	}
	if err := nodes[0].Bootstrap(members); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range nodes {
		if _, _, err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, id := nodes[0].Leader()
	li := int(id[1] - '1')
	// Elected, the leader takes writes once it has applied the entries
	// before its term.
	for deadline := time.Now().Add(10 * time.Second); nodes[li].Role() != replset.RoleLeader; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("leader %s not ready within 10 s", id)
		}
	}
	return servers, nodes, li
}

// waitCounts waits until every member's count of name is want.
func waitCounts(t *testing.T, servers []*testServer, name string, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := true
		var got []int64
		for _, s := range servers {
			c := int64(-1) // until the member holds the collection
			if r := s.do("GET", "/v1/collections/"+name, nil); r.status == 200 {
				c = int64(r.json(t)["count"].(float64))
			}
			got = append(got, c)
			ok = ok && c == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: members count %v, want %d", name, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// On a replica set, HTTP writes to the leader reach every member; a
// follower refuses them with 421 and the leader's HTTP address; writes the
// log does not carry are refused everywhere; /v1/replset reports the set.
func TestReplicaSetHTTP(t *testing.T) {
	servers, nodes, li := replicaServers(t)
	l, f := servers[li], servers[(li+1)%3]
	leaderHTTP := strings.TrimPrefix(l.url, "http://")

	l.createSensors("s")
	l.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	waitCounts(t, servers, "s", 4)
	l.mustDo(204, "POST", "/write?db=lp", "m,host=a v=1 1700000000000000000\nm,host=b v=2 1700000000000000000\n")
	waitCounts(t, servers, "lp", 2)
	l.mustDo(200, "POST", "/v1/collections/s/delete", `{"filter": {"sensor": "a"}}`)
	waitCounts(t, servers, "s", 2)
	l.mustDo(201, "PUT", "/v1/collections/p", `{}`)
	l.mustDo(200, "POST", "/v1/collections/p/documents", `[{"_id": 1, "x": 1}, {"x": 2}, {"_id": 3, "x": 3}]`)
	waitCounts(t, servers, "p", 3)
	l.mustDo(200, "POST", "/v1/collections/p/delete", `{"filter": {"x": {"$gte": 2}}}`)
	waitCounts(t, servers, "p", 1)
	l.mustDo(201, "POST", "/v1/collections/p/indexes", `{"key": {"x": 1}, "name": "x_1"}`)

	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/v1/collections/t", `{}`},
		{"POST", "/v1/collections/s/documents", sensorDocs},
		{"POST", "/v1/collections/s/delete", `{"filter": {}}`},
		{"DELETE", "/v1/collections/s", ``},
		{"POST", "/v1/collections/p/indexes", `{"key": {"y": 1}}`},
		{"PATCH", "/v1/collections/s", `{"expireAfterSeconds": 60}`},
		{"DELETE", "/v1/collections/p/indexes/x_1", ``},
		// A collection this follower does not hold (it may not have
		// applied its creation yet): the leader's to answer, not a 404.
		{"POST", "/v1/collections/nope/delete", `{"filter": {}}`},
		{"POST", "/v1/collections/nope/update", `{"filter": {}, "update": {"$set": {"a": 1}}}`},
		{"POST", "/v1/collections/nope/documents", `{"a": 1}`},
	} {
		r := f.mustDo(421, w.method, w.path, w.body)
		if got := r.header.Get("Hourglass-Primary"); got != leaderHTTP {
			t.Errorf("%s %s on a follower: Hourglass-Primary %q, want %q", w.method, w.path, got, leaderHTTP)
		}
		if c := r.errorCode(t); c != 10107 || !strings.Contains(string(r.body), leaderHTTP) || !strings.Contains(string(r.body), "NotWritablePrimary") {
			t.Errorf("%s %s on a follower: %s", w.method, w.path, r.body)
		}
	}
	// Prometheus remote write: through the log to every member; a
	// follower refuses it in Prometheus' error shape.
	rw := promBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series([]prompb.Sample{{Value: 1, Timestamp: promT0}, {Value: 2, Timestamp: promT0 + 1000}}, "__name__", "up", "job", "a")}})
	if r := l.promWrite(204, "/api/v1/write", rw); r.header.Get("Hourglass-Applied-Index") == "" {
		t.Errorf("remote write on the leader: no Hourglass-Applied-Index")
	}
	waitCounts(t, servers, "prometheus", 2)
	r := f.promWrite(421, "/api/v1/write", rw)
	if typ, msg := promErrorOf(t, r); typ != "unavailable" || !strings.Contains(msg, leaderHTTP) || r.header.Get("Hourglass-Primary") != leaderHTTP {
		t.Errorf("remote write on a follower: %s", r.body)
	}
	r = f.mustDo(421, "POST", "/api/v2/write?bucket=lp", "m,host=c v=3 1700000000000000000\n")
	if got := r.header.Get("Hourglass-Primary"); got != leaderHTTP || !strings.Contains(string(r.body), leaderHTTP) ||
		r.header.Get("X-Influxdb-Error") == "" {
		t.Errorf("line protocol on a follower (an InfluxDB error body): %q %s", got, r.body)
	}

	// collMod through the log: the collection's TTL and an index's, on
	// every member.
	l.mustDo(200, "PATCH", "/v1/collections/s", `{"expireAfterSeconds": 315360000}`)
	l.mustDo(200, "PATCH", "/v1/collections/p", `{"index": {"name": "x_1", "expireAfterSeconds": 315360000}}`)
	for _, n := range nodes {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			info, err := n.DB().Describe(context.Background(), "s")
			ix, err2 := n.DB().ListIndexes(context.Background(), "p")
			ttlIx := false
			for _, x := range ix {
				ttlIx = ttlIx || x.Name == "x_1" && x.ExpireAfterSeconds != nil && *x.ExpireAfterSeconds == 315360000
			}
			if err == nil && err2 == nil && info.Options.ExpireAfterSeconds != nil && *info.Options.ExpireAfterSeconds == 315360000 && ttlIx {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: collMod not applied: %+v %v; indexes %+v %v", n.ID(), info.Options, err, ix, err2)
			}
		}
	}
	// Update and replace through the log: the same documents on every
	// member, a $currentDate's date included; a follower names the leader.
	f.mustDo(421, "POST", "/v1/collections/p/update", `{"filter": {"_id": 1}, "update": {"$set": {"x": 9}}}`)
	f.mustDo(421, "POST", "/v1/collections/p/replace", `{"filter": {"_id": 1}, "replacement": {"x": 9}}`)
	l.mustDo(200, "POST", "/v1/collections/p/update", `{"filter": {"_id": 1}, "update": {"$set": {"x": 9}, "$currentDate": {"at": true}}}`)
	l.mustDo(200, "POST", "/v1/collections/p/replace", `{"filter": {"_id": 1}, "replacement": {"x": 10, "at": {"$date": "2026-01-01T00:00:00Z"}}}`)
	l.mustDo(200, "POST", "/v1/collections/p/update", `{"filter": {}, "update": {"$inc": {"x": 1}, "$currentDate": {"seen": true}}, "multi": true}`)
	docsOf := func(s *testServer) string {
		return string(s.do("POST", "/v1/collections/p/find?readPreference=secondary", []byte(`{"sort": {"_id": 1}}`)).body)
	}
	want := docsOf(l)
	if !strings.Contains(want, `"x":11`) || !strings.Contains(want, `"seen"`) {
		t.Fatalf("after update and replace, the leader holds %s", want)
	}
	for _, s := range servers {
		for deadline := time.Now().Add(10 * time.Second); docsOf(s) != want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("a member holds %s, the leader %s", docsOf(s), want)
			}
		}
	}
	waitCounts(t, servers, "s", 2)
	waitCounts(t, servers, "lp", 2)
	// dropIndex through the log: gone on every member.
	l.mustDo(200, "DELETE", "/v1/collections/p/indexes/x_1", ``)
	for _, n := range nodes {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			ix, err := n.DB().ListIndexes(context.Background(), "p")
			if err == nil && len(ix) == 1 && ix[0].Name == "_id_" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: indexes of p %v %v, want _id_ alone", n.ID(), ix, err)
			}
		}
	}

	var st struct {
		Set, Self, State string
		Leader           struct{ ID, Raft, HTTP string }
		AppliedIndex     uint64
		Members          []struct {
			ID, Raft, HTTP, State string
			Self                  bool
			AppliedIndex          *uint64
		}
	}
	if err := json.Unmarshal(f.mustDo(200, "GET", "/v1/replset", "").body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Set != "rs0" || st.Self != nodes[(li+1)%3].ID() || st.State != "follower" || st.Leader.ID != nodes[li].ID() ||
		st.Leader.HTTP != leaderHTTP || st.Leader.Raft != nodes[li].Addr() || len(st.Members) != 3 {
		t.Fatalf("/v1/replset on a follower: %+v", st)
	}
	for i, m := range st.Members {
		want := "follower"
		if i == li {
			want = "leader"
		}
		if m.ID != nodes[i].ID() || m.Raft != nodes[i].Addr() || m.HTTP != strings.TrimPrefix(servers[i].url, "http://") ||
			m.State != want || m.AppliedIndex == nil || *m.AppliedIndex == 0 || m.Self != (i == (li+1)%3) {
			t.Errorf("member %d: %+v", i, m)
		}
	}
}

// A write whose leader loses the lead before it is committed (here: the
// other members gone, so no majority) is answered 503 with Retry-After and
// InterruptedDueToReplStateChange, saying it may or may not be applied,
// not 500.
func TestReplicaLeadershipLost(t *testing.T) {
	servers, nodes, li := replicaServers(t)
	leader := servers[li]
	if r := leader.do("PUT", "/v1/collections/m", []byte(`{"timeseries": {"timeField": "t", "metaField": "s"}}`)); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for i, n := range nodes {
		if i != li {
			n.Close()
		}
	}
	r := leader.do("POST", "/v1/collections/m/documents", []byte(`[{"t": {"$date": "2026-01-01T00:00:00Z"}, "s": "a", "v": 1}]`))
	if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "InterruptedDueToReplStateChange") ||
		!strings.Contains(string(r.body), "may or may not be applied") {
		t.Fatalf("a write losing its leader: %d %v %s", r.status, r.header, r.body)
	}
}

// The membership calls refuse what they cannot do, on the leader and on a
// follower, and change nothing; a snapshot is taken on any member.
func TestReplicaSetMembersHTTP(t *testing.T) {
	servers, nodes, li := replicaServers(t)
	l, f := servers[li], servers[(li+1)%3]
	for _, c := range []struct {
		s            *testServer
		method, path string
		body         string
		status       int
		want         string
	}{
		{l, "POST", "/v1/replset/members", `{"id": "n4"}`, 400, "needs 'id', 'raft' and 'http'"},
		{l, "POST", "/v1/replset/members", `{"id": "n4", "raft": "127.0.0.1:1", "http": "127.0.0.1:2", "votes": 1}`, 400, `unknown field`},
		{l, "POST", "/v1/replset/members", `{"id": "n4", "raft": "127.0.0.1:1", "http": "127.0.0.1:2", "voter": "yes"}`, 400, "'voter' must be a boolean"},
		{l, "POST", "/v1/replset/members", `{"id": 4, "raft": "127.0.0.1:1", "http": "127.0.0.1:2"}`, 400, "'id' must be a string"},
		{l, "POST", "/v1/replset/members", `{"id": "n4", "raft": "nowhere", "http": "127.0.0.1:2"}`, 400, "missing port"},
		{l, "POST", "/v1/replset/members", `{"id": "n1", "raft": "127.0.0.1:1", "http": "127.0.0.1:2"}`, 400, "remove it first"},
		{l, "POST", "/v1/replset/members", `[`, 400, "JSON"},
		{f, "POST", "/v1/replset/members", `{"id": "n4", "raft": "127.0.0.1:1", "http": "127.0.0.1:2"}`, 421, "not the primary"},
		{l, "DELETE", "/v1/replset/members/n9", ``, 404, "no member"},
		{l, "POST", "/v1/replset/partition?seconds=1", ``, 404, "fault injection is off"},
		{f, "DELETE", "/v1/replset/members/n1", ``, 421, "not the primary"},
	} {
		r := c.s.do(c.method, c.path, []byte(c.body))
		if r.status != c.status || !strings.Contains(string(r.body), c.want) {
			t.Errorf("%s %s %s: %d %s, want %d %q", c.method, c.path, c.body, r.status, r.body, c.status, c.want)
		}
	}
	if got := len(nodes[li].Members()); got != 3 {
		t.Fatalf("after refusals the set has %d members", got)
	}
	l.createSensors("s")
	l.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	waitCounts(t, servers, "s", 4)
	for _, s := range []*testServer{l, f} {
		var snap struct {
			Taken         bool
			SnapshotIndex uint64
		}
		if err := json.Unmarshal(s.mustDo(200, "POST", "/v1/replset/snapshot", ``).body, &snap); err != nil {
			t.Fatal(err)
		}
		if !snap.Taken || snap.SnapshotIndex == 0 {
			t.Fatalf("snapshot: %+v", snap)
		}
		// With nothing applied since (the set may still be applying
		// entries of its own a moment), 200 and nothing taken.
		for deadline := time.Now().Add(5 * time.Second); snap.Taken; time.Sleep(100 * time.Millisecond) {
			if err := json.Unmarshal(s.mustDo(200, "POST", "/v1/replset/snapshot", ``).body, &snap); err != nil || time.Now().After(deadline) {
				t.Fatalf("snapshots with nothing new: %+v %v", snap, err)
			}
		}
	}
}

// A write's answer carries the index the leader had applied; a read with
// afterIndex set to it sees the write on a follower, and one far ahead
// waits waitMS and is answered 503 MaxTimeMSExpired.
func TestReplicaSetAfterIndex(t *testing.T) {
	servers, _, li := replicaServers(t)
	l, f := servers[li], servers[(li+1)%3]
	l.createSensors("s")
	r := l.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	idx := r.header.Get("Hourglass-Applied-Index")
	if n, err := strconv.ParseUint(idx, 10, 64); err != nil || n == 0 {
		t.Fatalf("a write's Hourglass-Applied-Index: %q", idx)
	}
	// Every read with afterIndex sees the 4 documents at once: the wait
	// is the follower's, not the test's.
	for _, s := range servers {
		r := s.mustDo(200, "POST", "/v1/collections/s/find?readPreference=secondary&afterIndex="+idx, `{}`)
		var rows []any
		if err := json.Unmarshal(r.body, &rows); err != nil || len(rows) != 4 {
			t.Fatalf("find after index %s: %d rows, %v: %s", idx, len(rows), err, r.body)
		}
	}
	r = f.mustDo(503, "POST", "/v1/collections/s/find?readPreference=secondary&afterIndex=999999999&waitMS=50", `{}`)
	if r.errorCode(t) != 50 || !strings.Contains(string(r.body), "afterIndex 999999999") {
		t.Fatalf("a read far ahead: %s", r.body)
	}
	f.mustDo(400, "POST", "/v1/collections/s/find?readPreference=secondary&afterIndex=x", `{}`)
	f.mustDo(400, "POST", "/v1/collections/s/find?readPreference=secondary&afterIndex=1&waitMS=-1", `{}`)
}

// A server that is not a replica set member answers the set's calls with
// 404 and says why.
func TestReplSetCallsOnStandalone(t *testing.T) {
	s := newTestServer(t, nil)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/replset", ""},
		{"POST", "/v1/replset/members", `{"id":"n4","raft":"127.0.0.1:1","http":"127.0.0.1:2"}`},
		{"DELETE", "/v1/replset/members/n2", ""},
		{"POST", "/v1/replset/snapshot", ""},
	} {
		r := s.mustDo(404, c.method, c.path, c.body)
		if !strings.Contains(string(r.body), "not a replica set member") {
			t.Errorf("%s %s: %s", c.method, c.path, r.body)
		}
	}
}
