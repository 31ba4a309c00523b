package archive

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/compress"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
)

// Key-value metadata every file carries, for readers that restore the
// collection's shape (Hourglass' own, and a re-ingest).
const (
	MetaTimeField = "hourglass.timeField"
	MetaMetaField = "hourglass.metaField"
	// MetaPaths lists, as a JSON array, the columns that hold meta paths.
	MetaPaths = "hourglass.metaPaths"
	// MetaJSONColumns lists, as a JSON array, the field columns whose
	// strings are values' relaxed Extended JSON (mixed or other types);
	// MetaObjectIDColumns those whose strings are ObjectIds in hex.
	MetaJSONColumns     = "hourglass.jsonColumns"
	MetaObjectIDColumns = "hourglass.objectIdColumns"
	// MetaFieldColumns maps, as a JSON object, a column renamed because a
	// meta path has its field's name to that field's name.
	MetaFieldColumns = "hourglass.fieldColumns"
)

// MetaKeyColumn is the column, last in a file of a collection with a
// metaField, holding each row's meta value as one canonical JSON text:
// Hourglass reads rows back into their series by it, and a re-ingest can
// take the meta value whole from it.
const MetaKeyColumn = "$meta"

// RowGroupRows is the most rows a row group holds: small enough that a
// reader skips a sensor's rows by statistics, big enough that a group's
// column chunks compress well.
const RowGroupRows = 64 << 10

// Batch collects the rows of the buckets one archive pass moves out. It
// is not safe for concurrent use.
type Batch struct {
	timeField, metaField string
	segs                 []segment
	rows                 int64
}

type segment struct {
	metaKey string // canonical meta key: rows sort by it
	meta    any
	cols    *bucket.Columns
}

// NewBatch returns an empty batch for a collection with these fields
// (metaField "" for none).
func NewBatch(timeField, metaField string) *Batch {
	return &Batch{timeField: timeField, metaField: metaField}
}

// Add adds the rows of one bucket of the series whose canonical meta key
// is metaKey and meta value meta (model.MetaOfKey). The batch keeps cols
// until Encode: the caller must not change them.
func (b *Batch) Add(metaKey string, meta any, cols *bucket.Columns) {
	if len(cols.Times) == 0 {
		return
	}
	b.segs = append(b.segs, segment{metaKey: metaKey, meta: meta, cols: cols})
	b.rows += int64(len(cols.Times))
}

// Rows returns the rows added so far.
func (b *Batch) Rows() int64 { return b.rows }

// File is one encoded Parquet file: the rows of one UTC day.
type File struct {
	// Date is the day, "YYYY-MM-DD" (UTC).
	Date       string
	Data       []byte
	Rows       int64
	MinT, MaxT int64 // nanoseconds since the epoch
}

// rowRef is one row of the batch: segment and row within it.
type rowRef struct {
	t   int64
	seg int32
	row int32
}

const nsPerDay = int64(24 * time.Hour)

func dayOf(t int64) int64 {
	d := t / nsPerDay
	if t%nsPerDay < 0 {
		d--
	}
	return d
}

// Encode encodes the batch as one Parquet file per UTC day, in day order.
func (b *Batch) Encode() ([]File, error) {
	refs := make([]rowRef, 0, b.rows)
	for si, s := range b.segs {
		for i, t := range s.cols.Times {
			refs = append(refs, rowRef{t: t, seg: int32(si), row: int32(i)})
		}
	}
	// By day, then meta key, then time; the sort is stable so that equal
	// times keep the order they were added in.
	sort.SliceStable(refs, func(i, j int) bool {
		a, c := refs[i], refs[j]
		if da, dc := dayOf(a.t), dayOf(c.t); da != dc {
			return da < dc
		}
		if a.seg != c.seg {
			if ka, kc := b.segs[a.seg].metaKey, b.segs[c.seg].metaKey; ka != kc {
				return ka < kc
			}
		}
		return a.t < c.t
	})
	var out []File
	for len(refs) > 0 {
		d := dayOf(refs[0].t)
		n := sort.Search(len(refs), func(i int) bool { return dayOf(refs[i].t) > d })
		f, err := b.encodeDay(refs[:n])
		if err != nil {
			return nil, err
		}
		f.Date = time.Unix(0, d*nsPerDay).UTC().Format(time.DateOnly)
		out = append(out, f)
		refs = refs[n:]
	}
	return out, nil
}

// colKind is what a Parquet column is made of, from the kinds of the
// values it holds.
type colKind uint8

const (
	kindNone colKind = iota
	kindInt32
	kindInt64
	kindDouble
	kindBool
	kindString
	kindTime
	kindJSON     // mixed or other types: relaxed Extended JSON text
	kindObjectID // ObjectIds only: hex text
)

func jsonList(s []string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// merge is the column kind for values of kinds a and k together.
func merge(a, k colKind) colKind {
	switch {
	case k == kindNone:
		return a
	case a == kindNone || a == k:
		return k
	case isNumber(a) && isNumber(k):
		if a == kindDouble || k == kindDouble {
			return kindDouble
		}
		return kindInt64
	}
	return kindJSON
}

func isNumber(k colKind) bool { return k == kindInt32 || k == kindInt64 || k == kindDouble }

func fieldKind(t bucket.Type) colKind {
	switch t {
	case bucket.TypeFloat:
		return kindDouble
	case bucket.TypeInt:
		return kindInt64
	case bucket.TypeInt32:
		return kindInt32
	case bucket.TypeBool:
		return kindBool
	case bucket.TypeString:
		return kindString
	case bucket.TypeObjectID:
		return kindObjectID
	case bucket.TypeDate:
		return kindTime
	}
	return kindJSON
}

func metaKind(v any) colKind {
	switch v.(type) {
	case string:
		return kindString
	case int64, int:
		return kindInt64
	case int32:
		return kindInt32
	case float64:
		return kindDouble
	case bool:
		return kindBool
	case time.Time:
		return kindTime
	case nil:
		return kindNone
	}
	return kindJSON
}

// flatten calls fn for every meta path of v below prefix: a document's
// fields one by one (recursively), any other value as itself.
func flatten(prefix string, v any, fn func(path string, v any)) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			flatten(prefix+"."+k, m[k], fn)
		}
		return
	}
	fn(prefix, v)
}

// column is one output column while a day is encoded.
type column struct {
	name string
	kind colKind
	meta bool
	// field: the index of the field in each segment's columns (-1: none).
	idx []int
	// meta: each segment's value at this path (absent: nil, ok false).
	vals []any
	has  []bool
	// bigInt: an integer of the column is beyond 2^53, which a DOUBLE
	// column would round.
	bigInt bool
}

// nullBSON reports whether a TypeBSON value (its type byte, then its
// bytes) is a BSON null: written as a Parquet null.
func nullBSON(v string) bool { return v == "" || v[0] == 0x0A }

// columnKind is the kind a bucket column's present values need, and
// whether one of its integers is beyond 2^53. A column of BSON nulls
// alone needs none.
func columnKind(fc *bucket.Column) (colKind, bool) {
	switch fc.Type {
	case bucket.TypeBSON:
		for i, v := range fc.Strings {
			if fc.IsPresent(i) && !nullBSON(v) {
				return kindJSON, false
			}
		}
		return kindNone, false
	case bucket.TypeInt:
		for i, v := range fc.Ints {
			if fc.IsPresent(i) && (v > 1<<53 || v < -(1<<53)) {
				return kindInt64, true
			}
		}
	}
	return fieldKind(fc.Type), false
}

func (b *Batch) encodeDay(refs []rowRef) (File, error) {
	f := File{Rows: int64(len(refs)), MinT: math.MaxInt64, MaxT: math.MinInt64}
	used := map[int32]bool{}
	for _, r := range refs {
		used[r.seg] = true
		f.MinT, f.MaxT = min(f.MinT, r.t), max(f.MaxT, r.t)
	}
	segs := slices.Sorted(maps.Keys(used))
	byName := map[string]*column{}
	var cols []*column
	get := func(name string, meta bool) *column {
		c := byName[name]
		if c == nil {
			c = &column{name: name, meta: meta}
			if meta {
				c.vals, c.has = make([]any, len(b.segs)), make([]bool, len(b.segs))
			} else {
				c.idx = make([]int, len(b.segs))
				for i := range c.idx {
					c.idx[i] = -1
				}
			}
			byName[name] = c
			cols = append(cols, c)
		}
		return c
	}
	// Meta paths first: a measurement field named as one (a dotted name,
	// "tags.host" beside a meta document {host: ...}) takes the column
	// "$field:<name>", which no field or meta path can be named
	// (MetaFieldColumns maps it back).
	for _, si := range segs {
		s := &b.segs[si]
		if b.metaField != "" && s.meta != nil {
			flatten(b.metaField, s.meta, func(path string, v any) {
				c := get(path, true)
				c.vals[si], c.has[si] = v, true
				c.kind = merge(c.kind, metaKind(v))
			})
		}
	}
	renamed := map[string]string{}
	for _, si := range segs {
		s := &b.segs[si]
		for i := range s.cols.Fields {
			fc := &s.cols.Fields[i]
			if fc.Name == b.timeField {
				continue
			}
			name := fc.Name
			if c := byName[name]; (c != nil && c.meta) || name == MetaKeyColumn {
				name = "$field:" + fc.Name
				renamed[name] = fc.Name
			}
			c := get(name, false)
			c.idx[si] = i
			k, big := columnKind(fc)
			c.kind = merge(c.kind, k)
			c.bigInt = c.bigInt || big
		}
	}
	if _, ok := byName[b.timeField]; ok {
		return f, fmt.Errorf("archive: the timeField %q is also a meta path", b.timeField)
	}
	// Meta paths first, then fields, each in name order: the schema of a
	// day depends on its data only.
	sort.SliceStable(cols, func(i, j int) bool {
		if cols[i].meta != cols[j].meta {
			return cols[i].meta
		}
		return cols[i].name < cols[j].name
	})
	unit := arrow.Microsecond
	for _, r := range refs {
		if r.t%1000 != 0 {
			unit = arrow.Nanosecond
			break
		}
	}
	fields := []arrow.Field{{Name: b.timeField, Type: &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}}}
	metaPaths, jsonCols, idCols := []string{}, []string{}, []string{}
	for _, c := range cols {
		if c.kind == kindNone {
			c.kind = kindString // only nulls
		}
		if c.kind == kindDouble && c.bigInt {
			c.kind = kindJSON // a double would round the large integers
		}
		fields = append(fields, arrow.Field{Name: c.name, Type: arrowType(c.kind, unit), Nullable: true})
		switch {
		case c.meta:
			metaPaths = append(metaPaths, c.name)
		case c.kind == kindJSON:
			jsonCols = append(jsonCols, c.name)
		case c.kind == kindObjectID:
			idCols = append(idCols, c.name)
		}
	}
	if b.metaField != "" {
		if _, dup := byName[MetaKeyColumn]; dup {
			return f, fmt.Errorf("archive: a field is named %q", MetaKeyColumn)
		}
		fields = append(fields, arrow.Field{Name: MetaKeyColumn, Type: arrow.BinaryTypes.String})
	}
	fieldCols, _ := json.Marshal(renamed)
	md := arrow.NewMetadata(
		[]string{MetaTimeField, MetaMetaField, MetaPaths, MetaJSONColumns, MetaObjectIDColumns, MetaFieldColumns},
		[]string{b.timeField, b.metaField, jsonList(metaPaths), jsonList(jsonCols), jsonList(idCols), string(fieldCols)})
	schema := arrow.NewSchema(fields, &md)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer bld.Release()
	tb := bld.Field(0).(*array.TimestampBuilder)
	div := int64(1)
	if unit == arrow.Microsecond {
		div = 1000
	}
	for _, r := range refs {
		tb.Append(arrow.Timestamp(r.t / div))
	}
	for ci, c := range cols {
		ab := bld.Field(ci + 1)
		for _, r := range refs {
			if c.meta {
				if !c.has[r.seg] || c.vals[r.seg] == nil {
					ab.AppendNull()
					continue
				}
				appendMeta(ab, c.kind, c.vals[r.seg], unit)
				continue
			}
			fi := c.idx[r.seg]
			if fi < 0 {
				ab.AppendNull()
				continue
			}
			fc := &b.segs[r.seg].cols.Fields[fi]
			if !fc.IsPresent(int(r.row)) || (fc.Type == bucket.TypeBSON && nullBSON(fc.Strings[r.row])) {
				ab.AppendNull()
				continue
			}
			appendField(ab, c.kind, fc, int(r.row), unit)
		}
	}
	if b.metaField != "" {
		kb := bld.Field(len(cols) + 1).(*array.StringBuilder)
		for _, r := range refs {
			kb.Append(b.segs[r.seg].metaKey)
		}
	}
	rec := bld.NewRecord()
	defer rec.Release()
	var buf bytes.Buffer
	// Dictionaries for meta paths only: one value per series, repeated
	// on each of its rows.
	opts := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithStats(true),
		parquet.WithMaxRowGroupLength(RowGroupRows),
		parquet.WithDictionaryDefault(false),
		parquet.WithCreatedBy("hourglass"),
	}
	for _, p := range append(metaPaths, MetaKeyColumn) {
		opts = append(opts, parquet.WithDictionaryFor(p, true))
	}
	// Times and integers as deltas, bit-packed: regular times cost bits
	// per row, not bytes, before zstd.
	for _, fl := range fields {
		switch fl.Type.ID() {
		case arrow.TIMESTAMP, arrow.INT64, arrow.INT32:
			opts = append(opts, parquet.WithEncodingFor(fl.Name, parquet.Encodings.DeltaBinaryPacked))
		}
	}
	props := parquet.NewWriterProperties(opts...)
	w, err := pqarrow.NewFileWriter(schema, &buf, props, pqarrow.NewArrowWriterProperties())
	if err != nil {
		return f, fmt.Errorf("archive: %w", err)
	}
	if err := w.WriteBuffered(rec); err != nil {
		_ = w.Close()
		return f, fmt.Errorf("archive: write %d rows: %w", rec.NumRows(), err)
	}
	if err := w.Close(); err != nil {
		return f, fmt.Errorf("archive: %w", err)
	}
	f.Data = buf.Bytes()
	return f, nil
}

func arrowType(k colKind, unit arrow.TimeUnit) arrow.DataType {
	switch k {
	case kindInt32:
		return arrow.PrimitiveTypes.Int32
	case kindInt64:
		return arrow.PrimitiveTypes.Int64
	case kindDouble:
		return arrow.PrimitiveTypes.Float64
	case kindBool:
		return arrow.FixedWidthTypes.Boolean
	case kindTime:
		return &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}
	}
	return arrow.BinaryTypes.String
}

func appendField(ab array.Builder, k colKind, fc *bucket.Column, i int, unit arrow.TimeUnit) {
	switch k {
	case kindInt32:
		ab.(*array.Int32Builder).Append(int32(fc.Ints[i]))
	case kindInt64:
		ab.(*array.Int64Builder).Append(fc.Ints[i])
	case kindDouble:
		if fc.Type == bucket.TypeFloat {
			ab.(*array.Float64Builder).Append(fc.Floats[i])
		} else {
			ab.(*array.Float64Builder).Append(float64(fc.Ints[i]))
		}
	case kindBool:
		ab.(*array.BooleanBuilder).Append(fc.Bools[i])
	case kindTime:
		t := fc.Ints[i]
		if unit == arrow.Microsecond {
			t /= 1000
		}
		ab.(*array.TimestampBuilder).Append(arrow.Timestamp(t))
	case kindObjectID:
		ab.(*array.StringBuilder).Append(hex.EncodeToString(fc.IDs[i*bucket.ObjectIDLen : (i+1)*bucket.ObjectIDLen]))
	case kindString:
		ab.(*array.StringBuilder).Append(fc.Strings[i])
	default:
		ab.(*array.StringBuilder).Append(model.CellJSON(fc, i))
	}
}

func appendMeta(ab array.Builder, k colKind, v any, unit arrow.TimeUnit) {
	switch k {
	case kindInt32:
		ab.(*array.Int32Builder).Append(v.(int32))
	case kindInt64:
		switch x := v.(type) {
		case int64:
			ab.(*array.Int64Builder).Append(x)
		case int:
			ab.(*array.Int64Builder).Append(int64(x))
		case int32:
			ab.(*array.Int64Builder).Append(int64(x))
		}
	case kindDouble:
		switch x := v.(type) {
		case float64:
			ab.(*array.Float64Builder).Append(x)
		case int64:
			ab.(*array.Float64Builder).Append(float64(x))
		case int:
			ab.(*array.Float64Builder).Append(float64(x))
		case int32:
			ab.(*array.Float64Builder).Append(float64(x))
		}
	case kindBool:
		ab.(*array.BooleanBuilder).Append(v.(bool))
	case kindTime:
		t := v.(time.Time).UnixNano()
		if unit == arrow.Microsecond {
			t /= 1000
		}
		ab.(*array.TimestampBuilder).Append(arrow.Timestamp(t))
	case kindString:
		ab.(*array.StringBuilder).Append(v.(string))
	default:
		if s, ok := v.(string); ok {
			ab.(*array.StringBuilder).Append(s)
			return
		}
		text, err := model.CanonicalMeta(v)
		if err != nil {
			text = fmt.Sprint(v)
		}
		ab.(*array.StringBuilder).Append(text)
	}
}
