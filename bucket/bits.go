package bucket

import (
	"encoding/binary"
	"math/bits"
)

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// bitLen is the number of bits needed for u (0 for 0).
func bitLen(u uint64) uint { return uint(bits.Len64(u)) }

func uvarintLen(u uint64) int { return (bits.Len64(u|1) + 6) / 7 }

func appendVarint(dst []byte, v int64) []byte { return binary.AppendUvarint(dst, zigzag(v)) }

// bitWriter appends bits least significant first.
type bitWriter struct {
	buf []byte
	acc uint64
	n   uint // bits in acc, always < 64
}

func (w *bitWriter) reset(buf []byte) { *w = bitWriter{buf: buf} }

// write appends the nb low bits of v; v must have no bits above nb; nb <= 64.
func (w *bitWriter) write(v uint64, nb uint) {
	w.acc |= v << w.n
	if w.n+nb < 64 {
		w.n += nb
		return
	}
	w.buf = binary.LittleEndian.AppendUint64(w.buf, w.acc)
	w.acc = v >> (64 - w.n) // 0 when w.n == 0: Go shifts of 64 yield 0
	w.n = w.n + nb - 64
}

// flush appends the pending bits, padded with zeros to a byte.
func (w *bitWriter) flush() []byte {
	for ; w.n > 0; w.n -= min(w.n, 8) {
		w.buf = append(w.buf, byte(w.acc))
		w.acc >>= 8
	}
	return w.buf
}

// bitPadding is the number of zero bytes a bitReader needs after its data.
const bitPadding = 16

// bitReader reads bits least significant first from a buffer followed by bitPadding zero
// bytes. Callers check pos against limit (the data's length in bits) before each read,
// so a read never passes the padding.
type bitReader struct {
	buf   []byte
	pos   uint
	limit uint
}

// read returns the next nb bits, nb <= 64.
func (r *bitReader) read(nb uint) uint64 {
	i := r.pos >> 3
	sh := r.pos & 7
	b := r.buf[i : i+9]
	w := binary.LittleEndian.Uint64(b) >> sh
	if nb+sh > 64 {
		w |= uint64(b[8]) << (64 - sh)
	}
	r.pos += nb
	return w & (1<<nb - 1)
}

// padded copies data into scratch followed by bitPadding zero bytes.
func padded(scratch, data []byte) []byte {
	scratch = append(scratch[:0], data...)
	var zero [bitPadding]byte
	return append(scratch, zero[:]...)
}
