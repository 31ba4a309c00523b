package archive

import (
	"bytes"
	"context"
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
		"mixed:utf8", "ok:bool", "temp:float64", "when:timestamp[us, tz=UTC]",
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
	if v := md.KeyValueMetadata().FindValue(MetaPaths); v == nil || *v != "meta.id,meta.site" {
		t.Fatalf("meta paths %v", v)
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
