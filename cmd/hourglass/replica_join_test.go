package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"
)

// replSetView is what /v1/replset?self=true says of the members.
func replSetView(m *member) (members map[string]bool, ok bool) {
	st, b := get("http://" + m.http + "/v1/replset?self=true")
	var rs struct {
		Members []struct {
			ID       string
			NonVoter bool
		}
	}
	if st != 200 || json.Unmarshal(b, &rs) != nil {
		return nil, false
	}
	members = map[string]bool{}
	for _, x := range rs.Members {
		members[x.ID] = !x.NonVoter
	}
	return members, true
}

// A fourth member started with --join is added as a non-voter, catches
// up, becomes a voter and holds what the others hold; a member removed
// with DELETE /v1/replset/members/{id} leaves the configuration while the
// set goes on taking writes.
func TestReplicaSetJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs four binaries")
	}
	ms := startMembers(t, "--mongo-listen", "")
	leader := func() *member { return waitLeaderOf(t, ms, 10*time.Second) }
	l := leader()
	if st := l.srv.put(t, "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "sensor"}}`); st != 201 {
		t.Fatalf("create: %d", st)
	}
	written, write := sensorWriter(t, leader)
	write(30)

	addrs := freeAddrs(t, 2)
	n4 := &member{id: "n4", http: addrs[0], raft: addrs[1], dir: t.TempDir()}
	n4.args = []string{"serve", "--replica-set", "rs0", "--node-id", "n4", "--raft-listen", n4.raft,
		"--join", ms[1].http, "--listen", n4.http, "--data-dir", n4.dir, "--log-format", "json", "--mongo-listen", ""}
	n4.start(t)
	write(10)
	// n4 becomes a voter, on the leader's view, and holds every write.
	deadline := time.Now().Add(30 * time.Second)
	for {
		view, _ := replSetView(leader())
		if view["n4"] && maps.Equal(sensorCounts(n4), written) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n4: voter in the leader's view %v (%v), holds %d sensors of %d\n%s", view["n4"], view, len(sensorCounts(n4)), len(written), n4.srv.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(n4.srv.log(), "added to the replica set as a non-voter") {
		t.Fatalf("n4 did not join as a non-voter first:\n%s", n4.srv.log())
	}
	// n4 was given no --members: it knows the others' HTTP addresses from
	// the log, where the leader recorded them.
	_, b := get("http://" + n4.http + "/v1/replset?self=true")
	var rs struct{ Members []struct{ ID, HTTP string } }
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	for _, m := range rs.Members {
		if m.HTTP == "" {
			t.Fatalf("n4 does not know %s's HTTP address: %s", m.ID, b)
		}
	}

	// Remove a member that is not the leader.
	l = leader()
	var gone *member
	for _, m := range ms {
		if m != l {
			gone = m
			break
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, "http://"+l.http+"/v1/replset/members/"+gone.id, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("DELETE member %s: %v %v", gone.id, resp, err)
	}
	resp.Body.Close()
	if view, _ := replSetView(l); len(view) != 3 || view[gone.id] {
		t.Fatalf("after removing %s: %v", gone.id, view)
	}
	gone.kill(t)
	var rest []*member
	for _, m := range append(ms, n4) {
		if m != gone {
			rest = append(rest, m)
		}
	}
	ms = rest
	write(10)
	deadline = time.Now().Add(20 * time.Second)
	for _, m := range ms {
		for !maps.Equal(sensorCounts(m), written) {
			if time.Now().After(deadline) {
				t.Fatalf("%s holds %d sensors of %d", m.id, len(sensorCounts(m)), len(written))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// sensorWriter returns a writer of n new sensors of 10 measurements each
// into collection m through the leader, and what it wrote: sensor -> 10.
func sensorWriter(t *testing.T, leader func() *member) (map[string]int, func(n int)) {
	written := map[string]int{}
	return written, func(n int) {
		t.Helper()
		for i := range n {
			sensor := fmt.Sprintf("s%d", len(written))
			var body strings.Builder
			for j := range 10 {
				fmt.Fprintf(&body, `{"t": {"$date": "2026-01-01T00:%02d:%02dZ"}, "sensor": %q, "v": %d}`+"\n", i%60, j, sensor, j)
			}
			st, b, err := leader().srv.post(t, "/v1/collections/m/documents", "application/x-ndjson", body.String())
			if err != nil || st != 200 {
				t.Fatalf("write: %d %s %v", st, b, err)
			}
			written[sensor] = 10
		}
	}
}
