package document

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// Type tags of the binary form.
const (
	tagNull   byte = 0
	tagFalse  byte = 1
	tagTrue   byte = 2
	tagInt    byte = 3  // zig-zag varint
	tagFloat  byte = 4  // 8 bytes, little endian IEEE 754
	tagString byte = 5  // uvarint length, bytes
	tagDate   byte = 6  // zig-zag varint seconds, uvarint nanoseconds
	tagOID    byte = 7  // 12 bytes
	tagObject byte = 8  // uvarint count, then (uvarint key length, key, value) in the document's order
	tagArray  byte = 9  // uvarint count, then values
	tagInt32  byte = 10 // zig-zag varint
	tagDec128 byte = 11 // 16 bytes: low then high 64 bits, little endian
	tagBinary byte = 12 // subtype, uvarint length, bytes
)

// ErrCorrupt reports bytes that are not an encoded document. It wraps
// mongoerr.ErrCorrupt, as every layer's corruption does.
var ErrCorrupt = mongoerr.Corrupt("document: corrupt encoding")

// Encode appends the binary form of doc to dst. Keys are written in sorted
// order, so equal documents encode to equal bytes (EncodeOrdered writes
// them in a given order). Values outside the value set are an error.
func Encode(dst []byte, doc Doc) ([]byte, error) {
	return appendValue(dst, doc, 0, nil)
}

func appendValue(dst []byte, v any, depth int, o *Order) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("document nesting exceeds %d levels", MaxDepth)
	}
	switch t := v.(type) {
	case nil:
		return append(dst, tagNull), nil
	case bool:
		if t {
			return append(dst, tagTrue), nil
		}
		return append(dst, tagFalse), nil
	case int64:
		return binary.AppendVarint(append(dst, tagInt), t), nil
	case int32:
		return binary.AppendVarint(append(dst, tagInt32), int64(t)), nil
	case partialfilter.Decimal128:
		dst = binary.LittleEndian.AppendUint64(append(dst, tagDec128), t.L)
		return binary.LittleEndian.AppendUint64(dst, t.H), nil
	case partialfilter.Binary:
		dst = binary.AppendUvarint(append(dst, tagBinary, t.Subtype), uint64(len(t.Data)))
		return append(dst, t.Data...), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(dst, tagFloat), math.Float64bits(t)), nil
	case string:
		dst = binary.AppendUvarint(append(dst, tagString), uint64(len(t)))
		return append(dst, t...), nil
	case time.Time:
		dst = binary.AppendVarint(append(dst, tagDate), t.Unix())
		return binary.AppendUvarint(dst, uint64(t.Nanosecond())), nil
	case partialfilter.ObjectID:
		return append(append(dst, tagOID), t[:]...), nil
	case map[string]any:
		dst = binary.AppendUvarint(append(dst, tagObject), uint64(len(t)))
		var err error
		for _, k := range o.FieldsOf(t) {
			dst = appendKeyName(dst, k)
			if dst, err = appendValue(dst, t[k], depth+1, o.Child(k)); err != nil {
				return dst, err
			}
		}
		return dst, nil
	case []any:
		dst = binary.AppendUvarint(append(dst, tagArray), uint64(len(t)))
		var err error
		for i, e := range t {
			if dst, err = appendValue(dst, e, depth+1, o.Elem(i)); err != nil {
				return dst, err
			}
		}
		return dst, nil
	}
	return dst, fmt.Errorf("document: unsupported value type %T", v)
}

// Decode reads a document written by Encode.
func Decode(b []byte) (Doc, error) {
	d := decoder{b: b}
	v := d.value(0)
	if d.err == nil && d.i != len(b) {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(b)-d.i)
	}
	if d.err != nil {
		return nil, d.err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: top level is not a document", ErrCorrupt)
	}
	return doc, nil
}

type decoder struct {
	b   []byte
	i   int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s at byte %d", ErrCorrupt, what, d.i)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	v, n := binary.Uvarint(d.b[d.i:])
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.i += n
	return v
}

func (d *decoder) varint(what string) int64 {
	v, n := binary.Varint(d.b[d.i:])
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.i += n
	return v
}

// count reads an element count; every element takes at least one byte, so
// a count above the bytes left is corrupt (and never allocates).
func (d *decoder) count(what string) int {
	n := d.uvarint(what)
	if n > uint64(len(d.b)-d.i) {
		d.fail(what)
		return 0
	}
	return int(n)
}

func (d *decoder) bytes(n uint64, what string) []byte {
	if n > uint64(len(d.b)-d.i) {
		d.fail(what)
		return nil
	}
	s := d.b[d.i : d.i+int(n)]
	d.i += int(n)
	return s
}

func (d *decoder) value(depth int) any {
	if d.err != nil {
		return nil
	}
	if depth > MaxDepth {
		d.fail("nesting")
		return nil
	}
	if d.i >= len(d.b) {
		d.fail("tag")
		return nil
	}
	tag := d.b[d.i]
	d.i++
	switch tag {
	case tagNull:
		return nil
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagInt:
		return d.varint("integer")
	case tagInt32:
		v := d.varint("int32")
		if v < math.MinInt32 || v > math.MaxInt32 {
			d.fail("int32")
			return nil
		}
		return int32(v)
	case tagDec128:
		b := d.bytes(16, "decimal")
		if b == nil {
			return nil
		}
		return partialfilter.Decimal128{L: binary.LittleEndian.Uint64(b), H: binary.LittleEndian.Uint64(b[8:])}
	case tagBinary:
		if d.i >= len(d.b) {
			d.fail("binary subtype")
			return nil
		}
		sub := d.b[d.i]
		d.i++
		data := d.bytes(d.uvarint("binary length"), "binary")
		if d.err != nil {
			return nil
		}
		return partialfilter.Binary{Subtype: sub, Data: bytes.Clone(data)}
	case tagFloat:
		b := d.bytes(8, "double")
		if b == nil {
			return nil
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case tagString:
		return string(d.bytes(d.uvarint("string length"), "string"))
	case tagDate:
		s := d.varint("date")
		ns := d.uvarint("date")
		if ns >= 1e9 {
			d.fail("date nanoseconds")
			return nil
		}
		return time.Unix(s, int64(ns)).UTC()
	case tagOID:
		b := d.bytes(12, "ObjectId")
		var id partialfilter.ObjectID
		copy(id[:], b)
		return id
	case tagObject:
		n := d.count("document length")
		m := make(map[string]any, n)
		for j := 0; j < n && d.err == nil; j++ {
			k := string(d.bytes(d.uvarint("key length"), "key"))
			if _, dup := m[k]; dup {
				d.fail("duplicate key")
			}
			m[k] = d.value(depth + 1)
		}
		return m
	case tagArray:
		n := d.count("array length")
		a := make([]any, n)
		for j := 0; j < n && d.err == nil; j++ {
			a[j] = d.value(depth + 1)
		}
		return a
	}
	d.i--
	d.fail("tag")
	return nil
}
