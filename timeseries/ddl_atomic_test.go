package timeseries

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// ddlState renders what a DDL may change of collection name: its options,
// its indexes, its TTL rules and, on a plain collection, what a find
// through each secondary index returns (an index whose entries are missing
// returns too little). Two states are equal when the renderings are.
func ddlState(t *testing.T, db *DB, name string) string {
	t.Helper()
	info, err := db.DescribeShallow(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.TTLState(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	st.NextExpiry = nil
	found := map[string]int{}
	if info.Options.TimeSeries == nil {
		for _, ix := range info.Indexes {
			f := mustFilter(t, fmt.Sprintf(`{%q: {"$gte": 0}}`, ix.Key[0].Field))
			ids, plan := findIDs(t, db, name, FindOptions{Filter: f})
			found[ix.Name+" "+plan.Stage+" "+plan.Index] = len(ids)
		}
	}
	b, err := json.Marshal(map[string]any{"options": info.Options, "indexes": info.Indexes, "ttl": st, "found": found})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// countSteps counts the DDL steps of db (the ddlStep hook) by name.
func countSteps(db *DB) map[string]int {
	n := map[string]int{}
	db.hooks.ddlStep = func(step string) { n[step]++ }
	return n
}

func key1(field string) []IndexKey { return []IndexKey{{Field: field, Direction: 1}} }

func ttlIndex(name, sensor string, seconds int64) IndexSpec {
	return IndexSpec{Name: name, Key: key1("t"), ExpireAfterSeconds: &seconds, PartialFilterExpression: map[string]any{"m": sensor}}
}

// indexEntries counts the entries stored under index id of collection
// name.
func indexEntries(t *testing.T, db *DB, name string, id uint32) int {
	t.Helper()
	c, err := db.lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	p := indexPrefix(c.id, id)
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	return n
}

// TestCreateIndexesAllOrNone: a list with one refused index creates none
// of its indexes, on either kind of collection, whatever refuses it (a
// rule, a conflict with an index or with another spec of the list, a
// document the index cannot hold); an accepted list is published in one
// catalog record.
func TestCreateIndexesAllOrNone(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "ts", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
	plainDocs(t, db, "p", 40, func(i int) document.Doc {
		return document.Doc{"_id": int64(i), "a": int64(i % 5), "b": int64(i), "c": []any{int64(i), int64(i + 1)}, "d": []any{int64(1), int64(2)}}
	})
	for _, name := range []string{"ts", "p"} {
		if _, _, err := db.CreateIndex(ctx, name, IndexSpec{Name: "e_1", Key: key1("e")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		coll  string
		specs []IndexSpec
		code  mongoerr.Code
	}{
		{"ts", []IndexSpec{ttlIndex("ttl_a", "a", 60), {Key: []IndexKey{{"t", 1}, {"x", 1}}, ExpireAfterSeconds: new(int64)}}, mongoerr.CannotCreateIndex},
		{"ts", []IndexSpec{ttlIndex("ttl_a", "a", 60), {Key: key1("x"), ExpireAfterSeconds: new(int64)}}, mongoerr.InvalidOptions},
		{"ts", []IndexSpec{{Key: key1("x")}, {Name: "x_1", Key: key1("y")}}, mongoerr.IndexKeySpecsConflict},
		{"ts", []IndexSpec{{Key: key1("x")}, {Name: "e_1", Key: key1("y")}}, mongoerr.IndexKeySpecsConflict},
		{"ts", []IndexSpec{ttlIndex("ttl_a", "a", 60), ttlIndex("ttl_a", "a", 120)}, mongoerr.IndexOptionsConflict},
		{"p", []IndexSpec{{Key: key1("a")}, {Key: key1("_id"), ExpireAfterSeconds: new(int64)}}, mongoerr.InvalidIndexSpecification},
		{"p", []IndexSpec{{Key: key1("a")}, {Name: "a2", Key: key1("a")}}, mongoerr.IndexOptionsConflict},
		{"p", []IndexSpec{{Key: key1("a")}, {Name: "e_1", Key: key1("b")}}, mongoerr.IndexKeySpecsConflict},
		// Built, then refused by a document: the first index's entries go too.
		{"p", []IndexSpec{{Key: key1("b")}, {Key: []IndexKey{{"c", 1}, {"d", 1}}}}, mongoerr.CannotIndexParallelArrays},
	} {
		before := ddlState(t, db, tc.coll)
		c, _ := db.lookup(tc.coll)
		db.mu.RLock()
		nextID := c.nextIndexID
		db.mu.RUnlock()
		_, err := db.CreateIndexes(ctx, tc.coll, tc.specs)
		if mongoerr.CodeOf(err) != tc.code {
			t.Fatalf("%s %+v: %v, want code %d", tc.coll, tc.specs, err, tc.code)
		}
		if after := ddlState(t, db, tc.coll); after != before {
			t.Fatalf("%s %+v refused (%v), yet changed\n%s\nto\n%s", tc.coll, tc.specs, err, before, after)
		}
		for id := nextID; id < nextID+uint32(len(tc.specs)); id++ {
			if n := indexEntries(t, db, tc.coll, id); n != 0 {
				t.Fatalf("%s %+v refused: %d entries left under index id %d", tc.coll, tc.specs, n, id)
			}
		}
	}
	for _, name := range []string{"ts", "p"} {
		steps := countSteps(db)
		res, err := db.CreateIndexes(ctx, name, []IndexSpec{{Key: key1("a")}, {Key: key1("b")}, {Key: key1("a")}, {Name: "e_1", Key: key1("e")}})
		db.hooks.ddlStep = nil
		want := []IndexCreated{{"a_1", true}, {"b_1", true}, {"a_1", false}, {"e_1", false}}
		if err != nil || !slices.Equal(res, want) {
			t.Fatalf("%s: %+v, %v; want %+v", name, res, err, want)
		}
		// The indexes are published in one record; a plain collection's
		// ids are persisted first.
		if wantWrites := map[string]int{"ts": 1, "p": 2}[name]; steps["catalog flushed"] != wantWrites {
			t.Fatalf("%s: %d catalog writes, want %d", name, steps["catalog flushed"], wantWrites)
		}
	}
	if ids, plan := findIDs(t, db, "p", FindOptions{Filter: mustFilter(t, `{"b": {"$lt": 3}}`)}); len(ids) != 3 || plan.Index != "b_1" {
		t.Fatalf("find through b_1: %v, plan %+v", ids, plan)
	}
}

// TestDropIndexesAllOrNone: a list naming the _id index (InvalidOptions)
// or an index that does not exist (IndexNotFound) drops none; an accepted
// list drops every index in one catalog record, and the entries of a
// plain collection's.
func TestDropIndexesAllOrNone(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "ts", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
	plainDocs(t, db, "p", 30, func(i int) document.Doc { return document.Doc{"_id": int64(i), "a": int64(i % 3), "b": int64(i)} })
	if _, err := db.CreateIndexes(ctx, "ts", []IndexSpec{ttlIndex("ttl_a", "a", 60), ttlIndex("ttl_b", "b", 60)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateIndexes(ctx, "p", []IndexSpec{{Key: key1("a")}, {Key: key1("b")}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		coll  string
		names []string
		code  mongoerr.Code
	}{
		{"p", []string{"a_1", IDIndexName}, mongoerr.InvalidOptions},
		{"p", []string{IDIndexName, "a_1"}, mongoerr.InvalidOptions},
		{"p", []string{"a_1", "nope"}, mongoerr.IndexNotFound},
		{"ts", []string{"ttl_a", "nope"}, mongoerr.IndexNotFound},
		{"ts", []string{"ttl_b", IDIndexName}, mongoerr.IndexNotFound}, // a time series has no _id index
	} {
		before := ddlState(t, db, tc.coll)
		err := db.DropIndexes(ctx, tc.coll, tc.names)
		if mongoerr.CodeOf(err) != tc.code {
			t.Fatalf("%s %v: %v, want code %d", tc.coll, tc.names, err, tc.code)
		}
		if after := ddlState(t, db, tc.coll); after != before {
			t.Fatalf("%s %v refused (%v), yet changed\n%s\nto\n%s", tc.coll, tc.names, err, before, after)
		}
	}
	info, _ := db.DescribeShallow(ctx, "p")
	for _, tc := range []struct {
		coll  string
		names []string
	}{{"ts", []string{"ttl_b", "ttl_a"}}, {"p", []string{"b_1", "a_1", "b_1"}}} {
		steps := countSteps(db)
		if err := db.DropIndexes(ctx, tc.coll, tc.names); err != nil {
			t.Fatal(err)
		}
		db.hooks.ddlStep = nil
		if steps["catalog flushed"] != 1 {
			t.Fatalf("%s: %d catalog writes, want 1", tc.coll, steps["catalog flushed"])
		}
		if specs, _ := db.ListIndexes(ctx, tc.coll); len(specs) != map[string]int{"ts": 0, "p": 1}[tc.coll] {
			t.Fatalf("%s after dropping %v: %+v", tc.coll, tc.names, specs)
		}
	}
	for _, ix := range info.Indexes {
		if n := indexEntries(t, db, "p", ix.ID); n != 0 {
			t.Fatalf("%d entries left by the dropped %s", n, ix.Name)
		}
	}
	if st, _ := db.TTLState(ctx, "ts"); len(st.Indexes) != 0 {
		t.Fatalf("TTL rules left by the dropped indexes: %+v", st.Indexes)
	}
}

// TestCollModAllOrNone: a collMod of the collection's TTL, an index's TTL
// and the granularity together changes nothing when any part is refused,
// and all of it, in one catalog record, when none is.
func TestCollModAllOrNone(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "ts", model.TimeSeriesOptions{TimeField: "t", MetaField: "m", Granularity: model.GranularityMinutes})
	if _, _, err := db.CreateIndex(ctx, "ts", ttlIndex("ttl_a", "a", 3600)); err != nil {
		t.Fatal(err)
	}
	day, neg := int64(86400), int64(-1)
	idx := &IndexMod{Name: "ttl_a", ExpireAfterSeconds: 120}
	for _, tc := range []struct {
		what string
		m    CollModOptions
		code mongoerr.Code
	}{
		{"an unknown index", CollModOptions{ExpireAfterSeconds: &day, Index: &IndexMod{Name: "nope", ExpireAfterSeconds: 1},
			TimeSeries: &model.TimeSeriesOptions{Granularity: model.GranularityHours}}, mongoerr.IndexNotFound},
		{"a finer granularity", CollModOptions{ExpireAfterSeconds: &day, Index: idx,
			TimeSeries: &model.TimeSeriesOptions{Granularity: model.GranularitySeconds}}, mongoerr.InvalidOptions},
		{"a negative TTL", CollModOptions{ExpireAfterSeconds: &neg, Index: idx}, mongoerr.InvalidOptions},
		{"an index TTL out of range", CollModOptions{ExpireAfterSeconds: &day, Index: &IndexMod{Name: "ttl_a", ExpireAfterSeconds: -5}}, mongoerr.InvalidOptions},
		{"another span for the granularity", CollModOptions{Index: idx,
			TimeSeries: &model.TimeSeriesOptions{Granularity: model.GranularityHours, BucketMaxSpanSeconds: 3600}}, mongoerr.InvalidOptions},
	} {
		before := ddlState(t, db, "ts")
		_, err := db.CollMod(ctx, "ts", tc.m)
		if mongoerr.CodeOf(err) != tc.code {
			t.Fatalf("%s: %v, want code %d", tc.what, err, tc.code)
		}
		if after := ddlState(t, db, "ts"); after != before {
			t.Fatalf("%s refused (%v), yet changed\n%s\nto\n%s", tc.what, err, before, after)
		}
	}
	steps := countSteps(db)
	res, err := db.CollMod(ctx, "ts", CollModOptions{ExpireAfterSeconds: &day, Index: idx,
		TimeSeries: &model.TimeSeriesOptions{Granularity: model.GranularityHours, BucketMaxSpanSeconds: 2592000}})
	db.hooks.ddlStep = nil
	if err != nil || res.Index == nil || res.Index.NewExpireAfterSeconds != 120 || *res.Index.OldExpireAfterSeconds != 3600 ||
		*res.NewExpireAfterSeconds != day || res.NewTimeSeries.Granularity != model.GranularityHours {
		t.Fatalf("collMod: %+v, %v", res, err)
	}
	if steps["catalog flushed"] != 1 {
		t.Fatalf("%d catalog writes, want 1", steps["catalog flushed"])
	}
	st, _ := db.TTLState(ctx, "ts")
	info, _ := db.DescribeShallow(ctx, "ts")
	if *st.ExpireAfterSeconds != day || len(st.Indexes) != 1 || st.Indexes[0].ExpireAfterSeconds != 120 ||
		*info.Options.TimeSeries != (model.TimeSeriesOptions{TimeField: "t", MetaField: "m", Granularity: model.GranularityHours}) {
		t.Fatalf("after collMod: %+v %+v", st, info.Options.TimeSeries)
	}
}

// TestGranularityWithItsOwnSpan: a granularity given with its own bucket
// span and rounding is the granularity alone, at create (the same options
// as without them) and at collMod.
func TestGranularityWithItsOwnSpan(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	for _, g := range []model.Granularity{model.GranularitySeconds, model.GranularityMinutes, model.GranularityHours} {
		span, rounding := g.SpanAndRounding()
		name := "c_" + string(g)
		created, err := db.CreateCollection(ctx, name, CollectionOptions{TimeSeries: &model.TimeSeriesOptions{
			TimeField: "t", Granularity: g, BucketMaxSpanSeconds: span, BucketRoundingSeconds: rounding}})
		if err != nil || !created {
			t.Fatalf("%s with span %d and rounding %d: %v", g, span, rounding, err)
		}
		created, err = db.CreateCollection(ctx, name, CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", Granularity: g}})
		if err != nil || created {
			t.Fatalf("%s again without the span: created %v, %v; want the same collection", g, created, err)
		}
	}
	if _, err := db.CollMod(ctx, "c_seconds", CollModOptions{TimeSeries: &model.TimeSeriesOptions{
		Granularity: model.GranularityMinutes, BucketMaxSpanSeconds: 86400}}); err != nil {
		t.Fatalf("collMod to minutes with its span: %v", err)
	}
	_, err := db.CollMod(ctx, "c_seconds", CollModOptions{TimeSeries: &model.TimeSeriesOptions{
		Granularity: model.GranularityHours, BucketMaxSpanSeconds: 86400}})
	if mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("collMod to hours with the span of minutes: %v, want InvalidOptions", err)
	}
	info, _ := db.DescribeShallow(ctx, "c_seconds")
	if *info.Options.TimeSeries != (model.TimeSeriesOptions{TimeField: "t", Granularity: model.GranularityMinutes}) {
		t.Fatalf("options: %+v", info.Options.TimeSeries)
	}
}

// TestDDLOnDroppedCollection: a DDL that looked its collection up before
// a drop took it out of the catalog answers NamespaceNotFound instead of
// writing the dropped collection's catalog record again (which would bring
// it back at the next open). The collection is marked dropped while still
// in the name map, as a lookup made before the drop holds it.
func TestDDLOnDroppedCollection(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	mustCreate(t, db, "ts", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
	c, err := db.lookup("ts")
	if err != nil {
		t.Fatal(err)
	}
	// The drop's batch has removed its record; the drop has marked it.
	if err := db.pdb.Delete(catalogKey("ts"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	c.dropped = true // and gone, as unlinkCollection marks it
	c.gone.Store(true)
	db.mu.Unlock()
	day := int64(86400)
	if _, err := db.CollMod(ctx, "ts", CollModOptions{ExpireAfterSeconds: &day}); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Fatalf("collMod of a dropped collection: %v, want NamespaceNotFound", err)
	}
	if _, err := db.CreateIndexes(ctx, "ts", []IndexSpec{{Key: key1("x")}}); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Fatalf("createIndexes on a dropped collection: %v, want NamespaceNotFound", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	re := openTest(t, dir, nil)
	defer re.Close()
	if _, err := re.Describe(ctx, "ts"); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Fatalf("the dropped collection came back: %v", err)
	}
}

// TestCreateFlushFails: a create whose catalog record reached the store
// but whose flush failed makes nothing and fails, but takes its id: a
// create tried again is made (and durable) like any, and a create of
// another name gets another id, also when the first record becomes
// durable with a later flush. After a crash each collection holds its own
// measurements.
func TestCreateFlushFails(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	ts := model.TimeSeriesOptions{TimeField: "t", MetaField: "s"}
	injected := errors.New("injected flush failure")
	for _, name := range []string{"a", "c"} {
		db.hooks.storeFlush = func() error { return injected }
		created, err := db.CreateCollection(ctx, name, CollectionOptions{TimeSeries: &ts})
		if !errors.Is(err, injected) || created {
			t.Fatalf("create %s with its flush failing: %v, %v", name, created, err)
		}
		if _, err := db.lookup(name); err == nil {
			t.Fatalf("%s exists after its create failed", name)
		}
		db.hooks.storeFlush = nil
	}
	// "a" tried again; "c" not: its record becomes durable with b's flush.
	if created, err := db.CreateCollection(ctx, "a", CollectionOptions{TimeSeries: &ts}); err != nil || !created {
		t.Fatalf("create a again: %v, %v", created, err)
	}
	mustCreate(t, db, "b", ts)
	for i, name := range []string{"a", "b"} {
		ms := []model.Measurement{{Time: 1e9, Meta: name, Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}}}
		if _, err := db.Insert(ctx, name, Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	crash(db)
	db = openTest(t, dir, nil)
	ids := map[uint32]string{}
	for _, name := range []string{"a", "b", "c"} {
		c, err := db.lookup(name)
		if err != nil {
			t.Fatalf("%s after a crash: %v", name, err)
		}
		if other, ok := ids[c.id]; ok {
			t.Fatalf("%s and %s have one id, %d", name, other, c.id)
		}
		ids[c.id] = name
	}
	for i, name := range []string{"a", "b"} {
		got := findRows(t, db, name, FindOptions{})
		if want := fmt.Sprintf("v=%d ", i); len(got) != 1 || got[0].vals != want {
			t.Fatalf("%s after a crash: %v, want one row %s", name, got, want)
		}
	}
}
