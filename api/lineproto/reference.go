package lineproto

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// fallback decodes body[pos:end], a line the fast path did not take, with
// the reference parser, and returns the end and the last line of what it
// decoded. A string value may run over several lines: when the line ends
// inside one, the chunk grows, doubling its lines, until it ends outside
// any, so that the reference parser sees every entry whole and the fast
// path resumes on the line after.
func (d *Decoder) fallback(body []byte, pos, end, line int, unit time.Duration, def int64, res *Result) (int, int) {
	for grow := 1; ; grow *= 2 {
		m := res.mark()
		if !d.reference(body[pos:end], body, line, unit, def, res) || end == len(body) {
			n := bytes.Count(body[pos:end], newline)
			d.slowLines += n + 1
			return end, line + n
		}
		res.rollback(m)
		for k := 0; k < grow && end < len(body); k++ {
			if i := bytes.IndexByte(body[end+1:], '\n'); i >= 0 {
				end += 1 + i
			} else {
				end = len(body)
			}
		}
	}
}

var newline = []byte{'\n'}

var errTooLong = errors.New("entry too long")

// reference decodes chunk, which starts on body line first, with the
// reference parser. It reports whether the last entry of chunk may be a
// string value cut short by the end of the chunk.
func (d *Decoder) reference(chunk, body []byte, first int, unit time.Duration, def int64, res *Result) (open bool) {
	dec := lineprotocol.NewDecoderWithBytes(chunk)
	// An entry is placed by its first part the parser did not copy
	// (copies are unescaped; timestamps are never copied), or else on the
	// line after the previous entry. chunk[at] is on line atLine.
	at, atLine, next := 0, first, first
	for dec.Next() {
		res.Lines++
		open = false
		d.at = -1
		err := d.readEntry(dec, chunk)
		line := next
		if d.at >= at {
			atLine += bytes.Count(chunk[at:d.at], newline)
			at = d.at
			line = max(atLine, next)
		}
		if err != nil {
			var de *lineprotocol.DecodeError
			if errors.As(err, &de) {
				line = first + int(de.Line) - 1
				err = de.Err
				open = cutShort(err)
			}
			res.refuse(body, line, err)
			next = line + 1
			continue
		}
		d.emit(res, body, line, unit, def)
		next = line + 1
	}
	return open
}

// cutShort reports whether err may come from a string value that the end
// of a chunk cut short: a missing closing quote, or invalid UTF-8 in a
// token that may be such a value.
func cutShort(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "expected closing quote") || strings.HasPrefix(msg, "invalid utf-8")
}

// readEntry reads the current entry of dec into the scratch entry.
func (d *Decoder) readEntry(dec *lineprotocol.Decoder, chunk []byte) error {
	d.tags, d.fields = d.tags[:0], d.fields[:0]
	d.src = d.copyBuf[:0]
	defer func() { d.copyBuf = d.src }()
	m, err := dec.Measurement()
	if err != nil {
		return err
	}
	d.measurement = m
	d.locate(chunk, m)
	d.keyBuf = append(append(d.keyBuf[:0], 0), m...)
	for {
		k, v, err := dec.NextTag()
		if err != nil {
			return err
		}
		if k == nil {
			break
		}
		d.locate(chunk, k)
		d.locate(chunk, v)
		d.keyBuf = append(append(append(append(d.keyBuf, 0), k...), 0), v...)
		d.tags = append(d.tags, tag{k, v})
	}
	d.key, d.fastKey = d.keyBuf, false
	for {
		k, v, err := dec.NextField()
		if err != nil {
			return err
		}
		if k == nil {
			break
		}
		d.locate(chunk, k)
		if len(d.src)+len(k) > math.MaxUint32 {
			return errTooLong
		}
		f := field{k0: uint32(len(d.src)), kind: v.Kind()}
		d.src = append(d.src, k...)
		f.k1 = uint32(len(d.src))
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
			str := v.BytesV()
			d.locate(chunk, str)
			if len(d.src)+len(str) > math.MaxUint32 {
				return errTooLong
			}
			f.s0 = uint32(len(d.src))
			d.src = append(d.src, str...)
			f.s1 = uint32(len(d.src))
		}
		d.fields = append(d.fields, f)
	}
	ts, err := dec.TimeBytes()
	if err != nil {
		return err
	}
	d.locate(chunk, ts)
	d.ts = ts
	return nil
}

// locate sets d.at to the offset of part in chunk if it is not yet set
// and part lies in chunk.
func (d *Decoder) locate(chunk, part []byte) {
	if d.at < 0 {
		d.at = offsetIn(chunk, part)
	}
}

// offsetIn returns the offset of part in chunk, -1 if part does not lie
// in chunk.
func offsetIn(chunk, part []byte) int {
	if len(part) == 0 || len(chunk) == 0 {
		return -1
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(part))) - uintptr(unsafe.Pointer(unsafe.SliceData(chunk)))
	if p >= uintptr(len(chunk)) {
		return -1
	}
	return int(p)
}
