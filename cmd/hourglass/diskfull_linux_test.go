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

// TestDiskFullShutdown runs the binary with its data directory on a small
// tmpfs and writes line protocol until the disk is full and writes get
// 507, with checkpoints due every second; then SIGTERM must stop it within
// a few seconds with status 0, and a restart, once space is freed, must
// serve every acknowledged batch whole. With --disk-reserve 0 the log
// itself meets ENOSPC; with a reserve, writes are refused before it.
func TestDiskFullShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, reserve := range []string{"0", "4MiB"} {
		t.Run("reserve="+reserve, func(t *testing.T) { diskFullShutdown(t, reserve) })
	}
}

const (
	fullBatchLines = 2000
	fullBatchBase  = 1714564000 // seconds, a multiple of fullBatchLines
)

func diskFullShutdown(t *testing.T, reserve string) {
	const size = 40 << 20
	root := tmpfs.Mount(t, size)
	// Leave about 8 MiB for the data: the rest is a file removed before
	// the restart.
	fill := filepath.Join(root, "fill")
	if err := os.WriteFile(fill, make([]byte, size-8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(root, "data")
	flags := []string{"--disk-reserve", reserve, "--checkpoint-interval", "1s", "--shutdown-timeout", "20s"}
	s := startServer(t, dataDir, flags...)

	rng := rand.New(rand.NewPCG(1, 2))
	acked := map[int]bool{}
	sent, refusal := 0, ""
	for ; sent < 5000 && refusal == ""; sent++ {
		var b strings.Builder
		for j := range fullBatchLines {
			// Random doubles: some 6 bytes a point on disk, so that the
			// disk fills.
			fmt.Fprintf(&b, "m,host=h%d v=%v %d\n", j%20, rng.Float64(), fullBatchBase+sent*fullBatchLines+j)
		}
		st, body, err := s.post(t, "/write?db=full&precision=s", "text/plain", b.String())
		switch {
		case err != nil:
			t.Fatalf("batch %d: %v\n%s", sent, err, s.log())
		case st == 204:
			acked[sent] = true
		case st == 507:
			refusal = string(body)
		default:
			t.Fatalf("batch %d: status %d %s", sent, st, body)
		}
	}
	if refusal == "" {
		t.Fatalf("%d batches of %d lines written and no 507", sent, fullBatchLines)
	}
	if len(acked) == 0 {
		t.Fatalf("the first batch was refused: %s", refusal)
	}
	t.Logf("%d batches acknowledged, then 507: %s", len(acked), refusal)
	time.Sleep(1500 * time.Millisecond) // a checkpoint falls due on the full disk

	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM on a full disk: %v (after %v)\n%s", err, time.Since(start), s.log())
		}
	case <-time.After(10 * time.Second):
		s.cmd.Process.Signal(syscall.SIGQUIT) // the goroutines, into the log
		<-s.done
		t.Fatalf("still running 10 s after SIGTERM on a full disk; goroutines:\n%s", s.log())
	}
	t.Logf("exited with status 0 %v after SIGTERM", time.Since(start).Round(time.Millisecond))

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, dataDir, flags...)
	defer func() {
		s.cmd.Process.Kill()
		<-s.done
	}()
	st, body, err := s.post(t, "/v1/collections/full/aggregate", "application/json",
		fmt.Sprintf(`{"window": "%ds", "groupBy": null, "fields": ["v"], "funcs": ["count"]}`, fullBatchLines))
	if err != nil || st != 200 {
		t.Fatalf("aggregate after the restart: %d %v %s", st, err, body)
	}
	var rows []struct {
		Time  time.Time `json:"time"`
		Count int       `json:"v_count"`
	}
	if err := json.Unmarshal(body, &rows); err != nil {
		t.Fatalf("aggregate reply: %v\n%.500s", err, body)
	}
	got := map[int]int{}
	for _, r := range rows {
		got[int(r.Time.Unix()-fullBatchBase)/fullBatchLines] = r.Count
	}
	for i := range sent {
		switch {
		case acked[i] && got[i] != fullBatchLines:
			t.Errorf("acknowledged batch %d: %d of its %d measurements after the restart", i, got[i], fullBatchLines)
		case !acked[i] && got[i] != 0 && got[i] != fullBatchLines:
			t.Errorf("refused batch %d: %d of its %d measurements after the restart", i, got[i], fullBatchLines)
		}
	}
	if len(got) > sent {
		t.Errorf("%d batches after the restart, %d sent: %v", len(got), sent, got)
	}
}
