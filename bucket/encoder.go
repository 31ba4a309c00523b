package bucket

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/klauspost/compress/zstd"
)

// fieldMeta is one field's control entry.
type fieldMeta struct {
	enc    encoding
	count  int
	k      byte // decimal scale, or the power of ten of a scaled int
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
	scaled     []int64
	quot       []int64
	words      []uint64
	runs       []int64
	gaps       []int64
	dict       map[string]int32
	dictList   []string
	blob       []byte
	zbuf       []byte
	zenc       *zstd.Encoder
	// A time column's blocks (timeBlocks), and where each ends in tblocks.
	tblocks []byte
	tends   []int
	// blockRows is the rows of a time column's block, 0 for timeBlockRows,
	// negative for none; forceBlocks writes blocks whatever they cost.
	// Tests set them to split small buckets and to weigh blocks.
	blockRows   int
	forceBlocks bool
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
		dst = append(dst, byte(c.Type)<<4|byte(m.enc))
		dst = binary.AppendUvarint(dst, uint64(rows-m.count))
		dst = m.appendStats(dst)
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
// symbols may go to a shared block: every row present, an encoding of one int stream.
func sharable(m *fieldMeta, rows int) bool {
	return m.count == rows && m.enc.intStream()
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
	sh = e.ie.ent.appendSymbols(sh, e.shareSyms, 0)
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

// appendField appends the column bytes of c, presence first when some rows are absent,
// and fills m: the writer of each encoding sets its statistics.
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
	case TypeInt, TypeDate, TypeInt32:
		return e.appendIntColumn(dst, c, rows, m)
	case TypeFloat:
		return e.appendFloatColumn(dst, c, rows, m)
	case TypeString, TypeBSON:
		return e.appendStringColumn(dst, c, rows, m)
	case TypeObjectID:
		return e.appendObjectIDColumn(dst, c, rows, m)
	case TypeBool:
		return e.appendBoolColumn(dst, c, m)
	}
	panic("bucket: unreachable: type validated")
}
