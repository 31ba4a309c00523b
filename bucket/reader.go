package bucket

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// fieldEntry is a parsed control entry.
type fieldEntry struct {
	info fieldMeta
	name string
	typ  Type
	off  int // column bytes in data
}

// Reader reads one encoded bucket. Reset parses and validates the header and control
// block only; Times and Column decode one column each. A Reader keeps a reference to the
// bytes given to Reset and does not copy them: they must not change while the Reader uses
// them. Slices and strings returned are the caller's. The zero value is ready for Reset;
// reuse a Reader to reuse its scratch space. It is not safe for concurrent use.
type Reader struct {
	data    []byte
	rows    int
	minT    int64
	maxT    int64
	timeOff int
	timeLen int
	fields  []fieldEntry

	names     string // the names of the last distinct control block, concatenated
	nameBytes []byte // scratch: the names being parsed, concatenated
	prevNames []byte // names' bytes
	nameEnds  []int
	prevEnds  []int
	nameSet   map[string]struct{}
	refSet    []uint64 // references seen, one bit per name of the table

	// The shared symbol block (VersionShared), decoded on first use.
	shared     bool
	sharedOff  int
	sharedLen  int
	sharedDone bool
	sharedErr  error
	sharedSyms []byte
	sharedPos  []int // per field: its first symbol in sharedSyms, -1 when not shared
	sharedDec  entropyDecoder
	cache      SymbolCache

	id    intDecoder
	ints  []int64
	ints2 []int64 // ObjectId columns' scratch
	ints3 []int64
	gaps  []int64
	ints4 []int64
	blob  []byte
	dict  []string

	// RowRange and TimesRange: where each block of a time column in blocks
	// ends, one block's times, a whole column's times.
	blockEnds  []int
	blockTimes []int64
	rangeTimes []int64
}

// SymbolCache keeps decoded shared symbol blocks for readers to reuse: a
// query that reads one field of a bucket decodes every field's symbols,
// and dashboards read the same buckets again and again. Get returns the
// symbols of an encoded block, exactly those bytes, or nil; Put may keep a
// copy of both (the slices are the caller's). The returned symbols must not
// be changed. Implementations are safe for concurrent use.
type SymbolCache interface {
	Get(block []byte) []byte
	Put(block, syms []byte)
}

// SetSymbolCache makes r look up and keep shared symbol blocks in c (nil: none).
func (r *Reader) SetSymbolCache(c SymbolCache) { r.cache = c }

// errEmptyBucket is built once: Reset(nil) is how a reader lets go of a
// bucket, after every scan.
var errEmptyBucket = corruptf("empty bucket")

// Reset parses the header and control block of data, an encoded bucket, and validates
// them: O(fields), no column is decoded. On error the Reader is empty. A bucket whose
// names are references (VersionRefs) needs ResetNames.
func (r *Reader) Reset(data []byte) error {
	return r.ResetNames(data, nil)
}

// ResetNames is Reset for buckets of any version: the field names of a VersionRefs or
// VersionShared bucket are names[ref]. names must not change while the Reader uses them; the names
// returned are its strings.
func (r *Reader) ResetNames(data []byte, names []string) error {
	err := r.reset(data, names)
	if err != nil {
		r.data, r.rows, r.fields = nil, 0, r.fields[:0]
	}
	return err
}

func (r *Reader) reset(data []byte, table []string) error {
	r.data = data
	c := cursor{data: data}
	refs, nf, err := r.readHeader(&c)
	if err != nil {
		return err
	}
	if err := r.readEntries(&c, nf, refs, table); err != nil {
		return err
	}
	if err := r.readLengths(&c); err != nil {
		return err
	}
	if refs {
		return nil
	}
	return r.setNames()
}

// cursor reads a bucket's header and control block.
type cursor struct {
	data []byte // the whole bucket
	p    []byte // the bytes not read yet
}

// uvarint reads a uvarint; what names it in the error. One-byte values, most
// of a control block, take the inlined path.
func (c *cursor) uvarint(what string) (uint64, error) {
	if len(c.p) > 0 && c.p[0] < 0x80 {
		v := uint64(c.p[0])
		c.p = c.p[1:]
		return v, nil
	}
	return c.uvarintLong(what)
}

func (c *cursor) uvarintLong(what string) (uint64, error) {
	v, k := binary.Uvarint(c.p)
	if k <= 0 {
		return 0, corruptf("%s at offset %d", what, len(c.data)-len(c.p))
	}
	c.p = c.p[k:]
	return v, nil
}

// byte reads one byte; what names it in the error.
func (c *cursor) byte(what string) (byte, error) {
	if len(c.p) < 1 {
		return 0, corruptf("%s at offset %d: truncated", what, len(c.data))
	}
	b := c.p[0]
	c.p = c.p[1:]
	return b, nil
}

// bytes reads n bytes; what names them in the error.
func (c *cursor) bytes(n int, what string) ([]byte, error) {
	if len(c.p) < n {
		return nil, corruptf("%s at offset %d: %d bytes, %d left", what, len(c.data)-len(c.p), n, len(c.p))
	}
	b := c.p[:n]
	c.p = c.p[n:]
	return b, nil
}

// readHeader reads the version, row count, time range and field count, and reports
// whether field names are references.
func (r *Reader) readHeader(c *cursor) (refs bool, fields int, err error) {
	if len(c.data) == 0 {
		return false, 0, errEmptyBucket
	}
	v := c.data[0]
	c.p = c.data[1:]
	r.shared, r.sharedLen, r.sharedDone, r.sharedErr = v == VersionShared, 0, false, nil
	refs = v == VersionRefs || r.shared
	if v != Version && !refs {
		return false, 0, fmt.Errorf("%w: %d", ErrVersion, v)
	}
	rows, err := c.uvarint("rows")
	if err != nil {
		return false, 0, err
	}
	if rows == 0 || rows > MaxRows {
		return false, 0, corruptf("%d rows", rows)
	}
	r.rows = int(rows)
	mt, err := c.uvarint("min time")
	if err != nil {
		return false, 0, err
	}
	span, err := c.uvarint("time span")
	if err != nil {
		return false, 0, err
	}
	r.minT = unzigzag(mt)
	r.maxT = r.minT + int64(span)
	if r.maxT < r.minT {
		return false, 0, corruptf("time span %d from %d", span, r.minT)
	}
	nf, err := c.uvarint("field count")
	if err != nil {
		return false, 0, err
	}
	if nf > MaxFields || nf > uint64(len(c.p))/4 {
		return false, 0, corruptf("%d fields in %d bytes", nf, len(c.p))
	}
	return refs, int(nf), nil
}

// readEntries reads the control block: nf field entries, each a name (or, when refs, a
// reference into table), then the type, encoding, absent count and the encoding's
// statistics, which must agree.
func (r *Reader) readEntries(c *cursor, nf int, refs bool, table []string) error {
	if refs {
		if nf > len(table) {
			return fmt.Errorf("%w: %d fields, %d names", ErrNoNames, nf, len(table))
		}
		if n := (len(table) + 63) / 64; cap(r.refSet) < n {
			r.refSet = make([]uint64, n)
		} else {
			r.refSet = r.refSet[:n]
			clear(r.refSet)
		}
	}
	r.fields = grow(r.fields, nf)
	r.nameBytes = r.nameBytes[:0]
	r.nameEnds = r.nameEnds[:0]
	rows := uint64(r.rows)
	for i := range r.fields {
		f := &r.fields[i]
		*f = fieldEntry{}
		if refs {
			name, err := r.readRef(c, i, table)
			if err != nil {
				return err
			}
			f.name = name
		} else {
			l, err := c.uvarint("name length")
			if err != nil {
				return err
			}
			if l == 0 || l > MaxNameLen || l > uint64(len(c.p)) {
				return corruptf("field %d: name length %d, %d bytes left", i, l, len(c.p))
			}
			// setNames makes the strings.
			r.nameBytes = append(r.nameBytes, c.p[:l]...)
			r.nameEnds = append(r.nameEnds, len(r.nameBytes))
			c.p = c.p[l:]
		}
		if len(c.p) < 1 {
			return corruptf("field %d: truncated", i)
		}
		f.typ, f.info.enc = Type(c.p[0]>>4), encoding(c.p[0]&15)
		c.p = c.p[1:]
		if !f.typ.valid() {
			return corruptf("field %d: type %d", i, f.typ)
		}
		absent, err := c.uvarint("absent count")
		if err != nil {
			return err
		}
		if absent > rows {
			return corruptf("field %d: %d absent of %d rows", i, absent, rows)
		}
		f.info.count = int(rows - absent)
		if !f.info.enc.check(f.typ, rows-absent) {
			return corruptf("field %d: encoding %v for type %v, count %d", i, f.info.enc, f.typ, rows-absent)
		}
		if err := f.info.readStats(c); err != nil {
			return fmt.Errorf("field %d: %v statistics: %w", i, f.info.enc, err)
		}
	}
	return nil
}

// readRef reads field i's name reference into table; each may appear once.
func (r *Reader) readRef(c *cursor, i int, table []string) (string, error) {
	ref, err := c.uvarint("name reference")
	if err != nil {
		return "", err
	}
	if ref >= uint64(len(table)) {
		return "", fmt.Errorf("%w: field %d: name reference %d, %d names", ErrNoNames, i, ref, len(table))
	}
	if r.refSet[ref>>6]&(1<<(ref&63)) != 0 {
		return "", corruptf("field %d: name reference %d used twice", i, ref)
	}
	r.refSet[ref>>6] |= 1 << (ref & 63)
	return table[ref], nil
}

// readLengths reads the lengths of the time column, the field columns and the shared
// block, checks that they take exactly the rest of the bucket, and places each.
func (r *Reader) readLengths(c *cursor) error {
	tl, err := c.uvarint("time length")
	if err != nil {
		return err
	}
	total := tl
	if tl == 0 || tl > uint64(len(c.p)) {
		return corruptf("time column length %d, %d bytes left", tl, len(c.p))
	}
	r.timeLen = int(tl)
	for i := range r.fields {
		l, err := c.uvarint("column length")
		if err != nil {
			return err
		}
		if l > uint64(len(c.p)) {
			return corruptf("field %d: column length %d, %d bytes left", i, l, len(c.p))
		}
		if (l == 0) != (r.fields[i].info.enc == encEmpty) {
			return corruptf("field %d: column length %d, count %d", i, l, r.fields[i].info.count)
		}
		r.fields[i].info.length = int(l)
		total += l
	}
	if r.shared {
		l, err := c.uvarint("shared block length")
		if err != nil {
			return err
		}
		if l == 0 || l > uint64(len(c.p)) {
			return corruptf("shared block length %d, %d bytes left", l, len(c.p))
		}
		r.sharedLen = int(l)
		total += l
	}
	if total != uint64(len(c.p)) {
		return corruptf("columns take %d bytes, %d left", total, len(c.p))
	}
	off := len(c.data) - len(c.p)
	r.timeOff = off
	off += r.timeLen
	r.sharedOff = off
	off += r.sharedLen
	for i := range r.fields {
		r.fields[i].off = off
		off += r.fields[i].info.length
	}
	return nil
}

// setNames makes the fields' name strings, reusing the previous bucket's when equal.
func (r *Reader) setNames() error {
	if !bytes.Equal(r.nameBytes, r.prevNames) || !equalInts(r.nameEnds, r.prevEnds) || r.names == "" {
		if r.nameSet == nil {
			r.nameSet = make(map[string]struct{}, len(r.fields))
		}
		clear(r.nameSet)
		names := string(r.nameBytes)
		start := 0
		for _, end := range r.nameEnds {
			n := names[start:end]
			if _, dup := r.nameSet[n]; dup {
				r.names, r.prevNames = "", r.prevNames[:0]
				return corruptf("duplicate field name %q", n)
			}
			r.nameSet[n] = struct{}{}
			start = end
		}
		r.names = names
		r.nameBytes, r.prevNames = r.prevNames, r.nameBytes
		r.nameEnds, r.prevEnds = r.prevEnds, r.nameEnds
	}
	start := 0
	for i, end := range r.prevEnds {
		r.fields[i].name = r.names[start:end]
		start = end
	}
	return nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Rows returns the number of rows, at least 1 after a successful Reset.
func (r *Reader) Rows() int { return r.rows }

// MinTime returns the smallest timestamp.
func (r *Reader) MinTime() int64 { return r.minT }

// MaxTime returns the largest timestamp.
func (r *Reader) MaxTime() int64 { return r.maxT }

// NumFields returns the number of field columns.
func (r *Reader) NumFields() int { return len(r.fields) }

// Field describes field i, 0 <= i < NumFields(), from the control block.
func (r *Reader) Field(i int) FieldInfo {
	f := &r.fields[i]
	fi := FieldInfo{Name: f.name, Type: f.typ, Count: f.info.count}
	f.info.setInfo(&fi)
	return fi
}

// FieldIndex returns the index of the field called name, or -1.
func (r *Reader) FieldIndex(name string) int {
	for i := range r.fields {
		if r.fields[i].name == name {
			return i
		}
	}
	return -1
}

// grow returns s[:n], reallocating when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Column decodes field i into dst, reusing the capacity of its slices. dst.Present is nil
// when every row is present; absent rows hold zero values. The value slices of other
// types are truncated to length 0.
func (r *Reader) Column(i int, dst *Column) error {
	src, err := r.presence(i, dst)
	if err != nil {
		return err
	}
	f := &r.fields[i]
	if f.info.count == r.rows && len(src) > 0 && src[0]&7 == packShared && f.info.enc.intStream() {
		syms, err := r.sharedSymbols(i)
		if err != nil {
			return fmt.Errorf("field %q: %w", f.name, err)
		}
		r.id.shared = syms
		defer func() { r.id.shared = nil }()
	}
	src, err = r.readValues(src, &f.info, dst)
	if err != nil {
		return fmt.Errorf("field %q: %w", f.name, err)
	}
	if len(src) != 0 {
		return corruptf("field %q: %d trailing bytes", f.name, len(src))
	}
	return nil
}

// Presence decodes into dst the name, type and presence of field i
// without its values: dst's value slices are left empty. Counting the
// rows where a field is present needs no more.
func (r *Reader) Presence(i int, dst *Column) error {
	_, err := r.presence(i, dst)
	return err
}

// presence fills dst's name, type and presence for field i, empties its
// value slices, and returns the field's encoded values.
func (r *Reader) presence(i int, dst *Column) ([]byte, error) {
	if i < 0 || i >= len(r.fields) {
		return nil, fmt.Errorf("%w: %d of %d", ErrFieldIndex, i, len(r.fields))
	}
	f := &r.fields[i]
	rows, count := r.rows, f.info.count
	dst.Name, dst.Type = f.name, f.typ
	dst.Floats, dst.Ints, dst.Strings, dst.Bools, dst.IDs = dst.Floats[:0], dst.Ints[:0], dst.Strings[:0], dst.Bools[:0], dst.IDs[:0]
	src := r.data[f.off : f.off+f.info.length]
	switch {
	case count == rows:
		dst.Present = nil
	case count == 0:
		dst.Present = grow(dst.Present, (rows+63)/64)
		clear(dst.Present)
	default:
		dst.Present = grow(dst.Present, (rows+63)/64)
		var err error
		if src, err = r.readBitset(src, dst.Present, rows); err != nil {
			return nil, fmt.Errorf("field %q presence: %w", f.name, err)
		}
		if popcount(dst.Present, rows) != count {
			return nil, corruptf("field %q: presence does not match count %d", f.name, count)
		}
	}
	return src, nil
}

// sharedSymbols returns field i's run of the shared symbol block, decoding the block and
// placing every field's run on first use.
func (r *Reader) sharedSymbols(i int) ([]byte, error) {
	if !r.sharedDone {
		r.sharedDone = true
		r.sharedErr = r.decodeShared()
	}
	if r.sharedErr != nil {
		return nil, r.sharedErr
	}
	if r.sharedPos[i] < 0 {
		return nil, corruptf("field %d: shared symbols, none placed", i)
	}
	end := len(r.sharedSyms)
	for j := i + 1; j < len(r.fields); j++ {
		if r.sharedPos[j] >= 0 {
			end = r.sharedPos[j]
			break
		}
	}
	return r.sharedSyms[r.sharedPos[i]:end], nil
}

func (r *Reader) decodeShared() error {
	if !r.shared {
		return corruptf("shared symbols in a bucket without a shared block")
	}
	// Place every field's run first, from the column heads alone, so that the
	// block is decoded only when its symbol count is what the columns take.
	r.sharedPos = grow(r.sharedPos, len(r.fields))
	acc := 0
	for j := range r.fields {
		f := &r.fields[j]
		r.sharedPos[j] = -1
		if f.info.count != r.rows || f.info.length == 0 || !f.info.enc.intStream() {
			continue
		}
		head := r.data[f.off]
		if head&7 != packShared {
			continue
		}
		m := f.info.count
		if head>>7 == transDelta {
			m--
		}
		r.sharedPos[j] = acc
		acc += m
		if acc > MaxSharedSymbols {
			return corruptf("shared block: more than %d symbols", MaxSharedSymbols)
		}
	}
	p := r.data[r.sharedOff : r.sharedOff+r.sharedLen]
	n, k := binary.Uvarint(p)
	if k <= 0 || len(p) < k+1 || n == 0 || n != uint64(acc) {
		return corruptf("shared block: %d symbols, the columns take %d", n, acc)
	}
	var syms []byte
	if r.cache != nil {
		syms = r.cache.Get(p)
	}
	if syms == nil {
		var rest []byte
		var err error
		if syms, rest, err = r.sharedDec.readSymbols(p[k], p[k+1:], acc); err != nil {
			return fmt.Errorf("shared block: %w", err)
		}
		if len(rest) != 0 {
			return corruptf("shared block: %d trailing bytes", len(rest))
		}
		if r.cache != nil {
			r.cache.Put(p, syms)
		}
	}
	if len(syms) != acc {
		return corruptf("shared block: %d symbols, the columns take %d", len(syms), acc)
	}
	r.sharedSyms = syms
	return nil
}

// scatter spreads vals over the present rows of dst and zeroes the others.
func scatter[T any](dst, vals []T, present []uint64) {
	var zero T
	j := 0
	for i := range dst {
		if present[i>>6]&(1<<(uint(i)&63)) != 0 {
			dst[i] = vals[j]
			j++
		} else {
			dst[i] = zero
		}
	}
}

// Peek returns the row count and time range of an encoded bucket from its first bytes,
// without parsing the field entries: cheaper than Reset for pruning by time. It does not
// validate the rest of the bucket. An open bucket's snapshot (AppendSnapshot) has the same
// header.
func Peek(data []byte) (rows int, minTime, maxTime int64, err error) {
	if len(data) == 0 {
		return 0, 0, 0, corruptf("empty bucket")
	}
	if data[0] != Version && data[0] != VersionRefs && data[0] != VersionShared && data[0] != VersionSnapshot {
		return 0, 0, 0, fmt.Errorf("%w: %d", ErrVersion, data[0])
	}
	p := data[1:]
	var v [3]uint64
	for i := range v {
		x, k := binary.Uvarint(p)
		if k <= 0 {
			return 0, 0, 0, corruptf("header at offset %d", len(data)-len(p))
		}
		v[i], p = x, p[k:]
	}
	if v[0] == 0 || v[0] > MaxRows {
		return 0, 0, 0, corruptf("%d rows", v[0])
	}
	minTime = unzigzag(v[1])
	maxTime = minTime + int64(v[2])
	if maxTime < minTime {
		return 0, 0, 0, corruptf("time span %d from %d", v[2], minTime)
	}
	return int(v[0]), minTime, maxTime, nil
}
