package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"time"

	"github.com/hourglassdb/hourglass/bench"
)

const benchCrashUsage = `Usage: hourglass bench crash [flags]

Runs --cycles kill -9 cycles of an hourglass binary (--binary, by default
this one) serving on a loopback port chosen by the kernel, on one data
directory kept across the cycles. Each cycle restarts the server, checks
it, then runs concurrent clients until a random point of --duration, when
the server gets SIGKILL:

  - NDJSON writers (crash_json) and line-protocol writers (crash_lp), each
    its own series, and a plain-collection writer (crash_plain), each
    deleting its oldest rows now and then;
  - a writer into crash_ttl (TTL 1 h or 2 h) of rows already 3 h old and
    rows of the current time;
  - DDL: collMod of crash_ttl's expireAfterSeconds, index v_1 created and
    dropped on crash_plain, scratch collections created, written and
    dropped, compactions and TTL passes (POST /v1/admin/ttl/run).

The check after each restart runs a TTL pass, then compares a full find of
every collection with what the clients were told: every acknowledged row
or document present once, with its series, time and value (or _id),
nothing acknowledged as deleted back, no row past crash_ttl's TTL, the
describe count equal to the rows found, the TTL, the index and the scratch
collections as acknowledged. A write the kill cut (no reply) may be there
or not; the check settles it, and from then on it must stay as found.
After the last cycle the server is checked, stopped with SIGTERM,
restarted and checked again.

The seed (--seed; printed) chooses the clients' operations and the kill
points. The first check that fails ends the run with exit status 1, the
seed, the cycle and what was wrong; the data directory is then kept.

Flags:
`

func runBenchCrash(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench crash", flag.ContinueOnError)
	lf := addLoopFlags(fs, "the server", "data `directory` for the server, absent or empty (default: a new temporary one, removed after a clean run)", "kill -9 cycles (`n`)")
	duration := fs.Duration("duration", 5*time.Second, "longest load of a cycle before its kill (`time`); the kill falls between a tenth of it and all of it")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchCrashUsage)
		printFlags(fs.Output(), fs)
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *duration <= 0 {
		return errors.New("--cycles and --duration must be positive")
	}
	bin, dir, temp, err := lf.resolve("hourglass-crash-")
	if err != nil {
		return err
	}
	if temp {
		dir += "/data"
	}
	seed, cycles, jsonOut := lf.seed, lf.cycles, lf.jsonOut
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stderr, "crash loop: seed %d, %d cycles of at most %v, binary %s, data %s\n", *seed, *cycles, *duration, bin, dir)
	res, err := bench.RunCrash(ctx, bench.CrashConfig{Binary: bin, Dir: dir, Seed: *seed, Cycles: *cycles, Duration: *duration,
		Progress: func(c bench.CrashCycle) {
			switch {
			case c.Cycle <= *cycles:
				fmt.Fprintf(stderr, "cycle %d/%d: restart %v, %d acknowledged rows checked; load: %d acknowledged, %d in doubt, killed after %v\n",
					c.Cycle, *cycles, c.Restart.Round(time.Millisecond), c.Checked, c.Acked, c.Unacked, c.KilledAfter.Round(time.Millisecond))
			case c.Cycle == *cycles+1:
				fmt.Fprintf(stderr, "after the last kill: restart %v, %d acknowledged rows checked; stopped with SIGTERM\n", c.Restart.Round(time.Millisecond), c.Checked)
			default:
				fmt.Fprintf(stderr, "after the clean stop: restart %v, %d acknowledged rows checked\n", c.Restart.Round(time.Millisecond), c.Checked)
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
		fmt.Fprintf(stderr, "data directory kept: %s\n", dir)
		return err
	}
	if temp {
		os.RemoveAll(dir[:len(dir)-len("/data")])
	}
	if !*jsonOut {
		fmt.Fprintf(stdout, "crash loop clean: seed %d, %d cycles in %v, %d acknowledged writes, %d acknowledged rows checked, 0 violations\n",
			res.Seed, res.Cycles, res.Elapsed.Round(time.Second), res.Acked, res.Checked)
	}
	return nil
}

// loopFlags are the flags of bench crash and bench chaos: the binary, the
// data directory, the seed, the cycles and JSON output.
type loopFlags struct {
	binary, dataDir *string
	seed            *uint64
	cycles          *int
	jsonOut         *bool
}

func addLoopFlags(fs *flag.FlagSet, runs, dirUsage, cyclesUsage string) *loopFlags {
	return &loopFlags{
		binary:  fs.String("binary", "", "hourglass `executable` to run as "+runs+" (default: this one)"),
		dataDir: fs.String("data-dir", "", dirUsage),
		seed:    fs.Uint64("seed", 0, "random `seed` (0: one from the clock, printed)"),
		cycles:  fs.Int("cycles", 10, cyclesUsage),
		jsonOut: fs.Bool("json", false, "print the result as JSON on stdout"),
	}
}

// resolve checks the cycles, draws a seed when none was given, and returns
// the binary and the data directory, a new temporary one (temp) when none
// was given.
func (l *loopFlags) resolve(tempPrefix string) (bin, dir string, temp bool, err error) {
	if *l.cycles < 1 {
		return "", "", false, errors.New("--cycles must be positive")
	}
	if *l.seed == 0 {
		*l.seed = rand.Uint64N(1<<53) + 1
	}
	if bin = *l.binary; bin == "" {
		if bin, err = os.Executable(); err != nil {
			return "", "", false, err
		}
	}
	if dir = *l.dataDir; dir == "" {
		if dir, err = os.MkdirTemp("", tempPrefix); err != nil {
			return "", "", false, err
		}
		temp = true
	}
	return bin, dir, temp, nil
}
