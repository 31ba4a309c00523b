package bucket

import "unsafe"

// boolSpec: a TypeBool column as a bitset stream of its present values, in row order.
// No statistics.
var boolSpec = encodingSpec{
	name:  "bool",
	types: 1 << TypeBool,
}

// appendBoolColumn appends the present values of c, a bool column, and sets m.
func (e *Encoder) appendBoolColumn(dst []byte, c *Column, m *fieldMeta) []byte {
	m.enc = encBool
	words := e.words[:0]
	var w uint64
	n := 0
	for i, b := range c.Bools {
		if c.Present != nil && c.Present[i>>6]&(1<<(uint(i)&63)) == 0 {
			continue
		}
		if b {
			w |= 1 << (uint(n) & 63)
		}
		n++
		if n&63 == 0 {
			words = append(words, w)
			w = 0
		}
	}
	if n&63 != 0 {
		words = append(words, w)
	}
	e.words = words
	return e.appendBitset(dst, words, n)
}

// readBoolColumn decodes a bool column into dst.Bools.
func (r *Reader) readBoolColumn(src []byte, m *fieldMeta, dst *Column) ([]byte, error) {
	dst.Bools = grow(dst.Bools, r.rows)
	count, present := m.count, dst.Present
	words := grow(r.blob, (count+63)/64*8)
	r.blob = words
	ws := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(words))), (count+63)/64)
	src, err := r.readBitset(src, ws, count)
	if err != nil {
		return nil, err
	}
	j := 0
	for i := range dst.Bools {
		if present != nil && present[i>>6]&(1<<(uint(i)&63)) == 0 {
			dst.Bools[i] = false
			continue
		}
		dst.Bools[i] = ws[j>>6]&(1<<(uint(j)&63)) != 0
		j++
	}
	return src, nil
}
