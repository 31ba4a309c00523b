package bucket

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Time column modes. Persisted: never renumber.
const (
	timeDoD    = 0 // delta of delta, zero runs length-encoded, varints
	timeDeltas = 1 // int stream of the deltas
	// timeScaled: an exponent byte k (3, 6 or 9), then a time column in
	// mode timeDoD or timeDeltas of (t - min_time) / 10^k, relative to 0:
	// times in whole microseconds, milliseconds or seconds.
	timeScaled = 2
	// timeBlocks: uvarint block rows k, the byte lengths (uvarint) of
	// every block but the last, then the blocks: each a time column in
	// mode timeDoD or timeDeltas of k rows (the last: the rest), relative
	// to the same base. The times are sorted, so that a reader finds a
	// range's rows by the blocks' first times and decodes one or two
	// blocks (RowRange, timerange.go).
	timeBlocks = 3
)

// timeBlockRows is the rows of a block of a time column in mode timeBlocks,
// weighed with BenchmarkRowRange and TestTimeIndexSize on jittered and
// exponential nanosecond times: blocks of 256 rows cost 1.5-2.9% of the
// bytes of buckets of 1,000 rows and ten int fields and find a range's rows
// 5.6 times faster than decoding every time; blocks of 128 rows cost
// 1.9-3.1% for about 7 times (jittered) and 4 times (exponential: some
// buckets' blocks do not pass timeBlocksShare), of 64 rows 4.5% and more of
// the time column (exponential times then never pass it).
const timeBlockRows = 256

// timeBlocksMin is the fewest blocks a column is split into: with two, a
// range decodes half the column or all of it, not worth a block's bytes.
const timeBlocksMin = 3

// timeBlocksShare bounds what blocks may cost: at most 1/timeBlocksShare of
// the column in one piece. Regular times (a run of equal deltas: a few bytes
// a column) never pay for blocks; finding a range in them walks a few tokens
// anyway.
const timeBlocksShare = 16

// timeScale returns the largest k of 9, 6 and 3 such that every time of ts
// is min_time plus a multiple of 10^k, or 0 when there is none. Times
// written in milliseconds (a BSON date, line protocol at precision=ms)
// then cost their milliseconds' entropy, not that of the nanoseconds'
// zero digits.
func timeScale(ts []int64, minT int64) byte {
	k := byte(9)
	for _, t := range ts {
		o := t - minT // wraps for spans past MaxInt64: still a multiple or not
		for o%pow10Int[k] != 0 {
			if k -= 3; k == 0 {
				return 0
			}
		}
	}
	return k
}

// appendTimes appends the time column.
func (e *Encoder) appendTimes(dst []byte, ts []int64, minT int64) []byte {
	if len(ts) < 2 {
		return e.appendTimesIn(dst, ts, minT)
	}
	sorted := slices.IsSorted(ts)
	k := timeScale(ts, minT)
	if k == 0 {
		return e.appendTimesBlocks(dst, ts, minT, sorted)
	}
	scaled := e.scaled[:0]
	for _, t := range ts {
		scaled = append(scaled, (t-minT)/pow10Int[k])
	}
	e.scaled = scaled
	return e.appendTimesBlocks(append(dst, timeScaled, k), scaled, 0, sorted)
}

// appendTimesBlocks appends a time column of vals relative to base: in
// mode timeBlocks when the times are sorted, make timeBlocksMin blocks or
// more and cost at most 1/timeBlocksShare more than one piece, otherwise in
// one piece (appendTimesIn). vals must be sorted too: a scaled column of a
// span past MaxInt64 wraps.
func (e *Encoder) appendTimesBlocks(dst []byte, vals []int64, base int64, sorted bool) []byte {
	start := len(dst)
	dst = e.appendTimesIn(dst, vals, base)
	k := e.blockRows
	if k == 0 {
		k = timeBlockRows
	}
	if k < 0 || !sorted || len(vals) < timeBlocksMin*k || !slices.IsSorted(vals) {
		return dst
	}
	one := len(dst) - start
	blocks, ends := e.tblocks[:0], e.tends[:0]
	e.ie.plain = true
	for s := 0; s < len(vals); s += k {
		blocks = e.appendTimesIn(blocks, vals[s:min(s+k, len(vals))], base)
		ends = append(ends, len(blocks))
	}
	e.ie.plain = false
	e.tblocks, e.tends = blocks, ends
	size := 1 + uvarintLen(uint64(k)) + len(blocks)
	prev := 0
	for _, end := range ends[:len(ends)-1] {
		size += uvarintLen(uint64(end - prev))
		prev = end
	}
	if size > one+one/timeBlocksShare && !e.forceBlocks {
		return dst
	}
	dst = append(dst[:start], timeBlocks)
	dst = binary.AppendUvarint(dst, uint64(k))
	prev = 0
	for _, end := range ends[:len(ends)-1] {
		dst = binary.AppendUvarint(dst, uint64(end-prev))
		prev = end
	}
	return append(dst, blocks...)
}

// appendTimesIn appends a time column in mode timeDoD or timeDeltas.
func (e *Encoder) appendTimesIn(dst []byte, ts []int64, minT int64) []byte {
	start := len(dst)
	dst = append(dst, timeDoD)
	dst = binary.AppendUvarint(dst, uint64(ts[0]-minT))
	if len(ts) < 2 {
		return dst
	}
	prevD := ts[1] - ts[0]
	dst = appendVarint(dst, prevD)
	for i := 2; i < len(ts); {
		d := ts[i] - ts[i-1]
		if d == prevD {
			j := i + 1
			for j < len(ts) && ts[j]-ts[j-1] == d {
				j++
			}
			dst = append(dst, 0)
			dst = binary.AppendUvarint(dst, uint64(j-i))
			i = j
			continue
		}
		dst = binary.AppendUvarint(dst, zigzag(d-prevD))
		prevD = d
		i++
	}
	if len(dst)-start <= len(ts)/2 {
		return dst
	}
	// Irregular times: try entropy coding the deltas.
	deltas := e.ints[:0]
	for i := 1; i < len(ts); i++ {
		deltas = append(deltas, ts[i]-ts[i-1])
	}
	e.ints = deltas
	alt := len(dst)
	dst = append(dst, timeDeltas)
	dst = binary.AppendUvarint(dst, uint64(ts[0]-minT))
	dst = e.ie.appendInts(dst, deltas)
	if len(dst)-alt < alt-start {
		return append(dst[:start], dst[alt:]...)
	}
	return dst[:alt]
}

// Times decodes the time column, appending Rows() values to dst[:0].
func (r *Reader) Times(dst []int64) ([]int64, error) {
	if r.rows == 0 {
		return dst[:0], corruptf("no bucket")
	}
	dst = grow(dst, r.rows)
	src, base, scale, err := r.timeColumn()
	if err != nil {
		return dst[:0], err
	}
	blocks := src[0] == timeBlocks
	if blocks {
		err = r.readTimeBlocks(src, dst, base)
	} else {
		err = r.readTimesIn(src, dst, base)
	}
	if err != nil {
		return dst[:0], err
	}
	if scale != 1 {
		for i, o := range dst {
			dst[i] = r.minT + o*scale
		}
	}
	lo, hi := dst[0], dst[0]
	for _, t := range dst {
		lo = min(lo, t)
		hi = max(hi, t)
	}
	if lo != r.minT || hi != r.maxT {
		return dst[:0], corruptf("times span [%d, %d], header says [%d, %d]", lo, hi, r.minT, r.maxT)
	}
	if blocks && !slices.IsSorted(dst) {
		return dst[:0], corruptf("time column: blocks of unsorted times")
	}
	return dst, nil
}

// timeColumn returns the time column from its mode byte on, past the scale
// of a scaled column (mode timeDoD, timeDeltas or timeBlocks), the base its
// values are relative to, and the scale: a time is base + v, or, when scale
// is not 1, MinTime() + v*scale.
func (r *Reader) timeColumn() (src []byte, base, scale int64, err error) {
	src = r.data[r.timeOff : r.timeOff+r.timeLen]
	if src[0] != timeScaled {
		return src, r.minT, 1, nil
	}
	if len(src) < 3 || src[1] == 0 || src[1] > 9 || src[1]%3 != 0 {
		return nil, 0, 0, corruptf("time column: scale")
	}
	return src[2:], 0, pow10Int[src[1]], nil
}

// readTimesIn decodes a time column in mode timeDoD or timeDeltas of
// len(dst) >= 1 rows relative to base, which must take all of src.
func (r *Reader) readTimesIn(src []byte, dst []int64, base int64) error {
	if len(src) < 1 {
		return corruptf("time column: empty")
	}
	mode := src[0]
	t0, k := binary.Uvarint(src[1:])
	if k <= 0 {
		return corruptf("time column: first time")
	}
	src = src[1+k:]
	dst[0] = base + int64(t0)
	switch mode {
	case timeDoD:
		if len(dst) > 1 {
			d0, k := binary.Uvarint(src)
			if k <= 0 {
				return corruptf("time column: first delta")
			}
			src = src[k:]
			d := unzigzag(d0)
			t := dst[0] + d
			dst[1] = t
			for i := 2; i < len(dst); {
				u, k := binary.Uvarint(src)
				if k <= 0 {
					return corruptf("time column: row %d of %d", i, len(dst))
				}
				src = src[k:]
				if u != 0 {
					d += unzigzag(u)
					t += d
					dst[i] = t
					i++
					continue
				}
				run, k := binary.Uvarint(src)
				if k <= 0 || run == 0 || run > uint64(len(dst)-i) {
					return corruptf("time column: run at row %d of %d", i, len(dst))
				}
				src = src[k:]
				run0 := dst[i : i+int(run)]
				for j := range run0 {
					t += d
					run0[j] = t
				}
				i += int(run)
			}
		}
	case timeDeltas:
		if len(dst) < 2 {
			return corruptf("time column: deltas for one row")
		}
		var err error
		if src, err = r.id.readInts(src, dst[1:]); err != nil {
			return fmt.Errorf("time column: %w", err)
		}
		for i := 1; i < len(dst); i++ {
			dst[i] += dst[i-1]
		}
	default:
		return corruptf("time column mode %d", mode)
	}
	if len(src) != 0 {
		return corruptf("time column: %d trailing bytes", len(src))
	}
	return nil
}
