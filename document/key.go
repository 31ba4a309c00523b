package document

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
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
			dst = appendEscaped(append(dst, bracket(t[k])), k)
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

// bracket is the first byte of v's key form.
func bracket(v any) byte {
	switch v.(type) {
	case nil:
		return keyNull
	case int64, float64:
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
