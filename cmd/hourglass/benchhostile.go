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
	"strings"

	"github.com/hourglassdb/hourglass/bench"
)

func benchHostileUsage() string {
	var b strings.Builder
	b.WriteString(`Usage: hourglass bench hostile [flags]

Runs the attacks of a hostile client, each against an hourglass binary
(--binary, by default this one) started on loopback ports with a fresh data
directory, and says for each whether the server held. Exit status 1 when
one did not. The scenarios (--scenarios, comma-separated; default all):

`)
	for _, s := range bench.HostileScenarios() {
		fmt.Fprintf(&b, "  %s\n      %s\n", s[0], s[1])
	}
	b.WriteString("\nFlags:\n")
	return b.String()
}

func runBenchHostile(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench hostile", flag.ContinueOnError)
	binary := fs.String("binary", "", "hourglass `executable` to run as the server (default: this one)")
	scenarios := fs.String("scenarios", "", "comma-separated `names` of the scenarios to run (default: all)")
	jsonOut := fs.Bool("json", false, "print the outcomes as JSON")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchHostileUsage())
		printFlags(fs.Output(), fs)
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	bin := *binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	var names []string
	if *scenarios != "" {
		names = strings.Split(*scenarios, ",")
	}
	dir, err := os.MkdirTemp("", "hourglass-hostile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	out, err := bench.RunHostile(ctx, bench.HostileConfig{Binary: bin, Dir: dir, Scenarios: names,
		Progress: func(s string) { fmt.Fprintln(stderr, s) }})
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if e := enc.Encode(out); e != nil && err == nil {
			err = e
		}
	} else {
		for _, o := range out {
			verdict := "held"
			if !o.Held {
				verdict = "BROKE"
			}
			fmt.Fprintf(stdout, "%-10s %-6s %s\n", o.Name, verdict, o.Detail)
		}
	}
	if err != nil {
		return err
	}
	for _, o := range out {
		if !o.Held {
			return errors.New("the server did not hold: see the table")
		}
	}
	return nil
}
