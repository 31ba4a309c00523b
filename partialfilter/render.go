package partialfilter

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"time"
)

// String returns the filter in a canonical Extended JSON form: explicit
// operators ({"a": {"$eq": 1}}), keys sorted, $and/$or/$nor branches sorted,
// dates as {"$date": "<RFC 3339, UTC>"}, doubles always with a fraction or
// exponent (so they parse back as doubles) and NaN/Inf as {"$numberDouble": ...}.
// Filters with the same conditions written in a different order or style
// render the same, so String serves to compare index specs. ParseJSON of the
// result gives an equivalent filter. The empty filter is "{}".
func (f *Filter) String() string {
	if f.IsEmpty() {
		return "{}"
	}
	return marshal(renderAnd(f.root.conjuncts(nil)))
}

func marshal(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every rendered value is JSON-safe by construction.
		panic("partialfilter: render: " + err.Error())
	}
	return string(bytes.TrimRight(buf.Bytes(), "\n"))
}

// renderKey is the sort key of a rendered branch.
func renderKey(v any) string { return marshal(v) }

// renderAnd renders conjuncts as one filter document: conditions on a path
// merge into one operator document; a repeated operator, and a second $or or
// $nor, go into "$and".
func renderAnd(kids []*node) map[string]any {
	out := map[string]any{}
	var extra []any
	for _, k := range kids {
		if k.op == opOr || k.op == opNor {
			key := k.op.String()
			if _, dup := out[key]; dup {
				extra = append(extra, map[string]any{key: renderBranches(k.kids)})
			} else {
				out[key] = renderBranches(k.kids)
			}
			continue
		}
		ops := renderOps(k)
		pm, _ := out[k.path].(map[string]any)
		if pm == nil {
			out[k.path] = ops
			continue
		}
		clash := false
		for o := range ops {
			if _, dup := pm[o]; dup {
				clash = true
			}
		}
		if clash {
			extra = append(extra, map[string]any{k.path: ops})
			continue
		}
		for o, v := range ops {
			pm[o] = v
		}
	}
	if len(extra) > 0 {
		sortRendered(extra)
		out["$and"] = extra
	}
	return out
}

func renderBranches(kids []*node) []any {
	out := make([]any, len(kids))
	for i, k := range kids {
		out[i] = renderAnd(k.conjuncts(nil))
	}
	sortRendered(out)
	return out
}

func sortRendered(vs []any) {
	keys := make([]string, len(vs))
	for i, v := range vs {
		keys[i] = renderKey(v)
	}
	sort.Sort(byKey{vs, keys})
}

type byKey struct {
	vs   []any
	keys []string
}

func (b byKey) Len() int           { return len(b.vs) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.vs[i], b.vs[j] = b.vs[j], b.vs[i]
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
}

// renderOps renders a leaf node as its operator document.
func renderOps(n *node) map[string]any {
	switch n.op {
	case opEq, opGt, opGte, opLt, opLte:
		return map[string]any{n.op.String(): renderValue(n.val)}
	case opIn:
		return map[string]any{"$in": renderValue(n.list)}
	case opExists:
		return map[string]any{"$exists": true}
	case opType:
		ts := make([]any, len(n.types))
		for i, t := range n.types {
			ts[i] = t.name()
		}
		if len(ts) == 1 {
			return map[string]any{"$type": ts[0]}
		}
		return map[string]any{"$type": ts}
	case opRegex:
		m := map[string]any{"$regex": n.rx.Pattern}
		if n.rx.Options != "" {
			m["$options"] = n.rx.Options
		}
		return m
	case opSize:
		return map[string]any{"$size": n.size}
	case opAll:
		vs := make([]any, len(n.kids))
		for i, k := range n.kids {
			switch k.op {
			case opEq:
				vs[i] = renderValue(k.val)
			case opRegex:
				vs[i] = renderValue(k.rx)
			default:
				vs[i] = renderOps(k)
			}
		}
		return map[string]any{"$all": vs}
	case opElemMatch:
		if n.sub != nil {
			return map[string]any{"$elemMatch": renderAnd(n.sub.conjuncts(nil))}
		}
		return map[string]any{"$elemMatch": mergeOps(n.kids)}
	case opNot:
		switch n.src {
		case "$ne":
			return map[string]any{"$ne": renderValue(n.kids[0].val)}
		case "$nin":
			return map[string]any{"$nin": renderValue(n.kids[0].list)}
		case "$exists":
			return map[string]any{"$exists": false}
		}
		return map[string]any{"$not": mergeOps(n.kids)}
	}
	return map[string]any{}
}

// mergeOps renders leaf nodes on one path as one operator document; the
// parser gives at most one node per operator there.
func mergeOps(kids []*node) map[string]any {
	m := map[string]any{}
	for _, k := range kids {
		for o, v := range renderOps(k) {
			m[o] = v
		}
	}
	return m
}

// renderValue turns a value into something encoding/json writes as the
// Extended JSON that FromExtJSON reads back to the same value.
func renderValue(v any) any {
	switch t := v.(type) {
	case nil, bool, string, int32, int64, ObjectID, Decimal128, Binary:
		return t
	case time.Time:
		return map[string]any{"$date": t.UTC().Format(time.RFC3339Nano)}
	case Regex:
		return map[string]any{"$regularExpression": map[string]any{"pattern": t.Pattern, "options": t.Options}}
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = renderValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = renderValue(e)
		}
		return out
	}
	if rank(v) == rankNumber {
		i, f, isInt := number(v)
		if isInt {
			return i
		}
		switch {
		case math.IsNaN(f):
			return map[string]any{"$numberDouble": "NaN"}
		case math.IsInf(f, 1):
			return map[string]any{"$numberDouble": "Infinity"}
		case math.IsInf(f, -1):
			return map[string]any{"$numberDouble": "-Infinity"}
		}
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !bytes.ContainsAny([]byte(s), ".eE") {
			s += ".0"
		}
		return json.Number(s)
	}
	return nil
}
