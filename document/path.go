package document

import "time"

// IndexValues returns the values an index on path holds for doc, as
// MongoDB's index keys: the value at path, each element if it is an array
// (and each element's field when the path crosses an array of documents),
// and one null when the path is missing or the array is empty. multi
// reports whether an array was crossed or expanded: the index is then
// multikey.
func IndexValues(doc Doc, path []string) (vals []any, multi bool) {
	vals, multi = collect(nil, doc, path, false)
	if len(vals) == 0 {
		vals = append(vals, nil)
	}
	return vals, multi
}

func collect(dst []any, cur map[string]any, path []string, multi bool) ([]any, bool) {
	v, ok := cur[path[0]]
	if !ok {
		return dst, multi
	}
	if len(path) == 1 {
		if arr, isArr := v.([]any); isArr {
			return append(dst, arr...), true
		}
		return append(dst, v), multi
	}
	switch t := v.(type) {
	case map[string]any:
		return collect(dst, t, path[1:], multi)
	case []any:
		multi = true
		for _, e := range t {
			if m, isDoc := e.(map[string]any); isDoc {
				dst, _ = collect(dst, m, path[1:], true)
			}
		}
	}
	return dst, multi
}

// EarliestDate returns the earliest date among the values an index on path
// holds for doc: the date a TTL index expires the document by. ok is false
// when there is none (the document never expires).
func EarliestDate(doc Doc, path []string) (t time.Time, ok bool) {
	vals, _ := collect(nil, doc, path, false)
	for _, v := range vals {
		if d, isDate := v.(time.Time); isDate && (!ok || d.Before(t)) {
			t, ok = d, true
		}
	}
	return t, ok
}

// DistinctValues calls add with the values at path in v as MongoDB's
// distinct sees them: an array met on the way is crossed (the path goes on
// in each of its documents), an array at the end gives each element (an
// array of arrays gives its arrays: [1, [1]] is 1 and [1]), nothing where
// the path is missing; an empty path is v itself.
func DistinctValues(v any, path []string, add func(any)) {
	if len(path) == 0 {
		if arr, ok := v.([]any); ok {
			for _, e := range arr {
				add(e)
			}
			return
		}
		add(v)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if e, ok := x[path[0]]; ok {
			DistinctValues(e, path[1:], add)
		}
	case []any:
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				if e, ok := m[path[0]]; ok {
					DistinctValues(e, path[1:], add)
				}
			}
		}
	}
}
