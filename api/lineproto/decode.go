package lineproto

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unsafe"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/hourglassdb/hourglass/timeseries"
)

// Precision is the unit of the timestamps of a write.
type Precision struct {
	unit time.Duration
}

// Nanosecond is the default precision.
var Nanosecond = Precision{time.Nanosecond}

// String returns the v1 name of the precision.
func (p Precision) String() string {
	switch p.unit {
	case time.Microsecond:
		return "u"
	case time.Millisecond:
		return "ms"
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return "n"
}

// ParsePrecision parses the precision query parameter: n, ns, u, us, ms,
// s, m or h for InfluxDB v1's /write, ns, us, ms or s for v2's
// /api/v2/write. Empty means nanoseconds.
func ParsePrecision(s string, v2 bool) (Precision, error) {
	var d time.Duration
	switch s {
	case "", "ns":
		d = time.Nanosecond
	case "us":
		d = time.Microsecond
	case "ms":
		d = time.Millisecond
	case "s":
		d = time.Second
	case "n", "u", "µ", "m", "h":
		if v2 {
			return Precision{}, fmt.Errorf("invalid precision %q: accepted values are ns, us, ms and s", s)
		}
		d = map[string]time.Duration{"n": time.Nanosecond, "u": time.Microsecond, "µ": time.Microsecond,
			"m": time.Minute, "h": time.Hour}[s]
	default:
		if v2 {
			return Precision{}, fmt.Errorf("invalid precision %q: accepted values are ns, us, ms and s", s)
		}
		return Precision{}, fmt.Errorf("invalid precision %q: accepted values are n, ns, u, us, ms, s, m and h", s)
	}
	return Precision{d}, nil
}

// LineError is an entry the decoder refused.
type LineError struct {
	// Line is the 1-based line of the body the entry starts on.
	Line int
	// Text is the line, cut to maxErrorText bytes.
	Text string
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

// maxErrorText bounds LineError.Text.
const maxErrorText = 256

// Result is what Decode made of a body.
type Result struct {
	// Measurements are the decoded entries, in body order.
	Measurements []timeseries.Measurement
	// Lines is the number of entries (lines that are neither blank nor
	// comments).
	Lines int
	// Dropped is the number of entries refused.
	Dropped int
	// First is the first entry refused, nil when none was.
	First *LineError

	lines  []int32            // body line of each measurement
	fields []timeseries.Field // backing store of the measurements' fields
}

// retainCap bounds the capacity a Result keeps across Reset, so that one
// huge body does not pin its memory in a pool.
const retainCap = 1 << 16

// Reset empties r for reuse.
func (r *Result) Reset() {
	clear(r.Measurements) // drop references to strings and meta values
	clear(r.fields)
	if cap(r.Measurements) > retainCap {
		r.Measurements, r.lines = nil, nil
	}
	if cap(r.fields) > 16*retainCap {
		r.fields = nil
	}
	r.Measurements, r.lines, r.fields = r.Measurements[:0], r.lines[:0], r.fields[:0]
	r.Lines, r.Dropped, r.First = 0, 0, nil
}

// LineOf returns the 1-based body line of Measurements[i].
func (r *Result) LineOf(i int) int {
	if i < 0 || i >= len(r.lines) {
		return 0
	}
	return int(r.lines[i])
}

// Cache bounds.
const (
	maxSeries     = 8192
	maxFieldNames = 4096
)

// Decoder decodes line protocol. It keeps bounded caches of meta values
// and field names across calls; it is not safe for concurrent use.
type Decoder struct {
	series map[string]any    // raw tag set -> canonical meta (a boxed MetaKey)
	names  map[string]string // field name -> interned copy

	// The entry being decoded: its measurement, tags, fields and
	// timestamp (nil when absent), and raw, the bytes that identify its
	// series (the line up to the fields on the fast path, key otherwise).
	measurement []byte
	tags        []tag
	fields      []field
	ts          []byte
	raw         []byte
	key         []byte
	meta        map[string]any

	// referenceOnly sends every body to the reference parser (tests).
	referenceOnly bool
}

type tag struct{ k, v []byte }

type field struct {
	k    []byte
	kind lineprotocol.ValueKind
	num  uint64 // int64, uint64 or float64 bits; bool as 0/1
	str  []byte
}

// NewDecoder returns a Decoder with empty caches.
func NewDecoder() *Decoder {
	return &Decoder{
		series: make(map[string]any),
		names:  make(map[string]string),
		meta:   make(map[string]any),
	}
}

// Decode appends the entries of body to res. Refused entries are counted
// and the first is described in res.First; the others are still decoded.
// Entries without a timestamp take now, truncated to the precision. body
// is not retained.
func (d *Decoder) Decode(body []byte, prec Precision, now time.Time, res *Result) {
	if prec.unit == 0 {
		prec = Nanosecond
	}
	def := now.Truncate(prec.unit).UnixNano()
	if d.referenceOnly {
		d.slow(body, body, 1, prec, def, res)
		return
	}
	line := 0
	for pos := 0; pos < len(body); {
		line++
		end := bytes.IndexByte(body[pos:], '\n')
		next := len(body)
		if end < 0 {
			end = len(body)
		} else {
			end += pos
			next = end + 1
		}
		l := body[pos:end]
		switch lineKind(l) {
		case blankLine:
		case entryLine:
			if d.fast(l) {
				res.Lines++
				d.emit(res, body, line, prec, def)
				break
			}
			if bytes.IndexByte(l, '"') >= 0 {
				// A quoted string may run over several lines: the
				// reference parser takes the rest of the body.
				d.slow(body[pos:], body, line, prec, def, res)
				return
			}
			d.slow(l, body, line, prec, def, res)
		case otherLine:
			// Blank or comment lines with odd bytes: the reference
			// parser decides (and refuses) them.
			d.slow(l, body, line, prec, def, res)
		}
		pos = next
	}
}

type kindOfLine int

const (
	blankLine kindOfLine = iota
	entryLine
	otherLine
)

// lineKind tells blank lines and comments (which the reference skips)
// from entries.
func lineKind(l []byte) kindOfLine {
	i := 0
	for i < len(l) && l[i] == ' ' {
		i++
	}
	if i == len(l) || (i == len(l)-1 && l[i] == '\r') {
		return blankLine
	}
	if l[i] == '\r' {
		return otherLine
	}
	if l[i] != '#' {
		return entryLine
	}
	for j := i + 1; j < len(l); j++ {
		c := l[j]
		if c < 0x20 || c == 0x7f {
			if c == '\r' && j == len(l)-1 {
				return blankLine
			}
			return otherLine
		}
	}
	return blankLine
}

// fast decodes a common entry into the scratch tags and fields. It reports
// false, having decided nothing, for anything it does not fully handle.
func (d *Decoder) fast(l []byte) bool {
	d.tags, d.fields = d.tags[:0], d.fields[:0]
	n := len(l)
	// measurement
	i := 0
	for i < n && l[i] != ',' && l[i] != ' ' {
		if !plain(l[i]) {
			return false
		}
		i++
	}
	if i == 0 || i == n {
		return false
	}
	d.measurement = l[:i]
	// tags
	for l[i] == ',' {
		i++
		k0 := i
		for i < n && l[i] != '=' {
			if !plain(l[i]) || l[i] == ',' || l[i] == ' ' {
				return false
			}
			i++
		}
		if i == k0 || i == n {
			return false
		}
		k := l[k0:i]
		i++
		v0 := i
		for i < n && l[i] != ',' && l[i] != ' ' {
			if !plain(l[i]) || l[i] == '=' {
				return false
			}
			i++
		}
		if i == v0 || i == n {
			return false
		}
		d.tags = append(d.tags, tag{k, l[v0:i]})
	}
	// l[i] == ' '
	d.raw = l[:i]
	d.ts = nil
	i++
	// fields
	for {
		k0 := i
		for i < n && l[i] != '=' {
			if !plain(l[i]) || l[i] == ',' || l[i] == ' ' {
				return false
			}
			i++
		}
		if i == k0 || i+1 >= n {
			return false
		}
		f := field{k: l[k0:i]}
		i++
		if l[i] == '"' {
			i++
			s0 := i
			for i < n && l[i] != '"' {
				if l[i] < 0x20 || l[i] >= 0x7f || l[i] == '\\' {
					return false
				}
				i++
			}
			if i == n {
				return false
			}
			f.kind, f.str = lineprotocol.String, l[s0:i]
			i++
		} else {
			v0 := i
			for i < n && l[i] != ',' && l[i] != ' ' {
				i++
			}
			if !parseNumber(l[v0:i], &f) {
				return false
			}
		}
		d.fields = append(d.fields, f)
		if i == n {
			return true
		}
		if l[i] == ' ' {
			break
		}
		if l[i] != ',' {
			return false
		}
		i++
	}
	// timestamp: digits to the end of the line
	i++
	t0 := i
	if i < n && l[i] == '-' {
		i++
	}
	if i == n {
		return false
	}
	for ; i < n; i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	d.ts = l[t0:n]
	return true
}

// plain reports bytes the fast path takes in names and tag values:
// printable ASCII other than the backslash.
func plain(c byte) bool { return c > ' ' && c < 0x7f && c != '\\' }

// parseNumber parses a bool, integer, unsigned or float field value in the
// forms the fast path handles.
func parseNumber(v []byte, f *field) bool {
	if len(v) == 0 {
		return false
	}
	switch v[0] {
	case 't', 'T', 'f', 'F':
		switch string(v) {
		case "t", "T", "true", "True", "TRUE":
			f.kind, f.num = lineprotocol.Bool, 1
			return true
		case "f", "F", "false", "False", "FALSE":
			f.kind, f.num = lineprotocol.Bool, 0
			return true
		}
		return false
	}
	last := v[len(v)-1]
	switch last {
	case 'i', 'u':
		digits := v[:len(v)-1]
		if last == 'i' && len(digits) > 0 && digits[0] == '-' {
			digits = digits[1:]
		}
		if len(digits) == 0 {
			return false
		}
		for _, c := range digits {
			if c < '0' || c > '9' {
				return false
			}
		}
		s := unsafeString(v[:len(v)-1])
		if last == 'i' {
			x, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return false
			}
			f.kind, f.num = lineprotocol.Int, uint64(x)
			return true
		}
		x, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return false
		}
		f.kind, f.num = lineprotocol.Uint, x
		return true
	}
	if v[0] != '-' && v[0] != '.' && (v[0] < '0' || v[0] > '9') {
		return false
	}
	for _, c := range v {
		if (c < '0' || c > '9') && c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+' {
			return false
		}
	}
	x, err := strconv.ParseFloat(unsafeString(v), 64)
	if err != nil || math.IsInf(x, 0) {
		return false
	}
	f.kind, f.num = lineprotocol.Float, math.Float64bits(x)
	return true
}

func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// slow decodes chunk, which starts on body line first, with the reference
// parser.
func (d *Decoder) slow(chunk, body []byte, first int, prec Precision, def int64, res *Result) {
	dec := lineprotocol.NewDecoderWithBytes(chunk)
	line, off := first, 0 // line of chunk[off]
	for dec.Next() {
		res.Lines++
		err := d.reference(dec)
		if err != nil {
			l := line
			var de *lineprotocol.DecodeError
			if errors.As(err, &de) {
				l = first + int(de.Line) - 1
				err = de.Err
			}
			res.refuse(body, l, err)
			continue
		}
		// The entry starts where its measurement does, unless the
		// measurement was unescaped into a copy.
		if p := offsetIn(chunk, d.measurement); p >= off {
			line += bytes.Count(chunk[off:p], newline)
			off = p
		}
		d.emit(res, body, line, prec, def)
	}
}

var newline = []byte{'\n'}

// offsetIn returns the offset of sub in b, or -1 if sub is not part of b.
func offsetIn(b, sub []byte) int {
	if len(sub) == 0 || len(b) == 0 {
		return -1
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p >= uintptr(len(b)) {
		return -1
	}
	return int(p)
}

// reference reads the current entry of dec into the scratch fields.
func (d *Decoder) reference(dec *lineprotocol.Decoder) error {
	d.tags, d.fields = d.tags[:0], d.fields[:0]
	m, err := dec.Measurement()
	if err != nil {
		return err
	}
	d.measurement = m
	d.key = append(append(d.key[:0], 0), m...)
	for {
		k, v, err := dec.NextTag()
		if err != nil {
			return err
		}
		if k == nil {
			break
		}
		d.key = append(append(append(append(d.key, 0), k...), 0), v...)
		d.tags = append(d.tags, tag{k, v})
	}
	d.raw = d.key
	for {
		k, v, err := dec.NextField()
		if err != nil {
			return err
		}
		if k == nil {
			break
		}
		f := field{k: k, kind: v.Kind()}
		switch f.kind {
		case lineprotocol.Int:
			f.num = uint64(v.IntV())
		case lineprotocol.Uint:
			f.num = v.UintV()
		case lineprotocol.Float:
			f.num = math.Float64bits(v.FloatV())
		case lineprotocol.Bool:
			if v.BoolV() {
				f.num = 1
			}
		case lineprotocol.String:
			f.str = v.BytesV()
		}
		d.fields = append(d.fields, f)
	}
	ts, err := dec.TimeBytes()
	if err != nil {
		return err
	}
	d.ts = ts
	return nil
}

// refuse records a refused entry.
func (r *Result) refuse(body []byte, line int, err error) {
	r.Dropped++
	if r.First == nil {
		r.First = &LineError{Line: line, Text: lineText(body, line), Err: err}
	}
}

// lineText returns body line n (1-based), cut to maxErrorText bytes.
func lineText(body []byte, n int) string {
	for ; n > 1; n-- {
		i := bytes.IndexByte(body, '\n')
		if i < 0 {
			return ""
		}
		body = body[i+1:]
	}
	if i := bytes.IndexByte(body, '\n'); i >= 0 {
		body = body[:i]
	}
	body = bytes.TrimSuffix(body, []byte{'\r'})
	if len(body) > maxErrorText {
		return string(body[:maxErrorText]) + "..."
	}
	return string(body)
}

var (
	errReserved  = errors.New("the tag key _measurement is reserved for the measurement name")
	errTooMany   = fmt.Errorf("more than %d fields", timeseries.MaxFieldsPerMeasurement)
	errTimeRange = errors.New("invalid timestamp: out of range for the precision")
)

// emit turns the scratch entry into a measurement of res, or refuses it.
func (d *Decoder) emit(res *Result, body []byte, line int, prec Precision, def int64) {
	m, err := d.measurementOf(res, prec, def)
	if err != nil {
		res.refuse(body, line, err)
		return
	}
	res.Measurements = append(res.Measurements, m)
	res.lines = append(res.lines, int32(line))
}

func (d *Decoder) measurementOf(res *Result, prec Precision, def int64) (timeseries.Measurement, error) {
	var m timeseries.Measurement
	m.Time = def
	if d.ts != nil {
		x, err := strconv.ParseInt(unsafeString(d.ts), 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return m, errTimeRange
			}
			return m, fmt.Errorf("invalid timestamp %q", d.ts)
		}
		if u := int64(prec.unit); u > 1 {
			if x > math.MaxInt64/u || x < math.MinInt64/u {
				return m, errTimeRange
			}
			x *= u
		}
		m.Time = x
	}
	if len(d.fields) > timeseries.MaxFieldsPerMeasurement {
		return m, errTooMany
	}
	key, ok := d.series[unsafeString(d.raw)]
	if !ok {
		clear(d.meta)
		d.meta["_measurement"] = string(d.measurement)
		for _, t := range d.tags {
			if string(t.k) == "_measurement" {
				return m, errReserved
			}
			d.meta[string(t.k)] = string(t.v)
		}
		c, err := timeseries.CanonicalMeta(d.meta)
		if err != nil {
			return m, err
		}
		key = timeseries.MetaKey(c) // boxed once, not per line
		if len(d.series) >= maxSeries {
			clear(d.series)
		}
		d.series[string(d.raw)] = key
	}
	m.Meta = key
	start := len(res.fields)
	for _, f := range d.fields {
		var v timeseries.Value
		switch f.kind {
		case lineprotocol.Float:
			v = timeseries.Float(math.Float64frombits(f.num))
		case lineprotocol.Int:
			v = timeseries.Int(int64(f.num))
		case lineprotocol.Uint:
			if f.num > math.MaxInt64 {
				res.fields = res.fields[:start]
				return m, fmt.Errorf("field %q: unsigned value %d does not fit a long", f.k, f.num)
			}
			v = timeseries.Int(int64(f.num))
		case lineprotocol.Bool:
			v = timeseries.Bool(f.num == 1)
		case lineprotocol.String:
			v = timeseries.String(string(f.str))
		}
		// A key given twice keeps its last value, in its first place.
		dup := false
		for j := start; j < len(res.fields); j++ {
			if res.fields[j].Name == string(f.k) {
				res.fields[j].Value, dup = v, true
				break
			}
		}
		if !dup {
			res.fields = append(res.fields, timeseries.Field{Name: d.name(f.k), Value: v})
		}
	}
	m.Fields = res.fields[start:len(res.fields):len(res.fields)]
	return m, nil
}

// name returns an interned copy of a field name.
func (d *Decoder) name(b []byte) string {
	if s, ok := d.names[unsafeString(b)]; ok {
		return s
	}
	if len(d.names) >= maxFieldNames {
		clear(d.names)
	}
	s := string(b)
	d.names[s] = s
	return s
}
