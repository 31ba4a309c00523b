package document

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"time"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// Key brackets: the first byte of a value's key form. They follow
// partialfilter.Compare's order (BSON order); 0x00 ends arrays and
// documents, so that a prefix sorts first.
const (
	keyEnd    byte = 0x00
	keyNull   byte = 0x11
	keyNumber byte = 0x12
	keyString byte = 0x13
	keyObject byte = 0x14
	keyArray  byte = 0x15
	keyOID    byte = 0x16
	keyBool   byte = 0x17
	keyDate   byte = 0x18
)

const twoTo63 = 9223372036854775808.0

// AppendKey appends the key form of v to dst. Key forms compare bytewise
// as partialfilter.Compare compares the values (numbers by value across
// int64 and float64, exactly), and no key form is a prefix of another, so
// keys of several values can be concatenated. A missing value is keyed as
// null. Values outside the value set are an error.
func AppendKey(dst []byte, v any) ([]byte, error) {
	return appendKey(dst, v, 0)
}

// AppendKeyDesc appends the key form of v with every byte inverted: keys
// of a descending index field sort in reverse.
func AppendKeyDesc(dst []byte, v any) ([]byte, error) {
	n := len(dst)
	dst, err := appendKey(dst, v, 0)
	for i := n; i < len(dst); i++ {
		dst[i] = ^dst[i]
	}
	return dst, err
}

func appendKey(dst []byte, v any, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("document nesting exceeds %d levels", MaxDepth)
	}
	switch t := v.(type) {
	case nil:
		return append(dst, keyNull), nil
	case int32:
		return appendNumber(dst, float64(t), 0), nil
	case partialfilter.Decimal128:
		return appendDecimal(dst, t, depth)
	case partialfilter.Binary:
		// After every array (whose second byte is an element's bracket
		// or keyEnd), before ObjectIds: length, subtype, bytes.
		dst = binary.BigEndian.AppendUint32(append(dst, keyArray, 0xff), uint32(len(t.Data)))
		return append(append(dst, t.Subtype), t.Data...), nil
	case int64:
		f := float64(t)
		var delta int64
		if f >= twoTo63 {
			delta = int64(uint64(t) - 1<<63)
		} else {
			delta = t - int64(f)
		}
		return appendNumber(dst, f, delta), nil
	case float64:
		return appendNumber(dst, t, 0), nil
	case string:
		return appendEscaped(append(dst, keyString), t), nil
	case map[string]any:
		dst = append(dst, keyObject)
		var err error
		for _, k := range slices.Sorted(maps.Keys(t)) {
			// Fields compare by value bracket, then name, then value.
			dst = appendEscaped(appendBracket(dst, t[k]), k)
			if dst, err = appendKey(dst, t[k], depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, keyEnd), nil
	case []any:
		dst = append(dst, keyArray)
		var err error
		for _, e := range t {
			if dst, err = appendKey(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, keyEnd), nil
	case partialfilter.ObjectID:
		return append(append(dst, keyOID), t[:]...), nil
	case bool:
		if t {
			return append(dst, keyBool, 1), nil
		}
		return append(dst, keyBool, 0), nil
	case time.Time:
		dst = binary.BigEndian.AppendUint64(append(dst, keyDate), uint64(t.Unix())^(1<<63))
		return binary.BigEndian.AppendUint32(dst, uint32(t.Nanosecond())), nil
	}
	return dst, fmt.Errorf("document: unsupported value type %T", v)
}

// appendNumber writes f, the value rounded to a double, in an order-
// preserving form, then delta, the exact value minus f (non-zero only for
// integers a double cannot hold, and then within ±2^10), so that integers
// beyond 2^53 keep their order. NaN sorts below every number.
func appendNumber(dst []byte, f float64, delta int64) []byte {
	var bits uint64
	switch {
	case f != f:
		bits = 0
	case f == 0:
		bits = 1 << 63 // -0 is 0
	default:
		bits = math.Float64bits(f)
		if bits&(1<<63) != 0 {
			bits = ^bits
		} else {
			bits |= 1 << 63
		}
	}
	dst = binary.BigEndian.AppendUint64(append(dst, keyNumber), bits)
	return binary.BigEndian.AppendUint16(dst, uint16(int16(delta))^(1<<15))
}

// appendEscaped writes s with 0x00 escaped as 0x00 0xff and a terminator
// 0x00 0x01: byte order of the result is byte order of s, and it is
// self-delimiting.
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			dst = append(dst, 0, 0xff)
			continue
		}
		dst = append(dst, s[i])
	}
	return append(dst, 0, 1)
}

// appendBracket appends what orders a field of v among its document's
// fields: the first byte of v's key form, and for binary data (which
// keys after arrays, before ObjectIds) a second byte, 0xff, that no field
// name begins with (names are UTF-8).
func appendBracket(dst []byte, v any) []byte {
	if _, ok := v.(partialfilter.Binary); ok {
		return append(dst, keyArray, 0xff)
	}
	return append(dst, bracket(v))
}

// bracket is the first byte of v's key form.
func bracket(v any) byte {
	switch v.(type) {
	case nil:
		return keyNull
	case int64, float64, int32, partialfilter.Decimal128:
		return keyNumber
	case string:
		return keyString
	case map[string]any:
		return keyObject
	case []any:
		return keyArray
	case partialfilter.ObjectID:
		return keyOID
	case bool:
		return keyBool
	case time.Time:
		return keyDate
	}
	return 0xff
}

// appendDecimal keys a decimal: a whole int64 as that integer; any other
// as its nearest double f and, below 2^53 (where integers have no
// delta), the sign of its difference from f as the delta, so that it
// sorts between f and the doubles beside it. Two decimals on the same
// side of one double share a key, as do two beyond 2^53 that differ by
// less than one (docs/collections.md).
func appendDecimal(dst []byte, d partialfilter.Decimal128, depth int) ([]byte, error) {
	f := d.Float64()
	r, finite := d.Rat()
	if !finite {
		return appendNumber(dst, f, 0), nil
	}
	if r.IsInt() && r.Num().IsInt64() {
		return appendKey(dst, r.Num().Int64(), depth)
	}
	var delta int64
	switch {
	case math.IsInf(f, 0):
		delta = -int64(math.Copysign(1, f)) // beyond every double, short of infinity
	case math.Abs(f) < 1<<53:
		delta = int64(r.Cmp(new(big.Rat).SetFloat64(f)))
	default:
		// Beyond 2^53 as an integer's delta: the whole part of d - f
		// (a fraction there is 34 digits deep: it keys as its floor).
		diff := new(big.Rat).Sub(r, new(big.Rat).SetFloat64(f))
		q := new(big.Int).Div(diff.Num(), diff.Denom()) // floors for a positive divisor
		delta = max(min(q.Int64(), 1<<14), -(1 << 14))
	}
	return appendNumber(dst, f, delta), nil
}

// AppendDistinctKey appends what tells v apart among the values of a
// distinct: values with the same key are one value. It is v's key form
// (AppendKey: numbers of equal value, whatever their type, share it),
// followed, when v holds decimals that are neither an int64 nor a double,
// by their exact values, which the key form rounds (two decimals on one
// side of a double share a key form, not a value). A value with no key
// form (a regular expression, or a document or array holding one) is its
// Go syntax (fmt's %#v, maps in key order) after a byte no key form
// starts with.
func AppendDistinctKey(dst []byte, v any) []byte {
	n := len(dst)
	k, err := AppendKey(dst, v)
	if err != nil {
		return fmt.Appendf(append(dst[:n], 0xff), "%#v", v)
	}
	return appendInexactDecimals(k, v, 0)
}

// DistinctSet holds the values of a distinct: each once (values with one
// AppendDistinctKey are one), handed back in MongoDB's order of values.
// The zero value is empty and ready.
type DistinctSet struct {
	seen   map[string]struct{}
	values []any
	key    []byte
	bytes  int
}

// Add adds v unless the set holds a value equal to it, and reports
// whether it did.
func (s *DistinctSet) Add(v any) bool {
	s.key = AppendDistinctKey(s.key[:0], v)
	if _, ok := s.seen[string(s.key)]; ok {
		return false
	}
	if s.seen == nil {
		s.seen = map[string]struct{}{}
	}
	s.seen[string(s.key)] = struct{}{}
	s.bytes += len(s.key)
	s.values = append(s.values, v)
	return true
}

// Bytes returns the bytes of the keys of the values held: what a cap on
// a distinct's size counts.
func (s *DistinctSet) Bytes() int { return s.bytes }

// Sorted returns the values held in MongoDB's order of values
// (partialfilter.Compare), those of equal order as added.
func (s *DistinctSet) Sorted() []any {
	slices.SortStableFunc(s.values, partialfilter.Compare)
	return s.values
}

// appendInexactDecimals appends the exact value of every decimal in v
// that is neither an int64 nor a double, in the order AppendKey keys them.
func appendInexactDecimals(dst []byte, v any, depth int) []byte {
	if depth > MaxDepth {
		return dst
	}
	switch t := v.(type) {
	case partialfilter.Decimal128:
		r, finite := t.Rat()
		if !finite || (r.IsInt() && r.Num().IsInt64()) {
			return dst
		}
		if f, exact := r.Float64(); exact && !math.IsInf(f, 0) {
			return dst
		}
		dst = append(r.Num().Append(append(dst, 0xfe), 10), '/')
		return append(r.Denom().Append(dst, 10), ';')
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			dst = appendInexactDecimals(dst, t[k], depth+1)
		}
	case []any:
		for _, e := range t {
			dst = appendInexactDecimals(dst, e, depth+1)
		}
	}
	return dst
}
