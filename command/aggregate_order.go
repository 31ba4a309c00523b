package command

import (
	"maps"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/command/pipeline"
	"github.com/hourglassdb/hourglass/document"
)

// setOrder is the order of the fields a stage sets, from its spec: the
// names in the spec's order, the sub-fields a dotted name or a document of
// fields sets, and where a value brings an order of its own (a {$literal:
// <document>} replaces the field's value; a field path copies another
// field's, and its order).
type setOrder struct {
	keys     []string
	sub      map[string]*setOrder
	literal  map[string]*document.Order
	copyFrom map[string]string // the path ("a.b") a field's value is copied from
}

func (s *setOrder) child(k string) *setOrder {
	if s.sub == nil {
		s.sub = map[string]*setOrder{}
	}
	c := s.sub[k]
	if c == nil {
		c = &setOrder{}
		s.sub[k] = c
	}
	return c
}

// specOrder reads the order of the fields a stage's spec sets: the keys of
// arg's document sub (of arg itself when sub is ""), dotted names as
// sub-fields; with values, a document value sets sub-fields and a literal
// or a field path brings its value's order ($set, $addFields), without,
// the values are the stage's own (a window function, a fill method).
func specOrder(arg bsoncore.Value, sub string, values bool) *setOrder {
	d, ok := arg.DocumentOK()
	if ok && sub != "" {
		d, ok = d.Lookup(sub).DocumentOK()
	}
	if !ok {
		return nil
	}
	return docSetOrder(d, values)
}

func docSetOrder(d bsoncore.Document, values bool) *setOrder {
	s := &setOrder{}
	elems, _ := d.Elements()
	for _, e := range elems {
		node := s
		parts := strings.Split(e.Key(), ".")
		for _, p := range parts[:len(parts)-1] {
			if !slices.Contains(node.keys, p) {
				node.keys = append(node.keys, p)
			}
			node = node.child(p)
		}
		leaf := parts[len(parts)-1]
		if !slices.Contains(node.keys, leaf) {
			node.keys = append(node.keys, leaf)
		}
		if !values {
			continue
		}
		v := e.Value()
		if path, ok := v.StringValueOK(); ok && strings.HasPrefix(path, "$") && !strings.HasPrefix(path, "$$") {
			if node.copyFrom == nil {
				node.copyFrom = map[string]string{}
			}
			node.copyFrom[leaf] = path[1:]
			continue
		}
		vd, ok := v.DocumentOK()
		if !ok {
			continue
		}
		first, err := vd.IndexErr(0)
		switch {
		case err != nil:
		case first.Key() == "$literal":
			if lit, ok := first.Value().DocumentOK(); ok {
				if node.literal == nil {
					node.literal = map[string]*document.Order{}
				}
				node.literal[leaf] = bsonOrder(lit)
			}
		case !strings.HasPrefix(first.Key(), "$"):
			mergeSpec(node.child(leaf), docSetOrder(vd, true))
		}
	}
	return s
}

// mergeSpec adds b's fields to a's.
func mergeSpec(a, b *setOrder) {
	for _, k := range b.keys {
		if !slices.Contains(a.keys, k) {
			a.keys = append(a.keys, k)
		}
	}
	for k, bs := range b.sub {
		mergeSpec(a.child(k), bs)
	}
	for k, o := range b.literal {
		if a.literal == nil {
			a.literal = map[string]*document.Order{}
		}
		a.literal[k] = o
	}
	for k, p := range b.copyFrom {
		if a.copyFrom == nil {
			a.copyFrom = map[string]string{}
		}
		a.copyFrom[k] = p
	}
}

// bsonOrder is the field order of a BSON document, at every depth.
func bsonOrder(d bsoncore.Document) *document.Order {
	o := &document.Order{}
	elems, _ := d.Elements()
	for _, e := range elems {
		if !slices.Contains(o.Keys, e.Key()) {
			o.Keys = append(o.Keys, e.Key())
		}
		if sd, ok := e.Value().DocumentOK(); ok {
			if o.Sub == nil {
				o.Sub = map[string]*document.Order{}
			}
			o.Sub[e.Key()] = bsonOrder(sd)
		}
	}
	return o
}

// addedFieldOrder adds the fields a stage set (s) to the field order of
// each document of it that has one: MongoDB writes the fields a stage
// adds after the others, in its spec's order, at every depth, and a
// value the stage copies or sets whole in its own order.
func addedFieldOrder(it pipeline.Iterator, s *setOrder) pipeline.Iterator {
	return fieldOrderIter{in: it, set: s}
}

type fieldOrderIter struct {
	in  pipeline.Iterator
	set *setOrder
}

func (f fieldOrderIter) Next() (pipeline.Doc, error) {
	d, err := f.in.Next()
	if err != nil || d == nil || f.set == nil {
		return d, err
	}
	order, ok := d[fieldOrderKey].(*document.Order)
	if !ok {
		return d, nil
	}
	d[fieldOrderKey] = applySet(order, f.set, d, order)
	return d, nil
}

// applySet returns o (the order of m) with the fields s sets that m holds:
// a copy, as an order may be shared by several documents. root is the
// order of the whole document (a copied field's order is read there).
func applySet(o *document.Order, s *setOrder, m map[string]any, root *document.Order) *document.Order {
	c := &document.Order{}
	if o != nil {
		*c = *o
	}
	c.Keys = slices.Clip(c.Keys)
	for _, k := range s.keys {
		if _, has := m[k]; has && !slices.Contains(c.Keys, k) {
			c.Keys = append(c.Keys, k)
		}
	}
	copied := false
	setSub := func(k string, so *document.Order) {
		if !copied {
			sub := make(map[string]*document.Order, len(c.Sub)+1)
			maps.Copy(sub, c.Sub)
			c.Sub, copied = sub, true
		}
		if so == nil {
			delete(c.Sub, k)
		} else {
			c.Sub[k] = so
		}
	}
	for k, lit := range s.literal {
		setSub(k, lit)
	}
	for k, path := range s.copyFrom {
		setSub(k, orderAt(root, path))
	}
	for k, ss := range s.sub {
		if sm, ok := m[k].(map[string]any); ok {
			setSub(k, applySet(c.Child(k), ss, sm, root))
		}
	}
	return c
}

// orderAt is the order of the value at path in a document of order o.
func orderAt(o *document.Order, path string) *document.Order {
	for part := range strings.SplitSeq(path, ".") {
		o = o.Child(part)
	}
	return o
}
