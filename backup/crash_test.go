package backup_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/backup"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
)

// crashChildEnv holds "<data dir>,<target dir>" for the child of
// TestKilledBackup.
const crashChildEnv = "HOURGLASS_BACKUP_CRASH_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(crashChildEnv); v != "" {
		dataDir, target, _ := strings.Cut(v, ",")
		crashChild(dataDir, target)
		return
	}
	os.Exit(m.Run())
}

// crashChild opens the store (20 MiB of documents the first time), says
// "ready", then takes backups into target one after another while a writer
// inserts, printing "complete <id>" as each Create returns.
func crashChild(dataDir, target string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	db, err := timeseries.Open(timeseries.Options{Dir: dataDir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fail(err)
	}
	if _, err := db.Describe(ctx, "p2"); err != nil {
		fill(childT{}, db)
		bulk(childT{}, db, 20000)
	}
	st, err := objstore.Open(ctx, "file://"+target, objstore.Options{})
	if err != nil {
		fail(err)
	}
	go func() {
		// Numbers no earlier run of the child used.
		for k := int(time.Now().UnixMilli()) * 1000; ; k += 1000 {
			insert(childT{}, db, k, 100)
		}
	}()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	for {
		res, err := backup.Create(ctx, db, st, backup.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			fail(err)
		}
		fmt.Fprintln(out, "complete", res.ID)
		out.Flush()
	}
}

// childT is the testing.TB of the child's helpers: a failure ends it.
type childT struct{ testing.TB }

func (childT) Helper() {}
func (childT) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(2)
}

// TestKilledBackup kills a process taking backups with SIGKILL at random
// moments and checks the target: every backup it reported complete is
// complete, every complete-looking backup verifies and the newest
// restores, and the interrupted ones are listed as incomplete, never
// restored. Some kill must have landed in the middle of a backup.
func TestKilledBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	interrupted := 0
	for round := range 6 {
		target := t.TempDir() // a full backup each round: the kill may land in its copy
		reported := runChild(t, exe, time.Duration(rng.IntN(1500))*time.Millisecond, crashChildEnv+"="+dataDir+","+target)
		st := openTarget(t, target)
		list, err := backup.List(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		complete := map[string]bool{}
		for _, b := range list {
			if !b.Complete {
				interrupted++
				continue
			}
			complete[b.ID] = true
			if _, err := backup.Verify(ctx, st, b.ID); err != nil {
				t.Fatalf("round %d: backup %s looks complete but does not verify: %v", round, b.ID, err)
			}
		}
		for _, id := range reported {
			if !complete[id] {
				t.Fatalf("round %d: backup %s was reported complete but is not listed so", round, id)
			}
		}
		if len(complete) > 0 {
			dir := filepath.Join(t.TempDir(), "r")
			if _, err := backup.Restore(ctx, st, "", dir, backup.Options{}); err != nil {
				t.Fatalf("round %d: restore the newest: %v", round, err)
			}
		} else if _, err := backup.Restore(ctx, st, "", filepath.Join(t.TempDir(), "r"), backup.Options{}); err == nil {
			t.Fatalf("round %d: a target with no complete backup restored", round)
		}
		t.Logf("round %d: %d backups reported, %d listed (%d complete)", round, len(reported), len(list), len(complete))
	}
	if interrupted == 0 {
		t.Fatal("no kill landed in the middle of a backup: the test proved nothing")
	}
}

// runChild starts the child, waits for "ready", lets it run for d, kills it
// with SIGKILL and returns the IDs it reported complete.
func runChild(t *testing.T, exe string, d time.Duration, env ...string) []string {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok || l != "ready" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the child did not start: %q %s", l, stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the child did not get ready")
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the child stopped before it was killed: %v: %s", err, stderr.String())
	case <-time.After(d):
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	var ids []string
	for l := range lines {
		if id, ok := strings.CutPrefix(l, "complete "); ok {
			ids = append(ids, id)
		}
	}
	return ids
}
