package render

import (
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hourglassdb/hourglass/model"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/hourglassdb/hourglass/document"
)

// Options tune a Writer.
type Options struct {
	// FlatDates writes dates in JSON and NDJSON as bare RFC 3339 strings
	// instead of {"$date": ...}, for tools that read flat rows.
	FlatDates bool
}

// Writer writes records of one schema in one format. It is not safe for
// concurrent use. Close ends the output (the closing bracket of a JSON
// array, the end-of-stream marker of Arrow) and must be called once all
// records are written; it does not close the underlying io.Writer.
type Writer interface {
	Write(rec arrow.Record) error
	Close() error
}

// ArrowBatchRows is the largest record batch an Arrow stream carries; larger
// records are cut into batches of this size.
const ArrowBatchRows = 4096

// flushBytes is the buffer size at which text writers hand their output to
// the underlying writer in the middle of a record.
const flushBytes = 256 << 10

// flushEvery is how often, at most, a writer flushes w after a record: a
// long result reaches the client as it is produced, while a short one is
// written once, whole (an HTTP reply then goes out with its length, in one
// write, rather than chunked).
const flushEvery = 50 * time.Millisecond

// A LengthSetter is told the length of a text reply written whole, before
// it is written: an http.ResponseWriter wrapped to set Content-Length.
type LengthSetter interface{ SetLength(n int) }

// NewWriter returns a Writer of records with schema to w in format f. Text
// is kept until flushEvery has passed since the writer was made or last
// flushed (checked after each record) or flushBytes are pending; it is
// then written to w and, when w has a Flush method (http.ResponseWriter
// does), flushed, so that clients see long results as they are produced.
// A text reply shorter than that is written once, at Close, its length
// given first to w when w is a LengthSetter.
func NewWriter(w io.Writer, f Format, schema *arrow.Schema, opts Options) (Writer, error) {
	fl, _ := w.(flusher)
	switch f {
	case JSON, NDJSON, CSV:
		cols, err := newColumns(schema, f, opts)
		if err != nil {
			return nil, err
		}
		return &textWriter{w: w, fl: fl, format: f, schema: schema, cols: cols, opts: opts, buf: getBuf(), flushed: time.Now()}, nil
	case Arrow:
		for i, fd := range schema.Fields() {
			if _, err := kindOf(fd); err != nil {
				return nil, fmt.Errorf("render: column %d %q: %w", i, fd.Name, err)
			}
		}
		return &arrowWriter{w: ipc.NewWriter(w, ipc.WithSchema(schema)), fl: fl, schema: schema, flushed: time.Now()}, nil
	}
	return nil, fmt.Errorf("render: unknown format %d", int(f))
}

type flusher interface{ Flush() }

// kind is how a column's values are rendered.
type kind uint8

const (
	kindFloat kind = iota
	kindInt
	kindBool
	kindString
	kindDate
	kindJSON // utf8 holding JSON texts: the meta column, mixed columns
	kindInt32
	kindObjectID // 12-byte fixed-size binary
	kindBSON     // binary holding BSON values: type byte, then bytes
)

func kindOf(f arrow.Field) (kind, error) {
	switch t := f.Type.(type) {
	case *arrow.Float64Type:
		return kindFloat, nil
	case *arrow.Int64Type:
		return kindInt, nil
	case *arrow.Int32Type:
		return kindInt32, nil
	case *arrow.FixedSizeBinaryType:
		if t.ByteWidth == 12 {
			return kindObjectID, nil
		}
	case *arrow.BinaryType:
		if f.Metadata.FindKey(model.BSONColumnMetadataKey) >= 0 {
			return kindBSON, nil
		}
	case *arrow.BooleanType:
		return kindBool, nil
	case *arrow.StringType:
		if f.Metadata.FindKey(model.MetaColumnMetadataKey) >= 0 || f.Metadata.FindKey(model.MixedColumnMetadataKey) >= 0 {
			return kindJSON, nil
		}
		return kindString, nil
	case *arrow.TimestampType:
		if t.Unit != arrow.Nanosecond {
			return 0, fmt.Errorf("timestamps in %s are not supported; nanoseconds are", t.Unit)
		}
		return kindDate, nil
	}
	return 0, fmt.Errorf("type %s is not supported", f.Type)
}

// column is one column of a text writer: its rendered name and, while a
// record is written, its typed values.
type column struct {
	kind kind
	key  []byte // JSON: "name": ; CSV: the header cell

	nulls arrow.Array
	f64   []float64
	i64   []int64
	ts    []arrow.Timestamp
	bools *array.Boolean
	strs  *array.String
	i32   []int32
	ids   *array.FixedSizeBinary
	bsons *array.Binary
}

func newColumns(schema *arrow.Schema, f Format, opts Options) ([]column, error) {
	cols := make([]column, schema.NumFields())
	for i, fd := range schema.Fields() {
		k, err := kindOf(fd)
		if err != nil {
			return nil, fmt.Errorf("render: column %d %q: %w", i, fd.Name, err)
		}
		cols[i].kind = k
		if f == CSV {
			cols[i].key = appendCSVString(nil, fd.Name)
		} else {
			cols[i].key = append(appendJSONString(nil, fd.Name), ':')
		}
	}
	return cols, nil
}

// bind points the columns at the arrays of rec.
func bind(cols []column, rec arrow.Record) error {
	if int(rec.NumCols()) != len(cols) {
		return fmt.Errorf("render: record has %d columns, the schema %d", rec.NumCols(), len(cols))
	}
	for i := range cols {
		c := &cols[i]
		a := rec.Column(i)
		c.nulls = a
		var ok bool
		switch c.kind {
		case kindFloat:
			var v *array.Float64
			if v, ok = a.(*array.Float64); ok {
				c.f64 = v.Float64Values()
			}
		case kindInt:
			var v *array.Int64
			if v, ok = a.(*array.Int64); ok {
				c.i64 = v.Int64Values()
			}
		case kindDate:
			var v *array.Timestamp
			if v, ok = a.(*array.Timestamp); ok {
				c.ts = v.TimestampValues()
			}
		case kindBool:
			c.bools, ok = a.(*array.Boolean)
		case kindInt32:
			var v *array.Int32
			if v, ok = a.(*array.Int32); ok {
				c.i32 = v.Int32Values()
			}
		case kindObjectID:
			c.ids, ok = a.(*array.FixedSizeBinary)
		case kindBSON:
			c.bsons, ok = a.(*array.Binary)
		case kindString, kindJSON:
			c.strs, ok = a.(*array.String)
		}
		if !ok {
			return fmt.Errorf("render: column %d is %s, not the schema's type", i, a.DataType())
		}
	}
	return nil
}

// textWriter writes JSON, NDJSON and CSV.
type textWriter struct {
	w       io.Writer
	fl      flusher
	format  Format
	schema  *arrow.Schema
	cols    []column
	opts    Options
	buf     []byte
	started bool // a row or the CSV header was written
	wrote   bool // something was written to w
	rows    int64
	err     error
	flushed time.Time // when w was last flushed (or the writer made)
}

func (t *textWriter) Write(rec arrow.Record) error {
	if t.err != nil {
		return t.err
	}
	if err := bind(t.cols, rec); err != nil {
		return err
	}
	// Room for the record at a guess of 16 bytes a value, up to a flush's
	// worth: fewer copies as the buffer grows.
	t.buf = slices.Grow(t.buf, int(min(rec.NumRows()*int64(len(t.cols)+1)*16, flushBytes)))
	if !t.started {
		t.start()
	}
	n := int(rec.NumRows())
	for r := 0; r < n; r++ {
		switch t.format {
		case CSV:
			t.buf = t.appendCSVRow(t.buf, r)
		case NDJSON:
			t.buf = append(t.appendJSONRow(t.buf, r), '\n')
		default:
			if t.rows > 0 {
				t.buf = append(t.buf, ",\n"...)
			}
			t.buf = t.appendJSONRow(t.buf, r)
		}
		t.rows++
		if len(t.buf) >= flushBytes {
			if err := t.emit(false); err != nil {
				return err
			}
		}
	}
	if time.Since(t.flushed) < flushEvery {
		return nil // kept: a short reply is written whole at Close
	}
	return t.emit(true)
}

func (t *textWriter) start() {
	t.started = true
	switch t.format {
	case JSON:
		t.buf = append(t.buf, "[\n"...)
	case CSV:
		for i := range t.cols {
			if i > 0 {
				t.buf = append(t.buf, ',')
			}
			t.buf = append(t.buf, t.cols[i].key...)
		}
		t.buf = append(t.buf, '\n')
	}
}

// emit hands the buffer to the underlying writer, flushing it if asked.
func (t *textWriter) emit(flush bool) error {
	if len(t.buf) > 0 {
		t.wrote = true
		if _, err := t.w.Write(t.buf); err != nil {
			t.err = err
			return err
		}
		t.buf = t.buf[:0]
	}
	if flush && t.fl != nil && time.Since(t.flushed) >= flushEvery {
		t.fl.Flush()
		t.flushed = time.Now()
	}
	return nil
}

func (t *textWriter) Close() error {
	if t.err != nil {
		return t.err
	}
	if !t.started {
		t.start()
	}
	if t.format == JSON {
		if t.rows > 0 {
			t.buf = append(t.buf, '\n')
		}
		t.buf = append(t.buf, "]\n"...)
	}
	if ls, ok := t.w.(LengthSetter); ok && !t.wrote {
		ls.SetLength(len(t.buf))
	}
	err := t.emit(false) // the end of the reply flushes it
	t.err = errClosed
	putBuf(t.buf)
	t.buf = nil
	return err
}

var errClosed = fmt.Errorf("render: writer closed")

// bufPool holds text writers' buffers for the next writer: a reply of
// 45 KB (720 windows of JSON) is otherwise 45 KB of garbage a request.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func getBuf() []byte { return (*bufPool.Get().(*[]byte))[:0] }

// putBuf returns b to the pool unless it grew past a flush's worth.
func putBuf(b []byte) {
	if cap(b) <= 2*flushBytes {
		bufPool.Put(&b)
	}
}

func (t *textWriter) appendJSONRow(b []byte, r int) []byte {
	b = append(b, '{')
	first := true
	for i := range t.cols {
		c := &t.cols[i]
		if c.nulls.IsNull(r) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, c.key...)
		switch c.kind {
		case kindFloat:
			b = appendJSONFloat(b, c.f64[r])
		case kindInt:
			b = strconv.AppendInt(b, c.i64[r], 10)
		case kindInt32:
			b = strconv.AppendInt(b, int64(c.i32[r]), 10)
		case kindObjectID:
			b = append(b, `{"$oid":"`...)
			b = hex.AppendEncode(b, c.ids.Value(r))
			b = append(b, `"}`...)
		case kindBSON:
			b = appendBSONJSON(b, c.bsons.Value(r))
		case kindBool:
			b = strconv.AppendBool(b, c.bools.Value(r))
		case kindString:
			b = appendJSONString(b, c.strs.Value(r))
		case kindJSON:
			b = model.AppendRelaxedMeta(b, c.strs.Value(r))
		case kindDate:
			if t.opts.FlatDates {
				b = append(b, '"')
				b = document.AppendDate(b, int64(c.ts[r]))
				b = append(b, '"')
			} else {
				b = append(b, `{"$date":"`...)
				b = document.AppendDate(b, int64(c.ts[r]))
				b = append(b, `"}`...)
			}
		}
	}
	return append(b, '}')
}

func (t *textWriter) appendCSVRow(b []byte, r int) []byte {
	for i := range t.cols {
		c := &t.cols[i]
		if i > 0 {
			b = append(b, ',')
		}
		if c.nulls.IsNull(r) {
			continue
		}
		switch c.kind {
		case kindFloat:
			b = appendCSVFloat(b, c.f64[r])
		case kindInt:
			b = strconv.AppendInt(b, c.i64[r], 10)
		case kindInt32:
			b = strconv.AppendInt(b, int64(c.i32[r]), 10)
		case kindObjectID:
			b = hex.AppendEncode(b, c.ids.Value(r))
		case kindBSON:
			b = appendCSVJSON(b, string(appendBSONJSON(nil, c.bsons.Value(r))))
		case kindBool:
			b = strconv.AppendBool(b, c.bools.Value(r))
		case kindString:
			b = appendCSVString(b, c.strs.Value(r))
		case kindJSON:
			b = appendCSVJSON(b, c.strs.Value(r))
		case kindDate:
			b = document.AppendDate(b, int64(c.ts[r]))
		}
	}
	return append(b, '\n')
}

// appendBSONJSON appends a BSON value (type byte, then bytes) as relaxed
// Extended JSON; null when it is not one.
func appendBSONJSON(b, v []byte) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	bv := bsoncore.Value{Type: bsoncore.Type(v[0]), Data: v[1:]}
	if bv.Validate() != nil {
		return append(b, "null"...)
	}
	out, err := document.AppendJSONBSON(b, bv)
	if err != nil {
		return append(b[:len(b):len(b)], "null"...)
	}
	return out
}

// appendJSONFloat appends f as encoding/json does, and the non-finite values
// as Extended JSON {"$numberDouble": ...}.
func appendJSONFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `{"$numberDouble":"NaN"}`...)
	case math.IsInf(f, 1):
		return append(b, `{"$numberDouble":"Infinity"}`...)
	case math.IsInf(f, -1):
		return append(b, `{"$numberDouble":"-Infinity"}`...)
	}
	return appendFloat(b, f)
}

// appendFloat appends a finite f in the shortest form that round-trips,
// using exponents only for very small or large magnitudes.
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 -> 1e-7
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func appendCSVFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return appendFloat(b, f)
}

// appendJSONString appends s as a JSON string, as encoding/json writes it
// without HTML escaping.
func appendJSONString(b []byte, s string) []byte { return document.AppendJSONString(b, s, false) }

// appendCSVString appends s as a CSV cell, quoted as RFC 4180 requires.
func appendCSVString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		// Stored before strings were checked on the way in.
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if !csvNeedsQuotes(s) {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

func csvNeedsQuotes(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' {
		return true
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',', '"', '\n', '\r':
			return true
		}
	}
	return false
}

// appendCSVJSON appends a JSON text as a CSV cell: a JSON string is written
// as its bare value, anything else as the JSON text.
func appendCSVJSON(b []byte, js string) []byte {
	if strings.IndexByte(js, '$') >= 0 && strings.Contains(js, `{"$numberInt":`) {
		js = string(model.AppendRelaxedMeta(nil, js))
	}
	if s, ok := simpleJSONString(js); ok {
		return appendCSVString(b, s)
	}
	if len(js) >= 2 && js[0] == '"' {
		if s, err := strconv.Unquote(js); err == nil {
			return appendCSVString(b, s)
		}
	}
	return appendCSVString(b, js)
}

// simpleJSONString returns the value of a JSON string without escapes.
func simpleJSONString(js string) (string, bool) {
	if len(js) < 2 || js[0] != '"' || js[len(js)-1] != '"' {
		return "", false
	}
	s := js[1 : len(js)-1]
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '"' {
			return "", false
		}
	}
	return s, true
}

// arrowWriter writes an Arrow IPC stream.
type arrowWriter struct {
	w       *ipc.Writer
	fl      flusher
	schema  *arrow.Schema
	closed  bool
	flushed time.Time
}

func (a *arrowWriter) Write(rec arrow.Record) error {
	if a.closed {
		return errClosed
	}
	if !rec.Schema().Equal(a.schema) {
		return fmt.Errorf("render: record schema %s differs from the stream's %s", rec.Schema(), a.schema)
	}
	if fixed, ok := validUTF8Record(rec); ok {
		defer fixed.Release()
		rec = fixed
	}
	n := rec.NumRows()
	if n <= ArrowBatchRows {
		if err := a.w.Write(rec); err != nil {
			return err
		}
	} else {
		for i := int64(0); i < n; i += ArrowBatchRows {
			s := rec.NewSlice(i, min(i+ArrowBatchRows, n))
			err := a.w.Write(s)
			s.Release()
			if err != nil {
				return err
			}
		}
	}
	if a.fl != nil && time.Since(a.flushed) >= flushEvery {
		a.fl.Flush()
		a.flushed = time.Now()
	}
	return nil
}

// validUTF8Record returns a copy of rec whose string columns hold U+FFFD
// in place of bytes that are not UTF-8, and true, when rec holds such
// bytes (data stored before strings were checked on the way in: an Arrow
// reader may refuse them); else rec and false.
func validUTF8Record(rec arrow.Record) (arrow.Record, bool) {
	var cols []arrow.Array
	for i, col := range rec.Columns() {
		c, ok := col.(*array.String)
		if !ok || utf8.Valid(c.ValueBytes()) {
			continue
		}
		if cols == nil {
			cols = slices.Clone(rec.Columns())
		}
		b := array.NewStringBuilder(memory.DefaultAllocator)
		b.Reserve(c.Len())
		for r := range c.Len() {
			if c.IsNull(r) {
				b.AppendNull()
			} else {
				b.Append(strings.ToValidUTF8(c.Value(r), "\uFFFD"))
			}
		}
		cols[i] = b.NewArray()
		b.Release()
		defer cols[i].Release()
	}
	if cols == nil {
		return rec, false
	}
	return array.NewRecord(rec.Schema(), cols, rec.NumRows()), true
}

func (a *arrowWriter) Close() error {
	if a.closed {
		return errClosed
	}
	a.closed = true
	return a.w.Close() // the end of the reply flushes it
}
