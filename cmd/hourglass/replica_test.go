package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// freeAddrs returns n loopback addresses with ports free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs
}

// member is one replica set member's process and flags.
type member struct {
	id, http, raft, dir string
	args                []string
	srv                 *server
}

// start runs the member's binary and waits for it to serve.
func (m *member) start(t *testing.T) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, m.args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, url: "http://" + m.http, logs: new(bytes.Buffer), mu: new(sync.Mutex), done: make(chan error, 1)}
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if strings.Contains(sc.Text(), `"msg":"hourglass serving"`) {
				close(up)
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case <-up:
	case err := <-s.done:
		t.Fatalf("%s exited at start: %v\n%s", m.id, err, s.log())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%s did not start:\n%s", m.id, s.log())
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.done
		}
	})
	m.srv = s
}

// kill sends SIGKILL and waits for the process to end.
func (m *member) kill(t *testing.T) {
	t.Helper()
	m.srv.cmd.Process.Kill()
	<-m.srv.done
}

// get fetches path from the member; status 0 when it does not answer.
func get(url string) (int, []byte) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// leaderOf returns the HTTP address of the leader the members name, ""
// while they name none.
func leaderOf(ms []*member) string {
	for _, m := range ms {
		st, b := get("http://" + m.http + "/v1/replset?self=true")
		var rs struct {
			State  string
			Leader *struct{ HTTP string }
		}
		if st == 200 && json.Unmarshal(b, &rs) == nil && rs.State == "leader" {
			return m.http
		}
	}
	return ""
}

// startMembers starts a set of three members of the binary on loopback,
// each with extra flags.
func startMembers(t *testing.T, extra ...string) []*member {
	t.Helper()
	addrs := freeAddrs(t, 6)
	var ms []*member
	var spec []string
	for i := range 3 {
		m := &member{id: fmt.Sprintf("n%d", i+1), http: addrs[2*i], raft: addrs[2*i+1], dir: t.TempDir()}
		ms = append(ms, m)
		spec = append(spec, fmt.Sprintf("%s=%s/%s", m.id, m.raft, m.http))
	}
	for _, m := range ms {
		m.args = append([]string{"serve", "--replica-set", "rs0", "--node-id", m.id, "--raft-listen", m.raft,
			"--members", strings.Join(spec, ","), "--listen", m.http, "--data-dir", m.dir, "--log-format", "json"}, extra...)
		m.start(t)
	}
	return ms
}

// waitLeaderOf waits until one of ms says it leads, and returns it.
func waitLeaderOf(t *testing.T, ms []*member, within time.Duration) *member {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if a := leaderOf(ms); a != "" {
			for _, m := range ms {
				if m.http == a {
					return m
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no leader within %s", within)
	return nil
}

// sensorCounts returns the measurements of m per sensor, nil when the
// member does not answer.
func sensorCounts(m *member) map[string]int {
	st, b := get("http://" + m.http + `/v1/collections/m/find?readPreference=secondary&q={"projection":{"sensor":1}}`)
	if st != 200 {
		return nil
	}
	var rows []struct{ Sensor string }
	if json.Unmarshal(b, &rows) != nil {
		return nil
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Sensor]++
	}
	return out
}

// ttlDeleted returns the measurements m's TTL monitor deleted, -1 when
// it does not answer.
func ttlDeleted(m *member) int64 {
	st, b := get("http://" + m.http + "/v1/status")
	var s struct {
		Metrics struct {
			TTL struct{ DeletedDocuments int64 }
		}
	}
	if st != 200 || json.Unmarshal(b, &s) != nil {
		return -1
	}
	return s.Metrics.TTL.DeletedDocuments
}

// expireOld writes n measurements of 2020 into the collection "e" (a
// minute's TTL) through leader and waits until its monitor deleted them;
// the other members' monitors delete nothing.
func expireOld(t *testing.T, leader *member, others []*member, n int) {
	t.Helper()
	before := ttlDeleted(leader)
	var body strings.Builder
	for i := range n {
		fmt.Fprintf(&body, `{"t": {"$date": "2020-01-01T00:00:%02dZ"}, "sensor": "old", "v": %d}`+"\n", i, i)
	}
	if st, reply, err := leader.srv.post(t, "/v1/collections/e/documents", "application/x-ndjson", body.String()); err != nil || st != 200 {
		t.Fatalf("insert into e on %s: %d %s %v", leader.id, st, reply, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for ttlDeleted(leader) < before+int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader %s's TTL monitor deleted %d of %d", leader.id, ttlDeleted(leader)-before, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // two passes of the others' monitors
	for _, m := range others {
		if d := ttlDeleted(m); d != 0 {
			t.Errorf("follower %s's TTL monitor deleted %d measurements", m.id, d)
		}
	}
}

// Three real binaries on loopback make a replica set: writes through the
// leader reach every member, a follower refuses them naming the leader,
// the TTL monitor deletes on the leader only, and after kill -9 of the
// leader another accepts writes within seconds with every acknowledged
// write on the survivors, and its monitor takes over; the killed member,
// restarted, catches up.
func TestReplicaSetProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three binaries")
	}
	ms := startMembers(t, "--ttl-monitor-sleep", "500ms")
	waitLeader := func(within time.Duration) *member { return waitLeaderOf(t, ms, within) }
	leader := waitLeader(10 * time.Second)
	if st := leader.srv.put(t, "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "sensor"}}`); st != 201 {
		t.Fatalf("create on the leader: %d", st)
	}
	if st := leader.srv.put(t, "/v1/collections/e", `{"timeseries": {"timeField": "t", "metaField": "sensor"}, "expireAfterSeconds": 60}`); st != 201 {
		t.Fatalf("create e on the leader: %d", st)
	}
	// A secondary reads only when asked to, and says how far behind it
	// may be; the leader reads without asking.
	for _, m := range ms {
		c := http.Client{Timeout: 5 * time.Second}
		for _, pref := range []string{"", "readPreference=secondary&"} {
			resp, err := c.Get("http://" + m.http + "/v1/collections/e/find?" + pref + "q={}")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case m == leader || pref != "":
				if resp.StatusCode != 200 && resp.StatusCode != 404 { // 404: the follower has not applied the create yet
					t.Fatalf("%s: find with %q: %d %s", m.id, pref, resp.StatusCode, b)
				}
				if m != leader && resp.Header.Get("Hourglass-Applied-Index") == "" {
					t.Fatalf("%s: a secondary's read without Hourglass-Applied-Index", m.id)
				}
			case resp.StatusCode != 421 || !strings.Contains(string(b), `"code":13435`) || resp.Header.Get("Hourglass-Primary") != leader.http:
				t.Fatalf("%s: find on a secondary without readPreference: %d %s (primary header %q)", m.id, resp.StatusCode, b, resp.Header.Get("Hourglass-Primary"))
			}
		}
	}

	// One writer sends batches of 20 measurements, each batch a sensor of
	// its own, to the member it takes for the leader.
	const batch = 20
	var (
		mu       sync.Mutex
		acked    = map[string]bool{}
		ackTimes = map[string]time.Time{}
	)
	send := func(to *member, b int) (int, string) {
		var body strings.Builder
		for i := range batch {
			fmt.Fprintf(&body, `{"t": {"$date": "2026-01-01T00:%02d:%02dZ"}, "sensor": "b%d", "v": %d}`+"\n", i/60, i%60, b, i)
		}
		st, reply, err := to.srv.post(t, "/v1/collections/m/documents", "application/x-ndjson", body.String())
		if err != nil {
			return 0, err.Error()
		}
		return st, string(reply)
	}
	target := leader
	next := 0
	write := func() {
		b := next
		next++
		st, _ := send(target, b)
		if st == 200 {
			mu.Lock()
			acked[fmt.Sprintf("b%d", b)] = true
			ackTimes[target.id] = time.Now()
			mu.Unlock()
			return
		}
		if a := leaderOf(ms); a != "" {
			for _, m := range ms {
				if m.http == a {
					target = m
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for len(acked) < 20 {
		write()
	}

	// Every member holds what the leader acknowledged.
	waitSame := func(members []*member, want int) map[string]int {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			var got []map[string]int
			same := true
			for _, m := range members {
				c := sensorCounts(m)
				got = append(got, c)
				n := 0
				for _, v := range c {
					n += v
				}
				same = same && c != nil && (want < 0 || n == want) && fmt.Sprint(c) == fmt.Sprint(got[0])
			}
			if same {
				return got[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("members hold %v, want the same %d measurements on each", got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitSame(ms, 20*batch)

	// A follower refuses a write and names the leader.
	var follower *member
	for _, m := range ms {
		if m != leader {
			follower = m
			break
		}
	}
	st, reply := send(follower, -1)
	if st != 421 || !strings.Contains(reply, leader.http) || !strings.Contains(reply, "NotWritablePrimary") {
		t.Fatalf("write on follower %s: %d %s", follower.id, st, reply)
	}
	req, _ := http.NewRequest("PUT", "http://"+follower.http+"/v1/collections/other", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 421 || resp.Header.Get("Hourglass-Primary") != leader.http {
		t.Fatalf("create on follower: %d, Hourglass-Primary %q, want 421 and %s", resp.StatusCode, resp.Header.Get("Hourglass-Primary"), leader.http)
	}

	var followers []*member
	for _, m := range ms {
		if m != leader {
			followers = append(followers, m)
		}
	}
	expireOld(t, leader, followers, 10)

	// kill -9 the leader while the writer goes on.
	killed := leader
	killed.kill(t)
	killedAt := time.Now()
	var survivors []*member
	for _, m := range ms {
		if m != killed {
			survivors = append(survivors, m)
		}
	}
	for {
		write()
		mu.Lock()
		at, ok := ackTimes[target.id]
		mu.Unlock()
		if target != killed && ok && at.After(killedAt) {
			break
		}
		if time.Since(killedAt) > 20*time.Second {
			t.Fatalf("no write acknowledged within 20 s of the leader's kill")
		}
	}
	failover := ackTimes[target.id].Sub(killedAt)
	t.Logf("failover: the leader killed at %s, %s accepted a write %s later", killedAt.Format(time.StampMilli), target.id, failover.Round(time.Millisecond))
	if failover > 10*time.Second {
		t.Errorf("failover took %s", failover)
	}
	for range 10 {
		write()
	}
	var others []*member
	for _, m := range survivors {
		if m != target {
			others = append(others, m)
		}
	}
	expireOld(t, target, others, 10)

	// Every acknowledged batch is whole on both survivors, which hold
	// the same.
	have := waitSame(survivors, -1)
	for b := range acked {
		if have[b] != batch {
			t.Errorf("acknowledged batch %s: %d of %d measurements on the survivors", b, have[b], batch)
		}
	}
	for b, n := range have {
		if n != batch {
			t.Errorf("batch %s: %d measurements, want none or %d", b, n, batch)
		}
	}

	// The killed member, restarted, catches up.
	killed.start(t)
	total := 0
	for _, n := range have {
		total += n
	}
	waitSame(ms, total)
	t.Logf("%d batches acknowledged, %d measurements on every member after the restart", len(acked), total)
}

// The replica-set flags are checked together before anything starts.
func TestReplicaFlags(t *testing.T) {
	const m = "n1=127.0.0.1:7801/127.0.0.1:7701,n2=127.0.0.1:7802/127.0.0.1:7702"
	ok := replicaConfig{name: "rs0", nodeID: "n2", raftListen: "127.0.0.1:7802", members: m}
	got, err := ok.parse()
	if err != nil || len(got) != 2 || got[1] != (replicaMember{id: "n2", raft: "127.0.0.1:7802", http: "127.0.0.1:7702"}) {
		t.Fatalf("parse: %v %v", got, err)
	}
	for _, c := range []struct {
		cfg  replicaConfig
		want string
	}{
		{replicaConfig{name: "rs0", nodeID: "n1", raftListen: "127.0.0.1:7801"}, "together"},
		{replicaConfig{name: "rs0", nodeID: "n3", raftListen: "127.0.0.1:7803", members: m}, `does not name this member, --node-id "n3"`},
		{replicaConfig{name: "rs0", nodeID: "n1", raftListen: "127.0.0.1:9999", members: m}, "--raft-listen is 127.0.0.1:9999"},
		{replicaConfig{name: "rs0", nodeID: "n1", raftListen: "127.0.0.1:7801", members: m + ",n1=127.0.0.1:7803/127.0.0.1:7703"}, `names "n1" twice`},
		{replicaConfig{name: "rs0", nodeID: "n1", raftListen: "127.0.0.1:7801", members: "n1=127.0.0.1:7801"}, "want id=raft-host:port/http-host:port"},
		{replicaConfig{name: "rs0", nodeID: "n1", raftListen: "127.0.0.1:7801", members: "n1=127.0.0.1:7801/nowhere"}, "missing port"},
		{replicaConfig{name: "rs0", nodeID: "n1", raftListen: "127.0.0.1:7801", members: "n1=127.0.0.1:7801/127.0.0.1:7701/127.0.0.1:7601,n2=127.0.0.1:7802/127.0.0.1:7702"}, "every member a MongoDB address"},
		{replicaConfig{name: "rs0", nodeID: "n1", raftListen: "127.0.0.1:7801", members: "n1=127.0.0.1:7801/127.0.0.1:7701/"}, "want id=raft-host:port/http-host:port[/mongo-host:port]"},
	} {
		if _, err := c.cfg.parse(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}

	join := replicaConfig{name: "rs0", nodeID: "n4", raftListen: "127.0.0.1:7804", join: "127.0.0.1:7701"}
	got, err = join.parseJoin("127.0.0.1:7704", "")
	if err != nil || len(got) != 1 || got[0] != (replicaMember{id: "n4", raft: "127.0.0.1:7804", http: "127.0.0.1:7704"}) {
		t.Fatalf("parseJoin: %v %v", got, err)
	}
	for _, c := range []struct {
		cfg           replicaConfig
		listen, mongo string
		want          string
	}{
		{replicaConfig{name: "rs0", nodeID: "n4", join: "x:1"}, "127.0.0.1:7704", "", "with --join"},
		{replicaConfig{name: "rs0", nodeID: "n4", raftListen: "127.0.0.1:7804", join: "x:1", members: m}, "127.0.0.1:7704", "", "give one or the other"},
		{join, ":7704", "", "name a host"},
		{join, "0.0.0.0:7704", "", "name a host"},
		{join, "127.0.0.1:7704", "[::]:27017", "--mongo-listen"},
		{join, "nowhere", "", "missing port"},
	} {
		if _, err := c.cfg.parseJoin(c.listen, c.mongo); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v %s %s: %v, want %q", c.cfg, c.listen, c.mongo, err, c.want)
		}
	}
	if joinURL("127.0.0.1:7701/") != "http://127.0.0.1:7701" || joinURL("https://h:1") != "https://h:1" {
		t.Errorf("joinURL: %s, %s", joinURL("127.0.0.1:7701/"), joinURL("https://h:1"))
	}
}
