package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/backup"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
)

// rowsOf returns every row of collection m on the member, one JSON text
// each, sorted; nil when it does not answer.
func rowsOf(m *member) []string {
	st, b := get("http://" + m.http + "/v1/collections/m/find?readPreference=secondary")
	if st != 200 {
		return nil
	}
	var rows []json.RawMessage
	if json.Unmarshal(b, &rows) != nil {
		return nil
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = string(r)
	}
	slices.Sort(out)
	return out
}

// A backup of a secondary, restored with --member, starts a new member
// with --join that already holds the backup's data: it is sent the log
// after the backup's raft index, no snapshot, and ends holding exactly
// what the leader holds. The same backup restored without --member is
// refused by serve --replica-set.
func TestReplicaSeedFromBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs four binaries")
	}
	// Each member keeps 5 entries before a snapshot: once they took one,
	// a member that joined with nothing would need a snapshot, while the
	// entries after the backup stay in the log (no snapshot is due before
	// --snapshot-threshold entries).
	ms := startMembers(t, "--mongo-listen", "", "--trailing-logs", "5")
	leader := func() *member { return waitLeaderOf(t, ms, 10*time.Second) }
	if st := leader().srv.put(t, "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "sensor"}}`); st != 201 {
		t.Fatalf("create: %d", st)
	}
	written, write := sensorWriter(t, leader)
	holdsAll := func(m *member) bool { return maps.Equal(sensorCounts(m), written) }
	write(30)
	l := leader()
	var secondary *member
	for _, m := range ms {
		if m != l {
			secondary = m
		}
	}
	for deadline := time.Now().Add(10 * time.Second); !holdsAll(secondary); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d sensors of %d", secondary.id, len(sensorCounts(secondary)), len(written))
		}
	}
	for _, m := range ms {
		if st, b, err := m.srv.post(t, "/v1/replset/snapshot", "application/json", ""); err != nil || st != 200 {
			t.Fatalf("snapshot on %s: %d %s %v", m.id, st, b, err)
		}
	}
	target := "file://" + t.TempDir()
	if st, b, err := secondary.srv.post(t, "/v1/admin/backup", "application/json", `{"to": "`+target+`"}`); err != nil || st != 200 {
		t.Fatalf("backup on %s: %d %s %v", secondary.id, st, b, err)
	}
	write(20) // after the backup: n4 receives these from the log

	dir := filepath.Join(t.TempDir(), "n4")
	code, out, errOut := hourglass("restore", "--from", target, "--data-dir", dir, "--member", "--log-level", "warn")
	if code != 0 {
		t.Fatalf("restore --member: %d %s %s", code, out, errOut)
	}
	if !strings.Contains(out, "on replica set member "+secondary.id+", raft index ") {
		t.Fatalf("restore --member says:\n%s", out)
	}
	addrs := freeAddrs(t, 2)
	n4 := &member{id: "n4", http: addrs[0], raft: addrs[1], dir: dir}
	n4.args = []string{"serve", "--replica-set", "rs0", "--node-id", "n4", "--raft-listen", n4.raft,
		"--join", ms[0].http, "--listen", n4.http, "--data-dir", n4.dir, "--log-format", "json", "--mongo-listen", ""}
	n4.start(t)
	write(10)
	deadline := time.Now().Add(30 * time.Second)
	for {
		view, _ := replSetView(leader())
		if view["n4"] && holdsAll(n4) && slices.Equal(rowsOf(n4), rowsOf(leader())) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n4: voter in the leader's view %v (%v), holds %d sensors of %d\n%s", view["n4"], view, len(sensorCounts(n4)), len(written), n4.srv.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if log := n4.srv.log(); strings.Contains(log, "snapshot restored") || strings.Contains(log, "installing snapshot") {
		t.Fatalf("n4 was sent a snapshot; the leader's log held every entry after the backup's index:\n%s", log)
	}
	if len(rowsOf(n4)) != 600 {
		t.Fatalf("n4 holds %d rows, want 600", len(rowsOf(n4)))
	}

	// The same backup restored as a standalone directory is no member's.
	plain := filepath.Join(t.TempDir(), "plain")
	if code, out, errOut := hourglass("restore", "--from", target, "--data-dir", plain, "--log-level", "warn"); code != 0 || !strings.Contains(out, "restore it with --member") {
		t.Fatalf("restore: %d %s %s", code, out, errOut)
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	a := freeAddrs(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, bin, "serve", "--replica-set", "rs0", "--node-id", "n5", "--raft-listen", a[1],
		"--join", ms[0].http, "--listen", a[0], "--data-dir", plain, "--mongo-listen", "").CombinedOutput()
	if err == nil || !strings.Contains(string(b), "not a replica set member") || !strings.Contains(string(b), "restore --member") {
		t.Fatalf("serve --replica-set on a standalone restore: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(plain, "raft")); err == nil {
		t.Fatal("the refused directory was written to")
	}
}

// restore --member refuses a backup taken on a server that is not a
// replica set member, and writes nothing.
func TestRestoreMemberRefusesStandalone(t *testing.T) {
	ctx := context.Background()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.CreateCollection(ctx, "m", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	target := "file://" + t.TempDir()
	st, err := objstore.Open(ctx, target, objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := backup.Create(ctx, db, st, backup.Options{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "n4")
	code, out, errOut := hourglass("restore", "--from", target, "--data-dir", dir, "--member")
	if code == 0 || !strings.Contains(errOut, "not a replica set member") || !strings.Contains(errOut, "without --member") {
		t.Fatalf("restore --member of a standalone backup: %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("the refused restore left %s", dir)
	}
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 0 {
		t.Fatalf("the refused restore left %v", ents)
	}
}
