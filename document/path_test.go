package document

import (
	"reflect"
	"strings"
	"testing"
)

// TestDistinctValues: the values distinct sees at a path: arrays crossed
// on the way, an array at the end unwound one level (MongoDB's distinct
// counts [1, [1], 1] as 1, [1] and 1).
func TestDistinctValues(t *testing.T) {
	doc := map[string]any{
		"a": int64(1),
		"b": []any{int64(2), []any{int64(3)}, map[string]any{"c": "x"}},
		"d": []any{map[string]any{"c": "y"}, map[string]any{"c": []any{"z", nil}}, map[string]any{"e": 1}},
		"f": map[string]any{"g": map[string]any{"h": true}},
		"n": []any{int64(1), []any{int64(1)}, int64(1)},
		"k": []any{[]any{map[string]any{"c": "deep"}}},
	}
	for _, tc := range []struct {
		path string
		want []any
	}{
		{"a", []any{int64(1)}},
		{"b", []any{int64(2), []any{int64(3)}, map[string]any{"c": "x"}}},
		{"n", []any{int64(1), []any{int64(1)}, int64(1)}},
		{"k.c", nil},
		{"b.c", []any{"x"}},
		{"d.c", []any{"y", "z", nil}},
		{"f.g.h", []any{true}},
		{"f.g", []any{map[string]any{"h": true}}},
		{"missing", nil},
		{"a.b", nil},
	} {
		var got []any
		DistinctValues(doc, strings.Split(tc.path, "."), func(v any) { got = append(got, v) })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %#v, want %#v", tc.path, got, tc.want)
		}
	}
}

// TestDistinctSet: values of one distinct key once (numbers of equal
// value whatever their type, equal documents), in MongoDB's order of
// values (numbers before strings before documents), the first added kept;
// Bytes counts the keys of the values held.
func TestDistinctSet(t *testing.T) {
	var s DistinctSet
	in := []any{"b", int64(2), 1.0, int32(1), "a", map[string]any{"x": int64(1)}, int64(1), map[string]any{"x": 1.0}, 2.5, "b"}
	var added []bool
	var bytes []int
	for _, v := range in {
		added = append(added, s.Add(v))
		bytes = append(bytes, s.Bytes())
	}
	if want := []bool{true, true, true, false, true, true, false, false, true, false}; !reflect.DeepEqual(added, want) {
		t.Fatalf("added %v, want %v", added, want)
	}
	held := 0
	for i, v := range in {
		if added[i] {
			held += len(AppendDistinctKey(nil, v))
		}
		if bytes[i] != held {
			t.Fatalf("value %d (%v): %d bytes, want %d", i, v, bytes[i], held)
		}
	}
	want := []any{1.0, int64(2), 2.5, "a", "b", map[string]any{"x": int64(1)}}
	if got := s.Sorted(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sorted %#v, want %#v", got, want)
	}
}
