package timeseries

import (
	"math"
	"reflect"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	groups := []group{
		{metaKey: `"a"`, rows: []Measurement{
			{Time: math.MinInt64, Fields: []Field{{"f", Float(math.Copysign(0, -1))}, {"i", Int(math.MaxInt64)}}},
			{Time: math.MaxInt64, Fields: []Field{{"i", Int(math.MinInt64)}, {"f", Float(math.Inf(1))}}},
			{Time: 0, Fields: []Field{{"s", String("")}, {"b", Bool(true)}, {"d", Date(-5)}}},
			{Time: 0},
		}},
		{metaKey: `null`, rows: []Measurement{{Time: 7, Fields: []Field{{"f", Float(1.5)}}}}},
	}
	var e recordEncoder
	rec := e.encodeInsert(nil, 42, groups)
	if rec[0] != recInsert {
		t.Fatalf("kind %d", rec[0])
	}
	coll, got, err := decodeInsert(rec[1:])
	if err != nil || coll != 42 {
		t.Fatal(coll, err)
	}
	for gi := range groups {
		for ri := range groups[gi].rows {
			if groups[gi].rows[ri].Fields == nil {
				groups[gi].rows[ri].Fields = []Field{}
			}
		}
	}
	if !reflect.DeepEqual(got, groups) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, groups)
	}
	d := deleteRecord{coll: 3, minTime: -9, maxTime: math.MaxInt64, metaKeys: []string{`"a"`, `{"x":1}`}}
	back, err := decodeDelete(d.encode(nil)[1:])
	if err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("delete round trip: %+v %v", back, err)
	}
}

// FuzzDecodeRecord feeds arbitrary bytes to the log record decoders: they
// must fail cleanly, never panic or allocate without bound; what decodes
// must encode back to the same meaning.
func FuzzDecodeRecord(f *testing.F) {
	var e recordEncoder
	f.Add(e.encodeInsert(nil, 1, []group{{metaKey: `"x"`, rows: []Measurement{{Time: 5, Fields: []Field{{"v", Float(1)}, {"s", String("abc")}}}}}})[1:])
	f.Add((&deleteRecord{coll: 1, metaKeys: []string{"k"}}).encode(nil)[1:])
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		if coll, groups, err := decodeInsert(b); err == nil {
			var e recordEncoder
			again := e.encodeInsert(nil, coll, groups)
			c2, g2, err := decodeInsert(again[1:])
			if err != nil || c2 != coll || len(g2) != len(groups) {
				t.Fatalf("re-encoded record does not decode: %v", err)
			}
		}
		_, _ = decodeDelete(b)
	})
}
