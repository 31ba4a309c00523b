package partialfilter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/mongoerr"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		filter string
		code   mongoerr.Code
		frag   string
	}{
		{`[]`, mongoerr.BadValue, "must be a JSON object"},
		{`{"a": `, mongoerr.BadValue, "not valid JSON"},
		{`{} {}`, mongoerr.BadValue, "trailing data"},
		{`{"a": {"$foo": 1}}`, mongoerr.BadValue, "unknown operator: $foo"},
		{`{"a": {"$gt": 1, "b": 2}}`, mongoerr.BadValue, "unknown operator: b"},
		{`{"$gt": 5}`, mongoerr.BadValue, "unknown top level operator: $gt"},
		{`{"$expr": {}}`, mongoerr.BadValue, "unknown top level operator: $expr"},
		{`{"a": {"$mod": [2, 0]}}`, mongoerr.BadValue, "operator not supported: $mod"},
		{`{"a": {"$in": 5}}`, mongoerr.BadValue, "$in needs an array"},
		{`{"a": {"$nin": {"x": 1}}}`, mongoerr.BadValue, "$nin needs an array"},
		{`{"a": {"$in": [{"$gt": 1}]}}`, mongoerr.BadValue, "cannot nest $ under $in"},
		{`{"$and": []}`, mongoerr.BadValue, "$and/$or/$nor must be a nonempty array"},
		{`{"$or": []}`, mongoerr.BadValue, "$and/$or/$nor must be a nonempty array"},
		{`{"$nor": {}}`, mongoerr.BadValue, "$nor must be an array"},
		{`{"$or": [1]}`, mongoerr.BadValue, "entries need to be full objects"},
		{`{"$or": [{"a": {"$bad": 1}}]}`, mongoerr.BadValue, "unknown operator: $bad"},
		{`{"a": {"$not": 5}}`, mongoerr.BadValue, "$not needs a regex or a document"},
		{`{"a": {"$not": {}}}`, mongoerr.BadValue, "$not cannot be empty"},
		{`{"a": {"$not": {"b": 1}}}`, mongoerr.BadValue, "unknown operator: b"},
		{`{"a": {"$type": "strung"}}`, mongoerr.BadValue, "unknown type name alias: strung"},
		{`{"a": {"$type": 99}}`, mongoerr.BadValue, "invalid numerical type code: 99"},
		{`{"a": {"$type": 2.5}}`, mongoerr.BadValue, "invalid numerical type code"},
		{`{"a": {"$type": []}}`, mongoerr.BadValue, "at least one type"},
		{`{"a": {"$type": true}}`, mongoerr.BadValue, "number or a string"},
		{`{"a": {"$regex": 5}}`, mongoerr.BadValue, "$regex has to be a string"},
		{`{"a": {"$regex": "("}}`, mongoerr.BadValue, "Regular expression is invalid"},
		{`{"a": {"$regex": "x", "$options": "z"}}`, mongoerr.BadValue, "invalid flag in regex options: z"},
		{`{"a": {"$options": "i"}}`, mongoerr.BadValue, "$options needs a $regex"},
		{`{"a": {"$ne": {"$regularExpression": {"pattern": "x", "options": ""}}}}`, mongoerr.BadValue, "regex as arg to $ne"},
		{`{"a": {"$size": "2"}}`, mongoerr.BadValue, "$size needs a number"},
		{`{"a": {"$size": -1}}`, mongoerr.BadValue, "$size may not be negative"},
		{`{"a": {"$size": 1.5}}`, mongoerr.BadValue, "$size must be a whole number"},
		{`{"a": {"$all": 1}}`, mongoerr.BadValue, "$all needs an array"},
		{`{"a": {"$all": [{"$gt": 1}]}}`, mongoerr.BadValue, "no $ expressions in $all"},
		{`{"a": {"$elemMatch": 1}}`, mongoerr.BadValue, "$elemMatch needs an Object"},
		{`{"a": {"$date": "yesterday"}}`, mongoerr.BadValue, "invalid $date"},
		{`{"a": {"$date": true}}`, mongoerr.BadValue, "$date needs"},
		{`{"a": {"$numberLong": "x"}}`, mongoerr.BadValue, "invalid $numberLong"},
		{`{"a": {"$numberDouble": 1}}`, mongoerr.BadValue, "$numberDouble must be a string"},
		{`{"a": {"$regularExpression": {"pattern": 1}}}`, mongoerr.BadValue, "$regularExpression needs"},
		{`{"a": {"$gt": 1}, "b": {"$in": 1}}`, mongoerr.BadValue, "field 'b'"},
		{strings.Repeat(`{"$and": [`, MaxDepth+1) + `{"a": 1}` + strings.Repeat(`]}`, MaxDepth+1), mongoerr.BadValue, "depth limit"},
		{`{"a": ` + strings.Repeat(`[`, 500) + strings.Repeat(`]`, 500) + `}`, mongoerr.BadValue, "nesting exceeds"},
	}
	for _, tt := range tests {
		_, err := ParseJSON([]byte(tt.filter))
		if err == nil {
			t.Errorf("ParseJSON(%.60s) = nil error, want %q", tt.filter, tt.frag)
			continue
		}
		if c := mongoerr.CodeOf(err); c != tt.code {
			t.Errorf("ParseJSON(%.60s) code %d, want %d (%v)", tt.filter, c, tt.code, err)
		}
		if !strings.Contains(err.Error(), tt.frag) {
			t.Errorf("ParseJSON(%.60s) = %q, want it to contain %q", tt.filter, err, tt.frag)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	for _, s := range []string{
		``, ` `, `{}`, `{"$comment": "x"}`,
		strings.Repeat(`{"$and": [`, MaxDepth) + `{"a": 1}` + strings.Repeat(`]}`, MaxDepth),
		`{"a": {"$eq": {"$gt": 1}}}`, // a literal document under $eq
		`{"a": {"$type": [1, "string", -1, 127]}}`,
	} {
		if _, err := ParseJSON([]byte(s)); err != nil {
			t.Errorf("ParseJSON(%.60s): %v", s, err)
		}
	}
	// Already converted Go values parse too.
	f, err := Parse(map[string]any{"a": map[string]any{"$in": []any{1, int32(2), 3.5}}})
	if err != nil || !f.Match(map[string]any{"a": int64(2)}) {
		t.Fatalf("Parse of Go values: %v", err)
	}
	if _, err := Parse(map[string]any{"a": struct{}{}}); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Fatalf("unsupported Go type: %v", err)
	}
}

func TestFromExtJSON(t *testing.T) {
	d := doc(t, `{"d1": {"$date": "2024-05-01T12:00:00.123456789+02:00"}, "d2": {"$date": {"$numberLong": "-1000"}},
		"d3": {"$date": 1714564800123}, "l": {"$numberLong": "9223372036854775807"}, "i": {"$numberInt": "7"},
		"f": {"$numberDouble": "-Infinity"}, "n": 3, "x": 3.0, "big": 1e400, "arr": [{"$numberLong": "1"}]}`)
	checks := map[string]string{
		"d1":  "2024-05-01 10:00:00.123456789 +0000 UTC",
		"d2":  "1969-12-31 23:59:59 +0000 UTC",
		"d3":  "2024-05-01 12:00:00.123 +0000 UTC",
		"l":   "int64 9223372036854775807",
		"i":   "int32 7",
		"f":   "float64 -Inf",
		"n":   "int32 3",
		"x":   "float64 3",
		"big": "float64 +Inf",
	}
	for k, want := range checks {
		var got string
		switch v := d[k].(type) {
		case int32:
			got = "int32 " + fmtAny(v)
		case int64:
			got = "int64 " + fmtAny(v)
		case float64:
			got = "float64 " + fmtAny(v)
		default:
			got = fmtAny(v)
		}
		if got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
	if d["arr"].([]any)[0] != int64(1) {
		t.Errorf("arr = %v", d["arr"])
	}
}

func fmtAny(v any) string { return strings.TrimSpace(fmt.Sprint(v)) }
