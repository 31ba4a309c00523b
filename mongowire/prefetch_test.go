package mongowire

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Batches built ahead are the ones the next getMore would have built: a
// read through getMores of changing batch sizes returns every document
// once, in order, and a cursor killed while its next batch is being built
// leaves nothing running.
func TestCursorPrefetch(t *testing.T) {
	defer func(n int) { batchBytes = n }(batchBytes)
	batchBytes = 2000 // some 40 documents a batch
	_, srv, addr := startServer(t, Options{})
	ctx := context.Background()
	db := connect(t, addr, "").Database("test")
	var docs []any
	const n = 1000
	for i := range n {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "pad", Value: strings.Repeat("x", 30)}})
	}
	if _, err := db.Collection("docs").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	type reply struct {
		Cursor struct {
			ID    int64      `bson:"id"`
			Batch []bson.Raw `bson:"firstBatch"`
			Next  []bson.Raw `bson:"nextBatch"`
		} `bson:"cursor"`
	}
	var r reply
	if err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "docs"}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "batchSize", Value: 10}}).Decode(&r); err != nil {
		t.Fatal(err)
	}
	var got []int32
	add := func(batch []bson.Raw) {
		for _, d := range batch {
			got = append(got, int32(d.Lookup("_id").AsInt64()))
		}
	}
	add(r.Cursor.Batch)
	sizes := []int{0, 3, 0, 0, 100, 0, 1, 0, 0, 7}
	for k := 0; r.Cursor.ID != 0; k++ {
		id := r.Cursor.ID
		cmd := bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "docs"}}
		if sz := sizes[k%len(sizes)]; sz > 0 {
			cmd = append(cmd, bson.E{Key: "batchSize", Value: int32(sz)})
		}
		r = reply{}
		if err := db.RunCommand(ctx, cmd).Decode(&r); err != nil {
			t.Fatalf("getMore %d: %v", k, err)
		}
		if sz := sizes[k%len(sizes)]; sz > 0 && len(r.Cursor.Next) > sz {
			t.Fatalf("getMore %d with batchSize %d returned %d documents", k, sz, len(r.Cursor.Next))
		}
		add(r.Cursor.Next)
	}
	if len(got) != n {
		t.Fatalf("read %d documents, want %d", len(got), n)
	}
	for i, id := range got {
		if id != int32(i) {
			t.Fatalf("document %d has _id %d", i, id)
		}
	}
	if srv.prefetched.Load() == 0 {
		t.Fatal("no batch was built ahead")
	}

	// Killed with a batch being built: nothing left running.
	before := runtime.NumGoroutine()
	for range 20 {
		r = reply{}
		if err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "docs"}, {Key: "batchSize", Value: 1}}).Decode(&r); err != nil {
			t.Fatal(err)
		}
		if err := db.RunCommand(ctx, bson.D{{Key: "getMore", Value: r.Cursor.ID}, {Key: "collection", Value: "docs"}}).Err(); err != nil {
			t.Fatal(err)
		}
		var kr struct {
			Killed []int64 `bson:"cursorsKilled"`
		}
		if err := db.RunCommand(ctx, bson.D{{Key: "killCursors", Value: "docs"}, {Key: "cursors", Value: bson.A{r.Cursor.ID}}}).Decode(&kr); err != nil {
			t.Fatal(err)
		}
		if len(kr.Killed) != 1 {
			t.Fatalf("killCursors killed %v", kr.Killed)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before || len(srv.prefetches) > 0 || srv.cursors.len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines (%d before), %d prefetches, %d cursors after the cursors were killed",
				runtime.NumGoroutine(), before, len(srv.prefetches), srv.cursors.len())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
