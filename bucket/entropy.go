package bucket

import (
	"encoding/binary"
	"errors"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
)

// Symbol block modes. Persisted: never renumber.
const (
	symRaw  = 0 // the symbols as bytes
	symRLE  = 1 // one byte, repeated
	symFSE  = 2 // uvarint length, fse block (klauspost/compress/fse)
	symHuff = 3 // uvarint length, huff0 1X block with its table (klauspost/compress/huff0)
)

// entropyEncoder holds the compressors' scratch space.
type entropyEncoder struct {
	fse  fse.Scratch
	huff huff0.Scratch
}

// appendSymbols appends syms (len >= 1) as a symbol block, in the smallest mode: a mode
// byte, then the payload. Huffman coding is taken over FSE even when it is up to slack
// bytes larger: its table is faster to build, which is much of decoding a few hundred
// symbols (a bucket's jittered time deltas: 6-9% off the decode, for a byte of ~1.5 KiB).
func (e *entropyEncoder) appendSymbols(dst []byte, syms []byte, slack int) []byte {
	best := symRaw
	bestLen := len(syms)
	var fseOut, huffOut []byte
	out, err := fse.Compress(syms, &e.fse)
	switch {
	case errors.Is(err, fse.ErrUseRLE):
		return append(dst, symRLE, syms[0])
	case err == nil && len(out)+uvarintLen(uint64(len(out))) < bestLen:
		best, bestLen, fseOut = symFSE, len(out)+uvarintLen(uint64(len(out))), out
	}
	if len(syms) <= huff0.BlockSizeMax {
		e.huff.Reuse = huff0.ReusePolicyNone
		out, _, err := huff0.Compress1X(syms, &e.huff)
		hlen := len(out) + uvarintLen(uint64(len(out)))
		switch {
		case errors.Is(err, huff0.ErrUseRLE):
			return append(dst, symRLE, syms[0])
		case err == nil && (hlen < bestLen || best == symFSE && hlen <= min(bestLen+slack, len(syms)-1)):
			best, huffOut = symHuff, out
		}
	}
	dst = append(dst, byte(best))
	switch best {
	case symFSE:
		dst = binary.AppendUvarint(dst, uint64(len(fseOut)))
		return append(dst, fseOut...)
	case symHuff:
		dst = binary.AppendUvarint(dst, uint64(len(huffOut)))
		return append(dst, huffOut...)
	}
	return append(dst, syms...)
}

// entropyDecoder holds the decompressors' scratch space.
type entropyDecoder struct {
	fse  fse.Scratch
	huff huff0.Scratch
	out  []byte
}

// readSymbols decodes a symbol block of exactly n symbols in mode from the start of src
// (after its mode byte) and returns them (valid until the next call) and the rest of src.
func (d *entropyDecoder) readSymbols(mode byte, src []byte, n int) ([]byte, []byte, error) {
	switch mode {
	case symRaw:
		if len(src) < n {
			return nil, nil, corruptf("raw symbols: %d bytes for %d symbols", len(src), n)
		}
		return src[:n], src[n:], nil
	case symRLE:
		if len(src) < 1 {
			return nil, nil, corruptf("rle symbols: empty")
		}
		if cap(d.out) < n {
			d.out = make([]byte, n)
		}
		out := d.out[:n]
		for i := range out {
			out[i] = src[0]
		}
		return out, src[1:], nil
	case symFSE, symHuff:
		l, k := binary.Uvarint(src)
		if k <= 0 || l > uint64(len(src)-k) {
			return nil, nil, corruptf("symbol block: length %d, %d bytes left", l, len(src))
		}
		block := src[k : k+int(l)]
		rest := src[k+int(l):]
		if mode == symFSE {
			// fse checks the limit every 256 symbols: allow that much over, then check exactly.
			d.fse.DecompressLimit = n + 512
			out, err := fse.Decompress(block, &d.fse)
			if err != nil {
				return nil, nil, corruptf("fse: %v", err)
			}
			if len(out) != n {
				return nil, nil, corruptf("fse: %d symbols, want %d", len(out), n)
			}
			return out, rest, nil
		}
		if n > huff0.BlockSizeMax {
			return nil, nil, corruptf("huff0 block of %d symbols", n)
		}
		d.huff.MaxDecodedSize = n
		s, remain, err := huff0.ReadTable(block, &d.huff)
		if err != nil {
			return nil, nil, corruptf("huff0 table: %v", err)
		}
		if cap(d.out) < n {
			d.out = make([]byte, n)
		}
		out, err := s.Decoder().Decompress1X(d.out[:0:n], remain)
		if err != nil {
			return nil, nil, corruptf("huff0: %v", err)
		}
		if len(out) != n {
			return nil, nil, corruptf("huff0: %d symbols, want %d", len(out), n)
		}
		return out, rest, nil
	}
	return nil, nil, corruptf("symbol block mode %d", mode)
}
