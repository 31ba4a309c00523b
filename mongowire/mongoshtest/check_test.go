package mongoshtest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// checkSession checks what testdata/session.js printed, and the batches
// its finds were answered in, against the measurements it inserted:
// measurement i is at t0 + i seconds, sensor i%4 of north, south, east,
// west, temp 20 + i/8, n = i.
func checkSession(t *testing.T, res bson.Raw, log []*exchange, t0 time.Time, name string, count int) {
	t.Helper()
	sensors := []string{"north", "south", "east", "west"}
	at := func(i int) bson.DateTime { return bson.NewDateTimeFromTime(t0.Add(time.Duration(i) * time.Second)) }

	if ok, _ := res.Lookup("create", "ok").AsFloat64OK(); ok != 1 {
		t.Errorf("createCollection returned %v, want ok: 1", res.Lookup("create"))
	}
	if ack, _ := res.Lookup("insert", "acknowledged").BooleanOK(); !ack {
		t.Errorf("insertMany was not acknowledged: %v", res.Lookup("insert"))
	}
	if n, _ := res.Lookup("insert", "ids").AsInt64OK(); n != int64(count) {
		t.Errorf("insertMany returned %d insertedIds, want %d", n, count)
	}

	// North over seconds [100, 900), newest first, projected on ts, sensor
	// and n.
	var want []bson.M
	for i := 899; i >= 100; i-- {
		if i%4 == 0 {
			want = append(want, bson.M{"ts": at(i), "sensor": "north", "n": int64(i)})
		}
	}
	checkDocs(t, "north", documents(t, res.Lookup("north")), want)

	// Everything, oldest first.
	want = want[:0]
	for i := range count {
		want = append(want, bson.M{"ts": at(i), "sensor": sensors[i%4], "temp": 20 + float64(i)/8, "n": int64(i)})
	}
	checkDocs(t, "all", documents(t, res.Lookup("all")), want)

	// The batches each find was answered in: what batchSize asked.
	batches := cursorBatches(t, log)
	if len(batches) != 2 {
		t.Fatalf("mongosh ran %d finds, want 2: %v", len(batches), batches)
	}
	checkBatches(t, "north", batches[0], 50, 200)
	checkBatches(t, "all", batches[1], 300, count)

	if names := stringArray(t, res.Lookup("names")); !slices.Equal(names, []string{name}) {
		t.Errorf("getCollectionNames() = %q, want [%q]", names, name)
	}
	var infos []struct {
		Name    string `bson:"name"`
		Type    string `bson:"type"`
		Options struct {
			TimeSeries struct {
				TimeField   string `bson:"timeField"`
				MetaField   string `bson:"metaField"`
				Granularity string `bson:"granularity"`
			} `bson:"timeseries"`
			ExpireAfterSeconds int64 `bson:"expireAfterSeconds"`
		} `bson:"options"`
	}
	if err := res.Lookup("infos").Unmarshal(&infos); err != nil {
		t.Fatalf("getCollectionInfos: %v", err)
	}
	if len(infos) != 1 {
		t.Fatalf("getCollectionInfos({name: %q}) returned %d collections, want 1: %v", name, len(infos), res.Lookup("infos"))
	}
	if i, o := infos[0], infos[0].Options; i.Name != name || i.Type != "timeseries" || o.TimeSeries.TimeField != "ts" ||
		o.TimeSeries.MetaField != "sensor" || o.TimeSeries.Granularity != "seconds" || o.ExpireAfterSeconds != 86400 {
		t.Errorf("getCollectionInfos({name: %q}) = %v, want a time-series collection on ts and sensor, granularity seconds, expireAfterSeconds 86400",
			name, res.Lookup("infos"))
	}
}

// checkDocs compares documents mongosh returned with those expected, field
// by field; numbers compare by value, since mongosh turns whole doubles
// into JavaScript numbers that print as integers.
func checkDocs(t *testing.T, what string, got, want []bson.M) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d documents, want %d", what, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if !sameDoc(got[i], want[i]) {
			t.Errorf("%s: document %d = %v, want %v", what, i, got[i], want[i])
			return
		}
	}
}

func sameDoc(got, want bson.M) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			return false
		}
		switch w := w.(type) {
		case float64:
			if number(g) != w {
				return false
			}
		case int64:
			// Stored as a 64-bit integer: mongosh shows it as a Long.
			if g != w {
				return false
			}
		default:
			if g != w {
				return false
			}
		}
	}
	return true
}

// number is a BSON number's value, NaN for anything else.
func number(v any) float64 {
	switch x := v.(type) {
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return nan
}

var nan = func() float64 { var z float64; return z / z }()

// cursorBatches returns, for each find mongosh sent, the sizes of the
// batches of its cursor: the first batch, then every getMore's.
func cursorBatches(t *testing.T, log []*exchange) [][]int {
	t.Helper()
	var out [][]int
	byID := map[int64]int{} // cursor id -> index in out
	for _, e := range log {
		switch e.name {
		case "find", "getMore":
		default:
			continue
		}
		if !e.ok() {
			t.Errorf("%s was refused: %v", e.name, e)
			continue
		}
		key := "nextBatch"
		if e.name == "find" {
			key = "firstBatch"
		}
		arr, ok := e.reply.Lookup("cursor", key).ArrayOK()
		if !ok {
			t.Errorf("%s reply without cursor.%s: %v", e.name, key, e.reply)
			continue
		}
		vals, _ := arr.Values()
		id, _ := e.reply.Lookup("cursor", "id").AsInt64OK()
		if e.name == "find" {
			out = append(out, []int{len(vals)})
			if id != 0 {
				byID[id] = len(out) - 1
			}
			continue
		}
		asked, _ := e.body.Lookup("getMore").AsInt64OK()
		k, ok := byID[asked]
		if !ok {
			t.Errorf("getMore on cursor %d, which no find opened", asked)
			continue
		}
		out[k] = append(out[k], len(vals))
	}
	return out
}

// checkBatches checks that a cursor's batches hold total documents in
// batches of size, the last one shorter and an empty one allowed at the
// end (a cursor may learn it is exhausted only on the next getMore).
func checkBatches(t *testing.T, what string, got []int, size, total int) {
	t.Helper()
	var want []int
	for n := total; n > 0; n -= size {
		want = append(want, min(n, size))
	}
	if len(got) == len(want)+1 && got[len(got)-1] == 0 {
		got = got[:len(got)-1]
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: batches of %v documents, want %v (batchSize %d)", what, got, want, size)
	}
}

// documents decodes an array of documents.
func documents(t *testing.T, v bson.RawValue) []bson.M {
	t.Helper()
	arr, ok := v.ArrayOK()
	if !ok {
		t.Fatalf("not an array of documents: %v", v)
	}
	vals, err := arr.Values()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bson.M, len(vals))
	for i, x := range vals {
		if err := x.Unmarshal(&out[i]); err != nil {
			t.Fatalf("element %d: %v", i, err)
		}
	}
	return out
}

func stringArray(t *testing.T, v bson.RawValue) []string {
	t.Helper()
	arr, ok := v.ArrayOK()
	if !ok {
		t.Fatalf("not an array of strings: %v", v)
	}
	vals, err := arr.Values()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, x := range vals {
		s, ok := x.StringValueOK()
		if !ok {
			t.Fatalf("not a string: %v", x)
		}
		out = append(out, s)
	}
	return out
}

func (e *exchange) Format(f fmt.State, verb rune) { fmt.Fprint(f, e.String()) }
