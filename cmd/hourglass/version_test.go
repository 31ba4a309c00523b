package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestVersionOf reads build information as Go embeds it.
func TestVersionOf(t *testing.T) {
	const rev = "47753325b5c6f157714c54f1744fd9591c6b2fd0"
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261123184857-47753325b5c6+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-11-23T18:48:57Z"}, {Key: "vcs.modified", Value: "true"}}}
	b := buildOf(stamped)
	if b.Revision != rev || !b.Time.Equal(time.Date(2026, 11, 23, 18, 48, 57, 0, time.UTC)) || !b.Modified || b.Go != "go1.26.8" {
		t.Fatalf("build %+v", b)
	}
	var out bytes.Buffer
	writeVersion(&out, "", b)
	want := "hourglass v0.0.0-20261123184857-47753325b5c6+dirty\n" +
		"commit    " + rev + " (2026-11-23T18:48:57Z), modified: the tree had uncommitted changes\n" +
		"module    v0.0.0-20261123184857-47753325b5c6+dirty\n" +
		"go        go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if out.String() != want {
		t.Fatalf("version:\n%s\nwant:\n%s", out.String(), want)
	}
	for _, c := range []struct {
		ldflags string
		b       *debug.BuildInfo
		want    string
	}{
		{"v1.2.3", stamped, "v1.2.3"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: stamped.Settings}, "dev+47753325b5c6.dirty"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"", nil, "dev"},
	} {
		if got := versionOf(c.ldflags, buildOf(c.b)); got != c.want {
			t.Errorf("versionOf(%q, %+v) = %q, want %q", c.ldflags, c.b, got, c.want)
		}
	}
	if got := commitString(buildOf(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})); got != noVCS {
		t.Errorf("without VCS: %q", got)
	}
}

// TestVersionStampedFromGit builds the binary in a git checkout of this
// tree (a linked worktree does not count for Go: its .git is a file) and
// checks that version, the start-up log line and /v1/status name the
// commit, its time and whether the tree was modified, and say plainly
// when the binary was built without them. The builds ask for
// -buildvcs=true (or false) explicitly: GOFLAGS may say otherwise.
func TestVersionStampedFromGit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary in a fresh git repository")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed to check the commit a binary reports: install git")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
			"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %q: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	// The files of the tree as they are now, committed anew.
	for _, f := range strings.Split(git(root, "ls-files", "--cached", "--others", "--exclude-standard", "-z"), "\x00") {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		} else if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(repo, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(repo, "init", "-q")
	git(repo, "add", "-A")
	git(repo, "commit", "-q", "-m", "tree")
	rev := git(repo, "rev-parse", "HEAD")

	build := func(vcs string) string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "hourglass")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-buildvcs="+vcs, "-o", bin, "./cmd/hourglass")
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return bin
	}
	version := func(bin string) string {
		t.Helper()
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}

	bin := build("true")
	out := version(bin)
	if !strings.HasPrefix(out, "hourglass v0.0.0-20260102030405-"+rev[:12]+"\n") ||
		!strings.Contains(out, "commit    "+rev+" (2026-01-02T03:04:05Z), unmodified\n") {
		t.Fatalf("version of a clean checkout at %s:\n%s", rev, out)
	}
	commitLine, status := serveOnce(t, bin)
	vcs, _ := status["vcs"].(map[string]any)
	if commitLine != rev+" (2026-01-02T03:04:05Z), unmodified" || vcs["revision"] != rev ||
		vcs["time"] != "2026-01-02T03:04:05Z" || vcs["modified"] != false || status["go"] != runtime.Version() {
		t.Fatalf("start-up log commit %q, /v1/status build %v", commitLine, status)
	}

	// An uncommitted change.
	if err := os.WriteFile(filepath.Join(repo, "NOTES"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := version(build("true")); !strings.HasPrefix(out, "hourglass v0.0.0-20260102030405-"+rev[:12]+"+dirty\n") ||
		!strings.Contains(out, "), modified: the tree had uncommitted changes\n") {
		t.Fatalf("version of a modified checkout:\n%s", out)
	}

	// No VCS information at all.
	bin = build("false")
	if out := version(bin); !strings.HasPrefix(out, "hourglass dev\n") || !strings.Contains(out, "commit    "+noVCS+"\n") {
		t.Fatalf("version without VCS information:\n%s", out)
	}
	commitLine, status = serveOnce(t, bin)
	if commitLine != noVCS || status["vcs"] != nil || status["module"] != "(devel)" {
		t.Fatalf("without VCS information: start-up log commit %q, /v1/status build %v", commitLine, status)
	}
}

// serveOnce starts bin's server on a fresh data directory and returns the
// commit of its start-up log line and the "build" member of its
// /v1/status; it stops the server before it returns.
func serveOnce(t *testing.T, bin string) (string, map[string]any) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--mongo-listen", "", "--data-dir", t.TempDir(), "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var rec map[string]any
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "hourglass serving" {
			break
		}
		rec = nil
	}
	if rec == nil {
		t.Fatal("the server exited without its start-up line")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	resp, err := http.Get("http://" + rec["listen"].(string) + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Build map[string]any `json:"build"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	commit, _ := rec["commit"].(string)
	return commit, st.Build
}
