package wal

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestCrash runs a child process that appends records and prints the id of
// each acknowledged one, kills it with SIGKILL at a random moment, and
// checks that the reopened log replays every acknowledged record, intact.
// The same directory goes through several crashes, so recovery is followed
// by appends and another crash.
func TestCrash(t *testing.T) {
	if dir := os.Getenv("WAL_CRASH_CHILD"); dir != "" {
		iter, _ := strconv.ParseUint(os.Getenv("WAL_CRASH_ITER"), 10, 64)
		crashChild(dir, iter)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	acked := map[uint64]bool{}
	for iter := uint64(1); iter <= 5; iter++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$")
		cmd.Env = append(os.Environ(), "WAL_CRASH_CHILD="+dir, fmt.Sprintf("WAL_CRASH_ITER=%d", iter))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var output []byte
		read := make(chan struct{})
		first := make(chan struct{})
		go func() {
			// Collect the output; signal the first acknowledgement.
			buf := make([]byte, 4096)
			signalled := false
			for {
				n, err := out.Read(buf)
				output = append(output, buf[:n]...)
				if !signalled && bytes.Contains(output, []byte("ack ")) {
					close(first)
					signalled = true
				}
				if err != nil {
					break
				}
			}
			close(read)
		}()
		// The kill lands at a random moment after appends have started.
		select {
		case <-first:
		case <-read:
			t.Fatalf("iteration %d: child exited before acknowledging a record", iter)
		case <-time.After(15 * time.Second):
			t.Fatalf("iteration %d: child acknowledged nothing in 15 s", iter)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-read
		cmd.Wait()

		n := 0
		for line := range strings.Lines(string(output)) {
			id, ok := strings.CutPrefix(line, "ack ")
			if !ok || !strings.HasSuffix(id, "\n") {
				continue // a line cut short by the kill
			}
			v, err := strconv.ParseUint(strings.TrimSpace(id), 10, 64)
			if err != nil {
				t.Fatalf("child printed %q", line)
			}
			acked[v] = true
			n++
		}
		l, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatalf("iteration %d: Open after crash: %v", iter, err)
		}
		seen := map[uint64]bool{}
		err = l.Replay(0, func(pos Pos, rec []byte) error {
			id, ok := checkIDRecord(rec)
			if !ok {
				return fmt.Errorf("damaged record at %v", pos)
			}
			if seen[id] {
				return fmt.Errorf("record %d replayed twice", id)
			}
			seen[id] = true
			return nil
		})
		l.Close()
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		for id := range acked {
			if !seen[id] {
				t.Fatalf("iteration %d: acknowledged record %d lost", iter, id)
			}
		}
		t.Logf("iteration %d: %d acknowledged, %d replayed in total", iter, n, len(seen))
	}
}

// crashChild appends from several goroutines until killed.
func crashChild(dir string, iter uint64) {
	l, err := Open(Options{Dir: dir, SegmentSize: 1 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	w := bufio.NewWriterSize(os.Stdout, 64)
	deadline := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	for g := range uint64(4) {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(iter, g))
			for i := uint64(0); time.Now().Before(deadline); i++ {
				id := iter<<40 | g<<32 | i
				if _, err := l.Append(idRecord(id, rng.IntN(100<<10))); err != nil {
					fmt.Fprintln(os.Stderr, "child append:", err)
					os.Exit(2)
				}
				var line bytes.Buffer
				fmt.Fprintf(&line, "ack %d\n", id)
				mu.Lock()
				w.Write(line.Bytes())
				w.Flush()
				mu.Unlock()
				if i%50 == 49 && g == 0 {
					l.Cut()
				}
			}
		})
	}
	wg.Wait()
	os.Exit(0)
}
