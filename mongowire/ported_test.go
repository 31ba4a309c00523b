package mongowire

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

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
// "full". The jstest's $fill has no sortBy; it runs behind the feature
// flag of $fill's development, so it does not settle whether MongoDB still
// takes locf without one. Hourglass requires sortBy with a method (9), so
// the port gives it ({val: 1}, the order $densify answers in).
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

// looseJSON writes a document as the shell's arrayEq compares it: numbers
// by value whatever their type (an int32 3 is a double 3), fields in
// their order.
func looseJSON(d bson.Raw) string {
	elems, _ := d.Elements()
	s := "{"
	for i, e := range elems {
		if i > 0 {
			s += ","
		}
		s += strconv.Quote(e.Key()) + ":" + looseValue(e.Value())
	}
	return s + "}"
}

func looseValue(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		f, _ := v.AsFloat64OK()
		return strconv.FormatFloat(f, 'g', -1, 64)
	case bson.TypeEmbeddedDocument:
		return looseJSON(v.Document())
	}
	return v.String()
}

// TestPortedFill ports the cases of MongoDB's
// jstests/aggregation/sources/fill/fill.js that use what Hourglass runs:
// locf and linear, with and without partitionByFields, a constant value,
// after $match and $project. Left out: partitionBy as an expression
// ({part: "$part"}), $cond, $add, a field path as the value, $unionWith
// and $documents (each 238 in Hourglass).
func TestPortedFill(t *testing.T) {
	f := newFixture(t, nil)
	c := plainColl(t, f, "fill", `[{"_id": 1, "linear": 1, "other": 1, "part": 1}, {"_id": 2, "linear": 1, "other": 1, "part": 2},
		{"_id": 3, "linear": null, "other": null, "part": 1}, {"_id": 4, "linear": null, "other": null, "part": 2},
		{"_id": 5, "linear": 5, "other": 10, "part": 1}, {"_id": 6, "linear": 6, "other": 2, "part": 2},
		{"_id": 7, "linear": null, "other": null, "part": 1}, {"_id": 8, "linear": 3, "other": 5, "part": 2},
		{"_id": 9, "linear": 7, "other": 15, "part": 1}, {"_id": 10, "linear": null, "other": null, "part": 2}]`)
	both := `[{"_id": 1, "linear": 1, "other": 1, "part": 1}, {"_id": 3, "linear": 3, "other": 1, "part": 1}, {"_id": 5, "linear": 5, "other": 10, "part": 1},
		{"_id": 7, "linear": 6, "other": 10, "part": 1}, {"_id": 9, "linear": 7, "other": 15, "part": 1}, {"_id": 2, "linear": 1, "other": 1, "part": 2},
		{"_id": 4, "linear": 3.5, "other": 1, "part": 2}, {"_id": 6, "linear": 6, "other": 2, "part": 2}, {"_id": 8, "linear": 3, "other": 5, "part": 2},
		{"_id": 10, "linear": null, "other": 5, "part": 2}]`
	for i, tc := range []struct{ pipe, want string }{
		{`[{"$match": {"part": 1}}, {"$project": {"other": 0, "part": 0}}, {"$fill": {"sortBy": {"_id": 1}, "output": {"linear": {"method": "linear"}}}}]`,
			`[{"_id": 1, "linear": 1}, {"_id": 3, "linear": 3}, {"_id": 5, "linear": 5}, {"_id": 7, "linear": 6}, {"_id": 9, "linear": 7}]`},
		{`[{"$project": {"linear": 0, "part": 0}}, {"$fill": {"sortBy": {"_id": 1}, "output": {"other": {"method": "locf"}}}}]`,
			`[{"_id": 1, "other": 1}, {"_id": 2, "other": 1}, {"_id": 3, "other": 1}, {"_id": 4, "other": 1}, {"_id": 5, "other": 10},
			{"_id": 6, "other": 2}, {"_id": 7, "other": 2}, {"_id": 8, "other": 5}, {"_id": 9, "other": 15}, {"_id": 10, "other": 15}]`},
		{`[{"$match": {"part": 2}}, {"$fill": {"sortBy": {"_id": 1}, "output": {"other": {"method": "locf"}, "linear": {"method": "linear"}}}}]`,
			`[{"_id": 2, "linear": 1, "other": 1, "part": 2}, {"_id": 4, "linear": 3.5, "other": 1, "part": 2}, {"_id": 6, "linear": 6, "other": 2, "part": 2},
			{"_id": 8, "linear": 3, "other": 5, "part": 2}, {"_id": 10, "linear": null, "other": 5, "part": 2}]`},
		{`[{"$fill": {"sortBy": {"_id": 1}, "output": {"other": {"method": "locf"}}, "partitionByFields": ["part"]}}]`,
			`[{"_id": 1, "linear": 1, "other": 1, "part": 1}, {"_id": 2, "linear": 1, "other": 1, "part": 2}, {"_id": 3, "linear": null, "other": 1, "part": 1},
			{"_id": 4, "linear": null, "other": 1, "part": 2}, {"_id": 5, "linear": 5, "other": 10, "part": 1}, {"_id": 6, "linear": 6, "other": 2, "part": 2},
			{"_id": 7, "linear": null, "other": 10, "part": 1}, {"_id": 8, "linear": 3, "other": 5, "part": 2}, {"_id": 9, "linear": 7, "other": 15, "part": 1},
			{"_id": 10, "linear": null, "other": 5, "part": 2}]`},
		{`[{"$fill": {"sortBy": {"_id": 1}, "output": {"linear": {"method": "linear"}}, "partitionByFields": ["part"]}}]`,
			`[{"_id": 1, "linear": 1, "other": 1, "part": 1}, {"_id": 3, "linear": 3, "other": null, "part": 1}, {"_id": 5, "linear": 5, "other": 10, "part": 1},
			{"_id": 7, "linear": 6, "other": null, "part": 1}, {"_id": 9, "linear": 7, "other": 15, "part": 1}, {"_id": 2, "linear": 1, "other": 1, "part": 2},
			{"_id": 4, "linear": 3.5, "other": null, "part": 2}, {"_id": 6, "linear": 6, "other": 2, "part": 2}, {"_id": 8, "linear": 3, "other": 5, "part": 2},
			{"_id": 10, "linear": null, "other": null, "part": 2}]`},
		{`[{"$fill": {"sortBy": {"_id": 1}, "output": {"other": {"method": "locf"}, "linear": {"method": "linear"}}, "partitionByFields": ["part"]}}]`, both},
		{`[{"$match": {"part": 1}}, {"$project": {"linear": 0, "part": 0}}, {"$fill": {"sortBy": {"_id": 1}, "output": {"other": {"value": -1}}}}]`,
			`[{"_id": 1, "other": 1}, {"_id": 3, "other": -1}, {"_id": 5, "other": 10}, {"_id": 7, "other": -1}, {"_id": 9, "other": 15}]`},
	} {
		cur, err := c.Aggregate(context.Background(), pipe(t, tc.pipe))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		var got []bson.Raw
		if err := cur.All(context.Background(), &got); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		left := map[string]int{}
		for _, d := range pipe(t, tc.want) {
			b, _ := bson.Marshal(d)
			left[looseJSON(b)]++
		}
		for _, d := range got {
			k := looseJSON(d)
			if left[k] == 0 {
				t.Errorf("case %d: unexpected document %s", i, k)
				continue
			}
			left[k]--
		}
		for k, n := range left {
			if n > 0 {
				t.Errorf("case %d: missing document %s", i, k)
			}
		}
	}
}

// TestPortedWindowTime ports MongoDB's
// jstests/aggregation/sources/setWindowFields/time.js: range windows over
// dates with units. The jstest collects each window with $push, which
// Hourglass does not run; the port reads the same windows through
// $count, $min and $max (the window's size, first and last date) and
// compares them with the jstest's windows, as sameMembers does (in any
// order).
func TestPortedWindowTime(t *testing.T) {
	f := newFixture(t, nil)
	date := func(sec float64) string {
		return time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(sec * 1000 * float64(time.Millisecond))).Format("2006-01-02T15:04:05.000Z")
	}
	var docs []string
	for _, s := range []float64{0, 1, 1.5, 2, 3, 42, 42, 43} {
		docs = append(docs, `{"x": {"$date": "`+date(s)+`"}}`)
	}
	c := plainColl(t, f, "time", "["+strings.Join(docs, ",")+"]")
	type window = rangeWindow
	dateOf := func(v bson.RawValue) string { return v.Time().UTC().Format("2006-01-02T15:04:05.000Z") }
	check := func(what, lo, hi, unit, match string, want []window) {
		t.Helper()
		p := `[{"$setWindowFields": {"partitionBy": "$partition", "sortBy": {"x": 1}, "output": {` +
			`"n": {"$count": {}, "window": {"range": [` + lo + `, ` + hi + `], "unit": "` + unit + `"}},` +
			`"lo": {"$min": "$x", "window": {"range": [` + lo + `, ` + hi + `], "unit": "` + unit + `"}},` +
			`"hi": {"$max": "$x", "window": {"range": [` + lo + `, ` + hi + `], "unit": "` + unit + `"}}}}}` + match + `]`
		checkRangeWindows(t, c, what, p, want, date, dateOf)
	}
	w := func(x float64, y ...float64) window { return window{x: x, y: y} }
	check("[-1, 0] seconds", "-1", "0", "second", "", []window{w(0, 0), w(1, 0, 1), w(1.5, 1, 1.5), w(2, 1, 1.5, 2), w(3, 2, 3), w(42, 42, 42), w(42, 42, 42), w(43, 42, 42, 43)})
	check("[-1000, 0] ms", "-1000", "0", "millisecond", "", []window{w(0, 0), w(1, 0, 1), w(1.5, 1, 1.5), w(2, 1, 1.5, 2), w(3, 2, 3), w(42, 42, 42), w(42, 42, 42), w(43, 42, 42, 43)})
	all := []float64{0, 1, 1.5, 2, 3, 42, 42, 43}
	check("unbounded below", `"unbounded"`, "0", "second", "", []window{w(0, 0), w(1, 0, 1), w(1.5, 0, 1, 1.5), w(2, 0, 1, 1.5, 2), w(3, 0, 1, 1.5, 2, 3),
		w(42, 0, 1, 1.5, 2, 3, 42, 42), w(42, 0, 1, 1.5, 2, 3, 42, 42), w(43, all...)})
	check("unbounded above", "0", `"unbounded"`, "second", "", []window{w(0, all...), w(1, all[1:]...), w(1.5, all[2:]...), w(2, all[3:]...), w(3, all[4:]...),
		w(42, 42, 42, 43), w(42, 42, 42, 43), w(43, 43)})
	var every []window
	for _, x := range all {
		every = append(every, w(x, all...))
	}
	check("unbounded", `"unbounded"`, `"unbounded"`, "second", "", every)
	at42 := `, {"$match": {"x": {"$date": "` + date(42) + `"}}}`
	check("current, current", `"current"`, `"current"`, "second", at42, []window{w(42, 42), w(42, 42)})
	check("current, +1", `"current"`, "1", "second", at42, []window{w(42, 42, 42, 43), w(42, 42, 43)})
	check("-40, current", "-40", `"current"`, "second", at42, []window{w(42, 2, 3, 42), w(42, 2, 3, 42, 42)})
	check("unbounded, -40", `"unbounded"`, "-40", "second", "", []window{w(0), w(1), w(1.5), w(2), w(3), w(42, 0, 1, 1.5, 2), w(42, 0, 1, 1.5, 2), w(43, 0, 1, 1.5, 2, 3)})
	check("+40, unbounded", "40", `"unbounded"`, "second", "", []window{w(0, 42, 42, 43), w(1, 42, 42, 43), w(1.5, 42, 42, 43), w(2, 42, 42, 43), w(3, 43), w(42), w(42), w(43)})

	// Fractional bounds with a unit are 9 (FailedToParse).
	_, err := c.Aggregate(context.Background(), pipe(t, `[{"$setWindowFields": {"sortBy": {"x": 1}, "output": {"n": {"$count": {}, "window": {"range": [-1.5, 0], "unit": "second"}}}}}]`))
	if code, msg := errCode(err); code != 9 {
		t.Errorf("fractional bound: %d %q, want 9", code, msg)
	}

	// Time windows restart at each partition.
	if _, err := c.UpdateMany(context.Background(), bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "partition", Value: "A"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertMany(context.Background(), docsOf(t, `[{"partition": "B", "x": {"$date": "`+date(43)+`"}}, {"partition": "B", "x": {"$date": "`+date(44)+`"}}, {"partition": "B", "x": {"$date": "`+date(45)+`"}}]`)); err != nil {
		t.Fatal(err)
	}
	pw := func(part string, x float64, y ...float64) window { return window{part: part, x: x, y: y} }
	check("partitions", "-5", "0", "second", "", []window{pw("A", 0, 0), pw("A", 1, 0, 1), pw("A", 1.5, 0, 1, 1.5), pw("A", 2, 0, 1, 1.5, 2), pw("A", 3, 0, 1, 1.5, 2, 3),
		pw("A", 42, 42, 42), pw("A", 42, 42, 42), pw("A", 43, 42, 42, 43), pw("B", 43, 43), pw("B", 44, 43, 44), pw("B", 45, 43, 44, 45)})

	// A sortBy value that is not a date, under a unit: 5429513.
	for _, extra := range []string{`{}`, `{"x": 0}`} {
		c := plainColl(t, f, "time2", "["+strings.Join(docs, ",")+","+extra+"]")
		_, err := c.Aggregate(context.Background(), pipe(t, `[{"$setWindowFields": {"sortBy": {"x": 1}, "output": {"n": {"$count": {}, "window": {"range": ["unbounded", "unbounded"], "unit": "second"}}}}}]`))
		if code, msg := errCode(err); code != 5429513 {
			t.Errorf("%s among dates: %d %q, want 5429513", extra, code, msg)
		}
	}
}

// TestPortedWindowRange ports MongoDB's
// jstests/aggregation/sources/setWindowFields/range.js: range windows over
// numbers, read as TestPortedWindowTime reads them ($count, $min and $max
// for the jstest's $push).
func TestPortedWindowRange(t *testing.T) {
	f := newFixture(t, nil)
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	load := func(xs ...float64) *mongo.Collection {
		var docs []string
		for _, x := range xs {
			docs = append(docs, `{"x": `+num(x)+`}`)
		}
		return plainColl(t, f, "range", "["+strings.Join(docs, ",")+"]")
	}
	c := load(0, 1, 1.5, 2, 3, 100, 100, 101)
	type window = rangeWindow
	check := func(what, lo, hi, match string, want []window) {
		t.Helper()
		win := `"window": {"range": [` + lo + `, ` + hi + `]}`
		p := `[{"$setWindowFields": {"partitionBy": "$partition", "sortBy": {"x": 1}, "output": {"n": {"$count": {}, ` + win + `},` +
			`"lo": {"$min": "$x", ` + win + `}, "hi": {"$max": "$x", ` + win + `}}}}` + match + `]`
		checkRangeWindows(t, c, what, p, want, num, looseValue)
	}
	w := func(x float64, y ...float64) window { return window{x: x, y: y} }
	all := []float64{0, 1, 1.5, 2, 3, 100, 100, 101}
	check("[-1, 0]", "-1", "0", "", []window{w(0, 0), w(1, 0, 1), w(1.5, 1, 1.5), w(2, 1, 1.5, 2), w(3, 2, 3), w(100, 100, 100), w(100, 100, 100), w(101, 100, 100, 101)})
	check("unbounded below", `"unbounded"`, "0", "", []window{w(0, 0), w(1, 0, 1), w(1.5, 0, 1, 1.5), w(2, 0, 1, 1.5, 2), w(3, 0, 1, 1.5, 2, 3),
		w(100, 0, 1, 1.5, 2, 3, 100, 100), w(100, 0, 1, 1.5, 2, 3, 100, 100), w(101, all...)})
	check("unbounded above", "0", `"unbounded"`, "", []window{w(0, all...), w(1, all[1:]...), w(1.5, all[2:]...), w(2, all[3:]...), w(3, all[4:]...),
		w(100, 100, 100, 101), w(100, 100, 100, 101), w(101, 101)})
	at100 := `, {"$match": {"x": 100}}`
	check("current, current", `"current"`, `"current"`, at100, []window{w(100, 100), w(100, 100)})
	check("current, +1", `"current"`, "1", at100, []window{w(100, 100, 100, 101), w(100, 100, 101)})
	check("-97, current", "-97", `"current"`, at100, []window{w(100, 3, 100), w(100, 3, 100, 100)})
	check("[-1, -1]", "-1", "-1", "", []window{w(0), w(1, 0), w(1.5), w(2, 1), w(3, 2), w(100), w(100), w(101, 100, 100)})
	check("[+1, +1]", "1", "1", "", []window{w(0, 1), w(1, 2), w(1.5), w(2, 3), w(3), w(100, 101), w(100, 101), w(101)})
	check("unbounded, -99", `"unbounded"`, "-99", "", []window{w(0), w(1), w(1.5), w(2), w(3), w(100, 0, 1), w(100, 0, 1), w(101, 0, 1, 1.5, 2)})
	check("+99, unbounded", "99", `"unbounded"`, "", []window{w(0, 100, 100, 101), w(1, 100, 100, 101), w(1.5, 101), w(2, 101), w(3), w(100), w(100), w(101)})
	check("+999, +999", "999", "999", "", []window{w(0), w(1), w(1.5), w(2), w(3), w(100), w(100), w(101)})

	if _, err := c.UpdateMany(context.Background(), bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "partition", Value: "A"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertMany(context.Background(), docsOf(t, `[{"partition": "B", "x": 101}, {"partition": "B", "x": 102}, {"partition": "B", "x": 103}]`)); err != nil {
		t.Fatal(err)
	}
	pw := func(part string, x float64, y ...float64) window { return window{part: part, x: x, y: y} }
	check("partitions", "-5", "0", "", []window{pw("A", 0, 0), pw("A", 1, 0, 1), pw("A", 1.5, 0, 1, 1.5), pw("A", 2, 0, 1, 1.5, 2), pw("A", 3, 0, 1, 1.5, 2, 3),
		pw("A", 100, 100, 100), pw("A", 100, 100, 100), pw("A", 101, 100, 100, 101), pw("B", 101, 101), pw("B", 102, 101, 102), pw("B", 103, 101, 102, 103)})

	// A sortBy value that is not a number: no window at all, whatever the
	// bounds.
	c = plainColl(t, f, "range", `[{"x": 0}, {"x": 1}, {}, {"x": null}, {"x": ""}, {"x": {}}]`)
	for _, b := range [][2]string{{"999", "999"}, {"-999", "999"}, {`"unbounded"`, `"unbounded"`}} {
		_, err := c.Aggregate(context.Background(), pipe(t, `[{"$setWindowFields": {"sortBy": {"x": 1}, "output": {"n": {"$count": {}, "window": {"range": [`+b[0]+`, `+b[1]+`]}}}}}]`))
		if code, msg := errCode(err); code != 5429414 || !strings.Contains(msg, "Invalid range: Expected the sortBy field to be a number") {
			t.Errorf("range %v over non-numbers: %d %q, want 5429414", b, code, msg)
		}
	}

	// Ties and expiry.
	c = load(0, 0, 0, 0, 3, 3, 3)
	check("ties", `"unbounded"`, "-3", "", []window{w(0), w(0), w(0), w(0), w(3, 0, 0, 0, 0), w(3, 0, 0, 0, 0), w(3, 0, 0, 0, 0)})
}

// rangeWindow is a ported jstest's expectation of one document: its
// partition, x, and the xs of its window.
type rangeWindow struct {
	part string
	x    float64
	y    []float64
}

// checkRangeWindows runs pipeline p, whose documents carry their window's
// count n and bounds lo and hi, on c and compares them, as a multiset,
// with want: show writes an expected x, got a document's.
func checkRangeWindows(t *testing.T, c *mongo.Collection, what, p string, want []rangeWindow, show func(float64) string, got func(bson.RawValue) string) {
	t.Helper()
	cur, err := c.Aggregate(context.Background(), pipe(t, p))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var out []bson.Raw
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	left := map[string]int{}
	for _, w := range want {
		k := fmt.Sprintf("%s %s n=%d", w.part, show(w.x), len(w.y))
		if len(w.y) > 0 {
			k += " " + show(w.y[0]) + ".." + show(w.y[len(w.y)-1])
		}
		left[k]++
	}
	for _, d := range out {
		part, _ := d.Lookup("partition").StringValueOK()
		k := fmt.Sprintf("%s %s n=%d", part, got(d.Lookup("x")), d.Lookup("n").AsInt64())
		if lo := d.Lookup("lo"); lo.Type != bson.TypeNull && lo.Type != 0 {
			k += " " + got(lo) + ".." + got(d.Lookup("hi"))
		}
		if left[k] == 0 {
			t.Errorf("%s: unexpected window %s", what, k)
			continue
		}
		left[k]--
	}
	for k, n := range left {
		if n > 0 {
			t.Errorf("%s: missing window %s", what, k)
		}
	}
}
