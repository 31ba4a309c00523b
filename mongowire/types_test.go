package mongowire

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// everyType is a document with a value of every BSON type a plain
// collection stores, nested too.
func everyType(t *testing.T) bson.D {
	t.Helper()
	dec, err := bson.ParseDecimal128("1.10")
	if err != nil {
		t.Fatal(err)
	}
	big, _ := bson.ParseDecimal128("-12345678901234567890123456789.0123")
	oid, _ := bson.ObjectIDFromHex("65a1b2c3d4e5f60718293a4b")
	return bson.D{
		{Key: "_id", Value: int32(1)},
		{Key: "i32", Value: int32(7)},
		{Key: "i64", Value: int64(7)},
		{Key: "i64big", Value: int64(1<<53 + 1)},
		{Key: "dbl", Value: 2.0},
		{Key: "frac", Value: 1.5},
		{Key: "dec", Value: dec},
		{Key: "decbig", Value: big},
		{Key: "str", Value: "héllo"},
		{Key: "yes", Value: true},
		{Key: "nil", Value: nil},
		{Key: "date", Value: bson.NewDateTimeFromTime(time.Date(2024, 5, 1, 12, 0, 0, 123e6, time.UTC))},
		{Key: "oid", Value: oid},
		{Key: "bin", Value: bson.Binary{Subtype: 0, Data: []byte{0, 1, 2, 255}}},
		{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{7}, 16)}},
		{Key: "arr", Value: bson.A{int32(1), int64(2), 3.0, dec, "x", bson.D{{Key: "a", Value: int64(4)}}}},
		{Key: "sub", Value: bson.D{{Key: "x", Value: dec}, {Key: "y", Value: bson.Binary{Subtype: 5, Data: []byte("md5")}}, {Key: "z", Value: int32(-3)}}},
	}
}

// sameValues reports, for every field of want, whether got holds the same
// BSON type and bytes (fields in any order, nested too).
func sameValues(t *testing.T, got bson.Raw, want bson.D) {
	t.Helper()
	wb, err := bson.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := canonical(t, got), canonical(t, bson.Raw(wb)); g != w {
		t.Errorf("read back:\n%s\nwant:\n%s", g, w)
	}
}

// canonical renders a document as canonical Extended JSON with its
// fields sorted at every level: types show ($numberInt, $numberLong,
// $numberDecimal, ...), order does not.
func canonical(t *testing.T, r bson.Raw) string {
	t.Helper()
	var sortDoc func(bson.Raw) bson.D
	var sortVal func(bson.RawValue) any
	sortVal = func(v bson.RawValue) any {
		switch v.Type {
		case bson.TypeEmbeddedDocument:
			return sortDoc(v.Document())
		case bson.TypeArray:
			vals, _ := v.Array().Values()
			out := bson.A{}
			for _, e := range vals {
				out = append(out, sortVal(e))
			}
			return out
		}
		return v
	}
	sortDoc = func(d bson.Raw) bson.D {
		els, err := d.Elements()
		if err != nil {
			t.Fatal(err)
		}
		var out bson.D
		for _, e := range els {
			out = append(out, bson.E{Key: e.Key(), Value: sortVal(e.Value())})
		}
		slices.SortFunc(out, func(a, b bson.E) int { return strings.Compare(a.Key, b.Key) })
		return out
	}
	b, err := bson.MarshalExtJSON(sortDoc(r), true, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBSONTypesRoundTrip: a plain collection gives back every BSON type as
// the driver wrote it, over the wire and through the HTTP API's Extended
// JSON (read there, written back, read over the wire again); filters,
// $type and $inc see the types as MongoDB does.
func TestBSONTypesRoundTrip(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	c := f.mdb.Collection("p")
	doc := everyType(t)
	if _, err := c.InsertOne(ctx, doc); err != nil {
		t.Fatal(err)
	}
	got, err := c.FindOne(ctx, bson.D{}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	sameValues(t, got, doc)

	// Through HTTP and back.
	req := httptest.NewRequest(http.MethodPost, "/v1/collections/p/find", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	rec := httptest.NewRecorder()
	f.http.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP find: %d %s", rec.Code, rec.Body)
	}
	js := strings.TrimSpace(rec.Body.String())
	for _, want := range []string{`"i32":7`, `"i64":{"$numberLong":"7"}`, `"i64big":{"$numberLong":"9007199254740993"}`, `"dbl":2.0`,
		`"dec":{"$numberDecimal":"1.10"}`, `"bin":{"$binary":{"base64":"AAEC/w==","subType":"00"}}`} {
		if !strings.Contains(js, want) {
			t.Errorf("HTTP find lacks %s:\n%s", want, js)
		}
	}
	// The HTTP write goes to another plain collection.
	if code, mcode := f.httpCode(t, "PUT", "/v1/collections/q", `{}`); code >= 300 {
		t.Fatalf("create q: %d %d", code, mcode)
	}
	req = httptest.NewRequest(http.MethodPost, "/v1/collections/q/documents", strings.NewReader(js))
	req.Header.Set("Content-Type", "application/x-ndjson")
	rec = httptest.NewRecorder()
	f.http.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP insert of what HTTP read: %d %s\n%s", rec.Code, rec.Body, js)
	}
	got, err = f.mdb.Collection("q").FindOne(ctx, bson.D{}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	sameValues(t, got, doc)

	// Filters compare numbers by value across types, and $type tells them
	// apart.
	dec110, _ := bson.ParseDecimal128("1.1")
	for _, q := range []bson.D{
		{{Key: "dec", Value: dec110}},
		{{Key: "dec", Value: bson.D{{Key: "$gt", Value: 1.0}, {Key: "$lt", Value: int32(2)}}}},
		{{Key: "i32", Value: bson.D{{Key: "$type", Value: "int"}}}},
		{{Key: "i64", Value: bson.D{{Key: "$type", Value: "long"}}}},
		{{Key: "dec", Value: bson.D{{Key: "$type", Value: "decimal"}}}},
		{{Key: "bin", Value: bson.Binary{Subtype: 0, Data: []byte{0, 1, 2, 255}}}},
		{{Key: "uuid", Value: bson.D{{Key: "$type", Value: "binData"}}}},
		{{Key: "i64", Value: int32(7)}},
	} {
		if n, err := c.CountDocuments(ctx, q); err != nil || n != 1 {
			t.Errorf("count %v = %d, %v; want 1", q, n, err)
		}
	}
	for _, q := range []bson.D{
		{{Key: "i32", Value: bson.D{{Key: "$type", Value: "long"}}}},
		{{Key: "dec", Value: 1.1}}, // the double 1.1 is not 1.10 exactly
	} {
		if n, err := c.CountDocuments(ctx, q); err != nil || n != 0 {
			t.Errorf("count %v = %d, %v; want 0", q, n, err)
		}
	}

	// $inc keeps an int32 an int32 and a decimal exact.
	if _, err := c.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "i32", Value: int32(1)}, {Key: "dec", Value: int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	got, err = c.FindOne(ctx, bson.D{}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Lookup("i32"); v.Type != bson.TypeInt32 || v.Int32() != 8 {
		t.Errorf("$inc of an int32: %s", v)
	}
	if v := got.Lookup("dec"); v.Type != bson.TypeDecimal128 || v.Decimal128().String() != "2.10" {
		t.Errorf("$inc of a decimal: %s", v)
	}
}

// TestTimeSeriesTypesRoundTrip: a measurement's fields read back with the
// BSON types they were written with, whatever the type (a decimal, binary,
// an array or sub-document in their order, an ObjectId, an int32 beside
// an int64 and a double in one field), the _id the driver made kept and
// usable in a filter, over a checkpoint (sealed buckets) and a restart;
// fields come back in the order they were first written, after the time
// and meta fields.
func TestTimeSeriesTypesRoundTrip(t *testing.T) {
	ctx := context.Background()
	dec, _ := bson.ParseDecimal128("1.10")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	docs := []bson.D{
		{{Key: "_id", Value: bson.NewObjectID()}, {Key: "ts", Value: t0}, {Key: "s", Value: "a"}, {Key: "zeta", Value: int32(7)}, {Key: "alpha", Value: dec},
			{Key: "mid", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}}, {Key: "beta", Value: bson.A{int32(1), "x", bson.D{{Key: "z", Value: 1.5}, {Key: "a", Value: int64(2)}}}}},
		{{Key: "_id", Value: "given"}, {Key: "ts", Value: t0.Add(time.Second)}, {Key: "s", Value: "a"}, {Key: "zeta", Value: int64(8)}, {Key: "alpha", Value: 2.5},
			{Key: "doc", Value: bson.D{{Key: "y", Value: true}, {Key: "b", Value: bson.NewObjectID()}}}},
		{{Key: "_id", Value: int32(3)}, {Key: "ts", Value: t0.Add(2 * time.Second)}, {Key: "s", Value: "a"}, {Key: "zeta", Value: 9.0}, {Key: "old", Value: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)}, {Key: "nul", Value: nil}},
	}
	var in []any
	for _, d := range docs {
		in = append(in, d)
	}
	// What MongoDB returns: the time and meta fields first, then the
	// others, each in the order the collection first saw it.
	order := []string{"ts", "s", "_id", "zeta", "alpha", "mid", "beta", "doc", "old", "nul"}
	check := func(t *testing.T, mdb *mongo.Database, when string) {
		t.Helper()
		cur, err := mdb.Collection("m").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "ts", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var got []bson.Raw
		if err := cur.All(ctx, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(docs) {
			t.Fatalf("%s: %d documents, want %d", when, len(got), len(docs))
		}
		for i, want := range docs {
			elems, _ := got[i].Elements()
			var keys []string
			for _, e := range elems {
				keys = append(keys, e.Key())
			}
			var wantKeys []string
			for _, k := range order {
				for _, e := range want {
					if e.Key == k {
						wantKeys = append(wantKeys, k)
					}
				}
			}
			if !slices.Equal(keys, wantKeys) {
				t.Errorf("%s: document %d fields %v, want %v", when, i, keys, wantKeys)
			}
			for _, e := range want {
				wb, _ := bson.Marshal(bson.D{e})
				gv := got[i].Lookup(e.Key)
				gb, _ := bson.Marshal(bson.D{{Key: e.Key, Value: gv}})
				if !bytes.Equal(wb, gb) {
					t.Errorf("%s: document %d field %q: %s, want %s", when, i, e.Key, gv, bson.Raw(wb).Lookup(e.Key))
				}
			}
		}
		// The _id in a filter: one of each kind.
		for i, d := range docs {
			n, err := mdb.Collection("m").CountDocuments(ctx, bson.D{{Key: "_id", Value: d[0].Value}})
			if err != nil || n != 1 {
				t.Errorf("%s: count by _id of document %d: %d, %v", when, i, n, err)
			}
		}
		// Through a pipeline's stages: the same values.
		pc, err := mdb.Collection("m").Aggregate(ctx, bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "ts", Value: 1}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: 1}}}}})
		if err != nil {
			t.Fatalf("%s: aggregate: %v", when, err)
		}
		var piped []bson.Raw
		if err := pc.All(ctx, &piped); err != nil {
			t.Fatalf("%s: aggregate: %v", when, err)
		}
		if len(piped) != len(docs) {
			t.Fatalf("%s: aggregate: %d documents", when, len(piped))
		}
		for i, want := range docs {
			for _, e := range want {
				wb, _ := bson.Marshal(bson.D{e})
				gb, _ := bson.Marshal(bson.D{{Key: e.Key, Value: piped[i].Lookup(e.Key)}})
				if !bytes.Equal(wb, gb) {
					t.Errorf("%s: aggregate: document %d field %q: %s, want %s", when, i, e.Key, piped[i].Lookup(e.Key), bson.Raw(wb).Lookup(e.Key))
				}
			}
		}
		// A null field exists (MongoDB's $exists), matches {nul: null}
		// as a missing one does, and is of $type null.
		for _, c := range []struct {
			filter bson.D
			want   int64
		}{
			{bson.D{{Key: "nul", Value: bson.D{{Key: "$exists", Value: true}}}}, 1},
			{bson.D{{Key: "nul", Value: nil}}, 3},
			{bson.D{{Key: "nul", Value: bson.D{{Key: "$type", Value: "null"}}}}, 1},
		} {
			if n, err := mdb.Collection("m").CountDocuments(ctx, c.filter); err != nil || n != c.want {
				t.Errorf("%s: count %v: %d, %v; want %d", when, c.filter, n, err, c.want)
			}
		}
		// A decimal compared as a number.
		if n, err := mdb.Collection("m").CountDocuments(ctx, bson.D{{Key: "alpha", Value: bson.D{{Key: "$lt", Value: 2}}}}); err != nil || n != 1 {
			t.Errorf("%s: alpha < 2: %d, %v", when, n, err)
		}
	}
	writeThenRead(t, "s", in, check)
}

// writeThenRead creates the time series "m" (timeField ts, metaField
// meta) through the Go driver, inserts docs and runs check in memory,
// after a checkpoint and after a restart of the server on the same store.
func writeThenRead(t *testing.T, meta string, docs []any, check func(t *testing.T, mdb *mongo.Database, when string)) {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	// serve runs fn against a server on the store in dir, closed after.
	serve := func(name string, fn func(t *testing.T, mdb *mongo.Database, db *timeseries.DB)) {
		t.Run(name, func(t *testing.T) {
			db, err := timeseries.Open(timeseries.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			_, addr := serveDB(t, db, Options{})
			fn(t, connect(t, addr, "").Database("test"), db)
		})
	}
	serve("written", func(t *testing.T, mdb *mongo.Database, db *timeseries.DB) {
		if err := mdb.RunCommand(ctx, bson.D{{Key: "create", Value: "m"}, {Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "ts"}, {Key: "metaField", Value: meta}}}}).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := mdb.Collection("m").InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
		check(t, mdb, "in memory")
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		check(t, mdb, "stored")
	})
	serve("reopened", func(t *testing.T, mdb *mongo.Database, _ *timeseries.DB) { check(t, mdb, "after a restart") })
}

// keysOf returns the field names of a document at path (top level when
// path is empty), in order.
func keysOf(t *testing.T, r bson.Raw, path ...string) string {
	t.Helper()
	d := r
	if len(path) > 0 {
		v, err := r.LookupErr(path...)
		if err != nil {
			t.Fatalf("%v missing in %s", path, r)
		}
		if v.Type == bson.TypeArray {
			d = bson.Raw(v.Array())
			vals, _ := d.Values()
			d = vals[0].Document()
		} else {
			d = v.Document()
		}
	}
	els, err := d.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, e := range els {
		ks = append(ks, e.Key())
	}
	return strings.Join(ks, ",")
}

// TestFieldOrderKept: a plain collection's documents come back in the
// order they were written (_id first, as MongoDB stores it), at every
// depth, through finds, projections, sorts, updates and replacements, and
// over HTTP both ways.
func TestFieldOrderKept(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	c := f.mdb.Collection("p")
	docs := []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "zeta", Value: 1}, {Key: "alpha", Value: 2},
			{Key: "mid", Value: bson.D{{Key: "z", Value: 1}, {Key: "a", Value: 2}}},
			{Key: "beta", Value: bson.A{bson.D{{Key: "y", Value: 1}, {Key: "b", Value: 2}}}}},
		bson.D{{Key: "zeta", Value: 1}, {Key: "_id", Value: 2}, {Key: "alpha", Value: 3}},
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	one := func(filter bson.D, opts ...options.Lister[options.FindOneOptions]) bson.Raw {
		t.Helper()
		r, err := c.FindOne(ctx, filter, opts...).Raw()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	id1 := bson.D{{Key: "_id", Value: 1}}
	for _, c := range []struct {
		got, want string
	}{
		{keysOf(t, one(id1)), "_id,zeta,alpha,mid,beta"},
		{keysOf(t, one(id1), "mid"), "z,a"},
		{keysOf(t, one(id1), "beta"), "y,b"},
		{keysOf(t, one(bson.D{{Key: "_id", Value: 2}})), "_id,zeta,alpha"}, // _id moves first
		{keysOf(t, one(id1, options.FindOne().SetProjection(bson.D{{Key: "alpha", Value: 1}, {Key: "zeta", Value: 1}}))), "_id,zeta,alpha"},
		{keysOf(t, one(bson.D{}, options.FindOne().SetSort(bson.D{{Key: "alpha", Value: -1}}))), "_id,zeta,alpha"}, // _id 2, through the sort
	} {
		if c.got != c.want {
			t.Errorf("fields %s, want %s", c.got, c.want)
		}
	}

	// An update keeps the fields where they are and adds new ones after.
	if _, err := c.UpdateOne(ctx, id1, bson.D{{Key: "$set", Value: bson.D{{Key: "alpha", Value: 9}, {Key: "aaa", Value: 1}, {Key: "mid.new", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(t, one(id1)); got != "_id,zeta,alpha,mid,beta,aaa" {
		t.Errorf("after $set: %s", got)
	}
	if got := keysOf(t, one(id1), "mid"); got != "z,a,new" {
		t.Errorf("mid after $set: %s", got)
	}
	// A replacement is stored as written, _id first.
	if _, err := c.ReplaceOne(ctx, id1, bson.D{{Key: "q", Value: 1}, {Key: "b", Value: bson.D{{Key: "y", Value: 1}, {Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if got, sub := keysOf(t, one(id1)), keysOf(t, one(id1), "b"); got != "_id,q,b" || sub != "y,x" {
		t.Errorf("after a replacement: %s; b: %s", got, sub)
	}

	// A sort buffers documents while the scan moves on: each keeps its
	// order.
	var many []any
	for i := range 3000 {
		many = append(many, bson.D{{Key: "_id", Value: 100 + i}, {Key: fmt.Sprintf("k%04d", 3000-i), Value: i}, {Key: "s", Value: i % 7}, {Key: "a", Value: strings.Repeat("x", 100)}})
	}
	if _, err := f.mdb.Collection("many").InsertMany(ctx, many); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Flush(); err != nil { // read from the store's tables, whose blocks the scan lets go of
		t.Fatal(err)
	}
	cur, err := f.mdb.Collection("many").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "s", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for cur.Next(ctx) {
		id := cur.Current.Lookup("_id").Int32()
		if got, want := keysOf(t, cur.Current), fmt.Sprintf("_id,k%04d,s,a", 3000-(id-100)); got != want {
			t.Fatalf("sorted find, document %d: %s, want %s", id, got, want)
		}
		n++
	}
	if err := cur.Err(); err != nil || n != 3000 {
		t.Fatalf("sorted find: %d documents, %v", n, err)
	}

	// HTTP reads the same order, and writes in the order of its text.
	req := httptest.NewRequest(http.MethodPost, "/v1/collections/p/find", strings.NewReader(`{"filter": {"_id": 1}}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	f.http.ServeHTTP(rec, req)
	if want := `[{"_id":1,"q":1,"b":{"y":1,"x":2}}]`; strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("HTTP find: %s, want %s", rec.Body, want)
	}
	req = httptest.NewRequest(http.MethodPost, "/v1/collections/p/documents", strings.NewReader(`[{"zz": 1, "_id": 3, "\u00e9": {"k": 1, "a": [{"w": 1, "v": 2}]}, "aa": 2}]`))
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	f.http.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP insert: %d %s", rec.Code, rec.Body)
	}
	id3 := bson.D{{Key: "_id", Value: 3}}
	if got, sub, arr := keysOf(t, one(id3)), keysOf(t, one(id3), "é"), keysOf(t, one(id3), "é", "a"); got != "_id,zz,é,aa" || sub != "k,a" || arr != "w,v" {
		t.Errorf("written over HTTP: %s; é: %s; é.a[0]: %s", got, sub, arr)
	}
}

// TestNULInFieldNames: a field name holding a NUL byte, which BSON cannot
// carry, is refused over HTTP (as the wire protocol cannot send one); a
// document that holds one in the store (written before names were
// checked) reads back with U+FFFD in its place instead of taking the
// server down.
func TestNULInFieldNames(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if code, mcode := f.httpCode(t, "PUT", "/v1/collections/p", `{}`); code >= 300 {
		t.Fatalf("create: %d %d", code, mcode)
	}
	if code, mcode := f.httpCode(t, "POST", "/v1/collections/p/documents", `[{"a\u0000b": 1}]`); code != http.StatusBadRequest || mcode != 2 {
		t.Fatalf("a NUL byte in a name over HTTP: %d, code %d", code, mcode)
	}
	if code, mcode := f.httpCode(t, "POST", "/v1/collections/p/update", `{"filter": {}, "update": {"$set": {"x": {"a\u0000": 1}}}}`); code != http.StatusBadRequest || mcode != 2 {
		t.Fatalf("a NUL byte in a name $set over HTTP: %d, code %d", code, mcode)
	}
	// As an earlier version stored it.
	if _, err := f.db.Insert(ctx, "p", timeseries.Batch{Documents: []document.Doc{{"_id": int32(1), "a\x00b": document.Doc{"c\x00": int32(2)}}}}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	// Transcoded from the store, and through the map (a projection).
	for _, opts := range []*options.FindOneOptionsBuilder{options.FindOne(), options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 0}})} {
		got, err := f.mdb.Collection("p").FindOne(ctx, bson.D{}, opts).Raw()
		if err != nil {
			t.Fatal(err)
		}
		if v := got.Lookup("a\uFFFDb", "c\uFFFD"); v.Type != bson.TypeInt32 {
			t.Fatalf("read back: %s", got)
		}
	}
}

// TestTranscodeMatchesMapPath: a stored document transcoded straight to
// BSON (a find without a projection) is byte for byte what the map path
// (with a projection) writes of it, for documents of every type, nested,
// in random orders.
func TestTranscodeMatchesMapPath(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	dec, _ := partialfilter.ParseDecimal128("-1.50E-3")
	leaves := []any{nil, true, int32(-7), int64(1 << 40), 2.5, math.Inf(-1), dec, "s\u00e9", time.Date(1969, 12, 31, 23, 59, 59, 5e8, time.UTC),
		partialfilter.ObjectID{1, 2, 3}, partialfilter.Binary{Subtype: 4, Data: []byte{9, 8}}}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := r.IntN(6); {
		case k == 0 && depth < 3:
			a := []any{}
			for range r.IntN(4) {
				a = append(a, value(depth+1))
			}
			return a
		case k == 1 && depth < 3:
			m := map[string]any{}
			for range r.IntN(4) {
				m[fmt.Sprintf("k%d", r.IntN(9))] = value(depth + 1)
			}
			return m
		}
		return leaves[r.IntN(len(leaves))]
	}
	for range 5000 {
		doc := document.Doc{"_id": value(2)}
		for range r.IntN(6) {
			doc[fmt.Sprintf("f%d", r.IntN(9))] = value(0)
		}
		if _, isArr := doc["_id"].([]any); isArr {
			doc["_id"] = int32(1)
		}
		enc, err := document.EncodeOrdered(nil, doc, (&document.Order{Keys: []string{"f3", "f1"}}).IDFirst())
		if err != nil {
			t.Fatal(err)
		}
		back, order, err := document.DecodeWithOrder(enc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := document.AppendBSON(nil, enc)
		if err != nil {
			t.Fatal(err)
		}
		if want := orderedDocument(back, order); !bytes.Equal(got, want) {
			t.Fatalf("transcoded %s\nmap path   %s", bson.Raw(got), bson.Raw(want))
		}
	}
}

// TestMadeIDsOverTheWire: measurements written over HTTP without an _id
// read back over the wire with the ObjectId made for each: distinct ones,
// the same through find, distinct and a filter.
func TestMadeIDsOverTheWire(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if code, _ := f.httpCode(t, "PUT", "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "s"}}`); code != 201 {
		t.Fatalf("create: %d", code)
	}
	var body strings.Builder
	body.WriteString("[")
	for i := range 20 {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"t": {"$date": "2026-01-01T00:00:%02dZ"}, "s": "s%d", "v": %d}`, i, i%3, i)
	}
	body.WriteString("]")
	if code, _ := f.httpCode(t, "POST", "/v1/collections/m/documents", body.String()); code != 200 {
		t.Fatalf("insert: %d", code)
	}
	c := f.mdb.Collection("m")
	cur, err := c.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	ids := map[bson.ObjectID]bool{}
	for _, d := range docs {
		id, ok := d.Lookup("_id").ObjectIDOK()
		if !ok {
			t.Fatalf("no ObjectId _id: %s", d)
		}
		ids[id] = true
	}
	if len(docs) != 20 || len(ids) != 20 {
		t.Fatalf("%d measurements, %d distinct ids", len(docs), len(ids))
	}
	r, err := f.mdb.RunCommand(ctx, bson.D{{Key: "distinct", Value: "m"}, {Key: "key", Value: "_id"}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	vals, _ := r.Lookup("values").Array().Values()
	for _, v := range vals {
		if id, ok := v.ObjectIDOK(); !ok || !ids[id] {
			t.Fatalf("distinct _id gave %s, not one find returned", v)
		}
	}
	if len(vals) != 20 {
		t.Fatalf("distinct _id: %d values", len(vals))
	}
	for id := range ids {
		if n, err := c.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}}); err != nil || n != 1 {
			t.Fatalf("count by %s: %d, %v", id.Hex(), n, err)
		}
		break
	}
}

// TestTimeSeriesMetaTypesRoundTrip checks that a metaField value reads
// back as written, type for type, as MongoDB returns it: an int32 stays an
// int32 (mongosh's {sensorId: 5578}), an int64 an int64, and ObjectIds,
// decimals, binary data, dates, arrays and sub-documents keep their
// values, a sub-document with its fields in name order (MongoDB
// normalizes the meta value so: {site, id} reads back {id, site}). An
// int32 and an int64 of one value are two series, as they are two buckets
// in MongoDB, yet one value to a filter and to $group.
func TestTimeSeriesMetaTypesRoundTrip(t *testing.T) {
	ctx := context.Background()
	dec, _ := bson.ParseDecimal128("1.10")
	oid := bson.NewObjectID()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	metas := []struct{ written, read any }{
		{int32(5578), int32(5578)},
		{int64(5578), int64(5578)},
		{oid, oid},
		{dec, dec},
		{bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}, bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}},
		{2.5, 2.5},
		{t0, t0},
		{bson.A{int32(1), "x", int64(2)}, bson.A{int32(1), "x", int64(2)}},
		{bson.D{{Key: "site", Value: "north"}, {Key: "id", Value: int32(7)}, {Key: "sub", Value: bson.D{{Key: "z", Value: oid}, {Key: "a", Value: dec}}}},
			bson.D{{Key: "id", Value: int32(7)}, {Key: "site", Value: "north"}, {Key: "sub", Value: bson.D{{Key: "a", Value: dec}, {Key: "z", Value: oid}}}}},
	}
	check := func(t *testing.T, mdb *mongo.Database, when string) {
		t.Helper()
		for i, m := range metas {
			var got bson.Raw
			err := mdb.Collection("m").FindOne(ctx, bson.D{{Key: "n", Value: int32(i)}}).Decode(&got)
			if err != nil {
				t.Fatalf("%s: meta %d: %v", when, i, err)
			}
			wb, _ := bson.Marshal(bson.D{{Key: "sensor", Value: m.read}})
			gb, _ := bson.Marshal(bson.D{{Key: "sensor", Value: got.Lookup("sensor")}})
			if !bytes.Equal(wb, gb) {
				t.Errorf("%s: meta %d reads back %s, want %s", when, i, got.Lookup("sensor"), bson.Raw(wb).Lookup("sensor"))
			}
		}
		// 5578 as int32 or int64: one value to a filter and a group.
		if n, err := mdb.Collection("m").CountDocuments(ctx, bson.D{{Key: "sensor", Value: 5578}}); err != nil || n != 2 {
			t.Errorf("%s: count sensor 5578: %d, %v; want 2", when, n, err)
		}
		cur, err := mdb.Collection("m").Aggregate(ctx, bson.A{
			bson.D{{Key: "$match", Value: bson.D{{Key: "sensor", Value: bson.D{{Key: "$in", Value: bson.A{int32(5578), 2.5}}}}}}},
			bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$sensor"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
			bson.D{{Key: "$sort", Value: bson.D{{Key: "n", Value: -1}}}}})
		if err != nil {
			t.Fatalf("%s: aggregate: %v", when, err)
		}
		var groups []struct {
			ID any   `bson:"_id"`
			N  int64 `bson:"n"`
		}
		if err := cur.All(ctx, &groups); err != nil {
			t.Fatal(err)
		}
		if len(groups) != 2 || groups[0].N != 2 || groups[1].N != 1 {
			t.Errorf("%s: $group by sensor: %+v, want 5578 twice and 2.5 once", when, groups)
		}
	}
	var in []any
	for i, m := range metas {
		in = append(in, bson.D{{Key: "ts", Value: t0.Add(time.Duration(i) * time.Second)}, {Key: "sensor", Value: m.written}, {Key: "n", Value: int32(i)}})
	}
	writeThenRead(t, "sensor", in, check)
}
