package bench

import (
	"context"
	"time"
)

// SettleConfig says when the size on disk of a server's data directories
// counts as settled: background flushes, compactions and merges go on for
// seconds after a load, so the size is taken once it has stayed the same
// for Quiet. The zero value takes the size at once.
type SettleConfig struct {
	// Quiet is how long the size must stay the same; 0 takes it at once.
	Quiet time.Duration
	// Every is how often the size is read; 0 means every second (or every
	// Quiet, when shorter): reading a large directory tree costs a walk of
	// it, and a second is finer than the flushes it waits for.
	Every time.Duration
	// Max bounds the wait; 0 means 5 minutes, longer than any merge after
	// the loads of "bench ingest" on a working server.
	Max time.Duration
}

// Settled is the size SettleUsage took.
type Settled struct {
	Bytes  int64         // allocated bytes under the directories, as DirsUsage counts them
	Waited time.Duration // from the first read to the one the size was taken at
	// TimedOut is set when the size was still changing after Max: Bytes
	// is the last size read.
	TimedOut bool
}

// SettleUsage reads the allocated size of dirs (DirsUsage) every
// cfg.Every until it has stayed the same for cfg.Quiet, or for at most
// cfg.Max, and returns it. It returns ctx's error if ctx ends first, and
// DirsUsage's error if a read fails.
func SettleUsage(ctx context.Context, dirs []string, cfg SettleConfig) (Settled, error) {
	if cfg.Max <= 0 {
		cfg.Max = 5 * time.Minute
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
		if cfg.Quiet > 0 {
			cfg.Every = min(cfg.Every, cfg.Quiet)
		}
	}
	var s Settled
	n, err := DirsUsage(dirs...)
	if err != nil {
		return s, err
	}
	start := time.Now()
	quiet := start // the size has been n since
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for time.Since(quiet) < cfg.Quiet {
		if time.Since(start) >= cfg.Max {
			s.TimedOut = true
			break
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return s, ctx.Err()
		}
		m, err := DirsUsage(dirs...)
		if err != nil {
			return s, err
		}
		if m != n {
			n, quiet = m, time.Now()
		}
	}
	s.Bytes, s.Waited = n, time.Since(start)
	return s, nil
}
