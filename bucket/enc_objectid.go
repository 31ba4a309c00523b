package bucket

import "encoding/binary"

// ObjectIDLen is the length of a TypeObjectID value.
const ObjectIDLen = 12

// objectIDSpec: a TypeObjectID column as its values' three parts, each compressed on
// its own: an int stream of the 4-byte seconds, the distinct 5-byte process parts
// (uvarint count, then each; an int stream of indices when more than one), and an int
// stream of the 3-byte counters, each written as the number of its residue modulo 2^24
// nearest the one before (so that a counter wrapping past 2^24 steps on). The ids a driver or the server makes for one series
// share their process part and step their counter and seconds by small amounts, so
// each part takes a few bits. No statistics.
var objectIDSpec = encodingSpec{
	name:  "objectid",
	types: 1 << TypeObjectID,
}

// appendObjectIDColumn appends the present values of c, an ObjectId column, and sets m.
func (e *Encoder) appendObjectIDColumn(dst []byte, c *Column, rows int, m *fieldMeta) []byte {
	m.enc = encObjectID
	secs, counters, procs := e.ints[:0], e.scaled[:0], e.dictList[:0]
	idx := e.quot[:0]
	prev := int64(0)
	for i := range rows {
		if m.count < rows && c.Present[i>>6]&(1<<(uint(i)&63)) == 0 {
			continue
		}
		id := c.ID(i)
		secs = append(secs, int64(binary.BigEndian.Uint32(id[0:4])))
		cnt := int64(id[9])<<16 | int64(id[10])<<8 | int64(id[11])
		// The number congruent to cnt nearest prev.
		cnt = prev + (cnt-prev)&0xffffff
		if cnt-prev > 1<<23 {
			cnt -= 1 << 24
		}
		prev = cnt
		counters = append(counters, cnt)
		p := id[4:9]
		j := -1
		for k := len(procs) - 1; k >= 0; k-- { // few distinct: a driver or two
			if procs[k] == string(p) {
				j = k
				break
			}
		}
		if j < 0 {
			j = len(procs)
			procs = append(procs, string(p))
		}
		idx = append(idx, int64(j))
	}
	e.ints, e.scaled, e.dictList, e.quot = secs, counters, procs, idx
	dst = e.ie.appendInts(dst, secs)
	dst = binary.AppendUvarint(dst, uint64(len(procs)))
	for _, p := range procs {
		dst = append(dst, p...)
	}
	if len(procs) > 1 {
		dst = e.ie.appendInts(dst, idx)
	}
	return e.ie.appendInts(dst, counters)
}

// readObjectIDColumn decodes an ObjectId column into dst.IDs.
func (r *Reader) readObjectIDColumn(src []byte, m *fieldMeta, dst *Column) ([]byte, error) {
	count, present := m.count, dst.Present
	secs := grow(r.ints, count)
	r.ints = secs
	src, err := r.id.readInts(src, secs)
	if err != nil {
		return nil, err
	}
	np, k := binary.Uvarint(src)
	if k <= 0 || np == 0 || np > uint64(count) || np > uint64(len(src)-k)/5 {
		return nil, corruptf("objectid: %d process parts for %d values", np, count)
	}
	procs := src[k : k+int(np)*5]
	src = src[k+int(np)*5:]
	var idx []int64
	if np > 1 {
		idx = grow(r.ints2, count)
		r.ints2 = idx
		if src, err = r.id.readInts(src, idx); err != nil {
			return nil, err
		}
	}
	counters := grow(r.ints3, count)
	r.ints3 = counters
	if src, err = r.id.readInts(src, counters); err != nil {
		return nil, err
	}
	dst.IDs = grow(dst.IDs, r.rows*ObjectIDLen)
	clear(dst.IDs)
	row := -1
	for j := range count {
		// The j-th present row.
		for row++; row < r.rows && present != nil && present[row>>6]&(1<<(uint(row)&63)) == 0; row++ {
		}
		if row >= r.rows {
			return nil, corruptf("objectid: %d values for %d present rows", count, j)
		}
		s, c := secs[j], counters[j]
		if uint64(s) > 0xffffffff {
			return nil, corruptf("objectid: value %d out of range", j)
		}
		p := int64(0)
		if idx != nil {
			if p = idx[j]; uint64(p) >= np {
				return nil, corruptf("objectid: process part %d of %d", p, np)
			}
		}
		id := dst.ID(row)
		binary.BigEndian.PutUint32(id, uint32(s))
		copy(id[4:9], procs[p*5:])
		id[9], id[10], id[11] = byte(c>>16), byte(c>>8), byte(c) // modulo 2^24
	}
	return src, nil
}
