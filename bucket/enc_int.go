package bucket

import "encoding/binary"

// intSpec: a TypeInt or TypeDate column as one int stream of its present values.
// Statistics: min <varint>, max - min <uvarint>.
var intSpec = encodingSpec{
	name:      "int",
	types:     1<<TypeInt | 1<<TypeDate | 1<<TypeInt32,
	intStream: true,
}

// appendIntColumn appends the present values of c, an int or date column, as an int
// stream and sets m's encoding and bounds.
func (e *Encoder) appendIntColumn(dst []byte, c *Column, rows int, m *fieldMeta) []byte {
	vals := c.Ints
	if m.count < rows {
		vals = e.ints[:0]
		for i, v := range c.Ints {
			if c.Present[i>>6]&(1<<(uint(i)&63)) != 0 {
				vals = append(vals, v)
			}
		}
		e.ints = vals
	}
	if dst, ok := e.appendScaledInt(dst, vals, m); ok {
		return dst
	}
	m.enc = encInt
	m.setIntRange(vals)
	return e.ie.appendInts(dst, vals)
}

// setIntRange sets m.minI and m.maxI to the bounds of vals (len >= 1).
func (m *fieldMeta) setIntRange(vals []int64) {
	m.minI, m.maxI = vals[0], vals[0]
	for _, v := range vals {
		m.minI = min(m.minI, v)
		m.maxI = max(m.maxI, v)
	}
}

func appendIntStats(dst []byte, m *fieldMeta) []byte {
	dst = appendVarint(dst, m.minI)
	return binary.AppendUvarint(dst, uint64(m.maxI-m.minI))
}

// readIntStats reads the bounds appendIntStats writes, also those of a decimal column.
func readIntStats(c *cursor, m *fieldMeta) error {
	lo, err := c.uvarint("min")
	if err != nil {
		return err
	}
	d, err := c.uvarint("max")
	if err != nil {
		return err
	}
	m.minI = unzigzag(lo)
	m.maxI = m.minI + int64(d)
	if m.maxI < m.minI {
		return corruptf("range [%d, %d + %d] wraps", m.minI, m.minI, d)
	}
	return nil
}

func intInfo(m *fieldMeta, fi *FieldInfo) { fi.MinInt, fi.MaxInt = m.minI, m.maxI }

// readIntColumn decodes an int column's stream into dst.Ints.
func (r *Reader) readIntColumn(src []byte, m *fieldMeta, dst *Column) ([]byte, error) {
	dst.Ints = grow(dst.Ints, r.rows)
	if m.count == r.rows {
		return r.id.readInts(src, dst.Ints)
	}
	r.ints = grow(r.ints, m.count)
	src, err := r.id.readInts(src, r.ints)
	scatter(dst.Ints, r.ints, dst.Present)
	return src, err
}
