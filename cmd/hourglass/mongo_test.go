package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestMongoListen runs the binary with --mongo-listen: a driver connects,
// creates a collection that the HTTP API then lists, and SIGTERM stops both
// front doors cleanly.
func TestMongoListen(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	s := startServer(t, t.TempDir())
	var addr string
	sc := bufio.NewScanner(strings.NewReader(s.log()))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "hourglass serving" {
			addr, _ = rec["mongo_listen"].(string)
		}
	}
	if addr == "" {
		t.Fatalf("no mongo_listen address in the start-up log:\n%s", s.log())
	}
	ctx := context.Background()
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true&serverSelectionTimeoutMS=5000"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Disconnect(ctx)
	if err := cl.Database("hourglass").CreateCollection(ctx, "viawire",
		options.CreateCollection().SetTimeSeriesOptions(options.TimeSeries().SetTimeField("t"))); err != nil {
		t.Fatalf("create over the wire protocol: %v", err)
	}
	resp, err := http.Get(s.url + "/v1/collections/viawire")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/collections/viawire: %d, want 200", resp.StatusCode)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM:\n%s", err, s.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop after SIGTERM:\n%s", s.log())
	}
}

// TestMongoListenNonLoopback: a --mongo-listen address other machines can
// reach needs --auth-token or --insecure, as --listen does.
func TestMongoListenNonLoopback(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"serve", "--listen", "127.0.0.1:0", "--mongo-listen", "0.0.0.0:0", "--data-dir", t.TempDir()}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), `--mongo-listen "0.0.0.0:0" is reachable from other machines`) {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}
