package bucket

import (
	"encoding/binary"
	"fmt"
)

// Time column modes. Persisted: never renumber.
const (
	timeDoD    = 0 // delta of delta, zero runs length-encoded, varints
	timeDeltas = 1 // int stream of the deltas
	// timeScaled: an exponent byte k (3, 6 or 9), then a time column in
	// mode timeDoD or timeDeltas of (t - min_time) / 10^k, relative to 0:
	// times in whole microseconds, milliseconds or seconds.
	timeScaled = 2
)

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
	k := timeScale(ts, minT)
	if k == 0 {
		return e.appendTimesIn(dst, ts, minT)
	}
	scaled := e.scaled[:0]
	for _, t := range ts {
		scaled = append(scaled, (t-minT)/pow10Int[k])
	}
	e.scaled = scaled
	return e.appendTimesIn(append(dst, timeScaled, k), scaled, 0)
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
	src := r.data[r.timeOff : r.timeOff+r.timeLen]
	base, scale := r.minT, int64(1)
	if src[0] == timeScaled {
		if len(src) < 3 || src[1] == 0 || src[1] > 9 || src[1]%3 != 0 {
			return dst[:0], corruptf("time column: scale")
		}
		base, scale = 0, pow10Int[src[1]]
		src = src[2:]
	}
	mode := src[0]
	t0, k := binary.Uvarint(src[1:])
	if k <= 0 {
		return dst[:0], corruptf("time column: first time")
	}
	src = src[1+k:]
	dst[0] = base + int64(t0)
	switch mode {
	case timeDoD:
		if r.rows > 1 {
			d0, k := binary.Uvarint(src)
			if k <= 0 {
				return dst[:0], corruptf("time column: first delta")
			}
			src = src[k:]
			d := unzigzag(d0)
			t := dst[0] + d
			dst[1] = t
			for i := 2; i < len(dst); {
				u, k := binary.Uvarint(src)
				if k <= 0 {
					return dst[:0], corruptf("time column: row %d of %d", i, len(dst))
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
					return dst[:0], corruptf("time column: run at row %d of %d", i, len(dst))
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
		if r.rows < 2 {
			return dst[:0], corruptf("time column: deltas for one row")
		}
		var err error
		if src, err = r.id.readInts(src, dst[1:]); err != nil {
			return dst[:0], fmt.Errorf("time column: %w", err)
		}
		for i := 1; i < len(dst); i++ {
			dst[i] += dst[i-1]
		}
	default:
		return dst[:0], corruptf("time column mode %d", mode)
	}
	if len(src) != 0 {
		return dst[:0], corruptf("time column: %d trailing bytes", len(src))
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
	return dst, nil
}
