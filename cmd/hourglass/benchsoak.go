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
	"text/tabwriter"
	"time"

	"github.com/hourglassdb/hourglass/bench"
)

const benchSoakUsage = `Usage: hourglass bench soak [flags]

Runs an hourglass binary (--binary, by default this one) on a loopback port
with a fresh data directory under a mixed load for --duration: NDJSON and
line-protocol writers, plain-collection inserts and updates (about 30
requests a second in all), finds (sorted with a limit, by series) and
aggregates, and every second or so a TTL pass, a collMod, an index built
and dropped, a scratch collection created, written and dropped, or a
compaction. Every collection expires its data after 2 minutes, so the data
held stays bounded.

Every --every it samples the server's resident size (VmRSS), its open files
(/proc/PID/fd) and its goroutines (go_goroutines of /metrics). At the end
the server is stopped with SIGTERM and each figure is judged flat when its
peak over the last half of the run is at most its peak over the second
quarter (after the warm-up) times 1 + --tolerance, plus a slack (16 MiB,
8 files, 16 goroutines). Exit status 1 when a figure is not flat, a
request failed (any reply but 2xx or 429), or the server did not stop
cleanly.

Flags:
`

func runBenchSoak(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench soak", flag.ContinueOnError)
	binary := fs.String("binary", "", "hourglass `executable` to run as the server (default: this one)")
	duration := fs.Duration("duration", 30*time.Minute, "length of the load (`time`)")
	every := fs.Duration("every", 5*time.Second, "sampling interval (`time`)")
	tolerance := fs.Float64("tolerance", 0.2, "rise allowed after the warm-up, as a `fraction` of the second quarter's peak")
	seed := fs.Uint64("seed", 0, "random `seed` of the load (0: one from the clock, printed)")
	jsonOut := fs.Bool("json", false, "print the report, with every sample, as JSON")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchSoakUsage)
		printFlags(fs.Output(), fs)
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *duration <= 0 || *every <= 0 || *tolerance < 0 {
		return errors.New("--duration and --every must be positive, --tolerance not negative")
	}
	if *duration < 4**every {
		return fmt.Errorf("--duration %v takes fewer than 4 samples every %v: nothing to judge", *duration, *every)
	}
	if *seed == 0 {
		*seed = rand.Uint64N(1<<53) + 1
	}
	bin := *binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "hourglass-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stderr, "soak: seed %d, %v, a sample every %v, binary %s\n", *seed, *duration, *every, bin)
	res, err := bench.RunSoak(ctx, bench.SoakConfig{Binary: bin, Dir: dir + "/data", Duration: *duration, Every: *every,
		Tolerance: *tolerance, Seed: *seed, Progress: func(s bench.SoakSample) {
			fmt.Fprintf(stderr, "%8v  RSS %6.1f MiB  fds %4d  goroutines %4d  requests %d  errors %d\n",
				s.Elapsed.Round(time.Second), s.RSSMiB, s.FDs, s.Goroutines, s.Requests, s.Errors)
		}})
	if err != nil {
		return err
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%v: %d requests, %d rows written, %d errors\n", res.Elapsed.Round(time.Second), res.Requests, res.Rows, res.Errors)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "figure\tstart\tpeak 2nd quarter\tpeak last half\tend\tlimit\tflat\t")
		for _, f := range res.Figures {
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%v\t\n", f.Name, f.Start, f.WarmMax, f.LastHalfMax, f.End, f.Limit, f.Flat)
		}
		tw.Flush()
	}
	switch {
	case res.Errors > 0:
		return fmt.Errorf("%d requests failed; the first: %s", res.Errors, res.FirstError)
	case !res.Flat:
		return errors.New("not flat after the warm-up: see the table")
	}
	return nil
}
