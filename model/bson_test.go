package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

var convOptions = []*TimeSeriesOptions{
	{TimeField: "ts", MetaField: "sensor", Granularity: GranularitySeconds},
	{TimeField: "ts", Granularity: GranularitySeconds},
	{TimeField: "ts", MetaField: "v", Granularity: GranularitySeconds},
}

// checkConverterAgrees checks that BSONDecoder.Decode of d gives
// what MeasurementFromDocument gives on toMap(d), for each of convOptions,
// three times (the later ones from the converter's cache).
func checkConverterAgrees(t *testing.T, c *BSONDecoder, d bsoncore.Document) {
	t.Helper()
	if ValidateBSON(d) != nil {
		return // refused when the message is read
	}
	for _, ts := range convOptions {
		if v, err := d.LookupErr(ts.TimeField); err != nil || v.Type != bsoncore.TypeDateTime {
			continue // refused before conversion
		}
		var want Measurement
		doc, wantErr := FromBSON(d)
		if wantErr == nil {
			want, wantErr = MeasurementFromDocument(ts, doc)
		}
		for round := range 3 {
			got, gotErr := c.Decode(ts, d)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("%v, meta %q, round %d: error %v, want %v", d, ts.MetaField, round, gotErr, wantErr)
			}
			if wantErr != nil {
				continue
			}
			if got.Time != want.Time || !sameMeta(got.Meta, want.Meta) || !sameFields(got.Fields, want.Fields) {
				t.Fatalf("%v, meta %q, round %d:\n got %+v\nwant %+v", d, ts.MetaField, round, got, want)
			}
			place := map[string]int{}
			elems, _ := d.Elements()
			for i, e := range elems {
				place[e.Key()] = i
			}
			if _, fast := c.fast(ts, d); fast && !slices.IsSortedFunc(got.Fields, func(a, b Field) int { return place[a.Name] - place[b.Name] }) {
				t.Fatalf("%v: fields %+v not in the document's order", d, got.Fields)
			}
		}
	}
	c.Reset()
}

// sameMeta compares a meta value with its key: a key stands for the value
// whose canonical encoding it is.
func sameMeta(got, want any) bool {
	if want == nil || got == nil {
		return want == nil && got == nil
	}
	k, err := CanonicalMeta(want)
	if err != nil {
		_, isKey := got.(MetaKey)
		return !isKey
	}
	return got == MetaKey(k)
}

func TestBSONDecoderAgrees(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	metas := []any{"s1", bson.D{{Key: "id", Value: "s1"}, {Key: "site", Value: "a"}}, bson.D{{Key: "site", Value: "a"}, {Key: "id", Value: "s1"}},
		bson.D{{Key: "id", Value: int32(7)}}, nil, int32(7), int64(7), 7.0, bson.A{1, "a"}, bson.D{{Key: "$bad", Value: 1}},
		bson.D{{Key: "at", Value: at}}, bson.D{{Key: "x", Value: bson.D{{Key: "y", Value: bson.A{}}}}}, true,
		bson.NewObjectID(), bson.Regex{Pattern: "a", Options: "i"}, bson.Decimal128{}}
	vals := []any{1.5, int32(-3), int64(1) << 40, "x", "", true, false, nil, at, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), bson.D{{Key: "a", Value: 1}}, bson.A{1}, bson.NewObjectID(),
		bson.Undefined{}, bson.Decimal128{}, math.NaN(), bson.D{{Key: "$numberLong", Value: "5"}}}
	times := []any{at, time.Date(2261, 12, 31, 23, 59, 59, 999e6, time.UTC), time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1677, 12, 31, 23, 59, 59, 999e6, time.UTC), "2024-01-01T00:00:00Z"}
	ids := []any{bson.NewObjectID(), "a", int32(1), bson.D{{Key: "k", Value: 1}}, bson.Decimal128{}, nil}
	names := []string{"v", "b", "a", "temp", "$x", "sensor", "ts", "_id"}
	r := rand.New(rand.NewPCG(3, 4))
	c := NewBSONDecoder()
	for range 5000 {
		var d bson.D
		if r.IntN(10) > 0 {
			d = append(d, bson.E{Key: "ts", Value: times[r.IntN(len(times))]})
		}
		if r.IntN(4) > 0 {
			d = append(d, bson.E{Key: "sensor", Value: metas[r.IntN(len(metas))]})
		}
		if r.IntN(3) == 0 {
			d = append(d, bson.E{Key: "_id", Value: ids[r.IntN(len(ids))]})
		}
		for range r.IntN(5) {
			d = append(d, bson.E{Key: names[r.IntN(len(names))], Value: vals[r.IntN(len(vals))]})
		}
		r.Shuffle(len(d), func(i, j int) { d[i], d[j] = d[j], d[i] })
		if len(d) == 0 {
			continue
		}
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		checkConverterAgrees(t, c, raw)
	}
	if len(c.metas) == 0 {
		t.Fatal("no meta value was cached: the fast path was never taken")
	}
}

// TestValidateBSONMalformed: elements whose inner lengths are wrong are
// refused, not read (bsoncore's Value.Validate lets them through, and its
// readers panic on them).
func TestValidateBSONMalformed(t *testing.T) {
	for name, doc := range map[string]string{
		// A DBPointer whose namespace length runs past the element.
		"dbpointer": ":\x00\x00\x00\x0e000\x00\x02\x00\x00\x0000\r00\x00\x02\x00\x00\x0000\f0000\x00\x00\x00\x00\x000000000000000000000000\x00",
		// A regular expression whose options end at the document's end.
		"regex": "\x0b\x00\x00\x00\x0br\x00a\x00i\x00",
		// A string of length 0: not even its NUL.
		"string": "\x0c\x00\x00\x00\x02s\x00\x00\x00\x00\x00\x00",
	} {
		if err := ValidateBSON(bsoncore.Document(doc)); err == nil {
			t.Errorf("%s: %q accepted", name, doc)
		}
	}
}

func FuzzBSONDecoder(f *testing.F) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, d := range []bson.D{
		{{Key: "ts", Value: at}, {Key: "sensor", Value: bson.D{{Key: "id", Value: "s1"}}}, {Key: "temp", Value: 21.5}, {Key: "n", Value: int32(3)}},
		{{Key: "ts", Value: at}, {Key: "sensor", Value: "s"}, {Key: "a", Value: 1.0}, {Key: "a", Value: "x"}},
		{{Key: "_id", Value: bson.NewObjectID()}, {Key: "ts", Value: at}, {Key: "v", Value: bson.D{{Key: "x", Value: true}}}},
		// Every kind of string ValidateBSON reads.
		{{Key: "ts", Value: at}, {Key: "r", Value: bson.Regex{Pattern: "a.*", Options: "i"}}, {Key: "c", Value: bson.CodeWithScope{Code: "f()", Scope: bson.D{{Key: "q", Value: "w"}}}}},
		{{Key: "ts", Value: at}, {Key: "sym", Value: bson.Symbol("s")}, {Key: "js", Value: bson.JavaScript("x")}, {Key: "p", Value: bson.DBPointer{DB: "n.c", Pointer: bson.NewObjectID()}}},
	} {
		raw, err := bson.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	c := NewBSONDecoder()
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkConverterAgrees(t, c, raw)
	})
}

// BenchmarkValidateBSON: the check every document of a message gets, on
// the iot shape of the MongoDB benchmarks ({ts, sensor: {id, region},
// temp, hum, battery}).
func BenchmarkValidateBSON(b *testing.B) {
	d, err := bson.Marshal(bson.D{{Key: "ts", Value: bson.DateTime(1700000000000)},
		{Key: "sensor", Value: bson.D{{Key: "id", Value: "s0042"}, {Key: "region", Value: "eu-west"}}},
		{Key: "temp", Value: 21.5}, {Key: "hum", Value: 40.25}, {Key: "battery", Value: int32(87)}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(d)))
	for b.Loop() {
		if err := ValidateBSON(d); err != nil {
			b.Fatal(err)
		}
	}
}
