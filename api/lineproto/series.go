package lineproto

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// Cache bounds. A full cache of field names is emptied and refilled; what
// is too large to cache is made afresh for every entry.
const (
	maxSeriesEntry = 16 << 10 // largest key and meta value cached
	maxFieldSets   = 1024     // field-name lists
	maxSetFields   = 128      // longest field-name list cached
	maxSetBytes    = 4 << 10  // longest field-name list cached, in bytes
	maxFieldNames  = 4096     // field names
	maxNameBytes   = model.MaxFieldNameBytes
	// missesPerHit: a full series cache that answered fewer than one
	// lookup in missesPerHit of its size since it was last judged full
	// is not refilled for a while (SeriesCache).
	missesPerHit = 8
)

// fieldSet is a list of distinct field names.
type fieldSet struct {
	names []string
}

// matches reports whether fs lists the keys of fields, in order.
func (fs *fieldSet) matches(fields []field, src []byte) bool {
	if fs == nil || len(fs.names) != len(fields) {
		return false
	}
	for i, name := range fs.names {
		if name != model.StringView(fields[i].key(src)) {
			return false
		}
	}
	return true
}

var (
	errReserved  = errors.New("the tag key _measurement is reserved for the measurement name")
	errTooMany   = fmt.Errorf("more than %d fields", model.MaxFieldsPerMeasurement)
	errTimeRange = errors.New("invalid timestamp: out of range for the precision")
)

// emit turns the scratch entry into a measurement of res, or refuses it.
func (d *Decoder) emit(res *Result, body []byte, line int, unit time.Duration, def int64) {
	m, err := d.measurementOf(res, unit, def)
	if err != nil {
		res.refuse(body, line, err)
		return
	}
	res.add(m, line)
}

func (d *Decoder) measurementOf(res *Result, unit time.Duration, def int64) (model.Measurement, error) {
	m := model.Measurement{Time: def}
	if d.ts != nil {
		x, err := parseInt(d.ts)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return m, errTimeRange
			}
			return m, fmt.Errorf("invalid timestamp %q", d.ts)
		}
		if u := int64(unit); u > 1 {
			if x > math.MaxInt64/u || x < math.MinInt64/u {
				return m, errTimeRange
			}
			x *= u
		}
		m.Time = x
	}
	if len(d.fields) > model.MaxFieldsPerMeasurement {
		return m, errTooMany
	}
	s, err := d.lookupSeries()
	if err != nil {
		return m, err
	}
	m.Meta = s.meta
	if s.key != "" {
		m.Slot = &s.slot
	}
	fs := s.fields.Load()
	if !fs.matches(d.fields, d.src) {
		if fs = d.fieldSetOf(d.fields, d.src); fs != nil {
			s.setFields(fs)
		}
	}
	start := len(res.fields)
	if fs != nil {
		// The common case: distinct keys, written in place.
		res.fields = slices.Grow(res.fields, len(d.fields))[:start+len(d.fields)]
		out := res.fields[start:]
		for i := range d.fields {
			out[i].Name = fs.names[i]
			if err := d.fields[i].valueTo(&out[i].Value, d.src); err != nil {
				clear(out)
				res.fields = res.fields[:start]
				return m, err
			}
		}
		m.Fields = out[:len(out):len(out)]
		return m, nil
	}
	for i := range d.fields {
		f := &d.fields[i]
		var v model.Value
		if err := f.valueTo(&v, d.src); err != nil {
			clear(res.fields[start:])
			res.fields = res.fields[:start]
			return m, err
		}
		// A key given twice keeps its last value, in its first place.
		dup := false
		for j := start; j < len(res.fields); j++ {
			if res.fields[j].Name == string(f.key(d.src)) {
				res.fields[j].Value, dup = v, true
				break
			}
		}
		if !dup {
			res.fields = append(res.fields, model.Field{Name: d.name(f.key(d.src)), Value: v})
		}
	}
	m.Fields = res.fields[start:len(res.fields):len(res.fields)]
	return m, nil
}

// valueTo sets *v to the field's value.
func (f *field) valueTo(v *model.Value, src []byte) error {
	switch f.kind {
	case lineprotocol.Float:
		*v = model.Float(math.Float64frombits(f.num))
	case lineprotocol.Int:
		*v = model.Int(int64(f.num))
	case lineprotocol.Uint:
		if f.num > math.MaxInt64 {
			return fmt.Errorf("field %q: unsigned value %d overflows int64", f.key(src), f.num)
		}
		*v = model.Int(int64(f.num))
	case lineprotocol.Bool:
		*v = model.Bool(f.num == 1)
	case lineprotocol.String:
		*v = model.String(string(src[f.s0:f.s1]))
	default:
		return fmt.Errorf("field %q: value of unknown kind %v", f.key(src), f.kind)
	}
	return nil
}

// splitTags appends the tags of tagSet, ",k=v,k=v" as checked by the fast
// path, to tags.
func splitTags(tags []tag, tagSet []byte) []tag {
	for len(tagSet) > 0 {
		tagSet = tagSet[1:] // ','
		eq := bytes.IndexByte(tagSet, '=')
		end := bytes.IndexByte(tagSet, ',')
		if end < 0 {
			end = len(tagSet)
		}
		tags = append(tags, tag{tagSet[:eq], tagSet[eq+1 : end]})
		tagSet = tagSet[end:]
	}
	return tags
}

// lookupSeries returns the cached series of the scratch entry, making it
// if need be.
func (d *Decoder) lookupSeries() (*series, error) {
	s, prev, pos := d.cache.find(d.key, d.pos)
	d.pos = pos
	if s != nil {
		d.hits++
		d.seriesHits++
		if prev && len(d.promote) < maxPending && (len(d.promote) == 0 || d.promote[len(d.promote)-1] != s) {
			d.promote = append(d.promote, s)
		}
		return s, nil
	}
	if s, ok := d.made[model.StringView(d.key)]; ok {
		return s, nil
	}
	if d.fastKey {
		d.tags = splitTags(d.tags[:0], d.key[len(d.measurement):])
	}
	for _, t := range d.tags {
		if string(t.k) == "_measurement" {
			return nil, errReserved
		}
		if len(t.k) > 0 && t.k[0] == '$' {
			return nil, fmt.Errorf("tag key %q starts with '$': such names are query operators and cannot be stored", t.k)
		}
	}
	var c string
	d.metaBuf = canonicalTags(d.metaBuf[:0], &d.sorted, d.measurement, d.tags)
	if len(d.metaBuf) <= model.MaxMetaBytes {
		c = string(d.metaBuf)
	} else {
		// CanonicalMeta refuses it with its message.
		clear(d.meta)
		d.meta["_measurement"] = string(d.measurement)
		for _, t := range d.tags {
			d.meta[string(t.k)] = string(t.v)
		}
		var err error
		if c, err = model.CanonicalMeta(d.meta); err != nil {
			return nil, err
		}
	}
	s = newSeries(c)
	size := len(d.key) + len(c)
	if size > maxSeriesEntry || len(d.made) >= maxPending || d.madeBytes+size > maxPendingBytes || d.cache.skipMiss() {
		return s, nil
	}
	s.key = string(d.key)
	d.made[s.key] = s
	d.madeOrder = append(d.madeOrder, s)
	d.madeBytes += size
	return s, nil
}

// fieldSetOf returns the interned list of the keys of fields, nil if a
// key repeats or the list is too long to cache.
func (d *Decoder) fieldSetOf(fields []field, src []byte) *fieldSet {
	if len(fields) > maxSetFields {
		return nil
	}
	d.setKey = d.setKey[:0]
	for i := range fields {
		d.setKey = append(append(d.setKey, fields[i].key(src)...), 0) // keys hold no 0 bytes
	}
	if len(d.setKey) > maxSetBytes {
		return nil
	}
	if fs, ok := d.sets[model.StringView(d.setKey)]; ok {
		return fs
	}
	for i := range fields {
		for j := range i {
			if string(fields[i].key(src)) == string(fields[j].key(src)) {
				return nil
			}
		}
	}
	fs := &fieldSet{names: make([]string, len(fields))}
	for i := range fields {
		fs.names[i] = d.name(fields[i].key(src))
	}
	if len(d.sets) >= maxFieldSets {
		clear(d.sets)
	}
	d.sets[string(d.setKey)] = fs
	return fs
}

// name returns an interned copy of a field name.
func (d *Decoder) name(b []byte) string {
	if s, ok := d.names[model.StringView(b)]; ok {
		return s
	}
	if len(b) > maxNameBytes {
		return string(b)
	}
	if len(d.names) >= maxFieldNames {
		clear(d.names)
	}
	s := string(b)
	d.names[s] = s
	return s
}

// measurementTag is the name the measurement takes in a meta document.
var measurementTag = []byte("_measurement")

// canonicalTags appends the canonical meta key (model.CanonicalMeta)
// of the document {_measurement: measurement, tag keys: tag values}: names
// in byte order, a key given twice keeping its last value. It builds the
// key without the document: with a million sensors, most lines name a
// series the cache no longer holds. sorted is scratch space.
func canonicalTags(dst []byte, sorted *[]tag, measurement []byte, tags []tag) []byte {
	s := append((*sorted)[:0], tag{k: measurementTag, v: measurement})
	s = append(s, tags...)
	// Stable: of equal keys, the last given is last.
	slices.SortStableFunc(s, func(a, b tag) int { return bytes.Compare(a.k, b.k) })
	*sorted = s
	dst = append(dst, '{')
	first := true
	for i := range s {
		if i+1 < len(s) && bytes.Equal(s[i].k, s[i+1].k) {
			continue // a later value of the same key wins
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = model.AppendMetaString(dst, model.StringView(s[i].k))
		dst = append(dst, ':')
		dst = model.AppendMetaString(dst, model.StringView(s[i].v))
	}
	return append(dst, '}')
}
