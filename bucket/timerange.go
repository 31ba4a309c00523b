package bucket

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
)

// RowRange returns the rows [first, last) whose times are in [lo, hi]: a
// query's range cut out of a bucket, counted as last - first, with no field
// column and at most two blocks of the time column decoded. first is the
// number of rows with a time below lo, also when the range is empty (lo >
// hi: then last = first). The times must be sorted (a bucket Hourglass
// stores is); RowRange returns ErrUnsorted when they are not, unless every
// row is on one side of the range or in it.
//
// A time column in blocks (the encoder writes them for sorted columns of
// 768 rows or more when they cost little: irregular times) is searched by
// the blocks' first times and one or two blocks of 256 rows are decoded;
// one of deltas of deltas (regular times) is walked without storing a
// time; any other is decoded whole. It is not safe for concurrent use, as
// no Reader method is.
func (r *Reader) RowRange(lo, hi int64) (first, last int, err error) {
	if r.rows == 0 {
		return 0, 0, corruptf("no bucket")
	}
	if lo > hi {
		hi = lo - 1 // the empty range at lo
	}
	switch {
	case lo > r.maxT:
		return r.rows, r.rows, nil
	case hi < r.minT:
		return 0, 0, nil
	case lo <= r.minT && hi >= r.maxT:
		return 0, r.rows, nil
	}
	src, base, scale, err := r.timeColumn()
	if err != nil {
		return 0, 0, err
	}
	switch src[0] {
	case timeBlocks:
		return r.blocksRange(src, base, scale, lo, hi)
	case timeDoD:
		return r.walkRange(src, scale, lo, hi)
	}
	times, err := r.Times(r.rangeTimes)
	r.rangeTimes = times
	if err != nil {
		return 0, 0, err
	}
	if !slices.IsSorted(times) {
		return 0, 0, ErrUnsorted
	}
	first = sort.Search(len(times), func(i int) bool { return times[i] >= lo })
	last = sort.Search(len(times), func(i int) bool { return times[i] > hi })
	return first, last, nil
}

// TimesRange decodes the times of rows [first, last), appending them to
// dst[:0]; 0 <= first <= last <= Rows(), or it returns ErrRowIndex. Of a
// time column in blocks only the blocks holding those rows are decoded.
func (r *Reader) TimesRange(first, last int, dst []int64) ([]int64, error) {
	dst = dst[:0]
	if r.rows == 0 {
		return dst, corruptf("no bucket")
	}
	if first < 0 || first > last || last > r.rows {
		return dst, fmt.Errorf("%w: rows [%d, %d) of %d", ErrRowIndex, first, last, r.rows)
	}
	if first == last {
		return dst, nil
	}
	src, base, scale, err := r.timeColumn()
	if err != nil {
		return dst, err
	}
	if src[0] != timeBlocks {
		times, err := r.Times(r.rangeTimes)
		r.rangeTimes = times
		if err != nil {
			return dst, err
		}
		return append(dst, times[first:last]...), nil
	}
	k, p, err := r.parseTimeBlocks(src)
	if err != nil {
		return dst, err
	}
	for j := first / k; j*k < last; j++ {
		times, err := r.decodeTimeBlock(p, k, j, base, scale)
		if err != nil {
			return dst[:0], err
		}
		if len(dst) > 0 && times[0] < dst[len(dst)-1] {
			return dst[:0], corruptf("time column: block %d starts before block %d ends", j, j-1)
		}
		dst = append(dst, times[max(first-j*k, 0):min(last-j*k, len(times))]...)
	}
	return dst, nil
}

// parseTimeBlocks reads the head of a time column in mode timeBlocks: it
// returns the block rows k and the blocks' bytes, and sets r.blockEnds to
// where each block ends in them.
func (r *Reader) parseTimeBlocks(src []byte) (k int, p []byte, err error) {
	bk, n := binary.Uvarint(src[1:])
	if n <= 0 || bk < 2 || bk >= uint64(r.rows) {
		return 0, nil, corruptf("time column: blocks of %d of %d rows", bk, r.rows)
	}
	k = int(bk)
	nb := (r.rows + k - 1) / k
	p = src[1+n:]
	if nb-1 > len(p) {
		return 0, nil, corruptf("time column: %d blocks in %d bytes", nb, len(p))
	}
	ends := grow(r.blockEnds, nb)
	r.blockEnds = ends
	end := 0
	for j := range nb - 1 {
		l, n := binary.Uvarint(p)
		// A block holds a mode and a first time: 2 bytes at least.
		if n <= 0 || l < 2 || l > uint64(len(p)) {
			return 0, nil, corruptf("time column: block %d of %d bytes, %d left", j, l, len(p))
		}
		p = p[n:]
		end += int(l)
		ends[j] = end
	}
	if end+2 > len(p) {
		return 0, nil, corruptf("time column: blocks take %d bytes, %d left", end+2, len(p))
	}
	ends[nb-1] = len(p)
	return k, p, nil
}

// readTimeBlocks decodes every block of a time column in mode timeBlocks
// into dst, values relative to base.
func (r *Reader) readTimeBlocks(src []byte, dst []int64, base int64) error {
	k, p, err := r.parseTimeBlocks(src)
	if err != nil {
		return err
	}
	start := 0
	for j, end := range r.blockEnds {
		if err := r.readTimesIn(p[start:end], dst[j*k:min((j+1)*k, len(dst))], base); err != nil {
			return fmt.Errorf("block %d: %w", j, err)
		}
		start = end
	}
	return nil
}

// decodeTimeBlock decodes block j of p (parseTimeBlocks) into r.blockTimes
// and returns its times, which it checks are sorted and within the bucket's
// time range.
func (r *Reader) decodeTimeBlock(p []byte, k, j int, base, scale int64) ([]int64, error) {
	start := 0
	if j > 0 {
		start = r.blockEnds[j-1]
	}
	times := grow(r.blockTimes, min(k, r.rows-j*k))
	r.blockTimes = times
	if err := r.readTimesIn(p[start:r.blockEnds[j]], times, base); err != nil {
		return nil, fmt.Errorf("block %d: %w", j, err)
	}
	if scale != 1 {
		for i, o := range times {
			times[i] = r.minT + o*scale
		}
	}
	prev := r.minT
	for _, t := range times {
		if t < prev || t > r.maxT {
			return nil, corruptf("time column: block %d: time %d after %d, range [%d, %d]", j, t, prev, r.minT, r.maxT)
		}
		prev = t
	}
	return times, nil
}

// blockFirst returns the first time of block j of p without decoding the
// block: it follows the block's mode byte.
func (r *Reader) blockFirst(p []byte, j int, base, scale int64) (int64, error) {
	start := 0
	if j > 0 {
		start = r.blockEnds[j-1]
	}
	v, n := binary.Uvarint(p[start+1 : r.blockEnds[j]])
	if n <= 0 {
		return 0, corruptf("time column: block %d: first time", j)
	}
	if scale != 1 {
		return r.minT + int64(v)*scale, nil
	}
	return base + int64(v), nil
}

// blocksRange is RowRange of a time column in mode timeBlocks.
func (r *Reader) blocksRange(src []byte, base, scale, lo, hi int64) (first, last int, err error) {
	k, p, err := r.parseTimeBlocks(src)
	if err != nil {
		return 0, 0, err
	}
	decoded := -1 // the block in r.blockTimes
	// count returns the rows whose time is below x, or at most x when
	// orEqual: those of the blocks before the last block that starts below
	// (or at) x, and that block's.
	count := func(x int64, orEqual bool) (int, error) {
		below := func(t int64) bool { return t < x || orEqual && t == x }
		i, j := 0, len(r.blockEnds)
		for i < j {
			m := int(uint(i+j) >> 1)
			t, err := r.blockFirst(p, m, base, scale)
			if err != nil {
				return 0, err
			}
			if below(t) {
				i = m + 1
			} else {
				j = m
			}
		}
		if i == 0 {
			return 0, nil
		}
		b := i - 1
		times := r.blockTimes
		if b != decoded {
			if times, err = r.decodeTimeBlock(p, k, b, base, scale); err != nil {
				return 0, err
			}
			decoded = b
		}
		n := sort.Search(len(times), func(i int) bool { return !below(times[i]) })
		if n == len(times) && b+1 < len(r.blockEnds) {
			// The next block starts at or above x: check it does not
			// start below this one's end.
			next, err := r.blockFirst(p, b+1, base, scale)
			if err != nil {
				return 0, err
			}
			if next < times[len(times)-1] {
				return 0, corruptf("time column: block %d starts before block %d ends", b+1, b)
			}
		}
		return b*k + n, nil
	}
	if first, err = count(lo, false); err != nil {
		return 0, 0, err
	}
	if last, err = count(hi, true); err != nil {
		return 0, 0, err
	}
	return first, max(first, last), nil
}

// walkRange is RowRange of a time column in mode timeDoD: it walks every
// token, a run of equal deltas at once, keeping only the last time and
// delta, and checks the times are sorted and within the bucket's range.
// Regular times are a few tokens.
func (r *Reader) walkRange(src []byte, scale, lo, hi int64) (first, last int, err error) {
	// Times as offsets from MinTime() in units of scale: o*scale is below
	// lo when o <= belowMax (none when lo <= MinTime()), at most hi when o
	// <= upToMax. RowRange's fast paths leave MinTime() <= hi and lo <=
	// MaxTime().
	span := uint64(r.maxT-r.minT) / uint64(scale)
	anyBelow := lo > r.minT
	var belowMax uint64
	if anyBelow {
		belowMax = (uint64(lo-r.minT) - 1) / uint64(scale)
	}
	upToMax := uint64(hi-r.minT) / uint64(scale)
	if hi >= r.maxT {
		upToMax = span
	}
	o, k := binary.Uvarint(src[1:])
	if k <= 0 || o > span {
		return 0, 0, corruptf("time column: first time")
	}
	src = src[1+k:]
	count := func(o uint64) {
		if anyBelow && o <= belowMax {
			first++
		}
		if o <= upToMax {
			last++
		}
	}
	count(o)
	if r.rows == 1 {
		return first, last, checkTrailing(src)
	}
	u, k := binary.Uvarint(src)
	if k <= 0 {
		return 0, 0, corruptf("time column: first delta")
	}
	src = src[k:]
	d := unzigzag(u)
	for i := 1; i < r.rows; {
		run := uint64(1)
		if i > 1 {
			u, k := binary.Uvarint(src)
			if k <= 0 {
				return 0, 0, corruptf("time column: row %d of %d", i, r.rows)
			}
			src = src[k:]
			if u != 0 {
				d += unzigzag(u)
			} else {
				run, k = binary.Uvarint(src)
				if k <= 0 || run == 0 || run > uint64(r.rows-i) {
					return 0, 0, corruptf("time column: run at row %d of %d", i, r.rows)
				}
				src = src[k:]
			}
		}
		// run rows at o+d, o+2d, ..., o+run*d, all within the span. d
		// wraps when the span is past MaxInt64: taken unsigned, a step
		// back is one past the span.
		ud := uint64(d)
		if ud > 0 && run > (span-o)/ud {
			if d < 0 && uint64(-d) <= o {
				return 0, 0, ErrUnsorted
			}
			return 0, 0, corruptf("time column: rows %d to %d past the time range", i, i+int(run))
		}
		if anyBelow {
			first += runAtMost(o, ud, run, belowMax)
		}
		last += runAtMost(o, ud, run, upToMax)
		o += run * ud
		i += int(run)
	}
	if err := checkTrailing(src); err != nil {
		return 0, 0, err
	}
	return first, last, nil
}

// runAtMost returns how many of o+d, o+2d, ..., o+n*d are at most x.
func runAtMost(o, d, n, x uint64) int {
	if o > x {
		return 0
	}
	if d == 0 {
		return int(n)
	}
	return int(min(n, (x-o)/d))
}

func checkTrailing(src []byte) error {
	if len(src) != 0 {
		return corruptf("time column: %d trailing bytes", len(src))
	}
	return nil
}
