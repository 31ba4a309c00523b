package lineproto

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/hourglassdb/hourglass/model"
)

// LineError is an entry the decoder refused.
type LineError struct {
	// Line is the 1-based line of the body where the entry failed,
	// counting every line, blank and comment lines included.
	Line int
	// Text is that line, cut to about maxErrorText bytes.
	Text string
	// Err says what is wrong with the entry.
	Err error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// maxErrorText bounds LineError.Text.
const maxErrorText = 256

// Result is what Decode made of a body. A Result can be reused after Reset.
type Result struct {
	// Measurements are the decoded entries, in body order.
	Measurements []model.Measurement
	// Lines is the number of entries: lines that are neither blank nor
	// comments (a string value running over several lines makes one
	// entry).
	Lines int
	// Dropped is the number of entries refused.
	Dropped int
	// First is the first entry refused, nil when none was.
	First *LineError

	lines  []int32       // body line of each measurement
	fields []model.Field // backing store of the measurements' fields

	// from is the offset in the body of the chunk being decoded, on the
	// line after fromLine: where the text of a refused line is looked for.
	from, fromLine int
}

// retainCap bounds the capacity a Result keeps across Reset, so that one
// huge body does not pin its memory in a pool.
const retainCap = 1 << 16

// Reset empties r for reuse, keeping its buffers unless they grew large.
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
	r.from, r.fromLine = 0, 0
}

// LineOf returns the 1-based body line of Measurements[i], 0 if there is
// no such measurement.
func (r *Result) LineOf(i int) int {
	if i < 0 || i >= len(r.lines) {
		return 0
	}
	return int(r.lines[i])
}

// mark is a state of a Result to roll back to.
type mark struct {
	measurements, fields, lines, dropped int
	first                                *LineError
}

func (r *Result) mark() mark {
	return mark{len(r.Measurements), len(r.fields), r.Lines, r.Dropped, r.First}
}

func (r *Result) rollback(m mark) {
	clear(r.Measurements[m.measurements:])
	clear(r.fields[m.fields:])
	r.Measurements, r.lines, r.fields = r.Measurements[:m.measurements], r.lines[:m.measurements], r.fields[:m.fields]
	r.Lines, r.Dropped, r.First = m.lines, m.dropped, m.first
}

// add appends a decoded measurement found on body line line.
func (r *Result) add(m model.Measurement, line int) {
	r.Measurements = append(r.Measurements, m)
	r.lines = append(r.lines, int32(line))
}

// refuse records a refused entry.
func (r *Result) refuse(body []byte, line int, err error) {
	r.Dropped++
	if r.First == nil {
		r.First = &LineError{Line: line, Text: lineText(body[r.from:], line-r.fromLine), Err: err}
	}
}

// lineText returns body line n (1-based) without its line ending, cut to
// maxErrorText bytes at a character boundary.
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
		n := maxErrorText
		for n > maxErrorText-utf8.UTFMax && !utf8.RuneStart(body[n]) {
			n--
		}
		return string(body[:n]) + "..."
	}
	return string(body)
}
