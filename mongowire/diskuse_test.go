package mongowire

import (
	"context"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/hourglassdb/hourglass/timeseries"
)

// TestAllowDiskUseOverTheWire: with allowDiskUse, a window stage that
// must sort 20,000 measurements on a server whose stages hold 64 KiB
// spills sorted runs and answers the same documents as a server with
// room for them (292 without allowDiskUse, as MongoDB); the documents
// gathered after a stream stage are not spilled: 146 with allowDiskUse,
// 292 without.
func TestAllowDiskUseOverTheWire(t *testing.T) {
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, small := serveDB(t, db, Options{StageMemory: 64 << 10})
	_, roomy := serveDB(t, db, Options{})
	ctx := context.Background()
	mdb := connect(t, small, "").Database("test")
	if err := mdb.CreateCollection(ctx, "big", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("ts").SetMetaField("sensor"))); err != nil {
		t.Fatal(err)
	}
	const n = 20_000
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "ts", Value: t0.Add(time.Duration(i) * time.Second)},
			{Key: "sensor", Value: bson.D{{Key: "id", Value: int32(i % 4)}}}, {Key: "temp", Value: float64(i % 17)}}
	}
	if _, err := mdb.Collection("big").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	sorting := `[{"$setWindowFields": {"partitionBy": "$sensor.id", "sortBy": {"temp": 1}, "output": {"a": {"$avg": "$temp", "window": {"documents": [-10, 0]}}, "k": {"$count": {}, "window": {"documents": ["unbounded", "current"]}}}}}]`
	run := func(addr, p string, disk bool) ([]bson.Raw, error) {
		cur, err := connect(t, addr, "").Database("test").Collection("big").Aggregate(ctx, pipe(t, p), options.Aggregate().SetAllowDiskUse(disk))
		if err != nil {
			return nil, err
		}
		var out []bson.Raw
		err = cur.All(ctx, &out)
		return out, err
	}
	want, err := run(roomy, sorting, false)
	if err != nil || len(want) != n {
		t.Fatalf("with room: %d documents, %v", len(want), err)
	}
	got, err := run(small, sorting, true)
	if err != nil || len(got) != n {
		t.Fatalf("allowDiskUse: %d documents, %v; want %d", len(got), err, n)
	}
	for i := range want {
		if got[i].String() != want[i].String() {
			t.Fatalf("allowDiskUse: document %d is %s, want %s", i, got[i], want[i])
		}
	}
	if _, err := run(small, sorting, false); !isCode(err, 292) {
		t.Errorf("without allowDiskUse: %v, want 292", err)
	}
	gathered := `[{"$setWindowFields": {"partitionBy": "$sensor", "sortBy": {"ts": 1}, "output": {"a": {"$avg": "$temp", "window": {"documents": [-10, 0]}}}}}, {"$sort": {"a": 1}}]`
	if _, err := run(small, gathered, true); !isCode(err, 146) {
		t.Errorf("gathered after a stream stage, allowDiskUse: %v, want 146", err)
	}
	if _, err := run(small, gathered, false); !isCode(err, 292) {
		t.Errorf("gathered after a stream stage: %v, want 292", err)
	}
	// allowDiskUse is a boolean.
	if _, err := mdb.RunCommand(ctx, bson.D{{Key: "aggregate", Value: "big"}, {Key: "pipeline", Value: bson.A{}},
		{Key: "cursor", Value: bson.D{}}, {Key: "allowDiskUse", Value: "yes"}}).Raw(); !isCode(err, 14) {
		t.Errorf("allowDiskUse: \"yes\": %v, want 14", err)
	}
}

// TestAllowDiskUseKilledCursor: a cursor killed in the middle of a
// spilled sort closes the sort's files at once (they are unlinked: an open
// one would hold its disk space until collected).
func TestAllowDiskUseKilledCursor(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd to count open files")
		}
		return len(ents)
	}
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serveDB(t, db, Options{StageMemory: 64 << 10})
	ctx := context.Background()
	coll := connect(t, addr, "").Database("test").Collection("spill")
	// About 2.3 MB as the stage counts them: some 35 runs of 64 KiB,
	// fewer than a merge of runs would gather into one.
	docs := make([]any, 10_000)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "v", Value: float64(i % 97)}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	before := fds()
	cur, err := coll.Aggregate(ctx, pipe(t, `[{"$setWindowFields": {"sortBy": {"v": 1}, "output": {"n": {"$count": {}, "window": {"documents": [-1, 0]}}}}}]`),
		options.Aggregate().SetAllowDiskUse(true).SetBatchSize(10))
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Next(ctx) {
		t.Fatal(cur.Err())
	}
	during := fds()
	if during < before+10 {
		t.Fatalf("%d files open while the sort is read, %d before: it did not spill", during, before)
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); fds() > before+2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d files open after the cursor was killed, %d before, %d while read", fds(), before, during)
		}
	}
}

func isCode(err error, code int32) bool {
	c, _ := errCode(err)
	return c == code
}
