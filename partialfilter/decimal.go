package partialfilter

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"math/big"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// Decimal128 is an IEEE 754-2008 128-bit decimal (BSON type 19), kept
// exactly as written: NumberDecimal("1.10") reads back "1.10", trailing
// zero included. It is a number: it compares with int32, int64 and double
// values by its exact value. H and L are its high and low 64 bits.
type Decimal128 struct{ H, L uint64 }

// ParseDecimal128 reads a decimal as MongoDB's NumberDecimal takes it
// ("1.10", "-1E+3", "NaN", "Infinity"); one it cannot hold exactly (more
// than 34 digits, an exponent out of range) is BadValue.
func ParseDecimal128(s string) (Decimal128, error) {
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		return Decimal128{}, mongoerr.New(mongoerr.BadValue, "invalid $numberDecimal %.40q: %v", s, err)
	}
	h, l := d.GetBytes()
	return Decimal128{H: h, L: l}, nil
}

// String returns the decimal as MongoDB prints it.
func (d Decimal128) String() string { return bson.NewDecimal128(d.H, d.L).String() }

// MarshalJSON writes d as Extended JSON: {"$numberDecimal": "1.10"}.
func (d Decimal128) MarshalJSON() ([]byte, error) {
	return append(strconv.AppendQuote([]byte(`{"$numberDecimal":`), d.String()), '}'), nil
}

// exact returns d's value: nan, or inf (+1 or -1), or the rational r.
func (d Decimal128) exact() (r *big.Rat, nan bool, inf int) {
	bd := bson.NewDecimal128(d.H, d.L)
	if bd.IsNaN() {
		return nil, true, 0
	}
	if i := bd.IsInf(); i != 0 {
		return nil, false, i
	}
	bi, exp, err := bd.BigInt()
	if err != nil {
		return nil, true, 0
	}
	r = new(big.Rat).SetInt(bi)
	if exp != 0 {
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
		if exp > 0 {
			r.Mul(r, new(big.Rat).SetInt(p))
		} else {
			r.Quo(r, new(big.Rat).SetInt(p))
		}
	}
	return r, false, 0
}

// Rat returns d's exact value; ok is false for NaN and the infinities.
func (d Decimal128) Rat() (r *big.Rat, ok bool) {
	r, nan, inf := d.exact()
	return r, !nan && inf == 0
}

// Float64 returns the double nearest to d.
func (d Decimal128) Float64() float64 {
	r, nan, inf := d.exact()
	switch {
	case nan:
		return math.NaN()
	case inf != 0:
		return math.Inf(inf)
	}
	f, _ := r.Float64()
	return f
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// exactNumber returns a number's exact value as exact does.
func exactNumber(v any) (r *big.Rat, nan bool, inf int) {
	if d, ok := v.(Decimal128); ok {
		return d.exact()
	}
	i, f, isInt := number(v)
	switch {
	case isInt:
		return new(big.Rat).SetInt64(i), false, 0
	case f != f:
		return nil, true, 0
	case math.IsInf(f, 0):
		if f > 0 {
			return nil, false, 1
		}
		return nil, false, -1
	}
	return new(big.Rat).SetFloat64(f), false, 0
}

// compareExact compares two numbers, one of them a Decimal128, by their
// exact values; NaN equals NaN and sorts below every number.
func compareExact(a, b any) int {
	ra, an, ai := exactNumber(a)
	rb, bn, bi := exactNumber(b)
	switch {
	case an || bn:
		switch {
		case an && bn:
			return 0
		case an:
			return -1
		}
		return 1
	case ai != 0 || bi != 0:
		return cmpInt(ai, bi)
	}
	return ra.Cmp(rb)
}

// Binary is BSON binary data (type 5) with its subtype: {"$binary":
// {"base64": "...", "subType": "00"}} in Extended JSON. Binary values
// order by length, then subtype, then bytes, as MongoDB orders them.
type Binary struct {
	Subtype byte
	Data    []byte
}

// MarshalJSON writes b as canonical Extended JSON.
func (b Binary) MarshalJSON() ([]byte, error) {
	out := []byte(`{"$binary":{"base64":"`)
	out = base64.StdEncoding.AppendEncode(out, b.Data)
	out = append(out, `","subType":"`...)
	out = hex.AppendEncode(out, []byte{b.Subtype})
	return append(out, `"}}`...), nil
}

func compareBinary(a, b Binary) int {
	if c := cmpInt(len(a.Data), len(b.Data)); c != 0 {
		return c
	}
	if c := cmpInt(int(a.Subtype), int(b.Subtype)); c != 0 {
		return c
	}
	return cmpInt(string(a.Data), string(b.Data))
}

// parseBinary reads the inside of {"$binary": {"base64": ..., "subType":
// ...}}; the legacy form {"$binary": "<base64>", "$type": "<hex>"} is not a
// one-key wrapper and is left to the caller.
func parseBinary(w any) (Binary, error) {
	m, ok := w.(map[string]any)
	if !ok || len(m) != 2 {
		return Binary{}, mongoerr.New(mongoerr.BadValue, `$binary needs {"base64": "<base64>", "subType": "<hex>"}`)
	}
	b64, ok1 := m["base64"].(string)
	st, ok2 := m["subType"].(string)
	if !ok1 || !ok2 || len(st) == 0 || len(st) > 2 {
		return Binary{}, mongoerr.New(mongoerr.BadValue, `$binary needs {"base64": "<base64>", "subType": "<hex>"}`)
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Binary{}, mongoerr.New(mongoerr.BadValue, "$binary: invalid base64: %v", err)
	}
	sub, err := strconv.ParseUint(st, 16, 8)
	if err != nil {
		return Binary{}, mongoerr.New(mongoerr.BadValue, "$binary: invalid subType %q: want one or two hexadecimal digits", st)
	}
	return Binary{Subtype: byte(sub), Data: data}, nil
}
