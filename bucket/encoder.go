package bucket

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/klauspost/compress/zstd"
)

// Column encodings, stored in each field's control entry. Persisted: never renumber.
const (
	encEmpty   = 0 // no present values: the column has no bytes
	encInt     = 1 // int stream (TypeInt, TypeDate)
	encDecimal = 2 // TypeFloat as int64 mantissas of one decimal scale k: v = float64(i) / 10^k
	encFloat   = 3 // TypeFloat as order-preserving int64 bit patterns in an int stream
	encString  = 4 // dictionary and int stream of indices
	encBool    = 5 // bitset stream
)

// Time column modes. Persisted.
const (
	timeDoD    = 0 // delta of delta, zero runs length-encoded, varints
	timeDeltas = 1 // int stream of the deltas
)

// Bitset stream modes. Persisted.
const (
	bitsZero = 0 // every bit 0
	bitsOne  = 1 // every bit 1
	bitsRaw  = 2 // the bits, least significant first, ceil(n/8) bytes
	bitsRuns = 3 // first bit byte, uvarint number of runs, int stream of run lengths
)

// String dictionary blob modes. Persisted.
const (
	blobRaw  = 0 // uvarint length, blob
	blobZstd = 1 // uvarint raw length, uvarint compressed length, zstd frame
)

// maxDecimalScale is the largest k tried by the decimal float encoding.
const maxDecimalScale = 9

// maxZstdRatio bounds raw/compressed for zstd blobs, so a decoder allocates at most that
// many bytes per input byte.
const maxZstdRatio = 255

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// fieldMeta is one field's control entry.
type fieldMeta struct {
	enc    byte
	count  int
	k      byte // decimal scale
	hasNaN bool
	minI   int64
	maxI   int64
	minF   float64
	maxF   float64
	length int // column bytes
}

// Encoder encodes buckets. The zero value is ready to use; an Encoder keeps scratch space
// between calls, so reuse it. It is not safe for concurrent use.
type Encoder struct {
	ie    intEncoder
	buf   []byte
	metas []fieldMeta
	names map[string]struct{}
	refs  map[uint32]struct{}
	// Shared symbol block (VersionShared): candidates and their parts, the block.
	cands      []shareCand
	shareSyms  []byte
	shareExtra []byte
	shared     []byte
	buf2       []byte
	ints       []int64
	words      []uint64
	runs       []int64
	dict       map[string]int32
	dictList   []string
	blob       []byte
	zbuf       []byte
	zenc       *zstd.Encoder
}

// Encode appends the encoded bucket holding cols to dst and returns the extended slice.
// It returns an error, and dst unchanged, if cols has no rows or more than MaxRows, more
// than MaxFields fields, a value slice or Present bitmap whose length does not match
// len(cols.Times), an empty, too long or duplicate field name, or an unknown Type.
func (e *Encoder) Encode(dst []byte, cols *Columns) ([]byte, error) {
	return e.encode(dst, cols, nil)
}

// EncodeRefs is Encode for a bucket whose field names live in a name table kept by the
// caller (VersionRefs): refs[i] is the index of cols.Fields[i].Name in that table, and
// the bucket stores the index instead of the name. A Reader needs the same table
// (ResetNames). refs must have one entry per field, each distinct and at most MaxRef.
func (e *Encoder) EncodeRefs(dst []byte, cols *Columns, refs []uint32) ([]byte, error) {
	if len(refs) != len(cols.Fields) {
		return dst, fmt.Errorf("%w: %d name references for %d fields", ErrFieldName, len(refs), len(cols.Fields))
	}
	for _, r := range refs {
		if r > MaxRef {
			return dst, fmt.Errorf("%w: name reference %d, max %d", ErrFieldName, r, MaxRef)
		}
	}
	return e.encode(dst, cols, refs)
}

func (e *Encoder) encode(dst []byte, cols *Columns, refs []uint32) ([]byte, error) {
	rows := len(cols.Times)
	if rows == 0 {
		return dst, ErrNoRows
	}
	if rows > MaxRows {
		return dst, fmt.Errorf("%w: %d rows, max %d", ErrTooManyRows, rows, MaxRows)
	}
	if len(cols.Fields) > MaxFields {
		return dst, fmt.Errorf("%w: %d fields, max %d", ErrTooManyFields, len(cols.Fields), MaxFields)
	}
	if e.names == nil {
		e.names = make(map[string]struct{}, len(cols.Fields))
	}
	clear(e.names)
	if refs != nil {
		if e.refs == nil {
			e.refs = make(map[uint32]struct{}, len(refs))
		}
		clear(e.refs)
	}
	for i := range cols.Fields {
		c := &cols.Fields[i]
		if !c.Type.valid() {
			return dst, fmt.Errorf("%w: field %q: %d", ErrType, c.Name, uint8(c.Type))
		}
		if c.Name == "" || len(c.Name) > MaxNameLen {
			return dst, fmt.Errorf("%w: field %d: length %d", ErrFieldName, i, len(c.Name))
		}
		if _, dup := e.names[c.Name]; dup {
			return dst, fmt.Errorf("%w: duplicate %q", ErrFieldName, c.Name)
		}
		e.names[c.Name] = struct{}{}
		if refs != nil {
			if _, dup := e.refs[refs[i]]; dup {
				return dst, fmt.Errorf("%w: field %q: name reference %d used twice", ErrFieldName, c.Name, refs[i])
			}
			e.refs[refs[i]] = struct{}{}
		}
		if n := c.Len(); n != rows {
			return dst, fmt.Errorf("%w: field %q has %d values for %d rows", ErrColumnLength, c.Name, n, rows)
		}
		if c.Present != nil && len(c.Present) != (rows+63)/64 {
			return dst, fmt.Errorf("%w: field %q presence has %d words for %d rows", ErrColumnLength, c.Name, len(c.Present), rows)
		}
	}

	minT, maxT := cols.Times[0], cols.Times[0]
	for _, t := range cols.Times {
		minT = min(minT, t)
		maxT = max(maxT, t)
	}
	e.buf = e.appendTimes(e.buf[:0], cols.Times, minT)
	timeLen := len(e.buf)
	e.metas = e.metas[:0]
	e.cands, e.shareSyms, e.shareExtra = e.cands[:0], e.shareSyms[:0], e.shareExtra[:0]
	for i := range cols.Fields {
		start := len(e.buf)
		var m fieldMeta
		e.buf = e.appendField(e.buf, &cols.Fields[i], rows, &m)
		m.length = len(e.buf) - start
		e.metas = append(e.metas, m)
		if refs != nil && sharable(&m, rows) && e.ie.last.hasSyms {
			l := &e.ie.last
			e.cands = append(e.cands, shareCand{field: i, start: start, trans: l.trans, base: l.base,
				syms: len(e.shareSyms), extra: len(e.shareExtra)})
			e.shareSyms = append(e.shareSyms, e.ie.syms...)
			e.shareExtra = append(e.shareExtra, l.extra...)
		}
	}
	shared := false
	if len(e.cands) >= 2 {
		shared = e.share(timeLen)
	}

	if shared {
		dst = append(dst, VersionShared)
	} else if refs != nil {
		dst = append(dst, VersionRefs)
	} else {
		dst = append(dst, Version)
	}
	dst = binary.AppendUvarint(dst, uint64(rows))
	dst = appendVarint(dst, minT)
	dst = binary.AppendUvarint(dst, uint64(maxT-minT))
	dst = binary.AppendUvarint(dst, uint64(len(cols.Fields)))
	for i := range cols.Fields {
		c, m := &cols.Fields[i], &e.metas[i]
		if refs != nil {
			dst = binary.AppendUvarint(dst, uint64(refs[i]))
		} else {
			dst = binary.AppendUvarint(dst, uint64(len(c.Name)))
			dst = append(dst, c.Name...)
		}
		dst = append(dst, byte(c.Type)<<4|m.enc)
		dst = binary.AppendUvarint(dst, uint64(rows-m.count))
		switch m.enc {
		case encInt:
			dst = appendVarint(dst, m.minI)
			dst = binary.AppendUvarint(dst, uint64(m.maxI-m.minI))
		case encDecimal:
			dst = append(dst, m.k)
			dst = appendVarint(dst, m.minI)
			dst = binary.AppendUvarint(dst, uint64(m.maxI-m.minI))
		case encFloat:
			var flags byte
			if m.hasNaN {
				flags = 1
			}
			dst = append(dst, flags)
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(m.minF))
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(m.maxF))
		}
	}
	dst = binary.AppendUvarint(dst, uint64(timeLen))
	for i := range e.metas {
		dst = binary.AppendUvarint(dst, uint64(e.metas[i].length))
	}
	if shared {
		dst = binary.AppendUvarint(dst, uint64(len(e.shared)))
		dst = append(dst, e.buf[:timeLen]...)
		dst = append(dst, e.shared...)
		return append(dst, e.buf[timeLen:]...), nil
	}
	return append(dst, e.buf...), nil
}

// sharable reports whether a column's values are one int stream at its start whose
// symbols may go to a shared block: every row present, an int, decimal or float column.
func sharable(m *fieldMeta, rows int) bool {
	return m.count == rows && (m.enc == encInt || m.enc == encDecimal || m.enc == encFloat)
}

// shareCand is a column whose int stream had symbols: where its bytes start in e.buf,
// and its stream's parts, its symbols and extra bits at offsets of e.shareSyms and
// e.shareExtra.
type shareCand struct {
	field       int
	start       int
	trans       byte
	base        int64
	syms, extra int
}

// share entropy codes the symbols of every candidate column as one block, and keeps it
// when the block and the columns' remaining bytes come out smaller than the columns as
// they are: one table instead of one per column, and statistics over more symbols. It
// rewrites e.buf (time column first, timeLen bytes) and the metas' lengths then, and
// leaves the block, its symbol count first, in e.shared.
func (e *Encoder) share(timeLen int) bool {
	e.pickShared()
	if len(e.cands) < 2 || len(e.shareSyms) > MaxSharedSymbols {
		return false
	}
	sh := binary.AppendUvarint(e.shared[:0], uint64(len(e.shareSyms)))
	sh = e.ie.ent.appendSymbols(sh, e.shareSyms)
	e.shared = sh
	cost, old := len(sh), 0
	for j := range e.cands {
		c := &e.cands[j]
		old += e.metas[c.field].length
		extra := e.candExtra(j)
		cost += 1 + uvarintLen(zigzag(c.base))
		if len(extra) > 0 {
			cost += uvarintLen(uint64(len(extra))) + len(extra)
		}
	}
	if cost >= old {
		return false
	}
	buf := append(e.buf2[:0], e.buf[:timeLen]...)
	j, off := 0, timeLen // off: the column's bytes in e.buf
	for i := range e.metas {
		start, n := len(buf), e.metas[i].length
		if j < len(e.cands) && e.cands[j].field == i {
			c := &e.cands[j]
			buf = appendSharedStream(buf, c.trans, c.base, e.candExtra(j))
			j++
		} else {
			buf = append(buf, e.buf[off:off+n]...)
		}
		off += n
		e.metas[i].length = len(buf) - start
	}
	e.buf, e.buf2 = buf, e.buf
	return true
}

// pickShared drops the candidates that the shared statistics would code in more bytes
// than their column takes alone (columns of another distribution), twice over, and
// compacts e.cands, e.shareSyms and e.shareExtra to the rest.
func (e *Encoder) pickShared() {
	for round := 0; round < 2 && len(e.cands) >= 2; round++ {
		var hist [maxSymbol + 1]int
		for _, s := range e.shareSyms {
			hist[s]++
		}
		var cost [maxSymbol + 1]float64 // bits a symbol costs with the shared statistics
		for s, n := range hist {
			if n > 0 {
				cost[s] = -math.Log2(float64(n) / float64(len(e.shareSyms)))
			}
		}
		keep := e.cands[:0]
		syms, extra := e.shareSyms[:0], e.shareExtra[:0]
		dropped := false
		for j := range e.cands {
			c := e.cands[j]
			cs := e.candSyms(j)
			ce := e.candExtra(j)
			bits := 0.0
			for _, s := range cs {
				bits += cost[s]
			}
			alone := e.metas[c.field].length
			if int(bits/8)+1+uvarintLen(zigzag(c.base))+len(ce) > alone {
				dropped = true
				continue
			}
			// Compacting in place: the kept runs only move toward the front.
			c.syms, c.extra = len(syms), len(extra)
			syms = append(syms, cs...)
			extra = append(extra, ce...)
			keep = append(keep, c)
		}
		e.cands, e.shareSyms, e.shareExtra = keep, syms, extra
		if !dropped {
			return
		}
	}
}

// candSyms returns the symbols of candidate j.
func (e *Encoder) candSyms(j int) []byte {
	end := len(e.shareSyms)
	if j+1 < len(e.cands) {
		end = e.cands[j+1].syms
	}
	return e.shareSyms[e.cands[j].syms:end]
}

// candExtra returns the extra bits of candidate j.
func (e *Encoder) candExtra(j int) []byte {
	end := len(e.shareExtra)
	if j+1 < len(e.cands) {
		end = e.cands[j+1].extra
	}
	return e.shareExtra[e.cands[j].extra:end]
}

// appendTimes appends the time column.
func (e *Encoder) appendTimes(dst []byte, ts []int64, minT int64) []byte {
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

// appendField appends the column bytes of c and fills m.
func (e *Encoder) appendField(dst []byte, c *Column, rows int, m *fieldMeta) []byte {
	m.count = rows
	if c.Present != nil {
		m.count = popcount(c.Present, rows)
	}
	if m.count == 0 {
		m.enc = encEmpty
		return dst
	}
	if m.count < rows {
		dst = e.appendBitset(dst, c.Present, rows)
	}
	switch c.Type {
	case TypeInt, TypeDate:
		vals := c.Ints
		if m.count < rows {
			vals = e.ints[:0]
			for i, v := range c.Ints {
				if c.Present[i>>6]&(1<<(uint(i)&63)) != 0 {
					vals = append(vals, v)
				}
			}
			e.ints = vals
		}
		m.enc = encInt
		m.minI, m.maxI = vals[0], vals[0]
		for _, v := range vals {
			m.minI = min(m.minI, v)
			m.maxI = max(m.maxI, v)
		}
		return e.ie.appendInts(dst, vals)
	case TypeFloat:
		return e.appendFloats(dst, c, rows, m)
	case TypeString:
		return e.appendStrings(dst, c, rows, m)
	case TypeBool:
		m.enc = encBool
		words := e.words[:0]
		var w uint64
		n := 0
		for i, b := range c.Bools {
			if c.Present != nil && c.Present[i>>6]&(1<<(uint(i)&63)) == 0 {
				continue
			}
			if b {
				w |= 1 << (uint(n) & 63)
			}
			n++
			if n&63 == 0 {
				words = append(words, w)
				w = 0
			}
		}
		if n&63 != 0 {
			words = append(words, w)
		}
		e.words = words
		return e.appendBitset(dst, words, n)
	}
	panic("bucket: unreachable: type validated")
}

// decimalScale reports whether v == float64(i)/10^k bitwise for i = round(v*10^k).
func decimalScale(v float64, k int) (int64, bool) {
	x := v * pow10[k]
	if !(x > -(1<<62) && x < 1<<62) {
		return 0, false
	}
	i := int64(math.Floor(x + 0.5))
	return i, math.Float64bits(float64(i)/pow10[k]) == math.Float64bits(v)
}

func (e *Encoder) appendFloats(dst []byte, c *Column, rows int, m *fieldMeta) []byte {
	ints := e.ints[:0]
	for i, v := range c.Floats {
		if m.count < rows && c.Present[i>>6]&(1<<(uint(i)&63)) == 0 {
			continue
		}
		ints = append(ints, int64(math.Float64bits(v)))
	}
	e.ints = ints
	// Decimal: find the smallest scale that fits every value.
	k := 0
	ok := true
	for _, b := range ints {
		v := math.Float64frombits(uint64(b))
		_, fit := decimalScale(v, k)
		for !fit && k < maxDecimalScale {
			k++
			_, fit = decimalScale(v, k)
		}
		if !fit {
			ok = false
			break
		}
	}
	if ok {
		// Values checked at a smaller scale must still fit at k.
		for j, b := range ints {
			i, fit := decimalScale(math.Float64frombits(uint64(b)), k)
			if !fit {
				ok = false
				// Restore the bit patterns overwritten so far.
				for jj := 0; jj < j; jj++ {
					ints[jj] = int64(math.Float64bits(float64(ints[jj]) / pow10[k]))
				}
				break
			}
			ints[j] = i
		}
	}
	if ok {
		m.enc = encDecimal
		m.k = byte(k)
		m.minI, m.maxI = ints[0], ints[0]
		for _, v := range ints {
			m.minI = min(m.minI, v)
			m.maxI = max(m.maxI, v)
		}
		return e.ie.appendInts(dst, ints)
	}
	m.enc = encFloat
	m.minF, m.maxF = math.NaN(), math.NaN()
	for j, b := range ints {
		v := math.Float64frombits(uint64(b))
		switch {
		case v != v:
			m.hasNaN = true
		case m.minF != m.minF:
			m.minF, m.maxF = v, v
		default:
			m.minF = math.Min(m.minF, v)
			m.maxF = math.Max(m.maxF, v)
		}
		ints[j] = orderedBits(uint64(b))
	}
	return e.ie.appendInts(dst, ints)
}

// orderedBits maps float64 bits to an int64 ordered like the floats (NaNs at the ends).
// It is its own inverse on the bit patterns.
func orderedBits(b uint64) int64 {
	return int64(b ^ uint64(int64(b)>>63)>>1)
}

func (e *Encoder) appendStrings(dst []byte, c *Column, rows int, m *fieldMeta) []byte {
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
	if len(blob) >= 64 {
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
