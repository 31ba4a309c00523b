package mongowire

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestFindBatches ports the limit, skip, batchSize and singleBatch
// combinations of MongoDB's jstests (core/query/batch_size.js,
// core/find_getmore_cmd.js, core/query/limit): the size of each batch and
// whether the cursor stays open after it, on both kinds of collection.
// batchSize 0 is an empty first batch and an open cursor.
func TestFindBatches(t *testing.T) {
	_, srv, addr := startServer(t, Options{})
	ctx := context.Background()
	mdb := connect(t, addr, "").Database("test")
	run := func(cmd bson.D) bson.Raw {
		t.Helper()
		r, err := mdb.RunCommand(ctx, cmd).Raw()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return r
	}
	run(bson.D{{Key: "create", Value: "ts"}, {Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "t"}, {Key: "metaField", Value: "m"}}}})
	run(bson.D{{Key: "create", Value: "plain"}})
	run(bson.D{{Key: "create", Value: "empty"}})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ts, plain bson.A
	for i := range 10 {
		ts = append(ts, bson.D{{Key: "t", Value: start.Add(time.Duration(i) * time.Second)}, {Key: "m", Value: "s"}, {Key: "i", Value: i}})
		plain = append(plain, bson.D{{Key: "_id", Value: i}})
	}
	run(bson.D{{Key: "insert", Value: "ts"}, {Key: "documents", Value: ts}})
	run(bson.D{{Key: "insert", Value: "plain"}, {Key: "documents", Value: plain}})

	// Each case: the find's options, then the batch sizes of getMores
	// (0: none given), and the batches expected with the cursor open (+)
	// or closed after each.
	cases := []struct {
		opts    bson.D
		getMore []int
		want    string
	}{
		{bson.D{{Key: "batchSize", Value: 0}}, []int{0}, "0+ 10"},
		{bson.D{{Key: "batchSize", Value: 0}, {Key: "limit", Value: 3}}, []int{0}, "0+ 3"},
		{bson.D{{Key: "batchSize", Value: 0}, {Key: "singleBatch", Value: true}}, nil, "0"},
		{bson.D{{Key: "limit", Value: 3}, {Key: "batchSize", Value: 2}}, []int{0}, "2+ 1"},
		{bson.D{{Key: "limit", Value: 3}, {Key: "batchSize", Value: 5}}, nil, "3"},
		{bson.D{{Key: "batchSize", Value: 4}}, []int{4, 0}, "4+ 4+ 2"},
		{bson.D{{Key: "batchSize", Value: 4}}, []int{1, 2, 0}, "4+ 1+ 2+ 3"},
		{bson.D{{Key: "skip", Value: 3}, {Key: "limit", Value: 5}, {Key: "batchSize", Value: 2}}, []int{2, 2}, "2+ 2+ 1"},
		{bson.D{{Key: "batchSize", Value: 3}, {Key: "singleBatch", Value: true}}, nil, "3"},
		{bson.D{{Key: "limit", Value: -4}}, nil, "4"},
		{bson.D{{Key: "limit", Value: 0}}, nil, "10"},
		{bson.D{{Key: "batchSize", Value: 10}}, []int{0}, "10+ 0"},
		{bson.D{{Key: "skip", Value: 20}}, nil, "0"},
	}
	for _, coll := range []string{"ts", "plain"} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s %v", coll, c.opts), func(t *testing.T) {
				r := run(append(bson.D{{Key: "find", Value: coll}}, c.opts...))
				got := batch(r, "firstBatch")
				for _, n := range c.getMore {
					id := r.Lookup("cursor", "id").Int64()
					if id == 0 {
						break
					}
					cmd := bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: coll}}
					if n > 0 {
						cmd = append(cmd, bson.E{Key: "batchSize", Value: n})
					}
					r = run(cmd)
					got += " " + batch(r, "nextBatch")
				}
				if got != c.want {
					t.Fatalf("batches %q, want %q", got, c.want)
				}
				if id := r.Lookup("cursor", "id").Int64(); id != 0 {
					run(bson.D{{Key: "killCursors", Value: coll}, {Key: "cursors", Value: bson.A{id}}})
				}
			})
		}
	}
	// batchSize 0 on an empty collection keeps a cursor open, as MongoDB
	// does; its getMore ends it.
	r := run(bson.D{{Key: "find", Value: "empty"}, {Key: "batchSize", Value: 0}})
	id := r.Lookup("cursor", "id").Int64()
	if got := batch(r, "firstBatch"); got != "0+" || id == 0 {
		t.Fatalf("empty collection, batchSize 0: %q, id %d", got, id)
	}
	r = run(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "empty"}})
	if got := batch(r, "nextBatch"); got != "0" {
		t.Fatalf("getMore of it: %q", got)
	}
	if srv.cursors.len() != 0 {
		t.Fatalf("%d cursors left open", srv.cursors.len())
	}
}

// batch describes a cursor reply's batch: its length, + when the cursor
// stays open.
func batch(r bson.Raw, key string) string {
	vals, _ := r.Lookup("cursor", key).Array().Values()
	s := fmt.Sprint(len(vals))
	if r.Lookup("cursor", "id").Int64() != 0 {
		s += "+"
	}
	return s
}

// TestFindProjection: a find's projection on a time series is the command
// layer's (command.Projection), as over HTTP: top-level fields, all
// included or all excluded; a sub-field is refused with BadValue rather
// than answered as a column that does not exist.
func TestFindProjection(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	ctx := context.Background()
	mdb := connect(t, addr, "").Database("test")
	if err := mdb.RunCommand(ctx, bson.D{{Key: "create", Value: "ts"}, {Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "t"}, {Key: "metaField", Value: "m"}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := mdb.RunCommand(ctx, bson.D{{Key: "insert", Value: "ts"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "t", Value: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, {Key: "m", Value: bson.D{{Key: "site", Value: "x"}}}, {Key: "a", Value: 1.5}, {Key: "b", Value: "s"}}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		proj bson.D
		want string // the first document's keys, or the error's code
	}{
		{bson.D{{Key: "a", Value: 1}}, "[_id a]"}, // _id unless excluded, as MongoDB
		{bson.D{{Key: "_id", Value: 1}}, "[_id a b m t]"},
		{bson.D{{Key: "a", Value: 0}, {Key: "_id", Value: 0}}, "[b m t]"},
		{bson.D{{Key: "_id", Value: 0}}, "[a b m t]"},
		{bson.D{{Key: "m.site", Value: 1}}, "code 2"},
		{bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 0}}, "code 2"},
		{bson.D{{Key: "a", Value: "x"}}, "code 2"},
	} {
		r, err := mdb.RunCommand(ctx, bson.D{{Key: "find", Value: "ts"}, {Key: "projection", Value: c.proj}}).Raw()
		got := ""
		if code, _ := errCode(err); err != nil {
			got = fmt.Sprintf("code %d", code)
		} else {
			vals, _ := r.Lookup("cursor", "firstBatch").Array().Values()
			elems, _ := vals[0].Document().Elements()
			var keys []string
			for _, e := range elems {
				keys = append(keys, e.Key())
			}
			slices.Sort(keys)
			got = fmt.Sprint(keys)
		}
		if got != c.want {
			t.Errorf("projection %v: %s, want %s", c.proj, got, c.want)
		}
	}
}
