package document

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// Update is a parsed update document: $set, $unset, $inc and $currentDate,
// applied in that order.
type Update struct {
	ops []updateOp
}

type updateKind uint8

const (
	opSet updateKind = iota
	opUnset
	opInc
	opCurrentDate
)

type updateOp struct {
	kind updateKind
	path []string
	val  any
}

// ParseUpdate reads an update document decoded by encoding/json:
//
//	{"$set": {"a.b": 1}, "$unset": {"c": ""}, "$inc": {"n": 1},
//	 "$currentDate": {"lastModifiedDate": true}}
//
// Unknown operators and non-operator fields are FailedToParse (9); an
// update that names _id is ImmutableField (66); two operations on the same
// path, or on a path and its parent, are ConflictingUpdateOperators (40);
// $inc needs numbers (TypeMismatch 14).
func ParseUpdate(raw map[string]any) (*Update, error) {
	if len(raw) == 0 {
		return nil, mongoerr.New(mongoerr.FailedToParse, "'update' must hold at least one of $set, $unset, $inc, $currentDate")
	}
	u := &Update{}
	var paths []string
	for _, name := range []string{"$set", "$unset", "$inc", "$currentDate"} {
		arg, ok := raw[name]
		if !ok {
			continue
		}
		m, ok := arg.(map[string]any)
		if !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "%s needs a document of fields; got %T", name, arg)
		}
		for _, p := range slices.Sorted(mapsKeys(m)) {
			if err := checkUpdatePath(name, p); err != nil {
				return nil, err
			}
			for _, q := range paths {
				if q == p || strings.HasPrefix(q, p+".") || strings.HasPrefix(p, q+".") {
					return nil, mongoerr.New(mongoerr.ConflictingUpdateOperators, "updating the path %q would create a conflict at %q", p, q)
				}
			}
			paths = append(paths, p)
			op := updateOp{path: strings.Split(p, ".")}
			if len(op.path) > MaxDepth {
				return nil, mongoerr.New(mongoerr.BadValue, "%s: field path %.40q... has %d levels; documents nest at most %d",
					name, p, len(op.path), MaxDepth)
			}
			switch name {
			case "$set":
				v, err := partialfilter.FromExtJSON(m[p])
				if err != nil {
					return nil, err
				}
				if err := checkValue(v, len(op.path)); err != nil { // the value sits at the path's depth
					return nil, err
				}
				op.kind, op.val = opSet, v
			case "$unset":
				op.kind = opUnset
			case "$inc":
				v, err := partialfilter.FromExtJSON(m[p])
				if err != nil {
					return nil, err
				}
				switch v.(type) {
				case int64, float64:
				default:
					return nil, mongoerr.New(mongoerr.TypeMismatch, "cannot increment %q with a non-numeric argument", p)
				}
				op.kind, op.val = opInc, v
			case "$currentDate":
				switch t := m[p].(type) {
				case bool:
					if !t {
						return nil, mongoerr.New(mongoerr.BadValue, "$currentDate of %q: false is not allowed; use true or {\"$type\": \"date\"}", p)
					}
				case map[string]any:
					if len(t) != 1 || t["$type"] != "date" {
						return nil, mongoerr.New(mongoerr.BadValue, "$currentDate of %q: only {\"$type\": \"date\"} is supported", p)
					}
				default:
					return nil, mongoerr.New(mongoerr.BadValue, "$currentDate of %q needs true or {\"$type\": \"date\"}", p)
				}
				op.kind = opCurrentDate
			}
			u.ops = append(u.ops, op)
		}
	}
	for k := range raw {
		switch k {
		case "$set", "$unset", "$inc", "$currentDate":
		default:
			if strings.HasPrefix(k, "$") {
				return nil, mongoerr.New(mongoerr.FailedToParse, "unknown update operator %.40q; supported: $set, $unset, $inc, $currentDate", k)
			}
			return nil, mongoerr.New(mongoerr.FailedToParse, "an update holds only operators ($set, ...); use replace to replace a document (found field %.40q)", k)
		}
	}
	return u, nil
}

// AppendJSON appends u as an update document that ParseUpdate, given it
// decoded by encoding/json with UseNumber, reads back into the same
// update: the operators with their paths, the values as AppendJSON writes
// them (relaxed Extended JSON: dates and exact integers kept). A replica
// set's log carries updates in this form.
func (u *Update) AppendJSON(dst []byte) []byte {
	doc := Doc{}
	for _, op := range u.ops {
		name, val := "", any(nil)
		switch op.kind {
		case opSet:
			name, val = "$set", op.val
		case opUnset:
			name, val = "$unset", ""
		case opInc:
			name, val = "$inc", op.val
		case opCurrentDate:
			name, val = "$currentDate", true
		}
		m, _ := doc[name].(map[string]any)
		if m == nil {
			m = map[string]any{}
			doc[name] = m
		}
		m[strings.Join(op.path, ".")] = val
	}
	return AppendJSON(dst, doc)
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func checkUpdatePath(op, p string) error {
	if p == "" || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
		return mongoerr.New(mongoerr.BadValue, "%s: invalid field path %.40q", op, p)
	}
	for _, part := range strings.Split(p, ".") {
		if strings.HasPrefix(part, "$") {
			return mongoerr.New(mongoerr.BadValue, "%s: field path %.40q may not hold '$' parts", op, p)
		}
	}
	if p == "_id" || strings.HasPrefix(p, "_id.") {
		return mongoerr.New(mongoerr.ImmutableField, "performing an update on the path '_id' would modify the immutable field '_id'")
	}
	return nil
}

// Apply changes doc in place at now and reports whether anything changed.
// A path through a non-document value is an error (PathNotViable in
// MongoDB, BadValue here), and doc is then unchanged.
func (u *Update) Apply(doc Doc, now time.Time) (changed bool, err error) {
	// Check every op first, so that a failing update changes nothing.
	for _, op := range u.ops {
		if err := checkPath(doc, op); err != nil {
			return false, err
		}
	}
	for _, op := range u.ops {
		parent := doc
		for _, part := range op.path[:len(op.path)-1] {
			next, ok := parent[part].(map[string]any)
			if !ok {
				if op.kind == opUnset {
					parent = nil
					break
				}
				next = map[string]any{}
				parent[part] = next
				changed = true
			}
			parent = next
		}
		if parent == nil {
			continue
		}
		leaf := op.path[len(op.path)-1]
		old, had := parent[leaf]
		switch op.kind {
		case opSet:
			if !had || partialfilter.Compare(old, op.val) != 0 || !sameType(old, op.val) {
				parent[leaf] = op.val
				changed = true
			}
		case opUnset:
			if had {
				delete(parent, leaf)
				changed = true
			}
		case opInc:
			parent[leaf] = add(old, op.val)
			changed = changed || !had || !isZero(op.val)
		case opCurrentDate:
			parent[leaf] = now.UTC().Truncate(time.Millisecond)
			changed = true
		}
	}
	return changed, nil
}

func sameType(a, b any) bool {
	switch a.(type) {
	case int64:
		_, ok := b.(int64)
		return ok
	case float64:
		_, ok := b.(float64)
		return ok
	}
	return true
}

func isZero(v any) bool {
	switch t := v.(type) {
	case int64:
		return t == 0
	case float64:
		return t == 0
	}
	return false
}

// checkPath reports whether op can apply to doc: every parent on its path
// is a document or missing, and $inc's target is a number or missing.
func checkPath(doc Doc, op updateOp) error {
	cur := doc
	for i, part := range op.path {
		v, ok := cur[part]
		if !ok {
			return nil
		}
		if i == len(op.path)-1 {
			if op.kind == opInc {
				switch v.(type) {
				case int64, float64:
				default:
					return mongoerr.New(mongoerr.TypeMismatch, "cannot apply $inc to %q: it holds a non-numeric value", strings.Join(op.path, "."))
				}
			}
			return nil
		}
		next, isDoc := v.(map[string]any)
		if !isDoc {
			if op.kind == opUnset {
				return nil
			}
			return mongoerr.New(mongoerr.BadValue, "cannot create field %q in element {%s: %T}", op.path[i+1], part, v)
		}
		cur = next
	}
	return nil
}

// add is MongoDB's $inc arithmetic: integers stay integers unless the sum
// overflows, when it becomes a double; any double makes a double.
func add(old, inc any) any {
	switch o := old.(type) {
	case nil:
		return inc
	case int64:
		if i, ok := inc.(int64); ok {
			s := o + i
			if (s > o) == (i > 0) || i == 0 {
				return s
			}
			return float64(o) + float64(i)
		}
		return float64(o) + inc.(float64)
	case float64:
		switch i := inc.(type) {
		case int64:
			return o + float64(i)
		case float64:
			return o + i
		}
	}
	return math.NaN() // unreachable: checkPath refused it
}
