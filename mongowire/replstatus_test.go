package mongowire

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// TestReplSetGetStatusStandalone checks that a server outside a replica
// set answers replSetGetStatus as a standalone MongoDB does:
// NoReplicationEnabled (76).
func TestReplSetGetStatusStandalone(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	cl := connect(t, addr, "")
	err := cl.Database("admin").RunCommand(context.Background(), bson.D{{Key: "replSetGetStatus", Value: 1}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 76 || ce.Name != "NoReplicationEnabled" {
		t.Fatalf("replSetGetStatus on a standalone server: %v", err)
	}
}

// TestFilterJSON checks that a delete's filter, as the wire protocol
// decodes it, keeps its meaning in the JSON the replica set's log
// carries: dates, ObjectIds, regular expressions, nested operators.
func TestFilterJSON(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	oid := partialfilter.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	q := map[string]any{
		"t":      map[string]any{"$lt": t0},
		"_id":    map[string]any{"$ne": oid},
		"sensor": map[string]any{"$in": []any{partialfilter.Regex{Pattern: "^s[01]$"}, "x"}},
		"v":      map[string]any{"$gte": int64(3), "$lt": 7.5},
	}
	direct, err := partialfilter.Parse(q)
	if err != nil {
		t.Fatal(err)
	}
	logged, err := partialfilter.ParseJSON([]byte(direct.String()))
	if err != nil {
		t.Fatalf("%s: %v", direct, err)
	}
	matched := 0
	for _, doc := range []map[string]any{
		{"t": t0.Add(-time.Second), "_id": int64(1), "sensor": "s0", "v": int64(3)},
		{"t": t0, "_id": int64(1), "sensor": "s0", "v": int64(3)},
		{"t": t0.Add(-time.Second), "_id": oid, "sensor": "s1", "v": int64(4)},
		{"t": t0.Add(-time.Second), "_id": int64(2), "sensor": "s2", "v": int64(4)},
		{"t": t0.Add(-time.Second), "_id": int64(2), "sensor": "x", "v": 7.4},
		{"t": t0.Add(-time.Second), "_id": int64(2), "sensor": "s1", "v": int64(8)},
	} {
		if a, b := direct.Match(doc), logged.Match(doc); a != b {
			t.Fatalf("%v: the filter matches %v, its logged text %s %v", doc, a, direct, b)
		} else if a {
			matched++
		}
	}
	if matched != 2 {
		t.Fatalf("%d documents matched, want 2", matched)
	}
}
