package mongowire

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestCursorLimits: a connection may hold MaxCursorsPerConnection open
// cursors, past which a find that would leave one open is refused (462);
// past MaxCursors in all, the least recently used idle cursor is killed to
// make room, and its getMore says so (CursorKilled, 237).
func TestCursorLimits(t *testing.T) {
	_, srv, addr := startServer(t, Options{MaxCursors: 5, MaxCursorsPerConnection: 3})
	ctx := context.Background()
	one := connect(t, addr, "&maxPoolSize=1").Database("test")
	two := connect(t, addr, "&maxPoolSize=1").Database("test")
	docs := bson.A{}
	for i := range 10 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if err := one.RunCommand(ctx, bson.D{{Key: "insert", Value: "p"}, {Key: "documents", Value: docs}}).Err(); err != nil {
		t.Fatal(err)
	}
	find := func(t *testing.T, who string) (int64, error) {
		t.Helper()
		db := one
		if who == "two" {
			db = two
		}
		r, err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "p"}, {Key: "batchSize", Value: 1}}).Raw()
		if err != nil {
			return 0, err
		}
		return r.Lookup("cursor", "id").Int64(), nil
	}
	var ids []int64
	for range 3 {
		id, err := find(t, "one")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		time.Sleep(2 * time.Millisecond) // distinct last uses
	}
	if _, err := find(t, "one"); err == nil || !strings.Contains(err.Error(), "holds 3 open cursors") {
		t.Fatalf("a fourth cursor on one connection: %v", err)
	} else if code, _ := errCode(err); code != 462 {
		t.Fatalf("a fourth cursor on one connection: code %d", code)
	}
	for range 2 {
		if _, err := find(t, "two"); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.cursors.open(); n != 5 {
		t.Fatalf("%d cursors open, want 5", n)
	}
	// The sixth makes room: the least recently used, the first, goes.
	if _, err := find(t, "two"); err != nil {
		t.Fatalf("a cursor past MaxCursors: %v", err)
	}
	if n := srv.cursors.open(); n != 5 {
		t.Fatalf("%d cursors open, want 5", n)
	}
	err := one.RunCommand(ctx, bson.D{{Key: "getMore", Value: ids[0]}, {Key: "collection", Value: "p"}}).Err()
	if code, _ := errCode(err); code != 237 || !strings.Contains(err.Error(), "least recently used") {
		t.Fatalf("getMore of the evicted cursor: %v", err)
	}
	if err := one.RunCommand(ctx, bson.D{{Key: "getMore", Value: ids[1]}, {Key: "collection", Value: "p"}}).Err(); err != nil {
		t.Fatalf("getMore of a cursor kept: %v", err)
	}
}
