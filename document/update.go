package document

import (
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Update is a parsed update document: $set, $unset, $inc, $currentDate
// and $rename, applied in that order (their paths do not overlap).
type Update struct {
	ops []updateOp
}

type updateKind uint8

const (
	opSet updateKind = iota
	opUnset
	opInc
	opCurrentDate
	opRename
)

type updateOp struct {
	kind updateKind
	path []string
	val  any
	to   []string // $rename's target
}

// ParseUpdate reads an update document decoded by encoding/json:
//
//	{"$set": {"a.b": 1}, "$unset": {"c": ""}, "$inc": {"n": 1},
//	 "$currentDate": {"lastModifiedDate": true}, "$rename": {"a.old": "a.new"}}
//
// Unknown operators and non-operator fields are FailedToParse (9); an
// update that names _id is ImmutableField (66); two operations on the same
// path, or on a path and its parent, are ConflictingUpdateOperators (40);
// $inc needs numbers (TypeMismatch 14).
func ParseUpdate(raw map[string]any) (*Update, error) {
	if len(raw) == 0 {
		return nil, mongoerr.New(mongoerr.FailedToParse, "'update' must hold at least one of $set, $unset, $inc, $currentDate, $rename")
	}
	u := &Update{}
	var paths []string
	for _, name := range []string{"$set", "$unset", "$inc", "$currentDate", "$rename"} {
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
			targets := []string{p}
			var to string
			if name == "$rename" {
				var ok bool
				if to, ok = m[p].(string); !ok {
					return nil, mongoerr.New(mongoerr.BadValue, "The 'to' field for $rename must be a string: %s: %T", p, m[p])
				}
				if err := checkUpdatePath(name, to); err != nil {
					return nil, err
				}
				switch {
				case to == p:
					return nil, mongoerr.New(mongoerr.BadValue, "The source and target field for $rename must differ: %s: %q", p, to)
				case strings.HasPrefix(to, p+".") || strings.HasPrefix(p, to+"."):
					return nil, mongoerr.New(mongoerr.BadValue, "The source and target field for $rename must not be on the same path: %s: %q", p, to)
				}
				targets = append(targets, to)
			}
			for _, t := range targets {
				for _, q := range paths {
					if q == t || strings.HasPrefix(q, t+".") || strings.HasPrefix(t, q+".") {
						return nil, mongoerr.New(mongoerr.ConflictingUpdateOperators, "updating the path %q would create a conflict at %q", t, q)
					}
				}
				paths = append(paths, t)
			}
			op := updateOp{path: strings.Split(p, ".")}
			if to != "" {
				op.to = strings.Split(to, ".")
				if len(op.to) > MaxDepth {
					return nil, mongoerr.New(mongoerr.BadValue, "%s: field path %.40q... has %d levels; documents nest at most %d",
						name, to, len(op.to), MaxDepth)
				}
			}
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
				if !isNumber(v) {
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
			case "$rename":
				op.kind = opRename
			}
			u.ops = append(u.ops, op)
		}
	}
	for k := range raw {
		switch k {
		case "$set", "$unset", "$inc", "$currentDate", "$rename":
		default:
			if strings.HasPrefix(k, "$") {
				return nil, mongoerr.New(mongoerr.FailedToParse, "unknown update operator %.40q; supported: $set, $unset, $inc, $currentDate, $rename", k)
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
		case opRename:
			name, val = "$rename", strings.Join(op.to, ".")
		}
		m, _ := doc[name].(map[string]any)
		if m == nil {
			m = map[string]any{}
			doc[name] = m
		}
		m[strings.Join(op.path, ".")] = val
	}
	if len(doc) == 0 {
		doc["$set"] = map[string]any{} // {"$set": {}} changes nothing, and parses
	}
	return AppendJSON(dst, doc)
}

// WidenInts makes the int32 values $set and $inc write int64, as the HTTP
// door reads a time series' plain JSON integers (a meta value inserted as
// {"id": 5} holds an int64, and {"$set": {"meta.id": 5}} writes the same
// type). Extended JSON's {"$numberInt": "5"} cannot be told apart after
// parsing and widens too.
func (u *Update) WidenInts() {
	for i := range u.ops {
		if k := u.ops[i].kind; k == opSet || k == opInc {
			u.ops[i].val = widenInts(u.ops[i].val)
		}
	}
}

func widenInts(v any) any {
	switch t := v.(type) {
	case int32:
		return int64(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = widenInts(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = widenInts(e)
		}
		return out
	}
	return v
}

// Paths returns the dotted paths u changes, in the order it applies
// them; a $rename changes two, its source and its target. The slice is
// new.
func (u *Update) Paths() []string {
	out := make([]string, 0, len(u.ops))
	for _, op := range u.ops {
		out = append(out, strings.Join(op.path, "."))
		if op.kind == opRename {
			out = append(out, strings.Join(op.to, "."))
		}
	}
	return out
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
	// Check every op first, and make every sum, so that a failing update
	// changes nothing. Paths do not overlap (ParseUpdate).
	sums := make([]any, len(u.ops))
	for i, op := range u.ops {
		if op.kind == opRename {
			// A source that is missing (or under a non-document) is
			// nothing to move; the target's parents must be documents.
			if _, ok := lookupPresent(doc, op.path); ok {
				if err := checkPath(doc, updateOp{kind: opSet, path: op.to}); err != nil {
					return false, err
				}
			}
			continue
		}
		if err := checkPath(doc, op); err != nil {
			return false, err
		}
		if op.kind == opInc {
			var err error
			if sums[i], err = add(lookupPath(doc, op.path), op.val); err != nil {
				return false, err
			}
		}
	}
	for i, op := range u.ops {
		if op.kind == opRename {
			v, ok := lookupPresent(doc, op.path)
			if !ok {
				continue
			}
			parent, _ := lookupPresent(doc, op.path[:len(op.path)-1])
			delete(parent.(map[string]any), op.path[len(op.path)-1])
			target := doc
			for _, part := range op.to[:len(op.to)-1] {
				next, ok := target[part].(map[string]any)
				if !ok {
					next = map[string]any{}
					target[part] = next
				}
				target = next
			}
			target[op.to[len(op.to)-1]] = v
			changed = true
			continue
		}
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
			parent[leaf] = sums[i]
			changed = changed || !had || !isZero(op.val) || !sameType(old, sums[i])
		case opCurrentDate:
			parent[leaf] = now.UTC().Truncate(time.Millisecond)
			changed = true
		}
	}
	return changed, nil
}

// sameType reports whether two numbers have one BSON type ($set of 1 over
// 1.0 changes the document).
func sameType(a, b any) bool {
	return reflect.TypeOf(a) == reflect.TypeOf(b)
}

func isZero(v any) bool {
	switch t := v.(type) {
	case int32:
		return t == 0
	case int64:
		return t == 0
	case float64:
		return t == 0
	}
	return false // a decimal zero changes 1.5 to 1.50: not "no change"
}

func isNumber(v any) bool {
	switch v.(type) {
	case int32, int64, float64, partialfilter.Decimal128:
		return true
	}
	return false
}

// lookupPresent returns the value at path in doc and whether there is one
// (a value may be null); path may be empty (doc itself).
func lookupPresent(doc Doc, path []string) (any, bool) {
	var cur any = doc
	for _, part := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// lookupPath returns the value at path in doc, nil when it is missing.
func lookupPath(doc Doc, path []string) any {
	var cur any = doc
	for _, part := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
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
			if op.kind == opInc && !isNumber(v) {
				return mongoerr.New(mongoerr.TypeMismatch, "cannot apply $inc to %q: it holds a non-numeric value", strings.Join(op.path, "."))
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

// add is MongoDB's $inc arithmetic: int32 plus int32 stays an int32
// unless the sum overflows, when it is an int64; int64 with an integer is
// an int64 unless the sum overflows, when it becomes a double; a double
// makes a double, and a decimal a decimal (exactly).
func add(old, inc any) (any, error) {
	_, od := old.(partialfilter.Decimal128)
	_, id := inc.(partialfilter.Decimal128)
	switch {
	case old == nil:
		return inc, nil
	case od || id:
		return addDecimal(old, inc)
	}
	switch o := old.(type) {
	case int32:
		if i, ok := inc.(int32); ok {
			s := int64(o) + int64(i)
			if s >= math.MinInt32 && s <= math.MaxInt32 {
				return int32(s), nil
			}
			return s, nil
		}
		return add(int64(o), inc)
	case int64:
		switch i := inc.(type) {
		case int32:
			return add(o, int64(i))
		case int64:
			s := o + i
			if (s > o) == (i > 0) || i == 0 {
				return s, nil
			}
			return float64(o) + float64(i), nil
		}
		return float64(o) + inc.(float64), nil
	case float64:
		switch i := inc.(type) {
		case int32:
			return o + float64(i), nil
		case int64:
			return o + float64(i), nil
		case float64:
			return o + i, nil
		}
	}
	return nil, mongoerr.New(mongoerr.TypeMismatch, "cannot add %T to %T", inc, old) // checkPath refused it
}

// addDecimal adds two numbers, one of them a decimal, into a decimal: an
// integer exactly, a double as its 15 significant digits (as MongoDB
// converts one).
func addDecimal(a, b any) (any, error) {
	ac, ae, err := decimalParts(a)
	if err != nil {
		return nil, err
	}
	bc, be, err := decimalParts(b)
	if err != nil {
		return nil, err
	}
	if ac == nil || bc == nil { // NaN or an infinity: the double sum says which
		switch f := toFloat(a) + toFloat(b); {
		case math.IsInf(f, 1):
			return partialfilter.ParseDecimal128("Infinity")
		case math.IsInf(f, -1):
			return partialfilter.ParseDecimal128("-Infinity")
		}
		return partialfilter.ParseDecimal128("NaN")
	}
	exp := min(ae, be)
	scale := func(c *big.Int, e int) *big.Int {
		return new(big.Int).Mul(c, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(e-exp)), nil))
	}
	sum := new(big.Int).Add(scale(ac, ae), scale(bc, be))
	d, ok := bson.ParseDecimal128FromBigInt(sum, exp)
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "$inc: the decimal sum needs more than 34 digits")
	}
	h, l := d.GetBytes()
	return partialfilter.Decimal128{H: h, L: l}, nil
}

// decimalParts returns a number as coefficient and decimal exponent; nil
// for NaN and the infinities.
func decimalParts(v any) (*big.Int, int, error) {
	switch t := v.(type) {
	case int32:
		return big.NewInt(int64(t)), 0, nil
	case int64:
		return big.NewInt(t), 0, nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil, 0, nil
		}
		d, err := partialfilter.ParseDecimal128(strconv.FormatFloat(t, 'e', 14, 64))
		if err != nil {
			return nil, 0, err
		}
		return decimalParts(d)
	case partialfilter.Decimal128:
		c, e, err := bson.NewDecimal128(t.H, t.L).BigInt()
		if err != nil {
			return nil, 0, nil // NaN or an infinity
		}
		return c, e, nil
	}
	return nil, 0, mongoerr.New(mongoerr.TypeMismatch, "cannot add a %T", v)
}

func toFloat(v any) float64 {
	switch t := v.(type) {
	case int32:
		return float64(t)
	case int64:
		return float64(t)
	case float64:
		return t
	case partialfilter.Decimal128:
		return t.Float64()
	}
	return math.NaN()
}
