package partialfilter

import (
	"math"
	"regexp"
	"strings"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// MaxDepth is the deepest nesting of $and, $or, $nor, $not and $elemMatch
// Parse accepts; deeper filters are refused with BadValue. MongoDB uses the
// same limit (100) to keep recursive evaluation off the end of the stack.
const MaxDepth = 100

func badValue(format string, args ...any) error {
	return mongoerr.New(mongoerr.BadValue, format, args...)
}

// isOperatorDoc reports whether v is an object of operators
// ({"$gt": 1, ...}) rather than a literal sub-document.
func isOperatorDoc(m map[string]any) bool {
	for k := range m {
		if strings.HasPrefix(k, "$") {
			return true
		}
	}
	return false
}

// parseDoc parses a filter document into its conjuncts.
func parseDoc(m map[string]any, depth int) ([]*node, error) {
	if depth > MaxDepth {
		return nil, badValue("filter exceeds the nesting depth limit of %d", MaxDepth)
	}
	var out []*node
	for _, k := range sortedKeys(m) {
		v := m[k]
		if !strings.HasPrefix(k, "$") {
			ns, err := parseField(k, v, depth)
			if err != nil {
				return nil, err
			}
			out = append(out, ns...)
			continue
		}
		var o op
		switch k {
		case "$and":
			o = opAnd
		case "$or":
			o = opOr
		case "$nor":
			o = opNor
		case "$comment":
			continue
		default:
			return nil, badValue("unknown top level operator: %s", k)
		}
		arr, ok := v.([]any)
		if !ok {
			return nil, badValue("%s must be an array", k)
		}
		if len(arr) == 0 {
			return nil, badValue("$and/$or/$nor must be a nonempty array")
		}
		n := &node{op: o}
		for _, e := range arr {
			em, ok := e.(map[string]any)
			if !ok {
				return nil, badValue("$or/$and/$nor entries need to be full objects")
			}
			kids, err := parseDoc(em, depth+1)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, andOf(kids))
		}
		out = append(out, n)
	}
	return out, nil
}

// andOf returns the single node of kids, or an opAnd over them.
func andOf(kids []*node) *node {
	if len(kids) == 1 {
		return kids[0]
	}
	return &node{op: opAnd, kids: kids}
}

// parseField parses the condition on one field path.
func parseField(path string, v any, depth int) ([]*node, error) {
	switch t := v.(type) {
	case Regex:
		n, err := newRegex(path, t.Pattern, t.Options)
		if err != nil {
			return nil, err
		}
		return []*node{n}, nil
	case map[string]any:
		if isOperatorDoc(t) {
			return parseOps(path, t, depth)
		}
	}
	n := newLeaf(opEq, path)
	n.val = v
	return []*node{n}, nil
}

// parseOps parses an operator document on path into one node per operator.
func parseOps(path string, m map[string]any, depth int) ([]*node, error) {
	if depth > MaxDepth {
		return nil, badValue("filter exceeds the nesting depth limit of %d", MaxDepth)
	}
	var out []*node
	keys := sortedKeys(m)
	for _, k := range keys {
		v := m[k]
		var n *node
		var err error
		switch k {
		case "$eq", "$gt", "$gte", "$lt", "$lte":
			n = newLeaf(map[string]op{"$eq": opEq, "$gt": opGt, "$gte": opGte, "$lt": opLt, "$lte": opLte}[k], path)
			n.val = v
		case "$ne":
			if _, isRe := v.(Regex); isRe {
				return nil, badValue("Can't have regex as arg to $ne (field '%s')", path)
			}
			eq := newLeaf(opEq, path)
			eq.val = v
			n = newLeaf(opNot, path)
			n.src, n.kids = "$ne", []*node{eq}
		case "$in", "$nin":
			n, err = parseIn(path, k, v)
			if err == nil && k == "$nin" {
				n = &node{op: opNot, path: path, parts: n.parts, src: "$nin", kids: []*node{n}}
			}
		case "$exists":
			n = newLeaf(opExists, path)
			if !truthy(v) {
				n = &node{op: opNot, path: path, parts: n.parts, src: "$exists", kids: []*node{n}}
			}
		case "$type":
			n, err = parseType(path, v)
		case "$regex":
			n, err = parseRegexOp(path, m)
		case "$options":
			if !has(m, "$regex") {
				return nil, badValue("$options needs a $regex (field '%s')", path)
			}
			continue
		case "$not":
			n, err = parseNot(path, v, depth)
		case "$size":
			n, err = parseSize(path, v)
		case "$all":
			n, err = parseAll(path, v, depth)
		case "$elemMatch":
			n, err = parseElemMatch(path, v, depth)
		case "$mod", "$bitsAllSet", "$bitsAllClear", "$bitsAnySet", "$bitsAnyClear",
			"$geoWithin", "$geoIntersects", "$near", "$nearSphere", "$within", "$text", "$where", "$expr":
			return nil, badValue("operator not supported: %s (field '%s')", k, path)
		default:
			return nil, badValue("unknown operator: %s (field '%s')", k, path)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func has(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// truthy is MongoDB's trueValue: false, 0, null and missing are false.
func truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	}
	if rank(v) == rankNumber {
		i, f, isInt := number(v)
		if isInt {
			return i != 0
		}
		return f != 0
	}
	return true
}

func parseIn(path, name string, v any) (*node, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, badValue("%s needs an array (field '%s')", name, path)
	}
	n := newLeaf(opIn, path)
	n.list = arr
	for i, e := range arr {
		switch t := e.(type) {
		case map[string]any:
			if isOperatorDoc(t) {
				return nil, badValue("cannot nest $ under %s (field '%s')", name, path)
			}
		case Regex:
			re, err := compileRegex(path, t.Pattern, t.Options)
			if err != nil {
				return nil, err
			}
			if n.res == nil {
				n.res = make([]*regexp.Regexp, len(arr))
			}
			n.res[i] = re
		}
	}
	return n, nil
}

func parseType(path string, v any) (*node, error) {
	n := newLeaf(opType, path)
	one := func(e any) error {
		switch t := e.(type) {
		case string:
			c, ok := typeNames[t]
			if !ok {
				return badValue("unknown type name alias: %s (field '%s')", t, path)
			}
			n.types = append(n.types, c)
			return nil
		}
		if rank(e) == rankNumber {
			i, f, isInt := number(e)
			if !isInt {
				if f != math.Trunc(f) || f < -1 || f > 127 {
					return badValue("invalid numerical type code: %v (field '%s')", f, path)
				}
				i = int64(f)
			}
			if !validTypeCode(i) {
				return badValue("invalid numerical type code: %d (field '%s')", i, path)
			}
			n.types = append(n.types, typeCode(i))
			return nil
		}
		return badValue("type must be represented as a number or a string (field '%s')", path)
	}
	if arr, ok := v.([]any); ok {
		if len(arr) == 0 {
			return nil, badValue("$type must match at least one type (field '%s')", path)
		}
		for _, e := range arr {
			if err := one(e); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
	return n, one(v)
}

func parseRegexOp(path string, m map[string]any) (*node, error) {
	var pattern, opts string
	switch t := m["$regex"].(type) {
	case string:
		pattern = t
	case Regex:
		if has(m, "$options") {
			return nil, badValue("options set in both $regex and $options (field '%s')", path)
		}
		pattern, opts = t.Pattern, t.Options
	default:
		return nil, badValue("$regex has to be a string (field '%s')", path)
	}
	if o, ok := m["$options"]; ok {
		s, ok := o.(string)
		if !ok {
			return nil, badValue("$options has to be a string (field '%s')", path)
		}
		opts = s
	}
	return newRegex(path, pattern, opts)
}

func newRegex(path, pattern, opts string) (*node, error) {
	re, err := compileRegex(path, pattern, opts)
	if err != nil {
		return nil, err
	}
	n := newLeaf(opRegex, path)
	n.re, n.rx = re, Regex{Pattern: pattern, Options: opts}
	return n, nil
}

// compileRegex compiles a MongoDB regex with options i, m, s and x. The
// engine is Go's RE2: PCRE-only syntax (backreferences, lookaround) is
// refused as an invalid regular expression.
func compileRegex(path, pattern, opts string) (*regexp.Regexp, error) {
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, badValue("Regular expression cannot contain an embedded null byte (field '%s')", path)
	}
	var flags string
	for _, c := range opts {
		switch c {
		case 'i', 'm', 's':
			if !strings.ContainsRune(flags, c) {
				flags += string(c)
			}
		case 'x':
			pattern = stripExtended(pattern)
		default:
			return nil, badValue("invalid flag in regex options: %c (field '%s')", c, path)
		}
	}
	if flags != "" {
		pattern = "(?" + flags + ")" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, badValue("Regular expression is invalid: %v (field '%s')", err, path)
	}
	return re, nil
}

// stripExtended removes the whitespace and #-comments the x option ignores:
// outside character classes and not escaped.
func stripExtended(p string) string {
	var b strings.Builder
	inClass, comment := false, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case comment:
			comment = c != '\n'
		case c == '\\' && i+1 < len(p):
			b.WriteByte(c)
			i++
			b.WriteByte(p[i])
		case inClass:
			inClass = c != ']'
			b.WriteByte(c)
		case c == '[':
			inClass = true
			b.WriteByte(c)
		case c == '#':
			comment = true
		case c == ' ', c == '\t', c == '\n', c == '\r', c == '\f', c == '\v':
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func parseNot(path string, v any, depth int) (*node, error) {
	n := newLeaf(opNot, path)
	switch t := v.(type) {
	case Regex:
		r, err := newRegex(path, t.Pattern, t.Options)
		if err != nil {
			return nil, err
		}
		n.kids = []*node{r}
		return n, nil
	case map[string]any:
		if len(t) == 0 {
			return nil, badValue("$not cannot be empty (field '%s')", path)
		}
		for k := range t {
			if !strings.HasPrefix(k, "$") {
				return nil, badValue("unknown operator: %s (field '%s')", k, path)
			}
		}
		kids, err := parseOps(path, t, depth+1)
		if err != nil {
			return nil, err
		}
		n.kids = kids
		return n, nil
	}
	return nil, badValue("$not needs a regex or a document (field '%s')", path)
}

func parseSize(path string, v any) (*node, error) {
	if rank(v) != rankNumber {
		return nil, badValue("$size needs a number (field '%s')", path)
	}
	i, f, isInt := number(v)
	if !isInt {
		if f != math.Trunc(f) || f != f || math.IsInf(f, 0) {
			return nil, badValue("$size must be a whole number (field '%s')", path)
		}
		if f < 0 {
			return nil, badValue("$size may not be negative (field '%s')", path)
		}
		if f > math.MaxInt32 {
			f = math.MaxInt32 + 1 // no array is that long; keep the comparison exact
		}
		i = int64(f)
	}
	if i < 0 {
		return nil, badValue("$size may not be negative (field '%s')", path)
	}
	n := newLeaf(opSize, path)
	n.size = i
	return n, nil
}

func parseAll(path string, v any, depth int) (*node, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, badValue("$all needs an array (field '%s')", path)
	}
	n := newLeaf(opAll, path)
	for _, e := range arr {
		switch t := e.(type) {
		case Regex:
			r, err := newRegex(path, t.Pattern, t.Options)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, r)
			continue
		case map[string]any:
			if em, ok := t["$elemMatch"]; ok && len(t) == 1 {
				k, err := parseElemMatch(path, em, depth+1)
				if err != nil {
					return nil, err
				}
				n.kids = append(n.kids, k)
				continue
			}
			if isOperatorDoc(t) {
				return nil, badValue("no $ expressions in $all (field '%s')", path)
			}
		}
		eq := newLeaf(opEq, path)
		eq.val = e
		n.kids = append(n.kids, eq)
	}
	return n, nil
}

func parseElemMatch(path string, v any, depth int) (*node, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badValue("$elemMatch needs an Object (field '%s')", path)
	}
	n := newLeaf(opElemMatch, path)
	if isValueElemMatch(m) {
		for k := range m {
			if !strings.HasPrefix(k, "$") {
				return nil, badValue("unknown operator: %s (field '%s')", k, path)
			}
		}
		kids, err := parseOps("", m, depth+1)
		if err != nil {
			return nil, err
		}
		n.kids = kids
		return n, nil
	}
	kids, err := parseDoc(m, depth+1)
	if err != nil {
		return nil, err
	}
	n.sub = &node{op: opAnd, kids: kids}
	return n, nil
}

// isValueElemMatch reports whether an $elemMatch argument holds operators on
// the elements themselves ({$gt: 1}) rather than a filter on element
// documents ({b: 1} or {$or: [...]}).
func isValueElemMatch(m map[string]any) bool {
	for k := range m {
		switch k {
		case "$and", "$or", "$nor", "$comment":
		default:
			if strings.HasPrefix(k, "$") {
				return true
			}
		}
	}
	return false
}
