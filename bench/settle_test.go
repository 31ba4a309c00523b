package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSettleUsage waits for a directory that grows for a while, then
// stops: the size is taken once it stopped, after the quiet time.
func TestSettleUsage(t *testing.T) {
	dir := t.TempDir()
	const files, every = 8, 40 * time.Millisecond
	lastWrite := make(chan time.Time, 1) // when the last write began
	go func() {
		for i := range files {
			if i == files-1 {
				lastWrite <- time.Now()
			}
			os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), make([]byte, 8192), 0o644)
			time.Sleep(every)
		}
	}()
	const quiet = 250 * time.Millisecond
	start := time.Now()
	s, err := SettleUsage(context.Background(), []string{dir}, SettleConfig{Quiet: quiet, Every: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	last := <-lastWrite
	want, err := DirsUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Bytes != want || s.Bytes < files*8192 || s.TimedOut {
		t.Fatalf("settled at %+v; the directory holds %d bytes", s, want)
	}
	// Taken no sooner than quiet after the last write.
	if took := time.Since(start); s.Waited < last.Sub(start)+quiet-5*time.Millisecond || s.Waited > took {
		t.Fatalf("waited %v; the last write came %v after the start, the wait took %v", s.Waited, last.Sub(start), took)
	}

	// 0: at once.
	s, err = SettleUsage(context.Background(), []string{dir}, SettleConfig{})
	if err != nil || s.Bytes != want || s.Waited > 50*time.Millisecond {
		t.Fatalf("at once: %+v %v", s, err)
	}

	// A directory that never stops changing: Max ends the wait.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				os.WriteFile(filepath.Join(dir, fmt.Sprint("busy", i)), make([]byte, 4096), 0o644)
			}
		}
	}()
	s, err = SettleUsage(context.Background(), []string{dir}, SettleConfig{Quiet: time.Second, Every: 10 * time.Millisecond, Max: 200 * time.Millisecond})
	if err != nil || !s.TimedOut || s.Bytes <= want || s.Waited < 200*time.Millisecond || s.Waited > time.Second {
		t.Fatalf("busy, 200 ms at most: %+v %v", s, err)
	}
	// A cancelled context ends it with its error.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := SettleUsage(ctx, []string{dir}, SettleConfig{Quiet: time.Minute}); err != context.DeadlineExceeded {
		t.Fatalf("cancelled: %v", err)
	}
	close(stop)
	<-done
	// A directory that cannot be read.
	if _, err := SettleUsage(context.Background(), []string{filepath.Join(dir, "missing")}, SettleConfig{Quiet: time.Second}); err == nil {
		t.Fatal("a missing directory settled")
	}
}
