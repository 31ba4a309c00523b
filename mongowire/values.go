package mongowire

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// appendValue appends v, a value of the engine's value set (see model.FromBSON), as
// an element named key. Maps are written with their keys sorted, _id first.
// Dates lose what is below the millisecond: BSON dates are milliseconds.
func appendValue(dst []byte, key string, v any) []byte {
	key = validUTF8(key)
	switch x := v.(type) {
	case nil:
		return bsoncore.AppendNullElement(dst, key)
	case bool:
		return bsoncore.AppendBooleanElement(dst, key, x)
	case int64:
		return bsoncore.AppendInt64Element(dst, key, x)
	case int32:
		return bsoncore.AppendInt32Element(dst, key, x)
	case int:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return bsoncore.AppendInt32Element(dst, key, int32(x))
		}
		return bsoncore.AppendInt64Element(dst, key, int64(x))
	case float64:
		return bsoncore.AppendDoubleElement(dst, key, x)
	case string:
		return bsoncore.AppendStringElement(dst, key, validUTF8(x))
	case time.Time:
		return bsoncore.AppendDateTimeElement(dst, key, x.UnixMilli())
	case partialfilter.ObjectID:
		return bsoncore.AppendObjectIDElement(dst, key, x)
	case partialfilter.Regex:
		return bsoncore.AppendRegexElement(dst, key, x.Pattern, x.Options)
	case partialfilter.Decimal128:
		return bsoncore.AppendDecimal128Element(dst, key, x.H, x.L)
	case partialfilter.Binary:
		return bsoncore.AppendBinaryElement(dst, key, x.Subtype, x.Data)
	case []any:
		idx, out := bsoncore.AppendArrayElementStart(dst, key)
		var num [20]byte
		for i, e := range x {
			out = appendValue(out, string(itoa(num[:0], i)), e)
		}
		out, _ = bsoncore.AppendArrayEnd(out, idx)
		return out
	case map[string]any:
		idx, out := bsoncore.AppendDocumentElementStart(dst, key)
		out = appendMapElements(out, x)
		out, _ = bsoncore.AppendDocumentEnd(out, idx)
		return out
	case bsoncore.Document:
		return bsoncore.AppendDocumentElement(dst, key, x)
	}
	// The engine's value set is closed; anything else is a broken
	// invariant, reported rather than dropped.
	return bsoncore.AppendStringElement(dst, key, "<unsupported value>")
}

// validUTF8 returns s, or s with each run of bytes that are not UTF-8
// replaced by U+FFFD: data stored before strings were checked on the way
// in is readable by drivers, which refuse a reply that is not UTF-8
// (docs/mongodb.md, "Strings are UTF-8").
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// appendMapElements appends the elements of m, _id first, then sorted.
func appendMapElements(dst []byte, m map[string]any) []byte {
	if id, ok := m["_id"]; ok {
		dst = appendValue(dst, "_id", id)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "_id" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = appendValue(dst, k, m[k])
	}
	return dst
}

// mapDocument encodes m as a document (see appendMapElements).
func mapDocument(m map[string]any) bsoncore.Document {
	idx, dst := bsoncore.AppendDocumentStart(nil)
	dst = appendMapElements(dst, m)
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

func itoa(dst []byte, i int) []byte {
	if i == 0 {
		return append(dst, '0')
	}
	var b [20]byte
	n := len(b)
	for ; i > 0; i /= 10 {
		n--
		b[n] = byte('0' + i%10)
	}
	return append(dst, b[n:]...)
}

// marshal encodes a reply built from bson.D and Go values; the values are
// this package's own, so an error is a broken invariant.
func marshal(d bson.D) bsoncore.Document {
	b, err := bson.Marshal(d)
	if err != nil {
		panic("mongowire: marshal reply: " + err.Error())
	}
	return b
}
