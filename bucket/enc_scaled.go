package bucket

import "math"

// scaledIntSpec: a TypeInt or TypeDate column whose every present value is a
// multiple of 10^k for one k in 1..maxIntScale, as one int stream of the
// quotients: dates in whole milliseconds (a BSON date, stored in
// nanoseconds) or seconds, round counts and sizes. Statistics: k <1 byte>,
// then the bounds of the quotients as intSpec stores them.
var scaledIntSpec = encodingSpec{
	name:      "scaled int",
	types:     1<<TypeInt | 1<<TypeDate | 1<<TypeInt32,
	intStream: true,
}

// maxIntScale is the largest k of the scaled int encoding: 10^18 is the
// largest power of ten an int64 holds.
const maxIntScale = 18

var pow10Int = [maxIntScale + 1]int64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// intScale returns the largest k in 1..maxIntScale such that 10^k divides
// every value of vals, or 0 when there is none or every value is 0.
func intScale(vals []int64) byte {
	k := byte(0)
	for _, v := range vals {
		if v == 0 {
			continue
		}
		if k == 0 {
			// The first value other than 0: its trailing decimal zeros.
			for k < maxIntScale && v%pow10Int[k+1] == 0 {
				k++
			}
			if k == 0 {
				return 0
			}
			continue
		}
		for v%pow10Int[k] != 0 {
			if k--; k == 0 {
				return 0
			}
		}
	}
	return k
}

// appendScaledInt appends vals, the present values of an int or date column,
// in the scaled int encoding when a k fits them all, and sets m. It returns
// false, with nothing appended, when none does.
func (e *Encoder) appendScaledInt(dst []byte, vals []int64, m *fieldMeta) ([]byte, bool) {
	k := intScale(vals)
	if k == 0 {
		return dst, false
	}
	p := pow10Int[k]
	q := e.quot[:0]
	for _, v := range vals {
		q = append(q, v/p)
	}
	e.quot = q
	m.enc, m.k = encScaledInt, k
	m.setIntRange(q)
	return e.ie.appendInts(dst, q), true
}

func appendScaledIntStats(dst []byte, m *fieldMeta) []byte {
	return appendIntStats(append(dst, m.k), m)
}

func readScaledIntStats(c *cursor, m *fieldMeta) error {
	k, err := c.byte("int scale")
	if err != nil {
		return err
	}
	if k == 0 || k > maxIntScale {
		return corruptf("int scale %d, want 1 to %d", k, maxIntScale)
	}
	m.k = k
	if err := readIntStats(c, m); err != nil {
		return err
	}
	if p := pow10Int[k]; m.minI < math.MinInt64/p || m.maxI > math.MaxInt64/p {
		return corruptf("scaled int bounds [%d, %d] x 10^%d overflow", m.minI, m.maxI, k)
	}
	return nil
}

func scaledIntInfo(m *fieldMeta, fi *FieldInfo) {
	p := pow10Int[m.k]
	fi.MinInt, fi.MaxInt = m.minI*p, m.maxI*p
}

// readScaledIntColumn decodes a scaled int column's stream into dst.Ints.
func (r *Reader) readScaledIntColumn(src []byte, m *fieldMeta, dst *Column) ([]byte, error) {
	src, err := r.readIntColumn(src, m, dst)
	if err != nil {
		return src, err
	}
	p := pow10Int[m.k]
	lo, hi := math.MinInt64/p, math.MaxInt64/p
	for i, v := range dst.Ints {
		if v < lo || v > hi {
			return src, corruptf("scaled int %d x 10^%d overflows", v, m.k)
		}
		dst.Ints[i] = v * p
	}
	return src, nil
}
