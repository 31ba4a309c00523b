package mongowire

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// A find with archive: true reads what a TTL pass moved to the archive,
// with the live measurements; without it, the live ones alone.
func TestFindArchive(t *testing.T) {
	ctx := context.Background()
	st, err := objstore.Open(ctx, "file://"+t.TempDir(), objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true, Archive: st, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serveDB(t, db, Options{})
	cl := connect(t, addr, "")
	mdb := cl.Database("test")
	run := func(cmd bson.D) bson.Raw {
		t.Helper()
		r, err := mdb.RunCommand(ctx, cmd).Raw()
		if err != nil {
			t.Fatalf("%s: %v", cmd[0].Key, err)
		}
		return r
	}
	run(bson.D{{Key: "create", Value: "w"}, {Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "ts"}, {Key: "metaField", Value: "sensor"}}},
		{Key: "expireAfterSeconds", Value: 3600}, {Key: "archive", Value: true}})
	old := time.Now().Add(-48 * time.Hour)
	var docs []any
	for i := 0; i < 50; i++ {
		docs = append(docs, bson.D{{Key: "ts", Value: old.Add(time.Duration(i) * time.Second)}, {Key: "sensor", Value: "a"}, {Key: "v", Value: int32(i)}})
	}
	docs = append(docs, bson.D{{Key: "ts", Value: time.Now()}, {Key: "sensor", Value: "a"}, {Key: "v", Value: int32(99)}})
	if _, err := mdb.Collection("w").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// Stored by checkpoints, then moved by a pass.
	for i := 0; i < 3; i++ {
		time.Sleep(150 * time.Millisecond)
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := db.Expire(ctx, ttl.Target{Collection: "w"}, time.Now(), ttl.Budget{}); err != nil || b.Docs != 50 {
		t.Fatalf("archived %+v %v", b, err)
	}
	count := func(archive bool) int {
		cmd := bson.D{{Key: "find", Value: "w"}, {Key: "sort", Value: bson.D{{Key: "ts", Value: 1}}}, {Key: "batchSize", Value: 1000}}
		if archive {
			cmd = append(cmd, bson.E{Key: "archive", Value: true})
		}
		r := run(cmd)
		vals, err := r.Lookup("cursor", "firstBatch").Array().Values()
		if err != nil {
			t.Fatal(err)
		}
		if archive && len(vals) == 51 {
			// Archived rows read back with their types.
			if v := vals[7].Document().Lookup("v"); v.Type != bson.TypeInt32 || v.Int32() != 7 {
				t.Fatalf("row 7: v = %v", v)
			}
		}
		return len(vals)
	}
	if n := count(true); n != 51 {
		t.Fatalf("find with archive: %d documents, want 51", n)
	}
	if n := count(false); n != 1 {
		t.Fatalf("find without archive: %d documents, want 1", n)
	}
	if _, err := mdb.RunCommand(ctx, bson.D{{Key: "find", Value: "w"}, {Key: "archive", Value: "yes"}}).Raw(); err == nil {
		t.Fatal("archive: \"yes\" accepted")
	}
	// aggregate with archive: a $group on the engine's aggregate, and a
	// count (which the engine's count would answer from live data alone).
	agg := func(pipe bson.A) bson.Raw {
		t.Helper()
		r := run(bson.D{{Key: "aggregate", Value: "w"}, {Key: "pipeline", Value: pipe}, {Key: "cursor", Value: bson.D{}}, {Key: "archive", Value: true}})
		vals, err := r.Lookup("cursor", "firstBatch").Array().Values()
		if err != nil || len(vals) != 1 {
			t.Fatalf("aggregate %v: %s %v", pipe, r, err)
		}
		return vals[0].Document()
	}
	g := agg(bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}, {Key: "s", Value: bson.D{{Key: "$sum", Value: "$v"}}}}}}})
	if n, _ := g.Lookup("n").AsInt64OK(); n != 51 {
		t.Fatalf("$group with the archive: %s", g)
	}
	if s, _ := g.Lookup("s").AsFloat64OK(); s != 1225+99 {
		t.Fatalf("$group with the archive: %s", g)
	}
	c := agg(bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "sensor", Value: "a"}}}}, bson.D{{Key: "$count", Value: "n"}}})
	if n, _ := c.Lookup("n").AsInt64OK(); n != 51 {
		t.Fatalf("$count with the archive: %s", c)
	}
}
