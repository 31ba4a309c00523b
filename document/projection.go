package document

import (
	"strings"

	"github.com/hourglassdb/hourglass/partialfilter"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// Projection selects the fields of returned documents: an inclusion
// ({"a": 1, "b.c": 1}, with _id unless "_id": 0) or an exclusion
// ({"a": 0}). A nil *Projection returns documents whole.
type Projection struct {
	include bool
	paths   [][]string
	noID    bool
}

// ParseProjection reads a projection document. Values are 1, 0, true or
// false; inclusion and exclusion cannot be mixed except for _id (BadValue).
func ParseProjection(raw map[string]any) (*Projection, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	p := &Projection{}
	seenInc, seenExc := false, false
	for k, v := range raw {
		var on bool
		switch t := v.(type) {
		case bool:
			on = t
		case float64:
			on = t != 0
		case int64:
			on = t != 0
		case int32:
			on = t != 0
		case partialfilter.Decimal128:
			on = t.Float64() != 0
		default:
			if n, ok := v.(interface{ Float64() (float64, error) }); ok {
				f, err := n.Float64()
				if err == nil {
					on = f != 0
					break
				}
			}
			return nil, mongoerr.New(mongoerr.BadValue, "projection of %q: want 1, 0, true or false", k)
		}
		if k == "" || strings.HasPrefix(k, "$") || strings.Contains(k, "..") || strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") {
			return nil, mongoerr.New(mongoerr.BadValue, "projection: invalid field path %.40q", k)
		}
		if k == "_id" {
			p.noID = !on
			if on {
				p.paths = append(p.paths, []string{"_id"})
			}
			continue
		}
		if on {
			seenInc = true
		} else {
			seenExc = true
		}
		p.paths = append(p.paths, strings.Split(k, "."))
	}
	if seenInc && seenExc {
		return nil, mongoerr.New(mongoerr.BadValue, "a projection cannot mix inclusion and exclusion (except for _id)")
	}
	p.include = seenInc || (!seenExc && !p.noID)
	if !p.include && p.noID {
		p.paths = append(p.paths, []string{"_id"})
	}
	return p, nil
}

// Apply returns the projected document. doc is not modified; the result
// may share values with it.
func (p *Projection) Apply(doc Doc) Doc {
	if p == nil {
		return doc
	}
	if !p.include {
		out := shallowCopy(doc)
		for _, path := range p.paths {
			exclude(out, path)
		}
		return out
	}
	out := Doc{}
	if id, ok := doc["_id"]; ok && !p.noID {
		out["_id"] = id
	}
	for _, path := range p.paths {
		include(out, doc, path)
	}
	return out
}

func shallowCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// exclude removes path from out, copying the sub-documents it changes.
func exclude(out map[string]any, path []string) {
	if len(path) == 1 {
		delete(out, path[0])
		return
	}
	switch sub := out[path[0]].(type) {
	case map[string]any:
		c := shallowCopy(sub)
		exclude(c, path[1:])
		out[path[0]] = c
	case []any:
		c := make([]any, len(sub))
		for i, e := range sub {
			if m, ok := e.(map[string]any); ok {
				mc := shallowCopy(m)
				exclude(mc, path[1:])
				c[i] = mc
			} else {
				c[i] = e
			}
		}
		out[path[0]] = c
	}
}

// include copies path from src into out; arrays of documents keep the
// projected field of each document element, as MongoDB does.
func include(out, src map[string]any, path []string) {
	v, ok := src[path[0]]
	if !ok {
		return
	}
	if len(path) == 1 {
		out[path[0]] = v
		return
	}
	switch sub := v.(type) {
	case map[string]any:
		dst, _ := out[path[0]].(map[string]any)
		if dst == nil {
			dst = map[string]any{}
		}
		include(dst, sub, path[1:])
		out[path[0]] = dst
	case []any:
		dst, _ := out[path[0]].([]any)
		if dst == nil {
			dst = make([]any, 0, len(sub))
			for _, e := range sub {
				if _, isDoc := e.(map[string]any); isDoc {
					dst = append(dst, map[string]any{})
				}
			}
		}
		j := 0
		for _, e := range sub {
			if m, isDoc := e.(map[string]any); isDoc {
				include(dst[j].(map[string]any), m, path[1:])
				j++
			}
		}
		out[path[0]] = dst
	}
}
