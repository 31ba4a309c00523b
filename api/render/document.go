package render

import (
	"strconv"
	"time"

	"github.com/hourglassdb/hourglass/document"
)

// AppendCSVValue appends one value of a document (document.Doc's values)
// as a CSV cell, as the cells of a record are written: numbers and
// booleans as text, a string bare (quoted where RFC 4180 requires), a
// date in RFC 3339 (UTC, as many fractional digits as it holds), null as an empty cell, and
// anything else (a sub-document, an array, an ObjectId, a decimal) as its
// Extended JSON text, the fields of a sub-document in order o.
func AppendCSVValue(b []byte, v any, o *document.Order) []byte {
	switch x := v.(type) {
	case nil:
		return b
	case string:
		return appendCSVString(b, x)
	case float64:
		return appendCSVFloat(b, x)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case bool:
		return strconv.AppendBool(b, x)
	case time.Time:
		return x.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	return appendCSVString(b, string(document.AppendJSONValue(nil, v, o)))
}
