package timeseries

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
)

// Open rows are an open bucket's rows since its last freeze, appended to
// one byte string as they come (memBucket.open) rather than to a plain
// column each: a fleet's open bucket then holds no column of its own, and
// its column headers (name and type) are the collection's, shared by
// every bucket of the same columns (collection.headers). A row is
//
//	uvarint fields, the time (8 bytes, little endian), then per field
//	the column's index (uvarint) and the value: a float's bits (8 bytes,
//	little endian), an integer, date or int32 as a zigzag varint, a
//	string or BSON value as its uvarint length and bytes, an object id's
//	12 bytes, a bool as one byte.
//
// They live in memory only: a checkpoint writes them frozen
// (bucket.AppendSnapshot), and a freeze compresses them into a frozen chunk.

// appendOpenRow appends a row at time t of the fields fs, fs[i] in column
// ci[i], to dst.
func appendOpenRow(dst []byte, t int64, fs []model.Field, ci []int32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(fs)))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(t))
	for i := range fs {
		dst = binary.AppendUvarint(dst, uint64(ci[i]))
		v := &fs[i].Value
		switch v.Kind {
		case model.KindFloat:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.F))
		case model.KindInt, model.KindDate, model.KindInt32:
			dst = binary.AppendVarint(dst, v.I)
		case model.KindString, model.KindBSON:
			dst = binary.AppendUvarint(dst, uint64(len(v.S)))
			dst = append(dst, v.S...)
		case model.KindObjectID:
			dst = append(dst, v.S...)
		case model.KindBool:
			b := byte(0)
			if v.B {
				b = 1
			}
			dst = append(dst, b)
		}
	}
	return dst
}

// openRowReader reads open rows. The rows are made by this process and
// never persisted: a row that does not decode is a bug, and panics.
type openRowReader struct {
	src []byte
	hdr []bucket.Column
}

// next reads the next row's header: its time and how many fields follow.
func (r *openRowReader) next() (t int64, fields int) {
	n, k := binary.Uvarint(r.src)
	if k <= 0 || len(r.src) < k+8 {
		panic(fmt.Sprintf("timeseries: open rows do not decode (%d bytes left)", len(r.src)))
	}
	t = int64(binary.LittleEndian.Uint64(r.src[k:]))
	r.src = r.src[k+8:]
	return t, int(n)
}

// field reads the next field of a row and returns its column; with dst
// not nil, it writes the value into that column of dst at row i.
func (r *openRowReader) field(dst *bucket.Columns, i int) int {
	c, k := binary.Uvarint(r.src)
	if k <= 0 || c >= uint64(len(r.hdr)) {
		panic(fmt.Sprintf("timeseries: open rows do not decode: column %d of %d", c, len(r.hdr)))
	}
	r.src = r.src[k:]
	var col *bucket.Column
	if dst != nil {
		col = &dst.Fields[c]
	}
	switch r.hdr[c].Type {
	case model.KindFloat:
		if col != nil {
			col.Floats[i] = math.Float64frombits(binary.LittleEndian.Uint64(r.src))
		}
		r.src = r.src[8:]
	case model.KindInt, model.KindDate, model.KindInt32:
		v, k := binary.Varint(r.src)
		if col != nil {
			col.Ints[i] = v
		}
		r.src = r.src[k:]
	case model.KindString, model.KindBSON:
		n, k := binary.Uvarint(r.src)
		if col != nil {
			col.Strings[i] = string(r.src[k : k+int(n)])
		}
		r.src = r.src[k+int(n):]
	case model.KindObjectID:
		if col != nil {
			copy(col.IDs[i*bucket.ObjectIDLen:], r.src[:bucket.ObjectIDLen])
		}
		r.src = r.src[bucket.ObjectIDLen:]
	case model.KindBool:
		if col != nil {
			col.Bools[i] = r.src[0] != 0
		}
		r.src = r.src[1:]
	}
	return int(c)
}

// decodeOpenRows decodes rows open rows of src, whose columns are hdr,
// into out, reusing its slices (as thawColumnsInto does): out gets every
// column of hdr, an absent value zero and its row's presence bit clear.
func decodeOpenRows(out *bucket.Columns, hdr []bucket.Column, src []byte, rows int) {
	out.Times = zeroed(out.Times, rows)
	if cap(out.Fields) < len(hdr) {
		out.Fields = make([]bucket.Column, len(hdr))
	}
	out.Fields = out.Fields[:len(hdr)]
	for i := range hdr {
		dst := &out.Fields[i]
		dst.Name, dst.Type, dst.Present = hdr[i].Name, hdr[i].Type, nil
		dst.Floats, dst.Ints, dst.Strings, dst.IDs, dst.Bools = dst.Floats[:0], dst.Ints[:0], dst.Strings[:0], dst.IDs[:0], dst.Bools[:0]
		switch hdr[i].Type {
		case model.KindFloat:
			dst.Floats = zeroed(dst.Floats, rows)
		case model.KindInt, model.KindDate, model.KindInt32:
			dst.Ints = zeroed(dst.Ints, rows)
		case model.KindString, model.KindBSON:
			dst.Strings = make([]string, rows) // reused, it would keep its strings alive
		case model.KindObjectID:
			dst.IDs = zeroed(dst.IDs, rows*bucket.ObjectIDLen)
		case model.KindBool:
			dst.Bools = zeroed(dst.Bools, rows)
		}
	}
	r := openRowReader{src: src, hdr: hdr}
	// seen[c] is 1 + the last row that set column c.
	var seenBuf [16]int
	seen := seenBuf[:]
	if len(hdr) > len(seenBuf) {
		seen = make([]int, len(hdr))
	}
	for i := range rows {
		t, n := r.next()
		out.Times[i] = t
		for range n {
			seen[r.field(out, i)] = i + 1
		}
		for c := range hdr {
			if seen[c] == i+1 {
				continue
			}
			col := &out.Fields[c]
			if col.Present == nil {
				col.Present = allPresent(rows)
			}
			col.Present[i/64] &^= 1 << (i % 64)
		}
	}
	if len(r.src) != 0 {
		panic(fmt.Sprintf("timeseries: open rows do not decode: %d bytes past %d rows", len(r.src), rows))
	}
}

// openPresent sets present[c] for every column c that a row of the open
// rows src (of columns hdr) sets.
func openPresent(src []byte, hdr []bucket.Column, rows int, present []bool) {
	r := openRowReader{src: src, hdr: hdr}
	for range rows {
		_, n := r.next()
		for range n {
			present[r.field(nil, 0)] = true
		}
	}
}

// maxHeaderSets is the most column lists a collection shares among its
// buckets (collection.headers); past it, a bucket keeps its own.
const maxHeaderSets = 4096

// headerSeed hashes column lists for collection.headers.
var headerSeed = maphash.MakeSeed()

// headerHash hashes a column list: its names and types, in order.
func headerHash(hdr []bucket.Column) uint64 {
	var h maphash.Hash
	h.SetSeed(headerSeed)
	for i := range hdr {
		h.WriteString(hdr[i].Name)
		h.WriteByte(byte(hdr[i].Type))
	}
	return h.Sum64()
}

// sameHeaders reports whether a and b list the same columns in order.
func sameHeaders(a, b []bucket.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Type != b[i].Type {
			return false
		}
	}
	return true
}

// shareHeaders returns the collection's shared copy of the column list
// hdr (names and types; no values) and true, making hdr, cut to its length,
// that copy when there is none; or hdr itself and false once the
// collection shares maxHeaderSets lists. A shared list is never written
// to: a bucket adding a column makes a new one. DB.mu is held for writing.
func (c *collection) shareHeaders(hdr []bucket.Column) ([]bucket.Column, bool) {
	h := headerHash(hdr)
	if got, ok := c.headers[h]; ok {
		if sameHeaders(got, hdr) {
			return got, true
		}
		return hdr, false // a collision keeps its own
	}
	if len(c.headers) >= maxHeaderSets {
		return hdr, false
	}
	if c.headers == nil {
		c.headers = make(map[uint64][]bucket.Column)
	}
	hdr = hdr[:len(hdr):len(hdr)]
	c.headers[h] = hdr
	return hdr, true
}

// openTimes returns the times of the rows open rows of src (of columns
// hdr), as a new slice.
func openTimes(src []byte, hdr []bucket.Column, rows int) []int64 {
	times := make([]int64, rows)
	r := openRowReader{src: src, hdr: hdr}
	for i := range rows {
		t, n := r.next()
		times[i] = t
		for range n {
			r.field(nil, 0)
		}
	}
	return times
}
