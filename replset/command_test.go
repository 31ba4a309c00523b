package replset

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hashicorp/raft"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/timeseries"
)

func TestCommandRoundTrip(t *testing.T) {
	exp := int64(3600)
	cmds := []*Command{
		{Op: OpCreateCollection, Collection: "weather", Options: timeseries.CollectionOptions{
			TimeSeries:         &model.TimeSeriesOptions{TimeField: "t", MetaField: "m", Granularity: model.GranularityMinutes},
			ExpireAfterSeconds: &exp}},
		{Op: OpCreateCollection, Collection: "capped", Options: timeseries.CollectionOptions{Capped: true, Size: 4096, Max: 10}},
		{Op: OpDropCollection, Collection: "weather"},
		{Op: OpInsert, Collection: "w", Unordered: true, Measurements: []model.Measurement{
			{Time: math.MinInt64, Meta: nil},
			{Time: math.MaxInt64, Meta: map[string]any{"id": int64(7), "loc": []any{1.5, "x"}}, Fields: []model.Field{
				{Name: "f", Value: model.Float(math.Inf(-1))},
				{Name: "i", Value: model.Int(math.MinInt64)},
				{Name: "s", Value: model.String("")},
				{Name: "b", Value: model.Bool(true)},
				{Name: "d", Value: model.Date(-1)},
			}},
			{Time: 0, Meta: time.Unix(5, 6).UTC(), Fields: []model.Field{{Name: "", Value: model.Bool(false)}}},
		}},
		{Op: OpInsert, Collection: "empty"},
		// Documents travel in their field order.
		{Op: OpInsertDocuments, Collection: "docs", Documents: []document.Doc{
			{"_id": "a", "n": nil, "arr": []any{int64(1), map[string]any{"x": true, "b": false}}}, {"_id": int64(2)}},
			Orders: []*document.Order{{Keys: []string{"_id", "n", "arr"}, Sub: map[string]*document.Order{
				"arr": {Elems: []*document.Order{nil, {Keys: []string{"x", "b"}}}}}}, {Keys: []string{"_id"}}}},
		{Op: OpCreateIndex, Collection: "w", Index: timeseries.IndexSpec{Name: "t_1", Key: []timeseries.IndexKey{{Field: "t", Direction: 1}},
			ExpireAfterSeconds: &exp, PartialFilterExpression: map[string]any{"m.id": map[string]any{"$gt": int64(3)}, "m.at": time.Unix(7, 0).UTC()}}},
		{Op: OpCreateIndex, Collection: "d", Index: timeseries.IndexSpec{Name: "k_-1", Key: []timeseries.IndexKey{{Field: "k", Direction: -1}}}},
		{Op: OpExpireDocuments, Collection: "d", Index: timeseries.IndexSpec{Name: "at_1"}, Now: -5},
		{Op: OpDelete, Collection: "w", Filter: []byte(`{"m": "a"}`)},
		{Op: OpDeleteDocuments, Collection: "docs", Filter: []byte(`{}`)},
		{Op: OpCollMod, Collection: "w", CollMod: timeseries.CollModOptions{ExpireAfterSeconds: &exp}},
		{Op: OpCollMod, Collection: "w", CollMod: timeseries.CollModOptions{ExpireOff: true, TimeSeries: &model.TimeSeriesOptions{Granularity: "hours"}}},
		{Op: OpDropIndex, Collection: "d", Index: timeseries.IndexSpec{Name: "k_-1"}},
		{Op: OpMember, Member: MemberAddrs{ID: "n4", Raft: "127.0.0.1:7804", HTTP: "127.0.0.1:7704", Mongo: "127.0.0.1:27104"}},
		{Op: OpMember, Member: MemberAddrs{ID: "n2", Remove: true}},
		{Op: OpUpdateDocuments, Collection: "docs", Filter: []byte(`{"k": 1}`), Update: []byte(`{"$set": {"x": 2}}`), Multi: true, Now: 1234},
		{Op: OpReplaceDocument, Collection: "docs", Filter: []byte(`{"_id": 1}`), Replacement: document.Doc{"x": int64(3), "at": time.Unix(9, 0).UTC()},
			ReplacementOrder: &document.Order{Keys: []string{"x", "at"}}},
		{Op: OpCollModIndex, Collection: "d", IndexMod: timeseries.IndexMod{Name: "at_1", KeyPattern: []timeseries.IndexKey{{Field: "at", Direction: 1}}, ExpireAfterSeconds: 30}},
		{Op: OpCreateIndexes, Collection: "w", Indexes: []timeseries.IndexSpec{
			{Name: "t_1", Key: []timeseries.IndexKey{{Field: "t", Direction: 1}}, ExpireAfterSeconds: &exp,
				PartialFilterExpression: map[string]any{"m.at": time.Unix(7, 0).UTC(), "m.n": int64(2)}},
			{Name: "k_-1", Key: []timeseries.IndexKey{{Field: "k", Direction: -1}, {Field: "j", Direction: 1}}}}},
		{Op: OpDropIndexes, Collection: "d", IndexNames: []string{"a_1", "", "b_1"}},
		{Op: OpCollModIndexed, Collection: "w", CollMod: timeseries.CollModOptions{ExpireAfterSeconds: &exp,
			TimeSeries: &model.TimeSeriesOptions{Granularity: "hours"}, Index: &timeseries.IndexMod{Name: "t_1", ExpireAfterSeconds: 5}}},
	}
	for _, c := range cmds {
		b, err := c.encode(nil)
		if err != nil {
			t.Fatalf("%s: %v", c.Op, err)
		}
		got, err := decodeCommand(b)
		if err != nil {
			t.Fatalf("%s: %v", c.Op, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("%s: round trip\n got %#v\nwant %#v", c.Op, got, c)
		}
		// Every proper prefix is refused, never a panic or a shorter command.
		for i := range b {
			if _, err := decodeCommand(b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: %d of %d bytes: %v, want ErrCorrupt", c.Op, i, len(b), err)
			}
		}
	}
	// NaN survives bit for bit (DeepEqual cannot compare it).
	c := &Command{Op: OpInsert, Collection: "w", Measurements: []model.Measurement{{Fields: []model.Field{{Name: "f", Value: model.Float(math.NaN())}}}}}
	b, _ := c.encode(nil)
	got, err := decodeCommand(b)
	if err != nil || !math.IsNaN(got.Measurements[0].Fields[0].Value.F) {
		t.Fatalf("NaN: %v, %v", got, err)
	}
}

func TestLogRoundTrip(t *testing.T) {
	for _, l := range []raft.Log{
		{},
		{Index: math.MaxUint64, Term: 3, Type: raft.LogConfiguration, Data: []byte("x"), Extensions: []byte("e"), AppendedAt: time.Unix(0, 1)},
	} {
		b := encodeLog(nil, &l)
		var got raft.Log
		if err := decodeLog(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, l) {
			t.Fatalf("got %+v, want %+v", got, l)
		}
		for i := range b {
			if err := decodeLog(b[:i], &got); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%d of %d bytes: %v, want ErrCorrupt", i, len(b), err)
			}
		}
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []*Command{
		{Op: OpInsert, Collection: "w", Measurements: []model.Measurement{{Time: 1, Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Float(1)}}}}},
		{Op: OpInsertDocuments, Collection: "d", Documents: []document.Doc{{"_id": int64(1)}}},
		{Op: OpCreateCollection, Collection: "c"},
		{Op: OpInsertKeyed, Collection: "w", Measurements: []model.Measurement{
			{Time: 1, Meta: model.MetaKey(`"a"`), Fields: []model.Field{{Name: "v", Value: model.Float(1)}}},
			{Time: 2, Meta: map[string]any{"x": []any{"y"}}, Fields: []model.Field{{Name: "v", Value: model.Int(1)}}},
			{Time: 3}}},
		{Op: OpMember, Member: MemberAddrs{ID: "n4", Raft: "h:1"}},
		{Op: OpCreateIndexes, Collection: "d", Indexes: []timeseries.IndexSpec{{Name: "a_1", Key: []timeseries.IndexKey{{Field: "a", Direction: 1}}}}},
		{Op: OpDropIndexes, Collection: "d", IndexNames: []string{"a_1", "b_1"}},
	} {
		b, _ := c.encode(nil)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCommand(b)
		if err != nil {
			return
		}
		// What decodes encodes again and decodes to the same command.
		b2, err := c.encode(nil)
		if err != nil {
			return // e.g. a document value the encoder refuses
		}
		c2, err := decodeCommand(b2)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
		b3, _ := c2.encode(nil)
		if string(b3) != string(b2) {
			t.Fatalf("encoding not stable")
		}
	})
}

// A meta value already encoded (timeseries.MetaKey, as line protocol
// gives) travels as the value it encodes, which encodes to the same key.
func TestCommandMetaKey(t *testing.T) {
	meta := map[string]any{"_measurement": "cpu", "host": "a"}
	key, err := model.CanonicalMeta(meta)
	if err != nil {
		t.Fatal(err)
	}
	c := &Command{Op: OpInsert, Collection: "lp", Measurements: []model.Measurement{
		{Time: 1, Meta: model.MetaKey(key), Fields: []model.Field{{Name: "v", Value: model.Float(1)}}}}}
	b, err := c.encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeCommand(b)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := model.CanonicalMeta(got.Measurements[0].Meta); err != nil || k != key {
		t.Fatalf("meta decodes to %v (key %q, %v), want key %q", got.Measurements[0].Meta, k, err, key)
	}
	c.Measurements[0].Meta = model.MetaKey("{not canonical")
	if _, err := c.encode(nil); err == nil {
		t.Fatal("an invalid meta key was encoded")
	}
}

// insertKeyed carries meta values as the engine's canonical keys: applied
// to an engine, the decoded measurements store the same rows and get the
// same refusals as the measurements given.
func TestInsertKeyedSameAsValues(t *testing.T) {
	big := strings.Repeat("x", model.MaxMetaBytes+1)
	lp := model.MetaKey(mustCanonical(t, map[string]any{"host": "h1", "region": "eu"}))
	ms := []model.Measurement{
		{Time: 1e9, Meta: lp, Fields: []model.Field{{Name: "v", Value: model.Float(1)}, {Name: "s", Value: model.String("a")}}},
		{Time: 2e9, Meta: map[string]any{"region": "eu", "host": "h1"}, Fields: []model.Field{{Name: "v", Value: model.Int(2)}}},
		{Time: 3e9, Meta: map[string]any{"host": "h2"}, Fields: []model.Field{{Name: "b", Value: model.Bool(true)}}},
		{Time: 4e9, Meta: nil, Fields: []model.Field{{Name: "v", Value: model.Date(5)}}},
		{Time: 5e9, Meta: big, Fields: []model.Field{{Name: "v", Value: model.Float(3)}}},
		{Time: 6e9, Meta: "h3", Fields: []model.Field{{Name: "v", Value: model.Float(4)}, {Name: "v", Value: model.Float(5)}}},
		{Time: 7e9, Meta: model.MetaKey("not canonical"), Fields: []model.Field{{Name: "v", Value: model.Float(6)}}},
	}
	b, err := (&Command{Op: OpInsertKeyed, Collection: "m", Unordered: true, Measurements: ms}).encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodeCommand(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Op != OpInsertKeyed || c.Collection != "m" || !c.Unordered || len(c.Measurements) != len(ms) {
		t.Fatalf("decoded %s %q %v %d", c.Op, c.Collection, c.Unordered, len(c.Measurements))
	}
	if _, ok := c.Measurements[1].Meta.(model.MetaKey); !ok || c.Measurements[1].Meta != c.Measurements[0].Meta {
		t.Fatalf("a meta value with the line-protocol key's value: %#v, %#v", c.Measurements[1].Meta, c.Measurements[0].Meta)
	}
	if c.Measurements[4].Meta != big {
		t.Fatal("a meta value without a canonical key did not stay a value")
	}
	rows := func(ms []model.Measurement) (string, timeseries.InsertResult) {
		db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx := context.Background()
		if _, err := db.CreateCollection(ctx, "m", sensorOpts); err != nil {
			t.Fatal(err)
		}
		res, err := db.Insert(ctx, "m", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{Unordered: true})
		if err != nil {
			t.Fatal(err)
		}
		cur, err := db.Find(ctx, "m", timeseries.FindOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer cur.Close()
		var out strings.Builder
		for cur.Next() {
			js, _ := cur.Record().MarshalJSON()
			out.Write(js)
		}
		return out.String(), res
	}
	want, wantRes := rows(ms)
	got, gotRes := rows(c.Measurements)
	if got != want {
		t.Fatalf("rows of the decoded measurements:\n%s\nwant:\n%s", got, want)
	}
	if gotRes.Inserted != wantRes.Inserted || len(gotRes.Errors) != len(wantRes.Errors) || wantRes.Inserted != 4 {
		t.Fatalf("decoded: %d inserted, %d refused; given: %d, %d", gotRes.Inserted, len(gotRes.Errors), wantRes.Inserted, len(wantRes.Errors))
	}
	for i := range gotRes.Errors {
		if gotRes.Errors[i].Index != wantRes.Errors[i].Index {
			t.Fatalf("refusals: %+v, want %+v", gotRes.Errors, wantRes.Errors)
		}
	}
}

// encodeOwn's command is what a member decodes from its encoding, and
// there is none when a meta value is carried as a value.
func TestEncodeOwnIsDecoded(t *testing.T) {
	lp := model.MetaKey(mustCanonical(t, map[string]any{"host": "h1", "region": "eu"}))
	fs := func(v float64) []model.Field {
		return []model.Field{{Name: "v", Value: model.Float(v)}, {Name: "s", Value: model.String("a")}}
	}
	mixed := []model.Measurement{
		{Time: 1e9, Meta: lp, Fields: fs(1)},
		{Time: 2e9, Meta: map[string]any{"region": "eu", "host": "h1"}, Fields: fs(2)},
		{Time: 3e9, Meta: nil, Fields: []model.Field{{Name: "b", Value: model.Bool(true)}}},
		{Time: 4e9, Meta: "h3", Fields: fs(3)},
		{Time: 5e9, Meta: model.MetaKey("not canonical"), Fields: []model.Field{{Name: "s", Value: model.Int(7)}, {Name: "v", Value: model.Date(8)}}},
	}
	keys := []model.Measurement{{Time: 1, Meta: lp, Fields: fs(1)}, {Time: 2, Fields: fs(2)}, {Time: 3, Meta: lp, Fields: fs(3)}}
	for _, c := range []*Command{
		{Op: OpInsertKeyed, Collection: "m", Unordered: true, Measurements: mixed},
		{Op: OpInsertKeyed, Collection: "m", Measurements: keys, Session: "s1"},
	} {
		data, own, err := c.encodeOwn(nil, true)
		if err != nil || own == nil {
			t.Fatalf("encodeOwn: %v, %v", own, err)
		}
		dec, err := decodeCommand(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(own, dec) {
			t.Fatalf("own command\n%#v\ndecoded\n%#v", own, dec)
		}
	}
	if _, own, _ := (&Command{Op: OpInsertKeyed, Collection: "m", Measurements: keys}).encodeOwn(nil, true); &own.Measurements[0] != &keys[0] {
		t.Fatal("measurements whose meta values are keys were copied")
	}
	big := append(slices.Clone(mixed), model.Measurement{Time: 6e9, Meta: strings.Repeat("x", model.MaxMetaBytes+1), Fields: fs(4)})
	if _, own, err := (&Command{Op: OpInsertKeyed, Collection: "m", Measurements: big}).encodeOwn(nil, true); err != nil || own != nil {
		t.Fatalf("a meta value without a key: own %v, %v; want none", own, err)
	}
}

func mustCanonical(t *testing.T, v any) string {
	t.Helper()
	s, err := model.CanonicalMeta(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
