package mongoshtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/mongowire"
	"github.com/hourglassdb/hourglass/timeseries"
)

// requireMongosh returns the path of the installed mongosh, and fails the
// test (skips it under -short) when node or the npm package is missing.
func requireMongosh(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("node")
	bin, _ := filepath.Abs(filepath.Join("node_modules", ".bin", "mongosh"))
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		const what = "node and mongosh in mongowire/mongoshtest/node_modules: run `make test`, which installs them, or `npm ci --prefix mongowire/mongoshtest`"
		if testing.Short() {
			t.Skipf("-short: skipping; missing: %s (%v)", what, err)
		}
		t.Fatalf("this test needs %s (%v); `go test -short` skips it", what, err)
	}
	return bin
}

// startServer opens an engine in a temporary directory and serves it to
// MongoDB clients on a loopback port.
func startServer(t *testing.T) (*timeseries.DB, string) {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mongowire.New(mongowire.Options{DB: db, Version: "test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, mongowire.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db, ln.Addr().String()
}

// shell runs mongosh scripts against one server.
type shell struct {
	bin  string
	uri  string
	home string   // mongosh's home: its config and logs stay in the test's directory
	env  []string // HG_* variables the scripts read
}

// run runs testdata/<script> and returns the document it printed after
// "RESULT ", decoded from canonical Extended JSON. A script that throws,
// or prints no result, fails the test with mongosh's output.
func (sh *shell) run(t *testing.T, script string) bson.Raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh.bin, "--quiet", "--norc", sh.uri, "--file", filepath.Join("testdata", script))
	cmd.Env = append(os.Environ(), "HOME="+sh.home, "MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1", "NO_COLOR=1")
	cmd.Env = append(cmd.Env, sh.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	t.Logf("mongosh %s: %v in %v", script, err, time.Since(start).Round(time.Millisecond))
	if stderr.Len() > 0 {
		t.Logf("mongosh %s, stderr:\n%s", script, stderr.Bytes())
	}
	var result bson.Raw
	for _, line := range strings.Split(stdout.String(), "\n") {
		if j, ok := strings.CutPrefix(line, "RESULT "); ok {
			if uerr := bson.UnmarshalExtJSON([]byte(j), true, &result); uerr != nil {
				t.Fatalf("mongosh %s printed a result that is not canonical Extended JSON: %v\n%s", script, uerr, j)
			}
		} else if strings.TrimSpace(line) != "" {
			t.Logf("mongosh %s: %s", script, line)
		}
	}
	if err != nil || result == nil {
		t.Fatalf("mongosh %s: %v, result %v; stdout:\n%s\nstderr:\n%s", script, err, result != nil, stdout.Bytes(), stderr.Bytes())
	}
	return result
}

// TestMongoshSession runs a sensor session in mongosh (testdata/session.js)
// against a mongowire.Server: a time-series collection created, 1000
// measurements of four sensors inserted with insertMany, two finds over a
// time range sorted by time through several getMore batches, the
// collections listed; then the collection dropped (testdata/drop.js).
// Every value mongosh printed is checked against what was inserted, the
// batches against the batch sizes asked for, and the collection against
// the engine that serves the HTTP API. A proxy between mongosh and the
// server logs every command mongosh sent and how it was answered.
func TestMongoshSession(t *testing.T) {
	bin := requireMongosh(t)
	db, addr := startServer(t)
	wl := startWireLog(t, addr)

	const name, count = "weather", 1000
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	sh := &shell{bin: bin, uri: "mongodb://" + wl.addr() + "/test", home: t.TempDir(), env: []string{
		"HG_COLLECTION=" + name, "HG_T0_MS=" + strconv.FormatInt(t0.UnixMilli(), 10), "HG_COUNT=" + strconv.Itoa(count)}}

	res := sh.run(t, "session.js")
	logExchanges(t, "session.js", wl.exchanges())
	checkSession(t, res, wl.exchanges(), t0, name, count)

	// The engine behind the HTTP API holds the same collection.
	info, err := db.Describe(context.Background(), name)
	if err != nil {
		t.Fatalf("the engine does not find %q: %v", name, err)
	}
	if info.Count != count {
		t.Errorf("the engine counts %d measurements in %q, want %d", info.Count, name, count)
	}
	if ts := info.Options.TimeSeries; ts == nil || ts.TimeField != "ts" || ts.MetaField != "sensor" || ts.Granularity != "seconds" ||
		info.Options.ExpireAfterSeconds == nil || *info.Options.ExpireAfterSeconds != 86400 {
		t.Errorf("the engine's options for %q: %+v", name, info.Options)
	}

	wl.reset()
	res = sh.run(t, "drop.js")
	logExchanges(t, "drop.js", wl.exchanges())
	if v, ok := res.Lookup("drop").BooleanOK(); !ok || !v {
		t.Errorf("drop() returned %v, want true", res.Lookup("drop"))
	}
	if names := stringArray(t, res.Lookup("names")); len(names) != 0 {
		t.Errorf("getCollectionNames() after drop: %q, want none", names)
	}
	if _, err := db.DescribeShallow(context.Background(), name); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Errorf("the engine after drop: %v, want NamespaceNotFound", err)
	}
}

func logExchanges(t *testing.T, script string, log []*exchange) {
	t.Helper()
	var b strings.Builder
	for _, e := range log {
		b.WriteString("\n  ")
		b.WriteString(e.String())
	}
	t.Logf("commands mongosh sent for %s:%s", script, b.String())
}
