// Command hourglass is the Hourglass time-series database: the server and
// its tools.
//
//	hourglass serve      run the server (data in ./hourglass-data by default)
//	hourglass backup     take, list, verify and prune backups
//	hourglass restore    restore a backup into a new data directory
//	hourglass version    print the version and the commit it was built from
//
// Run "hourglass <command> --help" for a command's flags. Every flag can
// also be set from the environment: --data-dir is HOURGLASS_DATA_DIR.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

type subcommand struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

func subcommands() []subcommand {
	return []subcommand{
		{"serve", "run the server: HTTP API, storage, background work", runServe},
		{"backup", "take (through a server), list, verify and prune backups (docs/backup.md)", runBackup},
		{"restore", "restore a backup into a new data directory", runRestore},
		{"bench", "benchmarks against Hourglass and other line-protocol databases; the crash loop and the soak", runBench},
		{"version", "print the version, the commit it was built from and the Go toolchain", runVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `Hourglass is a time-series database: MongoDB-style time-series collections
stored as compressed columnar buckets, with per-sensor retention (TTL), an
HTTP API and InfluxDB line-protocol ingest.

Usage:
  hourglass <command> [flags]

Commands:
`)
	for _, c := range subcommands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `
Run "hourglass <command> --help" for the flags of a command. Every flag may
also be given as an environment variable: --data-dir is HOURGLASS_DATA_DIR.

Start a server with its defaults (127.0.0.1:7700, data in ./hourglass-data):
  hourglass serve
`)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		usage(stdout)
		return 0
	}
	for _, c := range subcommands() {
		if c.name == args[0] {
			err := c.run(args[1:], stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			}
			fmt.Fprintf(stderr, "hourglass %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "hourglass: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// errUsage reports bad flags, already explained on stderr.
var errUsage = errors.New("usage")

// envName is the environment variable of a flag: HOURGLASS_ and the flag's
// name in upper case with '-' as '_'.
func envName(flagName string) string {
	return "HOURGLASS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags parses args into fs after applying environment variables, so
// that the command line wins over the environment.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	if err := applyEnv(fs); err != nil {
		return err
	}
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %q\n", fs.Args())
		return errUsage
	}
	return nil
}

// applyEnv sets the flags of fs from their environment variables.
func applyEnv(fs *flag.FlagSet) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("environment variable %s=%q: %v", envName(f.Name), v, err)
			}
		}
	})
	return envErr
}

// printFlags writes a flag set's flags with their environment variables.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		fmt.Fprintf(w, "\n      %s", strings.ReplaceAll(usage, "\n", "\n      "))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "\n      env %s\n", envName(f.Name))
	})
}
