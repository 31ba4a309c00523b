package bucket

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
)

// Frozen rows: the in-memory form of an open bucket's older rows. An open
// bucket takes rows into plain columns; every so often its rows so far are
// frozen, compressed into a chunk appended to a byte string, and the plain
// columns start again empty. A chunk is cheap to make (one pass, no
// statistics, no search for the best encoding) and to decode, as the
// head chunks of Prometheus are. A checkpoint writes an open bucket as its
// frozen rows (AppendSnapshot): the layout is part of store format 5
// (docs/format/bucket.md, "Open-bucket snapshot") and changes only with a
// new store format.
//
// A chunk holds rows rows of the first ncols columns of the bucket, in the
// order of the bucket's column list (columns are only ever appended to it,
// so a column added after the chunk was made is absent from its rows):
//
//	uvarint rows, uvarint ncols | unit<<17
//	times: zigzag varint of the first, then of each delta of deltas, in
//	  the chunk's unit: 0 nanoseconds, 1 microseconds, 2 milliseconds, 3
//	  seconds, the largest that divides every time (store format 8; a
//	  chunk of format 7 and before has no unit bits, nanoseconds)
//	per column: a tag byte (encoding | hasPresence<<3 | scale<<4), the
//	presence words when some row is absent (8 bytes each, little
//	endian), then every row's value (an absent row's is the zero value):
//	  ints, dates, int32s: zigzag varints of the deltas
//	  floats with a decimal scale k: as ints, of v*10^k
//	  other floats: each value's bits XOR the previous', as a byte
//	    lead<<4|trail (zero bytes at each end) and the bytes between
//	  strings and BSON: uvarint length and bytes
//	  object ids: 12 bytes each
//	  bools: one bit each, whole bytes

const (
	frozenInts byte = iota
	frozenDecimal
	frozenXOR
	frozenStrings
	frozenIDs
	frozenBools
)

// ErrFrozen reports a frozen chunk that does not decode.
var ErrFrozen = errors.New("bucket: bad frozen chunk")

// AppendFrozen appends the first rows rows of cols, as one frozen chunk,
// to dst. Every column of cols must hold at least rows rows.
func AppendFrozen(dst []byte, cols *Columns, rows int) []byte {
	times := cols.Times[:rows]
	// The unit: 10^k nanoseconds, k of 0, 3, 6 or 9, written as k/3.
	k := timeScale(times, 0)
	unit := pow10Int[k]
	dst = binary.AppendUvarint(dst, uint64(rows))
	dst = binary.AppendUvarint(dst, uint64(len(cols.Fields))|uint64(k/3)<<frozenUnitShift)
	var prev, delta int64
	for i, t := range times {
		t /= unit
		switch i {
		case 0:
			dst = appendVarint(dst, t)
		default:
			d := t - prev
			dst = appendVarint(dst, d-delta)
			delta = d
		}
		prev = t
	}
	for ci := range cols.Fields {
		dst = appendFrozenColumn(dst, &cols.Fields[ci], rows)
	}
	return dst
}

// frozenUnitShift is where a chunk's time unit sits in its header's second
// value, above any column count (MaxFields).
const frozenUnitShift = 17

func appendFrozenColumn(dst []byte, c *Column, rows int) []byte {
	words := (rows + 63) / 64
	hasPresence := c.Present != nil && popcount(c.Present, rows) != rows
	var tag byte
	switch c.Type {
	case TypeFloat:
		tag = frozenXOR
		if k, ok := floatsScale(c.Floats[:rows]); ok {
			tag = frozenDecimal | byte(k)<<4
		}
	case TypeInt, TypeDate, TypeInt32:
		tag = frozenInts
	case TypeString, TypeBSON:
		tag = frozenStrings
	case TypeObjectID:
		tag = frozenIDs
	case TypeBool:
		tag = frozenBools
	}
	if hasPresence {
		tag |= 1 << 3
	}
	dst = append(dst, tag)
	if hasPresence {
		for w := 0; w < words; w++ {
			v := c.Present[w]
			if r := rows - 64*w; r < 64 {
				v &= 1<<r - 1
			}
			dst = binary.LittleEndian.AppendUint64(dst, v)
		}
	}
	switch tag & 7 {
	case frozenInts:
		var prev int64
		for _, v := range c.Ints[:rows] {
			dst = appendVarint(dst, v-prev)
			prev = v
		}
	case frozenDecimal:
		k := int(tag >> 4)
		var prev int64
		for _, v := range c.Floats[:rows] {
			i, _ := decimalScale(v, k)
			dst = appendVarint(dst, i-prev)
			prev = i
		}
	case frozenXOR:
		var prev uint64
		for _, v := range c.Floats[:rows] {
			b := math.Float64bits(v)
			x := b ^ prev
			prev = b
			if x == 0 {
				dst = append(dst, 0)
				continue
			}
			lead, trail := bits.LeadingZeros64(x)/8, bits.TrailingZeros64(x)/8
			dst = append(dst, byte(0x80|lead<<4|trail))
			for s := 7 - lead; s >= trail; s-- {
				dst = append(dst, byte(x>>(8*s)))
			}
		}
	case frozenStrings:
		for _, s := range c.Strings[:rows] {
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		}
	case frozenIDs:
		dst = append(dst, c.IDs[:rows*ObjectIDLen]...)
	case frozenBools:
		var b byte
		for i, v := range c.Bools[:rows] {
			if v {
				b |= 1 << (i % 8)
			}
			if i%8 == 7 {
				dst = append(dst, b)
				b = 0
			}
		}
		if rows%8 != 0 {
			dst = append(dst, b)
		}
	}
	return dst
}

// floatsScale returns the smallest decimal scale at which every value of
// fs is an exact decimal (decimalScale), if there is one.
func floatsScale(fs []float64) (int, bool) {
	k := 0
	for _, v := range fs {
		for {
			if _, ok := decimalScale(v, k); ok {
				break
			}
			if k++; k > maxDecimalScale {
				return 0, false
			}
		}
	}
	// A value that fitted a smaller scale need not fit a larger one.
	for _, v := range fs {
		if _, ok := decimalScale(v, k); !ok {
			return 0, false
		}
	}
	return k, true
}

// frozenHeader reads a chunk's header: its rows, its columns and the unit
// of its times.
func frozenHeader(src []byte) (rows, ncols int, unit int64, rest []byte, err error) {
	r, n := binary.Uvarint(src)
	if n <= 0 || r == 0 || r > MaxRows {
		return 0, 0, 0, nil, ErrFrozen
	}
	c, m := binary.Uvarint(src[n:])
	code := c >> frozenUnitShift
	c &= 1<<frozenUnitShift - 1
	if m <= 0 || c > MaxFields || code > 3 {
		return 0, 0, 0, nil, ErrFrozen
	}
	return int(r), int(c), pow10Int[3*code], src[n+m:], nil
}

// DecodeFrozen decodes the frozen chunks in src into dst, from row 0:
// dst.Times must be long enough for every chunk's rows, and dst.Fields
// holds the columns to decode, by column index, each with its Name and
// Type and value slices of dst.Times' length (zero-valued); a column of
// Type 0, and a chunk's columns beyond them, are skipped. A value of
// an absent row stays zero. Presence: dst's Present bitmaps, where not nil,
// get the chunks' rows' bits; where a chunk has absent rows and a column's
// Present is nil, need is called with the column's index, and must set
// Present to a bitmap of every row present (the caller knows the later
// rows). A column beyond a chunk's ncols gets need too. It returns the rows
// decoded.
func DecodeFrozen(src []byte, dst *Columns, need func(col int)) (int, error) {
	at := 0
	for len(src) > 0 {
		rows, ncols, unit, rest, err := frozenHeader(src)
		if err != nil {
			return 0, err
		}
		if at+rows > len(dst.Times) {
			return 0, ErrFrozen
		}
		if src, err = decodeFrozenBody(rest, rows, ncols, unit, dst, at, need, nil); err != nil {
			return 0, err
		}
		for ci := ncols; ci < len(dst.Fields); ci++ {
			// A column added after this chunk: absent from its rows.
			c := &dst.Fields[ci]
			if c.Type == 0 {
				continue
			}
			if c.Present == nil {
				need(ci)
			}
			for i := at; i < at+rows; i++ {
				c.Present[i/64] &^= 1 << (i % 64)
			}
		}
		at += rows
	}
	return at, nil
}

// decodeFrozenBody decodes a chunk's body into dst from row at; with dst
// nil, it checks the body, and its columns' encodings against types when
// types lists them.
func decodeFrozenBody(src []byte, rows, ncols int, unit int64, dst *Columns, at int, need func(int), types []Type) ([]byte, error) {
	if types != nil && ncols > len(types) {
		return nil, ErrFrozen
	}
	// Times in units of unit stay within these bounds, so that they are
	// nanoseconds in an int64.
	lo, hi := int64(math.MinInt64)/unit, int64(math.MaxInt64)/unit
	var prev, delta int64
	var ts []int64
	if dst != nil {
		ts = dst.Times[at : at+rows]
	}
	for i := 0; i < rows; i++ {
		v, n := binary.Varint(src)
		if n <= 0 {
			return nil, ErrFrozen
		}
		src = src[n:]
		switch i {
		case 0:
			prev = v
		default:
			delta += v
			prev += delta
		}
		if unit > 1 && (prev < lo || prev > hi) {
			return nil, ErrFrozen
		}
		if ts != nil {
			ts[i] = prev * unit
		}
	}
	for ci := 0; ci < ncols; ci++ {
		if len(src) == 0 {
			return nil, ErrFrozen
		}
		tag := src[0]
		src = src[1:]
		var c *Column
		var typ Type
		if dst != nil && ci < len(dst.Fields) && dst.Fields[ci].Type != 0 {
			c = &dst.Fields[ci]
			typ = c.Type
		} else if types != nil {
			typ = types[ci]
		}
		if tag&(1<<3) != 0 {
			words := (rows + 63) / 64
			if len(src) < 8*words {
				return nil, ErrFrozen
			}
			if c != nil {
				if c.Present == nil {
					need(ci)
				}
				for i := 0; i < rows; i++ {
					w := binary.LittleEndian.Uint64(src[8*(i/64):])
					r := at + i
					if w&(1<<(i%64)) != 0 {
						c.Present[r/64] |= 1 << (r % 64)
					} else {
						c.Present[r/64] &^= 1 << (r % 64)
					}
				}
			}
			src = src[8*words:]
		} else if c != nil && c.Present != nil {
			for r := at; r < at+rows; r++ {
				c.Present[r/64] |= 1 << (r % 64)
			}
		}
		var err error
		if src, err = decodeFrozenValues(src, tag, rows, c, typ, at); err != nil {
			return nil, err
		}
	}
	return src, nil
}

// decodeFrozenValues decodes a column's values into c (nil: nowhere) from
// row at, checking the encoding against typ (0: unknown).
func decodeFrozenValues(src []byte, tag byte, rows int, c *Column, typ Type, at int) ([]byte, error) {
	want := func(ok bool) error {
		if !ok {
			return ErrFrozen
		}
		return nil
	}
	switch tag & 7 {
	case frozenInts, frozenDecimal:
		k := int(tag >> 4)
		if tag&7 == frozenInts {
			if k != 0 || typ != 0 && typ != TypeInt && typ != TypeDate && typ != TypeInt32 {
				return nil, ErrFrozen
			}
		} else if k > maxDecimalScale || typ != 0 && typ != TypeFloat {
			return nil, ErrFrozen
		}
		var prev int64
		for i := 0; i < rows; i++ {
			d, n := binary.Varint(src)
			if n <= 0 {
				return nil, ErrFrozen
			}
			src = src[n:]
			prev += d
			if c == nil {
				continue
			}
			if tag&7 == frozenInts {
				c.Ints[at+i] = prev
			} else {
				c.Floats[at+i] = float64(prev) / pow10[k]
			}
		}
	case frozenXOR:
		if err := want(typ == 0 || typ == TypeFloat); err != nil {
			return nil, err
		}
		var prev uint64
		for i := 0; i < rows; i++ {
			if len(src) == 0 {
				return nil, ErrFrozen
			}
			h := src[0]
			src = src[1:]
			if h != 0 {
				lead, trail := int(h>>4&7), int(h&15)
				nb := 8 - lead - trail
				if h&0x80 == 0 || nb <= 0 || len(src) < nb {
					return nil, ErrFrozen
				}
				var x uint64
				for _, b := range src[:nb] {
					x = x<<8 | uint64(b)
				}
				prev ^= x << (8 * trail)
				src = src[nb:]
			}
			if c != nil {
				c.Floats[at+i] = math.Float64frombits(prev)
			}
		}
	case frozenStrings:
		if err := want(typ == 0 || typ == TypeString || typ == TypeBSON); err != nil {
			return nil, err
		}
		for i := 0; i < rows; i++ {
			l, n := binary.Uvarint(src)
			if n <= 0 || l > uint64(len(src)-n) {
				return nil, ErrFrozen
			}
			if c != nil {
				c.Strings[at+i] = string(src[n : n+int(l)])
			}
			src = src[n+int(l):]
		}
	case frozenIDs:
		if err := want((typ == 0 || typ == TypeObjectID) && len(src) >= rows*ObjectIDLen); err != nil {
			return nil, err
		}
		if c != nil {
			copy(c.IDs[at*ObjectIDLen:], src[:rows*ObjectIDLen])
		}
		src = src[rows*ObjectIDLen:]
	case frozenBools:
		nb := (rows + 7) / 8
		if err := want((typ == 0 || typ == TypeBool) && len(src) >= nb); err != nil {
			return nil, err
		}
		if c != nil {
			for i := 0; i < rows; i++ {
				c.Bools[at+i] = src[i/8]&(1<<(i%8)) != 0
			}
		}
		src = src[nb:]
	default:
		return nil, ErrFrozen
	}
	return src, nil
}

// VersionSnapshot is the first byte of an open bucket's snapshot written
// as its frozen rows (AppendSnapshot), where a bucket has its version.
const VersionSnapshot = 0x46

// Snapshot is an open bucket's snapshot as ReadSnapshot parses it.
type Snapshot struct {
	Rows       int
	MinT, MaxT int64
	// Refs and Types are the bucket's columns, in the order its frozen
	// rows index them: name references (as EncodeRefs stores them) and
	// types.
	Refs  []uint32
	Types []Type
	// Frozen is the rows as frozen chunks (a slice of the snapshot).
	Frozen []byte
}

// AppendSnapshot appends to dst the snapshot of an open bucket of rows
// rows with times in [minT, maxT]: a header as a bucket's (VersionSnapshot,
// rows, minT, the span), its columns' name references and types, then
// frozen, the bucket's frozen rows, and the rows of tail frozen. An open
// bucket is written by a checkpoint again and again as it fills: its
// frozen rows are copied, not encoded again. tail lists every column of
// the bucket (its header), refs their references.
func AppendSnapshot(dst []byte, minT, maxT int64, refs []uint32, frozen []byte, frozenRows int, tail *Columns) []byte {
	rows := frozenRows + len(tail.Times)
	dst = append(dst, VersionSnapshot)
	dst = binary.AppendUvarint(dst, uint64(rows))
	dst = binary.AppendUvarint(dst, zigzag(minT))
	dst = binary.AppendUvarint(dst, uint64(maxT-minT))
	dst = binary.AppendUvarint(dst, uint64(len(tail.Fields)))
	for i := range tail.Fields {
		dst = binary.AppendUvarint(dst, uint64(refs[i]))
		dst = append(dst, byte(tail.Fields[i].Type))
	}
	dst = append(dst, frozen...)
	if len(tail.Times) > 0 {
		dst = AppendFrozen(dst, tail, len(tail.Times))
	}
	return dst
}

// ReadSnapshot parses data, a snapshot made by AppendSnapshot, into s, and
// checks it: its chunks' rows add up to its rows, each chunk's columns
// are encoded as their types. s.Frozen is a slice of data.
func ReadSnapshot(data []byte, s *Snapshot) error {
	if len(data) == 0 || data[0] != VersionSnapshot {
		return ErrFrozen
	}
	c := cursor{data: data, p: data[1:]}
	var h [4]uint64
	for i := range h {
		v, err := c.uvarint("snapshot header")
		if err != nil {
			return err
		}
		h[i] = v
	}
	if h[0] == 0 || h[0] > MaxRows || h[3] > MaxFields || int64(h[2]) < 0 {
		return ErrFrozen
	}
	s.Rows, s.MinT = int(h[0]), unzigzag(h[1])
	s.MaxT = s.MinT + int64(h[2])
	if s.MaxT < s.MinT {
		return ErrFrozen
	}
	s.Refs, s.Types = s.Refs[:0], s.Types[:0]
	seen := make(map[uint64]bool, h[3])
	for i := 0; i < int(h[3]); i++ {
		ref, err := c.uvarint("column reference")
		if err != nil {
			return err
		}
		t, err := c.byte("column type")
		if err != nil {
			return err
		}
		if ref > MaxRef || !Type(t).valid() || seen[ref] {
			return ErrFrozen // a reference used twice: two columns of one name
		}
		seen[ref] = true
		s.Refs, s.Types = append(s.Refs, uint32(ref)), append(s.Types, Type(t))
	}
	s.Frozen = c.p
	rows, src := 0, s.Frozen
	for len(src) > 0 {
		n, ncols, unit, rest, err := frozenHeader(src)
		if err != nil {
			return err
		}
		if src, err = decodeFrozenBody(rest, n, ncols, unit, nil, 0, nil, s.Types); err != nil {
			return err
		}
		rows += n
	}
	if rows != s.Rows {
		return ErrFrozen
	}
	return nil
}

// FrozenPresent sets present[i] for each column i < len(present) that
// holds a value in some row of the frozen chunks in src, in one pass: it
// reads presence words and skips values. It returns ErrFrozen for chunks
// that do not decode.
func FrozenPresent(src []byte, present []bool) error {
	for len(src) > 0 {
		rows, ncols, _, rest, err := frozenHeader(src)
		if err != nil {
			return err
		}
		for i := 0; i < rows; i++ { // the times
			_, n := binary.Varint(rest)
			if n <= 0 {
				return ErrFrozen
			}
			rest = rest[n:]
		}
		for ci := 0; ci < ncols; ci++ {
			if len(rest) == 0 {
				return ErrFrozen
			}
			tag := rest[0]
			words := 0
			if tag&(1<<3) != 0 {
				words = (rows + 63) / 64
			}
			if len(rest) < 1+8*words {
				return ErrFrozen
			}
			if ci < len(present) && !present[ci] {
				has := words == 0
				for w := 0; w < words && !has; w++ {
					has = binary.LittleEndian.Uint64(rest[1+8*w:]) != 0
				}
				present[ci] = has
			}
			if rest, err = decodeFrozenValues(rest[1+8*words:], tag, rows, nil, 0, 0); err != nil {
				return err
			}
		}
		src = rest
	}
	return nil
}
