package bucket

import (
	"encoding/binary"
	"math/bits"
)

// Bitset stream modes. Persisted: never renumber.
const (
	bitsZero = 0 // every bit 0
	bitsOne  = 1 // every bit 1
	bitsRaw  = 2 // the bits, least significant first, ceil(n/8) bytes
	bitsRuns = 3 // first bit byte, uvarint number of runs, int stream of run lengths
)

// popcount counts the set bits among the first n bits of words.
func popcount(words []uint64, n int) int {
	c := 0
	full := n >> 6
	for _, w := range words[:full] {
		c += bits.OnesCount64(w)
	}
	if r := uint(n) & 63; r != 0 {
		c += bits.OnesCount64(words[full] & (1<<r - 1))
	}
	return c
}

// appendBitset appends the first n bits of words as a bitset stream.
func (e *Encoder) appendBitset(dst []byte, words []uint64, n int) []byte {
	ones := popcount(words, n)
	switch ones {
	case 0:
		return append(dst, bitsZero)
	case n:
		return append(dst, bitsOne)
	}
	rawLen := (n + 7) / 8
	// Run lengths, alternating, starting with the first bit's value.
	runs := e.runs[:0]
	first := words[0] & 1
	cur, run := first, int64(0)
	for i := 0; i < n && len(runs) < rawLen; i++ {
		b := words[i>>6] >> (uint(i) & 63) & 1
		if b != cur {
			runs = append(runs, run)
			cur, run = b, 0
		}
		run++
	}
	runs = append(runs, run)
	e.runs = runs
	if len(runs) <= rawLen/2 {
		start := len(dst)
		dst = append(dst, bitsRuns, byte(first))
		dst = binary.AppendUvarint(dst, uint64(len(runs)))
		dst = e.ie.appendInts(dst, runs)
		if len(dst)-start < 1+rawLen {
			return dst
		}
		dst = dst[:start]
	}
	dst = append(dst, bitsRaw)
	for i := 0; i < rawLen; i++ {
		b := byte(words[i>>3] >> (uint(i&7) * 8))
		if i == rawLen-1 && n&7 != 0 {
			b &= 1<<(uint(n)&7) - 1
		}
		dst = append(dst, b)
	}
	return dst
}

// readBitset decodes a bitset stream of n bits into words ((n+63)/64 of them).
func (r *Reader) readBitset(src []byte, words []uint64, n int) ([]byte, error) {
	if len(src) < 1 {
		return nil, corruptf("bitset: empty")
	}
	mode := src[0]
	src = src[1:]
	clear(words)
	switch mode {
	case bitsZero:
	case bitsOne:
		setRange(words, 0, n)
	case bitsRaw:
		l := (n + 7) / 8
		if len(src) < l {
			return nil, corruptf("bitset: %d bytes for %d bits", len(src), n)
		}
		for i, b := range src[:l] {
			words[i>>3] |= uint64(b) << (uint(i&7) * 8)
		}
		if r := uint(n) & 63; r != 0 {
			words[len(words)-1] &= 1<<r - 1
		}
		src = src[l:]
	case bitsRuns:
		if len(src) < 1 || src[0] > 1 {
			return nil, corruptf("bitset: first bit")
		}
		bit := src[0] == 1
		nr, k := binary.Uvarint(src[1:])
		if k <= 0 || nr == 0 || nr > uint64(n) {
			return nil, corruptf("bitset: %d runs for %d bits", nr, n)
		}
		src = src[1+k:]
		r.ints = grow(r.ints, int(nr))
		var err error
		if src, err = r.id.readInts(src, r.ints); err != nil {
			return nil, err
		}
		pos := 0
		for _, l := range r.ints {
			if l <= 0 || uint64(l) > uint64(n-pos) {
				return nil, corruptf("bitset: run of %d at bit %d of %d", l, pos, n)
			}
			if bit {
				setRange(words, pos, pos+int(l))
			}
			pos += int(l)
			bit = !bit
		}
		if pos != n {
			return nil, corruptf("bitset: runs cover %d of %d bits", pos, n)
		}
	default:
		return nil, corruptf("bitset mode %d", mode)
	}
	return src, nil
}

// setRange sets bits [from, to) of words.
func setRange(words []uint64, from, to int) {
	for from < to {
		w, b := from>>6, uint(from)&63
		nb := min(uint(to-from), 64-b)
		words[w] |= (1<<nb - 1) << b
		from += int(nb)
	}
}
