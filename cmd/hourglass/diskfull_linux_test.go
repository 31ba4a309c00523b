package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/internal/tmpfs"
)

// TestDiskFullShutdown fills the data directory's filesystem through the
// real binary (no disk reserve, so the log and the store themselves run
// out of space, checkpoints every 100ms failing), then sends SIGTERM: the
// server exits promptly, and restarted once space is freed it serves every
// acknowledged measurement.
func TestDiskFullShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the binary")
	}
	mnt := tmpfs.Mount(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	// Ballast leaves some 12 MiB to the server; deleting it frees space.
	var fs syscall.Statfs_t
	if err := syscall.Statfs(mnt, &fs); err != nil {
		t.Fatal(err)
	}
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, int64(fs.Bavail)*fs.Bsize-12<<20), 0o644); err != nil {
		t.Fatal(err)
	}

	s := startServer(t, dir, "--disk-reserve", "0", "--checkpoint-interval", "100ms", "--shutdown-timeout", "5s")
	if got := s.put(t, "/v1/collections/s", `{"timeseries": {"timeField": "t", "metaField": "m"}}`); got != 201 {
		t.Fatalf("create answered %d", got)
	}
	// Batches of incompressible values until the disk is full.
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	acked := map[int]bool{}
	next, full := 0, 0
	for req := 0; req < 2000 && full < 5; req++ {
		var b strings.Builder
		b.WriteByte('[')
		ids := make([]int, 0, 500)
		for i := range 500 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"t": {"$date": "%s"}, "m": "s%d", "id": %d, "v": %v}`,
				base.Add(time.Duration(next)*time.Second).Format(time.RFC3339), next%50, next, rng.Float64())
			ids = append(ids, next)
			next++
		}
		b.WriteByte(']')
		st, body, err := s.post(t, "/v1/collections/s/documents", "application/json", b.String())
		if err != nil {
			t.Fatalf("insert: %v", err)
		}
		switch st {
		case 200:
			var r struct {
				Inserted int `json:"inserted"`
			}
			if err := json.Unmarshal(body, &r); err != nil || r.Inserted != len(ids) {
				t.Fatalf("insert answered %s", body)
			}
			for _, id := range ids {
				acked[id] = true
			}
		case 507:
			full++
		default:
			t.Fatalf("insert answered %d: %.300s", st, body)
		}
	}
	if full == 0 {
		t.Fatalf("the disk never filled: %d measurements acknowledged", len(acked))
	}
	t.Logf("%d measurements acknowledged before the disk filled", len(acked))

	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("SIGTERM on a full disk: exit %v, want a clean exit\n%s", err, s.log())
		}
		t.Logf("exited cleanly in %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		s.cmd.Process.Signal(syscall.SIGQUIT) // goroutines into the log
		time.Sleep(time.Second)
		t.Fatalf("SIGTERM on a full disk: still running after 20s\n%s", s.log())
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, dir, "--disk-reserve", "0") // the default reserve is larger than this filesystem
	defer func() {
		s.cmd.Process.Kill()
		<-s.done
	}()
	st, body, err := s.post(t, "/v1/collections/s/find", "application/json", `{"projection": {"id": 1}}`)
	if err != nil || st != 200 {
		t.Fatalf("find after restart: %d %v %.300s", st, err, body)
	}
	var docs []struct {
		ID int `json:"id"`
	}
	if err := json.Unmarshal(body, &docs); err != nil {
		t.Fatalf("find after restart: %v", err)
	}
	found := map[int]bool{}
	for _, d := range docs {
		if found[d.ID] {
			t.Fatalf("measurement %d found twice", d.ID)
		}
		found[d.ID] = true
	}
	for id := range acked {
		if !found[id] {
			t.Fatalf("acknowledged measurement %d lost (%d acknowledged, %d found)", id, len(acked), len(found))
		}
	}
	if st, _, err := s.post(t, "/v1/collections/s/documents", "application/json",
		`[{"t": {"$date": "2024-06-01T00:00:00Z"}, "m": "s0", "id": -1, "v": 1}]`); err != nil || st != 200 {
		t.Fatalf("insert after space was freed: %d %v", st, err)
	}
}
