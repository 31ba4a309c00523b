package mongowire

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// canonicalDocs runs a pipeline and returns its documents as canonical
// Extended JSON, in their order.
func canonicalDocs(t *testing.T, c *mongo.Collection, js string) []string {
	t.Helper()
	cur, err := c.Aggregate(context.Background(), pipe(t, js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	var out []string
	for cur.Next(context.Background()) {
		b, err := bson.MarshalExtJSON(cur.Current, false, false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameDocList compares documents as MongoDB's arrayEq does: the same
// documents in any order (field order included here).
func sameDocList(t *testing.T, what string, got []string, want string) {
	t.Helper()
	var w []bson.Raw
	for _, d := range pipe(t, want) {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		w = append(w, b)
	}
	left := map[string]int{}
	for _, d := range w {
		b, _ := bson.MarshalExtJSON(d, false, false)
		left[string(b)]++
	}
	for _, g := range got {
		if left[g] == 0 {
			t.Errorf("%s: unexpected document %s", what, g)
			continue
		}
		left[g]--
	}
	for d, n := range left {
		if n > 0 {
			t.Errorf("%s: missing document %s (x%d)", what, d, n)
		}
	}
}

// TestPortedFillAndDensify ports MongoDB's
// jstests/aggregation/sources/fill/fill_and_densify.js: $densify, then
// $fill's locf, without and with partitions, with bounds "partition" and
// "full". The jstest's $fill has no sortBy (it dates from before $fill's
// release, behind a feature flag that no longer exists); MongoDB's manual
// requires sortBy with a method, as Hourglass does, so the port gives it.
func TestPortedFillAndDensify(t *testing.T) {
	f := newFixture(t, nil)
	c := plainColl(t, f, "fill_and_densify", `[{"_id": 1, "val": 0, "toFill": 1}, {"_id": 2, "val": 5, "toFill": 3}, {"_id": 3, "val": 10, "toFill": 5}]`)
	got := canonicalDocs(t, c, `[{"$project": {"_id": 0}}, {"$densify": {"field": "val", "range": {"step": 1, "bounds": "full"}}},
		{"$fill": {"sortBy": {"val": 1}, "output": {"toFill": {"method": "locf"}}}}]`)
	sameDocList(t, "basic", got, `[{"val": 0, "toFill": 1}, {"val": 1, "toFill": 1}, {"val": 2, "toFill": 1}, {"val": 3, "toFill": 1},
		{"val": 4, "toFill": 1}, {"val": 5, "toFill": 3}, {"val": 6, "toFill": 3}, {"val": 7, "toFill": 3}, {"val": 8, "toFill": 3},
		{"val": 9, "toFill": 3}, {"val": 10, "toFill": 5}]`)

	c = plainColl(t, f, "fill_and_densify", `[{"_id": 1, "val": 0, "toFill": 1, "part": 1}, {"_id": 2, "val": 5, "toFill": 3, "part": 1},
		{"_id": 3, "val": 10, "toFill": 5, "part": 1}, {"_id": 4, "val": 3, "toFill": 10, "part": 2},
		{"_id": 5, "val": 6, "toFill": 13, "part": 2}, {"_id": 6, "val": 9, "toFill": 16, "part": 2}]`)
	got = canonicalDocs(t, c, `[{"$project": {"_id": 0}}, {"$densify": {"field": "val", "range": {"step": 1, "bounds": "partition"}, "partitionByFields": ["part"]}},
		{"$fill": {"sortBy": {"val": 1}, "output": {"toFill": {"method": "locf"}}, "partitionByFields": ["part"]}}]`)
	// The generated documents hold the partition's field, then val
	// (MongoDB's order); the stored ones their own.
	sameDocList(t, "partitions", got, `[{"val": 0, "toFill": 1, "part": 1}, {"part": 1, "val": 1, "toFill": 1}, {"part": 1, "val": 2, "toFill": 1},
		{"part": 1, "val": 3, "toFill": 1}, {"part": 1, "val": 4, "toFill": 1}, {"val": 5, "toFill": 3, "part": 1},
		{"part": 1, "val": 6, "toFill": 3}, {"part": 1, "val": 7, "toFill": 3}, {"part": 1, "val": 8, "toFill": 3},
		{"part": 1, "val": 9, "toFill": 3}, {"val": 10, "toFill": 5, "part": 1},
		{"val": 3, "toFill": 10, "part": 2}, {"part": 2, "val": 4, "toFill": 10}, {"part": 2, "val": 5, "toFill": 10},
		{"val": 6, "toFill": 13, "part": 2}, {"part": 2, "val": 7, "toFill": 13}, {"part": 2, "val": 8, "toFill": 13},
		{"val": 9, "toFill": 16, "part": 2}]`)
	got = canonicalDocs(t, c, `[{"$project": {"_id": 0}}, {"$densify": {"field": "val", "range": {"step": 1, "bounds": "full"}, "partitionByFields": ["part"]}},
		{"$fill": {"sortBy": {"val": 1}, "output": {"toFill": {"method": "locf"}}, "partitionByFields": ["part"]}}]`)
	sameDocList(t, "partitions, full", got, `[
		{"val": 0, "toFill": 1, "part": 1}, {"part": 1, "val": 1, "toFill": 1}, {"part": 1, "val": 2, "toFill": 1},
		{"part": 1, "val": 3, "toFill": 1}, {"part": 1, "val": 4, "toFill": 1}, {"val": 5, "toFill": 3, "part": 1},
		{"part": 1, "val": 6, "toFill": 3}, {"part": 1, "val": 7, "toFill": 3}, {"part": 1, "val": 8, "toFill": 3},
		{"part": 1, "val": 9, "toFill": 3}, {"val": 10, "toFill": 5, "part": 1}, {"part": 2, "val": 0, "toFill": null},
		{"part": 2, "val": 1, "toFill": null}, {"part": 2, "val": 2, "toFill": null}, {"val": 3, "toFill": 10, "part": 2},
		{"part": 2, "val": 4, "toFill": 10}, {"part": 2, "val": 5, "toFill": 10}, {"val": 6, "toFill": 13, "part": 2},
		{"part": 2, "val": 7, "toFill": 13}, {"part": 2, "val": 8, "toFill": 13}, {"val": 9, "toFill": 16, "part": 2},
		{"part": 2, "val": 10, "toFill": 16}]`)
}

// TestPortedDensifyDocOnBound ports MongoDB's
// jstests/aggregation/sources/densify/doc_on_bound.js: documents before
// and exactly on explicit bounds, with and without partitions, and bounds
// "full" with a document on and off the grid.
func TestPortedDensifyDocOnBound(t *testing.T) {
	f := newFixture(t, nil)
	d := func(key int, ts string) string {
		return `{"key": ` + string(rune('0'+key)) + `, "time": {"$date": "` + ts + `"}, "orig": true}`
	}
	tail := `{"$sort": {"time": 1}}, {"$project": {"_id": 0, "time": 1, "orig": 1}}]`
	explicit := `"range": {"step": 6, "unit": "hour", "bounds": [{"$date": "2023-09-13T00:00:00Z"}, {"$date": "2023-09-16T00:00:00Z"}]}`
	c := plainColl(t, f, "doc_on_bound", "["+d(1, "2023-09-12T00:00:00Z")+","+d(1, "2023-09-13T00:00:00Z")+","+d(1, "2023-09-14T00:00:00Z")+","+d(1, "2023-09-15T00:00:00Z")+"]")
	got := canonicalDocs(t, c, `[{"$densify": {"field": "time", "partitionByFields": ["key"], `+explicit+`}}, `+tail)
	onGrid := `{"time": {"$date": "2023-09-13T06:00:00Z"}}, {"time": {"$date": "2023-09-13T12:00:00Z"}}, {"time": {"$date": "2023-09-13T18:00:00Z"}},
		{"time": {"$date": "2023-09-14T00:00:00Z"}, "orig": true}, {"time": {"$date": "2023-09-14T06:00:00Z"}}, {"time": {"$date": "2023-09-14T12:00:00Z"}},
		{"time": {"$date": "2023-09-14T18:00:00Z"}}, {"time": {"$date": "2023-09-15T00:00:00Z"}, "orig": true}, {"time": {"$date": "2023-09-15T06:00:00Z"}},
		{"time": {"$date": "2023-09-15T12:00:00Z"}}, {"time": {"$date": "2023-09-15T18:00:00Z"}}`
	sameDocList(t, "on the bounds, partitioned", got, `[{"time": {"$date": "2023-09-12T00:00:00Z"}, "orig": true},
		{"time": {"$date": "2023-09-13T00:00:00Z"}, "orig": true}, `+onGrid+`]`)

	c = plainColl(t, f, "doc_on_bound", "["+d(1, "2023-09-12T00:00:00Z")+","+d(1, "2023-09-13T00:00:00Z")+","+d(2, "2023-09-13T00:00:10Z")+","+d(1, "2023-09-14T00:00:00Z")+","+d(1, "2023-09-15T00:00:00Z")+"]")
	got = canonicalDocs(t, c, `[{"$densify": {"field": "time", `+explicit+`}}, `+tail)
	sameDocList(t, "on the bounds", got, `[{"time": {"$date": "2023-09-12T00:00:00Z"}, "orig": true},
		{"time": {"$date": "2023-09-13T00:00:00Z"}, "orig": true}, {"time": {"$date": "2023-09-13T00:00:10Z"}, "orig": true}, `+onGrid+`]`)

	c = plainColl(t, f, "doc_on_bound", "["+d(1, "2023-09-12T00:00:00Z")+","+d(2, "2023-09-12T04:00:00Z")+","+d(1, "2023-09-13T00:00:00Z")+","+
		d(1, "2023-09-14T00:00:00Z")+","+d(1, "2023-09-15T00:00:00Z")+","+d(2, "2023-09-15T18:00:00Z")+"]")
	got = canonicalDocs(t, c, `[{"$densify": {"field": "time", "partitionByFields": ["key"], "range": {"step": 6, "unit": "hour", "bounds": "full"}}}, `+tail)
	want := `[{"time": {"$date": "2023-09-12T00:00:00Z"}, "orig": true}, {"time": {"$date": "2023-09-12T00:00:00Z"}},
		{"time": {"$date": "2023-09-12T04:00:00Z"}, "orig": true}`
	for _, day := range []string{"12", "13", "14", "15"} {
		for _, h := range []string{"00", "06", "12", "18"} {
			ts := `{"time": {"$date": "2023-09-` + day + "T" + h + `:00:00Z"}`
			switch {
			case day == "12" && h == "00":
			case h == "00":
				want += ", " + ts + `, "orig": true}, ` + ts + "}"
			case day == "15" && h == "18":
				want += ", " + ts + "}, " + ts + `, "orig": true}`
			default:
				want += ", " + ts + "}, " + ts + "}"
			}
		}
	}
	sameDocList(t, "full, on and off the grid", got, want+"]")

	c = plainColl(t, f, "doc_on_bound", "["+d(1, "2023-09-13T00:00:00Z")+","+d(1, "2023-09-14T00:00:00Z")+","+d(1, "2023-09-15T00:00:00Z")+"]")
	got = canonicalDocs(t, c, `[{"$densify": {"field": "time", "partitionByFields": ["key"], "range": {"step": 6, "unit": "hour", "bounds": "full"}}}, `+tail)
	sameDocList(t, "full, one partition", got, `[{"time": {"$date": "2023-09-13T00:00:00Z"}, "orig": true}, `+strings.TrimRight(onGrid[:strings.Index(onGrid, `{"time": {"$date": "2023-09-15T06`)], ", \n\t")+`]`)
}
