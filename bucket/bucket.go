package bucket

import (
	"errors"
	"fmt"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// Version is the first byte of an encoded bucket that holds its field names (Encode).
const Version = 1

// VersionRefs is the first byte of an encoded bucket whose field names are references
// into a name table the caller keeps (EncodeRefs, Reader.ResetNames). A Reader refuses
// other values.
const VersionRefs = 2

// VersionShared is VersionRefs with a shared symbol block: the symbols of several int
// streams entropy coded together, with one table (Encoder.EncodeRefs writes it when it
// comes out smaller).
const VersionShared = 3

// MaxSharedSymbols is the most symbols a shared symbol block holds, so that a reader
// never allocates more for one than for a few columns of MaxRows: the encoder shares no
// more, and a reader refuses a bucket whose columns would take more.
const MaxSharedSymbols = 4 * MaxRows

// MaxRef is the largest name reference.
const MaxRef = 1<<32 - 1

// MaxRows is the largest number of rows a bucket may hold. The writer seals buckets at
// 1000 measurements; the limit only bounds what a decoder may be asked to allocate.
const MaxRows = 1 << 20

// MaxFields is the largest number of field columns in a bucket. Collections have a few
// hundred fields at most; the limit bounds the control block a Reader parses.
const MaxFields = 1 << 16

// MaxNameLen is the longest field name in bytes.
const MaxNameLen = 1 << 16

// Errors returned by Encoder and Reader, wrapped with context; test with errors.Is.
var (
	// ErrCorrupt means the bytes are not a valid bucket of a known version. It wraps
	// mongoerr.ErrCorrupt, as every layer's corruption does.
	ErrCorrupt = mongoerr.Corrupt("bucket: corrupt data")
	// ErrVersion means the first byte is not Version, VersionRefs or VersionShared.
	ErrVersion = errors.New("bucket: unsupported version")
	// ErrNoNames means a VersionRefs bucket was read without its name table, or with a
	// table too short for its references.
	ErrNoNames = errors.New("bucket: name table missing")
	// ErrNoRows means Encode was given zero rows.
	ErrNoRows = errors.New("bucket: no rows")
	// ErrTooManyRows means more than MaxRows rows.
	ErrTooManyRows = errors.New("bucket: too many rows")
	// ErrTooManyFields means more than MaxFields fields.
	ErrTooManyFields = errors.New("bucket: too many fields")
	// ErrColumnLength means a column's values or presence bitmap do not match the row count.
	ErrColumnLength = errors.New("bucket: column length mismatch")
	// ErrFieldName means an empty, too long or duplicate field name.
	ErrFieldName = errors.New("bucket: bad field name")
	// ErrType means an unknown Type.
	ErrType = errors.New("bucket: unknown type")
	// ErrFieldIndex means a field index out of range.
	ErrFieldIndex = errors.New("bucket: field index out of range")
	// ErrRowIndex means rows out of range.
	ErrRowIndex = errors.New("bucket: row index out of range")
	// ErrUnsorted means Reader.RowRange was asked of a bucket whose times are not sorted.
	ErrUnsorted = errors.New("bucket: times not sorted")
)

// Type is the type of a field column. The values are persisted: never renumber them.
type Type uint8

// Field types.
const (
	TypeFloat  Type = 1 // float64
	TypeInt    Type = 2 // int64
	TypeString Type = 3 // string
	TypeBool   Type = 4 // bool
	TypeDate   Type = 5 // int64 nanoseconds since the Unix epoch, encoded like TypeInt
	// TypeInt32 is a 32-bit integer (BSON's int32), held in Ints and encoded like TypeInt,
	// so that a value reads back with the type it was written with.
	TypeInt32 Type = 6
	// TypeBSON is a value of any other BSON type (Decimal128, binary, an array, a
	// sub-document, null, ...): its BSON type byte then its BSON bytes, held in Strings and
	// encoded like TypeString.
	TypeBSON Type = 7
	// TypeObjectID is a 12-byte ObjectId, held in IDs (12 bytes a row) and encoded as
	// its three parts: seconds, process bytes and counter (enc_objectid.go).
	TypeObjectID Type = 8
)

// String returns the lowercase name of t.
func (t Type) String() string {
	switch t {
	case TypeFloat:
		return "float"
	case TypeInt:
		return "int"
	case TypeString:
		return "string"
	case TypeBool:
		return "bool"
	case TypeDate:
		return "date"
	case TypeInt32:
		return "int32"
	case TypeBSON:
		return "bson"
	case TypeObjectID:
		return "objectid"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

func (t Type) valid() bool { return t >= TypeFloat && t <= TypeObjectID }

// Column is one field's values, uncompressed.
//
// Values are dense: the slice for Type has one element per row; rows where the field is
// absent hold the zero value, which Encode ignores. Present is a bitmap of (rows+63)/64
// words, bit i%64 of word i/64 set when row i is present; bits past the last row are
// ignored. A nil Present means every row is present.
type Column struct {
	Name    string
	Type    Type
	Present []uint64
	Floats  []float64 // TypeFloat
	Ints    []int64   // TypeInt, TypeDate and TypeInt32
	Strings []string  // TypeString and TypeBSON
	// IDs holds a TypeObjectID column's values, 12 bytes a row: no string header per
	// value, so that the ids every measurement carries cost 12 bytes in memory.
	IDs   []byte
	Bools []bool // TypeBool
}

// IsPresent reports whether row i holds a value.
func (c *Column) IsPresent(i int) bool {
	return c.Present == nil || c.Present[i>>6]&(1<<(uint(i)&63)) != 0
}

// Len returns the number of rows in c: the length of the value slice for c.Type.
func (c *Column) Len() int {
	switch c.Type {
	case TypeFloat:
		return len(c.Floats)
	case TypeInt, TypeDate, TypeInt32:
		return len(c.Ints)
	case TypeString, TypeBSON:
		return len(c.Strings)
	case TypeObjectID:
		if len(c.IDs)%ObjectIDLen != 0 {
			return -1
		}
		return len(c.IDs) / ObjectIDLen
	case TypeBool:
		return len(c.Bools)
	}
	return 0
}

// ID returns row i of a TypeObjectID column.
func (c *Column) ID(i int) []byte { return c.IDs[i*ObjectIDLen : (i+1)*ObjectIDLen] }

// Columns is a bucket's contents: one shared time column and the field columns.
type Columns struct {
	Times  []int64 // nanoseconds since the Unix epoch; any order, duplicates allowed
	Fields []Column
}

// Reset empties c, keeping the capacity of Times and Fields for reuse.
func (c *Columns) Reset() {
	c.Times = c.Times[:0]
	c.Fields = c.Fields[:0]
}

// FieldInfo describes one field of an encoded bucket, from its control block.
type FieldInfo struct {
	Name  string
	Type  Type
	Count int // rows where the field is present
	// MinFloat and MaxFloat bound the non-NaN values of a TypeFloat field; both are NaN when
	// every present value is NaN, and 0 when Count is 0. HasNaN reports any NaN value.
	MinFloat, MaxFloat float64
	HasNaN             bool
	// MinInt and MaxInt bound the values of a TypeInt, TypeInt32 or TypeDate field (0 when
	// Count is 0).
	MinInt, MaxInt int64
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}
