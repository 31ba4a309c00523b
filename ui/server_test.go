package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// testServer is a real Hourglass server on loopback, wired as
// "hourglass serve" wires it: storage, TTL monitor, API with a token.
type testServer struct {
	url   string
	token string
}

func startServer(t *testing.T, token string) *testServer {
	t.Helper()
	// The archive is a file where a directory should be: every archive
	// pass fails, and the console shows the collection's archiving
	// suspended. Checkpoints a second apart seal idle buckets soon.
	archPath := filepath.Join(t.TempDir(), "archive")
	arch, err := objstore.Open(context.Background(), "file://"+archPath, objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(archPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archPath, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), Archive: arch, CheckpointInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Background passes an hour apart: in the test, passes run when the
	// console asks for one.
	monitor, err := ttl.New(ttl.Options{Store: db, Sleep: time.Hour})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	monitor.Start()
	srv, err := api.New(api.Options{DB: db, TTL: monitor, AuthToken: token, Version: "e2e"})
	if err != nil {
		monitor.Close()
		db.Close()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		monitor.Close()
		if err := db.Close(); err != nil {
			t.Errorf("close storage: %v", err)
		}
	})
	return &testServer{url: "http://" + ln.Addr().String(), token: token}
}

// do sends a request with the token and decodes a JSON reply into out
// (when not nil); it returns the status.
func (s *testServer) do(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

func (s *testServer) must(t *testing.T, method, path string, body, out any) {
	t.Helper()
	if st := s.do(t, method, path, body, out); st >= 300 {
		t.Fatalf("%s %s: status %d", method, path, st)
	}
}
