package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// TestReplicaSetMongoDriver runs three members serving the wire protocol:
// the Go driver given replicaSet=rs0 finds the primary from hello and
// writes there; a secondary refuses writes with NotWritablePrimary (10107)
// and answers reads that allow a secondary; a write the set does not
// replicate is refused; after kill -9 of the primary the same client's
// next insert lands on the new primary, and nothing acknowledged is lost.
func TestReplicaSetMongoDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three binaries")
	}
	addrs := freeAddrs(t, 9)
	var ms []*member
	var spec, mongos []string
	mongoOf := map[*member]string{}
	for i := range 3 {
		m := &member{id: fmt.Sprintf("n%d", i+1), http: addrs[3*i], raft: addrs[3*i+1], dir: t.TempDir()}
		ms = append(ms, m)
		mongoOf[m] = addrs[3*i+2]
		mongos = append(mongos, addrs[3*i+2])
		spec = append(spec, fmt.Sprintf("%s=%s/%s/%s", m.id, m.raft, m.http, addrs[3*i+2]))
	}
	for _, m := range ms {
		m.args = []string{"serve", "--replica-set", "rs0", "--node-id", m.id, "--raft-listen", m.raft,
			"--members", strings.Join(spec, ","), "--listen", m.http, "--data-dir", m.dir, "--log-format", "json"}
		m.start(t)
	}
	ctx := context.Background()
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + strings.Join(mongos, ",") +
		"/?replicaSet=rs0&serverSelectionTimeoutMS=20000")) // retryable writes: the drivers' default
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Disconnect(ctx)
	db := cl.Database("hourglass")
	if err := db.CreateCollection(ctx, "m", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("t").SetMetaField("sensor"))); err != nil {
		t.Fatalf("create through the set: %v", err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	docs := func(from, n int) []any {
		var out []any
		for i := from; i < from+n; i++ {
			out = append(out, bson.D{{Key: "t", Value: t0.Add(time.Duration(i) * time.Second)}, {Key: "sensor", Value: fmt.Sprintf("s%d", i%5)}, {Key: "v", Value: i}})
		}
		return out
	}
	if _, err := db.Collection("m").InsertMany(ctx, docs(0, 100)); err != nil {
		t.Fatalf("insertMany through the set: %v", err)
	}

	// Who is the primary, as hello tells it.
	var hello struct {
		SetName   string   `bson:"setName"`
		Hosts     []string `bson:"hosts"`
		Primary   string   `bson:"primary"`
		Writable  bool     `bson:"isWritablePrimary"`
		Secondary bool     `bson:"secondary"`
		Me        string   `bson:"me"`
	}
	direct := func(addr string) *mongo.Client {
		c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true&retryWrites=false&serverSelectionTimeoutMS=5000"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Disconnect(ctx) })
		return c
	}
	var primary, secondary *member
	for _, m := range ms {
		if err := direct(mongoOf[m]).Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
			t.Fatal(err)
		}
		if hello.SetName != "rs0" || len(hello.Hosts) != 3 || hello.Me != mongoOf[m] || hello.Writable == hello.Secondary {
			t.Fatalf("%s: hello %+v", m.id, hello)
		}
		if hello.Writable {
			primary = m
		} else {
			secondary = m
		}
	}
	if primary == nil || secondary == nil || hello.Primary != mongoOf[primary] {
		t.Fatalf("primary %v, secondary %v, hello names %q", primary, secondary, hello.Primary)
	}
	// rs.status(), as each side sees the set.
	for _, c := range []struct {
		m     *member
		state int32
	}{{primary, 1}, {secondary, 2}} {
		var st struct {
			Set     string `bson:"set"`
			MyState int32  `bson:"myState"`
			Members []struct {
				Name     string `bson:"name"`
				StateStr string `bson:"stateStr"`
				Self     bool   `bson:"self"`
			} `bson:"members"`
		}
		if err := direct(mongoOf[c.m]).Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st); err != nil {
			t.Fatalf("replSetGetStatus on %s: %v", c.m.id, err)
		}
		primaries, self := 0, ""
		for _, x := range st.Members {
			if x.StateStr == "PRIMARY" {
				primaries++
				if x.Name != mongoOf[primary] {
					t.Fatalf("%s: replSetGetStatus names %s primary, hello %s", c.m.id, x.Name, mongoOf[primary])
				}
			}
			if x.Self {
				self = x.Name
			}
		}
		if st.Set != "rs0" || st.MyState != c.state || len(st.Members) != 3 || primaries != 1 || self != mongoOf[c.m] {
			t.Fatalf("replSetGetStatus on %s: %+v", c.m.id, st)
		}
	}

	// A secondary, directly.
	sec := direct(mongoOf[secondary]).Database("hourglass")
	_, err = sec.Collection("m").InsertOne(ctx, docs(1000, 1)[0])
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 10107 || ce.Name != "NotWritablePrimary" || !strings.Contains(ce.Message, mongoOf[primary]) {
		t.Fatalf("insert on a secondary: %v, want NotWritablePrimary naming %s", err, mongoOf[primary])
	}
	// A direct connection reads with primaryPreferred (the drivers'
	// rule for a single server): the secondary answers once it has
	// applied the inserts.
	secColl := sec.Collection("m", options.Collection().SetReadPreference(readpref.SecondaryPreferred()))
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := secColl.CountDocuments(ctx, bson.D{})
		if err == nil && n == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("count on the secondary with secondaryPreferred: %d, %v; want 100", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A delete through the set (a date in its filter) reaches every
	// member.
	res, err := db.Collection("m").DeleteMany(ctx, bson.D{{Key: "sensor", Value: "s0"}, {Key: "t", Value: bson.D{{Key: "$lt", Value: t0.Add(50 * time.Second)}}}})
	if err != nil || res.DeletedCount != 10 {
		t.Fatalf("deleteMany through the set: %+v, %v; want 10 deleted", res, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := secColl.CountDocuments(ctx, bson.D{})
		if err == nil && n == 90 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("count on the secondary after the delete: %d, %v; want 90", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// collMod through the set reaches every member (a TTL long enough
	// to expire nothing here).
	if err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "m"}, {Key: "expireAfterSeconds", Value: 315360000}}).Err(); err != nil {
		t.Fatalf("collMod through the set: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		specs, err := sec.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "m"}})
		var opts struct {
			Expire int64 `bson:"expireAfterSeconds"`
		}
		if err == nil && len(specs) == 1 && bson.Unmarshal(specs[0].Options, &opts) == nil && opts.Expire == 315360000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the secondary's collection options after collMod: %+v %v", specs, err)
		}
	}

	// Updates of plain documents through the set: every member ends with
	// the same documents, a $currentDate's date and an int64 included.
	plainColl := db.Collection("p")
	if _, err := plainColl.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "a"}}, bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: "b"}}}); err != nil {
		t.Fatalf("insert into p: %v", err)
	}
	ur, err := plainColl.UpdateMany(ctx, bson.D{{Key: "k", Value: "a"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(1) << 40}}},
		{Key: "$currentDate", Value: bson.D{{Key: "at", Value: true}}}, {Key: "$set", Value: bson.D{{Key: "when", Value: t0}}}})
	if err != nil || ur.MatchedCount != 2 || ur.ModifiedCount != 2 {
		t.Fatalf("updateMany through the set: %+v, %v", ur, err)
	}
	if ur, err = plainColl.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "k", Value: "c"}}); err != nil || ur.ModifiedCount != 1 {
		t.Fatalf("replaceOne through the set: %+v, %v", ur, err)
	}
	plainOf := func(d *mongo.Database, pref *readpref.ReadPref) string {
		cur, err := d.Collection("p", options.Collection().SetReadPreference(pref)).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return err.Error()
		}
		var all []bson.D // in stored order: a map would print in any order
		if err := cur.All(ctx, &all); err != nil {
			return err.Error()
		}
		return fmt.Sprint(all)
	}
	wantPlain := plainOf(db, readpref.Primary())
	if !strings.Contains(wantPlain, `"at":`) || !strings.Contains(wantPlain, "1099511627776") || !strings.Contains(wantPlain, `"k":"c"`) {
		t.Fatalf("after updateMany and replaceOne: %s", wantPlain)
	}
	for deadline := time.Now().Add(10 * time.Second); plainOf(sec, readpref.SecondaryPreferred()) != wantPlain; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the secondary holds %s, the primary %s", plainOf(sec, readpref.SecondaryPreferred()), wantPlain)
		}
	}

	// A causally consistent session reads its own write on a secondary:
	// replies carry operationTime, the driver sends it back as
	// afterClusterTime, and the secondary waits until it has applied that
	// far.
	causal, err := cl.StartSession(options.Session().SetCausalConsistency(true))
	if err != nil {
		t.Fatal(err)
	}
	err = mongo.WithSession(ctx, causal, func(sc context.Context) error {
		for i := range 20 {
			if _, err := plainColl.InsertOne(sc, bson.D{{Key: "_id", Value: 100 + i}}); err != nil {
				return err
			}
			n, err := db.Collection("p", options.Collection().SetReadPreference(readpref.Secondary())).CountDocuments(sc, bson.D{{Key: "_id", Value: 100 + i}})
			if err != nil || n != 1 {
				return fmt.Errorf("read %d on a secondary after the session's insert: %d, %v", i, n, err)
			}
		}
		return nil
	})
	causal.EndSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A read asking for a point the member has not reached waits
	// maxTimeMS, then MaxTimeMSExpired.
	err = sec.RunCommand(ctx, bson.D{{Key: "find", Value: "p"}, {Key: "maxTimeMS", Value: 100},
		{Key: "readConcern", Value: bson.D{{Key: "afterClusterTime", Value: bson.Timestamp{T: 1 << 30}}}},
		{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}}}).Err()
	if ce := (mongo.CommandError{}); !errors.As(err, &ce) || ce.Code != 50 {
		t.Fatalf("a read after a cluster time far ahead: %v, want MaxTimeMSExpired (50)", err)
	}

	// Read concern levels: linearizable reads on the primary see every
	// acknowledged write and are refused on a secondary; snapshot and
	// unknown levels are refused.
	lin := options.Collection().SetReadConcern(readconcern.Linearizable())
	if _, err := plainColl.InsertOne(ctx, bson.D{{Key: "_id", Value: 200}}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Collection("p", lin).CountDocuments(ctx, bson.D{{Key: "_id", Value: 200}}); err != nil || n != 1 {
		t.Fatalf("a linearizable read on the primary after an insert: %d, %v", n, err)
	}
	for _, c := range []struct {
		db   *mongo.Database
		rc   bson.D
		code int32
	}{
		{sec, bson.D{{Key: "level", Value: "linearizable"}}, 10107},
		{db, bson.D{{Key: "level", Value: "snapshot"}}, 72},
		{db, bson.D{{Key: "level", Value: "linearizable"}, {Key: "afterClusterTime", Value: bson.Timestamp{T: 1}}}, 72},
		{db, bson.D{{Key: "level", Value: "strong"}}, 2},
		{db, bson.D{{Key: "level", Value: 1}}, 14},
	} {
		err := c.db.RunCommand(ctx, bson.D{{Key: "find", Value: "p"}, {Key: "readConcern", Value: c.rc},
			{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}}}).Err()
		if ce := (mongo.CommandError{}); !errors.As(err, &ce) || ce.Code != c.code {
			t.Fatalf("readConcern %v: %v, want code %d", c.rc, err, c.code)
		}
	}
	if err := sec.RunCommand(ctx, bson.D{{Key: "find", Value: "p"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}},
		{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}}}).Err(); err != nil {
		t.Fatalf("a majority read on a secondary: %v", err)
	}

	// Transactions are refused, with a clear error.
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		return plainColl.InsertOne(sc, bson.D{{Key: "_id", Value: 9}})
	})
	sess.EndSession(ctx)
	if err == nil || !strings.Contains(err.Error(), "transactions") {
		t.Fatalf("a transaction: %v, want a refusal", err)
	}

	// The primary killed: the client finds the new one.
	primary.kill(t)
	start := time.Now()
	for {
		_, err := db.Collection("m").InsertMany(ctx, docs(100, 100))
		if err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no insert accepted within 30 s of the primary's kill: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the primary killed to the driver's next acknowledged insert: %s", time.Since(start).Round(time.Millisecond))
	n, err := db.Collection("m").CountDocuments(ctx, bson.D{})
	if err != nil || n != 190 {
		t.Fatalf("count on the new primary: %d, %v; want 190", n, err)
	}
	// dropDatabase through the set: every surviving member is empty.
	if err := db.Drop(ctx); err != nil {
		t.Fatalf("dropDatabase through the set: %v", err)
	}
	for _, m := range ms {
		if m == primary {
			continue
		}
		d := direct(mongoOf[m]).Database("hourglass")
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			names, err := d.ListCollectionNames(ctx, bson.D{})
			if err == nil && len(names) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after dropDatabase: %v %v", m.id, names, err)
			}
		}
	}
}
