package bucket

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// floatSpec: a TypeFloat column as one int stream of its present values' bits mapped to
// order-preserving int64 (orderedBits), so that every bit pattern round-trips. Statistics:
// flags <1 byte> (bit 0: a value is NaN), min and max of the non-NaN values <8 bytes
// each, float64 bits>, both NaN when every value is.
var floatSpec = encodingSpec{
	name:      "float",
	types:     1 << TypeFloat,
	intStream: true,
}

// floatStatsLen is the length of a float column's statistics.
const floatStatsLen = 17

// appendFloatColumn appends the present values of c, a float column, in the decimal
// encoding when they all fit one scale, else in the float encoding, and sets m.
func (e *Encoder) appendFloatColumn(dst []byte, c *Column, rows int, m *fieldMeta) []byte {
	ints := e.ints[:0]
	for i, v := range c.Floats {
		if m.count < rows && c.Present[i>>6]&(1<<(uint(i)&63)) == 0 {
			continue
		}
		ints = append(ints, int64(math.Float64bits(v)))
	}
	e.ints = ints
	if dst, ok := e.appendDecimal(dst, ints, m); ok {
		return dst
	}
	m.enc = encFloat
	m.minF, m.maxF = math.NaN(), math.NaN()
	for j, b := range ints {
		v := math.Float64frombits(uint64(b))
		switch {
		case v != v:
			m.hasNaN = true
		case m.minF != m.minF:
			m.minF, m.maxF = v, v
		default:
			m.minF = math.Min(m.minF, v)
			m.maxF = math.Max(m.maxF, v)
		}
		ints[j] = orderedBits(uint64(b))
	}
	return e.ie.appendInts(dst, ints)
}

// orderedBits maps float64 bits to an int64 ordered like the floats (NaNs at the ends).
// It is its own inverse on the bit patterns.
func orderedBits(b uint64) int64 {
	return int64(b ^ uint64(int64(b)>>63)>>1)
}

func appendFloatStats(dst []byte, m *fieldMeta) []byte {
	var flags byte
	if m.hasNaN {
		flags = 1
	}
	dst = append(dst, flags)
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(m.minF))
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(m.maxF))
}

func readFloatStats(c *cursor, m *fieldMeta) error {
	p, err := c.bytes(floatStatsLen, "float statistics")
	if err != nil {
		return err
	}
	if p[0] > 1 {
		return corruptf("float flags %#x", p[0])
	}
	m.hasNaN = p[0] == 1
	m.minF = math.Float64frombits(binary.LittleEndian.Uint64(p[1:]))
	m.maxF = math.Float64frombits(binary.LittleEndian.Uint64(p[9:]))
	return nil
}

func floatInfo(m *fieldMeta, fi *FieldInfo) {
	fi.MinFloat, fi.MaxFloat, fi.HasNaN = m.minF, m.maxF, m.hasNaN
}

// readFloatColumn decodes a float column's stream into dst.Floats.
func (r *Reader) readFloatColumn(src []byte, m *fieldMeta, dst *Column) ([]byte, error) {
	ints, src, err := r.readFloatInts(src, m.count, dst)
	if err != nil {
		return src, err
	}
	fs := floatsOf(ints)
	for i, v := range ints {
		fs[i] = math.Float64frombits(uint64(orderedBits(uint64(v))))
	}
	placeFloats(fs, dst)
	return src, nil
}

// readFloatInts decodes the int stream of count values of a decimal or float column, in
// the memory of dst.Floats when every row is present, else in r's scratch space. The
// caller converts the ints to floats in place (floatsOf) and calls placeFloats.
func (r *Reader) readFloatInts(src []byte, count int, dst *Column) ([]int64, []byte, error) {
	dst.Floats = grow(dst.Floats, r.rows)
	var ints []int64
	if count == r.rows {
		ints = unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(dst.Floats))), count)
	} else {
		r.ints = grow(r.ints, count)
		ints = r.ints
	}
	src, err := r.id.readInts(src, ints)
	return ints, src, err
}

// floatsOf returns the memory of ints as float64s.
func floatsOf(ints []int64) []float64 {
	return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(ints))), len(ints))
}

// placeFloats spreads fs, the present values, over dst.Floats' rows when some are
// absent; when none is, fs is dst.Floats already.
func placeFloats(fs []float64, dst *Column) {
	if dst.Present != nil {
		scatter(dst.Floats, fs, dst.Present)
	}
}
