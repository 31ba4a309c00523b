package partialfilter

import "math"

// typeCode is a BSON type number as $type takes it. typeNumber is MongoDB's
// "number" alias for every numeric type.
type typeCode int

const (
	typeDouble     typeCode = 1
	typeString     typeCode = 2
	typeObject     typeCode = 3
	typeArray      typeCode = 4
	typeBinData    typeCode = 5
	typeUndefined  typeCode = 6
	typeObjectID   typeCode = 7
	typeBool       typeCode = 8
	typeDate       typeCode = 9
	typeNull       typeCode = 10
	typeRegex      typeCode = 11
	typeDBPointer  typeCode = 12
	typeJavaScript typeCode = 13
	typeSymbol     typeCode = 14
	typeJSScope    typeCode = 15
	typeInt        typeCode = 16
	typeTimestamp  typeCode = 17
	typeLong       typeCode = 18
	typeDecimal    typeCode = 19
	typeMinKey     typeCode = -1
	typeMaxKey     typeCode = 127
	typeNumber     typeCode = 1000 // alias "number"; not a BSON code
)

var typeNames = map[string]typeCode{
	"double": typeDouble, "string": typeString, "object": typeObject, "array": typeArray,
	"binData": typeBinData, "undefined": typeUndefined, "objectId": typeObjectID,
	"bool": typeBool, "date": typeDate, "null": typeNull, "regex": typeRegex,
	"dbPointer": typeDBPointer, "javascript": typeJavaScript, "symbol": typeSymbol,
	"javascriptWithScope": typeJSScope, "int": typeInt, "timestamp": typeTimestamp,
	"long": typeLong, "decimal": typeDecimal, "minKey": typeMinKey, "maxKey": typeMaxKey,
	"number": typeNumber,
}

func (t typeCode) name() string {
	for n, c := range typeNames {
		if c == t {
			return n
		}
	}
	return ""
}

func validTypeCode(c int64) bool {
	switch {
	case c >= 1 && c <= 19, c == -1, c == 127:
		return true
	}
	return false
}

// hasType reports whether v is of BSON type t: an int32 is an "int" (16),
// an int64 a "long" (18), a Decimal128 a "decimal" (19); an integer of
// another Go type is a "long", and an "int" too when it fits 32 bits.
func hasType(v any, t typeCode) bool {
	switch rank(v) {
	case rankNull:
		return t == typeNull
	case rankNumber:
		if t == typeNumber {
			return true
		}
		switch v.(type) {
		case int32:
			return t == typeInt
		case int64:
			return t == typeLong
		case Decimal128:
			return t == typeDecimal
		}
		i, _, isInt := number(v)
		if !isInt {
			return t == typeDouble
		}
		return t == typeLong || (t == typeInt && i >= math.MinInt32 && i <= math.MaxInt32)
	case rankBinary:
		return t == typeBinData
	case rankString:
		return t == typeString
	case rankObject:
		return t == typeObject
	case rankArray:
		return t == typeArray
	case rankOID:
		return t == typeObjectID
	case rankBool:
		return t == typeBool
	case rankDate:
		return t == typeDate
	case rankRegex:
		return t == typeRegex
	}
	return false
}
