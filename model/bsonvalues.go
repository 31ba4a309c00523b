package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// maxDepth bounds the nesting of documents and arrays converted (MongoDB's
// 100 levels of BSON nesting).
const MaxBSONDepth = 100

// FromBSON converts a validated BSON document (ValidateBSON) into the value set the engine
// and package partialfilter use: nil, bool, int32, int64, float64,
// partialfilter.Decimal128, string, time.Time (UTC, from a BSON date),
// partialfilter.ObjectID, partialfilter.Binary, partialfilter.Regex, []any
// and map[string]any. A later duplicate key replaces an earlier one. Types
// without an engine counterpart (timestamp, JavaScript, symbol, DBPointer,
// min and max keys) are BadValue naming the field.
func FromBSON(doc bsoncore.Document) (map[string]any, error) {
	return docToMap(doc, 0)
}

func docToMap(doc bsoncore.Document, depth int) (map[string]any, error) {
	if depth > MaxBSONDepth {
		return nil, mongoerr.New(mongoerr.BadValue, "document nesting exceeds %d levels", MaxBSONDepth)
	}
	m := make(map[string]any)
	err := EachBSONElement(doc, func(key string, v bsoncore.Value) error {
		x, err := ValueFromBSON(key, v, depth)
		if err != nil {
			return err
		}
		m[key] = x
		return nil
	})
	return m, err
}

// EachBSONElement calls fn with every element of a validated document, in
// order, stopping at the first error.
func EachBSONElement(doc bsoncore.Document, fn func(key string, v bsoncore.Value) error) error {
	if len(doc) < 5 {
		return mongoerr.New(mongoerr.BadValue, "truncated BSON document")
	}
	rem := doc[4 : len(doc)-1]
	for len(rem) > 0 {
		el, r, ok := bsoncore.ReadElement(rem)
		if !ok {
			return mongoerr.New(mongoerr.BadValue, "malformed BSON element")
		}
		rem = r
		if err := fn(el.Key(), el.Value()); err != nil {
			return err
		}
	}
	return nil
}

// ValueFromBSON converts one validated BSON value, of the field named key
// (for errors) at nesting depth, as FromBSON converts a document's.
func ValueFromBSON(key string, v bsoncore.Value, depth int) (any, error) {
	switch v.Type {
	case bsoncore.TypeDouble:
		return v.Double(), nil
	case bsoncore.TypeString:
		return v.StringValue(), nil
	case bsoncore.TypeEmbeddedDocument:
		return docToMap(v.Document(), depth+1)
	case bsoncore.TypeArray:
		if depth > MaxBSONDepth {
			return nil, mongoerr.New(mongoerr.BadValue, "document nesting exceeds %d levels", MaxBSONDepth)
		}
		var out []any
		err := EachBSONElement(bsoncore.Document(v.Array()), func(_ string, e bsoncore.Value) error {
			x, err := ValueFromBSON(key, e, depth+1)
			out = append(out, x)
			return err
		})
		if out == nil {
			out = []any{}
		}
		return out, err
	case bsoncore.TypeObjectID:
		return partialfilter.ObjectID(v.ObjectID()), nil
	case bsoncore.TypeBoolean:
		return v.Boolean(), nil
	case bsoncore.TypeDateTime:
		return time.UnixMilli(v.DateTime()).UTC(), nil
	case bsoncore.TypeNull, bsoncore.TypeUndefined:
		return nil, nil
	case bsoncore.TypeRegex:
		p, o := v.Regex()
		return partialfilter.Regex{Pattern: p, Options: o}, nil
	case bsoncore.TypeInt32:
		return v.Int32(), nil
	case bsoncore.TypeInt64:
		return v.Int64(), nil
	case bsoncore.TypeDecimal128:
		h, l := v.Decimal128()
		return partialfilter.Decimal128{H: h, L: l}, nil
	case bsoncore.TypeBinary:
		sub, data := v.Binary()
		return partialfilter.Binary{Subtype: sub, Data: bytes.Clone(data)}, nil
	}
	return nil, mongoerr.New(mongoerr.BadValue, "field %q: BSON type %s is not supported by Hourglass", key, v.Type)
}

// ValidateBSON checks doc and every document and array inside it, at every
// depth, as the decoders of this package require of their input: lengths,
// element types, nesting within MaxBSONDepth, and keys and strings that are
// UTF-8. A key or string that is not UTF-8 is a *mongoerr.Error with
// InvalidBSON (22) naming the field; other faults are plain errors.
func ValidateBSON(doc bsoncore.Document) error {
	err := validateBSON(doc, 0)
	if err == nil {
		return nil
	}
	var bad *badUTF8
	if errors.As(err, &bad) {
		return mongoerr.New(mongoerr.InvalidBSON, "Invalid UTF-8 string in BSON document: %v", err)
	}
	return err
}

// badUTF8 is a key or string value that is not UTF-8: what names it is
// the field path validateBSON wraps around it.
type badUTF8 struct{ what string }

func (e *badUTF8) Error() string { return e.what + " is not valid UTF-8" }

// validateBSON checks doc and every document and array inside it, at
// every depth: bsoncore's Validate checks the elements of one level, and a
// string with a wrong length inside a sub-document would otherwise reach
// the code that reads it. Every key and every string (string values,
// symbols, JavaScript code, regular expressions, DBPointer namespaces)
// must be UTF-8: a driver refuses to decode a reply holding one that is
// not, so none is stored.
func validateBSON(doc bsoncore.Document, depth int) error {
	if depth > MaxBSONDepth {
		return fmt.Errorf("nesting exceeds %d levels", MaxBSONDepth)
	}
	if len(doc) < 5 || int(int32(binary.LittleEndian.Uint32(doc))) != len(doc) || doc[len(doc)-1] != 0 {
		return errors.New("document length or end is wrong")
	}
	rem := doc[4 : len(doc)-1]
	for len(rem) > 0 {
		// The element read in place: its key is not copied into a string
		// (named only in an error) and its value is read once.
		n := bytes.IndexByte(rem[1:], 0)
		if n < 0 {
			return errors.New("malformed element")
		}
		keyBytes := rem[1 : 1+n]
		v, r, ok := bsoncore.ReadValue(rem[2+n:], bsoncore.Type(rem[0]))
		if !ok {
			return errors.New("malformed element")
		}
		rem = r
		if !utf8.Valid(keyBytes) {
			return &badUTF8{what: fmt.Sprintf("field name %q", keyBytes)}
		}
		key := StringView(keyBytes)
		switch v.Type {
		case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
			if err := validateBSON(bsoncore.Document(v.Data), depth+1); err != nil {
				return fmt.Errorf("element %q: %w", key, err)
			}
			continue
		}
		if err := v.Validate(); err != nil {
			return fmt.Errorf("element %q: %w", key, err)
		}
		switch v.Type {
		case bsoncore.TypeString, bsoncore.TypeSymbol, bsoncore.TypeJavaScript:
			// Each is an int32 length, the bytes and a NUL (a length of 0,
			// which bsoncore lets through, holds not even the NUL).
			if len(v.Data) < 5 {
				return fmt.Errorf("element %q: string length out of range", key)
			}
			if v.Data[len(v.Data)-1] != 0 {
				return fmt.Errorf("element %q: string not terminated by a NUL byte", key)
			}
			if !utf8.Valid(v.Data[4 : len(v.Data)-1]) {
				return &badUTF8{what: fmt.Sprintf("the string of field %q", key)}
			}
		case bsoncore.TypeRegex:
			p, o, ok := v.RegexOK()
			if !ok {
				return fmt.Errorf("element %q: invalid regular expression", key)
			}
			if !utf8.ValidString(p) || !utf8.ValidString(o) {
				return &badUTF8{what: fmt.Sprintf("the regular expression of field %q", key)}
			}
		case bsoncore.TypeDBPointer:
			ns, _, ok := v.DBPointerOK()
			if !ok {
				return fmt.Errorf("element %q: invalid DBPointer", key)
			}
			if !utf8.ValidString(ns) {
				return &badUTF8{what: fmt.Sprintf("the DBPointer namespace of field %q", key)}
			}
		case bsoncore.TypeCodeWithScope:
			code, scope, ok := v.CodeWithScopeOK()
			if !ok {
				return fmt.Errorf("element %q: invalid code with scope", key)
			}
			if !utf8.ValidString(code) {
				return &badUTF8{what: fmt.Sprintf("the code of field %q", key)}
			}
			if err := validateBSON(scope, depth+1); err != nil {
				return fmt.Errorf("element %q: scope: %w", key, err)
			}
		}
	}
	return nil
}

// BSONOrder returns the field order of a validated BSON document, at every
// depth (the map FromBSON makes does not keep it). Of a key given
// twice, the first place counts, as the map keeps the last value.
func BSONOrder(d bsoncore.Document) *document.Order {
	o := &document.Order{}
	_ = EachBSONElement(d, func(key string, v bsoncore.Value) error {
		o.Keys = append(o.Keys, key)
		if so := BSONValueOrder(v); so != nil {
			if o.Sub == nil {
				o.Sub = map[string]*document.Order{}
			}
			if _, dup := o.Sub[key]; !dup {
				o.Sub[key] = so
			}
		}
		return nil
	})
	o.Keys = document.DistinctKeys(o.Keys)
	return o
}

// BSONValueOrder is the order of a sub-document, or of the documents in an
// array; nil for any other value.
func BSONValueOrder(v bsoncore.Value) *document.Order {
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument:
		return BSONOrder(v.Document())
	case bsoncore.TypeArray:
		var o *document.Order
		i := 0
		_ = EachBSONElement(bsoncore.Document(v.Array()), func(_ string, e bsoncore.Value) error {
			if so := BSONValueOrder(e); so != nil {
				if o == nil {
					o = &document.Order{}
				}
				for len(o.Elems) < i {
					o.Elems = append(o.Elems, nil)
				}
				o.Elems = append(o.Elems, so)
			}
			i++
			return nil
		})
		return o
	}
	return nil
}
