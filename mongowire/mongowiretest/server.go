// Package mongowiretest starts a mongowire.Server for the tests of MongoDB
// clients (mongosh, PyMongo): a real engine in a temporary directory,
// served on a loopback port.
package mongowiretest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/mongowire"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// Start opens an engine in a temporary directory and serves it to MongoDB
// clients on a loopback port, with a TTL monitor for setParameter and
// getParameter (enabled, as in `hourglass serve`, and asleep for the
// test). A non-empty authToken requires SCRAM-SHA-256 authentication with
// it. Everything is closed when the test ends.
func Start(t testing.TB, authToken string) (*timeseries.DB, string) {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mon, err := ttl.New(ttl.Options{Store: db, Sleep: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mon.Start()
	srv, err := mongowire.New(mongowire.Options{DB: db, Version: "test", TTL: mon, AuthToken: authToken,
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
		mon.Close()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db, ln.Addr().String()
}
