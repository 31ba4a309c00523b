package document

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// AppendBSON appends the stored encoding enc (Encode, EncodeOrdered) of a
// document as a BSON document, its fields in their stored order, without
// decoding it into a map: what a find without a projection answers over
// the MongoDB protocol. Dates keep their milliseconds (BSON's unit).
func AppendBSON(dst, enc []byte) ([]byte, error) {
	if len(enc) == 0 || enc[0] != tagObject {
		return dst, fmt.Errorf("%w: top level is not a document", ErrCorrupt)
	}
	d := decoder{b: enc, i: 1}
	dst = d.bsonObject(dst, 0)
	if d.err == nil && d.i != len(enc) {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(enc)-d.i)
	}
	return dst, d.err
}

// bsonObject appends the object whose count is next as a BSON document.
func (d *decoder) bsonObject(dst []byte, depth int) []byte {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	n := d.count("document length")
	for j := 0; j < n && d.err == nil; j++ {
		k := d.bytes(d.uvarint("key length"), "key")
		dst = d.bsonElement(dst, string(k), depth+1)
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

// bsonElement appends the next value as the element key.
func (d *decoder) bsonElement(dst []byte, key string, depth int) []byte {
	if d.err != nil {
		return dst
	}
	if depth > MaxDepth || d.i >= len(d.b) {
		d.fail("value")
		return dst
	}
	key = ValidKey(key)
	tag := d.b[d.i]
	d.i++
	switch tag {
	case tagNull:
		return bsoncore.AppendNullElement(dst, key)
	case tagFalse, tagTrue:
		return bsoncore.AppendBooleanElement(dst, key, tag == tagTrue)
	case tagInt:
		return bsoncore.AppendInt64Element(dst, key, d.varint("integer"))
	case tagInt32:
		return bsoncore.AppendInt32Element(dst, key, int32(d.varint("int32")))
	case tagFloat:
		if b := d.bytes(8, "double"); b != nil {
			return bsoncore.AppendDoubleElement(dst, key, math.Float64frombits(binary.LittleEndian.Uint64(b)))
		}
	case tagString:
		s := d.bytes(d.uvarint("string length"), "string")
		return bsoncore.AppendStringElement(dst, key, ValidUTF8(string(s)))
	case tagDate:
		s := d.varint("date")
		ns := d.uvarint("date")
		return bsoncore.AppendDateTimeElement(dst, key, s*1000+int64(ns)/1e6) // ns is in [0, 1e9): the floor
	case tagOID:
		if b := d.bytes(12, "ObjectId"); b != nil {
			return bsoncore.AppendObjectIDElement(dst, key, [12]byte(b))
		}
	case tagDec128:
		if b := d.bytes(16, "decimal"); b != nil {
			return bsoncore.AppendDecimal128Element(dst, key, binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b))
		}
	case tagBinary:
		sub := d.bytes(1, "binary subtype")
		data := d.bytes(d.uvarint("binary length"), "binary")
		if d.err == nil {
			return bsoncore.AppendBinaryElement(dst, key, sub[0], data)
		}
	case tagObject:
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, key)
		return d.bsonObject(dst, depth)
	case tagArray:
		idx, out := bsoncore.AppendArrayElementStart(dst, key)
		n := d.count("array length")
		var num [20]byte
		for j := 0; j < n && d.err == nil; j++ {
			out = d.bsonElement(out, string(strconv.AppendInt(num[:0], int64(j), 10)), depth+1)
		}
		out, _ = bsoncore.AppendArrayEnd(out, idx)
		return out
	default:
		d.i--
		d.fail("tag")
	}
	return dst
}

// ValidKey returns a field name as BSON can hold it: UTF-8 (ValidUTF8) and
// without NUL bytes, which a BSON key cannot hold (each becomes U+FFFD):
// names stored before they were checked on the way in may have them.
func ValidKey(k string) string {
	k = ValidUTF8(k)
	if strings.IndexByte(k, 0) >= 0 {
		k = strings.ReplaceAll(k, "\x00", "\uFFFD")
	}
	return k
}

// ValidUTF8 returns s, or s with each run of bytes that are not UTF-8
// replaced by U+FFFD: drivers refuse a reply that is not UTF-8, and data
// stored before strings were checked on the way in may hold such bytes
// (docs/mongodb.md, "Strings are UTF-8").
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
