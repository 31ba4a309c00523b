package bucket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/zstd"
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

	id   intDecoder
	ints []int64
	blob []byte
	dict []string
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

// Reset parses the header and control block of data, an encoded bucket, and validates
// them: O(fields), no column is decoded. On error the Reader is empty. A bucket whose
// names are references (VersionRefs) needs ResetNames.
func (r *Reader) Reset(data []byte) error {
	return r.ResetNames(data, nil)
}

// ResetNames is Reset for buckets of either version: the field names of a VersionRefs
// bucket are names[ref]. names must not change while the Reader uses them; the names
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
	if len(data) == 0 {
		return corruptf("empty bucket")
	}
	r.shared, r.sharedLen, r.sharedDone, r.sharedErr = data[0] == VersionShared, 0, false, nil
	refs := data[0] == VersionRefs || r.shared
	if data[0] != Version && !refs {
		return fmt.Errorf("%w: %d", ErrVersion, data[0])
	}
	p := data[1:]
	uv := func(what string) (uint64, error) {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return 0, corruptf("%s at offset %d", what, len(data)-len(p))
		}
		p = p[k:]
		return v, nil
	}
	rows, err := uv("rows")
	if err != nil {
		return err
	}
	if rows == 0 || rows > MaxRows {
		return corruptf("%d rows", rows)
	}
	r.rows = int(rows)
	mt, err := uv("min time")
	if err != nil {
		return err
	}
	span, err := uv("time span")
	if err != nil {
		return err
	}
	r.minT = unzigzag(mt)
	r.maxT = r.minT + int64(span)
	if r.maxT < r.minT {
		return corruptf("time span %d from %d", span, r.minT)
	}
	nf, err := uv("field count")
	if err != nil {
		return err
	}
	if nf > MaxFields || nf > uint64(len(p))/4 {
		return corruptf("%d fields in %d bytes", nf, len(p))
	}
	if refs {
		if int(nf) > len(table) {
			return fmt.Errorf("%w: %d fields, %d names", ErrNoNames, nf, len(table))
		}
		if n := (len(table) + 63) / 64; cap(r.refSet) < n {
			r.refSet = make([]uint64, n)
		} else {
			r.refSet = r.refSet[:n]
			clear(r.refSet)
		}
	}
	if cap(r.fields) < int(nf) {
		r.fields = make([]fieldEntry, nf)
	}
	r.fields = r.fields[:nf]
	r.nameBytes = r.nameBytes[:0]
	r.nameEnds = r.nameEnds[:0]
	for i := range r.fields {
		f := &r.fields[i]
		*f = fieldEntry{}
		if refs {
			ref, err := uv("name reference")
			if err != nil {
				return err
			}
			if ref >= uint64(len(table)) {
				return fmt.Errorf("%w: field %d: name reference %d, %d names", ErrNoNames, i, ref, len(table))
			}
			if r.refSet[ref>>6]&(1<<(ref&63)) != 0 {
				return corruptf("field %d: name reference %d used twice", i, ref)
			}
			r.refSet[ref>>6] |= 1 << (ref & 63)
			f.name = table[ref]
		} else {
			l, err := uv("name length")
			if err != nil {
				return err
			}
			if l == 0 || l > MaxNameLen || l > uint64(len(p)) {
				return corruptf("field %d: name length %d, %d bytes left", i, l, len(p))
			}
			r.nameBytes = append(r.nameBytes, p[:l]...)
			r.nameEnds = append(r.nameEnds, len(r.nameBytes))
			p = p[l:]
		}
		if len(p) < 1 {
			return corruptf("field %d: truncated", i)
		}
		f.typ, f.info.enc = Type(p[0]>>4), p[0]&15
		p = p[1:]
		if !f.typ.valid() {
			return corruptf("field %d: type %d", i, f.typ)
		}
		absent, err := uv("absent count")
		if err != nil {
			return err
		}
		if absent > rows {
			return corruptf("field %d: %d absent of %d rows", i, absent, rows)
		}
		c := rows - absent
		f.info.count = int(c)
		want := byte(0)
		switch f.typ {
		case TypeInt, TypeDate:
			want = encInt
		case TypeFloat:
			want = encFloat
			if f.info.enc == encDecimal {
				want = encDecimal
			}
		case TypeString:
			want = encString
		case TypeBool:
			want = encBool
		}
		if c == 0 {
			want = encEmpty
		}
		if f.info.enc != want {
			return corruptf("field %d: encoding %d for type %v, count %d", i, f.info.enc, f.typ, c)
		}
		switch f.info.enc {
		case encDecimal, encInt:
			if f.info.enc == encDecimal {
				if len(p) < 1 || p[0] > maxDecimalScale {
					return corruptf("field %d: decimal scale", i)
				}
				f.info.k = p[0]
				p = p[1:]
			}
			lo, err := uv("min")
			if err != nil {
				return err
			}
			d, err := uv("max")
			if err != nil {
				return err
			}
			f.info.minI = unzigzag(lo)
			f.info.maxI = f.info.minI + int64(d)
			if f.info.maxI < f.info.minI {
				return corruptf("field %d: range", i)
			}
		case encFloat:
			if len(p) < 17 || p[0] > 1 {
				return corruptf("field %d: float statistics", i)
			}
			f.info.hasNaN = p[0] == 1
			f.info.minF = math.Float64frombits(binary.LittleEndian.Uint64(p[1:]))
			f.info.maxF = math.Float64frombits(binary.LittleEndian.Uint64(p[9:]))
			p = p[17:]
		}
	}
	tl, err := uv("time length")
	if err != nil {
		return err
	}
	total := tl
	if tl == 0 || tl > uint64(len(p)) {
		return corruptf("time column length %d, %d bytes left", tl, len(p))
	}
	r.timeLen = int(tl)
	for i := range r.fields {
		l, err := uv("column length")
		if err != nil {
			return err
		}
		if l > uint64(len(p)) {
			return corruptf("field %d: column length %d, %d bytes left", i, l, len(p))
		}
		if (l == 0) != (r.fields[i].info.enc == encEmpty) {
			return corruptf("field %d: column length %d, count %d", i, l, r.fields[i].info.count)
		}
		r.fields[i].info.length = int(l)
		total += l
	}
	if r.shared {
		l, err := uv("shared block length")
		if err != nil {
			return err
		}
		if l == 0 || l > uint64(len(p)) {
			return corruptf("shared block length %d, %d bytes left", l, len(p))
		}
		r.sharedLen = int(l)
		total += l
	}
	if total != uint64(len(p)) {
		return corruptf("columns take %d bytes, %d left", total, len(p))
	}
	off := len(data) - len(p)
	r.timeOff = off
	off += r.timeLen
	r.sharedOff = off
	off += r.sharedLen
	for i := range r.fields {
		r.fields[i].off = off
		off += r.fields[i].info.length
	}
	if refs {
		return nil
	}
	return r.setNames()
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
	switch f.info.enc {
	case encInt:
		fi.MinInt, fi.MaxInt = f.info.minI, f.info.maxI
	case encDecimal:
		p := pow10[f.info.k]
		fi.MinFloat, fi.MaxFloat = float64(f.info.minI)/p, float64(f.info.maxI)/p
	case encFloat:
		fi.MinFloat, fi.MaxFloat, fi.HasNaN = f.info.minF, f.info.maxF, f.info.hasNaN
	}
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

// Times decodes the time column, appending Rows() values to dst[:0].
func (r *Reader) Times(dst []int64) ([]int64, error) {
	if r.rows == 0 {
		return dst[:0], corruptf("no bucket")
	}
	dst = grow(dst, r.rows)
	src := r.data[r.timeOff : r.timeOff+r.timeLen]
	mode := src[0]
	t0, k := binary.Uvarint(src[1:])
	if k <= 0 {
		return dst[:0], corruptf("time column: first time")
	}
	src = src[1+k:]
	dst[0] = r.minT + int64(t0)
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
	if i < 0 || i >= len(r.fields) {
		return fmt.Errorf("%w: %d of %d", ErrFieldIndex, i, len(r.fields))
	}
	f := &r.fields[i]
	rows, count := r.rows, f.info.count
	dst.Name, dst.Type = f.name, f.typ
	dst.Floats, dst.Ints, dst.Strings, dst.Bools = dst.Floats[:0], dst.Ints[:0], dst.Strings[:0], dst.Bools[:0]
	src := r.data[f.off : f.off+f.info.length]
	var err error
	if count == rows {
		dst.Present = nil
	} else {
		dst.Present = grow(dst.Present, (rows+63)/64)
		if count == 0 {
			clear(dst.Present)
			switch f.typ {
			case TypeInt, TypeDate:
				dst.Ints = grow(dst.Ints, rows)
				clear(dst.Ints)
			case TypeFloat:
				dst.Floats = grow(dst.Floats, rows)
				clear(dst.Floats)
			case TypeString:
				dst.Strings = grow(dst.Strings, rows)
				clear(dst.Strings)
			case TypeBool:
				dst.Bools = grow(dst.Bools, rows)
				clear(dst.Bools)
			}
			return nil
		} else {
			if src, err = r.readBitset(src, dst.Present, rows); err != nil {
				return fmt.Errorf("field %q presence: %w", f.name, err)
			}
			if popcount(dst.Present, rows) != count {
				return corruptf("field %q: presence does not match count %d", f.name, count)
			}
		}
	}
	if count == rows && len(src) > 0 && src[0]&7 == packShared && sharableEnc(f.info.enc) {
		syms, err := r.sharedSymbols(i)
		if err != nil {
			return fmt.Errorf("field %q: %w", f.name, err)
		}
		r.id.shared = syms
		defer func() { r.id.shared = nil }()
	}
	switch f.typ {
	case TypeInt, TypeDate:
		dst.Ints = grow(dst.Ints, rows)
		if count == rows {
			src, err = r.id.readInts(src, dst.Ints)
		} else {
			r.ints = grow(r.ints, count)
			src, err = r.id.readInts(src, r.ints)
			scatter(dst.Ints, r.ints, dst.Present)
		}
	case TypeFloat:
		dst.Floats = grow(dst.Floats, rows)
		if count == rows {
			ints := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(dst.Floats))), rows)
			if src, err = r.id.readInts(src, ints); err == nil {
				intsToFloats(ints, dst.Floats, f.info.enc, f.info.k)
			}
		} else {
			r.ints = grow(r.ints, count)
			if src, err = r.id.readInts(src, r.ints); err == nil && count > 0 {
				intsToFloats(r.ints, unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(r.ints))), count), f.info.enc, f.info.k)
				scatter(dst.Floats, unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(r.ints))), count), dst.Present)
			}
		}
	case TypeString:
		dst.Strings = grow(dst.Strings, rows)
		src, err = r.readStrings(src, dst.Strings, count, dst.Present)
	case TypeBool:
		dst.Bools = grow(dst.Bools, rows)
		src, err = r.readBools(src, dst.Bools, count, dst.Present)
	}
	if err != nil {
		return fmt.Errorf("field %q: %w", f.name, err)
	}
	if len(src) != 0 {
		return corruptf("field %q: %d trailing bytes", f.name, len(src))
	}
	return nil
}

func sharableEnc(enc byte) bool { return enc == encInt || enc == encDecimal || enc == encFloat }

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
		if f.info.count != r.rows || f.info.length == 0 || !sharableEnc(f.info.enc) {
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

// intsToFloats converts decoded ints to floats in place (ints and fs share memory).
func intsToFloats(ints []int64, fs []float64, enc, k byte) {
	fs = fs[:len(ints)]
	switch {
	case enc == encFloat:
		for i, v := range ints {
			fs[i] = math.Float64frombits(uint64(orderedBits(uint64(v))))
		}
	case k == 0:
		for i, v := range ints {
			fs[i] = float64(v)
		}
	default:
		p := pow10[k]
		for i, v := range ints {
			fs[i] = float64(v) / p
		}
	}
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

func (r *Reader) readBools(src []byte, dst []bool, count int, present []uint64) ([]byte, error) {
	words := grow(r.blob, (count+63)/64*8)
	r.blob = words
	ws := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(words))), (count+63)/64)
	src, err := r.readBitset(src, ws, count)
	if err != nil {
		return nil, err
	}
	j := 0
	for i := range dst {
		if present != nil && present[i>>6]&(1<<(uint(i)&63)) == 0 {
			dst[i] = false
			continue
		}
		dst[i] = ws[j>>6]&(1<<(uint(j)&63)) != 0
		j++
	}
	return src, nil
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

func (r *Reader) readStrings(src []byte, dst []string, count int, present []uint64) ([]byte, error) {
	nd, k := binary.Uvarint(src)
	if k <= 0 || nd == 0 || nd > uint64(count) {
		return nil, corruptf("strings: dictionary of %d for %d values", nd, count)
	}
	src = src[k:]
	if len(src) < 1 {
		return nil, corruptf("strings: blob mode")
	}
	mode := src[0]
	src = src[1:]
	var blob []byte
	switch mode {
	case blobRaw:
		l, k := binary.Uvarint(src)
		if k <= 0 || l > uint64(len(src)-k) {
			return nil, corruptf("strings: blob length %d, %d left", l, len(src))
		}
		blob = src[k : k+int(l)]
		src = src[k+int(l):]
	case blobZstd:
		raw, k := binary.Uvarint(src)
		if k <= 0 {
			return nil, corruptf("strings: raw length")
		}
		src = src[k:]
		cl, k := binary.Uvarint(src)
		if k <= 0 || cl > uint64(len(src)-k) || raw > maxZstdRatio*cl || raw > 1<<28 {
			return nil, corruptf("strings: zstd %d bytes to %d, %d left", cl, raw, len(src))
		}
		out, err := zstdDecoder().DecodeAll(src[k:k+int(cl)], grow(r.blob, int(raw))[:0])
		if err != nil {
			return nil, corruptf("strings: zstd: %v", err)
		}
		if uint64(len(out)) != raw {
			return nil, corruptf("strings: zstd gave %d bytes, want %d", len(out), raw)
		}
		r.blob = out
		blob = out
		src = src[k+int(cl):]
	default:
		return nil, corruptf("strings: blob mode %d", mode)
	}
	if nd > uint64(len(blob)) {
		return nil, corruptf("strings: %d strings in %d bytes", nd, len(blob))
	}
	r.dict = grow(r.dict, int(nd))
	// Lengths, then the bytes: one string holds them all.
	ends := r.ints[:0]
	p := blob
	total := uint64(0)
	for range nd {
		l, k := binary.Uvarint(p)
		if k <= 0 || l > uint64(len(p)) {
			return nil, corruptf("strings: dictionary lengths")
		}
		p = p[k:]
		total += l
		ends = append(ends, int64(total))
	}
	r.ints = ends
	if total != uint64(len(p)) {
		return nil, corruptf("strings: dictionary holds %d bytes, %d left", total, len(p))
	}
	all := string(p)
	start := int64(0)
	for j, end := range ends {
		r.dict[j] = all[start:end]
		start = end
	}
	if nd == 1 {
		s := r.dict[0]
		for i := range dst {
			if present == nil || present[i>>6]&(1<<(uint(i)&63)) != 0 {
				dst[i] = s
			} else {
				dst[i] = ""
			}
		}
		return src, nil
	}
	idx := grow(r.ints, count)
	r.ints = idx
	src, err := r.id.readInts(src, idx)
	if err != nil {
		return nil, err
	}
	j := 0
	for i := range dst {
		if present != nil && present[i>>6]&(1<<(uint(i)&63)) == 0 {
			dst[i] = ""
			continue
		}
		x := idx[j]
		if uint64(x) >= nd {
			return nil, corruptf("strings: index %d of %d", x, nd)
		}
		dst[i] = r.dict[x]
		j++
	}
	return src, nil
}

// Peek returns the row count and time range of an encoded bucket from its first bytes,
// without parsing the field entries: cheaper than Reset for pruning by time. It does not
// validate the rest of the bucket.
func Peek(data []byte) (rows int, minTime, maxTime int64, err error) {
	if len(data) == 0 {
		return 0, 0, 0, corruptf("empty bucket")
	}
	if data[0] != Version && data[0] != VersionRefs && data[0] != VersionShared {
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
