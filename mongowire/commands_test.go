package mongowire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/internal/ttltest"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// fixture is one engine served both ways: over the wire protocol to a Go
// driver client, and over the HTTP API, with one TTL monitor behind both.
type fixture struct {
	db   *timeseries.DB
	mon  *ttl.Monitor
	srv  *Server
	http http.Handler
	cl   *mongo.Client
	mdb  *mongo.Database // "test"
}

// newFixture starts a server whose TTL monitor is disabled, so that only
// RunPass deletes. store wraps the engine, if set.
func newFixture(t *testing.T, store func(*timeseries.DB) ttl.Store) *fixture {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var st ttl.Store = db
	if store != nil {
		st = store(db)
	}
	mon, err := ttl.New(ttl.Options{Store: st, Sleep: time.Hour, Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	mon.Start()
	srv, addr := serveDB(t, db, Options{TTL: mon})
	t.Cleanup(mon.Close) // before the engine closes
	h, err := api.New(api.Options{DB: db, TTL: mon, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cl := connect(t, addr, "")
	return &fixture{db: db, mon: mon, srv: srv, http: h, cl: cl, mdb: cl.Database("test")}
}

// run runs a command in db and returns its reply.
func (f *fixture) run(t *testing.T, db string, cmd bson.D) (bson.Raw, error) {
	t.Helper()
	return f.cl.Database(db).RunCommand(context.Background(), cmd).Raw()
}

// must runs a command that must succeed.
func (f *fixture) must(t *testing.T, db string, cmd bson.D) bson.Raw {
	t.Helper()
	r, err := f.run(t, db, cmd)
	if err != nil {
		t.Fatalf("%v: %v", cmd[0].Key, err)
	}
	return r
}

// httpCode runs an HTTP API request and returns its status and MongoDB
// code (0 on success).
func (f *fixture) httpCode(t *testing.T, method, path, body string) (int, int32) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	f.http.ServeHTTP(rec, req)
	if rec.Code < 300 {
		return rec.Code, 0
	}
	var e struct {
		Error struct {
			Code int32 `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == 0 {
		t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
	return rec.Code, e.Error.Code
}

// errCode is the MongoDB code of a command's error (0 for none), and its
// message.
func errCode(err error) (int32, string) {
	if err == nil {
		return 0, ""
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code, ce.Message
	}
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) > 0 {
		return int32(we.WriteErrors[0].Code), we.WriteErrors[0].Message
	}
	return -1, err.Error()
}

func lookupInt(t *testing.T, r bson.Raw, path ...string) int64 {
	t.Helper()
	v, err := r.LookupErr(path...)
	if err != nil {
		t.Fatalf("%v missing in %s", path, r)
	}
	n, ok := v.AsInt64OK()
	if !ok {
		t.Fatalf("%v = %s, not a number", path, v)
	}
	return n
}

// listIndexes returns the indexes of coll as the driver reads them.
func (f *fixture) listIndexes(t *testing.T, coll string) []bson.M {
	t.Helper()
	cur, err := f.mdb.Collection(coll).Indexes().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.M
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) count(t *testing.T, coll string, filter any) int64 {
	t.Helper()
	r := f.must(t, "test", bson.D{{Key: "count", Value: coll}, {Key: "query", Value: filter}})
	return lookupInt(t, r, "n")
}

// TestTTLDocumentationCommands runs the commands of MongoDB's TTL
// documentation through the Go driver and checks that each does what the
// documentation says: the indexes are listed with their TTL, and a TTL
// pass deletes what they expire and nothing else.
func TestTTLDocumentationCommands(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)

	// db.eventlog.createIndex({lastModifiedDate: 1}, {expireAfterSeconds: 3600})
	name, err := f.mdb.Collection("eventlog").Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "lastModifiedDate", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(3600)})
	if err != nil || name != "lastModifiedDate_1" {
		t.Fatalf("createIndex on eventlog = %q, %v", name, err)
	}
	idx := f.listIndexes(t, "eventlog")
	if len(idx) != 2 || idx[1]["name"] != "lastModifiedDate_1" || idx[1]["expireAfterSeconds"] != int32(3600) {
		t.Fatalf("eventlog indexes = %v", idx)
	}
	if _, err := f.mdb.Collection("eventlog").InsertMany(ctx, []any{
		bson.D{{Key: "msg", Value: "old"}, {Key: "lastModifiedDate", Value: now.Add(-2 * time.Hour)}},
		bson.D{{Key: "msg", Value: "new"}, {Key: "lastModifiedDate", Value: now}},
	}); err != nil {
		t.Fatal(err)
	}

	// db.createCollection("weather24h", {timeseries: {...}, expireAfterSeconds: 86400})
	err = f.mdb.CreateCollection(ctx, "weather24h", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("timestamp").SetMetaField("sensor").SetGranularity("hours")).SetExpireAfterSeconds(86400))
	if err != nil {
		t.Fatal(err)
	}
	// db.weather24h.createIndex({timestamp: 1}, {partialFilterExpression: {sensor: {$eq: "40.761873, -73.984287"}}, expireAfterSeconds: 3600})
	const times = "40.761873, -73.984287"
	if _, err := f.mdb.Collection("weather24h").Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "timestamp", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(3600).
			SetPartialFilterExpression(bson.D{{Key: "sensor", Value: bson.D{{Key: "$eq", Value: times}}}})}); err != nil {
		t.Fatal(err)
	}
	idx = f.listIndexes(t, "weather24h")
	if len(idx) != 1 || idx[0]["expireAfterSeconds"] != int32(3600) ||
		fmt.Sprint(idx[0]["partialFilterExpression"]) != `{"sensor":{"$eq":"`+times+`"}}` {
		t.Fatalf("weather24h indexes = %v (%s)", idx, fmt.Sprint(idx[0]["partialFilterExpression"]))
	}
	// The engine behind the HTTP API holds the same rule.
	specs, err := f.db.ListIndexes(ctx, "weather24h")
	if err != nil || len(specs) != 1 || specs[0].ExpireAfterSeconds == nil || *specs[0].ExpireAfterSeconds != 3600 || specs[0].PartialFilterExpression == nil {
		t.Fatalf("the engine lists %+v, %v", specs, err)
	}
	if _, err := f.mdb.Collection("weather24h").InsertMany(ctx, []any{
		// TTL deletes whole buckets, as MongoDB's does: one measurement
		// per series keeps each in a bucket of its own.
		bson.D{{Key: "timestamp", Value: now.Add(-2 * time.Hour)}, {Key: "sensor", Value: times}, {Key: "temp", Value: 12.0}},
		bson.D{{Key: "timestamp", Value: now.Add(-2 * time.Hour)}, {Key: "sensor", Value: "other"}, {Key: "temp", Value: 14.0}},
	}); err != nil {
		t.Fatal(err)
	}

	// db.runCommand({collMod: "tickets", index: {keyPattern: {lastModifiedDate: 1}, expireAfterSeconds: 100}})
	if _, err := f.mdb.Collection("tickets").Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "lastModifiedDate", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(3600)}); err != nil {
		t.Fatal(err)
	}
	r := f.must(t, "test", bson.D{{Key: "collMod", Value: "tickets"}, {Key: "index", Value: bson.D{
		{Key: "keyPattern", Value: bson.D{{Key: "lastModifiedDate", Value: 1}}}, {Key: "expireAfterSeconds", Value: 100}}}})
	if lookupInt(t, r, "expireAfterSeconds_old") != 3600 || lookupInt(t, r, "expireAfterSeconds_new") != 100 {
		t.Fatalf("collMod replied %s", r)
	}
	if _, err := f.mdb.Collection("tickets").InsertMany(ctx, []any{
		bson.D{{Key: "lastModifiedDate", Value: now.Add(-200 * time.Second)}},
		bson.D{{Key: "lastModifiedDate", Value: now.Add(-50 * time.Second)}},
	}); err != nil {
		t.Fatal(err)
	}

	res, err := f.mon.RunPass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.DeletedDocuments != 3 {
		t.Errorf("the TTL pass deleted %d documents, want 3 (eventlog 1, weather24h 1, tickets 1)", res.DeletedDocuments)
	}
	if n := f.count(t, "eventlog", bson.D{{Key: "msg", Value: "new"}}); n != 1 || f.count(t, "eventlog", bson.D{}) != 1 {
		t.Errorf("eventlog keeps %d documents, want the new one", f.count(t, "eventlog", bson.D{}))
	}
	if n := f.count(t, "weather24h", bson.D{}); n != 1 {
		t.Errorf("weather24h keeps %d measurements, want 1 (the other sensor's; the collection keeps a day)", n)
	}
	if n := f.count(t, "weather24h", bson.D{{Key: "temp", Value: 14.0}}); n != 1 {
		t.Errorf("the partial index expired a measurement of another sensor")
	}
	if n := f.count(t, "tickets", bson.D{}); n != 1 {
		t.Errorf("tickets keeps %d documents, want 1", n)
	}

	// db.adminCommand({setParameter: 1, ttlMonitorEnabled: false}), on a
	// monitor first turned on.
	r = f.must(t, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorEnabled", Value: true}})
	if was, ok := r.Lookup("was").BooleanOK(); !ok || was || !f.mon.Enabled() {
		t.Fatalf("setParameter replied %s, want was: false", r)
	}
	r = f.must(t, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorEnabled", Value: false}})
	if was, ok := r.Lookup("was").BooleanOK(); !ok || !was {
		t.Fatalf("setParameter replied %s, want was: true", r)
	}
	if f.mon.Enabled() {
		t.Fatal("the TTL monitor is still enabled")
	}
	r = f.must(t, "admin", bson.D{{Key: "getParameter", Value: 1}, {Key: "ttlMonitorEnabled", Value: 1}})
	if on, ok := r.Lookup("ttlMonitorEnabled").BooleanOK(); !ok || on {
		t.Fatalf("getParameter replied %s", r)
	}
}

// TestCommitQuorumTrap: mongosh sends createIndex's third argument as
// commitQuorum; expireAfterSeconds there is refused with a message saying
// where it belongs, and no index is created.
func TestCommitQuorumTrap(t *testing.T) {
	f := newFixture(t, nil)
	f.must(t, "test", bson.D{{Key: "create", Value: "eventlog"}})
	_, err := f.run(t, "test", bson.D{{Key: "createIndexes", Value: "eventlog"}, {Key: "indexes", Value: bson.A{bson.D{
		{Key: "key", Value: bson.D{{Key: "timestamp", Value: 1}}}, {Key: "name", Value: "timestamp_1"},
		{Key: "partialFilterExpression", Value: bson.D{{Key: "level", Value: "debug"}}}}}},
		{Key: "commitQuorum", Value: bson.D{{Key: "expireAfterSeconds", Value: 3600}}}})
	code, msg := errCode(err)
	if code != 2 || !strings.Contains(msg, "'expireAfterSeconds' was sent as commitQuorum") || !strings.Contains(msg, "second argument") {
		t.Fatalf("createIndexes with commitQuorum {expireAfterSeconds} = %d %q", code, msg)
	}
	if idx := f.listIndexes(t, "eventlog"); len(idx) != 1 {
		t.Fatalf("an index was created: %v", idx)
	}
	// Any other commitQuorum is refused as a standalone MongoDB refuses it.
	_, err = f.run(t, "test", bson.D{{Key: "createIndexes", Value: "eventlog"}, {Key: "indexes", Value: bson.A{bson.D{
		{Key: "key", Value: bson.D{{Key: "timestamp", Value: 1}}}, {Key: "name", Value: "timestamp_1"}}}},
		{Key: "commitQuorum", Value: "majority"}})
	if code, msg := errCode(err); code != 2 || !strings.Contains(msg, "commitQuorum") {
		t.Fatalf("createIndexes with commitQuorum majority = %d %q", code, msg)
	}
}

// TestIndexCommands checks createIndexes' reply and refusals (with the
// codes the HTTP API gives for the same definitions), listIndexes' key
// order, dropIndexes' four forms, and collMod.
func TestIndexCommands(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.must(t, "test", bson.D{{Key: "create", Value: "m"}, {Key: "timeseries", Value: bson.D{
		{Key: "timeField", Value: "ts"}, {Key: "metaField", Value: "sensor"}, {Key: "granularity", Value: "seconds"}}}})

	create := func(coll string, spec bson.D, extra ...bson.E) (bson.Raw, error) {
		return f.run(t, "test", append(bson.D{{Key: "createIndexes", Value: coll}, {Key: "indexes", Value: bson.A{spec}}}, extra...))
	}
	r, err := create("plain", bson.D{{Key: "key", Value: bson.D{{Key: "b", Value: 1}, {Key: "a", Value: -1}}}, {Key: "name", Value: "b_a"}})
	if err != nil {
		t.Fatal(err)
	}
	if lookupInt(t, r, "numIndexesBefore") != 1 || lookupInt(t, r, "numIndexesAfter") != 2 || !r.Lookup("createdCollectionAutomatically").Boolean() {
		t.Fatalf("createIndexes on a new collection replied %s", r)
	}
	r, err = create("plain", bson.D{{Key: "key", Value: bson.D{{Key: "b", Value: 1}, {Key: "a", Value: -1}}}, {Key: "name", Value: "b_a"}})
	if err != nil || lookupInt(t, r, "numIndexesAfter") != 2 || r.Lookup("note").StringValue() != "all indexes already exist" ||
		r.Lookup("createdCollectionAutomatically").Boolean() {
		t.Fatalf("createIndexes again replied %s, %v", r, err)
	}
	raw := f.must(t, "test", bson.D{{Key: "listIndexes", Value: "plain"}})
	first, _ := raw.Lookup("cursor", "firstBatch").Array().Values()
	if len(first) != 2 || first[1].Document().Lookup("key").String() != `{"b": {"$numberInt":"1"},"a": {"$numberInt":"-1"}}` ||
		first[1].Document().Lookup("v").Int32() != 2 {
		t.Fatalf("listIndexes = %s", raw)
	}

	// Refusals: the code the HTTP API gives for the same index.
	for _, c := range []struct {
		what string
		spec bson.D
		json string
		want int32
	}{
		{"compound TTL", bson.D{{Key: "key", Value: bson.D{{Key: "ts", Value: 1}, {Key: "x", Value: 1}}}, {Key: "expireAfterSeconds", Value: 60}},
			`{"key": {"ts": 1, "x": 1}, "expireAfterSeconds": 60}`, 67},
		{"negative TTL", bson.D{{Key: "key", Value: bson.D{{Key: "ts", Value: 1}}}, {Key: "expireAfterSeconds", Value: -1}},
			`{"key": {"ts": 1}, "expireAfterSeconds": -1}`, 67},
		{"text index", bson.D{{Key: "key", Value: bson.D{{Key: "msg", Value: "text"}}}},
			`{"key": {"msg": "text"}}`, 67},
		{"unknown option", bson.D{{Key: "key", Value: bson.D{{Key: "ts", Value: 1}}}, {Key: "unique", Value: true}},
			`{"key": {"ts": 1}, "unique": true}`, 67},
		{"TTL on a measurement field", bson.D{{Key: "key", Value: bson.D{{Key: "temp", Value: 1}}}, {Key: "expireAfterSeconds", Value: 60}},
			`{"key": {"temp": 1}, "expireAfterSeconds": 60}`, 0},
		{"bad partial filter", bson.D{{Key: "key", Value: bson.D{{Key: "ts", Value: 1}}}, {Key: "partialFilterExpression", Value: bson.D{{Key: "$where", Value: "1"}}}},
			`{"key": {"ts": 1}, "partialFilterExpression": {"$where": "1"}}`, 67},
	} {
		_, err := create("m", c.spec)
		code, msg := errCode(err)
		_, httpCode := f.httpCode(t, "POST", "/v1/collections/m/indexes", c.json)
		if code == 0 || code != httpCode || (c.want != 0 && code != c.want) {
			t.Errorf("%s: wire code %d (%s), HTTP code %d, want %d", c.what, code, msg, httpCode, c.want)
		}
	}

	// dropIndexes: by name, key pattern, list, "*".
	for _, n := range []string{"x", "y", "z"} {
		if _, err := create("plain", bson.D{{Key: "key", Value: bson.D{{Key: n, Value: 1}}}, {Key: "name", Value: n + "_1"}}); err != nil {
			t.Fatal(err)
		}
	}
	r = f.must(t, "test", bson.D{{Key: "dropIndexes", Value: "plain"}, {Key: "index", Value: "x_1"}})
	if lookupInt(t, r, "nIndexesWas") != 5 {
		t.Fatalf("dropIndexes by name replied %s", r)
	}
	f.must(t, "test", bson.D{{Key: "dropIndexes", Value: "plain"}, {Key: "index", Value: bson.D{{Key: "y", Value: 1}}}})
	_, err = f.run(t, "test", bson.D{{Key: "dropIndexes", Value: "plain"}, {Key: "index", Value: bson.A{"z_1", "nope"}}})
	if code, _ := errCode(err); code != 27 || len(f.listIndexes(t, "plain")) != 3 {
		t.Fatalf("dropIndexes of a missing name = %d, %d indexes left (want 27, 3)", code, len(f.listIndexes(t, "plain")))
	}
	f.must(t, "test", bson.D{{Key: "dropIndexes", Value: "plain"}, {Key: "index", Value: bson.A{"z_1"}}})
	f.must(t, "test", bson.D{{Key: "dropIndexes", Value: "plain"}, {Key: "index", Value: "*"}})
	if idx := f.listIndexes(t, "plain"); len(idx) != 1 || idx[0]["name"] != "_id_" {
		t.Fatalf(`after dropIndexes "*": %v`, idx)
	}
	// Two indexes on one key with different partial filters: by key is
	// ambiguous.
	for _, s := range []string{"a", "b"} {
		if _, err := create("m", bson.D{{Key: "key", Value: bson.D{{Key: "ts", Value: 1}}}, {Key: "name", Value: "ts_" + s},
			{Key: "expireAfterSeconds", Value: 60}, {Key: "partialFilterExpression", Value: bson.D{{Key: "sensor", Value: s}}}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = f.run(t, "test", bson.D{{Key: "dropIndexes", Value: "m"}, {Key: "index", Value: bson.D{{Key: "ts", Value: 1}}}})
	if code, _ := errCode(err); code != 181 {
		t.Fatalf("dropIndexes by an ambiguous key = %v", err)
	}

	// collMod: an index by name, the collection's TTL, "off", bucketing.
	r = f.must(t, "test", bson.D{{Key: "collMod", Value: "m"}, {Key: "index", Value: bson.D{{Key: "name", Value: "ts_b"}, {Key: "expireAfterSeconds", Value: 120}}}})
	if lookupInt(t, r, "expireAfterSeconds_old") != 60 || lookupInt(t, r, "expireAfterSeconds_new") != 120 {
		t.Fatalf("collMod index replied %s", r)
	}
	r = f.must(t, "test", bson.D{{Key: "collMod", Value: "m"}, {Key: "expireAfterSeconds", Value: 3600}})
	if r.Lookup("expireAfterSeconds_old").StringValue() != "off" || lookupInt(t, r, "expireAfterSeconds_new") != 3600 {
		t.Fatalf("collMod expireAfterSeconds replied %s", r)
	}
	r = f.must(t, "test", bson.D{{Key: "collMod", Value: "m"}, {Key: "expireAfterSeconds", Value: "off"}})
	if lookupInt(t, r, "expireAfterSeconds_old") != 3600 || r.Lookup("expireAfterSeconds_new").StringValue() != "off" {
		t.Fatalf("collMod off replied %s", r)
	}
	f.must(t, "test", bson.D{{Key: "collMod", Value: "m"}, {Key: "timeseries", Value: bson.D{{Key: "granularity", Value: "minutes"}}}})
	info, err := f.db.DescribeShallow(ctx, "m")
	if err != nil || info.Options.TimeSeries.Granularity != "minutes" {
		t.Fatalf("granularity after collMod: %+v %v", info.Options.TimeSeries, err)
	}
	// Refusals match the HTTP API's PATCH.
	for _, c := range []struct {
		cmd  bson.D
		json string
	}{
		{bson.D{{Key: "index", Value: bson.D{{Key: "name", Value: "ts_a"}, {Key: "hidden", Value: true}}}}, `{"index": {"name": "ts_a", "hidden": true}}`},
		{bson.D{{Key: "index", Value: bson.D{{Key: "name", Value: "nope"}, {Key: "expireAfterSeconds", Value: 1}}}}, `{"index": {"name": "nope", "expireAfterSeconds": 1}}`},
		{bson.D{{Key: "timeseries", Value: bson.D{{Key: "granularity", Value: "seconds"}}}}, `{"timeseries": {"granularity": "seconds"}}`},
		{bson.D{{Key: "validator", Value: bson.D{}}}, `{"validator": {}}`},
	} {
		_, err := f.run(t, "test", append(bson.D{{Key: "collMod", Value: "m"}}, c.cmd...))
		code, msg := errCode(err)
		_, httpCode := f.httpCode(t, "PATCH", "/v1/collections/m", c.json)
		if code == 0 || code != httpCode {
			t.Errorf("collMod %v: wire %d (%s), HTTP %d", c.cmd, code, msg, httpCode)
		}
	}
}

// TestDropDatabase: dropDatabase empties the server only in the database
// listDatabases reports.
func TestDropDatabase(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []string{"a", "b"} {
		f.must(t, "test", bson.D{{Key: "create", Value: c}})
	}
	if _, err := f.run(t, "test", bson.D{{Key: "dropDatabase", Value: 1}}); err == nil {
		t.Fatal("dropDatabase in 'test' dropped the server's collections")
	} else if code, _ := errCode(err); code != 20 {
		t.Fatalf("dropDatabase in 'test': %v", err)
	}
	if _, err := f.run(t, "admin", bson.D{{Key: "dropDatabase", Value: 1}}); err == nil {
		t.Fatal("dropDatabase in 'admin' succeeded")
	}
	r := f.must(t, DatabaseName, bson.D{{Key: "dropDatabase", Value: 1}})
	if r.Lookup("dropped").StringValue() != DatabaseName {
		t.Fatalf("dropDatabase replied %s", r)
	}
	infos, err := f.db.ListCollections(context.Background())
	if err != nil || len(infos) != 0 {
		t.Fatalf("after dropDatabase the engine lists %d collections, %v", len(infos), err)
	}
}

// TestServerAdmin checks getParameter, setParameter, serverStatus and
// currentOp, against the TTL monitor the HTTP API serves.
func TestServerAdmin(t *testing.T) {
	var bs *ttltest.BlockingStore
	f := newFixture(t, func(db *timeseries.DB) ttl.Store {
		bs = ttltest.NewBlockingStore(db)
		return bs
	})
	ctx := context.Background()

	// mongosh asks for featureCompatibilityVersion when it connects.
	r := f.must(t, "admin", bson.D{{Key: "getParameter", Value: 1}, {Key: "featureCompatibilityVersion", Value: 1}})
	if v := r.Lookup("featureCompatibilityVersion", "version").StringValue(); v != "7.0" {
		t.Fatalf("getParameter featureCompatibilityVersion = %s", r)
	}
	r = f.must(t, "admin", bson.D{{Key: "getParameter", Value: "*"}})
	if lookupInt(t, r, "ttlMonitorSleepSecs") != 3600 || r.Lookup("ttlMonitorEnabled").Boolean() {
		t.Fatalf("getParameter '*' = %s", r)
	}
	r = f.must(t, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: 5}})
	if lookupInt(t, r, "was") != 3600 || f.mon.Sleep() != 5*time.Second {
		t.Fatalf("setParameter ttlMonitorSleepSecs replied %s; the monitor sleeps %v", r, f.mon.Sleep())
	}
	for _, c := range []struct {
		db   string
		cmd  bson.D
		code int32
	}{
		{"test", bson.D{{Key: "getParameter", Value: 1}, {Key: "ttlMonitorEnabled", Value: 1}}, 13},
		{"admin", bson.D{{Key: "getParameter", Value: 1}, {Key: "nope", Value: 1}}, 72},
		{"admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "nope", Value: 1}}, 72},
		{"admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: 0}}, 2},
		{"admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorEnabled", Value: "no"}}, 2},
	} {
		if _, err := f.run(t, c.db, c.cmd); func() bool { code, _ := errCode(err); return code != c.code }() {
			t.Errorf("%s %v: %v, want code %d", c.db, c.cmd, err, c.code)
		}
	}

	// A TTL batch in progress is in currentOp as MongoDB shows the TTL
	// monitor's delete, and so is the currentOp command itself.
	f.must(t, "test", bson.D{{Key: "create", Value: "logs"}})
	if _, err := f.mdb.Collection("logs").Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(60)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.mdb.Collection("logs").InsertOne(ctx, bson.D{{Key: "at", Value: time.Now().Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	passed := make(chan error, 1)
	go func() { _, err := f.mon.RunPass(ctx); passed <- err }()
	<-bs.Entered
	r = f.must(t, "admin", bson.D{{Key: "currentOp", Value: 1}})
	close(bs.Release)
	if err := <-passed; err != nil {
		t.Fatal(err)
	}
	ops, _ := r.Lookup("inprog").Array().Values()
	var sawTTL, sawSelf bool
	for _, o := range ops {
		d := o.Document()
		switch {
		case d.Lookup("desc").StringValue() == "TTLMonitor":
			sawTTL = d.Lookup("op").StringValue() == "remove" && d.Lookup("ns").StringValue() == DatabaseName+".logs" && d.Lookup("active").Boolean()
		case d.Lookup("command", "currentOp").Type != 0:
			sawSelf = d.Lookup("op").StringValue() == "command" && d.Lookup("ns").StringValue() == "admin.$cmd" && d.Lookup("client").StringValue() != ""
		}
	}
	if !sawTTL || !sawSelf {
		t.Fatalf("currentOp = %s; want the TTL batch and the command itself", r)
	}
	// A filter selects entries.
	r = f.must(t, "admin", bson.D{{Key: "currentOp", Value: 1}, {Key: "desc", Value: "TTLMonitor"}})
	if ops, _ := r.Lookup("inprog").Array().Values(); len(ops) != 0 {
		t.Fatalf("currentOp {desc: TTLMonitor} after the pass = %s", r)
	}

	// serverStatus: the monitor's counters, connections, memory, cursors.
	for i := 0; i < 3; i++ {
		if _, err := f.mdb.Collection("logs").InsertOne(ctx, bson.D{{Key: "i", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := f.mdb.Collection("logs").Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	r = f.must(t, "admin", bson.D{{Key: "serverStatus", Value: 1}})
	st := f.mon.Stats()
	if lookupInt(t, r, "metrics", "ttl", "passes") != st.Passes || lookupInt(t, r, "metrics", "ttl", "deletedDocuments") != 1 ||
		lookupInt(t, r, "metrics", "ttl", "subPasses") != st.SubPasses {
		t.Errorf("serverStatus metrics.ttl = %s, the monitor counts %+v", r.Lookup("metrics", "ttl"), st)
	}
	if lookupInt(t, r, "connections", "current") < 1 || lookupInt(t, r, "connections", "available") < 1 ||
		lookupInt(t, r, "connections", "totalCreated") < 1 {
		t.Errorf("serverStatus connections = %s", r.Lookup("connections"))
	}
	if lookupInt(t, r, "mem", "resident") < 1 || lookupInt(t, r, "mem", "virtual") < 1 {
		t.Errorf("serverStatus mem = %s", r.Lookup("mem"))
	}
	if lookupInt(t, r, "metrics", "cursor", "open", "total") != 1 || lookupInt(t, r, "pid") < 1 ||
		r.Lookup("process").StringValue() != "hourglass" || r.Lookup("host").StringValue() == "" || lookupInt(t, r, "opcounters", "insert") != 4 {
		t.Errorf("serverStatus = %s", r)
	}
	if _, ok := r.Lookup("localTime").TimeOK(); !ok {
		t.Errorf("serverStatus localTime = %s", r.Lookup("localTime"))
	}
	if _, ok := r.Lookup("uptime").AsFloat64OK(); !ok {
		t.Errorf("serverStatus uptime = %s", r.Lookup("uptime"))
	}
}

// TestQueryAndWriteCommands checks count, distinct, delete and update on a
// time-series and a plain collection, their refusals against the HTTP
// API's for the same request, and the results against the engine.
func TestQueryAndWriteCommands(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.must(t, "test", bson.D{{Key: "create", Value: "m"}, {Key: "timeseries", Value: bson.D{
		{Key: "timeField", Value: "ts"}, {Key: "metaField", Value: "sensor"}}}})
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	var docs []any
	for i := 0; i < 60; i++ {
		docs = append(docs, bson.D{{Key: "ts", Value: t0.Add(time.Duration(i) * time.Second)},
			{Key: "sensor", Value: bson.D{{Key: "site", Value: []string{"north", "south", "east"}[i%3]}, {Key: "id", Value: int32(i % 6)}}},
			{Key: "temp", Value: float64(i)}})
	}
	if _, err := f.mdb.Collection("m").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	count := func(coll string, extra ...bson.E) int64 {
		t.Helper()
		return lookupInt(t, f.must(t, "test", append(bson.D{{Key: "count", Value: coll}}, extra...)), "n")
	}
	north := bson.D{{Key: "sensor.site", Value: "north"}}
	if n := count("m"); n != 60 {
		t.Errorf("count = %d, want 60", n)
	}
	if n := count("m", bson.E{Key: "query", Value: north}); n != 20 {
		t.Errorf("count north = %d, want 20", n)
	}
	if n := count("m", bson.E{Key: "query", Value: north}, bson.E{Key: "skip", Value: 15}, bson.E{Key: "limit", Value: 10}); n != 5 {
		t.Errorf("count north skip 15 limit 10 = %d, want 5", n)
	}
	if n := count("m", bson.E{Key: "query", Value: bson.D{{Key: "temp", Value: bson.D{{Key: "$gte", Value: 50}}}}}, bson.E{Key: "limit", Value: 4}); n != 4 {
		t.Errorf("count temp >= 50 limit 4 = %d, want 4", n)
	}
	if n := count("missing"); n != 0 {
		t.Errorf("count of a missing collection = %d", n)
	}

	distinct := func(coll, key string, filter any) string {
		t.Helper()
		r := f.must(t, "test", bson.D{{Key: "distinct", Value: coll}, {Key: "key", Value: key}, {Key: "query", Value: filter}})
		return r.Lookup("values").String()
	}
	if got := distinct("m", "sensor.site", bson.D{}); got != `["east","north","south"]` {
		t.Errorf("distinct sensor.site = %s", got)
	}
	if got := distinct("m", "sensor.id", north); got != `[{"$numberInt":"0"},{"$numberInt":"3"}]` { // written as int32, read back so
		t.Errorf("distinct sensor.id of north = %s", got)
	}
	if got := distinct("m", "sensor", bson.D{{Key: "sensor.id", Value: 1}}); got != `[{"id": {"$numberInt":"1"},"site": "south"}]` {
		t.Errorf("distinct sensor where id 1 = %s", got)
	}
	if got := distinct("missing", "sensor", bson.D{}); got != `[]` {
		t.Errorf("distinct of a missing collection = %s, want no values", got)
	}

	// delete on a time-series collection: by series and time range.
	del := func(coll string, ordered bool, stmts ...bson.D) (bson.Raw, error) {
		arr := bson.A{}
		for _, s := range stmts {
			arr = append(arr, s)
		}
		return f.run(t, "test", bson.D{{Key: "delete", Value: coll}, {Key: "deletes", Value: arr}, {Key: "ordered", Value: ordered}})
	}
	r, err := del("m", true, bson.D{{Key: "q", Value: bson.D{{Key: "sensor.site", Value: "east"}, {Key: "ts", Value: bson.D{{Key: "$lt", Value: t0.Add(30 * time.Second)}}}}}, {Key: "limit", Value: 0}})
	if err != nil || lookupInt(t, r, "n") != 10 {
		t.Fatalf("delete east before 30 s = %s, %v; want n 10", r, err)
	}
	if n := count("m"); n != 50 {
		t.Fatalf("after the delete count = %d, want 50", n)
	}
	// Any filter, through the driver: deleteMany by a measurement field,
	// alone and with the metaField, removes the measurements it matches.
	dr, err := f.mdb.Collection("m").DeleteMany(ctx, bson.D{{Key: "temp", Value: bson.D{{Key: "$gte", Value: 55}}}})
	if err != nil || dr.DeletedCount != 5 {
		t.Fatalf("deleteMany temp >= 55 = %+v, %v; want 5", dr, err)
	}
	dr, err = f.mdb.Collection("m").DeleteMany(ctx, bson.D{{Key: "sensor.site", Value: "north"}, {Key: "temp", Value: bson.D{{Key: "$lt", Value: 10}}}})
	if err != nil || dr.DeletedCount != 4 {
		t.Fatalf("deleteMany north with temp < 10 = %+v, %v; want 4", dr, err)
	}
	if n := count("m"); n != 41 {
		t.Fatalf("after the deletes by field count = %d, want 41", n)
	}
	if n := count("m", bson.E{Key: "query", Value: bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "temp", Value: bson.D{{Key: "$gte", Value: 55}}}},
		bson.D{{Key: "sensor.site", Value: "north"}, {Key: "temp", Value: bson.D{{Key: "$lt", Value: 10}}}}}}}}); n != 0 {
		t.Fatalf("%d deleted measurements still found", n)
	}
	// Refusals come in writeErrors with the HTTP API's codes; unordered,
	// the next statement still runs. A refused filter deletes nothing.
	_, httpDel := f.httpCode(t, "POST", "/v1/collections/m/delete", `{"filter": {"temp": {"$bogus": 5}}}`)
	r, err = del("m", false,
		bson.D{{Key: "q", Value: bson.D{{Key: "temp", Value: bson.D{{Key: "$bogus", Value: 5}}}}}, {Key: "limit", Value: 0}},
		bson.D{{Key: "q", Value: north}, {Key: "limit", Value: 1}},
		bson.D{{Key: "q", Value: bson.D{{Key: "sensor.site", Value: "south"}}}, {Key: "limit", Value: 0}})
	var we mongo.WriteException
	if !errors.As(err, &we) || len(r) == 0 {
		t.Fatalf("an unordered delete with refused statements = %s, %v", r, err)
	}
	wes, _ := r.Lookup("writeErrors").Array().Values()
	if lookupInt(t, r, "n") != 18 || len(wes) != 2 || httpDel != 2 || lookupInt(t, wes[0].Document(), "code") != int64(httpDel) ||
		lookupInt(t, wes[1].Document(), "index") != 1 || lookupInt(t, wes[1].Document(), "code") != 20 {
		t.Fatalf("unordered delete = %s; HTTP code for the measurement filter %d", r, httpDel)
	}
	// On a time-series collection, updateMany changes the metaField, as
	// MongoDB allows: the measurements of the series it selects move to
	// the new meta value; counts are of measurements.
	northBefore := count("m", bson.E{Key: "query", Value: north})
	ur, err := f.mdb.Collection("m").UpdateMany(ctx, north, bson.D{{Key: "$set", Value: bson.D{{Key: "sensor.site", Value: "west"}}}})
	if err != nil || ur.MatchedCount != northBefore || ur.ModifiedCount != northBefore {
		t.Fatalf("updateMany of sensor.site north = %+v, %v; want %d matched and modified", ur, err, northBefore)
	}
	if n := count("m", bson.E{Key: "query", Value: bson.D{{Key: "sensor.site", Value: "west"}}}); n != northBefore || count("m", bson.E{Key: "query", Value: north}) != 0 {
		t.Fatalf("after the update: %d west, want %d, and no north", n, northBefore)
	}
	ur, err = f.mdb.Collection("m").UpdateMany(ctx, bson.D{{Key: "sensor.site", Value: "west"}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "sensor.id", Value: ""}}}})
	if err != nil || ur.MatchedCount != northBefore || ur.ModifiedCount != northBefore {
		t.Fatalf("updateMany $unset sensor.id = %+v, %v", ur, err)
	}
	if got := distinct("m", "sensor", bson.D{{Key: "sensor.site", Value: "west"}}); got != `[{"site": "west"}]` {
		t.Fatalf("west's meta values after $unset of sensor.id = %s", got)
	}
	// Other updates are refused with MongoDB's InvalidOptions (72), over
	// HTTP too, and change nothing.
	_, httpUpd := f.httpCode(t, "POST", "/v1/collections/m/update", `{"filter": {"sensor.site": "west"}, "update": {"$set": {"temp": 1}}, "multi": true}`)
	for _, u := range []struct {
		filter, update bson.D
	}{
		{bson.D{{Key: "sensor.site", Value: "west"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "temp", Value: 1}}}}},
		{bson.D{{Key: "temp", Value: bson.D{{Key: "$gt", Value: 5}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "sensor.x", Value: 1}}}}},
	} {
		_, err = f.mdb.Collection("m").UpdateMany(ctx, u.filter, u.update)
		if code, _ := errCode(err); code != 72 || code != httpUpd {
			t.Fatalf("update %v %v on a time-series collection: %v (HTTP code %d)", u.filter, u.update, err, httpUpd)
		}
	}
	_, err = f.mdb.Collection("m").UpdateOne(ctx, bson.D{{Key: "sensor.site", Value: "west"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "sensor.x", Value: 1}}}})
	if code, _ := errCode(err); code != 72 {
		t.Fatalf("updateOne on a time-series collection: %v, want 72", err)
	}
	if n := count("m", bson.E{Key: "query", Value: bson.D{{Key: "sensor.site", Value: "west"}}}); n != northBefore {
		t.Fatalf("refused updates changed west: %d, want %d", n, northBefore)
	}
	ur, err = f.mdb.Collection("m").UpdateMany(ctx, bson.D{{Key: "sensor.site", Value: "west"}}, bson.D{{Key: "$rename", Value: bson.D{{Key: "sensor.site", Value: "sensor.region"}}}})
	if err != nil || ur.MatchedCount != northBefore || ur.ModifiedCount != northBefore {
		t.Fatalf("updateMany $rename sensor.site = %+v, %v", ur, err)
	}
	if n := count("m", bson.E{Key: "query", Value: bson.D{{Key: "sensor.region", Value: "west"}}}); n != northBefore {
		t.Fatalf("after $rename: %d measurements of region west, want %d", n, northBefore)
	}

	// A plain collection.
	c := f.mdb.Collection("p")
	if _, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "tags", Value: bson.A{"a", "b"}}, {Key: "n", Value: 1}, {Key: "o", Value: bson.D{{Key: "k", Value: "x"}}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "tags", Value: bson.A{"b", "c"}}, {Key: "n", Value: 2}, {Key: "o", Value: bson.D{{Key: "k", Value: "y"}}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "tags", Value: "d"}, {Key: "n", Value: 2.0}},
		bson.D{{Key: "_id", Value: 4}, {Key: "n", Value: 3}},
	}); err != nil {
		t.Fatal(err)
	}
	if got := distinct("p", "tags", bson.D{}); got != `["a","b","c","d"]` {
		t.Errorf("distinct tags = %s", got)
	}
	// Written as int32 by the driver, read back as int32.
	if got := distinct("p", "n", bson.D{}); got != `[{"$numberInt":"1"},{"$numberInt":"2"},{"$numberInt":"3"}]` {
		t.Errorf("distinct n (2 and 2.0 are one value) = %s", got)
	}
	if got := distinct("p", "o.k", bson.D{{Key: "n", Value: bson.D{{Key: "$lt", Value: 2}}}}); got != `["x"]` {
		t.Errorf("distinct o.k of n < 2 = %s", got)
	}
	// An array of arrays gives its arrays: MongoDB counts [1, [1]] as 1
	// and [1].
	if _, err := f.mdb.Collection("nested").InsertOne(ctx, bson.D{{Key: "tags", Value: bson.A{bson.A{"a"}, "e", "a"}}}); err != nil {
		t.Fatal(err)
	}
	if got := distinct("nested", "tags", bson.D{}); got != `["a","e",["a"]]` {
		t.Errorf("distinct of an array holding an array = %s", got)
	}
	if n := count("p", bson.E{Key: "query", Value: bson.D{{Key: "n", Value: 2}}}); n != 2 {
		t.Errorf("count n 2 = %d", n)
	}

	res, err := c.UpdateOne(ctx, bson.D{{Key: "n", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}})
	if err != nil || res.MatchedCount != 1 || res.ModifiedCount != 1 {
		t.Fatalf("updateOne = %+v, %v", res, err)
	}
	res, err = c.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "seen", Value: true}}}, {Key: "$unset", Value: bson.D{{Key: "o", Value: ""}}}})
	if err != nil || res.MatchedCount != 4 || res.ModifiedCount != 4 {
		t.Fatalf("updateMany = %+v, %v", res, err)
	}
	res, err = c.UpdateMany(ctx, bson.D{{Key: "seen", Value: true}}, bson.D{{Key: "$set", Value: bson.D{{Key: "seen", Value: true}}}})
	if err != nil || res.MatchedCount != 4 || res.ModifiedCount != 0 {
		t.Fatalf("updateMany changing nothing = %+v, %v", res, err)
	}
	res, err = c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "r", Value: "replaced"}})
	if err != nil || res.MatchedCount != 1 {
		t.Fatalf("replaceOne = %+v, %v", res, err)
	}
	var got bson.M
	if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: 4}}).Decode(&got); err != nil || got["r"] != "replaced" || got["n"] != nil {
		t.Fatalf("the replaced document = %v, %v", got, err)
	}
	_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 9}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	if code, msg := errCode(err); code != 20 || !strings.Contains(msg, "upsert") {
		t.Fatalf("upsert: %v", err)
	}
	_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "_id", Value: 5}}}})
	_, httpImm := f.httpCode(t, "POST", "/v1/collections/p/update", `{"filter": {"_id": 1}, "update": {"$set": {"_id": 5}}}`)
	if code, _ := errCode(err); code == 0 || code != httpImm {
		t.Fatalf("$set of _id: %v, HTTP code %d", err, httpImm)
	}
	// The engine behind the HTTP API sees the updates.
	var sum float64
	if _, err := timeseries.EachDoc(f.db.Find(ctx, "p", timeseries.FindOptions{}))(func(d map[string]any) error {
		if n, ok := d["n"].(int32); ok {
			sum += float64(n)
		} else if n, ok := d["n"].(float64); ok {
			sum += n
		}
		return nil
	}); err != nil || sum != 1+12+2 {
		t.Fatalf("the engine sums n to %v, want 15 (%v)", sum, err)
	}

	dr, err = c.DeleteOne(ctx, bson.D{{Key: "seen", Value: true}})
	if err != nil || dr.DeletedCount != 1 {
		t.Fatalf("deleteOne = %+v, %v", dr, err)
	}
	if n := count("p", bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 1}}}); n != 0 {
		t.Fatalf("deleteOne did not delete the first document in _id order")
	}
	dr, err = c.DeleteMany(ctx, bson.D{})
	if err != nil || dr.DeletedCount != 3 || count("p") != 0 {
		t.Fatalf("deleteMany {} = %+v, %v", dr, err)
	}
}

// TestListCollectionsBucketSeconds checks that listCollections reports a
// time-series collection's bucketing in seconds, as create takes it.
func TestListCollectionsBucketSeconds(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	err := f.mdb.CreateCollection(ctx, "custom", options.CreateCollection().SetTimeSeriesOptions(options.TimeSeries().
		SetTimeField("ts").SetBucketMaxSpan(7200*time.Second).SetBucketRounding(7200*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.mdb.CreateCollection(ctx, "hours", options.CreateCollection().SetTimeSeriesOptions(options.TimeSeries().
		SetTimeField("ts").SetGranularity("hours"))); err != nil {
		t.Fatal(err)
	}
	specs, err := f.mdb.ListCollectionSpecifications(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"custom": 7200, "hours": 30 * 24 * 3600}
	for _, s := range specs {
		ts := s.Options.Lookup("timeseries")
		span, _ := ts.Document().Lookup("bucketMaxSpanSeconds").AsInt64OK()
		if span != want[s.Name] {
			t.Errorf("%s: bucketMaxSpanSeconds %d, want %d", s.Name, span, want[s.Name])
		}
		if s.Name == "custom" {
			if r, _ := ts.Document().Lookup("bucketRoundingSeconds").AsInt64OK(); r != 7200 {
				t.Errorf("custom: bucketRoundingSeconds %d, want 7200", r)
			}
		}
	}
	if len(specs) != 2 {
		t.Errorf("%d collections listed, want 2", len(specs))
	}
}

// The archive option over the wire protocol: on create, collMod and
// createIndexes, shown by listIndexes, refused as the HTTP API refuses it.
func TestArchiveOptionCommands(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.must(t, "test", bson.D{{Key: "create", Value: "w"}, {Key: "timeseries", Value: bson.D{
		{Key: "timeField", Value: "ts"}, {Key: "metaField", Value: "sensor"}}}, {Key: "expireAfterSeconds", Value: 60}, {Key: "archive", Value: true}})
	info, err := f.db.DescribeShallow(ctx, "w")
	if err != nil || !info.Options.Archive {
		t.Fatalf("after create: %+v %v", info.Options, err)
	}
	f.must(t, "test", bson.D{{Key: "collMod", Value: "w"}, {Key: "archive", Value: false}})
	if info, _ := f.db.DescribeShallow(ctx, "w"); info.Options.Archive {
		t.Fatal("collMod archive: false left it on")
	}
	f.must(t, "test", bson.D{{Key: "createIndexes", Value: "w"}, {Key: "indexes", Value: bson.A{bson.D{
		{Key: "key", Value: bson.D{{Key: "ts", Value: 1}}}, {Key: "name", Value: "north"}, {Key: "expireAfterSeconds", Value: 10},
		{Key: "partialFilterExpression", Value: bson.D{{Key: "sensor", Value: "north"}}}, {Key: "archive", Value: true}}}}})
	raw := f.must(t, "test", bson.D{{Key: "listIndexes", Value: "w"}})
	if !strings.Contains(raw.String(), `"name": "north","expireAfterSeconds": {"$numberInt":"10"},"partialFilterExpression": {"sensor": "north"},"archive": true`) {
		t.Fatalf("listIndexes = %s", raw)
	}
	for _, c := range []struct {
		cmd  bson.D
		json string
	}{
		{bson.D{{Key: "archive", Value: "yes"}}, `{"archive": "yes"}`},
		{bson.D{{Key: "expireAfterSeconds", Value: "off"}, {Key: "archive", Value: true}}, `{"expireAfterSeconds": "off", "archive": true}`},
	} {
		_, err := f.run(t, "test", append(bson.D{{Key: "collMod", Value: "w"}}, c.cmd...))
		code, msg := errCode(err)
		_, httpCode := f.httpCode(t, "PATCH", "/v1/collections/w", c.json)
		if code == 0 || code != httpCode {
			t.Errorf("collMod %v: wire %d (%s), HTTP %d", c.cmd, code, msg, httpCode)
		}
	}
}
