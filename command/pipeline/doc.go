// Package pipeline runs aggregation stages over a stream of documents,
// below the front doors: documents in, documents out, as an Iterator.
// It holds MongoDB's window stage ($setWindowFields), the gap-filling
// stages ($fill, $densify) and the stages that shape documents ($set,
// $addFields, $unset); a door decodes a stage's
// specification into a map (model.FromBSON's values), parses it here, and
// wraps its input in the stage.
//
// Usage:
//
//	spec, err := pipeline.ParseSetWindowFields(arg)
//	...
//	it := pipeline.SetWindowFields(in, spec, pipeline.Options{Sorted: true})
//	for {
//		d, err := it.Next()
//		if err != nil || d == nil {
//			break
//		}
//		...
//	}
//
// Memory: a window stage holds the documents of the current window only
// (a document window [lo, hi] needs hi-lo+1 documents, a range window the
// documents within the range, an unbounded upper bound the rest of the
// partition), when its input arrives partition by partition in sort order
// (Options.Sorted). Otherwise it sorts its input first, within
// Options.MaxMemory.
package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/document"
)

// Doc is a document: the values of model.FromBSON (nil, bool, int32,
// int64, float64, string, time.Time, map[string]any, []any, ...).
type Doc = map[string]any

// OrderKey holds, in a document, its field order (a *document.Order),
// which a map does not keep: a door writes the fields in it, the fields
// it does not name after them. A stage that makes a document gives it
// one; an Order held there may be shared by several documents, and is
// replaced, never changed. No field is named so: field names hold no NUL
// byte.
const OrderKey = "\x00order"

// appendPath adds path ("a.b") to o: its first part to o's keys, the
// rest to the order of that sub-document, each where it is not yet.
func appendPath(o *document.Order, path string) {
	head, rest, nested := strings.Cut(path, ".")
	if !slices.Contains(o.Keys, head) {
		o.Keys = append(o.Keys, head)
	}
	if !nested {
		return
	}
	if o.Sub == nil {
		o.Sub = map[string]*document.Order{}
	}
	sub := o.Sub[head]
	if sub == nil {
		sub = &document.Order{}
		o.Sub[head] = sub
	}
	appendPath(sub, rest)
}

// Iterator yields documents. Next returns nil, nil at the end; a
// document it returns belongs to the caller.
type Iterator interface {
	Next() (Doc, error)
}

// Slice yields docs in order.
func Slice(docs []Doc) Iterator { return &sliceIter{docs: docs} }

type sliceIter struct{ docs []Doc }

func (s *sliceIter) Next() (Doc, error) {
	if len(s.docs) == 0 {
		return nil, nil
	}
	d := s.docs[0]
	s.docs = s.docs[1:]
	return d, nil
}

// Collect reads it to the end.
func Collect(it Iterator) ([]Doc, error) {
	var out []Doc
	for {
		d, err := it.Next()
		if err != nil {
			return nil, err
		}
		if d == nil {
			return out, nil
		}
		out = append(out, d)
	}
}

// Lookup returns the value at a dotted path and whether it is there.
func Lookup(d Doc, path string) (any, bool) {
	var v any = d
	for part := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[part]; !ok {
			return nil, false
		}
	}
	return v, true
}

// withField returns a copy of d with path set to v; the maps along path
// are copied, the rest is shared with d.
func withField(d Doc, path string, v any) Doc {
	out := make(Doc, len(d)+1)
	for k, x := range d {
		out[k] = x
	}
	head, rest, nested := strings.Cut(path, ".")
	if !nested {
		out[head] = v
		return out
	}
	sub, _ := out[head].(map[string]any)
	out[head] = withField(sub, rest, v)
	return out
}

// withoutField returns a copy of d without path (d itself when path is
// not there).
func withoutField(d Doc, path string) Doc {
	head, rest, nested := strings.Cut(path, ".")
	x, ok := d[head]
	if !ok {
		return d
	}
	out := make(Doc, len(d))
	for k, v := range d {
		out[k] = v
	}
	if !nested {
		delete(out, head)
		return out
	}
	if sub, ok := x.(map[string]any); ok {
		out[head] = withoutField(sub, rest)
	}
	return out
}

// Size estimates the memory a value holds, in bytes, as a stage counts
// it against Options.MaxMemory.
func Size(v any) int64 {
	switch x := v.(type) {
	case map[string]any:
		n := int64(48)
		for k, e := range x {
			n += int64(len(k)) + 16 + Size(e)
		}
		return n
	case []any:
		n := int64(24)
		for _, e := range x {
			n += Size(e)
		}
		return n
	case string:
		return int64(len(x)) + 16
	case []byte:
		return int64(len(x)) + 24
	case time.Time:
		return 24
	}
	return 16
}

// describe renders a value in a message.
func describe(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%v", v)
}
