package timeseries

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// Log record kinds (docs/format/wal.md). Persisted: values never change.
// recDocBatch (3) is a plain collection's (plain.go).
const (
	recInsert      byte = 1
	recDelete      byte = 2
	recDeleteWhere byte = 4
	recMetaUpdate  byte = 5
	// recInsertByID is recInsert with each group's series named by its id
	// where a checkpoint made the series durable (the record is written
	// after that checkpoint, so a replay of it starts from that one or a
	// later one, which loads the series), and by its meta key otherwise.
	// A fleet's record is then a few bytes a row instead of a meta key a
	// series.
	recInsertByID byte = 6
)

// group is the measurements of one meta value within an insert.
type group struct {
	metaKey string
	rows    []model.Measurement
	// s is the series of metaKey when the insert found it, for apply to
	// skip a lookup; nil when new or not looked up.
	s *series
	// ref is the series' id + 1 when a recInsertByID record named it by
	// its id (metaKey is then empty until replay finds the series), 0
	// otherwise.
	ref uint64
}

// recFloatWhole is the value kind byte, in an insert record, of a float
// that is a whole number of at most 2^53 in magnitude, written as a
// varint of that number rather than as its 8 bytes (store format 9): a
// counter's or a reading's whole values take one to four bytes.
const recFloatWhole = 0x41

// maxWholeFloat bounds the whole floats written as recFloatWhole: every
// integer up to it is exactly a float64.
const maxWholeFloat = 1 << 53

// wholeFloat returns v as an integer when v is a whole number within
// ±maxWholeFloat whose float64 is v bit for bit (not -0, not NaN).
func wholeFloat(v float64) (int64, bool) {
	if !(v >= -maxWholeFloat && v <= maxWholeFloat) {
		return 0, false
	}
	i := int64(v)
	return i, math.Float64bits(float64(i)) == math.Float64bits(v)
}

// recordEncoder encodes insert and delete records; reusable, not safe for
// concurrent use.
type recordEncoder struct {
	names map[string]uint64
	list  []string
	// buf is the last record's buffer, kept for the next (keep) unless
	// larger than maxKeptRecord.
	buf []byte
	// relogged is the bytes of the meta keys the last insert record wrote
	// for series the collection held already, not yet durable
	// (DB.keysRelogged).
	relogged int
}

// maxKeptRecord bounds the record buffer a pooled encoder keeps.
const maxKeptRecord = 4 << 20

// keep keeps rec's buffer for the next record once it is no longer used.
func (e *recordEncoder) keep(rec []byte) {
	if cap(rec) <= maxKeptRecord {
		e.buf = rec[:0]
	} else {
		e.buf = nil
	}
}

// encodeInsert appends an insert record (recInsertByID) of groups for
// collection coll: a group whose series is durable (group.s) or that a
// record named by id (group.ref) is written with its series' id.
func (e *recordEncoder) encodeInsert(dst []byte, coll uint32, groups []group) []byte {
	if e.names == nil {
		e.names = make(map[string]uint64)
	}
	clear(e.names)
	e.list = e.list[:0]
	// Field names are interned: a table first, then indexes. Rows of
	// every group usually list the same names: each is looked up when it
	// differs from the row before's (a fleet's batch has a row a group).
	var prev []model.Field
	var prevID string
	for gi := range groups {
		for ri := range groups[gi].rows {
			fs := groups[gi].rows[ri].Fields
			for i := range fs {
				if i < len(prev) && prev[i].Name == fs[i].Name {
					continue
				}
				if _, ok := e.names[fs[i].Name]; !ok {
					e.names[fs[i].Name] = uint64(len(e.list))
					e.list = append(e.list, fs[i].Name)
				}
			}
			prev = fs
		}
	}
	dst = append(dst, recInsertByID)
	dst = binary.AppendUvarint(dst, uint64(coll))
	dst = binary.AppendUvarint(dst, uint64(len(e.list)))
	for _, n := range e.list {
		dst = appendString(dst, n)
	}
	dst = binary.AppendUvarint(dst, uint64(len(groups)))
	prev = nil
	var prevIdx []uint64
	// A time is a delta from the row before's, across groups: a fleet's
	// batch has a row of each series at about the same time.
	var prevT int64
	e.relogged = 0
	for gi := range groups {
		g := &groups[gi]
		ref := g.ref
		if g.s != nil && g.s.durable.Load() {
			ref = g.s.id + 1
		}
		dst = binary.AppendUvarint(dst, ref)
		if ref == 0 {
			dst = appendString(dst, g.metaKey)
			if g.s != nil {
				e.relogged += len(g.metaKey)
			}
		}
		dst = binary.AppendUvarint(dst, uint64(len(g.rows)))
		for ri := range g.rows {
			m := &g.rows[ri]
			dst = binary.AppendVarint(dst, m.Time-prevT)
			prevT = m.Time
			dst = binary.AppendUvarint(dst, uint64(len(m.Fields)))
			for i := range m.Fields {
				f := &m.Fields[i]
				var idx uint64
				if i < len(prev) && prev[i].Name == f.Name {
					idx = prevIdx[i]
				} else {
					idx = e.names[f.Name]
				}
				if i < len(prevIdx) {
					prevIdx[i] = idx
				} else {
					prevIdx = append(prevIdx, idx)
				}
				dst = binary.AppendUvarint(dst, idx)
				if f.Value.Kind == model.KindFloat {
					if i, ok := wholeFloat(f.Value.F); ok {
						dst = append(dst, recFloatWhole)
						dst = binary.AppendVarint(dst, i)
						continue
					}
				}
				dst = append(dst, byte(f.Value.Kind))
				switch f.Value.Kind {
				case model.KindFloat:
					dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(f.Value.F))
				case model.KindInt, model.KindDate, model.KindInt32:
					dst = binary.AppendVarint(dst, f.Value.I)
				case model.KindString, model.KindBSON:
					dst = appendString(dst, f.Value.S)
				case model.KindObjectID:
					// The bytes shared with the record's last ObjectId
					// (the ids of a batch differ in their counter), then
					// the rest.
					id := f.Value.S
					n := 0
					for n < len(id) && n < len(prevID) && id[n] == prevID[n] {
						n++
					}
					dst = append(dst, byte(n))
					dst = append(dst, id[n:]...)
					prevID = id
				case model.KindBool:
					b := byte(0)
					if f.Value.B {
						b = 1
					}
					dst = append(dst, b)
				}
			}
			prev = m.Fields
		}
	}
	return dst
}

// deleteRecord is a logged delete: rows of the listed series with times in
// [minTime, maxTime] and, when filter is set, that filter matches (a
// recDeleteWhere record; recDelete without).
type deleteRecord struct {
	coll     uint32
	minTime  int64
	maxTime  int64
	metaKeys []string
	// filter is the delete's whole filter, evaluated on each row's
	// document (rowFilter); nil: every row in the time range.
	filter *partialfilter.Filter
}

func (d *deleteRecord) encode(dst []byte) []byte {
	if d.filter != nil {
		dst = append(dst, recDeleteWhere)
	} else {
		dst = append(dst, recDelete)
	}
	dst = binary.AppendUvarint(dst, uint64(d.coll))
	dst = binary.AppendVarint(dst, d.minTime)
	dst = binary.AppendVarint(dst, d.maxTime)
	if d.filter != nil {
		// The canonical text (partialfilter.Filter.String): the same
		// conditions always log the same bytes, and ParseJSON reads them
		// back into a filter matching the same rows.
		dst = appendString(dst, d.filter.String())
	}
	dst = binary.AppendUvarint(dst, uint64(len(d.metaKeys)))
	for _, k := range d.metaKeys {
		dst = appendString(dst, k)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// recordDecoder reads records written by recordEncoder.
type recordDecoder struct {
	b   []byte
	err error
}

func (d *recordDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: log record: bad %s at offset %d", ErrCorrupt, what, len(d.b))
	}
	d.b = nil
}

func (d *recordDecoder) uvarint(what string) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) varint(what string) int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) str(what string) string {
	n := d.uvarint(what)
	if n > uint64(len(d.b)) {
		d.fail(what)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *recordDecoder) byte1(what string) byte {
	if len(d.b) < 1 {
		d.fail(what)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// count reads a count and checks it against the bytes left (each item
// takes at least min bytes), so corrupt input cannot make us allocate.
func (d *recordDecoder) count(what string, min int) int {
	n := d.uvarint(what)
	if n > uint64(len(d.b)/min) {
		d.fail(what)
		return 0
	}
	return int(n)
}

// decodeInsert decodes an insert record after its kind byte: recInsert,
// or recInsertByID with byID (a group named by id has its ref set and no
// metaKey).
func decodeInsert(b []byte, byID bool) (coll uint32, groups []group, err error) {
	d := recordDecoder{b: b}
	coll = uint32(d.uvarint("collection"))
	names := make([]string, d.count("name count", 1))
	for i := range names {
		names[i] = d.str("name")
	}
	groups = make([]group, d.count("group count", 2))
	var prevID string // the last ObjectId decoded
	var t int64       // the last time decoded
	for gi := range groups {
		g := &groups[gi]
		if byID {
			g.ref = d.uvarint("series")
		}
		if g.ref == 0 {
			g.metaKey = d.str("meta")
		}
		g.rows = make([]model.Measurement, d.count("row count", 2))
		if !byID {
			t = 0 // kind 1: a group's first time is whole
		}
		for ri := range g.rows {
			m := &g.rows[ri]
			t += d.varint("time")
			m.Time = t
			m.Fields = make([]model.Field, d.count("field count", 3))
			for fi := range m.Fields {
				f := &m.Fields[fi]
				idx := d.uvarint("name index")
				if idx >= uint64(len(names)) {
					d.fail("name index")
					return 0, nil, d.err
				}
				f.Name = names[idx]
				kind := d.byte1("kind")
				if kind == recFloatWhole {
					i := d.varint("whole float")
					if i < -maxWholeFloat || i > maxWholeFloat {
						d.fail("whole float")
					}
					f.Value = model.Float(float64(i))
					if d.err != nil {
						return 0, nil, d.err
					}
					continue
				}
				f.Value.Kind = model.Kind(kind)
				switch f.Value.Kind {
				case model.KindFloat:
					if len(d.b) < 8 {
						d.fail("float")
						return 0, nil, d.err
					}
					f.Value.F = math.Float64frombits(binary.LittleEndian.Uint64(d.b))
					d.b = d.b[8:]
				case model.KindInt, model.KindDate:
					f.Value.I = d.varint("int")
				case model.KindInt32:
					f.Value.I = d.varint("int32")
					if f.Value.I != int64(int32(f.Value.I)) {
						d.fail("int32")
					}
				case model.KindString, model.KindBSON:
					f.Value.S = d.str("string")
				case model.KindObjectID:
					n := int(d.byte1("objectid prefix"))
					if n > len(prevID) || len(d.b) < 12-n {
						d.fail("objectid")
						return 0, nil, d.err
					}
					f.Value.S = prevID[:n] + string(d.b[:12-n])
					d.b = d.b[12-n:]
					prevID = f.Value.S
				case model.KindBool:
					f.Value.B = d.byte1("bool") != 0
				default:
					d.fail("kind")
				}
				if d.err != nil {
					return 0, nil, d.err
				}
			}
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	return coll, groups, d.err
}

// decodeDelete decodes a delete record after its kind byte: recDelete, or
// recDeleteWhere with where.
func decodeDelete(b []byte, where bool) (deleteRecord, error) {
	d := recordDecoder{b: b}
	var r deleteRecord
	r.coll = uint32(d.uvarint("collection"))
	r.minTime = d.varint("min time")
	r.maxTime = d.varint("max time")
	if where {
		text := d.str("filter")
		if d.err == nil {
			f, err := partialfilter.ParseJSON([]byte(text))
			if err != nil {
				return r, fmt.Errorf("%w: log record: bad filter: %v", ErrCorrupt, err)
			}
			r.filter = f
		}
	}
	r.metaKeys = make([]string, d.count("series count", 1))
	for i := range r.metaKeys {
		r.metaKeys[i] = d.str("meta")
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	return r, d.err
}
