package partialfilter

import "strconv"

// match evaluates a filter-level node against a document.
func (n *node) match(doc map[string]any) bool {
	switch n.op {
	case opAnd:
		for _, k := range n.kids {
			if !k.match(doc) {
				return false
			}
		}
		return true
	case opOr:
		for _, k := range n.kids {
			if k.match(doc) {
				return true
			}
		}
		return false
	case opNor:
		for _, k := range n.kids {
			if k.match(doc) {
				return false
			}
		}
		return true
	case opNot:
		for _, k := range n.kids {
			if !k.match(doc) {
				return true
			}
		}
		return false
	case opAll:
		if len(n.kids) == 0 {
			return false
		}
		for _, k := range n.kids {
			if !k.match(doc) {
				return false
			}
		}
		return true
	}
	return n.matchPath(doc, n.parts)
}

// traversesLeafArrays reports whether n is tried on each element of an array
// at the end of its path (and then on the array itself), or only on the
// array, as $size and $elemMatch are.
func (n *node) traversesLeafArrays() bool {
	return n.op != opSize && n.op != opElemMatch
}

// matchPath reports whether any value the path parts reach from doc satisfies
// n, following MongoDB's rules: an array met before the end of the path is
// entered (each element document is searched for the rest of the path, and a
// numeric component also selects an element by position); an array at the
// end yields each element and then itself; a missing field yields one
// missing value.
func (n *node) matchPath(doc map[string]any, parts []string) bool {
	cur := doc
	for i, p := range parts {
		v, ok := cur[p]
		if !ok {
			return n.matchElem(nil, false)
		}
		if i == len(parts)-1 {
			if arr, ok := v.([]any); ok && n.traversesLeafArrays() {
				for _, e := range arr {
					if n.matchElem(e, true) {
						return true
					}
				}
			}
			return n.matchElem(v, true)
		}
		switch t := v.(type) {
		case map[string]any:
			cur = t
		case []any:
			return n.matchArray(t, parts[i+1:])
		default:
			return n.matchElem(nil, false)
		}
	}
	// An empty path (value-form $elemMatch kids) names the value itself; it
	// never reaches here from a document.
	return false
}

// matchArray searches the elements of arr for the rest of a path (rest is
// never empty).
func (n *node) matchArray(arr []any, rest []string) bool {
	idx := -1
	if isIndex(rest[0]) {
		if i, err := strconv.Atoi(rest[0]); err == nil {
			idx = i
		}
	}
	for j, e := range arr {
		m, isDoc := e.(map[string]any)
		if isDoc && n.matchPath(m, rest) {
			return true
		}
		if j != idx {
			continue
		}
		if len(rest) == 1 {
			if n.matchElem(e, true) {
				return true
			}
			continue
		}
		switch t := e.(type) {
		case []any:
			if n.matchArray(t, rest[1:]) {
				return true
			}
		case map[string]any:
			if n.matchPath(t, rest[1:]) {
				return true
			}
		}
	}
	return false
}

// isIndex reports whether s is an array position as MongoDB spells it: all
// digits, no leading zero (so "01" is a field name, not position 1).
func isIndex(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// matchElem reports whether one value (present false: missing) satisfies the
// leaf node n.
func (n *node) matchElem(v any, present bool) bool {
	switch n.op {
	case opEq, opGt, opGte, opLt, opLte:
		return compareOp(n.op, v, present, n.val)
	case opIn:
		for i, x := range n.list {
			if n.res != nil && n.res[i] != nil {
				if s, ok := v.(string); ok && present && n.res[i].MatchString(s) {
					return true
				}
				continue
			}
			if compareOp(opEq, v, present, x) {
				return true
			}
		}
		return false
	case opExists:
		return present
	case opType:
		if !present {
			return false
		}
		for _, t := range n.types {
			if hasType(v, t) {
				return true
			}
		}
		return false
	case opRegex:
		switch t := v.(type) {
		case string:
			return present && n.re.MatchString(t)
		case Regex:
			return t == n.rx
		}
		return false
	case opSize:
		arr, ok := v.([]any)
		return ok && int64(len(arr)) == n.size
	case opElemMatch:
		arr, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range arr {
			if n.sub != nil {
				if m, ok := e.(map[string]any); ok && n.sub.match(m) {
					return true
				}
				continue
			}
			if n.allKidsElem(e) {
				return true
			}
		}
		return false
	case opNot:
		return present && !n.allKidsElem(v) || !present && !n.allKidsMissing()
	case opAll:
		return len(n.kids) > 0 && n.allKidsElem(v)
	}
	return false
}

func (n *node) allKidsElem(v any) bool {
	for _, k := range n.kids {
		if !k.matchElem(v, true) {
			return false
		}
	}
	return true
}

func (n *node) allKidsMissing() bool {
	for _, k := range n.kids {
		if !k.matchElem(nil, false) {
			return false
		}
	}
	return true
}

// compareOp applies a comparison operator to a value (present false:
// missing) and a literal, as MongoDB does: values of different type brackets
// never match, except that missing equals null; NaN equals NaN and fails
// every other comparison.
func compareOp(o op, v any, present bool, rhs any) bool {
	if !present {
		v = nil
	}
	if rank(v) != rank(rhs) {
		return false
	}
	if o != opEq && (isNaN(v) || isNaN(rhs)) {
		both := isNaN(v) && isNaN(rhs)
		return both && (o == opGte || o == opLte)
	}
	c := Compare(v, rhs)
	switch o {
	case opEq:
		return c == 0
	case opGt:
		return c > 0
	case opGte:
		return c >= 0
	case opLt:
		return c < 0
	case opLte:
		return c <= 0
	}
	return false
}
