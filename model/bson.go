package model

import (
	"bytes"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Bounds of a BSONDecoder's meta cache. A full cache is emptied
// and refilled; a meta value longer than maxCachedMeta is converted afresh
// for every document.
const (
	maxCachedBSONMetas     = 1 << 16
	maxCachedBSONMetaBytes = 16 << 20
	maxCachedBSONMeta      = 4 << 10
	maxFastFields          = 64 // more fields: the general conversion
	maxCachedBSONNames     = 4096
)

// The dates the engine stores: years timeseries.MinDateYear to
// timeseries.MaxDateYear, in BSON's milliseconds.
var (
	minBSONDateMillis = time.Date(MinDateYear, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	endBSONDateMillis = time.Date(MaxDateYear+1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
)

// FloorMillis converts nanoseconds since the epoch to a BSON date's
// milliseconds, rounding toward the past as the date's own second does.
func FloorMillis(ns int64) int64 {
	ms := ns / int64(time.Millisecond)
	if ns%int64(time.Millisecond) < 0 {
		ms--
	}
	return ms
}

// BSONDecoder converts BSON documents into measurements. The
// documents sensors send (a date, a meta value seen before, numbers,
// strings, booleans) are read element by element with the meta value
// looked up in a bounded cache of canonical keys; anything else (a meta
// value not cached, a sub-document or array field, a name twice, a date
// out of range) goes through FromBSON and MeasurementFromDocument,
// so that the result and the refusals are theirs. It is not safe for
// concurrent use; keep a few with their caches (the MongoDB door keeps
// two per processor).
type BSONDecoder struct {
	metas     map[string]cachedBSONMeta // a meta value's bytes to its key
	metaBytes int
	names     map[string]string
	fields    []Field // slab the measurements' fields are cut from
}

// NewBSONDecoder returns a BSONDecoder with empty caches.
func NewBSONDecoder() *BSONDecoder {
	return &BSONDecoder{metas: make(map[string]cachedBSONMeta), names: make(map[string]string)}
}

// Reset lets the decoder reuse its field memory: call it once the
// measurements it returned are stored.
func (c *BSONDecoder) Reset() {
	if cap(c.fields) > 1<<16 {
		c.fields = nil
		return
	}
	clear(c.fields)
	c.fields = c.fields[:0]
}

// Decode is MeasurementFromDocument on FromBSON(d), whose time
// field the caller checked is a BSON date.
func (c *BSONDecoder) Decode(ts *TimeSeriesOptions, d bsoncore.Document) (Measurement, error) {
	if m, ok := c.fast(ts, d); ok {
		if err := m.Validate(ts); err != nil {
			return Measurement{}, err
		}
		if m.Meta != nil {
			if _, cached := m.Meta.(MetaKey); !cached {
				// As the general conversion: a meta value with no
				// canonical key stays a value, for Insert to refuse.
				if key, err := CanonicalMeta(m.Meta); err == nil {
					m.Meta = MetaKey(key)
					if meta, ok := onlyElement(d, ts.MetaField); ok {
						c.cacheMeta(meta, m.Meta)
					}
				}
			}
		}
		return m, nil
	}
	doc, err := FromBSON(d)
	if err != nil {
		return Measurement{}, err
	}
	m, err := MeasurementFromDocument(ts, doc)
	if err != nil || m.Meta == nil {
		return m, err
	}
	if key, err := CanonicalMeta(m.Meta); err == nil {
		m.Meta = MetaKey(key)
		if meta, ok := onlyElement(d, ts.MetaField); ok {
			c.cacheMeta(meta, m.Meta)
		}
	}
	return m, nil
}

// onlyElement returns the value of the element of d named key when d has
// exactly one (FromBSON keeps the last of several).
func onlyElement(d bsoncore.Document, key string) (v bsoncore.Value, ok bool) {
	elems, err := d.Elements()
	if err != nil {
		return v, false
	}
	for _, el := range elems {
		if el.Key() == key {
			if ok {
				return bsoncore.Value{}, false
			}
			v, ok = el.Value(), true
		}
	}
	return v, ok
}

// fast converts d when its time field is a date in range, its meta value
// is null or convertible and no name is given twice; ok is false
// otherwise, with nothing kept. Fields keep their order, _id among them;
// a value with no kind of its own is kept as its BSON bytes (KindBSON).
func (c *BSONDecoder) fast(ts *TimeSeriesOptions, d bsoncore.Document) (m Measurement, ok bool) {
	if len(d) < 5 {
		return m, false
	}
	start := len(c.fields)
	defer func() {
		if !ok {
			clear(c.fields[start:])
			c.fields = c.fields[:start]
		}
	}()
	haveTime, haveMeta := false, false
	rem := d[4 : len(d)-1]
	for len(rem) > 0 {
		// An element: its type, its name (a C string), its value.
		end := bytes.IndexByte(rem[1:], 0)
		if end < 0 {
			return m, false
		}
		key := rem[1 : 1+end]
		v, r, valid := bsoncore.ReadValue(rem[2+end:], bsoncore.Type(rem[0]))
		if !valid {
			return m, false
		}
		rem = r
		switch {
		case string(key) == ts.TimeField:
			ms, isDate := v.DateTimeOK()
			if !isDate || ms < minBSONDateMillis || ms >= endBSONDateMillis || haveTime {
				return m, false
			}
			m.Time, haveTime = ms*int64(time.Millisecond), true
		case ts.MetaField != "" && string(key) == ts.MetaField:
			if haveMeta {
				return m, false
			}
			haveMeta = true
			if v.Type == bsoncore.TypeNull {
				continue // as if absent
			}
			if e, cached := c.metas[StringView(v.Data)]; cached && e.typ == v.Type {
				m.Meta = e.key
				continue
			}
			x, err := ValueFromBSON(string(key), v, 0)
			if err != nil {
				return m, false
			}
			if m.Meta, err = normalizeJSON(x); err != nil {
				return m, false
			}
		default:
			f := Field{Name: c.name(key)}
			switch v.Type {
			case bsoncore.TypeDouble:
				f.Value = Float(v.Double())
			case bsoncore.TypeInt32:
				f.Value = Int32(v.Int32())
			case bsoncore.TypeInt64:
				f.Value = Int(v.Int64())
			case bsoncore.TypeString:
				f.Value = String(v.StringValue())
			case bsoncore.TypeBoolean:
				f.Value = Bool(v.Boolean())
			case bsoncore.TypeObjectID:
				f.Value = Value{Kind: KindObjectID, S: string(v.Data)}
			case bsoncore.TypeDateTime:
				ms := v.DateTime()
				if ms < minBSONDateMillis || ms >= endBSONDateMillis {
					f.Value = BSONValue(v.Type, v.Data) // kept as written
				} else {
					f.Value = Date(ms * int64(time.Millisecond))
				}
			case bsoncore.TypeNull, bsoncore.TypeUndefined:
				f.Value = nullValue // undefined, deprecated, reads back null
			default:
				if !storableBSON(v, 0) {
					return m, false // the general conversion names the refusal
				}
				f.Value = BSONValue(v.Type, v.Data)
			}
			if len(c.fields)-start == MaxFieldsPerMeasurement {
				return m, false
			}
			for _, g := range c.fields[start:] {
				if g.Name == f.Name {
					return m, false // a name twice: the last one counts there
				}
			}
			c.fields = append(c.fields, f)
		}
	}
	if !haveTime {
		return m, false
	}
	m.Fields = c.fields[start:len(c.fields):len(c.fields)]
	return m, true
}

// storableBSON reports whether v, and every value inside it, is of a BSON
// type a measurement keeps (FromBSON's, regular expressions aside, as in
// plain collections).
func storableBSON(v bsoncore.Value, depth int) bool {
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		if depth >= MaxBSONDepth {
			return false
		}
		elems, err := bsoncore.Document(v.Data).Elements()
		if err != nil {
			return false
		}
		for _, e := range elems {
			// Names as a stored document's (document.FromJSON).
			if k := e.Key(); v.Type == bsoncore.TypeEmbeddedDocument && (k == "" || k[0] == '$') {
				return false
			}
			if !storableBSON(e.Value(), depth+1) {
				return false
			}
		}
		return true
	case bsoncore.TypeDouble, bsoncore.TypeString, bsoncore.TypeObjectID, bsoncore.TypeBoolean,
		bsoncore.TypeDateTime, bsoncore.TypeNull, bsoncore.TypeInt32, bsoncore.TypeInt64,
		bsoncore.TypeDecimal128, bsoncore.TypeBinary:
		return true
	}
	return false
}

// cachedMeta is a meta value's canonical key, boxed once, and the BSON
// type of the bytes it was made from.
type cachedBSONMeta struct {
	typ bsoncore.Type
	key any
}

func (c *BSONDecoder) cacheMeta(v bsoncore.Value, k any) {
	if len(v.Data) > maxCachedBSONMeta {
		return
	}
	if len(c.metas) >= maxCachedBSONMetas || c.metaBytes+2*len(v.Data)+64 > maxCachedBSONMetaBytes {
		clear(c.metas)
		c.metaBytes = 0
	}
	c.metas[string(v.Data)] = cachedBSONMeta{typ: v.Type, key: k}
	c.metaBytes += 2*len(v.Data) + 64
}

// name returns key as a string, interned.
func (c *BSONDecoder) name(key []byte) string {
	if s, ok := c.names[StringView(key)]; ok {
		return s
	}
	s := string(key)
	if len(c.names) >= maxCachedBSONNames {
		clear(c.names)
	}
	c.names[s] = s
	return s
}
