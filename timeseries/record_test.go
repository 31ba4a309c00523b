package timeseries

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/partialfilter"
)

func TestRecordRoundTrip(t *testing.T) {
	groups := []group{
		{metaKey: `"a"`, rows: []model.Measurement{
			{Time: math.MinInt64, Fields: []model.Field{{Name: "f", Value: model.Float(math.Copysign(0, -1))}, {Name: "i", Value: model.Int(math.MaxInt64)}}},
			{Time: math.MaxInt64, Fields: []model.Field{{Name: "i", Value: model.Int(math.MinInt64)}, {Name: "f", Value: model.Float(math.Inf(1))}}},
			{Time: 0, Fields: []model.Field{{Name: "s", Value: model.String("")}, {Name: "b", Value: model.Bool(true)}, {Name: "d", Value: model.Date(-5)}}},
			{Time: 0},
		}},
		{metaKey: `null`, rows: []model.Measurement{{Time: 7, Fields: []model.Field{{Name: "f", Value: model.Float(1.5)}}}}},
		// Names shared with the previous group's last row, and not.
		{metaKey: `"b"`, rows: []model.Measurement{{Time: 8, Fields: []model.Field{{Name: "f", Value: model.Float(2)}, {Name: "i", Value: model.Int(3)}}}}},
		{metaKey: `"c"`, rows: []model.Measurement{{Time: 9, Fields: []model.Field{{Name: "f", Value: model.Float(4)}, {Name: "s", Value: model.String("x")}}}}},
		{metaKey: `"d"`, rows: []model.Measurement{{Time: 9, Fields: []model.Field{{Name: "i", Value: model.Int(5)}, {Name: "f", Value: model.Float(6)}}}}},
		// The kinds of store format 4; ObjectIds written by what they
		// share with the record's last one, across rows and groups.
		{metaKey: `"e"`, rows: []model.Measurement{
			{Time: 10, Fields: []model.Field{{Name: "_id", Value: model.ObjectID([12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})},
				{Name: "i32", Value: model.Int32(math.MinInt32)}, {Name: "dec", Value: model.BSONValue(0x13, make([]byte, 16))}}},
			{Time: 11, Fields: []model.Field{{Name: "_id", Value: model.ObjectID([12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13})},
				{Name: "oid", Value: model.ObjectID([12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13})}}},
		}},
		{metaKey: `"f"`, rows: []model.Measurement{
			{Time: 12, Fields: []model.Field{{Name: "_id", Value: model.ObjectID([12]byte{9, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14})}}},
			{Time: 13, Fields: []model.Field{{Name: "_id", Value: model.ObjectID([12]byte{})}, {Name: "i32", Value: model.Int32(math.MaxInt32)}}},
		}},
	}
	// A group a record named by id, and one of a durable series: both
	// are written by id (ref, the id + 1), the second's key left out.
	durable := &series{id: 40, metaKey: `"h"`}
	durable.durable.Store(true)
	groups = append(groups,
		group{ref: 8, rows: []model.Measurement{{Time: 14, Fields: []model.Field{{Name: "f", Value: model.Float(7)}}}}},
		group{metaKey: `"h"`, s: durable, rows: []model.Measurement{{Time: 15, Fields: []model.Field{{Name: "f", Value: model.Float(8)}}}}})
	var e recordEncoder
	rec := e.encodeInsert(nil, 42, groups)
	if rec[0] != recInsertByID {
		t.Fatalf("kind %d", rec[0])
	}
	coll, got, err := decodeInsert(rec[1:], true)
	if err != nil || coll != 42 {
		t.Fatal(coll, err)
	}
	groups[len(groups)-1] = group{ref: 41, rows: groups[len(groups)-1].rows}
	for gi := range groups {
		for ri := range groups[gi].rows {
			if groups[gi].rows[ri].Fields == nil {
				groups[gi].rows[ri].Fields = []model.Field{}
			}
		}
	}
	if !reflect.DeepEqual(got, groups) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, groups)
	}
	d := deleteRecord{coll: 3, minTime: -9, maxTime: math.MaxInt64, metaKeys: []string{`"a"`, `{"x":1}`}}
	back, err := decodeDelete(d.encode(nil)[1:], false)
	if err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("delete round trip: %+v %v", back, err)
	}
	// A delete by filter logs the filter's canonical text: conditions in
	// another order log the same bytes.
	w := d
	w.filter = partialfilter.MustParseJSON(`{"v": {"$lt": 0}, "meta.site": "x", "s": {"$in": ["a", 1.5]}}`)
	enc := w.encode(nil)
	if enc[0] != recDeleteWhere {
		t.Fatalf("kind %d, want %d", enc[0], recDeleteWhere)
	}
	w2 := w
	w2.filter = partialfilter.MustParseJSON(`{"s": {"$in": ["a", 1.5]}, "meta.site": {"$eq": "x"}, "v": {"$lt": 0}}`)
	if !bytes.Equal(w2.encode(nil), enc) {
		t.Fatalf("equal filters log different bytes:\n%q\n%q", w2.encode(nil), enc)
	}
	wb, err := decodeDelete(enc[1:], true)
	if err != nil || !sameDelete(wb, w) {
		t.Fatalf("delete by filter round trip: %+v %v", wb, err)
	}
}

func TestMetaUpdateRecordRoundTrip(t *testing.T) {
	r := metaUpdateRecord{coll: 7, moves: []metaMove{{`{"n":1}`, `{"n":2}`}, {`{"n":2}`, `{"n":3}`}, {`"x"`, `null`}}}
	enc := r.encode(nil)
	if enc[0] != recMetaUpdate {
		t.Fatalf("kind %d", enc[0])
	}
	back, err := decodeMetaUpdate(enc[1:])
	if err != nil || !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if _, err := decodeMetaUpdate(enc[1 : len(enc)-1]); err == nil {
		t.Fatal("a record cut short decoded")
	}
}

// sameDelete compares delete records, filters by their canonical text.
func sameDelete(a, b deleteRecord) bool {
	if (a.filter == nil) != (b.filter == nil) || a.filter != nil && a.filter.String() != b.filter.String() {
		return false
	}
	a.filter, b.filter = nil, nil
	return reflect.DeepEqual(a, b)
}

// FuzzDecodeRecord feeds arbitrary bytes to the log record decoders: they
// must fail cleanly, never panic or allocate without bound; what decodes
// must encode back to the same record, field by field, and to the same
// bytes when encoded again.
func FuzzDecodeRecord(f *testing.F) {
	var e recordEncoder
	f.Add(e.encodeInsert(nil, 1, []group{{metaKey: `"x"`, rows: []model.Measurement{{Time: 5, Fields: []model.Field{{Name: "v", Value: model.Float(1)}, {Name: "s", Value: model.String("abc")}}}}}})[1:])
	f.Add(e.encodeInsert(nil, 9, []group{
		{metaKey: `{"a":1}`, rows: []model.Measurement{
			{Time: -3, Fields: []model.Field{{Name: "i", Value: model.Int(-7)}, {Name: "b", Value: model.Bool(true)}, {Name: "d", Value: model.Date(11)}, {Name: "n", Value: model.Float(math.NaN())}}},
			{Time: 40, Fields: []model.Field{{Name: "i", Value: model.Int(8)}, {Name: "s", Value: model.String("")}}},
			{Time: 40},
		}},
		{metaKey: `null`, rows: []model.Measurement{{Time: math.MaxInt64, Fields: []model.Field{{Name: "b", Value: model.Bool(false)}}}}},
	})[1:])
	f.Add((&deleteRecord{coll: 1, metaKeys: []string{"k"}}).encode(nil)[1:])
	f.Add((&deleteRecord{coll: 4, minTime: -9, maxTime: 12, metaKeys: []string{`"a"`, `{"x":1}`}}).encode(nil)[1:])
	f.Add((&deleteRecord{coll: 4, minTime: -9, maxTime: 12, metaKeys: []string{`"a"`}, filter: partialfilter.MustParseJSON(`{"v": {"$gte": 50}}`)}).encode(nil)[1:])
	f.Add((&metaUpdateRecord{coll: 2, moves: []metaMove{{`"a"`, `"b"`}}}).encode(nil)[1:])
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, byID := range []bool{false, true} {
			coll, groups, err := decodeInsert(b, byID)
			if err != nil {
				continue
			}
			var e recordEncoder
			again := e.encodeInsert(nil, coll, groups)
			c2, g2, err := decodeInsert(again[1:], true)
			if err != nil || c2 != coll {
				t.Fatalf("re-encoded record does not decode: collection %d, want %d: %v", c2, coll, err)
			}
			if diff := diffGroups(g2, groups); diff != "" {
				t.Fatalf("re-encoded record decodes to another: %s", diff)
			}
			if third := e.encodeInsert(nil, c2, g2); !bytes.Equal(third, again) {
				t.Fatalf("encoding is not stable:\n%x\n%x", third, again)
			}
		}
		if r, err := decodeMetaUpdate(b); err == nil {
			back, err := decodeMetaUpdate(r.encode(nil)[1:])
			if err != nil || !reflect.DeepEqual(back, r) {
				t.Fatalf("meta update record round trip: %+v, want %+v: %v", back, r, err)
			}
		}
		for _, where := range []bool{false, true} {
			if d, err := decodeDelete(b, where); err == nil {
				back, err := decodeDelete(d.encode(nil)[1:], where)
				if err != nil || !sameDelete(back, d) {
					t.Fatalf("delete record round trip: %+v, want %+v: %v", back, d, err)
				}
			}
		}
	})
}

// diffGroups describes the first difference between two decoded insert
// records, "" when they are the same; float values compare by their bits,
// so NaN equals NaN.
func diffGroups(got, want []group) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d groups, want %d", len(got), len(want))
	}
	for gi := range want {
		g, w := &got[gi], &want[gi]
		if g.metaKey != w.metaKey || g.ref != w.ref {
			return fmt.Sprintf("group %d: meta %q ref %d, want %q %d", gi, g.metaKey, g.ref, w.metaKey, w.ref)
		}
		if len(g.rows) != len(w.rows) {
			return fmt.Sprintf("group %d: %d rows, want %d", gi, len(g.rows), len(w.rows))
		}
		for ri := range w.rows {
			gr, wr := &g.rows[ri], &w.rows[ri]
			if gr.Time != wr.Time || !reflect.DeepEqual(gr.Meta, wr.Meta) || len(gr.Fields) != len(wr.Fields) {
				return fmt.Sprintf("group %d row %d: time %d meta %v %d fields, want %d %v %d", gi, ri, gr.Time, gr.Meta, len(gr.Fields), wr.Time, wr.Meta, len(wr.Fields))
			}
			for fi := range wr.Fields {
				gf, wf := gr.Fields[fi], wr.Fields[fi]
				if gf.Name != wf.Name || gf.Value.Kind != wf.Value.Kind || math.Float64bits(gf.Value.F) != math.Float64bits(wf.Value.F) ||
					gf.Value.I != wf.Value.I || gf.Value.S != wf.Value.S || gf.Value.B != wf.Value.B {
					return fmt.Sprintf("group %d row %d field %d: %+v, want %+v", gi, ri, fi, gf, wf)
				}
			}
		}
	}
	return ""
}

// TestRecordWholeFloats: a float that is a whole number within ±2^53 is
// logged as a varint (recFloatWhole) and read back bit for bit; -0, NaNs
// (Prometheus' staleness marker among them), infinities, fractions and
// larger values keep their 8 bytes. A whole float past 2^53 in a record
// is refused.
func TestRecordWholeFloats(t *testing.T) {
	stale := math.Float64frombits(0x7ff0000000000002)
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 58, -273, 1 << 53, -(1 << 53), 1<<53 + 2, 1e300, stale, math.NaN(), math.Inf(1), math.Inf(-1), 0.5, -2.25, 1e15}
	whole := map[int]bool{0: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 16: true}
	var rows []model.Measurement
	for i, v := range vals {
		rows = append(rows, model.Measurement{Time: int64(i), Fields: []model.Field{{Name: "v", Value: model.Float(v)}}})
	}
	var e recordEncoder
	rec := e.encodeInsert(nil, 1, []group{{metaKey: `"a"`, rows: rows}})
	_, got, err := decodeInsert(rec[1:], true)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		f := got[0].rows[i].Fields[0].Value
		if f.Kind != model.KindFloat || math.Float64bits(f.F) != math.Float64bits(v) {
			t.Errorf("%v (%#x) read back as %v (%#x), kind %d", v, math.Float64bits(v), f.F, math.Float64bits(f.F), f.Kind)
		}
		if _, ok := wholeFloat(v); ok != whole[i] {
			t.Errorf("%v: written whole %v, want %v", v, ok, whole[i])
		}
	}
	// Whole readings take a few bytes, not 9.
	one := func(v float64) int {
		return len(e.encodeInsert(nil, 1, []group{{metaKey: `"a"`, rows: []model.Measurement{{Fields: []model.Field{{Name: "v", Value: model.Float(v)}}}}}}))
	}
	if a, b := one(58), one(58.5); b-a != 7 {
		t.Fatalf("58 takes %d bytes, 58.5 %d: want 7 fewer", a, b)
	}
	// A whole float past 2^53: corrupt.
	bad := e.encodeInsert(nil, 1, []group{{metaKey: `"a"`, rows: []model.Measurement{{Fields: []model.Field{{Name: "v", Value: model.Float(1 << 53)}}}}}})
	i := bytes.IndexByte(bad, recFloatWhole)
	bad = append(binary.AppendVarint(bad[:i+1], 1<<53+1), bad[i+1+len(binary.AppendVarint(nil, 1<<53)):]...)
	if _, _, err := decodeInsert(bad[1:], true); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a whole float past 2^53: %v", err)
	}
}
