package pymongotest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongowire"
	"github.com/hourglassdb/hourglass/mongowire/mongowiretest"
	"github.com/hourglassdb/hourglass/timeseries"
)

// requirePyMongo returns a python3 that imports pymongo: the one on PATH,
// or Debian's (/usr/bin/python3, where python3-pymongo installs, when
// PATH leads to another), and fails the test (skips it under -short) when
// there is none.
func requirePyMongo(t *testing.T) string {
	t.Helper()
	var err error
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		var path string
		if path, err = exec.LookPath(py); err == nil {
			if err = exec.Command(path, "-c", "import pymongo").Run(); err == nil {
				return path
			}
		}
	}
	{
		const what = "python3 with the pymongo module: run `make test`, which installs Debian's python3-pymongo, or `apt-get install python3-pymongo`"
		if testing.Short() {
			t.Skipf("-short: skipping; missing: %s (%v)", what, err)
		}
		t.Fatalf("this test needs %s (%v); `go test -short` skips it", what, err)
	}
	return ""
}

// runSession runs testdata/session.py against uri and returns the result
// it printed after "RESULT ".
func runSession(t *testing.T, py, uri string, t0 time.Time, count int) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "session.py"))
	cmd.Env = append(os.Environ(), "HG_URI="+uri, fmt.Sprintf("HG_T0_MS=%d", t0.UnixMilli()), fmt.Sprintf("HG_COUNT=%d", count))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	t.Logf("session.py: %v in %v", err, time.Since(start).Round(time.Millisecond))
	var result map[string]any
	for _, line := range strings.Split(stdout.String(), "\n") {
		if j, ok := strings.CutPrefix(line, "RESULT "); ok {
			if uerr := json.Unmarshal([]byte(j), &result); uerr != nil {
				t.Fatalf("session.py printed a result that is not JSON: %v\n%s", uerr, j)
			}
		}
	}
	if err != nil || result == nil {
		t.Fatalf("session.py: %v; stdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	return result
}

// TestPyMongoSession runs a sensor session through PyMongo (Debian's
// python3-pymongo): a time-series collection with a TTL created,
// insert_many (ordered and unordered, with a bad document: the write
// errors checked), a find over a time range with sort and projection read
// through getMore batches, count_documents, distinct, per-minute averages
// with $dateTrunc, a partial TTL index created, changed by collMod and
// dropped, deletes, a plain collection with a TTL index updated and
// deleted from, a drop. Every result is checked in Python against the
// data it inserted; the engine is then read from Go. The same session runs
// with authentication (SCRAM-SHA-256, user hourglass, the token as
// password) and is refused without the password.
func TestPyMongoSession(t *testing.T) {
	py := requirePyMongo(t)
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	const count = 1000
	for _, auth := range []bool{false, true} {
		t.Run(fmt.Sprintf("auth=%v", auth), func(t *testing.T) {
			token := ""
			if auth {
				token = "s3cret token"
			}
			db, addr := mongowiretest.Start(t, token)
			uri := "mongodb://" + addr + "/?directConnection=true"
			if auth {
				uri = fmt.Sprintf("mongodb://%s:%s@%s/?directConnection=true&authMechanism=SCRAM-SHA-256&authSource=admin",
					mongowire.AuthUser, url.QueryEscape(token), addr)
			}
			res := runSession(t, py, uri, t0, count)
			t.Logf("PyMongo %v: %v", res["pymongo"], res)

			// What PyMongo wrote, read from the engine: the measurements
			// left after deleting one sensor of four (plus the two that
			// the bad inserts stored), the plain documents left.
			ctx := context.Background()
			info, err := db.Describe(ctx, "weather")
			if err != nil {
				t.Fatal(err)
			}
			want := int64(count - count/4 + 2)
			if info.Count != want || res["weather"] != float64(want) {
				t.Errorf("weather holds %d measurements, the session saw %v; want %d", info.Count, res["weather"], want)
			}
			if info.Options.TimeSeries == nil || info.Options.TimeSeries.MetaField != "sensor" || info.Options.ExpireAfterSeconds == nil || *info.Options.ExpireAfterSeconds != 86400 {
				t.Errorf("weather's options: %+v", info.Options)
			}
			n := 0
			if _, err := timeseries.EachDoc(db.Find(ctx, "eventlog", timeseries.FindOptions{}))(func(document.Doc) error {
				n++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if n != 8 || res["eventlog"] != float64(8) {
				t.Errorf("eventlog holds %d documents, the session saw %v; want 8", n, res["eventlog"])
			}
			if res["fidelity"] != true {
				t.Errorf("the session did not check a plain document's types and order: %v", res)
			}
		})
	}

	// Without the password, the first command is refused.
	_, addr := mongowiretest.Start(t, "another token")
	cmd := exec.Command(py, "-c", `
import sys
from pymongo import MongoClient
from pymongo.errors import OperationFailure
c = MongoClient(sys.argv[1], serverSelectionTimeoutMS=5000)
try:
    c.hourglass.list_collection_names()
except OperationFailure as e:
    print("CODE", e.code)
`, "mongodb://"+addr+"/?directConnection=true")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CODE 13") {
		t.Fatalf("an unauthenticated PyMongo command: %v, %s; want code 13 (Unauthorized)", err, out)
	}
}
