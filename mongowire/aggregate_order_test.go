package mongowire

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// shape writes a document's field names in their order, a sub-document's
// in braces: "_id z sub{y b x}".
func shape(d bson.Raw) string {
	elems, _ := d.Elements()
	var parts []string
	for _, e := range elems {
		p := e.Key()
		if sub, ok := e.Value().DocumentOK(); ok {
			p += "{" + shape(sub) + "}"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// shapes runs a pipeline and returns its documents' shapes.
func shapes(t *testing.T, c *mongo.Collection, js string) []string {
	t.Helper()
	cur, err := c.Aggregate(context.Background(), pipe(t, js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	var out []string
	for cur.Next(context.Background()) {
		out = append(out, shape(cur.Current))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNestedFieldOrder: the fields stages set, at every depth, come in
// MongoDB's order: a stored document's own order, the fields a stage adds
// after them in its spec's order (a sub-field after the sub-document's
// fields), a literal or a copied value in its own order; a $group's _id,
// then its accumulators; a document $densify makes, the partition's
// fields, then the field. They came in name order below the top level.
func TestNestedFieldOrder(t *testing.T) {
	f := newFixture(t, nil)
	c := plainColl(t, f, "order", `[{"_id": 1, "z": 1, "sub": {"y": 1, "b": "x"}, "a": 2}, {"_id": 2, "z": 2, "sub": {"y": 2, "b": "x"}, "a": 3}]`)
	for _, tc := range []struct{ pipe, want string }{
		{`[{"$set": {"w": {"q": 1, "c": 2}, "sub.x": true, "v.k": 1, "v.a": 2, "lit": {"$literal": {"m": 1, "d": {"s": 1, "e": 2}}}, "cp": "$sub"}}, {"$limit": 1}]`,
			"_id z sub{y b x} a w{q c} v{k a} lit{m d{s e}} cp{y b}"},
		{`[{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"o.z": {"$sum": "$a"}, "o.a": {"$max": "$a"}, "n": {"$count": {}}}}}, {"$limit": 1}]`,
			"_id z sub{y b} a o{z a} n"},
		{`[{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"s": {"$sum": "$a"}}}}, {"$project": {"s": 1, "sub": 1, "z": 1}}, {"$limit": 1}]`,
			"_id z sub{y b} s"},
		{`[{"$match": {"z": 1}}, {"$group": {"_id": null, "zn": {"$sum": 1}, "an": {"$count": {}}}}]`, "_id zn an"},
	} {
		got := shapes(t, c, tc.pipe)
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.pipe, got, tc.want)
		}
	}

	ctx := context.Background()
	err := f.mdb.CreateCollection(ctx, "ts", options.CreateCollection().SetTimeSeriesOptions(options.TimeSeries().SetTimeField("at").SetMetaField("m")))
	if err != nil {
		t.Fatal(err)
	}
	ts := f.mdb.Collection("ts")
	if _, err := ts.InsertMany(ctx, docsOf(t, `[{"at": {"$date": "2026-01-01T00:00:00Z"}, "m": {"site": "n", "id": 1}, "v": 1.5},
		{"at": {"$date": "2026-01-01T00:03:00Z"}, "m": {"site": "n", "id": 1}, "v": 2.5}]`)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ pipe, want string }{
		{`[{"$densify": {"field": "at", "partitionByFields": ["m"], "range": {"step": 1, "unit": "minute", "bounds": "partition"}}}, {"$skip": 1}, {"$limit": 1}]`,
			"m{id site} at"},
		{`[{"$group": {"_id": {"w": {"$dateTrunc": {"date": "$at", "unit": "hour"}}, "s": "$m.site"}, "vmax": {"$max": "$v"}, "avg": {"$avg": "$v"}}}]`,
			"_id{w s} vmax avg"},
		{`[{"$group": {"_id": "$m.site", "vmax": {"$max": "$v"}}}, {"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"c": {"$count": {}}}}}]`,
			"_id vmax c"},
	} {
		got := shapes(t, ts, tc.pipe)
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.pipe, got, tc.want)
		}
	}
}
