package mongowire

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// aggFixture is a time-series collection of 900 measurements, one every
// 7 seconds from t0 (a minute boundary), of six sensors in two regions:
// measurement i has temp 10 + (i*37 % 101)/4 and, unless i%5 == 0, hum
// i%13.
type aggFixture struct {
	*fixture
	t0   time.Time
	coll *mongo.Collection
}

const aggCount = 900

func newAggFixture(t *testing.T) *aggFixture {
	t.Helper()
	f := newFixture(t, nil)
	ctx := context.Background()
	err := f.mdb.CreateCollection(ctx, "iot", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("ts").SetMetaField("sensor")))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	docs := make([]any, aggCount)
	for i := range docs {
		d := bson.D{{Key: "ts", Value: t0.Add(time.Duration(7*i) * time.Second)},
			{Key: "sensor", Value: bson.D{{Key: "id", Value: int32(i % 6)}, {Key: "region", Value: []string{"east", "west"}[i%6/3]}}},
			{Key: "temp", Value: 10 + float64(i*37%101)/4}}
		if i%5 != 0 {
			d = append(d, bson.E{Key: "hum", Value: int32(i % 13)})
		}
		docs[i] = d
	}
	coll := f.mdb.Collection("iot")
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	return &aggFixture{fixture: f, t0: t0, coll: coll}
}

func (f *aggFixture) aggregate(t *testing.T, pipeline any, opts ...options.Lister[options.AggregateOptions]) []map[string]any {
	t.Helper()
	cur, err := f.coll.Aggregate(context.Background(), pipeline, opts...)
	if err != nil {
		t.Fatalf("aggregate %v: %v", pipeline, err)
	}
	var out []bson.M
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatalf("aggregate %v: %v", pipeline, err)
	}
	return asMaps(out)
}

func asMaps(docs []bson.M) []map[string]any {
	out := make([]map[string]any, len(docs))
	for i, d := range docs {
		out[i] = asMap(d).(map[string]any)
	}
	return out
}

// asMap turns the documents inside v into maps, which fmt prints with
// their keys sorted, for comparisons.
func asMap(v any) any {
	switch x := v.(type) {
	case bson.D:
		m := map[string]any{}
		for _, e := range x {
			m[e.Key] = asMap(e.Value)
		}
		return m
	case bson.M:
		m := map[string]any{}
		for k, e := range x {
			m[k] = asMap(e)
		}
		return m
	}
	return v
}

// engineCell is one (window, group) of the engine's aggregate, as the
// HTTP API's aggregate answers it.
type engineCell struct {
	window time.Time
	group  string
	vals   map[string]any // <field>_<func>
}

func engineAggregate(t *testing.T, db *timeseries.DB, opts timeseries.AggregateOptions) []engineCell {
	t.Helper()
	rec, err := db.Aggregate(context.Background(), "iot", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var out []engineCell
	for row := 0; row < int(rec.NumRows()); row++ {
		c := engineCell{vals: map[string]any{}}
		for i, fd := range rec.Schema().Fields() {
			col := rec.Column(i)
			switch x := col.(type) {
			case *array.Timestamp:
				c.window = time.Unix(0, int64(x.Value(row))).UTC()
			case *array.String:
				c.group = x.Value(row)
			case *array.Int64:
				c.vals[fd.Name] = x.Value(row)
			case *array.Float64:
				if col.IsNull(row) {
					c.vals[fd.Name] = nil
				} else {
					c.vals[fd.Name] = x.Value(row)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// TestAggregateGroups checks $group by $dateTrunc windows and the meta
// field's sub-field, with every accumulator, against the engine's windowed
// aggregate (what the HTTP API's aggregate answers), and the documents
// counted against the measurements inserted.
func TestAggregateGroups(t *testing.T) {
	f := newAggFixture(t)
	from, to := f.t0.Add(10*time.Minute), f.t0.Add(70*time.Minute)
	match := bson.D{{Key: "$match", Value: bson.D{{Key: "ts", Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}}}}}
	group := bson.D{{Key: "$group", Value: bson.D{
		{Key: "_id", Value: bson.D{
			{Key: "w", Value: bson.D{{Key: "$dateTrunc", Value: bson.D{{Key: "date", Value: "$ts"}, {Key: "unit", Value: "minute"}, {Key: "binSize", Value: 5}}}}},
			{Key: "region", Value: "$sensor.region"}}},
		{Key: "n", Value: bson.D{{Key: "$count", Value: bson.D{}}}},
		{Key: "docs", Value: bson.D{{Key: "$sum", Value: 1}}},
		{Key: "avg", Value: bson.D{{Key: "$avg", Value: "$temp"}}},
		{Key: "min", Value: bson.D{{Key: "$min", Value: "$temp"}}},
		{Key: "max", Value: bson.D{{Key: "$max", Value: "$temp"}}},
		{Key: "first", Value: bson.D{{Key: "$first", Value: "$temp"}}},
		{Key: "last", Value: bson.D{{Key: "$last", Value: "$temp"}}},
		{Key: "hum", Value: bson.D{{Key: "$sum", Value: "$hum"}}},
		{Key: "humAvg", Value: bson.D{{Key: "$avg", Value: "$hum"}}},
	}}}
	sort := bson.D{{Key: "$sort", Value: bson.D{{Key: "_id.w", Value: 1}, {Key: "_id.region", Value: 1}}}}
	got := f.aggregate(t, mongo.Pipeline{match, group, sort}, options.Aggregate().SetBatchSize(3))

	filter := partialfilter.MustParseJSON(fmt.Sprintf(`{"ts": {"$gte": {"$date": %q}, "$lt": {"$date": %q}}}`,
		from.Format(time.RFC3339), to.Format(time.RFC3339)))
	want := engineAggregate(t, f.db, timeseries.AggregateOptions{Filter: filter, Window: 5 * time.Minute,
		Origin: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), GroupBy: "sensor.region", Fields: []string{"temp", "hum"}})
	// Documents per (window, region), from what was inserted.
	docs := map[string]int32{}
	for i := range aggCount {
		at := f.t0.Add(time.Duration(7*i) * time.Second)
		if at.Before(from) || !at.Before(to) {
			continue
		}
		docs[fmt.Sprint(at.Truncate(5*time.Minute).Unix(), []string{"east", "west"}[i%6/3])]++
	}
	if len(got) != len(want) || len(want) != 24 {
		t.Fatalf("%d groups, engine %d, want 24: %v", len(got), len(want), got)
	}
	byKey := map[string]engineCell{}
	for _, w := range want {
		byKey[fmt.Sprint(w.window.Unix(), strings.Trim(w.group, `"`))] = w
	}
	for i, g := range got {
		id := g["_id"].(map[string]any)
		region, _ := id["region"].(string)
		at := id["w"].(bson.DateTime).Time()
		w, ok := byKey[fmt.Sprint(at.Unix(), region)]
		if !ok {
			t.Fatalf("group %d has _id %v, which the engine does not have", i, id)
		}
		if i > 0 {
			prev := got[i-1]["_id"].(map[string]any)
			if p := prev["w"].(bson.DateTime).Time(); p.After(at) || p.Equal(at) && prev["region"].(string) >= region {
				t.Errorf("group %d (%v) is not sorted after %v", i, id, prev)
			}
		}
		n := docs[fmt.Sprint(w.window.Unix(), region)]
		if g["n"] != n || g["docs"] != n {
			t.Errorf("group %d counts n %v, docs %v, want %d", i, g["n"], g["docs"], n)
		}
		for key, col := range map[string]string{"avg": "temp_avg", "min": "temp_min", "max": "temp_max", "first": "temp_first",
			"last": "temp_last", "hum": "hum_sum", "humAvg": "hum_avg"} {
			if g[key] != w.vals[col] {
				t.Errorf("group %d: %s = %v, engine's %s = %v", i, key, g[key], col, w.vals[col])
			}
		}
	}
}

// TestAggregateWholeGroups checks a $group of everything and one by the
// whole meta value: the engine's windows merged into one group each, the
// documents counted as countDocuments does, and the stages after the group
// ($match, $sort, $skip, $limit, $project, $count) run on its result.
func TestAggregateWholeGroups(t *testing.T) {
	f := newAggFixture(t)
	all := f.aggregate(t, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
		{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}, {Key: "sum", Value: bson.D{{Key: "$sum", Value: "$temp"}}},
		{Key: "first", Value: bson.D{{Key: "$first", Value: "$temp"}}}, {Key: "last", Value: bson.D{{Key: "$last", Value: "$temp"}}},
		{Key: "min", Value: bson.D{{Key: "$min", Value: "$hum"}}}, {Key: "max", Value: bson.D{{Key: "$max", Value: "$hum"}}}}}}})
	var sum float64
	for i := range aggCount {
		sum += 10 + float64(i*37%101)/4
	}
	want := map[string]any{"_id": nil, "n": int32(aggCount), "sum": sum, "first": 10.0, "last": 10 + float64((aggCount-1)*37%101)/4, "min": 0.0, "max": 12.0}
	if len(all) != 1 || fmt.Sprint(all[0]) != fmt.Sprint(want) {
		t.Fatalf("the group of everything = %v, want %v", all, want)
	}

	// By sensor (the whole meta value), the east ones, by id descending,
	// the second and third, the count renamed away.
	got := f.aggregate(t, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$sensor"}, {Key: "n", Value: bson.D{{Key: "$count", Value: bson.D{}}}},
			{Key: "avg", Value: bson.D{{Key: "$avg", Value: "$temp"}}}}}},
		{{Key: "$match", Value: bson.D{{Key: "_id.region", Value: "east"}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id.id", Value: -1}}}},
		{{Key: "$skip", Value: 1}}, {{Key: "$limit", Value: 2}},
		{{Key: "$project", Value: bson.D{{Key: "n", Value: 0}}}},
	})
	if len(got) != 2 {
		t.Fatalf("got %v, want sensors 1 and 0", got)
	}
	for k, id := range []int32{1, 0} {
		var s float64
		var n int
		for i := int(id); i < aggCount; i += 6 {
			s += 10 + float64(i*37%101)/4
			n++
		}
		want := map[string]any{"_id": map[string]any{"id": int64(id), "region": "east"}, "avg": s / float64(n)}
		if fmt.Sprint(got[k]) != fmt.Sprint(want) {
			t.Errorf("group %d = %v, want %v", k, got[k], want)
		}
	}
	// Groups whose documents lack the field: null, as in MongoDB.
	noHum := f.aggregate(t, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "hum", Value: bson.D{{Key: "$exists", Value: false}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$sensor.id"}, {Key: "m", Value: bson.D{{Key: "$max", Value: "$hum"}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}})
	if fmt.Sprint(noHum) != "[map[_id:0 m:<nil>] map[_id:1 m:<nil>] map[_id:2 m:<nil>] map[_id:3 m:<nil>] map[_id:4 m:<nil>] map[_id:5 m:<nil>]]" {
		t.Errorf("$max of a field the groups lack = %v", noHum)
	}
	counted := f.aggregate(t, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$sensor.region"}}}}, {{Key: "$count", Value: "regions"}}})
	if len(counted) != 1 || counted[0]["regions"] != int32(2) {
		t.Errorf("regions counted: %v, want 2", counted)
	}
}

// TestAggregateFind checks the pipelines that are a find ($match, $sort,
// $skip, $limit, $project, $count) against the same find, on a time-series
// and a plain collection, through several getMore batches, and what
// mongosh's countDocuments sends.
func TestAggregateFind(t *testing.T) {
	f := newAggFixture(t)
	ctx := context.Background()
	filter := bson.D{{Key: "sensor.region", Value: "west"}, {Key: "temp", Value: bson.D{{Key: "$gt", Value: 20}}}}
	got := f.aggregate(t, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "sensor.region", Value: "west"}}}},
		{{Key: "$match", Value: bson.D{{Key: "temp", Value: bson.D{{Key: "$gt", Value: 20}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "ts", Value: -1}}}},
		{{Key: "$skip", Value: 5}}, {{Key: "$limit", Value: 200}}, {{Key: "$skip", Value: 10}},
		{{Key: "$project", Value: bson.D{{Key: "ts", Value: 1}, {Key: "temp", Value: 1}}}},
	}, options.Aggregate().SetBatchSize(40))
	cur, err := f.coll.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "ts", Value: -1}}).SetSkip(15).SetLimit(190).
		SetProjection(bson.D{{Key: "ts", Value: 1}, {Key: "temp", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var want []bson.M
	if err := cur.All(ctx, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != 190 || fmt.Sprint(got) != fmt.Sprint(asMaps(want)) {
		t.Fatalf("aggregate returned %d documents, find %d (want 190); first %v, want %v", len(got), len(want), first(got), first(want))
	}

	n, err := f.coll.CountDocuments(ctx, filter, options.Count().SetSkip(3).SetLimit(100))
	if err != nil || n != 100 {
		t.Errorf("countDocuments with skip and limit = %d, %v; want 100", n, err)
	}
	all, err := f.coll.CountDocuments(ctx, filter)
	if want := f.count(t, "iot", filter); err != nil || all != want || all < 100 {
		t.Errorf("countDocuments = %d, %v; the count command %d", all, err, want)
	}
	if n, err := f.coll.CountDocuments(ctx, bson.D{{Key: "temp", Value: bson.D{{Key: "$lt", Value: 0}}}}); err != nil || n != 0 {
		t.Errorf("countDocuments of nothing = %d, %v", n, err)
	}
	counted := f.aggregate(t, mongo.Pipeline{{{Key: "$match", Value: filter}}, {{Key: "$skip", Value: 1}}, {{Key: "$count", Value: "west"}}})
	if len(counted) != 1 || counted[0]["west"] != int32(all-1) {
		t.Errorf("$count = %v, want %d", counted, all-1)
	}

	// A plain collection, sorted on any field.
	plain := f.mdb.Collection("tickets")
	for i := range 30 {
		if _, err := plain.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(i)}, {Key: "prio", Value: int32(i % 4)}}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err = plain.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "prio", Value: bson.D{{Key: "$gte", Value: 2}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "prio", Value: -1}, {Key: "_id", Value: 1}}}}, {{Key: "$limit", Value: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	var tickets []bson.M
	if err := cur.All(ctx, &tickets); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(asMaps(tickets)) != "[map[_id:3 prio:3] map[_id:7 prio:3] map[_id:11 prio:3] map[_id:15 prio:3]]" {
		t.Errorf("tickets = %v", tickets)
	}
	if n, err := plain.CountDocuments(ctx, bson.D{{Key: "prio", Value: 1}}); err != nil || n != 8 {
		t.Errorf("tickets countDocuments = %d, %v; want 8", n, err)
	}
	// A missing collection holds nothing.
	cur, err = f.mdb.Collection("missing").Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}})
	if err != nil || cur.Next(ctx) {
		t.Errorf("aggregate of a missing collection: %v", err)
	}
}

func first[M any](docs []M) any {
	if len(docs) == 0 {
		return nil
	}
	return docs[0]
}

// TestAggregateRefusals checks that what aggregate does not compute is
// refused naming the stage, operator or option, never answered wrongly.
func TestAggregateRefusals(t *testing.T) {
	f := newAggFixture(t)
	ctx := context.Background()
	dt := func(unit string) bson.D {
		return bson.D{{Key: "$dateTrunc", Value: bson.D{{Key: "date", Value: "$ts"}, {Key: "unit", Value: unit}}}}
	}
	for _, c := range []struct {
		pipeline mongo.Pipeline
		code     int32
		names    string
	}{
		{mongo.Pipeline{{{Key: "$frobnicate", Value: bson.D{}}}}, 40324, "$frobnicate"},
		{mongo.Pipeline{{{Key: "$unwind", Value: "$tags"}}}, 238, "$unwind"},
		{mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "all", Value: bson.D{{Key: "$push", Value: "$temp"}}}}}}}, 15952, "$push"},
		{mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$dateTrunc", Value: bson.D{{Key: "date", Value: "$ts"}, {Key: "unit", Value: "month"}, {Key: "timezone", Value: "Europe/Paris"}}}}}}}}}, 238, "Europe/Paris"},
		{mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$dateTrunc", Value: bson.D{{Key: "date", Value: "$ts"}, {Key: "unit", Value: "year"}, {Key: "binSize", Value: 1000}}}}}}}}}, 2, "binSize"},
		{mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$temp"}}}}}, 238, "$temp"},
		{mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$year", Value: "$ts"}}}}}}}, 238, "$year"},
		{mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "m", Value: bson.D{{Key: "$max", Value: bson.D{{Key: "$abs", Value: "$temp"}}}}}}}}}, 238, "$max"},
		{mongo.Pipeline{{{Key: "$limit", Value: 5}}, {{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "a", Value: bson.D{{Key: "$avg", Value: "$temp"}}}}}}}, 238, "$group"},
		{mongo.Pipeline{{{Key: "$limit", Value: 5}}, {{Key: "$match", Value: bson.D{}}}}, 238, "$match"},
		{mongo.Pipeline{{{Key: "$sort", Value: bson.D{{Key: "temp", Value: 1}}}}}, 2, "timeField"},
		{mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: dt("hour")}, {Key: "n", Value: bson.D{{Key: "$count", Value: bson.D{}}}}}}},
			{{Key: "$unwind", Value: "$n"}}}, 238, "$unwind"},
	} {
		_, err := f.coll.Aggregate(ctx, c.pipeline)
		code, msg := errCode(err)
		if code != c.code || !strings.Contains(msg, c.names) {
			t.Errorf("%v: code %d %q, want %d naming %s", c.pipeline, code, msg, c.code, c.names)
		}
	}
	plain := f.mdb.Collection("tickets")
	if _, err := plain.InsertOne(ctx, bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err := plain.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$a"}}}}})
	if code, msg := errCode(err); code != 238 || !strings.Contains(msg, "time-series") {
		t.Errorf("$group by a field of a plain collection: %d %q", code, msg)
	}
	if _, err := f.run(t, "test", bson.D{{Key: "aggregate", Value: "iot"}, {Key: "pipeline", Value: bson.A{}}}); err == nil {
		t.Errorf("aggregate without cursor succeeded")
	}
}

// TestAggregateAdmin checks what mongosh sends on admin: db.currentOp()
// as a $currentOp pipeline, answered from what the currentOp command
// answers, and the start-up look-up of Atlas CLI deployments.
func TestAggregateAdmin(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	admin := f.cl.Database("admin")
	cur, err := admin.Aggregate(ctx, mongo.Pipeline{{{Key: "$currentOp", Value: bson.D{{Key: "allUsers", Value: true}}}},
		{{Key: "$match", Value: bson.D{{Key: "command.aggregate", Value: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var ops []bson.M
	if err := cur.All(ctx, &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0]["active"] != true {
		t.Errorf("$currentOp matching the aggregate itself = %v, want it", ops)
	}
	// The command answers from the same entries: itself.
	var ref struct {
		Inprog []bson.M `bson:"inprog"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "currentOp", Value: 1}}).Decode(&ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Inprog) != 1 || ref.Inprog[0]["desc"] != ops[0]["desc"] || ref.Inprog[0]["op"] != ops[0]["op"] {
		t.Errorf("currentOp = %v, $currentOp %v", ref.Inprog, ops)
	}
	cur, err = admin.Collection("atlascli").Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "managedClusterType", Value: "atlasCliDeployment"}}}}, {{Key: "$limit", Value: 1}}})
	if err != nil || cur.Next(ctx) {
		t.Errorf("atlascli: %v, want an empty cursor", err)
	}
	if _, err := f.mdb.Aggregate(ctx, mongo.Pipeline{{{Key: "$currentOp", Value: bson.D{}}}}); err == nil {
		t.Errorf("$currentOp outside admin succeeded")
	}
}

// TestAggregateAcrossEpoch checks a $group without $dateTrunc over
// measurements on both sides of 1970, which the engine answers in two
// windows that the group merges: first from the older, last from the newer.
func TestAggregateAcrossEpoch(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if err := f.mdb.CreateCollection(ctx, "span", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("ts").SetMetaField("m"))); err != nil {
		t.Fatal(err)
	}
	var docs []any
	for i, v := range []float64{1, 5, 3, 2} {
		at := time.Unix(0, 0).UTC().Add(time.Duration([]int{-2, -1, 1, 2}[i]) * time.Hour)
		docs = append(docs, bson.D{{Key: "ts", Value: at}, {Key: "m", Value: "a"}, {Key: "v", Value: v}})
	}
	if _, err := f.mdb.Collection("span").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	acc := func(op string) bson.D { return bson.D{{Key: op, Value: "$v"}} }
	cur, err := f.mdb.Collection("span").Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$m"},
		{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}, {Key: "sum", Value: acc("$sum")}, {Key: "avg", Value: acc("$avg")},
		{Key: "min", Value: acc("$min")}, {Key: "max", Value: acc("$max")}, {Key: "first", Value: acc("$first")}, {Key: "last", Value: acc("$last")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(asMaps(got)); s != "[map[_id:a avg:2.75 first:1 last:2 max:5 min:1 n:4 sum:11]]" {
		t.Errorf("got %s", s)
	}
}

// TestAggregateCalendarUnits checks $dateTrunc by month, quarter and year
// (and two-month bins, counted from January 2000 as MongoDB counts them)
// against a plain loop over the inserted measurements, over dates on both
// sides of 2000.
func TestAggregateCalendarUnits(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	err := f.mdb.CreateCollection(ctx, "cal", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("ts").SetMetaField("sensor").SetGranularity("hours")))
	if err != nil {
		t.Fatal(err)
	}
	type point struct {
		ts     time.Time
		sensor string
		v      float64
	}
	var pts []point
	var docs []any
	t0 := time.Date(1999, 10, 30, 13, 0, 0, 0, time.UTC)
	for i := range 400 {
		p := point{t0.Add(time.Duration(i) * 43 * time.Hour), []string{"a", "b"}[i%2], float64(i*37%101) / 4}
		pts = append(pts, p)
		docs = append(docs, bson.D{{Key: "ts", Value: p.ts}, {Key: "sensor", Value: p.sensor}, {Key: "v", Value: p.v}})
	}
	coll := f.mdb.Collection("cal")
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		unit   string
		bin    int
		months int
	}{{"month", 1, 1}, {"month", 2, 2}, {"quarter", 1, 3}, {"year", 1, 12}, {"quarter", 3, 9}} {
		type cell struct {
			n                       int
			sum, min, max, fst, lst float64
		}
		want := map[string]*cell{}
		var order []string
		for _, p := range pts {
			m := (p.ts.Year()-2000)*12 + int(p.ts.Month()) - 1
			m -= ((m % c.months) + c.months) % c.months
			w := time.Date(2000, time.Month(m+1), 1, 0, 0, 0, 0, time.UTC)
			k := w.Format(time.RFC3339) + "/" + p.sensor
			e := want[k]
			if e == nil {
				e = &cell{min: p.v, max: p.v, fst: p.v}
				want[k] = e
				order = append(order, k)
			}
			e.n++
			e.sum += p.v
			e.min, e.max, e.lst = math.Min(e.min, p.v), math.Max(e.max, p.v), p.v
		}
		pipeline := mongo.Pipeline{
			{{Key: "$group", Value: bson.D{
				{Key: "_id", Value: bson.D{{Key: "w", Value: bson.D{{Key: "$dateTrunc", Value: bson.D{{Key: "date", Value: "$ts"}, {Key: "unit", Value: c.unit}, {Key: "binSize", Value: c.bin}}}}}, {Key: "s", Value: "$sensor"}}},
				{Key: "n", Value: bson.D{{Key: "$count", Value: bson.D{}}}}, {Key: "sum", Value: bson.D{{Key: "$sum", Value: "$v"}}},
				{Key: "avg", Value: bson.D{{Key: "$avg", Value: "$v"}}}, {Key: "min", Value: bson.D{{Key: "$min", Value: "$v"}}},
				{Key: "max", Value: bson.D{{Key: "$max", Value: "$v"}}}, {Key: "first", Value: bson.D{{Key: "$first", Value: "$v"}}},
				{Key: "last", Value: bson.D{{Key: "$last", Value: "$v"}}}}}},
		}
		cur, err := coll.Aggregate(ctx, pipeline)
		if err != nil {
			t.Fatalf("%s x%d: %v", c.unit, c.bin, err)
		}
		var got []struct {
			ID struct {
				W time.Time `bson:"w"`
				S string    `bson:"s"`
			} `bson:"_id"`
			N                               int
			Sum, Avg, Min, Max, First, Last float64
		}
		if err := cur.All(ctx, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s x%d: %d groups, want %d", c.unit, c.bin, len(got), len(want))
		}
		for _, g := range got {
			k := g.ID.W.UTC().Format(time.RFC3339) + "/" + g.ID.S
			e := want[k]
			if e == nil {
				t.Fatalf("%s x%d: group %s not expected (want %v)", c.unit, c.bin, k, order)
			}
			if g.N != e.n || math.Abs(g.Sum-e.sum) > 1e-9 || math.Abs(g.Avg-e.sum/float64(e.n)) > 1e-9 ||
				g.Min != e.min || g.Max != e.max || g.First != e.fst || g.Last != e.lst {
				t.Errorf("%s x%d, %s: got %+v, want %+v", c.unit, c.bin, k, g, *e)
			}
		}
	}
}

// TestSortAfterGroup: stages after a $group order values as MongoDB does
// (partialfilter.Compare): integers exactly beyond 2^53, objects by their
// first field's name where their values tie.
func TestSortAfterGroup(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if err := f.mdb.CreateCollection(ctx, "g", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("ts").SetMetaField("m"))); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var docs []any
	for i, m := range []any{int64(9007199254740993), int64(9007199254740992), bson.D{{Key: "b", Value: 1}}, bson.D{{Key: "a", Value: 1}}} {
		docs = append(docs, bson.D{{Key: "ts", Value: t0.Add(time.Duration(i) * time.Second)}, {Key: "m", Value: m}, {Key: "v", Value: 1.0}})
	}
	if _, err := f.mdb.Collection("g").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []int{1, -1} {
		cur, err := f.mdb.Collection("g").Aggregate(ctx, bson.A{
			bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$m"}, {Key: "n", Value: bson.D{{Key: "$count", Value: bson.D{}}}}}}},
			bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: dir}}}}})
		if err != nil {
			t.Fatal(err)
		}
		var out []bson.M
		if err := cur.All(ctx, &out); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range out {
			ids = append(ids, fmt.Sprint(d["_id"]))
		}
		want := []string{"9007199254740992", "9007199254740993", `{"a":{"$numberLong":"1"}}`, `{"b":{"$numberLong":"1"}}`}
		if dir < 0 {
			slices.Reverse(want)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("$sort of _id %d: %v, want %v", dir, ids, want)
		}
	}
}
