package archive

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/file"
	"github.com/apache/arrow/go/v15/parquet/metadata"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
)

// ErrNotArchive is returned (wrapped) for a Parquet file this package did
// not write: no Hourglass metadata, or columns that do not match it.
var ErrNotArchive = errors.New("archive: not an archive file")

// Reader reads an archive file back into bucket columns, a row group at a
// time. It is not safe for concurrent use.
type Reader struct {
	pr        *file.Reader
	fr        *pqarrow.FileReader
	timeField string
	metaField string
	unit      arrow.TimeUnit
	timeCol   int // leaf column index of the timeField
	metaCol   int // of MetaKeyColumn; -1 without a metaField
	fields    map[string]int
	json, ids map[string]bool
}

// NewReader reads the footer of the archive file r holds.
func NewReader(r parquet.ReaderAtSeeker) (*Reader, error) {
	pr, err := file.NewParquetReader(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotArchive, err)
	}
	rd := &Reader{pr: pr, metaCol: -1, fields: map[string]int{}, json: map[string]bool{}, ids: map[string]bool{}}
	kv := pr.MetaData().KeyValueMetadata()
	get := func(k string) (string, bool) {
		v := kv.FindValue(k)
		if v == nil {
			return "", false
		}
		return *v, true
	}
	var ok bool
	if rd.timeField, ok = get(MetaTimeField); !ok || rd.timeField == "" {
		return nil, fmt.Errorf("%w: no %s", ErrNotArchive, MetaTimeField)
	}
	rd.metaField, _ = get(MetaMetaField)
	var metaPaths, jsonCols, idCols []string
	for _, l := range []struct {
		key string
		dst *[]string
	}{{MetaPaths, &metaPaths}, {MetaJSONColumns, &jsonCols}, {MetaObjectIDColumns, &idCols}} {
		if v, ok := get(l.key); ok && v != "" {
			if err := json.Unmarshal([]byte(v), l.dst); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrNotArchive, l.key, err)
			}
		}
	}
	renamed := map[string]string{} // column -> field
	if v, ok := get(MetaFieldColumns); ok && v != "" {
		if err := json.Unmarshal([]byte(v), &renamed); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrNotArchive, MetaFieldColumns, err)
		}
	}
	field := func(col string) string {
		if f, ok := renamed[col]; ok {
			return f
		}
		return col
	}
	for _, c := range jsonCols {
		rd.json[field(c)] = true
	}
	for _, c := range idCols {
		rd.ids[field(c)] = true
	}
	isMeta := map[string]bool{}
	for _, p := range metaPaths {
		isMeta[p] = true
	}
	rd.fr, err = pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotArchive, err)
	}
	schema, err := rd.fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotArchive, err)
	}
	rd.timeCol = -1
	for i, f := range schema.Fields() {
		switch {
		case f.Name == rd.timeField:
			ts, ok := f.Type.(*arrow.TimestampType)
			if !ok {
				return nil, fmt.Errorf("%w: time column %q is %s", ErrNotArchive, f.Name, f.Type)
			}
			rd.timeCol, rd.unit = i, ts.Unit
		case f.Name == MetaKeyColumn && rd.metaField != "":
			rd.metaCol = i
		case isMeta[f.Name]:
		default:
			rd.fields[field(f.Name)] = i
		}
	}
	if rd.timeCol < 0 || (rd.metaField != "" && rd.metaCol < 0) {
		return nil, fmt.Errorf("%w: no time or %s column", ErrNotArchive, MetaKeyColumn)
	}
	if len(schema.Fields()) != pr.MetaData().Schema.NumColumns() {
		return nil, fmt.Errorf("%w: nested columns", ErrNotArchive)
	}
	return rd, nil
}

// NumRowGroups returns the row groups of the file.
func (r *Reader) NumRowGroups() int { return r.pr.NumRowGroups() }

// Rows returns the rows of the file.
func (r *Reader) Rows() int64 { return r.pr.NumRows() }

// Bounds returns the least and greatest time (ns) and meta key of row
// group i, from its statistics; ok is false when it has none.
func (r *Reader) Bounds(i int) (minT, maxT int64, minMeta, maxMeta string, ok bool) {
	rg := r.pr.MetaData().RowGroup(i)
	cc, err := rg.ColumnChunk(r.timeCol)
	if err != nil {
		return 0, 0, "", "", false
	}
	st, err := cc.Statistics()
	if err != nil || st == nil || !st.HasMinMax() {
		return 0, 0, "", "", false
	}
	is, ok := st.(*metadata.Int64Statistics)
	if !ok {
		return 0, 0, "", "", false
	}
	minT, maxT = r.nanos(is.Min()), r.nanos(is.Max())
	minMeta, maxMeta = "", "\xff"
	if r.metaCol >= 0 {
		cc, err := rg.ColumnChunk(r.metaCol)
		if err != nil {
			return 0, 0, "", "", false
		}
		st, err := cc.Statistics()
		if err == nil && st != nil && st.HasMinMax() {
			if bs, ok := st.(*metadata.ByteArrayStatistics); ok {
				minMeta, maxMeta = string(bs.Min()), string(bs.Max())
			}
		}
	}
	return minT, maxT, minMeta, maxMeta, true
}

func (r *Reader) nanos(v int64) int64 {
	switch r.unit {
	case arrow.Second:
		return v * int64(time.Second)
	case arrow.Millisecond:
		return v * int64(time.Millisecond)
	case arrow.Microsecond:
		return v * int64(time.Microsecond)
	}
	return v
}

// Segment is the rows of one series in a row group, in time order.
type Segment struct {
	// MetaKey is the series' canonical meta key: "null" in a file of a
	// collection without a metaField.
	MetaKey string
	Cols    bucket.Columns
}

// ReadRowGroup reads row group i: the rows with a time in [minT, maxT] of
// the series want accepts (nil: all), with the fields named (nil: all; a
// field the file lacks is left out), as one or more segments per series
// (more when a field of mixed types changes type between rows: a column
// holds one type). Bytes reports the memory the segments hold.
func (r *Reader) ReadRowGroup(ctx context.Context, i int, fields []string, minT, maxT int64, want func(metaKey string) bool) (segs []Segment, bytes int64, err error) {
	cols := []int{r.timeCol}
	var names []string
	if fields == nil {
		for f := range r.fields {
			fields = append(fields, f)
		}
	}
	for _, f := range fields {
		if c, ok := r.fields[f]; ok {
			cols = append(cols, c)
			names = append(names, f)
		}
	}
	if r.metaCol >= 0 {
		cols = append(cols, r.metaCol)
	}
	rec, err := r.readColumns(ctx, cols, i)
	if err != nil {
		return nil, 0, err
	}
	defer rec.Release()
	times, ok := rec.Column(0).(*array.Timestamp)
	if !ok {
		return nil, 0, fmt.Errorf("%w: time column", ErrNotArchive)
	}
	var metas *array.String
	if r.metaCol >= 0 {
		if metas, ok = rec.Column(int(rec.NumCols()) - 1).(*array.String); !ok {
			return nil, 0, fmt.Errorf("%w: %s column", ErrNotArchive, MetaKeyColumn)
		}
	}
	n := int(rec.NumRows())
	for a := 0; a < n; {
		key := "null" // a collection without a metaField: one series, of meta value null
		if metas != nil {
			key = metas.Value(a)
		}
		b := a + 1
		for b < n && (metas == nil || metas.Value(b) == key) {
			b++
		}
		if want == nil || want(key) {
			var rows []int
			for j := a; j < b; j++ {
				if times.IsNull(j) {
					return nil, 0, fmt.Errorf("%w: a null time", ErrNotArchive)
				}
				if t := r.nanos(int64(times.Value(j))); t >= minT && t <= maxT {
					rows = append(rows, j)
				}
			}
			if len(rows) > 0 {
				ss, n, err := r.segments(rec, names, key, times, rows)
				if err != nil {
					return nil, 0, err
				}
				segs = append(segs, ss...)
				bytes += n
			}
		}
		a = b
	}
	return segs, bytes, nil
}

// readColumns reads columns cols of row group i as one record, column by
// column in this goroutine: the Parquet library panics on some damaged
// pages (a zstd frame that does not decode), which is recovered here as an
// error, where its own parallel reader would let it kill the process.
func (r *Reader) readColumns(ctx context.Context, cols []int, i int) (rec arrow.Record, err error) {
	var arrs []arrow.Array
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: row group %d: %v", ErrNotArchive, i, p)
		}
		if err != nil {
			for _, a := range arrs {
				a.Release()
			}
			rec = nil
		}
	}()
	readers, schema, err := r.fr.GetFieldReaders(ctx, cols, []int{i})
	if err != nil {
		return nil, fmt.Errorf("%w: row group %d: %v", ErrNotArchive, i, err)
	}
	defer func() {
		for _, rd := range readers {
			rd.Release()
		}
	}()
	rows := r.pr.MetaData().RowGroup(i).NumRows()
	fields := schema.Fields()
	for k, rd := range readers {
		ch, err := r.fr.ReadColumn([]int{i}, rd)
		if err != nil {
			return nil, fmt.Errorf("%w: row group %d column %q: %v", ErrNotArchive, i, fields[k].Name, err)
		}
		var a arrow.Array
		if len(ch.Chunks()) == 1 {
			a = ch.Chunk(0)
			a.Retain()
		} else {
			a, err = array.Concatenate(ch.Chunks(), memory.DefaultAllocator)
		}
		ch.Release()
		if err != nil {
			return nil, fmt.Errorf("%w: row group %d column %q: %v", ErrNotArchive, i, fields[k].Name, err)
		}
		arrs = append(arrs, a)
		if int64(a.Len()) != rows {
			return nil, fmt.Errorf("%w: row group %d column %q holds %d rows, not %d", ErrNotArchive, i, fields[k].Name, a.Len(), rows)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	rec = array.NewRecord(schema, arrs, rows)
	for _, a := range arrs {
		a.Release()
	}
	arrs = nil
	return rec, nil
}

// segments makes the columns of rows (indexes into rec) of one series. A
// JSON column's values may change type from row to row: rows are grouped
// by the types of their JSON cells, one segment per group, each in time
// order.
func (r *Reader) segments(rec arrow.Record, names []string, key string, times *array.Timestamp, rows []int) ([]Segment, int64, error) {
	var jsonIdx []int
	for k, name := range names {
		if r.json[name] {
			jsonIdx = append(jsonIdx, k)
		}
	}
	groups := [][]int{rows}
	var cells map[[2]int]model.Value
	if len(jsonIdx) > 0 {
		cells = map[[2]int]model.Value{}
		order := map[string]int{}
		groups = nil
		sig := make([]byte, 0, len(jsonIdx))
		for _, j := range rows {
			sig = sig[:0]
			for _, k := range jsonIdx {
				a := rec.Column(k + 1).(*array.String)
				if a.IsNull(j) {
					sig = append(sig, 0)
					continue
				}
				v, err := decodeCell(a.Value(j))
				if err != nil {
					return nil, 0, fmt.Errorf("archive: column %q: %w", names[k], err)
				}
				cells[[2]int{k, j}] = v
				sig = append(sig, byte(v.Kind))
			}
			g, ok := order[string(sig)]
			if !ok {
				g = len(groups)
				order[string(sig)] = g
				groups = append(groups, nil)
			}
			groups[g] = append(groups[g], j)
		}
	}
	var out []Segment
	var bytes int64
	for _, g := range groups {
		s := Segment{MetaKey: key}
		s.Cols.Times = make([]int64, len(g))
		for i, j := range g {
			s.Cols.Times[i] = r.nanos(int64(times.Value(j)))
		}
		bytes += 8 * int64(len(g))
		for k, name := range names {
			col, ok, err := r.column(rec.Column(k+1), name, k, g, cells)
			if err != nil {
				return nil, 0, err
			}
			if ok {
				s.Cols.Fields = append(s.Cols.Fields, col)
				bytes += columnBytes(&col)
			}
		}
		out = append(out, s)
	}
	return out, bytes, nil
}

func columnBytes(c *bucket.Column) int64 {
	n := int64(8*len(c.Present) + 8*len(c.Floats) + 8*len(c.Ints) + len(c.IDs) + len(c.Bools) + 16*len(c.Strings))
	for _, s := range c.Strings {
		n += int64(len(s))
	}
	return n
}

// decodeCell reads one relaxed Extended JSON value of a JSON column.
func decodeCell(text string) (model.Value, error) {
	v, err := model.DecodeMeta(text)
	if err != nil {
		return model.Value{}, err
	}
	switch x := v.(type) {
	case int64:
		return model.Int(x), nil
	case float64:
		return model.Float(x), nil
	case string:
		return model.String(x), nil
	case bool:
		return model.Bool(x), nil
	case time.Time:
		return model.Date(x.UnixNano()), nil
	}
	// Other types (documents, arrays, decimals, binary) come back as their
	// Extended JSON text.
	return model.String(strings.Clone(text)), nil
}

// column makes the column of field name (array a) for rows g; ok is false
// when none of them holds a value.
func (r *Reader) column(a arrow.Array, name string, k int, g []int, cells map[[2]int]model.Value) (c bucket.Column, ok bool, err error) {
	c.Name = name
	n := len(g)
	present := make([]uint64, (n+63)/64)
	all := true
	for i, j := range g {
		if a.IsNull(j) {
			all = false
			continue
		}
		ok = true
		present[i>>6] |= 1 << (uint(i) & 63)
	}
	if !ok {
		return c, false, nil
	}
	if !all {
		c.Present = present
	}
	switch x := a.(type) {
	case *array.Float64:
		c.Type, c.Floats = bucket.TypeFloat, make([]float64, n)
		for i, j := range g {
			c.Floats[i] = x.Value(j)
		}
	case *array.Int64:
		c.Type, c.Ints = bucket.TypeInt, make([]int64, n)
		for i, j := range g {
			c.Ints[i] = x.Value(j)
		}
	case *array.Int32:
		c.Type, c.Ints = bucket.TypeInt32, make([]int64, n)
		for i, j := range g {
			c.Ints[i] = int64(x.Value(j))
		}
	case *array.Boolean:
		c.Type, c.Bools = bucket.TypeBool, make([]bool, n)
		for i, j := range g {
			c.Bools[i] = x.Value(j)
		}
	case *array.Timestamp:
		c.Type, c.Ints = bucket.TypeDate, make([]int64, n)
		for i, j := range g {
			c.Ints[i] = r.nanos(int64(x.Value(j)))
		}
	case *array.String:
		switch {
		case r.ids[name]:
			c.Type, c.IDs = bucket.TypeObjectID, make([]byte, bucket.ObjectIDLen*n)
			for i, j := range g {
				if x.IsNull(j) {
					continue
				}
				if _, err := hex.Decode(c.IDs[i*bucket.ObjectIDLen:(i+1)*bucket.ObjectIDLen], []byte(x.Value(j))); err != nil || len(x.Value(j)) != 2*bucket.ObjectIDLen {
					return c, false, fmt.Errorf("%w: column %q: ObjectId %q", ErrNotArchive, name, x.Value(j))
				}
			}
		case r.json[name]:
			// The group's rows share one kind for this column.
			var kind bucket.Type
			for _, j := range g {
				if cl, ok := cells[[2]int{k, j}]; ok {
					kind = cl.Kind
					break
				}
			}
			c.Type = kind
			for _, j := range g {
				v := cells[[2]int{k, j}]
				switch kind {
				case bucket.TypeFloat:
					c.Floats = append(c.Floats, v.F)
				case bucket.TypeInt, bucket.TypeDate:
					c.Ints = append(c.Ints, v.I)
				case bucket.TypeBool:
					c.Bools = append(c.Bools, v.B)
				default:
					c.Strings = append(c.Strings, v.S)
				}
			}
		default:
			c.Type, c.Strings = bucket.TypeString, make([]string, n)
			for i, j := range g {
				if !x.IsNull(j) {
					c.Strings[i] = strings.Clone(x.Value(j))
				}
			}
		}
	default:
		return c, false, fmt.Errorf("%w: column %q is %s", ErrNotArchive, name, a.DataType())
	}
	return c, true, nil
}
