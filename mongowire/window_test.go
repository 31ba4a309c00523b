package mongowire

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// pipe reads a pipeline written in extended JSON.
func pipe(t *testing.T, js string) bson.A {
	t.Helper()
	var doc struct{ P bson.A }
	if err := bson.UnmarshalExtJSON([]byte(`{"p": `+js+`}`), false, &doc); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return doc.P
}

// docs reads documents written in extended JSON.
func docsOf(t *testing.T, js string) []any {
	t.Helper()
	var out []any
	for _, d := range pipe(t, js) {
		out = append(out, d)
	}
	return out
}

// collect runs a pipeline on coll and returns its documents without
// _id, sorted by the fields named.
func collect(t *testing.T, coll *mongo.Collection, p bson.A, by ...string) []map[string]any {
	t.Helper()
	cur, err := coll.Aggregate(context.Background(), p)
	if err != nil {
		t.Fatalf("aggregate %v: %v", p, err)
	}
	var out []bson.M
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatalf("aggregate %v: %v", p, err)
	}
	docs := asMaps(out)
	for _, d := range docs {
		delete(d, "_id")
	}
	sort.SliceStable(docs, func(i, j int) bool {
		for _, f := range by {
			if c := partialfilter.Compare(docs[i][f], docs[j][f]); c != 0 {
				return c < 0
			}
		}
		return false
	})
	return docs
}

// plainColl makes a plain collection of docs.
func plainColl(t *testing.T, f *fixture, name, js string) *mongo.Collection {
	t.Helper()
	c := f.mdb.Collection(name)
	if err := c.Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertMany(context.Background(), docsOf(t, js)); err != nil {
		t.Fatal(err)
	}
	return c
}

// num reads a number of a result, nil as NaN.
func num(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return math.NaN()
}

// wantField checks one field of results sorted as collect sorts them.
func wantField(t *testing.T, what string, got []map[string]any, field string, want ...any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d documents, want %d: %v", what, len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i][field]
		if w == nil {
			if g != nil {
				t.Errorf("%s: document %d %s = %v, want null", what, i, field, g)
			}
			continue
		}
		if ws, ok := w.(string); ok {
			if g != ws {
				t.Errorf("%s: document %d %s = %v, want %q", what, i, field, g, ws)
			}
			continue
		}
		if wf := num(w); math.IsNaN(wf) || !(math.Abs(num(g)-wf) <= 1e-9*math.Max(1, math.Abs(wf))) {
			t.Errorf("%s: document %d %s = %v, want %v", what, i, field, g, w)
		}
	}
}

// TestWindowDerivative ports cases of MongoDB's
// jstests/aggregation/sources/setWindowFields/derivative.js.
func TestWindowDerivative(t *testing.T) {
	f := newFixture(t, nil)
	c := plainColl(t, f, "deriv", `[{"sensor": "A", "time": 0, "y": 1}, {"sensor": "A", "time": 1, "y": 2},
		{"sensor": "A", "time": 2, "y": 1}, {"sensor": "A", "time": 3, "y": 4},
		{"sensor": "B", "time": 0, "y": 100}, {"sensor": "B", "time": 1, "y": 105},
		{"sensor": "B", "time": 2, "y": 107}, {"sensor": "B", "time": 3, "y": 104}]`)
	got := collect(t, c, pipe(t, `[{"$setWindowFields": {"partitionBy": "$sensor", "sortBy": {"time": 1},
		"output": {"dy": {"$derivative": {"input": "$y"}, "window": {"documents": [-1, 0]}}}}}]`), "sensor", "time")
	wantField(t, "partitioned", got, "dy", nil, 1, -1, 3, nil, 5, 2, -3)

	c = plainColl(t, f, "deriv", `[{"time": 0, "y": 100}, {"time": 1, "y": 105}, {"time": 2, "y": 108}, {"time": 3, "y": 108},
		{"time": 4, "y": 115}, {"time": 5, "y": 115}, {"time": 6, "y": 118}, {"time": 7, "y": 118}]`)
	want := []any{5.0, 8.0 / 2, 8.0 / 3, 15.0 / 4, 10.0 / 4, 10.0 / 4, 10.0 / 4, 3.0 / 3}
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"time": 1},
		"output": {"dy": {"$derivative": {"input": "$y"}, "window": {"documents": [-3, 1]}}}}}]`), "time")
	wantField(t, "[-3, +1]", got, "dy", want...)
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"time": -1},
		"output": {"dy": {"$derivative": {"input": "$y"}, "window": {"documents": [-1, 3]}}}}}]`), "time")
	wantField(t, "descending [-1, +3]", got, "dy", want...)

	c = plainColl(t, f, "deriv", `[{"time": 0, "y": 10}, {"time": 10, "y": 12}, {"time": 11, "y": 15},
		{"time": 12, "y": 19}, {"time": 13, "y": 24}, {"time": 20, "y": 30}]`)
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"time": 1},
		"output": {"dy": {"$derivative": {"input": "$y"}, "window": {"range": [-10, 0]}}}}}]`), "time")
	wantField(t, "range", got, "dy", nil, 2.0/10, 3.0/1, 7.0/2, 12.0/3, 18.0/10)

	c = plainColl(t, f, "deriv", `[{"time": {"$date": "2020-01-01T00:00:00.000Z"}, "y": 5}, {"time": {"$date": "2020-01-01T00:00:00.001Z"}, "y": 4},
		{"time": {"$date": "2020-01-01T00:00:00.002Z"}, "y": 6}, {"time": {"$date": "2020-01-01T00:00:00.003Z"}, "y": 5}]`)
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"time": 1},
		"output": {"dy": {"$derivative": {"input": "$y", "unit": "minute"}, "window": {"documents": [-1, 0]}}}}}]`), "time")
	wantField(t, "per minute", got, "dy", nil, -60000, 120000, -60000)
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"time": 1},
		"output": {"dy": {"$derivative": {"input": "$y", "unit": "millisecond"}, "window": {"documents": ["unbounded", "unbounded"]}}}}}]`), "time")
	wantField(t, "unbounded", got, "dy", 0, 0, 0, 0)

	for _, c2 := range []struct {
		coll *mongo.Collection
		js   string
		code int32
	}{
		{c, `[{"$setWindowFields": {"sortBy": {"time": 1}, "output": {"dy": {"$derivative": {"input": "$y"}}}}}]`, 9},
		{c, `[{"$setWindowFields": {"sortBy": {"time": 1}, "output": {"dy": {"$derivative": {"input": "$y"}, "window": {"documents": [-1, 0]}}}}}]`, 5624901},
		{c, `[{"$setWindowFields": {"sortBy": {"time": 1}, "output": {"dy": {"$derivative": {"input": "$y", "unit": "month"}, "window": {"documents": [-1, 0]}}}}}]`, 5490710},
		{plainColl(t, f, "deriv2", `[{"time": 0, "y": 100}, {"time": 1, "y": 100}]`),
			`[{"$setWindowFields": {"sortBy": {"time": 1}, "output": {"dy": {"$derivative": {"input": "$y", "unit": "millisecond"}, "window": {"documents": [-1, 0]}}}}}]`, 5624900},
	} {
		_, err := c2.coll.Aggregate(context.Background(), pipe(t, c2.js))
		if code, msg := errCode(err); code != c2.code {
			t.Errorf("%s: code %d %q, want %d", c2.js, code, msg, c2.code)
		}
	}
}

// TestWindowShiftAndEMA ports cases of shift.js, exp_moving_avg.js,
// integral.js and empty_window.js.
func TestWindowShiftAndEMA(t *testing.T) {
	f := newFixture(t, nil)
	var js []string
	for i := range 10 {
		js = append(js, fmt.Sprintf(`{"one": %d, "partition": %d, "price": %d}`, i, i%2, 100+i*i%17))
	}
	c := plainColl(t, f, "shift", "["+strings.Join(js, ",")+"]")
	got := collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"one": 1}, "output": {"a": {"$shift": {"by": -1, "output": "$one", "default": -10}}}}}]`), "one")
	wantField(t, "shift -1", got, "a", -10, 0, 1, 2, 3, 4, 5, 6, 7, 8)
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"one": -1}, "output": {"a": {"$shift": {"by": 1, "output": "$one"}}}}}]`), "one")
	wantField(t, "shift +1 descending", got, "a", nil, 0, 1, 2, 3, 4, 5, 6, 7, 8)
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"partitionBy": "$partition", "sortBy": {"one": 1}, "output": {"a": {"$shift": {"by": 1, "output": "$one"}}}}}]`), "one")
	wantField(t, "partitioned shift +1", got, "a", 2, 3, 4, 5, 6, 7, 8, 9, nil, nil)

	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"one": 1}, "output": {"e": {"$expMovingAvg": {"input": "$price", "N": 3}}}}}]`), "one")
	var ema []any
	var last float64
	for i := range 10 {
		p := float64(100 + i*i%17)
		if i == 0 {
			last = p
		} else {
			last = p*0.5 + last*0.5
		}
		ema = append(ema, last)
	}
	wantField(t, "$expMovingAvg N 3", got, "e", ema...)
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"one": 1}, "output": {"e": {"$expMovingAvg": {"input": "$nothing", "alpha": 0.5}}}}}]`), "one")
	wantField(t, "$expMovingAvg of nothing", got, "e", nil, nil, nil, nil, nil, nil, nil, nil, nil, nil)

	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"partitionBy": "$partition", "output": {"s": {"$sum": "$one"}, "d": {"$sum": 0.5}, "n": {"$count": {}}}}}]`), "one")
	for _, d := range got {
		if s, ok := d["s"].(int32); !ok || s != []int32{20, 25}[int(num(d["partition"]))] {
			t.Errorf("$sum of int32s: %v (%T), want an int32", d["s"], d["s"])
		}
		if d["d"] != 2.5 || d["n"] != int32(5) {
			t.Errorf("$sum: 0.5 and $count: %v (%T) and %v (%T), want 2.5 and int32 5", d["d"], d["d"], d["n"], d["n"])
		}
	}

	c = plainColl(t, f, "shift", `[{"_id": 1}, {"_id": 2}]`)
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"a": {"$shift": {"output": "$b", "by": 1, "default": "c"}}}}}]`))
	wantField(t, "shift of a missing field", got, "a", "c", "c")

	c = plainColl(t, f, "integral", `[{"x": 0, "y": 0}, {"x": 1, "y": 42}, {"x": 3, "y": 67}, {"x": 7, "y": 99}, {"x": 10, "y": 20}]`)
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"x": 1}, "output": {"i": {"$integral": {"input": "$y"}}}}}]`), "x")
	wantField(t, "$integral", got, "i", 640.5, 640.5, 640.5, 640.5, 640.5)
	got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"x": 1}, "output": {"i": {"$integral": {"input": "$y"}, "window": {"documents": [-1, 0]}}}}}]`), "x")
	wantField(t, "$integral [-1, 0]", got, "i", 0, 21, 109, 332, 178.5)

	c = plainColl(t, f, "empty", `[{"ticker": "MDB", "price": 1000, "ts": {"$date": "2021-01-01T00:00:00Z"}}]`)
	for _, w := range []string{`{"documents": ["unbounded", "current"]}`, `{"documents": ["unbounded", -1]}`} {
		in := `"$noField"`
		if strings.Contains(w, "-1") {
			in = `"$price"`
		}
		got = collect(t, c, pipe(t, `[{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {
			"s": {"$sum": `+in+`, "window": `+w+`}, "a": {"$avg": `+in+`, "window": `+w+`},
			"mn": {"$min": `+in+`, "window": `+w+`}, "mx": {"$max": `+in+`, "window": `+w+`}}}}]`))
		wantField(t, "empty $sum "+w, got, "s", 0)
		wantField(t, "empty $avg "+w, got, "a", nil)
		wantField(t, "empty $min "+w, got, "mn", nil)
		wantField(t, "empty $max "+w, got, "mx", nil)
	}
}

// TestWindowRefusals checks the codes of invalid and unsupported specs
// (parse.js, exp_moving_avg.js, shift.js).
func TestWindowRefusals(t *testing.T) {
	f := newFixture(t, nil)
	c := plainColl(t, f, "parse", `[{"a": 1, "ts": 1}]`)
	for _, tc := range []struct {
		js    string
		code  int32
		names string
	}{
		{`{"$setWindowFields": "invalid"}`, 9, ""},
		{`{"$setWindowFields": {"sortBy": "invalid", "output": {}}}`, 14, ""},
		{`{"$setWindowFields": {"output": "invalid"}}`, 14, ""},
		{`{"$setWindowFields": {"what_is_this": 1}}`, 40415, "what_is_this"},
		{`{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {"v": {"$sum": "$a", "window": {"documents": [1, -1]}}}}}`, 5339900, ""},
		{`{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {"v": {"$sum": "$a", "window": {"range": ["current", -1], "unit": "day"}}}}}`, 5339900, ""},
		{`{"$setWindowFields": {"output": {"v": {"$sum": "$a", "window": {"documents": ["unbounded", "current"]}}}}}`, 5339901, ""},
		{`{"$setWindowFields": {"output": {"v": {"$sum": "$a", "window": {"range": ["unbounded", "unbounded"]}}}}}`, 5339902, ""},
		{`{"$setWindowFields": {"output": {"v": {"$summ": "$a"}}}}`, 9, "$summ"},
		{`{"$setWindowFields": {"output": {"v": {"b": {"$sum": "$a"}}}}}`, 9, "$-prefixed"},
		{`{"$setWindowFields": {"output": {"a": {"$sum": 1}, "a.b": {"$sum": 1}}}}`, 6307900, "conflicting"},
		{`{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {"e": {"$expMovingAvg": {"input": "$a", "alpha": 0.5, "N": 2}}}}}`, 9, ""},
		{`{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {"e": {"$expMovingAvg": {"input": "$a", "alpha": 1.0}}}}}`, 9, ""},
		{`{"$setWindowFields": {"output": {"e": {"$expMovingAvg": {"input": "$a", "N": 1}}}}}`, 9, ""},
		{`{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {"a": {"$shift": {"by": 1.1, "output": "$a"}}}}}`, 9, ""},
		{`{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {"a": {"$shift": {"by": 1, "output": "$a", "default": "$a"}}}}}`, 9, ""},
		{`{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {"a": {"$stdDevPop": "$a"}}}}`, 238, "$stdDevPop"},
		{`{"$setWindowFields": {"partitionBy": {"$mod": ["$a", 2]}, "output": {"a": {"$sum": "$a"}}}}`, 238, "partitionBy"},
		{`{"$setWindowFields": {"sortBy": {"ts": 1, "a": 1}, "output": {"a": {"$sum": "$a"}}}}`, 238, "sortBy"},
		{`{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {"v": {"$sum": {"$add": ["$a", 1]}}}}}`, 238, "$add"},
		{`{"$setWindowFields": {"sortBy": {"ts": -1}, "output": {"v": {"$sum": "$a", "window": {"range": [-1, 0]}}}}}`, 238, "descending"},
	} {
		_, err := c.Aggregate(context.Background(), pipe(t, "["+tc.js+"]"))
		if code, msg := errCode(err); code != tc.code || !strings.Contains(msg, tc.names) {
			t.Errorf("%s: code %d %q, want %d naming %q", tc.js, code, msg, tc.code, tc.names)
		}
	}
	// A range over a sortBy value that is not a number (range_wrong_type.js).
	c = plainColl(t, f, "wrongtype", `[{"a": 2}, {"a": "xyz"}]`)
	_, err := c.Aggregate(context.Background(), pipe(t, `[{"$setWindowFields": {"sortBy": {"a": 1}, "output": {"b": {"$max": 5, "window": {"range": [3, "unbounded"]}}}}}]`))
	if code, msg := errCode(err); code != 5429414 {
		t.Errorf("range over a string: code %d %q, want 5429414", code, msg)
	}
}

// TestWindowOnTimeSeries runs moving averages over a time-series
// collection, partitioned by the metaField (read in the engine's order,
// series by series) and by a sub-field of it (sorted by the stage), and
// compares them with a loop over the measurements.
func TestWindowOnTimeSeries(t *testing.T) {
	f := newAggFixture(t)
	type m struct {
		ts   time.Time
		id   int32
		temp float64
	}
	var ms []m
	for i := range aggCount {
		ms = append(ms, m{f.t0.Add(time.Duration(7*i) * time.Second), int32(i % 6), 10 + float64(i*37%101)/4})
	}
	// A 5-minute trailing average per sensor, and the document count.
	want := map[string][2]float64{}
	for _, a := range ms {
		var sum, n float64
		for _, b := range ms {
			if b.id == a.id && !b.ts.After(a.ts) && b.ts.After(a.ts.Add(-5*time.Minute-time.Nanosecond)) {
				sum += b.temp
				n++
			}
		}
		want[fmt.Sprint(a.id, a.ts.UnixMilli())] = [2]float64{sum / n, n}
	}
	for _, part := range []string{"$sensor", "$sensor.id"} {
		got := f.aggregate(t, pipe(t, `[{"$match": {"temp": {"$gte": 0}}}, {"$setWindowFields": {"partitionBy": "`+part+`", "sortBy": {"ts": 1},
			"output": {"avg": {"$avg": "$temp", "window": {"range": [-5, "current"], "unit": "minute"}},
			           "n": {"$count": {}, "window": {"range": [-5, 0], "unit": "minute"}}}}}]`))
		if len(got) != aggCount {
			t.Fatalf("%s: %d documents, want %d", part, len(got), aggCount)
		}
		for _, d := range got {
			id := int32(num(d["sensor"].(map[string]any)["id"]))
			ts := d["ts"].(bson.DateTime).Time()
			w := want[fmt.Sprint(id, ts.UnixMilli())]
			if math.Abs(num(d["avg"])-w[0]) > 1e-9 || num(d["n"]) != w[1] {
				t.Fatalf("%s: sensor %d at %v: avg %v n %v, want %v", part, id, ts, d["avg"], d["n"], w)
			}
		}
	}
	// Without partitionBy, the engine's time order; then the stages after.
	got := f.aggregate(t, pipe(t, `[{"$setWindowFields": {"sortBy": {"ts": -1},
		"output": {"prev": {"$shift": {"output": "$temp", "by": -1}}}}}, {"$limit": 3}, {"$project": {"prev": 1, "temp": 1}}]`))
	if len(got) != 3 || got[0]["prev"] != nil || num(got[1]["prev"]) != ms[aggCount-1].temp || num(got[2]["prev"]) != ms[aggCount-2].temp {
		t.Errorf("$shift over time descending, then $limit 3: %v", got)
	}
}

// TestSetAndUnsetStages runs $addFields, $set and $unset over the wire:
// with $setWindowFields as MongoDB's jstests use them, after a $group,
// and their refusals.
func TestSetAndUnsetStages(t *testing.T) {
	f := newFixture(t, nil)
	c := plainColl(t, f, "fields", `[{"_id": 1, "one": 1, "n": {"a": 1}}, {"_id": 2, "one": 2, "n": {"a": 2}}, {"_id": 3, "one": 3}]`)
	// exp_moving_avg.js: a string added to every document averages to null.
	cur, err := c.Aggregate(context.Background(), pipe(t, `[{"$addFields": {"str": "hiya"}},
		{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"e": {"$expMovingAvg": {"input": "$str", "N": 2}}}}}, {"$unset": "_id"}]`))
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.M
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	for _, d := range out {
		if _, has := d["_id"]; has || d["str"] != "hiya" || d["e"] != nil {
			t.Errorf("$addFields, $expMovingAvg of a string, $unset _id: %v", d)
		}
	}
	got := collect(t, c, pipe(t, `[{"$set": {"two": "$one", "lit": {"$literal": "$one"}, "n.b": 5, "gone": "$nothing"}}, {"$unset": ["n.a", "one"]}]`), "two")
	wantField(t, "$set of a path", got, "two", 1, 2, 3)
	wantField(t, "$set of a $literal", got, "lit", "$one", "$one", "$one")
	for _, d := range got {
		if _, has := d["one"]; has {
			t.Errorf("$unset one: %v", d)
		}
		if _, has := d["gone"]; has {
			t.Errorf("$set of a missing path set it: %v", d)
		}
		if n, _ := d["n"].(map[string]any); len(n) != 1 || n["b"] != int32(5) {
			t.Errorf("$set n.b, $unset n.a: %v", d)
		}
	}
	// After a $count, on its result.
	got = collect(t, c, pipe(t, `[{"$count": "n"}, {"$set": {"m": "$n"}}]`))
	wantField(t, "$set after $count", got, "m", 3)
	for _, tc := range []struct {
		js   string
		code int32
	}{
		{`[{"$set": {"a": {"$add": ["$one", 1]}}}]`, 238},
		{`[{"$addFields": {"$a": 1}}]`, 16410},
		{`[{"$unset": []}]`, 31119},
		{`[{"$unset": 1}]`, 31002},
		{`[{"$set": {"n": 1, "n.a": 2}}]`, 31250},
	} {
		_, err := c.Aggregate(context.Background(), pipe(t, tc.js))
		if code, msg := errCode(err); code != tc.code {
			t.Errorf("%s: code %d %q, want %d", tc.js, code, msg, tc.code)
		}
	}
}

// TestFillStage runs $fill over the wire on the examples of MongoDB's
// $fill documentation (a constant, linear interpolation, the last value
// carried forward, partitions) and its refusals.
func TestFillStage(t *testing.T) {
	f := newFixture(t, nil)
	c := plainColl(t, f, "stock", `[
		{"time": {"$date": "2021-03-08T09:00:00.500Z"}, "price": 500},
		{"time": {"$date": "2021-03-08T10:00:00.500Z"}},
		{"time": {"$date": "2021-03-08T11:00:00.500Z"}, "price": 515},
		{"time": {"$date": "2021-03-08T12:00:00.500Z"}},
		{"time": {"$date": "2021-03-08T13:00:00.500Z"}},
		{"time": {"$date": "2021-03-08T14:00:00.500Z"}, "price": 530}]`)
	got := collect(t, c, pipe(t, `[{"$fill": {"sortBy": {"time": 1}, "output": {"price": {"method": "linear"}}}}]`), "time")
	wantField(t, "linear", got, "price", 500, 507.5, 515, 520, 525, 530)
	got = collect(t, c, pipe(t, `[{"$fill": {"sortBy": {"time": 1}, "output": {"price": {"method": "locf"}}}}]`), "time")
	wantField(t, "locf", got, "price", 500, 500, 515, 515, 515, 530)
	got = collect(t, c, pipe(t, `[{"$fill": {"output": {"price": {"value": 0}}}}]`), "time")
	wantField(t, "value", got, "price", 500, 0, 515, 0, 0, 530)

	c = plainColl(t, f, "restaurant", `[
		{"date": {"$date": "2021-03-08T00:00:00Z"}, "restaurant": "Joe's Pizza", "score": 90},
		{"date": {"$date": "2021-03-08T00:00:00Z"}, "restaurant": "Sal's Pizza", "score": 75},
		{"date": {"$date": "2021-03-09T00:00:00Z"}, "restaurant": "Joe's Pizza", "score": 92},
		{"date": {"$date": "2021-03-09T00:00:00Z"}, "restaurant": "Sal's Pizza", "score": null},
		{"date": {"$date": "2021-03-10T00:00:00Z"}, "restaurant": "Joe's Pizza"},
		{"date": {"$date": "2021-03-10T00:00:00Z"}, "restaurant": "Sal's Pizza", "score": 68},
		{"date": {"$date": "2021-03-11T00:00:00Z"}, "restaurant": "Joe's Pizza", "score": 93},
		{"date": {"$date": "2021-03-11T00:00:00Z"}, "restaurant": "Sal's Pizza"}]`)
	for _, part := range []string{`"partitionBy": {"restaurant": "$restaurant"}`, `"partitionBy": "$restaurant"`, `"partitionByFields": ["restaurant"]`} {
		if strings.Contains(part, "{") {
			_, err := c.Aggregate(context.Background(), pipe(t, `[{"$fill": {`+part+`, "sortBy": {"date": 1}, "output": {"score": {"method": "locf"}}}}]`))
			if code, _ := errCode(err); code != 238 {
				t.Errorf("$fill partitionBy an expression: code %d, want 238", code)
			}
			continue
		}
		got = collect(t, c, pipe(t, `[{"$fill": {`+part+`, "sortBy": {"date": 1}, "output": {"score": {"method": "locf"}}}}]`), "restaurant", "date")
		wantField(t, "locf by restaurant "+part, got, "score", 90, 92, 92, 93, 75, 75, 68, 68)
	}
	for _, tc := range []struct {
		js   string
		code int32
	}{
		{`[{"$fill": {"partitionBy": "$a", "partitionByFields": ["a"], "sortBy": {"date": 1}, "output": {"score": {"method": "locf"}}}}]`, 6050204},
		{`[{"$fill": {"output": {"score": {"method": "locf"}}}}]`, 9},
		{`[{"$fill": {"sortBy": {"date": 1}, "output": {"score": {"method": "nearest"}}}}]`, 9},
		{`[{"$fill": {"sortBy": {"date": 1}, "output": {"score": {"method": "linear"}}}}]`, 6050106},
		{`[{"$fill": {"sortBy": {"date": 1}, "output": {"score": {"value": "$other"}}}}]`, 238},
		{`[{"$fill": {"sortBy": {"date": 1}, "output": {"score": {"value": 1}}, "extra": 1}}]`, 40415},
	} {
		_, err := c.Aggregate(context.Background(), pipe(t, tc.js))
		if code, msg := errCode(err); code != tc.code {
			t.Errorf("%s: code %d %q, want %d", tc.js, code, msg, tc.code)
		}
	}
}

// TestFillOnTimeSeries fills the missing hum of a time series by the
// metaField (read in the engine's order) and compares it with a loop.
func TestFillOnTimeSeries(t *testing.T) {
	f := newAggFixture(t)
	got := f.aggregate(t, pipe(t, `[{"$fill": {"partitionByFields": ["sensor"], "sortBy": {"ts": 1}, "output": {"hum": {"method": "locf"}}}}]`))
	if len(got) != aggCount {
		t.Fatalf("%d documents, want %d", len(got), aggCount)
	}
	byKey := map[string]any{}
	for _, d := range got {
		id := int(num(d["sensor"].(map[string]any)["id"]))
		byKey[fmt.Sprint(id, d["ts"].(bson.DateTime).Time().UnixMilli())] = d["hum"]
	}
	prev := map[int]any{}
	for i := range aggCount {
		id := i % 6
		want := prev[id]
		if i%5 != 0 {
			want = int32(i % 13)
			prev[id] = want
		}
		k := fmt.Sprint(id, f.t0.Add(time.Duration(7*i)*time.Second).UnixMilli())
		if g := byKey[k]; !(g == nil && want == nil) && num(g) != num(want) {
			t.Fatalf("measurement %d: hum %v, want %v", i, g, want)
		}
	}
}

// TestDensifyStage runs $densify over the wire: hourly dates filled
// between explicit bounds, numbers by partition with "partition" and
// "full" bounds, on a time series by the metaField, and refusals.
func TestDensifyStage(t *testing.T) {
	f := newFixture(t, nil)
	c := plainColl(t, f, "weather", `[
		{"ts": {"$date": "2021-05-18T00:00:00Z"}, "temp": 12},
		{"ts": {"$date": "2021-05-18T04:00:00Z"}, "temp": 11},
		{"ts": {"$date": "2021-05-18T08:00:00Z"}, "temp": 11},
		{"ts": {"$date": "2021-05-18T12:00:00Z"}, "temp": 12}]`)
	got := collect(t, c, pipe(t, `[{"$densify": {"field": "ts", "range": {"step": 1, "unit": "hour",
		"bounds": [{"$date": "2021-05-18T00:00:00Z"}, {"$date": "2021-05-18T08:00:00Z"}]}}}]`), "ts")
	if len(got) != 10 {
		t.Fatalf("hourly from 00:00 to 08:00 (exclusive), then the 08:00 and 12:00 documents: %d documents: %v", len(got), got)
	}
	for i, d := range got[:8] {
		ts := d["ts"].(bson.DateTime).Time().UTC()
		if ts.Hour() != i || (i%4 == 0) != (d["temp"] != nil) {
			t.Errorf("document %d: %v", i, d)
		}
	}

	c = plainColl(t, f, "coffee", `[
		{"altitude": 600, "variety": "Arabica Typica", "score": 68.3},
		{"altitude": 750, "variety": "Arabica Typica", "score": 69.5},
		{"altitude": 950, "variety": "Arabica Typica", "score": 70.5},
		{"altitude": 1250, "variety": "Gesha", "score": 88.15},
		{"altitude": 1700, "variety": "Gesha", "score": 95.5, "price": 1029}]`)
	got = collect(t, c, pipe(t, `[{"$densify": {"field": "altitude", "partitionByFields": ["variety"], "range": {"step": 200, "bounds": "partition"}}}]`), "variety", "altitude")
	wantField(t, "by partition", got, "altitude", 600, 750, 800, 950, 1250, 1450, 1650, 1700)
	wantField(t, "by partition", got, "variety", "Arabica Typica", "Arabica Typica", "Arabica Typica", "Arabica Typica", "Gesha", "Gesha", "Gesha", "Gesha")
	got = collect(t, c, pipe(t, `[{"$densify": {"field": "altitude", "partitionByFields": ["variety"], "range": {"step": 200, "bounds": "full"}}}]`), "variety", "altitude")
	wantField(t, "full", got, "altitude", 600, 750, 800, 950, 1000, 1200, 1400, 1600, 600, 800, 1000, 1200, 1250, 1400, 1600, 1700)

	// A time series by its metaField: the engine's order.
	ts := f.mdb.Collection("sensors")
	if err := f.mdb.CreateCollection(context.Background(), "sensors", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("t").SetMetaField("m"))); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.InsertMany(context.Background(), docsOf(t, `[
		{"t": {"$date": "2024-01-01T00:00:00Z"}, "m": "a", "v": 1}, {"t": {"$date": "2024-01-01T00:03:00Z"}, "m": "a", "v": 2},
		{"t": {"$date": "2024-01-01T00:01:00Z"}, "m": "b", "v": 3}, {"t": {"$date": "2024-01-01T00:02:00Z"}, "m": "b", "v": 4}]`)); err != nil {
		t.Fatal(err)
	}
	got = collect(t, ts, pipe(t, `[{"$densify": {"field": "t", "partitionByFields": ["m"], "range": {"step": 1, "unit": "minute", "bounds": "partition"}}}]`), "m", "t")
	wantField(t, "time series by series", got, "v", 1, nil, nil, 2, 3, 4)

	for _, tc := range []struct {
		js   string
		code int32
	}{
		{`[{"$densify": {"field": "altitude", "range": {"step": 200, "unit": "month", "bounds": "full"}}}]`, 238},
		{`[{"$densify": {"field": "altitude", "range": {"step": -1, "bounds": "full"}}}]`, 9},
		{`[{"$densify": {"field": "altitude", "range": {"step": 1, "bounds": "full"}, "other": 1}}]`, 40415},
		{`[{"$densify": {"field": "altitude", "range": {"step": 1, "unit": "hour", "bounds": "full"}}}]`, 14},
		{`[{"$densify": {"field": "altitude", "range": {"step": 0.001, "bounds": [0, 1000]}}}]`, 5897900},
	} {
		_, err := c.Aggregate(context.Background(), pipe(t, tc.js))
		if code, msg := errCode(err); code != tc.code {
			t.Errorf("%s: code %d %q, want %d", tc.js, code, msg, tc.code)
		}
	}
}

// TestStageFieldOrder checks that documents come out of the stream stages
// with their fields in the order stored, and the fields a stage adds
// after them, as MongoDB answers.
func TestStageFieldOrder(t *testing.T) {
	f := newFixture(t, nil)
	c := plainColl(t, f, "order", `[{"_id": 1, "z": 1, "a": 2, "m": {"y": 1, "b": 2}}, {"_id": 2, "z": 2, "a": 3}]`)
	cur, err := c.Aggregate(context.Background(), pipe(t, `[{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"s": {"$sum": "$a"}, "a": {"$max": "$a"}}}}, {"$set": {"c": 1}}]`))
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.D
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("%d documents", len(out))
	}
	var names []string
	for _, e := range out[0] {
		names = append(names, e.Key)
	}
	if got := strings.Join(names, ","); got != "_id,z,a,m,s,c" {
		t.Errorf("fields %s, want _id,z,a,m,s,c (stored order, then the added ones in the order added)", got)
	}
}

// TestStageMemoryOverTheWire runs window stages over 20,000 measurements
// (about 5 MB as the stages count them) on a server whose stages may hold
// 64 KiB: in the engine's order (by series, or by time) they stream and
// hold only their windows; in another order the stage's sort of the
// whole input is refused with 292.
func TestStageMemoryOverTheWire(t *testing.T) {
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, addr := serveDB(t, db, Options{StageMemory: 64 << 10})
	mdb := connect(t, addr, "").Database("test")
	ctx := context.Background()
	if err := mdb.CreateCollection(ctx, "big", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("ts").SetMetaField("sensor"))); err != nil {
		t.Fatal(err)
	}
	const n = 20_000
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "ts", Value: t0.Add(time.Duration(i) * time.Second)},
			{Key: "sensor", Value: bson.D{{Key: "id", Value: int32(i % 4)}}}, {Key: "temp", Value: float64(i % 17)}}
	}
	coll := mdb.Collection("big")
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	count := func(p bson.A) (int, error) {
		cur, err := coll.Aggregate(ctx, p)
		if err != nil {
			return 0, err
		}
		defer cur.Close(ctx)
		k := 0
		for cur.Next(ctx) {
			k++
		}
		return k, cur.Err()
	}
	for _, p := range []string{
		`[{"$setWindowFields": {"partitionBy": "$sensor", "sortBy": {"ts": 1}, "output": {"a": {"$avg": "$temp", "window": {"documents": [-10, 0]}}}}}]`,
		`[{"$setWindowFields": {"sortBy": {"ts": -1}, "output": {"a": {"$avg": "$temp", "window": {"documents": [-5, 5]}}}}}]`,
		`[{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {"a": {"$avg": "$temp", "window": {"range": [-60, 0], "unit": "second"}}}}}]`,
		`[{"$fill": {"partitionByFields": ["sensor"], "sortBy": {"ts": 1}, "output": {"hum": {"method": "linear"}}}}]`,
	} {
		if k, err := count(pipe(t, p)); err != nil || k != n {
			t.Errorf("%s: %d documents, %v; want %d", p, k, err, n)
		}
	}
	_, err = count(pipe(t, `[{"$setWindowFields": {"partitionBy": "$sensor.id", "sortBy": {"ts": 1}, "output": {"a": {"$avg": "$temp", "window": {"documents": [-10, 0]}}}}}]`))
	if code, msg := errCode(err); code != 292 {
		t.Errorf("a window over a sort of everything: code %d %q, want 292", code, msg)
	}
}

// TestWindowPartitionAcrossSeries: two series whose meta values are one
// partition (1 and 1.0) make one partition, in time order across both, as
// MongoDB has it; the engine's order by series would give them one after
// the other, so the stage sorts.
func TestWindowPartitionAcrossSeries(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if err := f.mdb.CreateCollection(ctx, "m", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("t").SetMetaField("s"))); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	if _, err := f.mdb.Collection("m").InsertMany(ctx, []any{
		bson.D{{Key: "t", Value: at(0)}, {Key: "s", Value: int32(1)}, {Key: "v", Value: 1}},
		bson.D{{Key: "t", Value: at(1000)}, {Key: "s", Value: int32(1)}, {Key: "v", Value: 2}},
		bson.D{{Key: "t", Value: at(2000)}, {Key: "s", Value: int32(1)}, {Key: "v", Value: 3}},
		bson.D{{Key: "t", Value: at(500)}, {Key: "s", Value: 1.0}, {Key: "v", Value: 10}},
		bson.D{{Key: "t", Value: at(1500)}, {Key: "s", Value: 1.0}, {Key: "v", Value: 20}},
		bson.D{{Key: "t", Value: at(700)}, {Key: "s", Value: int32(2)}, {Key: "v", Value: 100}},
	}); err != nil {
		t.Fatal(err)
	}
	cur, err := f.mdb.Collection("m").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$setWindowFields", Value: bson.D{{Key: "partitionBy", Value: "$s"}, {Key: "sortBy", Value: bson.D{{Key: "t", Value: 1}}},
			{Key: "output", Value: bson.D{{Key: "run", Value: bson.D{{Key: "$sum", Value: "$v"},
				{Key: "window", Value: bson.D{{Key: "documents", Value: bson.A{"unbounded", "current"}}}}}}}}}}},
		{{Key: "$match", Value: bson.D{{Key: "s", Value: 1}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for cur.Next(ctx) {
		got = append(got, fmt.Sprint(cur.Current.Lookup("run").AsInt64()))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	if want := "[1 11 13 33 36]"; fmt.Sprint(got) != want {
		t.Fatalf("running sums %v, want %s: one partition in time order", got, want)
	}
}
