package mongowire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// startServer opens an engine in a temporary directory and serves it on
// a loopback port; it returns both and the server's address.
func startServer(t testing.TB, opts Options) (*timeseries.DB, *Server, string) {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr := serveDB(t, db, opts)
	return db, srv, addr
}

// serveDB serves db on a loopback port; db is closed with the server.
func serveDB(t testing.TB, db *timeseries.DB, opts Options) (*Server, string) {
	t.Helper()
	opts.DB = db
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := New(opts)
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
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv, ln.Addr().String()
}

func connect(t *testing.T, addr string, extra string) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true&serverSelectionTimeoutMS=5000" + extra))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Disconnect(context.Background()) })
	return cl
}

// TestDriverSession runs a sensor session through the official Go driver:
// connect, ping, create a time-series collection, insertMany, a find over a
// time range sorted by time through several getMore batches, the same data
// read from the engine directly (what the HTTP API serves), drop.
func TestDriverSession(t *testing.T) {
	db, _, addr := startServer(t, Options{})
	ctx := context.Background()
	for _, extra := range []string{"", "&compressors=zstd", "&compressors=snappy"} {
		t.Run("compressors"+extra, func(t *testing.T) {
			cl := connect(t, addr, extra)
			if err := cl.Ping(ctx, nil); err != nil {
				t.Fatalf("ping: %v", err)
			}
			mdb := cl.Database("test")
			name := "weather" + map[string]string{"": "", "&compressors=zstd": "z", "&compressors=snappy": "s"}[extra]
			err := mdb.CreateCollection(ctx, name, options.CreateCollection().SetTimeSeriesOptions(
				options.TimeSeries().SetTimeField("ts").SetMetaField("sensor").SetGranularity("seconds")).SetExpireAfterSeconds(86400))
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			// Recent enough that the collection's TTL has not expired it.
			t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
			const n = 1000
			docs := make([]any, n)
			for i := range docs {
				docs[i] = bson.D{{Key: "ts", Value: t0.Add(time.Duration(i) * time.Second)},
					{Key: "sensor", Value: bson.D{{Key: "site", Value: []string{"north", "south"}[i%2]}}},
					{Key: "temp", Value: 20 + float64(i)/10}, {Key: "n", Value: int32(i)}}
			}
			res, err := mdb.Collection(name).InsertMany(ctx, docs)
			if err != nil {
				t.Fatalf("insertMany: %v", err)
			}
			if len(res.InsertedIDs) != n {
				t.Fatalf("insertMany acknowledged %d documents, want %d", len(res.InsertedIDs), n)
			}

			// Seconds [100, 700) of the north sensor, newest first, the first 10
			// skipped, 50 a batch.
			filter := bson.D{{Key: "ts", Value: bson.D{{Key: "$gte", Value: t0.Add(100 * time.Second)}, {Key: "$lt", Value: t0.Add(700 * time.Second)}}},
				{Key: "sensor.site", Value: "north"}}
			cur, err := mdb.Collection(name).Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "ts", Value: -1}}).SetBatchSize(50).SetSkip(10))
			if err != nil {
				t.Fatalf("find: %v", err)
			}
			var got []struct {
				TS     time.Time      `bson:"ts"`
				Sensor map[string]any `bson:"sensor"`
				Temp   float64        `bson:"temp"`
				N      int64          `bson:"n"`
			}
			if err := cur.All(ctx, &got); err != nil {
				t.Fatalf("find: %v", err)
			}
			if len(got) != 290 {
				t.Fatalf("find returned %d documents, want 290", len(got))
			}
			for i, d := range got {
				want := 698 - 2*(i+10)
				if !d.TS.Equal(t0.Add(time.Duration(want)*time.Second)) || d.N != int64(want) || d.Sensor["site"] != "north" {
					t.Fatalf("document %d = %+v, want second %d of north", i, d, want)
				}
			}

			// The engine behind the HTTP API sees the same measurements.
			ec, err := db.Find(ctx, name, timeseries.FindOptions{Filter: partialfilter.MustParseJSON(`{"sensor.site": "south"}`)})
			if err != nil {
				t.Fatal(err)
			}
			rows := 0
			for ec.Next() {
				rows += int(ec.Record().NumRows())
			}
			ec.Close()
			if rows != n/2 {
				t.Fatalf("the engine finds %d south measurements, want %d", rows, n/2)
			}

			if err := mdb.Collection(name).Drop(ctx); err != nil {
				t.Fatalf("drop: %v", err)
			}
			if _, err := db.DescribeShallow(ctx, name); err == nil {
				t.Fatalf("collection %q still exists after drop", name)
			}
		})
	}
}

// TestFindBatchesOverflow reads a find whose getMore replies are bounded
// by their 16 MiB, not by a batch size: every document once, in order, the
// one that did not fit a reply first in the next.
func TestFindBatchesOverflow(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if err := f.mdb.CreateCollection(ctx, "wide", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("ts").SetMetaField("m"))); err != nil {
		t.Fatal(err)
	}
	const n = 24_000 // of ~1 KiB: two getMore replies
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-24 * time.Hour)
	pad := strings.Repeat("x", 1000)
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "ts", Value: t0.Add(time.Duration(i) * time.Second)}, {Key: "m", Value: int32(i % 3)},
			{Key: "n", Value: int64(i)}, {Key: "pad", Value: fmt.Sprint(i, pad)}}
	}
	if _, err := f.mdb.Collection("wide").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cur, err := f.mdb.Collection("wide").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "ts", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for ; cur.Next(ctx); i++ {
		var d struct {
			N   int64  `bson:"n"`
			M   int32  `bson:"m"`
			Pad string `bson:"pad"`
		}
		if err := cur.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if d.N != int64(i) || d.M != int32(i%3) || d.Pad != fmt.Sprint(i, pad) {
			t.Fatalf("document %d = n %d, m %d, pad of %d bytes", i, d.N, d.M, len(d.Pad))
		}
	}
	if err := cur.Err(); err != nil || i != n {
		t.Fatalf("read %d documents, want %d: %v", i, n, err)
	}
}
