package bucket

import (
	"encoding/binary"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// stringSpec: a TypeString column as a dictionary of its distinct present values, in
// order of first appearance, and an int stream of their indices (none when the
// dictionary holds one string). No statistics.
var stringSpec = encodingSpec{
	name:  "string",
	types: 1<<TypeString | 1<<TypeBSON,
}

// Dictionary blob modes. Persisted: never renumber.
const (
	blobRaw  = 0 // uvarint length, blob
	blobZstd = 1 // uvarint raw length, uvarint compressed length, zstd frame
)

// maxZstdRatio bounds raw/compressed for zstd blobs, so a decoder allocates at most that
// many bytes per input byte.
const maxZstdRatio = 255

// minZstdBlob is the smallest dictionary blob the encoder tries to compress: below it,
// a zstd frame's header alone takes what compression could save.
const minZstdBlob = 64

// appendStringColumn appends the present values of c, a string column, and sets m.
func (e *Encoder) appendStringColumn(dst []byte, c *Column, rows int, m *fieldMeta) []byte {
	m.enc = encString
	if e.dict == nil {
		e.dict = make(map[string]int32)
	}
	clear(e.dict)
	list := e.dictList[:0]
	idx := e.ints[:0]
	for i, s := range c.Strings {
		if m.count < rows && c.Present[i>>6]&(1<<(uint(i)&63)) == 0 {
			continue
		}
		j, ok := e.dict[s]
		if !ok {
			j = int32(len(list))
			e.dict[s] = j
			list = append(list, s)
		}
		idx = append(idx, int64(j))
	}
	e.dictList, e.ints = list, idx
	blob := e.blob[:0]
	for _, s := range list {
		blob = binary.AppendUvarint(blob, uint64(len(s)))
	}
	for _, s := range list {
		blob = append(blob, s...)
	}
	e.blob = blob
	dst = binary.AppendUvarint(dst, uint64(len(list)))
	if len(blob) >= minZstdBlob {
		if e.zenc == nil {
			e.zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		}
		e.zbuf = e.zenc.EncodeAll(blob, e.zbuf[:0])
		z := len(e.zbuf)
		if z+uvarintLen(uint64(z)) < len(blob) && len(blob) <= maxZstdRatio*z {
			dst = append(dst, blobZstd)
			dst = binary.AppendUvarint(dst, uint64(len(blob)))
			dst = binary.AppendUvarint(dst, uint64(z))
			dst = append(dst, e.zbuf...)
			blob = nil
		}
	}
	if blob != nil {
		dst = append(dst, blobRaw)
		dst = binary.AppendUvarint(dst, uint64(len(blob)))
		dst = append(dst, blob...)
	}
	if len(list) > 1 {
		dst = e.ie.appendInts(dst, idx)
	}
	return dst
}

var (
	zstdOnce sync.Once
	zstdDec  *zstd.Decoder
)

// zstdDecoder returns the decoder shared by all Readers; its DecodeAll is safe for
// concurrent use.
func zstdDecoder() *zstd.Decoder {
	zstdOnce.Do(func() {
		zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<28))
	})
	return zstdDec
}

// readStringColumn decodes a string column into dst.Strings.
func (r *Reader) readStringColumn(src []byte, m *fieldMeta, dst *Column) ([]byte, error) {
	dst.Strings = grow(dst.Strings, r.rows)
	count, present := m.count, dst.Present
	nd, k := binary.Uvarint(src)
	if k <= 0 || nd == 0 || nd > uint64(count) {
		return nil, corruptf("strings: dictionary of %d for %d values", nd, count)
	}
	src = src[k:]
	blob, src, err := r.readBlob(src)
	if err != nil {
		return nil, err
	}
	if err := r.readDict(blob, nd); err != nil {
		return nil, err
	}
	if nd == 1 {
		s := r.dict[0]
		for i := range dst.Strings {
			if present == nil || present[i>>6]&(1<<(uint(i)&63)) != 0 {
				dst.Strings[i] = s
			} else {
				dst.Strings[i] = ""
			}
		}
		return src, nil
	}
	idx := grow(r.ints, count)
	r.ints = idx
	src, err = r.id.readInts(src, idx)
	if err != nil {
		return nil, err
	}
	j := 0
	for i := range dst.Strings {
		if present != nil && present[i>>6]&(1<<(uint(i)&63)) == 0 {
			dst.Strings[i] = ""
			continue
		}
		x := idx[j]
		if uint64(x) >= nd {
			return nil, corruptf("strings: index %d of %d", x, nd)
		}
		dst.Strings[i] = r.dict[x]
		j++
	}
	return src, nil
}

// readBlob returns the dictionary blob at the start of src, decompressed, and the rest
// of src.
func (r *Reader) readBlob(src []byte) (blob, rest []byte, err error) {
	if len(src) < 1 {
		return nil, nil, corruptf("strings: blob mode")
	}
	mode := src[0]
	src = src[1:]
	switch mode {
	case blobRaw:
		l, k := binary.Uvarint(src)
		if k <= 0 || l > uint64(len(src)-k) {
			return nil, nil, corruptf("strings: blob length %d, %d left", l, len(src))
		}
		return src[k : k+int(l)], src[k+int(l):], nil
	case blobZstd:
		raw, k := binary.Uvarint(src)
		if k <= 0 {
			return nil, nil, corruptf("strings: raw length")
		}
		src = src[k:]
		cl, k := binary.Uvarint(src)
		if k <= 0 || cl > uint64(len(src)-k) || raw > maxZstdRatio*cl || raw > 1<<28 {
			return nil, nil, corruptf("strings: zstd %d bytes to %d, %d left", cl, raw, len(src))
		}
		out, err := zstdDecoder().DecodeAll(src[k:k+int(cl)], grow(r.blob, int(raw))[:0])
		if err != nil {
			return nil, nil, corruptf("strings: zstd: %v", err)
		}
		if uint64(len(out)) != raw {
			return nil, nil, corruptf("strings: zstd gave %d bytes, want %d", len(out), raw)
		}
		r.blob = out
		return out, src[k+int(cl):], nil
	}
	return nil, nil, corruptf("strings: blob mode %d", mode)
}

// readDict sets r.dict to the nd strings of blob: their lengths, then their bytes, all
// in one string.
func (r *Reader) readDict(blob []byte, nd uint64) error {
	if nd > uint64(len(blob)) {
		return corruptf("strings: %d strings in %d bytes", nd, len(blob))
	}
	r.dict = grow(r.dict, int(nd))
	ends := r.ints[:0]
	p := blob
	total := uint64(0)
	for range nd {
		l, k := binary.Uvarint(p)
		if k <= 0 || l > uint64(len(p)) {
			return corruptf("strings: dictionary lengths")
		}
		p = p[k:]
		total += l
		ends = append(ends, int64(total))
	}
	r.ints = ends
	if total != uint64(len(p)) {
		return corruptf("strings: dictionary holds %d bytes, %d left", total, len(p))
	}
	all := string(p)
	start := int64(0)
	for j, end := range ends {
		r.dict[j] = all[start:end]
		start = end
	}
	return nil
}
