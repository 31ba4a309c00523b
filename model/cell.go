package model

import (
	"encoding/json"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/document"
)

// CellJSON renders one value as Extended JSON text.
func CellJSON(col *bucket.Column, i int) string {
	switch col.Type {
	case KindFloat:
		s, _ := CanonicalMeta(col.Floats[i])
		return s
	case KindInt, KindInt32:
		return strconv.FormatInt(col.Ints[i], 10)
	case KindDate:
		s, _ := CanonicalMeta(time.Unix(0, col.Ints[i]).UTC())
		return s
	case KindString:
		b, _ := json.Marshal(col.Strings[i])
		return string(b)
	case KindBool:
		return strconv.FormatBool(col.Bools[i])
	case KindObjectID, KindBSON:
		bv := CellBSONValue(col, i)
		if b, err := document.AppendJSONBSON(nil, bv); err == nil {
			return string(b)
		}
	}
	return "null"
}

// CellBSONValue returns row i of col, of kind ObjectID or BSON, as a BSON
// value.
func CellBSONValue(col *bucket.Column, i int) bsoncore.Value {
	if col.Type == KindObjectID {
		return bsoncore.Value{Type: bsoncore.TypeObjectID, Data: col.ID(i)}
	}
	s := col.Strings[i]
	if s == "" {
		return bsoncore.Value{Type: bsoncore.TypeNull}
	}
	return bsoncore.Value{Type: bsoncore.Type(s[0]), Data: []byte(s[1:])}
}
