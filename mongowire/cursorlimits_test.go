package mongowire

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/timeseries"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
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

// TestIdleCursorsYieldMemory: cursors left open hold their queries' memory
// only while no other query needs it: once the memory all queries may hold
// is taken, a query closes idle cursors (least recently used first) rather
// than fail, and their getMore answers CursorKilled saying why.
func TestIdleCursorsYieldMemory(t *testing.T) {
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), QueryMemoryBytes: 1 << 20, QueryMemoryTotalBytes: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serveDB(t, db, Options{})
	ctx := context.Background()
	if _, err := db.CreateCollection(ctx, "ts", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ms []model.Measurement
	for i := range 1500 {
		ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(i) * time.Second).UnixNano(), Meta: fmt.Sprintf("s%04d", i),
			Fields: []model.Field{{Name: "v", Value: model.Float(1)}}})
	}
	if _, err := db.Insert(ctx, "ts", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	hog := connect(t, addr, "&maxPoolSize=1").Database("test")
	var ids []int64
	for range 40 {
		// In time order: the cursor holds the plan of every series.
		r, err := hog.RunCommand(ctx, bson.D{{Key: "find", Value: "ts"}, {Key: "sort", Value: bson.D{{Key: "t", Value: 1}}}, {Key: "batchSize", Value: 1}}).Raw()
		if err != nil {
			t.Fatalf("cursor %d of the hog: %v", len(ids)+1, err)
		}
		ids = append(ids, r.Lookup("cursor", "id").Int64())
	}
	// Another client's query runs, whatever the hog holds: a find in time
	// order, which plans every series at once.
	other := connect(t, addr, "&maxPoolSize=1").Database("test")
	cur, err := other.Collection("ts").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "t", Value: 1}}))
	if err != nil {
		t.Fatalf("another client's find: %v", err)
	}
	var all []bson.M
	if err := cur.All(ctx, &all); err != nil || len(all) != 1500 {
		t.Fatalf("another client's find: %d documents, %v", len(all), err)
	}
	err = hog.RunCommand(ctx, bson.D{{Key: "getMore", Value: ids[0]}, {Key: "collection", Value: "ts"}}).Err()
	if code, _ := errCode(err); code != 237 || !strings.Contains(err.Error(), "query memory") {
		t.Fatalf("getMore of the hog's first cursor: %v", err)
	}
	if err := hog.RunCommand(ctx, bson.D{{Key: "getMore", Value: ids[len(ids)-1]}, {Key: "collection", Value: "ts"}}).Err(); err != nil {
		t.Fatalf("getMore of the hog's last cursor: %v", err)
	}
}

// TestReadsOfManySeries: on a collection of many series, a find with a
// small limit, a count and a distinct of a meta sub-field answer within a
// query memory far below what holding every series takes: the find visits
// series in order and lets them go, the count comes from the catalog, the
// distinct from the series index.
func TestReadsOfManySeries(t *testing.T) {
	const n = 20000
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), QueryMemoryBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serveDB(t, db, Options{})
	ctx := context.Background()
	if _, err := db.CreateCollection(ctx, "card", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "tags"}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := make([]model.Measurement, n)
	for i := range ms {
		ms[i] = model.Measurement{Time: t0.Add(time.Duration(i) * time.Millisecond).UnixNano(),
			Meta:   map[string]any{"sensor": fmt.Sprintf("s%05d", i), "site": fmt.Sprintf("site%02d", i%50)},
			Fields: []model.Field{{Name: "v", Value: model.Float(1)}}}
	}
	if _, err := db.Insert(ctx, "card", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	coll := connect(t, addr, "").Database("test").Collection("card")
	before := db.Stats()
	var one bson.M
	if err := coll.FindOne(ctx, bson.D{}).Decode(&one); err != nil {
		t.Fatalf("findOne: %v", err)
	}
	if c, err := coll.CountDocuments(ctx, bson.D{}); err != nil || c != n {
		t.Fatalf("countDocuments: %d, %v", c, err)
	}
	r, err := coll.Database().RunCommand(ctx, bson.D{{Key: "count", Value: "card"}}).Raw()
	if err != nil || r.Lookup("n").AsInt64() != n {
		t.Fatalf("count: %v, %v", r, err)
	}
	var sites []string
	if err := coll.Distinct(ctx, "tags.site", bson.D{}).Decode(&sites); err != nil || len(sites) != 50 || sites[0] != "site00" {
		t.Fatalf("distinct: %d sites (%v), %v", len(sites), sites[:min(3, len(sites))], err)
	}
	// Neither read the measurements: the counts came from the catalog,
	// the distinct from the series index.
	if after := db.Stats(); after.CountsFromCatalog != before.CountsFromCatalog+2 || after.DistinctsFromSeries != before.DistinctsFromSeries+1 {
		t.Fatalf("counts from the catalog %d, distincts from the series %d; want 2 and 1",
			after.CountsFromCatalog-before.CountsFromCatalog, after.DistinctsFromSeries-before.DistinctsFromSeries)
	}
}
