package partialfilter

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// Filter is a parsed MongoDB query filter. It is immutable after Parse and
// safe for concurrent use. The zero Filter and a nil *Filter match every
// document.
type Filter struct {
	root *node // opAnd over the top-level conjuncts; nil = match all
}

// Parse parses a filter document. Values may come straight from
// encoding/json (with or without UseNumber, Extended JSON wrappers such as
// {"$date": ...} still in place) or already be in this package's value set.
// A nil or empty map matches every document. Errors are *mongoerr.Error with
// code BadValue (2) and a message naming the operator and field. filter is not
// modified or retained.
func Parse(filter map[string]any) (*Filter, error) {
	conv, err := FromExtJSON(filter)
	if err != nil {
		return nil, err
	}
	m, _ := conv.(map[string]any)
	kids, err := parseDoc(m, 0)
	if err != nil {
		return nil, err
	}
	return &Filter{root: &node{op: opAnd, kids: kids}}, nil
}

// ParseJSON decodes data (with json.Number for numbers, so integers stay
// exact) and parses it. Empty or all-whitespace data and {} match every
// document. Malformed JSON or a non-object is BadValue.
func ParseJSON(data []byte) (*Filter, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return &Filter{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, mongoerr.New(mongoerr.BadValue, "filter is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, mongoerr.New(mongoerr.BadValue, "filter has trailing data after the JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "filter must be a JSON object")
	}
	return Parse(m)
}

// MustParseJSON is ParseJSON for filters known to be valid (tests, constants);
// it panics on error.
func MustParseJSON(s string) *Filter {
	f, err := ParseJSON([]byte(s))
	if err != nil {
		panic("partialfilter: " + err.Error())
	}
	return f
}

// Match reports whether doc satisfies the filter. doc holds values of this
// package's value set (see FromExtJSON); Go integer types and json.Number
// are understood as numbers, Extended JSON wrappers are not resolved. A nil
// doc is an empty document. Match does not modify doc and, for the usual
// operators, does not allocate.
func (f *Filter) Match(doc map[string]any) bool {
	if f == nil || f.root == nil {
		return true
	}
	return f.root.match(doc)
}

// IsEmpty reports whether the filter has no conditions (matches everything).
func (f *Filter) IsEmpty() bool {
	return f == nil || f.root == nil || len(f.root.kids) == 0
}

// Conjuncts returns the top-level AND terms of the filter: implicit and
// explicit $and are flattened, and a field with several operators
// ({t: {$gte: a, $lt: b}}) gives one term per operator. And(f.Conjuncts()...)
// is equivalent to f. The slice is new; the filters share f's immutable
// parts.
func (f *Filter) Conjuncts() []*Filter {
	if f.IsEmpty() {
		return nil
	}
	ns := f.root.conjuncts(nil)
	out := make([]*Filter, len(ns))
	for i, n := range ns {
		out[i] = &Filter{root: &node{op: opAnd, kids: []*node{n}}}
	}
	return out
}

// And returns a filter matching the documents every f matches. Nil filters
// are skipped; And() matches everything.
func And(fs ...*Filter) *Filter {
	var kids []*node
	for _, f := range fs {
		if !f.IsEmpty() {
			kids = f.root.conjuncts(kids)
		}
	}
	return &Filter{root: &node{op: opAnd, kids: kids}}
}

// Paths returns every field path the filter refers to (dotted, as written;
// for $elemMatch the array's path), deduplicated and sorted. The slice is new.
func (f *Filter) Paths() []string {
	if f.IsEmpty() {
		return nil
	}
	set := map[string]struct{}{}
	f.root.paths(set)
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// RefersOnlyTo reports whether every path of the filter is field itself or
// lies under it (field.<sub>). "sensorX" is not under "sensor". An empty
// filter refers to nothing and so reports true.
func (f *Filter) RefersOnlyTo(field string) bool {
	for _, p := range f.Paths() {
		if !underPath(p, field) {
			return false
		}
	}
	return true
}

// underPath reports whether p is field or a sub-path of it.
func underPath(p, field string) bool {
	return p == field || strings.HasPrefix(p, field) && p[len(field)] == '.'
}

// Split partitions the top-level conjuncts for a time-series scan:
//
//   - meta: conjuncts that refer only to metaField; evaluate them once per
//     series with Match on the document {metaField: <meta value>} (an empty
//     document for a series without meta). Empty when metaField is "".
//   - time: conjuncts that are single comparisons ($eq $gt $gte $lt $lte with
//     a number, string, boolean or date) on timeField; time.Range(timeField)
//     is exact for them, so a caller that checks the range per measurement
//     need not evaluate them.
//   - rest: everything else, to evaluate per measurement.
//
// And(meta, time, rest) is equivalent to f. None of the results is nil.
func (f *Filter) Split(metaField, timeField string) (meta, time, rest *Filter) {
	var m, t, r []*node
	if !f.IsEmpty() {
		for _, n := range f.root.conjuncts(nil) {
			c := &Filter{root: &node{op: opAnd, kids: []*node{n}}}
			switch {
			case metaField != "" && c.RefersOnlyTo(metaField):
				m = append(m, n)
			case rangeTerm(n, timeField):
				t = append(t, n)
			default:
				r = append(r, n)
			}
		}
	}
	return &Filter{root: &node{op: opAnd, kids: m}},
		&Filter{root: &node{op: opAnd, kids: t}},
		&Filter{root: &node{op: opAnd, kids: r}}
}
