package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet/file"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
)

var day0 = time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC).UnixNano()

func present(n int, rows ...int) []uint64 {
	p := make([]uint64, (n+63)/64)
	for _, r := range rows {
		p[r>>6] |= 1 << (r & 63)
	}
	return p
}

// readFile reads a file back as a table, and its Parquet metadata.
func readFile(t *testing.T, data []byte) (arrow.Table, *file.Reader) {
	t.Helper()
	pr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tbl.Release)
	return tbl, pr
}

func colOf(t *testing.T, tbl arrow.Table, name string) arrow.Array {
	t.Helper()
	idx := tbl.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %q in %v", name, tbl.Schema())
	}
	ch := tbl.Column(idx[0]).Data().Chunks()
	if len(ch) != 1 {
		t.Fatalf("column %q: %d chunks", name, len(ch))
	}
	return ch[0]
}

func TestEncodeTypesOrderAndDays(t *testing.T) {
	const s = int64(time.Second)
	b := NewBatch("ts", "meta")
	// Series "s" sorts after "n" (by canonical meta key): added first,
	// written second. Its meta id is an int64, n's an int32: the column is
	// int64.
	south := &bucket.Columns{
		Times: []int64{day0 + 5*s, day0 + 1*s},
		Fields: []bucket.Column{
			{Name: "temp", Type: bucket.TypeInt, Ints: []int64{7, 8}},
			{Name: "mixed", Type: bucket.TypeString, Strings: []string{"a", "b"}},
		},
	}
	north1 := &bucket.Columns{
		Times: []int64{day0 + 3*s, day0 + 2*s, day0 + 24*3600*s + 1500}, // the last: next day, sub-µs
		Fields: []bucket.Column{
			{Name: "temp", Type: bucket.TypeFloat, Floats: []float64{1.5, math.Inf(1), -2}},
			{Name: "ok", Type: bucket.TypeBool, Bools: []bool{true, false, true}, Present: present(3, 0, 2)},
			{Name: "mixed", Type: bucket.TypeInt, Ints: []int64{10, 11, 12}},
			{Name: "when", Type: bucket.TypeDate, Ints: []int64{day0, day0 + s, day0 + 2*s}},
		},
	}
	b.Add(`{"id":3,"site":"s"}`, map[string]any{"site": "s", "id": int64(3)}, south)
	b.Add(`{"id":1,"site":"n"}`, map[string]any{"site": "n", "id": int32(1)}, north1)
	if b.Rows() != 5 {
		t.Fatalf("rows %d", b.Rows())
	}
	files, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Date != "2026-01-02" || files[1].Date != "2026-01-03" {
		t.Fatalf("files %+v", files)
	}
	if files[0].Rows != 4 || files[1].Rows != 1 || files[0].MinT != day0+s || files[0].MaxT != day0+5*s {
		t.Fatalf("file 0: rows %d min %d max %d", files[0].Rows, files[0].MinT, files[0].MaxT)
	}

	tbl, pr := readFile(t, files[0].Data)
	names := []string{}
	for _, f := range tbl.Schema().Fields() {
		names = append(names, f.Name+":"+f.Type.String())
	}
	want := []string{
		"ts:timestamp[us, tz=UTC]", "meta.id:int64", "meta.site:utf8",
		"mixed:utf8", "ok:bool", "temp:float64", "when:timestamp[us, tz=UTC]", "$meta:utf8",
	}
	if len(names) != len(want) {
		t.Fatalf("schema %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("schema %v, want %v", names, want)
		}
	}
	// Meta "n" first, by time; then "s", by time.
	ts := colOf(t, tbl, "ts").(*array.Timestamp)
	wantT := []int64{day0 + 2*s, day0 + 3*s, day0 + 1*s, day0 + 5*s}
	for i, w := range wantT {
		if int64(ts.Value(i))*1000 != w {
			t.Fatalf("row %d: time %d, want %d", i, int64(ts.Value(i))*1000, w)
		}
	}
	site := colOf(t, tbl, "meta.site").(*array.String)
	id := colOf(t, tbl, "meta.id").(*array.Int64)
	if site.Value(0) != "n" || site.Value(3) != "s" || id.Value(0) != 1 || id.Value(2) != 3 {
		t.Fatalf("meta columns %v %v", site, id)
	}
	temp := colOf(t, tbl, "temp").(*array.Float64)
	if temp.Value(0) != math.Inf(1) || temp.Value(1) != 1.5 || temp.Value(2) != 8 || temp.Value(3) != 7 {
		t.Fatalf("temp %v", temp)
	}
	ok := colOf(t, tbl, "ok").(*array.Boolean)
	if !ok.IsNull(0) || !ok.Value(1) || !ok.IsNull(2) {
		t.Fatalf("ok %v", ok)
	}
	mixed := colOf(t, tbl, "mixed").(*array.String)
	if mixed.Value(0) != "11" || mixed.Value(1) != "10" || mixed.Value(2) != `"b"` {
		t.Fatalf("mixed %v", mixed)
	}
	md := pr.MetaData()
	if v := md.KeyValueMetadata().FindValue(MetaPaths); v == nil || *v != `["meta.id","meta.site"]` {
		t.Fatalf("meta paths %v", v)
	}
	if v := md.KeyValueMetadata().FindValue(MetaJSONColumns); v == nil || *v != `["mixed"]` {
		t.Fatalf("JSON columns %v", v)
	}
	if keys := colOf(t, tbl, MetaKeyColumn).(*array.String); keys.Value(0) != `{"id":1,"site":"n"}` || keys.Value(3) != `{"id":3,"site":"s"}` {
		t.Fatalf("meta keys %v", keys)
	}
	rg := md.RowGroup(0)
	for i := 0; i < rg.NumColumns(); i++ {
		cc, err := rg.ColumnChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if set, err := cc.StatsSet(); err != nil || !set {
			t.Fatalf("column %d: no statistics (%v)", i, err)
		}
		if cc.Compression().String() != "ZSTD" {
			t.Fatalf("column %d: %v", i, cc.Compression())
		}
	}

	// The next day's file keeps its sub-microsecond time.
	tbl, _ = readFile(t, files[1].Data)
	ts = colOf(t, tbl, "ts").(*array.Timestamp)
	if tbl.Schema().Field(0).Type.(*arrow.TimestampType).Unit != arrow.Nanosecond || int64(ts.Value(0)) != day0+24*3600*s+1500 {
		t.Fatalf("next day: %v %v", tbl.Schema(), ts)
	}
}

func TestEncodeScalarMetaAndNone(t *testing.T) {
	b := NewBatch("t", "sensor")
	b.Add(`5`, int64(5), &bucket.Columns{Times: []int64{day0}, Fields: []bucket.Column{{Name: "v", Type: bucket.TypeFloat, Floats: []float64{1}}}})
	b.Add(``, nil, &bucket.Columns{Times: []int64{day0 + 1}, Fields: []bucket.Column{{Name: "v", Type: bucket.TypeFloat, Floats: []float64{2}}}})
	b.Add(`"x"`, "x", &bucket.Columns{})
	files, err := b.Encode()
	if err != nil || len(files) != 1 {
		t.Fatal(files, err)
	}
	tbl, _ := readFile(t, files[0].Data)
	sensor := colOf(t, tbl, "sensor").(*array.Int64)
	// The series without a meta value sorts first.
	if !sensor.IsNull(0) || sensor.Value(1) != 5 {
		t.Fatalf("sensor %v", sensor)
	}
	if _, err := model.CanonicalMeta(int64(5)); err != nil {
		t.Fatal(err)
	}
}

// What Encode writes, a Reader reads back into the same series, rows and
// values, field by field: a mixed field's values with their own types, in
// segments of one type each.
func TestReaderRoundTrip(t *testing.T) {
	const s = int64(time.Second)
	id := [12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	a := &bucket.Columns{
		Times: []int64{day0 + 1*s, day0 + 2*s, day0 + 3*s},
		Fields: []bucket.Column{
			{Name: "temp", Type: bucket.TypeFloat, Floats: []float64{1.5, math.NaN(), -2}, Present: present(3, 0, 1, 2)},
			{Name: "n", Type: bucket.TypeInt32, Ints: []int64{1, 0, 3}, Present: present(3, 0, 2)},
			{Name: "id", Type: bucket.TypeObjectID, IDs: append(append(id[:], id[:]...), id[:]...)},
			{Name: "mixed", Type: bucket.TypeInt, Ints: []int64{10, 11, 12}},
		},
	}
	b := &bucket.Columns{
		Times: []int64{day0 + 4*s},
		Fields: []bucket.Column{
			{Name: "mixed", Type: bucket.TypeString, Strings: []string{"x"}},
			{Name: "when", Type: bucket.TypeDate, Ints: []int64{day0}},
		},
	}
	bt := NewBatch("ts", "m")
	bt.Add(`"a"`, "a", a)
	bt.Add(`"b"`, "b", b)
	files, err := bt.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(files[0].Data))
	if err != nil {
		t.Fatal(err)
	}
	if r.NumRowGroups() != 1 || r.Rows() != 4 {
		t.Fatalf("%d row groups, %d rows", r.NumRowGroups(), r.Rows())
	}
	minT, maxT, minM, maxM, ok := r.Bounds(0)
	if !ok || minT != day0+s || maxT != day0+4*s || minM != `"a"` || maxM != `"b"` {
		t.Fatalf("bounds %d %d %q %q %v", minT, maxT, minM, maxM, ok)
	}
	segs, n, err := r.ReadRowGroup(context.Background(), 0, nil, math.MinInt64, math.MaxInt64, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 2 || segs[0].MetaKey != `"a"` || segs[1].MetaKey != `"b"` || n <= 0 {
		t.Fatalf("segments %+v", segs)
	}
	field := func(c *bucket.Columns, name string) *bucket.Column {
		for i := range c.Fields {
			if c.Fields[i].Name == name {
				return &c.Fields[i]
			}
		}
		return nil
	}
	ga := &segs[0].Cols
	if len(ga.Times) != 3 || ga.Times[2] != day0+3*s {
		t.Fatalf("a times %v", ga.Times)
	}
	if f := field(ga, "temp"); f == nil || f.Type != bucket.TypeFloat || f.Floats[0] != 1.5 || !math.IsNaN(f.Floats[1]) || f.Present != nil {
		t.Fatalf("temp %+v", f)
	}
	if f := field(ga, "n"); f == nil || f.Type != bucket.TypeInt32 || f.IsPresent(1) || !f.IsPresent(2) || f.Ints[2] != 3 {
		t.Fatalf("n %+v", f)
	}
	if f := field(ga, "id"); f == nil || f.Type != bucket.TypeObjectID || !bytes.Equal(f.IDs[12:24], id[:]) {
		t.Fatalf("id %+v", f)
	}
	if f := field(ga, "mixed"); f == nil || f.Type != bucket.TypeInt || f.Ints[1] != 11 {
		t.Fatalf("mixed in a %+v", f)
	}
	gb := &segs[1].Cols
	if f := field(gb, "mixed"); f == nil || f.Type != bucket.TypeString || f.Strings[0] != "x" {
		t.Fatalf("mixed in b %+v", f)
	}
	if f := field(gb, "when"); f == nil || f.Type != bucket.TypeDate || f.Ints[0] != day0 {
		t.Fatalf("when %+v", f)
	}
	if field(gb, "temp") != nil {
		t.Fatal("b has no temp, yet a column came back")
	}
	// A time range and a series filter; a projection.
	segs, _, err = r.ReadRowGroup(context.Background(), 0, []string{"n", "nope"}, day0+2*s, day0+4*s, func(k string) bool { return k == `"a"` })
	if err != nil || len(segs) != 1 || len(segs[0].Cols.Times) != 2 || len(segs[0].Cols.Fields) != 1 || segs[0].Cols.Fields[0].Name != "n" {
		t.Fatalf("filtered read %+v %v", segs, err)
	}
	if _, err := NewReader(bytes.NewReader([]byte("PAR1 not a file PAR1"))); !errors.Is(err, ErrNotArchive) {
		t.Fatalf("garbage: %v", err)
	}
}

// Encode then read back, on columns made from the fuzzer's bytes: every
// value comes back in its series, at its time, with its type. (Arbitrary
// bytes are not fed to NewReader: the Parquet library panics or loops on
// some damaged pages, so a file is read only once its checksum, kept in
// the catalog, matches; see docs/archive.md.)
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, uint8(3))
	f.Add([]byte("a mixed bag of bytes, longer"), uint8(200))
	f.Fuzz(func(t *testing.T, data []byte, kinds uint8) {
		if len(data) < 2 {
			return
		}
		n := min(len(data)/2, 300)
		cols := &bucket.Columns{Times: make([]int64, n)}
		v := bucket.Column{Name: "v"}
		switch kinds % 4 {
		case 0:
			v.Type = bucket.TypeFloat
		case 1:
			v.Type = bucket.TypeInt
		case 2:
			v.Type = bucket.TypeString
		default:
			v.Type = bucket.TypeBool
		}
		var pres []int
		for i := 0; i < n; i++ {
			x := data[2*i]
			cols.Times[i] = day0 + int64(data[2*i+1])*int64(time.Hour)/4 + int64(i) // up to 3 days
			if x%5 != 0 {
				pres = append(pres, i)
			}
			switch v.Type {
			case bucket.TypeFloat:
				v.Floats = append(v.Floats, float64(int8(x))/3)
			case bucket.TypeInt:
				v.Ints = append(v.Ints, int64(int8(x))<<40)
			case bucket.TypeString:
				v.Strings = append(v.Strings, string(data[:x%uint8(len(data))]))
			default:
				v.Bools = append(v.Bools, x&1 == 1)
			}
		}
		v.Present = present(n, pres...)
		cols.Fields = []bucket.Column{v}
		b := NewBatch("t", "m")
		key := fmt.Sprintf("%d", kinds)
		b.Add(key, int64(kinds), cols)
		files, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, fl := range files {
			r, err := NewReader(bytes.NewReader(fl.Data))
			if err != nil {
				t.Fatal(err)
			}
			for g := 0; g < r.NumRowGroups(); g++ {
				segs, _, err := r.ReadRowGroup(context.Background(), g, nil, math.MinInt64, math.MaxInt64, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range segs {
					if s.MetaKey != key {
						t.Fatalf("meta %q", s.MetaKey)
					}
					for j, tm := range s.Cols.Times {
						// Find the written row: times are distinct.
						i := -1
						for k, w := range cols.Times {
							if w == tm {
								i = k
							}
						}
						if i < 0 {
							t.Fatalf("time %d was not written", tm)
						}
						got++
						var c *bucket.Column
						if len(s.Cols.Fields) > 0 {
							c = &s.Cols.Fields[0]
						}
						if !v.IsPresent(i) {
							if c != nil && c.IsPresent(j) {
								t.Fatalf("row %d: a value came back for none", i)
							}
							continue
						}
						if c == nil || !c.IsPresent(j) || c.Type != v.Type {
							t.Fatalf("row %d: %+v", i, c)
						}
						same := false
						switch v.Type {
						case bucket.TypeFloat:
							same = c.Floats[j] == v.Floats[i]
						case bucket.TypeInt:
							same = c.Ints[j] == v.Ints[i]
						case bucket.TypeString:
							same = c.Strings[j] == v.Strings[i]
						default:
							same = c.Bools[j] == v.Bools[i]
						}
						if !same {
							t.Fatalf("row %d: value differs", i)
						}
					}
				}
			}
		}
		if got != n {
			t.Fatalf("%d rows back, %d written", got, n)
		}
	})
}

// A null value is a Parquet null, not a reason for a column of text: a
// float field with nulls stays DOUBLE. Integers beyond 2^53 beside
// doubles are kept exactly, as Extended JSON text.
func TestEncodeNullsAndLargeIntegers(t *testing.T) {
	null := string([]byte{0x0A})
	b := NewBatch("t", "m")
	b.Add(`"a"`, "a", &bucket.Columns{Times: []int64{day0, day0 + 1}, Fields: []bucket.Column{
		{Name: "temp", Type: bucket.TypeFloat, Floats: []float64{21.5, 22}},
		{Name: "big", Type: bucket.TypeFloat, Floats: []float64{1.5, 2.5}}}})
	b.Add(`"b"`, "b", &bucket.Columns{Times: []int64{day0 + 2}, Fields: []bucket.Column{
		{Name: "temp", Type: bucket.TypeBSON, Strings: []string{null}},
		{Name: "big", Type: bucket.TypeInt, Ints: []int64{1<<53 + 1}}}})
	files, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := readFile(t, files[0].Data)
	temp, ok := colOf(t, tbl, "temp").(*array.Float64)
	if !ok || temp.Value(0) != 21.5 || !temp.IsNull(2) {
		t.Fatalf("temp: %v", colOf(t, tbl, "temp"))
	}
	big, ok := colOf(t, tbl, "big").(*array.String)
	if !ok || big.Value(2) != "9007199254740993" {
		t.Fatalf("big: %v", colOf(t, tbl, "big"))
	}
}

// A measurement field named as a meta path (a dotted name beside a meta
// document) is written under a column of its own and read back as itself.
func TestEncodeFieldNamedAsMetaPath(t *testing.T) {
	b := NewBatch("t", "m")
	b.Add(`{"x":"a"}`, map[string]any{"x": "a"}, &bucket.Columns{Times: []int64{day0}, Fields: []bucket.Column{
		{Name: "m.x", Type: bucket.TypeFloat, Floats: []float64{4.5}}}})
	files, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := readFile(t, files[0].Data)
	if colOf(t, tbl, "m.x").(*array.String).Value(0) != "a" || colOf(t, tbl, "$field:m.x").(*array.Float64).Value(0) != 4.5 {
		t.Fatalf("columns %v", tbl.Schema())
	}
	r, err := NewReader(bytes.NewReader(files[0].Data))
	if err != nil {
		t.Fatal(err)
	}
	segs, _, err := r.ReadRowGroup(context.Background(), 0, nil, math.MinInt64, math.MaxInt64, nil)
	if err != nil || len(segs) != 1 || len(segs[0].Cols.Fields) != 1 || segs[0].Cols.Fields[0].Name != "m.x" || segs[0].Cols.Fields[0].Floats[0] != 4.5 {
		t.Fatalf("read back %+v %v", segs, err)
	}
}
