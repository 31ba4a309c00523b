package mongowire

import (
	"context"
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

func isCode(err error, code int32) bool {
	c, _ := errCode(err)
	return c == code
}
