package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/hourglassdb/hourglass/api"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise it comes from the module's build information.
var version = ""

// noVCS says why a binary has no commit to report.
const noVCS = "unknown: this binary carries no version control information " +
	"(go run stamps none; nor does go build with -buildvcs=false, outside a git checkout, or in a linked git worktree)"

// buildOf reads what Go embedded in a binary: bi as
// debug.ReadBuildInfo returns it, nil when it has none.
func buildOf(bi *debug.BuildInfo) api.Build {
	var b api.Build
	if bi == nil {
		return b
	}
	b.Module, b.Go = bi.Main.Version, bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time, _ = time.Parse(time.RFC3339, s.Value)
		case "vcs.modified":
			b.Modified, _ = strconv.ParseBool(s.Value)
		}
	}
	return b
}

// thisBuild is buildOf this binary.
func thisBuild() api.Build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return buildOf(bi)
}

// versionOf is the version a binary gives itself: the one set with
// -ldflags, else the module's version as Go stamped it (a tag, or a
// pseudo-version that names the commit and ends in +dirty for a modified
// tree), else "dev", with the commit when it is known.
func versionOf(ldflags string, b api.Build) string {
	switch {
	case ldflags != "":
		return ldflags
	case b.Module != "" && b.Module != "(devel)":
		return b.Module
	case b.Revision != "":
		v := "dev+" + b.Revision[:min(12, len(b.Revision))]
		if b.Modified {
			v += ".dirty"
		}
		return v
	}
	return "dev"
}

func versionString() string { return versionOf(version, thisBuild()) }

// commitString describes the commit a binary was built from, or says
// plainly that it is unknown.
func commitString(b api.Build) string {
	if b.Revision == "" {
		return noVCS
	}
	s := b.Revision
	if !b.Time.IsZero() {
		s += " (" + b.Time.UTC().Format(time.RFC3339) + ")"
	}
	if b.Modified {
		return s + ", modified: the tree had uncommitted changes"
	}
	return s + ", unmodified"
}

// writeVersion is `hourglass version`:
//
//	hourglass v0.0.0-20261123184857-47753325b5c6+dirty
//	commit    47753325b5c6f157714c54f1744fd9591c6b2fd0 (2026-11-23T18:48:57Z), modified: ...
//	module    v0.0.0-20261123184857-47753325b5c6+dirty
//	go        go1.26.8 linux/amd64
func writeVersion(w io.Writer, ldflags string, b api.Build) {
	fmt.Fprintln(w, "hourglass", versionOf(ldflags, b))
	fmt.Fprintln(w, "commit   ", commitString(b))
	if b.Module != "" {
		fmt.Fprintln(w, "module   ", b.Module)
	}
	if b.Go != "" {
		fmt.Fprintln(w, "go       ", b.Go, runtime.GOOS+"/"+runtime.GOARCH)
	}
}

func runVersion(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		fmt.Fprintf(stderr, `Usage: hourglass version

Prints the version, the commit the binary was built from (its time, and
whether the tree had uncommitted changes), the module version and the Go
toolchain, from the build information Go embeds ("go version -m" shows the
same). go build in a git checkout stamps the commit; go run does not.
`)
		if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
			return nil
		}
		return errUsage
	}
	writeVersion(stdout, version, thisBuild())
	return nil
}
