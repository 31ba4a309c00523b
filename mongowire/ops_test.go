package mongowire

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/timeseries"
)

// TestOpsAcrossDoors: both doors over one command layer list each other's
// operations (an HTTP insert in MongoDB's currentOp, a MongoDB insert in
// the HTTP API's /v1/currentop) and share its ingest slots: a MongoDB
// insert waits while an HTTP client's writes hold them.
func TestOpsAcrossDoors(t *testing.T) {
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := command.New(command.Options{DB: db, MaxConcurrentWrites: 1, MaxQueuedWrites: 8})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serveDB(t, db, Options{Commands: svc})
	h, err := api.New(api.Options{DB: db, Commands: svc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	ctx := context.Background()
	mdb := connect(t, addr, "").Database("test")
	if err := mdb.RunCommand(ctx, bson.D{{Key: "create", Value: "s"}, {Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "t"}, {Key: "metaField", Value: "m"}}}}).Err(); err != nil {
		t.Fatal(err)
	}

	// An HTTP insert whose body is still arriving, seen over the wire.
	nc, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "POST /v1/collections/s/documents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n[{")
	var seen bson.Raw
	waitUntil(t, "the HTTP insert in currentOp", func() bool {
		r, err := connect(t, addr, "").Database("admin").RunCommand(ctx, bson.D{{Key: "currentOp", Value: 1}, {Key: "op", Value: "insert"}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		vals, _ := r.Lookup("inprog").Array().Values()
		if len(vals) == 1 {
			seen = vals[0].Document()
		}
		return len(vals) == 1
	})
	if ns := seen.Lookup("ns").StringValue(); ns != DatabaseName+".s" {
		t.Fatalf("the HTTP insert in currentOp: %v", seen)
	}
	nc.Close()

	// A MongoDB insert waiting for the ingest slot an HTTP request would
	// hold, seen in /v1/currentop.
	if err := svc.Ingest().Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := mdb.Collection("s").InsertOne(ctx, bson.D{{Key: "t", Value: time.Now()}, {Key: "m", Value: "a"}, {Key: "v", Value: 1.5}})
		done <- err
	}()
	var entry map[string]any
	waitUntil(t, "the MongoDB insert in /v1/currentop", func() bool {
		resp, err := http.Get(hs.URL + "/v1/currentop")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var cur struct {
			InProg []map[string]any `json:"inprog"`
		}
		if err := json.Unmarshal(b, &cur); err != nil {
			t.Fatal(err)
		}
		for _, o := range cur.InProg {
			if o["op"] == "insert" && o["ns"] == "s" {
				entry = o
			}
		}
		return entry != nil
	})
	if desc, _ := entry["desc"].(string); !strings.HasPrefix(desc, "conn") || !strings.HasSuffix(desc, " insert") {
		t.Fatalf("the MongoDB insert in /v1/currentop: %v", entry)
	}
	select {
	case err := <-done:
		t.Fatalf("the MongoDB insert ended (%v) while the ingest slot was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	svc.Ingest().Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := svc.Ops().Len(); n != 0 {
		t.Fatalf("%d operations left listed", n)
	}
}
