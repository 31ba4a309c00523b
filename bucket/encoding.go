package bucket

import "fmt"

// encoding is how a field column is encoded: the low four bits of the type byte of the
// column's control entry. Persisted: the values are explicit and never renumbered.
//
// Each encoding lives in a file named for it (enc_int.go ...), which holds its spec, its
// writer, the reading and checking of its statistics in the control entry, and its
// reader. The methods below only dispatch to them, so that adding an encoding means one
// new file and one case in each.
type encoding uint8

// Column encodings.
const (
	encEmpty   encoding = 0 // no present values: the column has no bytes (enc_empty.go)
	encInt     encoding = 1 // TypeInt and TypeDate as an int stream (enc_int.go)
	encDecimal encoding = 2 // TypeFloat as int64 mantissas of one decimal scale (enc_decimal.go)
	encFloat   encoding = 3 // TypeFloat as order-preserving int64 bit patterns (enc_float.go)
	encString  encoding = 4 // TypeString as a dictionary and an int stream of indices (enc_string.go)
	encBool    encoding = 5 // TypeBool as a bitset stream (enc_bool.go)
	// encScaledInt: TypeInt and TypeDate divided by one power of ten, as an
	// int stream (enc_scaled.go; store format 3 on).
	encScaledInt encoding = 6
	// encObjectID: TypeObjectID as two int streams and a dictionary
	// (enc_objectid.go; store format 4 on).
	encObjectID encoding = 7
)

// encodingSpec is what a reader checks a control entry's encoding against.
type encodingSpec struct {
	name string
	// types has bit 1<<t set for each Type t the encoding holds.
	types uint16
	// intStream: a column of the encoding with every row present is one int stream,
	// whose symbols may go to the bucket's shared symbol block.
	intStream bool
}

var encodings = [...]*encodingSpec{
	encEmpty:     &emptySpec,
	encInt:       &intSpec,
	encDecimal:   &decimalSpec,
	encFloat:     &floatSpec,
	encString:    &stringSpec,
	encBool:      &boolSpec,
	encScaledInt: &scaledIntSpec,
	encObjectID:  &objectIDSpec,
}

// spec returns e's spec, or nil for an unknown encoding.
func (e encoding) spec() *encodingSpec {
	if int(e) < len(encodings) {
		return encodings[e]
	}
	return nil
}

// String returns the encoding's name as docs/format/bucket.md spells it.
func (e encoding) String() string {
	if s := e.spec(); s != nil {
		return s.name
	}
	return fmt.Sprintf("encoding(%d)", uint8(e))
}

// check reports whether a control entry may give a column of type t with count present
// values the encoding e: one that holds t, and encEmpty exactly when count is 0.
func (e encoding) check(t Type, count uint64) bool {
	s := e.spec()
	return s != nil && s.types&(1<<t) != 0 && (count == 0) == (e == encEmpty)
}

// intStream reports whether a column of e with every row present is one int stream.
func (e encoding) intStream() bool {
	s := e.spec()
	return s != nil && s.intStream
}

// appendStats appends the statistics of m's encoding to a control entry.
func (m *fieldMeta) appendStats(dst []byte) []byte {
	switch m.enc {
	case encInt:
		return appendIntStats(dst, m)
	case encDecimal:
		return appendDecimalStats(dst, m)
	case encScaledInt:
		return appendScaledIntStats(dst, m)
	case encFloat:
		return appendFloatStats(dst, m)
	}
	return dst
}

// readStats reads and checks the statistics of m's encoding from a control entry.
func (m *fieldMeta) readStats(c *cursor) error {
	switch m.enc {
	case encInt:
		return readIntStats(c, m)
	case encDecimal:
		return readDecimalStats(c, m)
	case encScaledInt:
		return readScaledIntStats(c, m)
	case encFloat:
		return readFloatStats(c, m)
	}
	return nil
}

// setInfo fills the bounds of fi from the statistics of m.
func (m *fieldMeta) setInfo(fi *FieldInfo) {
	switch m.enc {
	case encInt:
		intInfo(m, fi)
	case encDecimal:
		decimalInfo(m, fi)
	case encScaledInt:
		scaledIntInfo(m, fi)
	case encFloat:
		floatInfo(m, fi)
	}
}

// readValues decodes the values of a column of m's encoding from src, its bytes after the
// presence bitset, into dst, whose Type and Present are set, and returns the bytes after
// them.
func (r *Reader) readValues(src []byte, m *fieldMeta, dst *Column) ([]byte, error) {
	switch m.enc {
	case encEmpty:
		readEmpty(r.rows, dst)
		return src, nil
	case encInt:
		return r.readIntColumn(src, m, dst)
	case encDecimal:
		return r.readDecimalColumn(src, m, dst)
	case encScaledInt:
		return r.readScaledIntColumn(src, m, dst)
	case encFloat:
		return r.readFloatColumn(src, m, dst)
	case encString:
		return r.readStringColumn(src, m, dst)
	case encBool:
		return r.readBoolColumn(src, m, dst)
	case encObjectID:
		return r.readObjectIDColumn(src, m, dst)
	}
	return nil, corruptf("encoding %d", m.enc)
}
