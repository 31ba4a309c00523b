package lineproto

import (
	"bytes"
	"math"
	"strconv"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/hourglassdb/hourglass/model"
)

// Decoder decodes line protocol. It keeps bounded caches of field names
// and field-name lists across calls and finds series in a SeriesCache, so
// a pooled Decoder decodes the series seen before without allocating for
// them. A Decoder is not safe for concurrent use; decoders sharing a
// SeriesCache are.
type Decoder struct {
	cache *SeriesCache
	// hits counts the lookups the cache answered during the chunk; made
	// holds the series made on a miss (madeOrder the same in the order
	// made), promote those found in the cache's older generation, until
	// flush adds them to the cache; pos is where the series of the line
	// before is in the cache's order (-1: not there).
	hits      int
	made      map[string]*series
	madeOrder []*series
	madeBytes int // keys and metas in made
	promote   []*series
	pos       int32
	sets      map[string]*fieldSet // field keys joined by 0 -> interned names
	names     map[string]string    // field name -> interned copy

	// The entry being decoded: its measurement, tags, fields and
	// timestamp (nil when absent); key identifies its series: the line
	// up to the fields on the fast path, the unescaped parts joined by
	// 0 bytes on the reference path.
	measurement []byte
	tags        []tag
	fields      []field
	ts          []byte
	key         []byte
	src         []byte // what the offsets of fields refer to
	fastKey     bool   // key is the line up to the fields; tags is not filled

	// Scratch buffers.
	copyBuf []byte // src of the reference path: copies of keys and strings
	keyBuf  []byte
	setKey  []byte
	metaBuf []byte // scratch: a canonical meta key (canonicalTags)
	sorted  []tag  // scratch: the tags sorted (canonicalTags)
	meta    map[string]any

	// at is the offset, in the chunk given to the reference parser, of
	// the first part of the entry that the parser did not copy; -1 when
	// it copied them all.
	at int

	// slowLines counts the lines given to the reference parser by
	// Decode, seriesHits the lookups the series cache answered (tests).
	slowLines, seriesHits int
	// referenceOnly sends every body to the reference parser (tests).
	referenceOnly bool
}

type tag struct{ k, v []byte }

// field is a field of the scratch entry. It holds offsets into d.src
// rather than slices, so that filling it costs no write barriers.
type field struct {
	k0, k1 uint32 // key: src[k0:k1]
	s0, s1 uint32 // string value: src[s0:s1]
	num    uint64 // int64, uint64 or float64 bits; bool as 0 or 1
	kind   lineprotocol.ValueKind
}

func (f *field) key(src []byte) []byte { return src[f.k0:f.k1] }

// NewDecoder returns a Decoder with empty caches of its own.
func NewDecoder() *Decoder { return NewDecoderSharing(NewSeriesCache(privateSeriesCacheBytes)) }

// privateSeriesCacheBytes bounds the series cache of a NewDecoder.
const privateSeriesCacheBytes = 16 << 20

// NewDecoderSharing returns a Decoder that finds and keeps series in c,
// with empty caches of field names.
func NewDecoderSharing(c *SeriesCache) *Decoder {
	return &Decoder{
		cache: c,
		made:  make(map[string]*series),
		sets:  make(map[string]*fieldSet),
		names: make(map[string]string),
		meta:  make(map[string]any),
	}
}

// Decode appends the entries of body to res. Refused entries are counted
// in res.Dropped and the first is described in res.First; the others are
// still decoded. Entries without a timestamp take now, truncated to the
// precision. body is not retained.
func (d *Decoder) Decode(body []byte, prec Precision, now time.Time, res *Result) {
	d.DecodeChunk(body, 0, 0, len(body), prec, now, res)
}

// DecodeChunk decodes part of body the way Decode decodes all of it, so
// that a large body can be decoded and stored a chunk at a time: it
// appends to res the entries that start at offset pos or after, until the
// first entry that ends size bytes or more past pos, and returns the
// offset and the line where the next chunk starts. pos is 0 or a next
// that the previous call on body returned, line 0 or the nextLine it
// returned; next is len(body) once body is decoded. A chunk ends between
// entries, never inside a string value that runs over several lines, and
// line numbers (in res.First and LineOf) count from the start of body, so
// that the chunks of a body give the entries, refusals and lines one
// Decode of it gives. Give every chunk of a body the same now. body is not
// retained.
func (d *Decoder) DecodeChunk(body []byte, pos, line, size int, prec Precision, now time.Time, res *Result) (next, nextLine int) {
	unit := prec.Duration()
	def := now.Truncate(unit).UnixNano()
	res.from, res.fromLine = pos, line
	d.beginChunk()
	defer d.endChunk()
	if d.referenceOnly {
		d.reference(body[pos:], body, line+1, unit, def, res)
		return len(body), line + bytes.Count(body[pos:], newline)
	}
	start, size := pos, max(size, 1)
	for n := 1; pos < len(body) && pos-start < size; n++ {
		if n%relockLines == 0 {
			d.relock()
		}
		line++
		end := len(body)
		if i := bytes.IndexByte(body[pos:], '\n'); i >= 0 {
			end = pos + i
		}
		l := body[pos:end]
		switch lineKind(l) {
		case blankLine:
		case entryLine:
			// CR LF ends a line the way LF does.
			if d.fast(bytes.TrimSuffix(l, cr)) {
				res.Lines++
				d.emit(res, body, line, unit, def)
				break
			}
			fallthrough
		default:
			end, line = d.fallback(body, pos, end, line, unit, def, res)
		}
		pos = end + 1
	}
	d.trim()
	return min(pos, len(body)), line
}

var cr = []byte{'\r'}

// Bounds on the scratch buffers a Decoder keeps between bodies.
const (
	maxRetainedFields = 1 << 12
	maxRetainedBytes  = 1 << 20
)

// trim drops scratch buffers grown large, so that a pooled Decoder does not
// pin the memory of one odd body.
func (d *Decoder) trim() {
	if cap(d.fields) > maxRetainedFields {
		d.fields = nil
	}
	if cap(d.tags) > maxRetainedFields {
		d.tags = nil
	}
	clear(d.tags[:cap(d.tags)]) // references into the body
	if len(d.meta) > maxRetainedFields {
		d.meta = make(map[string]any)
	}
	if cap(d.copyBuf) > maxRetainedBytes {
		d.copyBuf = nil
	}
	if cap(d.keyBuf) > maxRetainedBytes {
		d.keyBuf = nil
	}
	if cap(d.setKey) > maxRetainedBytes {
		d.setKey = nil
	}
	d.measurement, d.key, d.ts, d.src = nil, nil, nil, nil
}

type kindOfLine int

const (
	blankLine kindOfLine = iota // blank or comment: no entry
	entryLine
	otherLine // odd bytes in a blank or comment line: the reference decides
)

// lineKind tells blank lines and comments, which the reference parser
// skips, from entries.
func lineKind(l []byte) kindOfLine {
	i := 0
	for i < len(l) && l[i] == ' ' {
		i++
	}
	if i == len(l) || (i == len(l)-1 && l[i] == '\r') {
		return blankLine
	}
	switch l[i] {
	case '\r':
		return otherLine
	case '#':
	default:
		return entryLine
	}
	for j := i + 1; j < len(l); j++ {
		if c := l[j]; c < 0x20 || c == 0x7f {
			if c == '\r' && j == len(l)-1 {
				return blankLine
			}
			return otherLine
		}
	}
	return blankLine
}

// Byte classes of the fast path.
const (
	cName = 1 << iota // measurement: printable ASCII but ',', ' ' and '\\'
	cKey              // tag key or value, field key: cName but '='
	cStr              // string value: printable ASCII and ' ', but '"' and '\\'
	cVal              // number or boolean: letters, digits, '.', '+', '-', '_'
)

var class = func() (t [256]uint8) {
	for c := 0x20; c < 0x7f; c++ {
		if c != '"' && c != '\\' {
			t[c] |= cStr
		}
		if c == ' ' || c == ',' || c == '\\' {
			continue
		}
		t[c] |= cName
		if c != '=' {
			t[c] |= cKey
		}
		if '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '.' || c == '+' || c == '-' || c == '_' {
			t[c] |= cVal
		}
	}
	return t
}()

// fast decodes a common entry into the scratch entry: printable ASCII,
// no escapes, one space between the sections, strings without
// backslashes. It reports false for anything else, which the reference
// parser then decides, so it must accept only entries the reference
// parser reads the same way.
func (d *Decoder) fast(l []byte) bool {
	fields := d.fields[:0]
	n := len(l)
	if n > math.MaxUint32 {
		return false
	}
	i := 0
	for i < n && class[l[i]]&cName != 0 {
		i++
	}
	if i == 0 || i == n || (l[i] != ',' && l[i] != ' ') {
		return false
	}
	d.measurement = l[:i]
	// The tags are only checked here: on a miss of the series cache,
	// lookupSeries splits them out of the key.
	for l[i] == ',' {
		i++
		k0 := i
		for i < n && class[l[i]]&cKey != 0 {
			i++
		}
		if i == k0 || i == n || l[i] != '=' {
			return false
		}
		i++
		v0 := i
		for i < n && class[l[i]]&cKey != 0 {
			i++
		}
		if i == v0 || i == n || (l[i] != ',' && l[i] != ' ') {
			return false
		}
	}
	d.key, d.tags, d.fastKey = l[:i], d.tags[:0], true
	d.ts = nil
	i++ // the space before the fields
	for {
		k0 := i
		for i < n && class[l[i]]&cKey != 0 {
			i++
		}
		if i == k0 || i+1 >= n || l[i] != '=' {
			return false
		}
		fields = append(fields, field{k0: uint32(k0), k1: uint32(i)})
		f := &fields[len(fields)-1]
		i++
		if l[i] == '"' {
			i++
			s0 := i
			for i < n && class[l[i]]&cStr != 0 {
				i++
			}
			if i == n || l[i] != '"' {
				return false
			}
			f.kind, f.s0, f.s1 = lineprotocol.String, uint32(s0), uint32(i)
			i++
		} else {
			v0 := i
			for i < n && class[l[i]]&cVal != 0 {
				i++
			}
			if !parseValue(l[v0:i], f) {
				return false
			}
		}
		if i == n {
			d.fields, d.src = fields, l
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
	d.fields, d.src = fields, l
	i++ // the space before the timestamp
	t0 := i
	if i < n && l[i] == '-' {
		i++
	}
	if i == n {
		return false
	}
	for ; i < n; i++ {
		if l[i]-'0' > 9 {
			return false
		}
	}
	d.ts = l[t0:n]
	return true
}

// parseValue parses a number or boolean field value exactly as the
// reference parser does, reporting false where it would refuse the value.
func parseValue(v []byte, f *field) bool {
	if len(v) == 0 {
		return false
	}
	switch c := v[0]; {
	case c == 't' || c == 'T' || c == 'f' || c == 'F':
		switch string(v) {
		case "t", "T", "true", "True", "TRUE":
			f.kind, f.num = lineprotocol.Bool, 1
			return true
		case "f", "F", "false", "False", "FALSE":
			f.kind, f.num = lineprotocol.Bool, 0
			return true
		}
		return false
	case c == '-' || c == '.' || c-'0' <= 9:
	default:
		return false
	}
	switch v[len(v)-1] {
	case 'i':
		x, err := parseInt(v[:len(v)-1])
		if err != nil {
			return false
		}
		f.kind, f.num = lineprotocol.Int, uint64(x)
		return true
	case 'u':
		x, err := parseUint(v[:len(v)-1])
		if err != nil {
			return false
		}
		f.kind, f.num = lineprotocol.Uint, x
		return true
	}
	x, err := parseFloat(v)
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
		return false
	}
	f.kind, f.num = lineprotocol.Float, math.Float64bits(x)
	return true
}

// parseInt is strconv.ParseInt(string(b), 10, 64), without its cost for
// plain decimals.
func parseInt(b []byte) (int64, error) {
	s := b
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 19 {
		return strconv.ParseInt(model.StringView(b), 10, 64)
	}
	var x uint64
	for _, c := range s {
		c -= '0'
		if c > 9 {
			return strconv.ParseInt(model.StringView(b), 10, 64)
		}
		x = x*10 + uint64(c)
	}
	switch {
	case neg && x <= 1<<63:
		return -int64(x), nil
	case !neg && x <= math.MaxInt64:
		return int64(x), nil
	}
	return strconv.ParseInt(model.StringView(b), 10, 64)
}

// parseUint is strconv.ParseUint(string(b), 10, 64), without its cost for
// plain decimals.
func parseUint(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 19 {
		return strconv.ParseUint(model.StringView(b), 10, 64)
	}
	var x uint64
	for _, c := range b {
		c -= '0'
		if c > 9 {
			return strconv.ParseUint(model.StringView(b), 10, 64)
		}
		x = x*10 + uint64(c)
	}
	return x, nil
}

// parseFloat is strconv.ParseFloat(string(b), 64), without its cost for
// plain decimals whose digits, as an integer, are exact in a float64 (at
// most 2^53) and whose power of ten is too (at most 22): then one
// correctly rounded multiplication or division gives the correctly rounded
// result, as strconv finds it too.
func parseFloat(b []byte) (float64, error) {
	i := 0
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		i++
	}
	var mant uint64
	exp := 0
	digits, dot := false, false
loop:
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case '0' <= c && c <= '9':
			digits = true
			if dot {
				exp--
			}
			if mant == 0 && c == '0' {
				continue
			}
			if mant = mant*10 + uint64(c-'0'); mant > 1<<53 {
				return strconv.ParseFloat(model.StringView(b), 64)
			}
		case c == '.' && !dot:
			dot = true
		default:
			break loop
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') && digits {
		i++
		eneg := i < len(b) && b[i] == '-'
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			i++
		}
		e, e0 := 0, i
		for ; i < len(b) && i-e0 < 4 && '0' <= b[i] && b[i] <= '9'; i++ {
			e = e*10 + int(b[i]-'0')
		}
		if i == e0 {
			i = -1 // no exponent digits: not a number
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i != len(b) || !digits || exp < -22 || exp > 22 {
		return strconv.ParseFloat(model.StringView(b), 64)
	}
	f := float64(mant)
	if exp < 0 {
		f /= pow10[-exp]
	} else {
		f *= pow10[exp]
	}
	if neg {
		f = -f
	}
	return f, nil
}

// pow10 holds the powers of ten exact in a float64.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}
