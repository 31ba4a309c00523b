package bucket

import "encoding/binary"

// ObjectIDLen is the length of a TypeObjectID value.
const ObjectIDLen = 12

// objectIDSpec: a TypeObjectID column as its values' three parts, each compressed on
// its own: an int stream of the 4-byte seconds, the distinct 5-byte process parts
// (uvarint count, then each; an int stream of indices when more than one), and an int
// stream of the 3-byte counters, each taken as the number of its residue modulo 2^24
// nearest the one before (so that a counter wrapping past 2^24 steps on). Seconds and
// counters are steps blocks (appendSteps). The ids a driver or the server makes for one series
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
	dst = e.appendSteps(dst, secs)
	dst = binary.AppendUvarint(dst, uint64(len(procs)))
	for _, p := range procs {
		dst = append(dst, p...)
	}
	if len(procs) > 1 {
		dst = e.ie.appendInts(dst, idx)
	}
	return e.appendSteps(dst, counters)
}

// maxSteps bounds the distinct steps of a steps block; values with more
// are written as an int stream.
const maxSteps = 16

// appendSteps appends vals (len >= 1) as a steps block, in one of three
// modes for the differences between consecutive values: mode 2, the most
// common difference and the places and values of the others, when at most
// one in eight differs from it (ids made for batches of many series: their
// counters step by the series in a batch and jump, by various amounts,
// between batches); otherwise mode 1, when they take at most maxSteps
// values, those and each one's index among them; otherwise mode 0, an int
// stream of the values. Modes 1 and 2 start with the first value.
func (e *Encoder) appendSteps(dst []byte, vals []int64) []byte {
	if len(vals) < 2 {
		return e.ie.appendInts(append(dst, 0), vals)
	}
	common := commonStep(vals)
	gaps, others := e.gaps[:0], e.runs[:0]
	last := -1
	for j := 1; j < len(vals); j++ {
		if d := vals[j] - vals[j-1]; d != common {
			if len(gaps) > len(vals)/8 {
				break
			}
			gaps = append(gaps, int64(j-1-last))
			others = append(others, d)
			last = j - 1
		}
	}
	e.gaps, e.runs = gaps, others
	if len(gaps) <= len(vals)/8 {
		dst = appendVarint(append(dst, 2), vals[0])
		dst = appendVarint(dst, common)
		dst = binary.AppendUvarint(dst, uint64(len(gaps)))
		if len(gaps) > 0 {
			dst = e.ie.appendInts(dst, gaps)
			dst = e.ie.appendInts(dst, others)
		}
		return dst
	}
	var steps [maxSteps]int64
	ns := 0
	idx := e.runs[:0]
	for j := 1; j < len(vals); j++ {
		d := vals[j] - vals[j-1]
		k := 0
		for k < ns && steps[k] != d {
			k++
		}
		if k == ns {
			if ns == maxSteps {
				e.runs = idx
				return e.ie.appendInts(append(dst, 0), vals)
			}
			steps[ns] = d
			ns++
		}
		idx = append(idx, int64(k))
	}
	e.runs = idx
	dst = appendVarint(append(dst, 1), vals[0])
	dst = binary.AppendUvarint(dst, uint64(ns))
	for _, d := range steps[:ns] {
		dst = appendVarint(dst, d)
	}
	return e.ie.appendInts(dst, idx) // ns >= 2: one step would be mode 2
}

// commonStep returns the most common difference between consecutive
// values of vs (len >= 2) among the first eight distinct ones.
func commonStep(vs []int64) int64 {
	var seen [8]struct {
		d int64
		n int
	}
	used, best := 0, 0
	for j := 1; j < len(vs); j++ {
		d := vs[j] - vs[j-1]
		k := 0
		for k < used && seen[k].d != d {
			k++
		}
		if k == used {
			if used == len(seen) {
				continue
			}
			seen[k].d = d
			used++
		}
		seen[k].n++
		if seen[k].n > seen[best].n {
			best = k
		}
	}
	return seen[best].d
}

// readOtherSteps decodes the rest of a steps block of mode 2 into dst.
func (r *Reader) readOtherSteps(src []byte, dst []int64) ([]byte, error) {
	first, k := binary.Uvarint(src)
	if k <= 0 {
		return nil, corruptf("objectid: first value")
	}
	src = src[k:]
	common, k := binary.Uvarint(src)
	if k <= 0 {
		return nil, corruptf("objectid: common step")
	}
	src = src[k:]
	n, k := binary.Uvarint(src)
	if k <= 0 || n >= uint64(len(dst)) {
		return nil, corruptf("objectid: %d other steps for %d values", n, len(dst))
	}
	src = src[k:]
	gaps, others := grow(r.gaps, int(n)), grow(r.ints4, int(n))
	r.gaps, r.ints4 = gaps, others
	if n > 0 {
		var err error
		if src, err = r.id.readInts(src, gaps); err != nil {
			return nil, err
		}
		if src, err = r.id.readInts(src, others); err != nil {
			return nil, err
		}
	}
	dst[0] = unzigzag(first)
	step := unzigzag(common)
	next, g := int64(-1), 0
	if n > 0 {
		next += gaps[0]
	}
	for j := 1; j < len(dst); j++ {
		d := step
		if g < len(gaps) && int64(j-1) == next {
			d = others[g]
			if g++; g < len(gaps) {
				if gaps[g] <= 0 {
					return nil, corruptf("objectid: gap %d", gaps[g])
				}
				next += gaps[g]
			}
		}
		dst[j] = dst[j-1] + d
	}
	if g != len(gaps) {
		return nil, corruptf("objectid: %d of %d other steps placed", g, len(gaps))
	}
	return src, nil
}

// readSteps decodes a steps block of len(dst) values into dst and returns
// the bytes after it.
func (r *Reader) readSteps(src []byte, dst []int64) ([]byte, error) {
	if len(src) < 1 {
		return nil, corruptf("objectid: steps mode")
	}
	mode := src[0]
	src = src[1:]
	switch mode {
	case 0:
		return r.id.readInts(src, dst)
	case 1:
	case 2:
		return r.readOtherSteps(src, dst)
	default:
		return nil, corruptf("objectid: steps mode %d", mode)
	}
	first, k := binary.Uvarint(src)
	if k <= 0 {
		return nil, corruptf("objectid: first value")
	}
	src = src[k:]
	ns, k := binary.Uvarint(src)
	if k <= 0 || ns > maxSteps || (ns == 0) != (len(dst) == 1) {
		return nil, corruptf("objectid: %d steps for %d values", ns, len(dst))
	}
	src = src[k:]
	var steps [maxSteps]int64
	for j := range ns {
		d, k := binary.Uvarint(src)
		if k <= 0 {
			return nil, corruptf("objectid: step")
		}
		steps[j] = unzigzag(d)
		src = src[k:]
	}
	dst[0] = unzigzag(first)
	if ns == 1 {
		for j := 1; j < len(dst); j++ {
			dst[j] = dst[j-1] + steps[0]
		}
		return src, nil
	}
	// The indices go in dst[1:] and are replaced by the values in place.
	src, err := r.id.readInts(src, dst[1:])
	if err != nil {
		return nil, err
	}
	for j := 1; j < len(dst); j++ {
		x := dst[j]
		if uint64(x) >= ns {
			return nil, corruptf("objectid: step index %d of %d", x, ns)
		}
		dst[j] = dst[j-1] + steps[x]
	}
	return src, nil
}

// readObjectIDColumn decodes an ObjectId column into dst.IDs.
func (r *Reader) readObjectIDColumn(src []byte, m *fieldMeta, dst *Column) ([]byte, error) {
	count, present := m.count, dst.Present
	secs := grow(r.ints, count)
	r.ints = secs
	src, err := r.readSteps(src, secs)
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
	if src, err = r.readSteps(src, counters); err != nil {
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
