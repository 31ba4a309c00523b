package pipeline

import (
	"strings"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// MongoDB's codes of $addFields, $set and $unset.
const (
	codeDollarField     mongoerr.Code = 16410
	codePathCollision   mongoerr.Code = 31250
	codeUnsetNotString  mongoerr.Code = 31002
	codeUnsetEmpty      mongoerr.Code = 31119
	codeUnsetNonStrings mongoerr.Code = 31120
)

// SetField is one field of $set: its (dotted) path and its value.
type SetField struct {
	Path  string
	Value Expr
}

// ParseSet reads the argument of $set or $addFields (name): fields whose
// values are field paths ("$a.b"), constants or {$literal: ...}; a
// document of such fields sets sub-fields. Other expressions are
// NotImplemented.
func ParseSet(name string, arg any) ([]SetField, error) {
	m, ok := arg.(map[string]any)
	if !ok {
		return nil, mongoerr.New(40272, "%s specification stage must be an object, got %T", name, arg)
	}
	var out []SetField
	if err := parseSetFields(name, "", m, &out); err != nil {
		return nil, err
	}
	for i, a := range out {
		for _, b := range out[i+1:] {
			if a.Path == b.Path || strings.HasPrefix(b.Path, a.Path+".") || strings.HasPrefix(a.Path, b.Path+".") {
				return nil, mongoerr.New(codePathCollision, "Invalid %s :: caused by :: Path collision at %s", name, b.Path)
			}
		}
	}
	return out, nil
}

func parseSetFields(name, prefix string, m map[string]any, out *[]SetField) error {
	for _, k := range sortedKeys(m) {
		if strings.HasPrefix(k, "$") {
			return mongoerr.New(codeDollarField, "%s: field names may not start with '$': '%s'", name, k)
		}
		if err := checkPath(k); err != nil {
			return err
		}
		path := prefix + k
		v := m[k]
		if sub, ok := v.(map[string]any); ok {
			if _, lit := sub["$literal"]; !(lit && len(sub) == 1) {
				if len(sub) == 0 {
					return mongoerr.New(mongoerr.NotImplemented, "%s of the empty document '%s' is not supported by Hourglass", name, path)
				}
				for sk := range sub {
					if strings.HasPrefix(sk, "$") {
						return mongoerr.New(mongoerr.NotImplemented, "%s of the expression %s at '%s' is not supported by Hourglass; only field paths, constants and $literal", name, sk, path)
					}
				}
				if err := parseSetFields(name, path+".", sub, out); err != nil {
					return err
				}
				continue
			}
		}
		if arr, ok := v.([]any); ok {
			for _, e := range arr {
				if s, ok := e.(string); ok && strings.HasPrefix(s, "$") {
					return mongoerr.New(mongoerr.NotImplemented, "%s of an array holding the expression %q at '%s' is not supported by Hourglass", name, s, path)
				}
				if _, ok := e.(map[string]any); ok {
					return mongoerr.New(mongoerr.NotImplemented, "%s of an array holding a document at '%s' is not supported by Hourglass", name, path)
				}
			}
		}
		e, err := parseExpr(name, v)
		if err != nil {
			return mongoerr.New(mongoerr.NotImplemented, "%s of '%s': %v", name, path, err)
		}
		*out = append(*out, SetField{Path: path, Value: e})
	}
	return nil
}

// Set sets fields in each document of in, in order: a field path that is
// missing leaves the field out (removes it), as in MongoDB. Each value
// is read from the input document.
func Set(in Iterator, fields []SetField) Iterator {
	return mapIter{in: in, f: func(d Doc) Doc {
		out := d
		for _, f := range fields {
			v, ok := f.Value.eval(d)
			if ok {
				out = withField(out, f.Path, v)
			} else {
				out = withoutField(out, f.Path)
			}
		}
		return out
	}}
}

// ParseUnset reads the argument of $unset: a field path or a non-empty
// list of them.
func ParseUnset(arg any) ([]string, error) {
	var paths []string
	switch x := arg.(type) {
	case string:
		paths = []string{x}
	case []any:
		if len(x) == 0 {
			return nil, mongoerr.New(codeUnsetEmpty, "$unset specification must be a string or an array with at least one field")
		}
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, mongoerr.New(codeUnsetNonStrings, "$unset specification must be a string or an array containing only string values")
			}
			paths = append(paths, s)
		}
	default:
		return nil, mongoerr.New(codeUnsetNotString, "$unset specification must be a string or an array")
	}
	for _, p := range paths {
		if strings.HasPrefix(p, "$") {
			return nil, mongoerr.New(codeDollarField, "$unset: field paths may not start with '$': '%s'", p)
		}
		if err := checkPath(p); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// Unset removes paths from each document of in.
func Unset(in Iterator, paths []string) Iterator {
	return mapIter{in: in, f: func(d Doc) Doc {
		for _, p := range paths {
			d = withoutField(d, p)
		}
		return d
	}}
}

// mapIter maps each document of in.
type mapIter struct {
	in Iterator
	f  func(Doc) Doc
}

func (m mapIter) Next() (Doc, error) {
	d, err := m.in.Next()
	if err != nil || d == nil {
		return nil, err
	}
	return m.f(d), nil
}
