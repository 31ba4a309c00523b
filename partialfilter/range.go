package partialfilter

// Range is an interval of values of one path, within one type bracket
// (numbers, strings, booleans or dates). The zero Range is unbounded: it
// contains every value, including missing and null. A bounded Range only
// contains values of its bounds' bracket.
type Range struct {
	Min, Max                   any
	MinInclusive, MaxInclusive bool
	HasMin, HasMax             bool
	// Empty means no value satisfies the conditions (contradictory bounds
	// or bounds of different brackets).
	Empty bool
}

// Contains reports whether v (nil: null or missing) lies in r. NaN lies in
// no bounded range, as it satisfies no comparison with a number.
func (r Range) Contains(v any) bool {
	if r.Empty {
		return false
	}
	if !r.HasMin && !r.HasMax {
		return true
	}
	b := r.Min
	if !r.HasMin {
		b = r.Max
	}
	if rank(v) != rank(b) || isNaN(v) {
		return false
	}
	if r.HasMin {
		c := Compare(v, r.Min)
		if c < 0 || c == 0 && !r.MinInclusive {
			return false
		}
	}
	if r.HasMax {
		c := Compare(v, r.Max)
		if c > 0 || c == 0 && !r.MaxInclusive {
			return false
		}
	}
	return true
}

// rangeable reports whether v can bound a Range exactly: a number other than
// NaN, a string, a boolean or a date. null (which also matches missing),
// arrays and objects (which interact with array traversal) cannot.
func rangeable(v any) bool {
	switch rank(v) {
	case rankNumber:
		return !isNaN(v)
	case rankString, rankOID, rankBool, rankDate:
		return true
	}
	return false
}

// rangeTerm reports whether n is a single comparison on path with a
// rangeable operand.
func rangeTerm(n *node, path string) bool {
	switch n.op {
	case opEq, opGt, opGte, opLt, opLte:
		return n.path == path && rangeable(n.val)
	}
	return false
}

// Range returns the interval of values of path implied by the top-level
// conjuncts: $eq, $gt, $gte, $lt and $lte with a number, string, boolean or
// date on exactly that path, intersected; an $in of such values of one
// bracket narrows it to [least, greatest]. Other conjuncts are ignored, so
// every matching document's value lies in the range, provided the path holds
// a single value, not an array (true of a time-series timeField).
//
// exact reports whether checking the range is the same as evaluating every
// conjunct that touches path, its parents or its sub-paths: true when all of
// them are comparisons of the kind above (and when there are none).
func (f *Filter) Range(path string) (r Range, exact bool) {
	exact = true
	if f.IsEmpty() {
		return r, true
	}
	for _, n := range f.root.conjuncts(nil) {
		if rangeTerm(n, path) {
			switch n.op {
			case opEq:
				r.narrowMin(n.val, true)
				r.narrowMax(n.val, true)
			case opGt, opGte:
				r.narrowMin(n.val, n.op == opGte)
			case opLt, opLte:
				r.narrowMax(n.val, n.op == opLte)
			}
			continue
		}
		if touches(n, path) {
			exact = false
			if n.op == opIn && n.path == path && n.res == nil && len(n.list) > 0 {
				lo, hi, ok := inBounds(n.list)
				if ok {
					r.narrowMin(lo, true)
					r.narrowMax(hi, true)
				}
			}
		}
	}
	r.settle()
	return r, exact
}

// touches reports whether n refers to path, a parent of it or a sub-path.
func touches(n *node, path string) bool {
	set := map[string]struct{}{}
	n.paths(set)
	for p := range set {
		if underPath(p, path) || underPath(path, p) {
			return true
		}
	}
	return false
}

func inBounds(list []any) (lo, hi any, ok bool) {
	for i, v := range list {
		if !rangeable(v) || rank(v) != rank(list[0]) {
			return nil, nil, false
		}
		if i == 0 || Compare(v, lo) < 0 {
			lo = v
		}
		if i == 0 || Compare(v, hi) > 0 {
			hi = v
		}
	}
	return lo, hi, true
}

func (r *Range) bracketClash(v any) bool {
	switch {
	case r.HasMin:
		return rank(r.Min) != rank(v)
	case r.HasMax:
		return rank(r.Max) != rank(v)
	}
	return false
}

func (r *Range) narrowMin(v any, incl bool) {
	if r.bracketClash(v) {
		r.Empty = true
		return
	}
	if !r.HasMin {
		r.Min, r.MinInclusive, r.HasMin = v, incl, true
		return
	}
	c := Compare(v, r.Min)
	if c > 0 || c == 0 && !incl {
		r.Min, r.MinInclusive = v, incl
	}
}

func (r *Range) narrowMax(v any, incl bool) {
	if r.bracketClash(v) {
		r.Empty = true
		return
	}
	if !r.HasMax {
		r.Max, r.MaxInclusive, r.HasMax = v, incl, true
		return
	}
	c := Compare(v, r.Max)
	if c < 0 || c == 0 && !incl {
		r.Max, r.MaxInclusive = v, incl
	}
}

func (r *Range) settle() {
	if r.Empty || !r.HasMin || !r.HasMax {
		return
	}
	c := Compare(r.Min, r.Max)
	if c > 0 || c == 0 && !(r.MinInclusive && r.MaxInclusive) {
		r.Empty = true
	}
}
