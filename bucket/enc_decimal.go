package bucket

import (
	"math"
)

// decimalSpec: a TypeFloat column whose every present value v is exactly (bitwise)
// float64(i) / 10^k for one scale k in 0..maxDecimalScale, as one int stream of the i.
// Statistics: k <1 byte>, then the bounds of the i as intSpec stores them.
var decimalSpec = encodingSpec{
	name:      "decimal",
	types:     1 << TypeFloat,
	intStream: true,
}

// maxDecimalScale is the largest k tried by the decimal float encoding.
const maxDecimalScale = 9

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// decimalScale reports whether v == float64(i)/10^k bitwise for i = round(v*10^k).
func decimalScale(v float64, k int) (int64, bool) {
	x := v * pow10[k]
	if !(x > -(1<<62) && x < 1<<62) {
		return 0, false
	}
	i := int64(math.Floor(x + 0.5))
	return i, math.Float64bits(float64(i)/pow10[k]) == math.Float64bits(v)
}

// appendDecimal appends ints, the float64 bit patterns of a float column's present
// values, in the decimal encoding when a scale fits them all, and sets m. It rewrites
// ints to the mantissas then. It returns false, ints unchanged and nothing appended,
// when no scale fits.
func (e *Encoder) appendDecimal(dst []byte, ints []int64, m *fieldMeta) ([]byte, bool) {
	k, ok := scaleDecimal(ints)
	if !ok {
		return dst, false
	}
	m.enc = encDecimal
	m.k = byte(k)
	m.setIntRange(ints)
	return e.ie.appendInts(dst, ints), true
}

// scaleDecimal rewrites ints, the float64 bit patterns of a float
// column's present values, to their mantissas at the scale k that fits
// them all, and returns k; with false, and ints unchanged, when none does.
// k is the smallest scale that fits the first value, raised for each later
// value that it does not fit to the smallest that does (a value of many
// digits may fit a scale and not a larger one: k is not searched further).
// Each value is scaled as it is read; a value that raises k has those
// before it restored and scaled at the end, at the last k. A column's
// scale is most often found at its first value: one pass, where finding k
// first and then scaling took two (docs/benchmarks.md, "Decimal floats
// scaled in one pass").
func scaleDecimal(ints []int64) (int, bool) {
	k, raw := 0, 0 // ints[:raw] hold bit patterns still, ints[raw:j] mantissas at k
	for j := range ints {
		v := math.Float64frombits(uint64(ints[j]))
		i, fit := decimalScale(v, k)
		if !fit {
			unscaleDecimal(ints[raw:j], k)
			raw = j
			for !fit && k < maxDecimalScale {
				k++
				i, fit = decimalScale(v, k)
			}
			if !fit {
				return 0, false
			}
		}
		ints[j] = i
	}
	for j := range raw {
		i, fit := decimalScale(math.Float64frombits(uint64(ints[j])), k)
		if !fit {
			unscaleDecimal(ints[:j], k)
			unscaleDecimal(ints[raw:], k)
			return 0, false
		}
		ints[j] = i
	}
	return k, true
}

// unscaleDecimal restores ints, mantissas at scale k, to the float64 bit
// patterns of their values: decimalScale found each exact at k.
func unscaleDecimal(ints []int64, k int) {
	for j, x := range ints {
		ints[j] = int64(math.Float64bits(float64(x) / pow10[k]))
	}
}

func appendDecimalStats(dst []byte, m *fieldMeta) []byte {
	return appendIntStats(append(dst, m.k), m)
}

func readDecimalStats(c *cursor, m *fieldMeta) error {
	k, err := c.byte("decimal scale")
	if err != nil {
		return err
	}
	if k > maxDecimalScale {
		return corruptf("decimal scale %d, max %d", k, maxDecimalScale)
	}
	m.k = k
	return readIntStats(c, m)
}

func decimalInfo(m *fieldMeta, fi *FieldInfo) {
	p := pow10[m.k]
	fi.MinFloat, fi.MaxFloat = float64(m.minI)/p, float64(m.maxI)/p
}

// readDecimalColumn decodes a decimal column's stream into dst.Floats.
func (r *Reader) readDecimalColumn(src []byte, m *fieldMeta, dst *Column) ([]byte, error) {
	ints, src, err := r.readFloatInts(src, m.count, dst)
	if err != nil {
		return src, err
	}
	fs := floatsOf(ints)
	if m.k == 0 {
		for i, v := range ints {
			fs[i] = float64(v)
		}
	} else {
		p := pow10[m.k]
		for i, v := range ints {
			fs[i] = float64(v) / p
		}
	}
	placeFloats(fs, dst)
	return src, nil
}
