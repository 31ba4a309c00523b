package mongowire

import (
	"math"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// appendValue appends v, a value of the engine's value set (see model.FromBSON), as
// an element named key. Maps are written with their keys sorted, _id first.
// Dates lose what is below the millisecond: BSON dates are milliseconds.
func appendValue(dst []byte, key string, v any) []byte {
	return appendOrderedValue(dst, key, v, nil)
}

// appendOrderedValue is appendValue with the fields of documents in order
// o (document.Order), at every depth.
func appendOrderedValue(dst []byte, key string, v any, o *document.Order) []byte {
	key = document.ValidKey(key)
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
		return bsoncore.AppendStringElement(dst, key, document.ValidUTF8(x))
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
			out = appendOrderedValue(out, string(itoa(num[:0], i)), e, o.Elem(i))
		}
		out, _ = bsoncore.AppendArrayEnd(out, idx)
		return out
	case map[string]any:
		idx, out := bsoncore.AppendDocumentElementStart(dst, key)
		if o != nil {
			for _, k := range o.FieldsOf(x) {
				out = appendOrderedValue(out, k, x[k], o.Child(k))
			}
		} else {
			out = appendMapElements(out, x)
		}
		out, _ = bsoncore.AppendDocumentEnd(out, idx)
		return out
	case bsoncore.Document:
		return bsoncore.AppendDocumentElement(dst, key, x)
	}
	// The engine's value set is closed; anything else is a broken
	// invariant, reported rather than dropped.
	return bsoncore.AppendStringElement(dst, key, "<unsupported value>")
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
	return orderedDocument(m, nil)
}

// orderedDocument encodes m with its fields in order o, at every depth; a
// nil order is mapDocument's, _id first, then name order.
func orderedDocument(m map[string]any, o *document.Order) bsoncore.Document {
	idx, dst := bsoncore.AppendDocumentStart(nil)
	if o == nil {
		dst = appendMapElements(dst, m)
	} else {
		for _, k := range o.FieldsOf(m) {
			dst = appendOrderedValue(dst, k, m[k], o.Child(k))
		}
	}
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

// statement returns the i-th document of a write command's list (field:
// "updates", "deletes"), given in the command or as a document sequence;
// nil if there is none.
func (cmd *wireCommand) statement(field string, i int) bsoncore.Document {
	for _, sq := range cmd.seqs {
		if sq.id == field && i < len(sq.docs) {
			return sq.docs[i]
		}
	}
	v, err := cmd.body.LookupErr(field)
	if err != nil {
		return nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	e, err := arr.IndexErr(uint(i))
	if err != nil {
		return nil
	}
	d, _ := e.DocumentOK()
	return d
}
