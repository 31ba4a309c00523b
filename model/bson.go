package model

import (
	"bytes"
	"slices"
	"strings"
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

// fast converts d when every element is of the common kinds and its meta
// value is cached; ok is false otherwise, with nothing kept.
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
	haveTime := false
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
			if m.Meta != nil {
				return m, false
			}
			if v.Type == bsoncore.TypeNull {
				return m, false // rare: the general conversion
			}
			e, cached := c.metas[unsafeString(v.Data)]
			if !cached || e.typ != v.Type {
				return m, false
			}
			m.Meta = e.key
		case string(key) == "_id":
			switch v.Type {
			case bsoncore.TypeObjectID, bsoncore.TypeString, bsoncore.TypeInt32, bsoncore.TypeInt64,
				bsoncore.TypeDouble, bsoncore.TypeBoolean, bsoncore.TypeDateTime, bsoncore.TypeNull:
			default:
				return m, false
			}
		default:
			f := Field{Name: c.name(key)}
			switch v.Type {
			case bsoncore.TypeDouble:
				f.Value = Float(v.Double())
			case bsoncore.TypeInt32:
				f.Value = Int(int64(v.Int32()))
			case bsoncore.TypeInt64:
				f.Value = Int(v.Int64())
			case bsoncore.TypeString:
				f.Value = String(v.StringValue())
			case bsoncore.TypeBoolean:
				f.Value = Bool(v.Boolean())
			case bsoncore.TypeDateTime:
				ms := v.DateTime()
				if ms < minBSONDateMillis || ms >= endBSONDateMillis {
					return m, false
				}
				f.Value = Date(ms * int64(time.Millisecond))
			default: // null (absent) among them: rare, and a name twice with it is subtle
				return m, false
			}
			if len(c.fields)-start == maxFastFields {
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
	if !slices.IsSortedFunc(m.Fields, compareFields) {
		slices.SortFunc(m.Fields, compareFields)
	}
	return m, true
}

func compareFields(a, b Field) int { return strings.Compare(a.Name, b.Name) }

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
	if s, ok := c.names[unsafeString(key)]; ok {
		return s
	}
	s := string(key)
	if len(c.names) >= maxCachedBSONNames {
		clear(c.names)
	}
	c.names[s] = s
	return s
}
