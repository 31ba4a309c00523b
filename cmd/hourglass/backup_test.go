package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hourglass runs the command line in this process.
func hourglass(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestBackupRestoreCommands is the restore drill of docs/backup.md against
// a real server: backup create, list, verify, restore, serve the restored
// directory and find the data; a flipped byte makes verify and restore
// fail, naming the file, and restore leaves no directory.
func TestBackupRestoreCommands(t *testing.T) {
	s := startServer(t, t.TempDir())
	if code := s.put(t, "/v1/collections/s", `{"timeseries": {"timeField": "timestamp", "metaField": "sensor"}}`); code != 201 {
		t.Fatalf("create: %d", code)
	}
	var docs []string
	for i := range 500 {
		docs = append(docs, fmt.Sprintf(`{"timestamp": "2024-05-01T12:%02d:%02dZ", "sensor": "s%d", "v": %d}`, i/60, i%60, i%5, i))
	}
	if code, b, err := s.post(t, "/v1/collections/s/documents", "application/json", "["+strings.Join(docs, ",")+"]"); err != nil || code != 200 {
		t.Fatalf("insert: %d %s %v", code, b, err)
	}
	target := "file://" + t.TempDir()

	code, out, errOut := hourglass("backup", "create", "--server", s.url, "--to", target)
	if code != 0 || !strings.HasPrefix(out, "backup ") {
		t.Fatalf("backup create: %d %s %s", code, out, errOut)
	}
	id := strings.TrimSuffix(strings.Fields(out)[1], ":")
	code, out, errOut = hourglass("backup", "list", "--from", target)
	if code != 0 || !strings.Contains(out, id+"  complete") {
		t.Fatalf("backup list: %d %s %s", code, out, errOut)
	}
	code, out, errOut = hourglass("backup", "verify", "--from", target+"/"+id)
	if code != 0 || !strings.Contains(out, "complete and intact") {
		t.Fatalf("backup verify: %d %s %s", code, out, errOut)
	}
	// A bad target is a clear error, not a crash.
	if code, _, errOut := hourglass("backup", "create", "--server", s.url, "--to", "ftp://x"); code != 1 || !strings.Contains(errOut, "400") {
		t.Fatalf("backup create to ftp: %d %s", code, errOut)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	code, out, errOut = hourglass("restore", "--from", target, "--data-dir", dir, "--log-level", "warn")
	if code != 0 || !strings.Contains(out, "restored backup "+id) {
		t.Fatalf("restore: %d %s %s", code, out, errOut)
	}
	r := startServer(t, dir)
	resp, err := http.Post(r.url+"/v1/collections/s/aggregate", "application/json",
		strings.NewReader(`{"pipeline": [{"$count": "n"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) != 1 || rows[0]["n"] != float64(500) {
		t.Fatalf("the restored server counts %s", b)
	}

	// Damage: a flipped byte in one of the files.
	root := strings.TrimPrefix(target, "file://")
	ents, _ := os.ReadDir(filepath.Join(root, "files"))
	var victim string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".sst.") || victim == "" {
			victim = filepath.Join(root, "files", e.Name())
		}
	}
	raw, _ := os.ReadFile(victim)
	raw[len(raw)/2] ^= 1
	os.WriteFile(victim, raw, 0o644)
	code, _, errOut = hourglass("backup", "verify", "--from", target)
	if code != 1 || !strings.Contains(errOut, "checksum mismatch") {
		t.Fatalf("verify of a damaged backup: %d %s", code, errOut)
	}
	dir2 := filepath.Join(t.TempDir(), "restored2")
	code, _, errOut = hourglass("restore", "--from", target, "--data-dir", dir2)
	if code != 1 || !strings.Contains(errOut, "checksum mismatch") || !strings.Contains(errOut, "nothing was written") {
		t.Fatalf("restore of a damaged backup: %d %s", code, errOut)
	}
	if _, err := os.Stat(dir2); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left %s", dir2)
	}
	// A target to read is not created.
	missing := filepath.Join(t.TempDir(), "none")
	if code, _, errOut := hourglass("backup", "verify", "--from", "file://"+missing); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("verify of a missing target: %d %s", code, errOut)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("verify created %s", missing)
	}
	// Usage errors.
	for _, args := range [][]string{{"backup"}, {"backup", "bogus"}, {"restore", "--bogus"}} {
		if code, _, _ := hourglass(args...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, _ := hourglass("backup", "prune", "--from", target); code != 1 {
		t.Fatal("prune without --keep did not fail")
	}
	code, out, _ = hourglass("backup", "prune", "--from", target, "--keep", "1")
	if code != 0 || !strings.Contains(out, "kept 1 backups") {
		t.Fatalf("prune: %d %s", code, out)
	}
}

// TestBackupFromSecondary takes a backup on a follower of a three-member
// set, restores it, and serves it as a standalone store holding what the
// follower had applied.
func TestBackupFromSecondary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three binaries")
	}
	ms := startMembers(t)
	leader := waitLeaderOf(t, ms, 10*time.Second)
	if st := leader.srv.put(t, "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "sensor"}}`); st != 201 {
		t.Fatalf("create on the leader: %d", st)
	}
	var body strings.Builder
	for i := range 100 {
		fmt.Fprintf(&body, `{"t": {"$date": "2026-01-01T00:%02d:%02dZ"}, "sensor": "s%d", "v": %d}`+"\n", i/60, i%60, i%5, i)
	}
	if st, b, err := leader.srv.post(t, "/v1/collections/m/documents", "application/x-ndjson", body.String()); err != nil || st != 200 {
		t.Fatalf("insert: %d %s %v", st, b, err)
	}
	var follower *member
	for _, m := range ms {
		if m != leader {
			follower = m
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; n != 100; {
		if time.Now().After(deadline) {
			t.Fatalf("the follower applied %d of 100 measurements", n)
		}
		n = 0
		for _, c := range sensorCounts(follower) {
			n += c
		}
		time.Sleep(20 * time.Millisecond)
	}
	target := "file://" + t.TempDir()
	st, b, err := follower.srv.post(t, "/v1/admin/backup", "application/json", `{"to": "`+target+`"}`)
	if err != nil || st != 200 {
		t.Fatalf("backup on the follower: %d %s %v", st, b, err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if code, out, errOut := hourglass("restore", "--from", target, "--data-dir", dir, "--log-level", "warn"); code != 0 {
		t.Fatalf("restore: %d %s %s", code, out, errOut)
	}
	r := startServer(t, dir)
	n := 0
	for _, c := range sensorCounts(&member{http: strings.TrimPrefix(r.url, "http://")}) {
		n += c
	}
	if n != 100 {
		t.Fatalf("the restored store holds %d of the 100 measurements", n)
	}
}
