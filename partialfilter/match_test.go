package partialfilter

import (
	"bytes"
	"encoding/json"
	"testing"
)

// doc decodes a JSON document into the package's value set.
func doc(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("doc %s: %v", s, err)
	}
	c, err := FromExtJSON(v)
	if err != nil {
		t.Fatalf("doc %s: %v", s, err)
	}
	return c.(map[string]any)
}

func TestMatch(t *testing.T) {
	const d1 = `{"$date": "2024-05-01T12:00:00Z"}`
	tests := []struct {
		filter, doc string
		want        bool
	}{
		// Equality, implicit and explicit; numbers across int and double.
		{`{}`, `{"a": 1}`, true},
		{`{"a": 1}`, `{"a": 1}`, true},
		{`{"a": 1}`, `{"a": 1.0}`, true},
		{`{"a": {"$eq": 1.0}}`, `{"a": 1}`, true},
		{`{"a": 1}`, `{"a": "1"}`, false},
		{`{"a": 1}`, `{"b": 1}`, false},
		{`{"a": "x"}`, `{"a": "x"}`, true},
		{`{"a": true}`, `{"a": 1}`, false},
		{`{"a": {"b": 1}}`, `{"a": {"b": 1}}`, true},
		{`{"a": {"b": 1}}`, `{"a": {"b": 1, "c": 2}}`, false},
		{`{"a": 9007199254740993}`, `{"a": 9007199254740992.0}`, false},
		{`{"a": 9007199254740992}`, `{"a": 9007199254740992.0}`, true},
		// null and missing.
		{`{"a": null}`, `{"a": null}`, true},
		{`{"a": null}`, `{}`, true},
		{`{"a": null}`, `{"a": 0}`, false},
		{`{"a": {"$ne": null}}`, `{}`, false},
		{`{"a": {"$ne": null}}`, `{"a": 1}`, true},
		{`{"a": {"$gte": null}}`, `{}`, true},
		{`{"a": {"$lte": null}}`, `{"a": null}`, true},
		{`{"a": {"$gt": null}}`, `{"a": null}`, false},
		{`{"a": {"$lt": null}}`, `{}`, false},
		{`{"a": {"$in": [null]}}`, `{}`, true},
		{`{"a": {"$nin": [null]}}`, `{}`, false},
		{`{"a.b": null}`, `{"a": 5}`, true},
		{`{"a.b": null}`, `{"a": [{"c": 1}]}`, true},
		{`{"a.b": null}`, `{"a": [1, 2]}`, false},
		{`{"a.b": {"$exists": false}}`, `{"a": [1, 2]}`, true},
		// Comparisons stay in their type bracket.
		{`{"a": {"$gt": 5}}`, `{"a": 6}`, true},
		{`{"a": {"$gt": 5}}`, `{"a": 5.5}`, true},
		{`{"a": {"$gt": 5}}`, `{"a": 5}`, false},
		{`{"a": {"$gte": 5}}`, `{"a": 5.0}`, true},
		{`{"a": {"$gt": 5}}`, `{"a": "6"}`, false},
		{`{"a": {"$lt": 5}}`, `{"a": "4"}`, false},
		{`{"a": {"$lt": 5}}`, `{"a": null}`, false},
		{`{"a": {"$lt": 5}}`, `{}`, false},
		{`{"a": {"$gt": "b"}}`, `{"a": "c"}`, true},
		{`{"a": {"$gt": "b"}}`, `{"a": "B"}`, false},
		{`{"a": {"$gt": "b"}}`, `{"a": 7}`, false},
		{`{"a": {"$lt": true}}`, `{"a": false}`, true},
		{`{"a": {"$gt": {"$date": "2024-01-01T00:00:00Z"}}}`, `{"a": ` + d1 + `}`, true},
		{`{"a": {"$lt": {"$date": "2024-01-01T00:00:00Z"}}}`, `{"a": ` + d1 + `}`, false},
		{`{"a": {"$gt": {"$date": "2024-01-01T00:00:00Z"}}}`, `{"a": "2025-01-01T00:00:00Z"}`, false},
		{`{"a": {"$gt": 0}}`, `{"a": ` + d1 + `}`, false},
		{`{"a": ` + d1 + `}`, `{"a": {"$date": {"$numberLong": "1714564800000"}}}`, true},
		{`{"a": {"$eq": {"$date": 1714564800000}}}`, `{"a": ` + d1 + `}`, true},
		// NaN.
		{`{"a": {"$numberDouble": "NaN"}}`, `{"a": {"$numberDouble": "NaN"}}`, true},
		{`{"a": {"$gte": {"$numberDouble": "NaN"}}}`, `{"a": {"$numberDouble": "NaN"}}`, true},
		{`{"a": {"$gt": {"$numberDouble": "NaN"}}}`, `{"a": {"$numberDouble": "NaN"}}`, false},
		{`{"a": {"$lt": 5}}`, `{"a": {"$numberDouble": "NaN"}}`, false},
		{`{"a": {"$gt": {"$numberDouble": "NaN"}}}`, `{"a": 5}`, false},
		{`{"a": {"$lt": {"$numberDouble": "Infinity"}}}`, `{"a": 5}`, true},
		// Arrays.
		{`{"a": 5}`, `{"a": [1, 5]}`, true},
		{`{"a": [1, 5]}`, `{"a": [1, 5]}`, true},
		{`{"a": [1, 5]}`, `{"a": [5, 1]}`, false},
		{`{"a": [1]}`, `{"a": [[1], 2]}`, true},
		{`{"a": 1}`, `{"a": [[1], 2]}`, false},
		{`{"a": {"$gt": 4}}`, `{"a": [1, 5]}`, true},
		{`{"a": {"$gt": 1, "$lt": 5}}`, `{"a": [0, 7]}`, true},
		{`{"a": {"$ne": 5}}`, `{"a": [1, 5]}`, false},
		{`{"a": {"$ne": 2}}`, `{"a": [1, 5]}`, true},
		{`{"a": {"$nin": [5, 6]}}`, `{"a": [1, 5]}`, false},
		{`{"a": {"$nin": [7]}}`, `{"a": [1, 5]}`, true},
		{`{"a": {"$in": [5, 6]}}`, `{"a": [1, 5]}`, true},
		{`{"a": {"$in": [[1, 5]]}}`, `{"a": [1, 5]}`, true},
		{`{"a": {"$exists": true}}`, `{"a": []}`, true},
		{`{"a": []}`, `{"a": []}`, true},
		{`{"a": {"$gt": []}}`, `{"a": [1]}`, true},
		// Dotted paths.
		{`{"a.b": 1}`, `{"a": {"b": 1}}`, true},
		{`{"a.b": 1}`, `{"a": [{"b": 2}, {"b": 1}]}`, true},
		{`{"a.b": 1}`, `{"a": [{"b": [0, 1]}]}`, true},
		{`{"a.b": 1}`, `{"a": [[{"b": 1}]]}`, false},
		{`{"a.b.c": 1}`, `{"a": {"b": [{"c": 1}]}}`, true},
		{`{"a.1": 5}`, `{"a": [1, 5]}`, true},
		{`{"a.0": 5}`, `{"a": [1, 5]}`, false},
		{`{"a.01": 5}`, `{"a": [1, 5]}`, false},
		{`{"a.0.b": 2}`, `{"a": [{"b": 2}]}`, true},
		{`{"a.0.0": 2}`, `{"a": [[2]]}`, true},
		{`{"a.0": 2}`, `{"a": {"0": 2}}`, true},
		{`{"a.b": 1}`, `{"a": 1}`, false},
		{`{"a.b": {"$exists": true}}`, `{"a": [{"b": null}]}`, true},
		{`{"sensor.id": {"$in": [1, 2]}}`, `{"sensor": {"id": 2, "loc": "x"}}`, true},
		// $exists.
		{`{"a": {"$exists": true}}`, `{"a": null}`, true},
		{`{"a": {"$exists": false}}`, `{"a": null}`, false},
		{`{"a": {"$exists": 0}}`, `{}`, true},
		{`{"a": {"$exists": 1}}`, `{}`, false},
		// Logical.
		{`{"$and": [{"a": 1}, {"b": 2}]}`, `{"a": 1, "b": 2}`, true},
		{`{"$and": [{"a": 1}, {"b": 2}]}`, `{"a": 1}`, false},
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"b": 2}`, true},
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"b": 3}`, false},
		{`{"$nor": [{"a": 1}, {"b": 2}]}`, `{"b": 3}`, true},
		{`{"$nor": [{"a": 1}]}`, `{"a": [1]}`, false},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": 3}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": "x"}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": [1, 9]}`, false},
		{`{"a": {"$not": {"$gt": 1, "$lt": 5}}}`, `{"a": 3}`, false},
		{`{"a": {"$not": {"$gt": 1, "$lt": 5}}}`, `{"a": 7}`, true},
		{`{"a": {"$not": {"$regex": "^x"}}}`, `{"a": "xy"}`, false},
		{`{"a": {"$not": {"$regularExpression": {"pattern": "^x", "options": ""}}}}`, `{"a": "yx"}`, true},
		// $type.
		{`{"a": {"$type": "string"}}`, `{"a": "x"}`, true},
		{`{"a": {"$type": 2}}`, `{"a": "x"}`, true},
		{`{"a": {"$type": "double"}}`, `{"a": 1.5}`, true},
		{`{"a": {"$type": 1}}`, `{"a": 1}`, false},
		{`{"a": {"$type": "long"}}`, `{"a": 1}`, false}, // a JSON integer that fits 32 bits is an int
		{`{"a": {"$type": "int"}}`, `{"a": 1}`, true},
		{`{"a": {"$type": "long"}}`, `{"a": {"$numberLong": "1"}}`, true},
		{`{"a": {"$type": "int"}}`, `{"a": {"$numberLong": "1"}}`, false},
		{`{"a": {"$type": "decimal"}}`, `{"a": {"$numberDecimal": "1.10"}}`, true},
		{`{"a": {"$type": "number"}}`, `{"a": {"$numberDecimal": "1.10"}}`, true},
		{`{"a": {"$type": "binData"}}`, `{"a": {"$binary": {"base64": "AQI=", "subType": "00"}}}`, true},
		{`{"a": 1.1}`, `{"a": {"$numberDecimal": "1.10"}}`, false}, // 1.1 as a double is not 1.10 exactly
		{`{"a": {"$numberDecimal": "1.5"}}`, `{"a": 1.5}`, true},
		{`{"a": {"$gt": {"$numberDecimal": "2.50"}}}`, `{"a": 3}`, true},
		{`{"a": {"$lt": {"$numberDecimal": "9223372036854775807.5"}}}`, `{"a": {"$numberLong": "9223372036854775807"}}`, true},
		{`{"a": {"$gte": {"$numberDecimal": "NaN"}}}`, `{"a": {"$numberDecimal": "NaN"}}`, true},
		{`{"a": {"$binary": {"base64": "AQI=", "subType": "00"}}}`, `{"a": {"$binary": {"base64": "AQI=", "subType": "00"}}}`, true},
		{`{"a": {"$gt": {"$binary": {"base64": "AQI=", "subType": "00"}}}}`, `{"a": {"$binary": {"base64": "AQID", "subType": "00"}}}`, true},
		{`{"a": {"$gt": []}}`, `{"a": {"$binary": {"base64": "AQI=", "subType": "00"}}}`, false}, // brackets do not compare
		{`{"a": {"$type": 18}}`, `{"a": 5000000000}`, true},
		{`{"a": {"$type": "int"}}`, `{"a": 5000000000}`, false},
		{`{"a": {"$type": 16}}`, `{"a": 7}`, true},
		{`{"a": {"$type": "number"}}`, `{"a": 1.5}`, true},
		{`{"a": {"$type": "number"}}`, `{"a": "1"}`, false},
		{`{"a": {"$type": "object"}}`, `{"a": {}}`, true},
		{`{"a": {"$type": 3}}`, `{"a": [1]}`, false},
		{`{"a": {"$type": "array"}}`, `{"a": [1]}`, true},
		{`{"a": {"$type": 4}}`, `{"a": 1}`, false},
		{`{"a": {"$type": "bool"}}`, `{"a": false}`, true},
		{`{"a": {"$type": 8}}`, `{"a": 0}`, false},
		{`{"a": {"$type": "date"}}`, `{"a": ` + d1 + `}`, true},
		{`{"a": {"$type": 9}}`, `{"a": "2024-05-01T12:00:00Z"}`, false},
		{`{"a": {"$type": "null"}}`, `{"a": null}`, true},
		{`{"a": {"$type": 10}}`, `{}`, false},
		{`{"a": {"$type": "string"}}`, `{"a": [1, "x"]}`, true},
		{`{"a": {"$type": ["string", "bool"]}}`, `{"a": true}`, true},
		{`{"a": {"$type": "objectId"}}`, `{"a": "x"}`, false},
		// $regex.
		{`{"a": {"$regex": "^se"}}`, `{"a": "sensor"}`, true},
		{`{"a": {"$regex": "^SE"}}`, `{"a": "sensor"}`, false},
		{`{"a": {"$regex": "^SE", "$options": "i"}}`, `{"a": "sensor"}`, true},
		{`{"a": {"$regex": "^b", "$options": "m"}}`, `{"a": "a\nb"}`, true},
		{`{"a": {"$regex": "a.b", "$options": "s"}}`, `{"a": "a\nb"}`, true},
		{`{"a": {"$regex": "a b # comment", "$options": "x"}}`, `{"a": "ab"}`, true},
		{`{"a": {"$regex": "1"}}`, `{"a": 1}`, false},
		{`{"a": {"$regex": "^x"}}`, `{"a": ["y", "xz"]}`, true},
		{`{"a": {"$regularExpression": {"pattern": "^x", "options": ""}}}`, `{"a": "xa"}`, true},
		{`{"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}, 5]}}`, `{"a": "xa"}`, true},
		{`{"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}, 5]}}`, `{"a": 5}`, true},
		{`{"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}, 5]}}`, `{"a": "y"}`, false},
		// $size, $all, $elemMatch.
		{`{"a": {"$size": 2}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$size": 1}}`, `{"a": [[1, 2]]}`, true},
		{`{"a": {"$size": 2}}`, `{"a": [[1, 2]]}`, false},
		{`{"a": {"$size": 0}}`, `{}`, false},
		{`{"a": {"$all": [1, 2]}}`, `{"a": [2, 3, 1]}`, true},
		{`{"a": {"$all": [1, 2]}}`, `{"a": [2, 3]}`, false},
		{`{"a": {"$all": []}}`, `{"a": [2, 3]}`, false},
		{`{"a": {"$all": [1]}}`, `{"a": 1}`, true},
		{`{"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}}`, `{"a": [0, 7]}`, false},
		{`{"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}}`, `{"a": [0, 3]}`, true},
		{`{"a": {"$elemMatch": {"$gt": 1}}}`, `{"a": 3}`, false},
		{`{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, `{"a": [{"b": 1}, {"c": 2}]}`, false},
		{`{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, `{"a": [{"b": 1, "c": 2}]}`, true},
		{`{"a": {"$all": [{"$elemMatch": {"b": 1}}]}}`, `{"a": [{"b": 1}]}`, true},
	}
	for _, tt := range tests {
		f, err := ParseJSON([]byte(tt.filter))
		if err != nil {
			t.Errorf("ParseJSON(%s): %v", tt.filter, err)
			continue
		}
		d := doc(t, tt.doc)
		if got := f.Match(d); got != tt.want {
			t.Errorf("%s on %s = %v, want %v", tt.filter, tt.doc, got, tt.want)
		}
		// The canonical form must mean the same.
		g, err := ParseJSON([]byte(f.String()))
		if err != nil {
			t.Errorf("reparse %s: %v", f, err)
			continue
		}
		if got := g.Match(d); got != tt.want {
			t.Errorf("%s (from %s) on %s = %v, want %v", g, tt.filter, tt.doc, got, tt.want)
		}
	}
}

func TestMatchUnnormalisedInput(t *testing.T) {
	f := MustParseJSON(`{"a": {"$gt": 1}, "b": 2}`)
	d := map[string]any{"a": 2, "b": json.Number("2.0")}
	if !f.Match(d) {
		t.Fatalf("%s should match %v", f, d)
	}
	if !f.Match(map[string]any{"a": int32(5), "b": uint8(2)}) {
		t.Fatal("Go integer types are numbers")
	}
	var nilF *Filter
	if !nilF.Match(nil) || !(&Filter{}).Match(nil) {
		t.Fatal("nil and zero filters match everything")
	}
}

func TestObjectID(t *testing.T) {
	doc := map[string]any{"_id": mustOID(t, "65a1b2c3d4e5f60718293a4b"), "n": int64(1)}
	for _, c := range []struct {
		filter string
		want   bool
	}{
		{`{"_id": {"$oid": "65a1b2c3d4e5f60718293a4b"}}`, true},
		{`{"_id": {"$oid": "65a1b2c3d4e5f60718293a4c"}}`, false},
		{`{"_id": {"$gt": {"$oid": "65a1b2c3d4e5f60718293a4a"}}}`, true},
		{`{"_id": {"$lt": {"$oid": "65a1b2c3d4e5f60718293a4b"}}}`, false},
		{`{"_id": {"$type": "objectId"}}`, true},
		{`{"_id": "65a1b2c3d4e5f60718293a4b"}`, false}, // a string is not an ObjectId
		{`{"_id": {"$gt": true}}`, false},              // brackets never compare
	} {
		if got := MustParseJSON(c.filter).Match(doc); got != c.want {
			t.Errorf("%s: got %v, want %v", c.filter, got, c.want)
		}
	}
	for _, bad := range []string{`{"_id": {"$oid": "xyz"}}`, `{"_id": {"$oid": 5}}`, `{"_id": {"$oid": "65a1b2c3d4e5f60718293a4"}}`} {
		if _, err := ParseJSON([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	f := MustParseJSON(`{"_id": {"$oid": "65a1b2c3d4e5f60718293a4b"}}`)
	if back := MustParseJSON(f.String()); !back.Match(doc) {
		t.Errorf("rendered %s does not round-trip", f.String())
	}
	// ObjectIds sort after arrays and before booleans (BSON order).
	if Compare(mustOID(t, "000000000000000000000000"), []any{}) <= 0 || Compare(mustOID(t, "ffffffffffffffffffffffff"), false) >= 0 {
		t.Error("ObjectId bracket out of BSON order")
	}
}

func mustOID(t *testing.T, s string) ObjectID {
	t.Helper()
	id, err := ParseObjectID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
