package pipeline

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// deepCopy copies the maps of a document.
func deepCopy(v any) any {
	if m, ok := v.(map[string]any); ok {
		out := map[string]any{}
		for k, e := range m {
			out[k] = deepCopy(e)
		}
		return out
	}
	return v
}

// loopSet sets path in d (mutating it), making documents on the way.
func loopSet(d map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := d[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			d[p] = sub
		}
		d = sub
	}
	d[parts[len(parts)-1]] = v
}

// loopDelete removes path from d (mutating it).
func loopDelete(d map[string]any, path string) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := d[p].(map[string]any)
		if !ok {
			return
		}
		d = sub
	}
	delete(d, parts[len(parts)-1])
}

func randomFieldDoc(r *rand.Rand) Doc {
	d := Doc{"_id": int32(r.IntN(100))}
	for _, k := range []string{"a", "b", "n"} {
		switch r.IntN(4) {
		case 0:
		case 1:
			d[k] = int32(r.IntN(10))
		case 2:
			d[k] = map[string]any{"y": "s", "z": float64(r.IntN(5))}
		default:
			d[k] = "t"
		}
	}
	return d
}

// TestSetAndUnsetMatchLoop compares $set and $unset with loops that
// mutate copies of random documents.
func TestSetAndUnsetMatchLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	paths := []string{"a", "b", "x", "n.y", "n.z", "a.q", "m.k"}
	for iter := range 2000 {
		var docs []Doc
		for range r.IntN(10) {
			docs = append(docs, randomFieldDoc(r))
		}
		spec := map[string]any{}
		for range 1 + r.IntN(3) {
			p := paths[r.IntN(len(paths))]
			if strings.Contains(p, ".") && r.IntN(2) == 0 {
				p, _, _ = strings.Cut(p, ".")
			}
			switch r.IntN(4) {
			case 0:
				spec[p] = "$" + paths[r.IntN(len(paths))]
			case 1:
				spec[p] = int32(r.IntN(9))
			case 2:
				spec[p] = map[string]any{"$literal": "$notAPath"}
			default:
				spec[p] = nil
			}
		}
		fields, err := ParseSet("$set", spec)
		if err != nil {
			continue // a conflicting path: not this test's business
		}
		unset := []string{paths[r.IntN(len(paths))]}
		var want []Doc
		for _, d := range docs {
			w := deepCopy(d).(map[string]any)
			for _, f := range fields {
				v, ok := f.Value.Const, true
				if f.Value.Path != "" {
					v, ok = Lookup(d, f.Value.Path)
				}
				if ok {
					loopSet(w, f.Path, deepCopy(v))
				} else {
					loopDelete(w, f.Path)
				}
			}
			loopDelete(w, unset[0])
			want = append(want, w)
		}
		before := fmt.Sprint(docs)
		got, err := Collect(Unset(Set(Slice(docs), fields), unset))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("iteration %d: $set %v then $unset %v of %v:\n got %v\nwant %v", iter, spec, unset, docs, got, want)
		}
		if fmt.Sprint(docs) != before {
			t.Fatalf("iteration %d: the input documents changed", iter)
		}
	}
}

func TestParseSetAndUnsetRefusals(t *testing.T) {
	for _, c := range []struct {
		arg  any
		code mongoerr.Code
	}{
		{"x", 40272},
		{map[string]any{"$a": 1}, codeDollarField},
		{map[string]any{"a": map[string]any{"$add": []any{1, 2}}}, mongoerr.NotImplemented},
		{map[string]any{"a": "$$NOW"}, mongoerr.NotImplemented},
		{map[string]any{"a": []any{"$b"}}, mongoerr.NotImplemented},
		{map[string]any{"n": int32(1), "n.y": int32(2)}, codePathCollision},
		{map[string]any{"n": map[string]any{"y": int32(1)}, "n.y": int32(2)}, codePathCollision},
	} {
		_, err := ParseSet("$set", c.arg)
		var me *mongoerr.Error
		if !errors.As(err, &me) || me.Code != c.code {
			t.Errorf("$set %v: %v, want code %d", c.arg, err, c.code)
		}
	}
	for _, c := range []struct {
		arg  any
		code mongoerr.Code
	}{
		{int32(1), codeUnsetNotString}, {[]any{}, codeUnsetEmpty}, {[]any{"a", int32(1)}, codeUnsetNonStrings}, {"$a", codeDollarField},
	} {
		_, err := ParseUnset(c.arg)
		var me *mongoerr.Error
		if !errors.As(err, &me) || me.Code != c.code {
			t.Errorf("$unset %v: %v, want code %d", c.arg, err, c.code)
		}
	}
}
