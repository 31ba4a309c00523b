package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/hourglassdb/hourglass/bench"
)

const benchChaosUsage = `Usage: hourglass bench chaos [flags]

Runs a replica set of three members of an hourglass binary (--binary, by
default this one) on loopback, under load, through --cycles faults:

  - three NDJSON writers, each its own series, sending batches of 20 rows
    to whichever member leads (following a follower's 421 and its
    Hourglass-Primary header), and a deleter removing ranges of their
    acknowledged rows;
  - a writer of rows already 3 h old into chaos_ttl (TTL 1 h), which the
    leader's TTL monitor deletes and the followers apply;
  - each cycle, after --duration of load, a fault chosen by the seed:
    kill -9 of the leader, kill -9 of a follower, SIGSTOP of a follower
    for 1 to 4 s (it stops answering, as a member cut off by the network
    does, then SIGCONT), or the replacement of a follower (removed with
    DELETE /v1/replset/members/{id}, killed, its data deleted, started
    again with --join: it catches up from a snapshot or the log), or a
    partition of the leader for 1 to 4 s (its raft traffic cut while it
    runs, through serve --fault-injection: it loses the lead, then catches
    up), the killed member restarted after 1 to 4 s; then --duration more
    load.

After each cycle the members are read until they hold the same rows (at
most a minute), and the rows are checked against what the clients were
told: every acknowledged row on every member, no row an acknowledged
delete removed, no row nobody sent. After the last cycle chaos_ttl must be
empty on every member. A write or delete without an answer may be there or
not. The seed (--seed; printed) chooses the faults, their targets and
timings; the first failing check ends the run with exit status 1, the
seed, the cycle and what was wrong, and the data directories are kept.

Flags:
`

func runBenchChaos(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench chaos", flag.ContinueOnError)
	lf := addLoopFlags(fs, "the members", "`directory` for the members' data directories, absent or empty (default: a new temporary one, removed after a clean run)", "faults (`n`)")
	duration := fs.Duration("duration", 3*time.Second, "load before and after each fault (`time`)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchChaosUsage)
		printFlags(fs.Output(), fs)
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *duration <= 0 {
		return errors.New("--cycles and --duration must be positive")
	}
	bin, dir, temp, err := lf.resolve("hourglass-chaos-")
	if err != nil {
		return err
	}
	seed, cycles, jsonOut := lf.seed, lf.cycles, lf.jsonOut
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stderr, "chaos: seed %d, %d cycles, %v of load around each fault, binary %s, data %s\n", *seed, *cycles, *duration, bin, dir)
	res, err := bench.RunChaos(ctx, bench.ChaosConfig{Binary: bin, Dir: dir, Seed: *seed, Cycles: *cycles, Duration: *duration,
		Progress: func(c bench.ChaosCycle) {
			if c.Cycle <= *cycles {
				fmt.Fprintf(stderr, "cycle %d/%d: %s (leader was %s); %d writes acknowledged; the members agreed after %v, %d acknowledged rows on each\n",
					c.Cycle, *cycles, c.Fault, c.Leader, c.Acked, c.Settle.Round(time.Millisecond), c.Checked)
			} else {
				fmt.Fprintf(stderr, "final check: the members agreed after %v, %d acknowledged rows on each, expired rows gone everywhere\n",
					c.Settle.Round(time.Millisecond), c.Checked)
			}
		}})
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if e := enc.Encode(res); e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		for _, v := range res.Violations {
			fmt.Fprintf(stderr, "VIOLATION %s\n", v)
		}
		fmt.Fprintf(stderr, "data directories kept: %s\n", dir)
		return err
	}
	if temp {
		os.RemoveAll(dir)
	}
	if !*jsonOut {
		fmt.Fprintf(stdout, "chaos clean: seed %d, %d cycles in %v, %d acknowledged writes, 0 violations\n",
			res.Seed, res.Cycles, res.Elapsed.Round(time.Second), res.Acked)
	}
	return nil
}
