package document

import (
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// BSONValue converts one value (of the types this package stores) into a
// BSON value, the fields of its sub-documents in order o (see Order): what
// a time-series measurement keeps of a value that has no column type of
// its own (a Decimal128, binary, an array, a sub-document).
func BSONValue(v any, o *Order) (bsoncore.Value, error) {
	wrap := &Order{Keys: []string{"v"}}
	if o != nil {
		wrap.Sub = map[string]*Order{"v": o}
	}
	enc, err := EncodeOrdered(nil, Doc{"v": v}, wrap)
	if err != nil {
		return bsoncore.Value{}, err
	}
	doc, err := AppendBSON(nil, enc)
	if err != nil {
		return bsoncore.Value{}, err
	}
	return bsoncore.Document(doc).Index(0).Value(), nil
}

// AppendJSONBSON appends the validated BSON value v as AppendJSONOrdered
// writes a stored value (relaxed Extended JSON), sub-documents walked in
// place in their order. A BSON type the store does not hold (a timestamp,
// JavaScript code...) is an error.
func AppendJSONBSON(dst []byte, v bsoncore.Value) ([]byte, error) {
	return appendJSONBSON(dst, v, 0)
}

func appendJSONBSON(dst []byte, v bsoncore.Value, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("%w: nesting deeper than %d", ErrCorrupt, MaxDepth)
	}
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		open, end := byte('{'), byte('}')
		if v.Type == bsoncore.TypeArray {
			open, end = '[', ']'
		}
		elems, err := bsoncore.Document(v.Data).Elements()
		if err != nil {
			return dst, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		dst = append(dst, open)
		for i, e := range elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			if open == '{' {
				dst = append(appendJSONString(dst, e.Key()), ':')
			}
			if dst, err = appendJSONBSON(dst, e.Value(), depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, end), nil
	case bsoncore.TypeDouble:
		return appendJSONValue(dst, v.Double(), nil), nil
	case bsoncore.TypeString:
		return appendJSONValue(dst, v.StringValue(), nil), nil
	case bsoncore.TypeObjectID:
		return appendJSONValue(dst, partialfilter.ObjectID(v.ObjectID()), nil), nil
	case bsoncore.TypeBoolean:
		return appendJSONValue(dst, v.Boolean(), nil), nil
	case bsoncore.TypeDateTime:
		return appendJSONValue(dst, time.UnixMilli(v.DateTime()).UTC(), nil), nil
	case bsoncore.TypeNull, bsoncore.TypeUndefined:
		return append(dst, "null"...), nil
	case bsoncore.TypeInt32:
		return appendJSONValue(dst, v.Int32(), nil), nil
	case bsoncore.TypeInt64:
		return appendJSONValue(dst, v.Int64(), nil), nil
	case bsoncore.TypeDecimal128:
		h, l := v.Decimal128()
		return appendJSONValue(dst, partialfilter.Decimal128{H: h, L: l}, nil), nil
	case bsoncore.TypeBinary:
		sub, data := v.Binary()
		return appendJSONValue(dst, partialfilter.Binary{Subtype: sub, Data: data}, nil), nil
	case bsoncore.TypeRegex:
		p, o := v.Regex()
		dst = append(dst, `{"$regularExpression":{"pattern":`...)
		dst = appendJSONString(dst, p)
		dst = append(dst, `,"options":`...)
		dst = appendJSONString(dst, o)
		return append(dst, "}}"...), nil
	}
	return dst, fmt.Errorf("%w: BSON type %s is not stored", ErrCorrupt, v.Type)
}
