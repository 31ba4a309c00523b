package timeseries

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

const crashChildEnv = "HOURGLASS_CRASH_CHILD_DIR"

// TestMain runs the crash child when asked to; see TestCrashRecovery.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		if os.Getenv(crashPlainEnv) != "" {
			crashPlainChild(dir)
			return
		}
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

const crashRows = 50 // measurements per batch

// crashChild inserts numbered batches forever, printing each batch number
// once Insert has acknowledged it. It checkpoints now and then, so that kills
// land in every phase.
func crashChild(dir string) {
	start, _ := strconv.Atoi(os.Getenv("HOURGLASS_CRASH_START"))
	db, err := Open(Options{Dir: dir, CheckpointInterval: 50 * time.Millisecond, MemoryBudget: 1 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := db.CreateCollection(ctx, "c", CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	for b := start; ; b++ {
		ms := make([]model.Measurement, crashRows)
		for i := range ms {
			// Times repeat across batches on purpose: out-of-order data.
			ms[i] = model.Measurement{Time: int64((b*7+i)%5000) * 1e9, Meta: int64(i % 7),
				Fields: []model.Field{{Name: "batch", Value: model.Int(int64(b))}, {Name: "i", Value: model.Int(int64(i))}}}
		}
		if _, err := db.Insert(ctx, "c", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintln(out, b)
		out.Flush()
	}
}

// TestCrashRecovery kills a writing child process with SIGKILL at random
// points, reopens the store, and checks that every acknowledged batch is
// there in full, that no batch is there in part, and that nothing else is.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	acked := map[int]bool{}
	next := 0
	for round := 0; round < 6; round++ {
		for _, n := range runCrashChild(t, exe, rng, 400*time.Millisecond, crashChildEnv+"="+dir, "HOURGLASS_CRASH_START="+strconv.Itoa(next)) {
			acked[n] = true
			next = max(next, n+1)
		}
		next += 1000 // batches that may be durable but were never acknowledged stay distinguishable

		db := openTest(t, dir, func(o *Options) { o.NoSync = false })
		rows := findRows(t, db, "c", FindOptions{OmitMeta: true})
		perBatch := map[int]int{}
		for _, r := range rows {
			var b, i int
			if _, err := fmt.Sscanf(r.vals, "batch=%d i=%d ", &b, &i); err != nil {
				t.Fatalf("unexpected row %v", r)
			}
			perBatch[b]++
		}
		for b := range acked {
			if perBatch[b] != crashRows {
				t.Fatalf("round %d: acknowledged batch %d has %d of %d rows", round, b, perBatch[b], crashRows)
			}
		}
		for b, n := range perBatch {
			if n != crashRows {
				t.Fatalf("round %d: batch %d is there in part: %d of %d rows", round, b, n, crashRows)
			}
			if b >= next {
				t.Fatalf("round %d: batch %d was never written", round, b)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d batches acknowledged so far, %d stored", round, len(acked), len(perBatch))
	}
	if len(acked) == 0 {
		t.Fatal("the child never acknowledged a batch")
	}
}

// runCrashChild runs this test binary as a child with env added, waits for
// its first acknowledged batch (so that every round writes), lets it go on
// for up to maxRun, kills it with SIGKILL and returns the batch numbers it
// acknowledged, one per line of its standard output.
func runCrashChild(t *testing.T, exe string, rng *rand.Rand, maxRun time.Duration, env ...string) []int {
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
	lines := make(chan int, 1<<16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if n, err := strconv.Atoi(sc.Text()); err == nil {
				lines <- n
			}
		}
		close(lines)
	}()
	var acked []int
	select {
	case n, ok := <-lines:
		if ok {
			acked = append(acked, n)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child acknowledged nothing in 60 s")
	}
	// The sleep only picks the kill point: whatever the child managed by
	// then, on a fast machine or a loaded one, every batch it acknowledged
	// must be there after the kill, so no check depends on how long it ran.
	time.Sleep(time.Duration(rng.Int63n(int64(maxRun))))
	_ = cmd.Process.Signal(syscall.SIGKILL)
	for n := range lines {
		acked = append(acked, n)
	}
	_ = cmd.Wait()
	if strings.TrimSpace(stderr.String()) != "" {
		t.Fatalf("child failed: %s", stderr.String())
	}
	return acked
}
