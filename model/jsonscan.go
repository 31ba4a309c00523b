package model

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unsafe"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// Bounds of a MeasurementDecoder's caches. A full cache is emptied and
// refilled; a meta text longer than maxCachedMeta is converted afresh for
// every document.
const (
	maxCachedMetas     = 1 << 16  // meta texts: a fleet of sensors, bounded by maxCachedMetaBytes
	maxCachedMetaBytes = 16 << 20 // their texts and keys
	maxCachedMeta      = 4 << 10  // longest meta text cached
	maxCachedNames     = 4096     // field names
)

// MeasurementDecoder converts JSON documents into measurements of a
// time-series collection straight from their text, without decoding each
// into a map first: the result and the error are those of
// MeasurementFromDocument on the document decoded with
// json.Decoder.UseNumber. It caches, in bounded maps, the meta values it
// has seen (their text to their canonical key, a MetaKey) and the field
// names, so a fleet of sensors writing the same meta values converts each
// once. A MeasurementDecoder is not safe for concurrent use; recycle it
// (sync.Pool) rather than make one per request, or its caches are cold.
type MeasurementDecoder struct {
	metas     map[string]any // meta text to its MetaKey, boxed once
	metaBytes int
	names     map[string]string
	// recent holds the names of the last document's members in their
	// order (those memberName returned): documents of one source name
	// theirs alike, so the next document's n-th name is looked for there
	// before the map.
	recent [8]string
	fields []Field // slab the next measurements' fields are cut from
	// prev is the last measurement Decode accepted for options prevTS:
	// the next one's field names are not checked again when they are
	// the same (validate).
	prev   Measurement
	prevTS *TimeSeriesOptions
}

// NewMeasurementDecoder returns a decoder with empty caches.
func NewMeasurementDecoder() *MeasurementDecoder {
	return &MeasurementDecoder{metas: make(map[string]any), names: make(map[string]string)}
}

// memberError is the first refusal among a document's members in name
// order, the order MeasurementFromDocument visits them in.
type memberError struct {
	name string
	err  error
}

func (e *memberError) note(name string, err error) {
	if e.err == nil || name < e.name {
		e.name, e.err = name, err
	}
}

// Decode converts one JSON object, which must be valid JSON text holding
// no member name twice (the API's body validation refuses both before
// anything is decoded), into a measurement of a collection with options
// ts. Meta values are returned as MetaKey.
func (d *MeasurementDecoder) Decode(ts *TimeSeriesOptions, raw []byte) (Measurement, error) {
	var m Measurement
	var (
		timeRaw  []byte
		haveTime bool
		metaRaw  []byte
		haveMeta bool
		bad      memberError
	)
	start := len(d.fields)
	named := 0                     // members named through memberName
	i := SkipJSONSpace(raw, 0) + 1 // past '{'
	for {
		i = SkipJSONSpace(raw, i)
		if i >= len(raw) || raw[i] == '}' {
			break
		}
		if raw[i] == ',' {
			i++
			continue
		}
		kend := SkipJSONValue(raw, i)
		q := raw[i:kend]
		var name string
		switch body := StringView(q[1 : len(q)-1]); body {
		case ts.TimeField, ts.MetaField:
			name = body // compared only; not kept
		default:
			if named < len(d.recent) && d.recent[named] == body {
				name = d.recent[named]
			} else {
				var err error
				if name, err = d.memberName(q); err != nil {
					return m, err // not reached for valid JSON text
				}
				// Kept when written without escapes (a name of no
				// backslash, so no other text of the same bytes stands
				// for another name) and of a length a field may have.
				if named < len(d.recent) && name == body && len(name) <= MaxFieldNameBytes {
					d.recent[named] = name
				}
			}
			named++
		}
		i = SkipJSONSpace(raw, kend) // at ':'
		vstart := SkipJSONSpace(raw, i+1)
		i = SkipJSONValue(raw, vstart)
		val := raw[vstart:i]
		switch {
		case name == ts.TimeField:
			timeRaw, haveTime = val, true
		case ts.MetaField != "" && name == ts.MetaField:
			metaRaw, haveMeta = val, true
		default:
			fv, present, err := scanFieldValue(name, val)
			if err != nil {
				bad.note(name, err)
			} else if present {
				d.fields = append(d.fields, Field{Name: name, Value: fv})
			}
		}
	}
	if !haveTime {
		return m, timeFieldError(ts.TimeField)
	}
	t, err := scanTimeValue(timeRaw)
	if err != nil {
		return m, timeValueError(ts.TimeField, err)
	}
	m.Time = t
	var metaVal any
	cached := false
	if haveMeta && !bytes.Equal(metaRaw, []byte("null")) {
		var k any
		if k, cached = d.metas[StringView(metaRaw)]; cached {
			m.Meta = k
		} else {
			v, err := decodeJSONValue(metaRaw)
			if err == nil {
				v, err = normalizeJSON(v)
			}
			if err != nil {
				bad.note(ts.MetaField, err)
			}
			metaVal = v
			m.Meta = v
		}
	}
	if bad.err != nil {
		d.fields = d.fields[:start]
		return Measurement{}, bad.err
	}
	m.Fields = d.fields[start:len(d.fields):len(d.fields)]
	var prev *Measurement
	if d.prevTS == ts {
		prev = &d.prev
	}
	if err := m.ValidateAfter(ts, prev); err != nil {
		d.fields = d.fields[:start]
		return Measurement{}, err
	}
	if m.Meta != nil && !cached {
		key, err := CanonicalMeta(metaVal)
		if err != nil {
			d.fields = d.fields[:start]
			return Measurement{}, err
		}
		m.Meta = MetaKey(key)
		d.cacheMeta(metaRaw, m.Meta)
	}
	d.prev, d.prevTS = Measurement{Fields: m.Fields}, ts
	return m, nil
}

// Reset lets the decoder reuse the memory of the fields of the
// measurements it returned: call it once those are stored (the engine
// copies what it keeps) and before the next batch.
func (d *MeasurementDecoder) Reset() {
	d.prev, d.prevTS = Measurement{}, nil
	if cap(d.fields) > 1<<16 {
		d.fields = nil
		return
	}
	clear(d.fields)
	d.fields = d.fields[:0]
}

func (d *MeasurementDecoder) cacheMeta(raw []byte, k any) {
	if len(raw) > maxCachedMeta {
		return
	}
	if len(d.metas) >= maxCachedMetas || d.metaBytes+2*len(raw)+64 > maxCachedMetaBytes {
		clear(d.metas)
		d.metaBytes = 0
	}
	d.metas[string(raw)] = k
	d.metaBytes += 2*len(raw) + 64 // the text, a key of about its size, the boxes and the entry
}

// memberName returns the string a member name's JSON text stands for,
// interned.
func (d *MeasurementDecoder) memberName(q []byte) (string, error) {
	body := q[1 : len(q)-1]
	if bytes.IndexByte(body, '\\') >= 0 {
		var s string
		if err := json.Unmarshal(q, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	if s, ok := d.names[StringView(body)]; ok {
		return s, nil
	}
	s := string(body)
	if len(s) <= MaxFieldNameBytes {
		if len(d.names) >= maxCachedNames {
			clear(d.names)
		}
		d.names[s] = s
	}
	return s, nil
}

// scanFieldValue is fieldValue on the JSON text of a value.
func scanFieldValue(name string, v []byte) (Value, bool, error) {
	switch v[0] {
	case '"':
		body := v[1 : len(v)-1]
		if bytes.IndexByte(body, '\\') < 0 {
			return String(string(body)), true, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return Value{}, false, err
		}
		return String(s), true, nil
	case 't':
		return Bool(true), true, nil
	case 'f':
		return Bool(false), true, nil
	case 'n':
		return Null(), true, nil
	case '{', '[':
		// Decoded with its fields' order, at every depth: a sub-document
		// is kept as written.
		wrapped := make([]byte, 0, len(v)+6)
		wrapped = append(append(append(wrapped, `{"v":`...), v...), '}')
		doc, order, err := document.ParseJSONOrdered(wrapped)
		if err != nil {
			return Value{}, false, err
		}
		return fieldValueOrdered(name, doc["v"], order.Child("v"))
	}
	if i, ok := smallInt(v); ok {
		return Int(i), true, nil
	}
	if bytes.IndexAny(v, ".eE") >= 0 {
		if f, err := strconv.ParseFloat(StringView(v), 64); err == nil {
			return Float(f), true, nil
		}
	}
	return fieldValue(name, json.Number(StringView(v)))
}

// smallInt parses an integer of up to 18 digits, which cannot overflow.
func smallInt(v []byte) (int64, bool) {
	neg := v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// scanTimeValue is timeFieldValue on the JSON text of a value, with
// {"$date": "<RFC 3339>"}, the common form, read without a decoder.
func scanTimeValue(v []byte) (int64, error) {
	switch v[0] {
	case '{':
		if s, ok := dateString(v); ok {
			if ns, ok := parseUTCDate(s); ok {
				return ns, nil
			}
			return parseDate(s)
		}
		x, err := decodeJSONValue(v)
		if err != nil {
			return 0, errNotDate
		}
		return timeFieldValue(x)
	case '"':
		body := v[1 : len(v)-1]
		if bytes.IndexByte(body, '\\') < 0 {
			return timeFieldValue(StringView(body))
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, errNotDate
		}
		return timeFieldValue(s)
	case 't', 'f', 'n', '[':
		return 0, errNotDate
	}
	return timeFieldValue(json.Number(StringView(v)))
}

// dateString returns s of the text {"$date":"s"} (white space allowed
// between tokens) when s holds no escape.
func dateString(v []byte) (string, bool) {
	i := SkipJSONSpace(v, 1)
	const key = `"$date"`
	if !bytes.HasPrefix(v[i:], []byte(key)) {
		return "", false
	}
	i = SkipJSONSpace(v, i+len(key))
	if i >= len(v) || v[i] != ':' {
		return "", false
	}
	i = SkipJSONSpace(v, i+1)
	if i >= len(v) || v[i] != '"' {
		return "", false
	}
	end := SkipJSONValue(v, i)
	s := v[i+1 : end-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		return "", false
	}
	if j := SkipJSONSpace(v, end); j != len(v)-1 || v[j] != '}' {
		return "", false
	}
	return StringView(s), true
}

// decodeJSONValue decodes one JSON value the way the documents endpoint
// does (numbers as json.Number).
func decodeJSONValue(v []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, mongoerr.New(mongoerr.BadValue, "malformed JSON: %v", err)
	}
	return x, nil
}

// SkipJSONSpace returns the index of the first byte at or after i that is
// not JSON white space, or len(b).
func SkipJSONSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipJSONValue returns the index just past the value that starts at
// b[i]; b must be valid JSON text.
func SkipJSONValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return i
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				for i++; i < len(b) && b[i] != '"'; i++ {
					if b[i] == '\\' {
						i++
					}
				}
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// StringView views b as a string with no copy, for a lookup or a parse
// that does not keep it: the string shares b's bytes, so b must not change
// while the string is in use.
func StringView(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// parseUTCDate parses the form clients send most, YYYY-MM-DDTHH:MM:SSZ
// with an optional fraction of 1 to 9 digits, in years MinDateYear to
// MaxDateYear, into nanoseconds since the epoch, as time.Parse with
// time.RFC3339Nano and timeToNanos would, without their generality. ok is
// false for anything else, which is left to them (and their errors).
func parseUTCDate(s string) (ns int64, ok bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[len(s)-1] != 'Z' {
		return 0, false
	}
	num := func(i, n int) int64 {
		var v int64
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int64(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	if year < MinDateYear || year > MaxDateYear || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) ||
		hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return 0, false
	}
	var nsec int64
	switch frac := s[19 : len(s)-1]; {
	case len(frac) == 0:
	case frac[0] != '.' || len(frac) < 2 || len(frac) > 10:
		return 0, false
	default:
		if nsec = num(20, len(frac)-1); nsec < 0 {
			return 0, false
		}
		for range 10 - len(frac) {
			nsec *= 10
		}
	}
	secs := daysFromCivil(year, month, day)*86400 + hour*3600 + minute*60 + sec
	return secs*1e9 + nsec, true
}

func daysIn(year, month int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days from 1970-01-01 to a date of the
// proleptic Gregorian calendar (the era arithmetic of H. Hinnant's
// "chrono-compatible low-level date algorithms").
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
