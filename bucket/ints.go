package bucket

import (
	"encoding/binary"
)

// An int stream holds n int64 values (n known from the context) as a transform to
// unsigned values u followed by a packing of the u. The first byte is
// transform<<7 | noExtra<<3 | packing. Persisted: never renumber.
const (
	transFOR   = 0 // u[i] = v[i] - base, base = min(v): frame of reference
	transDelta = 1 // u[i-1] = zigzag(v[i] - v[i-1]) for i >= 1, base = v[0]

	packConst  = 0 // every u equal: uvarint u (nothing when there are no u)
	packBits   = 1 // width byte (0..64), then every u in width bits, least significant first
	packVarint = 2 // uvarint byte length, then each u as a uvarint
	// packSymbols+mode: the u's symbols as a symbol block payload in mode (symRaw..symHuff),
	// then, unless the noExtra bit is set, uvarint byte length and the extra bits.
	packSymbols = 3
	// packShared: the u's symbols are this stream's run of the bucket's shared symbol
	// block (VersionShared), then, unless the noExtra bit is set, uvarint byte length and
	// the extra bits.
	packShared = 7
	packMax    = packShared

	noExtraFlag = 1 << 3
)

// Symbols: u < symLiterals is its own symbol; a larger u of bit length b is symbol
// b + symLiterals - 5 followed by its b-1 bits below the leading one in the extra bits.
const (
	symLiterals = 16
	maxSymbol   = symLiterals + 64 - 5
)

// symbolOf returns u's symbol and the number of extra bits it needs.
func symbolOf(u uint64) (byte, uint) {
	if u < symLiterals {
		return byte(u), 0
	}
	b := bitLen(u)
	return byte(b + symLiterals - 5), b - 1
}

// intEncoder encodes int streams, reusing its scratch space.
type intEncoder struct {
	// plain leaves out the symbol packings, for the blocks of a time column
	// (timeBlocks): an entropy coded stream first decodes its table, which
	// for a block of 128 rows takes longer than its values. Columns of
	// jittered times in such blocks decoded 1.5 times slower than in one
	// piece, plain ones 1.7 times faster (BenchmarkRowRange, decode-now).
	plain bool
	ent   entropyEncoder
	us    []uint64
	syms  []byte
	block []byte
	bw    bitWriter
	// last describes the stream appended last when it had symbols (hasSyms): its
	// transform, base, symbols (syms) and extra bits (extra), for a shared block.
	last struct {
		hasSyms bool
		trans   byte
		base    int64
		extra   []byte
	}
}

// appendInts appends vals (len >= 1) as an int stream.
func (e *intEncoder) appendInts(dst []byte, vals []int64) []byte {
	lo := vals[0]
	for _, v := range vals {
		lo = min(lo, v)
	}
	var estFOR, estDelta uint
	prev := vals[0]
	for _, v := range vals {
		estFOR += bitLen(uint64(v - lo))
		estDelta += bitLen(zigzag(v - prev))
		prev = v
	}
	us := e.us[:0]
	if estDelta <= estFOR {
		for i := 1; i < len(vals); i++ {
			us = append(us, zigzag(vals[i]-vals[i-1]))
		}
		e.us = us
		return e.appendUints(dst, transDelta, vals[0], us)
	}
	for _, v := range vals {
		us = append(us, uint64(v-lo))
	}
	e.us = us
	return e.appendUints(dst, transFOR, lo, us)
}

func (e *intEncoder) appendUints(dst []byte, trans byte, base int64, us []uint64) []byte {
	e.last.hasSyms = false
	allEqual := true
	var or uint64
	varLen := 0
	for _, u := range us {
		or |= u
		allEqual = allEqual && u == us[0]
		varLen += uvarintLen(u)
	}
	if allEqual {
		dst = append(dst, trans<<7|packConst)
		dst = appendVarint(dst, base)
		if len(us) > 0 {
			dst = binary.AppendUvarint(dst, us[0])
		}
		return dst
	}
	width := bitLen(or)
	m := len(us)
	best := packBits
	bestLen := 1 + (m*int(width)+7)/8
	if l := uvarintLen(uint64(varLen)) + varLen; l < bestLen {
		best, bestLen = packVarint, l
	}
	var extra []byte
	if m >= 8 && !e.plain {
		syms := e.syms[:0]
		e.bw.reset(e.bw.buf[:0])
		for _, u := range us {
			s, nb := symbolOf(u)
			syms = append(syms, s)
			if nb > 0 {
				e.bw.write(u&(1<<nb-1), nb)
			}
		}
		e.syms = syms
		extra = e.bw.flush()
		e.last.hasSyms, e.last.trans, e.last.base, e.last.extra = true, trans, base, extra
		// Within 1/64 of the extra bits' bytes, the faster symbol decoding.
		e.block = e.ent.appendSymbols(e.block[:0], syms, len(extra)/64)
		if l := len(e.block) - 1 + uvarintLen(uint64(len(extra))) + len(extra); l < bestLen || l == bestLen && len(extra) == 0 {
			best = packSymbols
		}
	}
	head := trans<<7 | byte(best)
	if best == packSymbols {
		head += e.block[0]
		if len(extra) == 0 {
			head |= noExtraFlag
		}
	}
	dst = append(dst, head)
	dst = appendVarint(dst, base)
	switch best {
	case packBits:
		var bw bitWriter
		bw.reset(append(dst, byte(width)))
		for _, u := range us {
			bw.write(u, width)
		}
		dst = bw.flush()
	case packVarint:
		dst = binary.AppendUvarint(dst, uint64(varLen))
		for _, u := range us {
			dst = binary.AppendUvarint(dst, u)
		}
	case packSymbols:
		dst = append(dst, e.block[1:]...)
		if len(extra) > 0 {
			dst = binary.AppendUvarint(dst, uint64(len(extra)))
			dst = append(dst, extra...)
		}
	}
	return dst
}

// appendSharedStream appends an int stream whose symbols are in the bucket's shared block.
func appendSharedStream(dst []byte, trans byte, base int64, extra []byte) []byte {
	head := trans<<7 | packShared
	if len(extra) == 0 {
		head |= noExtraFlag
	}
	dst = append(dst, head)
	dst = appendVarint(dst, base)
	if len(extra) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(extra)))
		dst = append(dst, extra...)
	}
	return dst
}

// intDecoder decodes int streams, reusing its scratch space.
type intDecoder struct {
	ent  entropyDecoder
	bits []byte
	// shared holds the symbols of the stream being read when it is packShared.
	shared []byte
}

// readInts decodes an int stream of len(dst) values from the start of src into dst and
// returns the rest of src.
func (d *intDecoder) readInts(src []byte, dst []int64) ([]byte, error) {
	n := len(dst)
	if n == 0 {
		return src, nil
	}
	if len(src) < 1 {
		return nil, corruptf("int stream: empty")
	}
	trans, pack, noExtra := src[0]>>7, src[0]&7, src[0]&noExtraFlag != 0
	if pack > packMax || src[0]&0x70 != 0 || noExtra && pack < packSymbols {
		return nil, corruptf("int stream: header %#x", src[0])
	}
	ub, k := binary.Uvarint(src[1:])
	if k <= 0 {
		return nil, corruptf("int stream: base")
	}
	base := unzigzag(ub)
	src = src[1+k:]
	out := dst // the u values, stored as int64 bit patterns
	if trans == transDelta {
		out = dst[1:]
	}
	m := len(out)
	switch pack {
	case packConst:
		var u uint64
		if m > 0 {
			if u, k = binary.Uvarint(src); k <= 0 {
				return nil, corruptf("int stream: constant")
			}
			src = src[k:]
		}
		for i := range out {
			out[i] = int64(u)
		}
	case packBits:
		if len(src) < 1 || src[0] > 64 {
			return nil, corruptf("int stream: bit width")
		}
		width := uint(src[0])
		l := (uint64(m)*uint64(width) + 7) / 8
		if l > uint64(len(src)-1) {
			return nil, corruptf("int stream: %d packed bytes, %d left", l, len(src)-1)
		}
		d.bits = padded(d.bits, src[1:1+l])
		src = src[1+l:]
		br := bitReader{buf: d.bits}
		for i := range out {
			out[i] = int64(br.read(width))
		}
	case packVarint:
		l, k := binary.Uvarint(src)
		if k <= 0 || l > uint64(len(src)-k) {
			return nil, corruptf("int stream: varint length %d, %d left", l, len(src))
		}
		p := src[k : k+int(l)]
		src = src[k+int(l):]
		for i := range out {
			u, k := binary.Uvarint(p)
			if k <= 0 {
				return nil, corruptf("int stream: varint %d of %d", i, m)
			}
			out[i] = int64(u)
			p = p[k:]
		}
		if len(p) != 0 {
			return nil, corruptf("int stream: %d trailing varint bytes", len(p))
		}
	default:
		var syms, rest []byte
		if pack == packShared {
			if d.shared == nil || len(d.shared) != m {
				return nil, corruptf("int stream: %d shared symbols for %d values", len(d.shared), m)
			}
			syms, rest = d.shared, src
		} else {
			var err error
			if syms, rest, err = d.ent.readSymbols(pack-packSymbols, src, m); err != nil {
				return nil, err
			}
		}
		var l uint64
		if !noExtra {
			l, k = binary.Uvarint(rest)
			if k <= 0 || l > uint64(len(rest)-k) {
				return nil, corruptf("int stream: extra bits length %d, %d left", l, len(rest))
			}
			rest = rest[k:]
		}
		d.bits = padded(d.bits, rest[:l])
		src = rest[l:]
		br := bitReader{buf: d.bits, limit: uint(l) * 8}
		out = out[:len(syms)]
		for i, s := range syms {
			u := uint64(s)
			if s >= symLiterals {
				if s > maxSymbol || br.pos > br.limit {
					return nil, corruptf("int stream: symbol %d at %d", s, i)
				}
				nb := uint(s) - (symLiterals - 4)
				u = 1<<nb | br.read(nb)
			}
			out[i] = int64(u)
		}
		if br.pos > br.limit {
			return nil, corruptf("int stream: extra bits overrun")
		}
	}
	if trans == transDelta {
		dst[0] = base
		v := base
		for i := 1; i < n; i++ {
			v += unzigzag(uint64(dst[i]))
			dst[i] = v
		}
	} else {
		for i := range dst {
			dst[i] += base
		}
	}
	return src, nil
}
