package mongowire

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// The cases of MongoDB's jstests on create, collMod, createIndexes and
// dropIndexes that name an error code (jstests/core/timeseries/
// timeseries_create_collection.js and its bucketing parameters' version,
// jstests/core/ddl/collmod_convert_to_ttl.js,
// jstests/core/index/ttl/ttl_index_options.js), run through the Go driver
// and, where the HTTP API has the operation, through it too: each must
// answer MongoDB's code and change nothing.

// tsOpts is a create command's timeseries option from its fields.
func tsOpts(fields ...bson.E) bson.D { return bson.D(fields) }

func e(k string, v any) bson.E { return bson.E{Key: k, Value: v} }

// TestCreateCodes: create refuses what MongoDB's create refuses, with its
// code, over the wire and over HTTP, and creates nothing; what it accepts
// (a granularity with its own bucket span and rounding) it accepts again
// as the same collection.
func TestCreateCodes(t *testing.T) {
	f := newFixture(t, nil)
	for i, c := range []struct {
		what string
		opts bson.D // the create command's options
		json string // the same as PUT /v1/collections/{name}'s body
		want int32  // 0: accepted
	}{
		{"timeseries not a document", bson.D{e("timeseries", "")}, `{"timeseries": ""}`, 14},
		{"a timeField not a string", bson.D{e("timeseries", tsOpts(e("timeField", 100)))}, `{"timeseries": {"timeField": 100}}`, 14},
		{"a metaField not a string", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("metaField", 100)))},
			`{"timeseries": {"timeField": "time", "metaField": 100}}`, 14},
		{"an unknown timeseries option", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("invalidOption", bson.D{})))},
			`{"timeseries": {"timeField": "time", "invalidOption": {}}}`, 40415},
		{"a timeField with a dot", bson.D{e("timeseries", tsOpts(e("timeField", "sub.time")))}, `{"timeseries": {"timeField": "sub.time"}}`, 72},
		{"a metaField with a dot", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("metaField", "sub.meta")))},
			`{"timeseries": {"timeField": "time", "metaField": "sub.meta"}}`, 72},
		{"the metaField as the timeField", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("metaField", "time")))},
			`{"timeseries": {"timeField": "time", "metaField": "time"}}`, 72},
		{"a span without rounding", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("metaField", "meta"), e("bucketMaxSpanSeconds", 10)))},
			`{"timeseries": {"timeField": "time", "metaField": "meta", "bucketMaxSpanSeconds": 10}}`, 72},
		{"a span of 3600 without rounding", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("bucketMaxSpanSeconds", 3600)))},
			`{"timeseries": {"timeField": "time", "bucketMaxSpanSeconds": 3600}}`, 72},
		{"rounding without a span", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("bucketRoundingSeconds", 4000)))},
			`{"timeseries": {"timeField": "time", "bucketRoundingSeconds": 4000}}`, 72},
		{"rounding other than the span", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("bucketRoundingSeconds", 100), e("bucketMaxSpanSeconds", 50)))},
			`{"timeseries": {"timeField": "time", "bucketRoundingSeconds": 100, "bucketMaxSpanSeconds": 50}}`, 72},
		{"minutes with the span of seconds", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("metaField", "meta"), e("granularity", "minutes"), e("bucketMaxSpanSeconds", 3600)))},
			`{"timeseries": {"timeField": "time", "metaField": "meta", "granularity": "minutes", "bucketMaxSpanSeconds": 3600}}`, 72},
		{"hours with a span of its own", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("granularity", "hours"), e("bucketRoundingSeconds", 4000), e("bucketMaxSpanSeconds", 4000)))},
			`{"timeseries": {"timeField": "time", "granularity": "hours", "bucketRoundingSeconds": 4000, "bucketMaxSpanSeconds": 4000}}`, 72},
		{"a negative span", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("bucketRoundingSeconds", -1), e("bucketMaxSpanSeconds", -1)))},
			`{"timeseries": {"timeField": "time", "bucketRoundingSeconds": -1, "bucketMaxSpanSeconds": -1}}`, 2},
		{"a span over a year", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("bucketRoundingSeconds", 31536001), e("bucketMaxSpanSeconds", 31536001)))},
			`{"timeseries": {"timeField": "time", "bucketRoundingSeconds": 31536001, "bucketMaxSpanSeconds": 31536001}}`, 2},
		{"a span of 0", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("bucketRoundingSeconds", 0), e("bucketMaxSpanSeconds", 0)))},
			`{"timeseries": {"timeField": "time", "bucketRoundingSeconds": 0, "bucketMaxSpanSeconds": 0}}`, 2},
		{"a NUL in the timeField", bson.D{e("timeseries", tsOpts(e("timeField", "\x00time")))}, `{"timeseries": {"timeField": "\u0000time"}}`, 2},
		{"a NUL in the metaField", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("metaField", "t\x00ag")))},
			`{"timeseries": {"timeField": "time", "metaField": "t\u0000ag"}}`, 2},
		{"expireAfterSeconds -10", bson.D{e("timeseries", tsOpts(e("timeField", "time"))), e("expireAfterSeconds", int64(-10))},
			`{"timeseries": {"timeField": "time"}, "expireAfterSeconds": -10}`, 72},
		{"expireAfterSeconds 2^62", bson.D{e("timeseries", tsOpts(e("timeField", "time"))), e("expireAfterSeconds", int64(4611686018427387904))},
			`{"timeseries": {"timeField": "time"}, "expireAfterSeconds": 4611686018427387904}`, 72},
		{"expireAfterSeconds a string", bson.D{e("timeseries", tsOpts(e("timeField", "time"))), e("expireAfterSeconds", "")},
			`{"timeseries": {"timeField": "time"}, "expireAfterSeconds": ""}`, 14},
		{"expireAfterSeconds a document", bson.D{e("timeseries", tsOpts(e("timeField", "time"))), e("expireAfterSeconds", bson.D{})},
			`{"timeseries": {"timeField": "time"}, "expireAfterSeconds": {}}`, 14},
		{"capped", bson.D{e("timeseries", tsOpts(e("timeField", "time"))), e("capped", true), e("size", 100)},
			`{"timeseries": {"timeField": "time"}, "capped": true, "size": 100}`, 72},
		{"a validator", bson.D{e("timeseries", tsOpts(e("timeField", "time"))), e("validator", bson.D{})},
			`{"timeseries": {"timeField": "time"}, "validator": {}}`, 72},

		{"seconds with its span", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("metaField", "meta"), e("granularity", "seconds"), e("bucketMaxSpanSeconds", 3600)))},
			`{"timeseries": {"timeField": "time", "metaField": "meta", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}}`, 0},
		{"minutes with its span", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("granularity", "minutes"), e("bucketMaxSpanSeconds", 86400)))},
			`{"timeseries": {"timeField": "time", "granularity": "minutes", "bucketMaxSpanSeconds": 86400}}`, 0},
		{"hours with its span and rounding", bson.D{e("timeseries", tsOpts(e("timeField", "time"), e("granularity", "hours"), e("bucketRoundingSeconds", 86400), e("bucketMaxSpanSeconds", 2592000)))},
			`{"timeseries": {"timeField": "time", "granularity": "hours", "bucketRoundingSeconds": 86400, "bucketMaxSpanSeconds": 2592000}}`, 0},
	} {
		wireName, httpName := fmt.Sprintf("w%d", i), fmt.Sprintf("h%d", i)
		_, err := f.run(t, "test", append(bson.D{e("create", wireName)}, c.opts...))
		code, msg := errCode(err)
		status, httpCode := f.httpCode(t, "PUT", "/v1/collections/"+httpName, c.json)
		if code != c.want || httpCode != c.want {
			t.Errorf("%s: wire code %d (%s), HTTP %d code %d; want %d", c.what, code, msg, status, httpCode, c.want)
			continue
		}
		if c.want != 0 {
			if status != 400 {
				t.Errorf("%s: HTTP status %d, want 400", c.what, status)
			}
			for _, n := range []string{wireName, httpName} {
				if _, err := f.db.Describe(context.Background(), n); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
					t.Errorf("%s: refused, yet %s exists (%v)", c.what, n, err)
				}
			}
			continue
		}
		// Accepted: the same command again is the same collection.
		if _, err := f.run(t, "test", append(bson.D{e("create", wireName)}, c.opts...)); err != nil {
			t.Errorf("%s: created, then refused again: %v", c.what, err)
		}
		if status, _ := f.httpCode(t, "PUT", "/v1/collections/"+httpName, c.json); status != 200 {
			t.Errorf("%s: created over HTTP, then %d again (want 200)", c.what, status)
		}
	}
}

// TestCollModCodes: collMod's refusals of jstests/core/ddl/
// collmod_convert_to_ttl.js and of a granularity's span, over the wire and
// HTTP, each changing nothing.
func TestCollModCodes(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.must(t, "test", bson.D{e("create", "m"), e("timeseries", tsOpts(e("timeField", "t"), e("metaField", "s")))})
	f.must(t, "test", bson.D{e("createIndexes", "p"), e("indexes", bson.A{bson.D{e("key", bson.D{e("a", 1)}), e("name", "a_1")}})})
	for _, c := range []struct {
		coll string
		cmd  bson.D
		json string
		want int32
	}{
		{"p", bson.D{e("index", bson.D{e("keyPattern", bson.D{e("a", 1)}), e("expireAfterSeconds", "100")})},
			`{"index": {"keyPattern": {"a": 1}, "expireAfterSeconds": "100"}}`, 14},
		{"p", bson.D{e("index", bson.D{e("keyPattern", bson.D{e("a", 1)}), e("expireAfterSeconds", -1)})},
			`{"index": {"keyPattern": {"a": 1}, "expireAfterSeconds": -1}}`, 72},
		{"p", bson.D{e("index", bson.D{e("keyPattern", bson.D{e("a", 1)}), e("expireAfterSeconds", int64(10000000000000))})},
			`{"index": {"keyPattern": {"a": 1}, "expireAfterSeconds": 10000000000000}}`, 72},
		{"m", bson.D{e("expireAfterSeconds", true)}, `{"expireAfterSeconds": true}`, 14},
		{"m", bson.D{e("expireAfterSeconds", "soon")}, `{"expireAfterSeconds": "soon"}`, 72},
		{"m", bson.D{e("timeseries", "minutes")}, `{"timeseries": "minutes"}`, 14},
		{"m", bson.D{e("timeseries", bson.D{e("foo", 1)})}, `{"timeseries": {"foo": 1}}`, 40415},
		{"m", bson.D{e("timeseries", bson.D{e("granularity", "hours"), e("bucketMaxSpanSeconds", 86400)})},
			`{"timeseries": {"granularity": "hours", "bucketMaxSpanSeconds": 86400}}`, 72},
		{"m", bson.D{e("timeseries", bson.D{e("bucketMaxSpanSeconds", 0), e("bucketRoundingSeconds", 0)})},
			`{"timeseries": {"bucketMaxSpanSeconds": 0, "bucketRoundingSeconds": 0}}`, 2},
	} {
		before := ddlSnapshot(t, f, c.coll)
		_, err := f.run(t, "test", append(bson.D{e("collMod", c.coll)}, c.cmd...))
		code, msg := errCode(err)
		status, httpCode := f.httpCode(t, "PATCH", "/v1/collections/"+c.coll, c.json)
		if code != c.want || httpCode != c.want || status != 400 {
			t.Errorf("collMod %s %v: wire %d (%s), HTTP %d code %d; want %d", c.coll, c.cmd, code, msg, status, httpCode, c.want)
		}
		if after := ddlSnapshot(t, f, c.coll); after != before {
			t.Errorf("collMod %s %v refused, yet changed %s to %s", c.coll, c.cmd, before, after)
		}
	}
	// A granularity with its own span is accepted, as in MongoDB.
	f.must(t, "test", bson.D{e("collMod", "m"), e("timeseries", bson.D{e("granularity", "minutes"), e("bucketMaxSpanSeconds", 86400)})})
	if status, code := f.httpCode(t, "PATCH", "/v1/collections/m", `{"timeseries": {"granularity": "hours", "bucketMaxSpanSeconds": 2592000, "bucketRoundingSeconds": 86400}}`); status != 200 {
		t.Fatalf("PATCH to hours with its span and rounding: %d, code %d", status, code)
	}
	if info, _ := f.db.DescribeShallow(ctx, "m"); info.Options.TimeSeries.Granularity != "hours" || info.Options.TimeSeries.BucketMaxSpanSeconds != 0 {
		t.Fatalf("options after collMod: %+v", info.Options.TimeSeries)
	}
}

// ddlSnapshot renders a collection's options and indexes, to compare.
func ddlSnapshot(t *testing.T, f *fixture, coll string) string {
	t.Helper()
	info, err := f.db.DescribeShallow(context.Background(), coll)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"options": info.Options, "indexes": info.Indexes})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCreateIndexesCodes: an index's expireAfterSeconds of the wrong type
// is CannotCreateIndex (67) at createIndexes, as MongoDB's
// ttl_index_options.js expects (collMod's is TypeMismatch, above), and a
// list with one refused index creates none, not even the collection it
// would have created.
func TestCreateIndexesCodes(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.must(t, "test", bson.D{e("create", "p")})
	ix := func(field string, opts ...bson.E) bson.D {
		return append(bson.D{e("key", bson.D{e(field, 1)})}, opts...)
	}
	for _, c := range []struct {
		coll    string
		indexes bson.A
		want    int32
	}{
		{"p", bson.A{ix("x", e("expireAfterSeconds", "invalidOption"))}, 67},
		{"p", bson.A{ix("x", e("expireAfterSeconds", -1))}, 67},
		{"p", bson.A{bson.D{e("key", bson.D{e("x", 1), e("y", 1)}), e("expireAfterSeconds", 100)}}, 67},
		{"p", bson.A{ix("a"), ix("x", e("expireAfterSeconds", -1))}, 67},
		{"p", bson.A{ix("a"), ix("b", e("name", "a_1"))}, 86},
		{"p", bson.A{ix("a"), ix("a", e("name", "other"))}, 85},
		{"p", bson.A{ix("a"), ix("_id", e("expireAfterSeconds", 10))}, 197},
		{"fresh", bson.A{ix("a"), ix("x", e("expireAfterSeconds", "1"))}, 67},
		{"fresh", bson.A{ix("a"), ix("b", e("name", "a_1"))}, 86},
	} {
		var before string
		if c.coll == "p" {
			before = ddlSnapshot(t, f, c.coll)
		}
		_, err := f.run(t, "test", bson.D{e("createIndexes", c.coll), e("indexes", c.indexes)})
		if code, msg := errCode(err); code != c.want {
			t.Errorf("createIndexes %s %v: %d (%s), want %d", c.coll, c.indexes, code, msg, c.want)
		}
		if c.coll == "p" {
			if after := ddlSnapshot(t, f, c.coll); after != before {
				t.Errorf("createIndexes %v refused, yet changed %s to %s", c.indexes, before, after)
			}
		} else if _, err := f.db.Describe(ctx, c.coll); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
			t.Errorf("createIndexes %v refused, yet created %s (%v)", c.indexes, c.coll, err)
		}
	}
	r := f.must(t, "test", bson.D{e("createIndexes", "p"), e("indexes", bson.A{ix("a"), ix("b"), ix("a")})})
	if lookupInt(t, r, "numIndexesBefore") != 1 || lookupInt(t, r, "numIndexesAfter") != 3 {
		t.Fatalf("createIndexes of a list replied %s", r)
	}
}

// TestDropIndexesAllOrNone: dropIndexes of a list naming the _id index
// (72) or an index that does not exist (27) drops none of them; MongoDB
// checks the whole list first.
func TestDropIndexesAllOrNone(t *testing.T) {
	f := newFixture(t, nil)
	f.must(t, "test", bson.D{e("createIndexes", "p"), e("indexes", bson.A{
		bson.D{e("key", bson.D{e("a", 1)})}, bson.D{e("key", bson.D{e("b", 1)})}})})
	for _, c := range []struct {
		index any
		want  int32
	}{
		{bson.A{"a_1", "_id_"}, 72},
		{bson.A{"_id_", "a_1"}, 72},
		{bson.A{"a_1", "nope"}, 27},
		{bson.D{e("_id", 1)}, 72},
		{"_id_", 72},
	} {
		_, err := f.run(t, "test", bson.D{e("dropIndexes", "p"), e("index", c.index)})
		if code, msg := errCode(err); code != c.want {
			t.Errorf("dropIndexes %v: %d (%s), want %d", c.index, code, msg, c.want)
		}
		if n := len(f.listIndexes(t, "p")); n != 3 {
			t.Errorf("dropIndexes %v refused, yet %d indexes are left of 3", c.index, n)
		}
	}
	r := f.must(t, "test", bson.D{e("dropIndexes", "p"), e("index", bson.A{"a_1", "b_1"})})
	if lookupInt(t, r, "nIndexesWas") != 3 || len(f.listIndexes(t, "p")) != 1 {
		t.Fatalf("dropIndexes [a_1, b_1] replied %s; %d indexes left", r, len(f.listIndexes(t, "p")))
	}
}

// TestCollModAllOrNone: a collMod of the collection's TTL, an index's TTL
// and the granularity at once, over the wire and HTTP, changes nothing
// when any part is refused and everything when none is.
func TestCollModAllOrNone(t *testing.T) {
	f := newFixture(t, nil)
	f.must(t, "test", bson.D{e("create", "m"), e("timeseries", tsOpts(e("timeField", "t"), e("metaField", "s"), e("granularity", "minutes")))})
	f.must(t, "test", bson.D{e("createIndexes", "m"), e("indexes", bson.A{bson.D{e("key", bson.D{e("t", 1)}), e("name", "ttl_a"),
		e("expireAfterSeconds", 3600), e("partialFilterExpression", bson.D{e("s", "a")})}})})
	index := bson.D{e("name", "ttl_a"), e("expireAfterSeconds", 60)}
	for _, c := range []struct {
		cmd  bson.D
		json string
		want int32
	}{
		{bson.D{e("expireAfterSeconds", 600), e("index", index), e("timeseries", bson.D{e("granularity", "seconds")})},
			`{"expireAfterSeconds": 600, "index": {"name": "ttl_a", "expireAfterSeconds": 60}, "timeseries": {"granularity": "seconds"}}`, 72},
		{bson.D{e("expireAfterSeconds", 600), e("index", bson.D{e("name", "nope"), e("expireAfterSeconds", 60)}), e("timeseries", bson.D{e("granularity", "hours")})},
			`{"expireAfterSeconds": 600, "index": {"name": "nope", "expireAfterSeconds": 60}, "timeseries": {"granularity": "hours"}}`, 27},
		{bson.D{e("expireAfterSeconds", -1), e("index", index)}, `{"expireAfterSeconds": -1, "index": {"name": "ttl_a", "expireAfterSeconds": 60}}`, 72},
	} {
		before := ddlSnapshot(t, f, "m")
		_, err := f.run(t, "test", append(bson.D{e("collMod", "m")}, c.cmd...))
		code, msg := errCode(err)
		_, httpCode := f.httpCode(t, "PATCH", "/v1/collections/m", c.json)
		if code != c.want || httpCode != c.want {
			t.Errorf("collMod %v: wire %d (%s), HTTP %d; want %d", c.cmd, code, msg, httpCode, c.want)
		}
		if after := ddlSnapshot(t, f, "m"); after != before {
			t.Errorf("collMod %v refused, yet changed %s to %s", c.cmd, before, after)
		}
	}
	f.must(t, "test", bson.D{e("collMod", "m"), e("expireAfterSeconds", 600), e("index", index), e("timeseries", bson.D{e("granularity", "hours")})})
	info, err := f.db.DescribeShallow(context.Background(), "m")
	if err != nil || len(info.Indexes) != 1 || *info.Options.ExpireAfterSeconds != 600 || *info.Indexes[0].ExpireAfterSeconds != 60 ||
		info.Options.TimeSeries.Granularity != "hours" {
		t.Fatalf("after collMod: %+v %+v, %v", info.Options, info.Indexes, err)
	}
}
