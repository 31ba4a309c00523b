package bench

import (
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"time"

	"github.com/hourglassdb/hourglass/document"
)

// LineSource is a workload as line protocol, one row (line) at a time.
type LineSource interface {
	// Rows is the number of lines.
	Rows() int
	// FieldsPerRow is the number of field values of each line.
	FieldsPerRow() int
	// NewLineWriter returns a function that appends the next line, with its
	// newline, to dst, and reports false at the end.
	NewLineWriter() func(dst []byte) ([]byte, bool)
}

// FieldsPerRow is NumFields: every cpu-only row has the ten cpu fields.
func (w Workload) FieldsPerRow() int { return NumFields }

// NewLineWriter writes the workload's rows as lpgen does.
func (w Workload) NewLineWriter() func(dst []byte) ([]byte, bool) {
	w.EnsureDefaults()
	g := w.NewGenerator()
	var row Row
	return func(dst []byte) ([]byte, bool) {
		if !g.Next(&row) {
			return dst, false
		}
		return g.AppendLine(dst, &row), true
	}
}

// IoT is a sensor workload: many sensors, few fields each, timestamps
// jittered around a fixed interval and a share of points arriving late
// (out of order). The zero IoT is 10,000 sensors with 2 fields every 10 s
// for an hour from 2024-01-01, 1% of points late by up to 5 minutes. It is
// deterministic: the same parameters give the same lines.
type IoT struct {
	Sensors  int           // default 10,000
	Fields   int           // 1 to 3, default 2
	Interval time.Duration // default 10 s
	Span     time.Duration // default 1 h
	// Jitter moves each timestamp by up to this fraction of Interval either
	// way (default 0.1).
	Jitter float64
	// Late is the share of points sent late (default 0.01), by up to LateBy
	// (default 5 min): they go out of order.
	Late   float64
	LateBy time.Duration
	Start  time.Time // default 2024-01-01T00:00:00Z
	Seed   int64     // default 1
	// Precision rounds every time down to a multiple of it (default 1 ns:
	// the jitter's nanoseconds kept), as a device that reports
	// milliseconds or a BSON date would.
	Precision time.Duration
}

// EnsureDefaults fills in zero fields.
func (w *IoT) EnsureDefaults() {
	if w.Sensors == 0 {
		w.Sensors = 10000
	}
	if w.Fields == 0 {
		w.Fields = 2
	}
	if w.Interval == 0 {
		w.Interval = 10 * time.Second
	}
	if w.Span == 0 {
		w.Span = time.Hour
	}
	if w.Jitter == 0 {
		w.Jitter = 0.1
	}
	if w.Late == 0 {
		w.Late = 0.01
	}
	if w.LateBy == 0 {
		w.LateBy = 5 * time.Minute
	}
	if w.Start.IsZero() {
		w.Start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if w.Seed == 0 {
		w.Seed = 1
	}
	if w.Precision == 0 {
		w.Precision = time.Nanosecond
	}
}

// Validate checks the parameters after defaults.
func (w IoT) Validate() error {
	w.EnsureDefaults()
	switch {
	case w.Sensors < 0 || w.Sensors > 10_000_000:
		return fmt.Errorf("%w: %d sensors; want 1 to 10,000,000", ErrInvalidWorkload, w.Sensors)
	case w.Fields < 1 || w.Fields > 3:
		return fmt.Errorf("%w: %d fields per sensor; want 1 to 3", ErrInvalidWorkload, w.Fields)
	case w.Interval <= 0 || w.Span <= 0:
		return fmt.Errorf("%w: interval and span must be positive", ErrInvalidWorkload)
	case w.Precision < 0 || w.Precision > w.Interval:
		return fmt.Errorf("%w: precision %v: want 1 ns to the interval (%v)", ErrInvalidWorkload, w.Precision, w.Interval)
	case w.Jitter < 0 || w.Jitter >= 0.5 || w.Late < 0 || w.Late > 1 || w.LateBy < 0:
		return fmt.Errorf("%w: jitter must be in [0, 0.5), late in [0, 1], lateBy not negative", ErrInvalidWorkload)
	case float64(w.Sensors)*float64(w.Span/w.Interval) > math.MaxInt32*8:
		return fmt.Errorf("%w: too many points", ErrInvalidWorkload)
	}
	return nil
}

func (w IoT) ticks() int {
	w.EnsureDefaults()
	return int(w.Span / w.Interval)
}

// Rows is the number of lines: one per sensor per interval.
func (w IoT) Rows() int {
	w.EnsureDefaults()
	return w.Sensors * w.ticks()
}

// FieldsPerRow is Fields.
func (w IoT) FieldsPerRow() int {
	w.EnsureDefaults()
	return w.Fields
}

var (
	iotKinds  = []string{"temperature", "humidity", "pressure", "vibration"}
	iotFields = []string{"value", "battery", "rssi"}
)

// iotRow is one row of the workload: a sensor's fields at one time.
type iotRow struct {
	sensor int
	time   int64 // ns since 1970
	value  float64
	ints   [2]int64 // the integer fields after value: battery, rssi
}

// newRows returns the workload's rows in order, time-major: every sensor
// at each interval, late points moved back in time.
func (w IoT) newRows() func(r *iotRow) bool {
	w.EnsureDefaults()
	rng := rand.New(rand.NewSource(w.Seed))
	ticks := w.ticks()
	values := make([]float64, w.Sensors)
	for i := range values {
		values[i] = 20 + rng.Float64()*10
	}
	tick, sensor := 0, 0
	return func(r *iotRow) bool {
		if tick >= ticks {
			return false
		}
		s := sensor
		t := w.Start.Add(time.Duration(tick) * w.Interval).UnixNano()
		t += int64((rng.Float64()*2 - 1) * w.Jitter * float64(w.Interval))
		if rng.Float64() < w.Late {
			t -= int64(rng.Float64() * float64(w.LateBy))
		}
		t -= t % int64(w.Precision) // times are after 1970: t % p >= 0
		values[s] += rng.NormFloat64() * 0.1
		r.sensor, r.time = s, t
		r.value = math.Round(values[s]*1000) / 1000
		if w.Fields > 1 {
			r.ints[0] = int64(100 - (tick*100/ticks)/2 - s%7)
		}
		if w.Fields > 2 {
			r.ints[1] = int64(-40 - rng.Intn(50))
		}
		if sensor++; sensor == w.Sensors {
			sensor = 0
			tick++
		}
		return true
	}
}

// NewLineWriter writes the workload time-major: every sensor at each
// interval, late points moved back in time.
//
//	iot,sensor=s000042,site=site-7,kind=humidity value=21.375,battery=87i 1704067200123456789
func (w IoT) NewLineWriter() func(dst []byte) ([]byte, bool) {
	return w.rowWriter(appendIoTLine)
}

// rowWriter returns a writer of the workload's rows, each written by
// appendRow with the workload's fields per row.
func (w IoT) rowWriter(appendRow func(dst []byte, r *iotRow, fields int) []byte) func(dst []byte) ([]byte, bool) {
	w.EnsureDefaults()
	rows := w.newRows()
	var r iotRow
	return func(dst []byte) ([]byte, bool) {
		if !rows(&r) {
			return dst, false
		}
		return appendRow(dst, &r, w.Fields), true
	}
}

func appendIoTLine(dst []byte, r *iotRow, fields int) []byte {
	dst = append(dst, "iot,sensor=s"...)
	dst = appendPadded(dst, r.sensor, 6)
	dst = append(dst, ",site=site-"...)
	dst = strconv.AppendInt(dst, int64(r.sensor%100), 10)
	dst = append(dst, ",kind="...)
	dst = append(dst, iotKinds[r.sensor%len(iotKinds)]...)
	dst = append(dst, ' ')
	for f := 0; f < fields; f++ {
		if f > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, iotFields[f]...)
		dst = append(dst, '=')
		if f == 0 {
			dst = strconv.AppendFloat(dst, r.value, 'f', -1, 64)
		} else {
			dst = strconv.AppendInt(dst, r.ints[f-1], 10)
			dst = append(dst, 'i')
		}
	}
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, r.time, 10)
	return append(dst, '\n')
}

func appendPadded(dst []byte, v, width int) []byte {
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// JSON returns the workload as NDJSON documents for a time-series
// collection with timeField "time" and metaField "sensor", the meta value
// a sub-document:
//
//	{"time":{"$date":"2024-01-01T00:00:00.123456789Z"},"sensor":{"id":"s000042","site":"site-42","kind":"humidity","floor":2},"value":21.375,"battery":87}
//
// The values and times are those of the line-protocol form.
func (w IoT) JSON() LineSource { return iotJSON{w} }

type iotJSON struct{ w IoT }

func (j iotJSON) Rows() int         { return j.w.Rows() }
func (j iotJSON) FieldsPerRow() int { return j.w.FieldsPerRow() }

func (j iotJSON) NewLineWriter() func(dst []byte) ([]byte, bool) {
	return j.w.rowWriter(appendIoTJSON)
}

func appendIoTJSON(dst []byte, r *iotRow, fields int) []byte {
	dst = append(dst, `{"time":{"$date":"`...)
	dst = document.AppendDate(dst, r.time)
	dst = append(dst, `"},"sensor":{"id":"s`...)
	dst = appendPadded(dst, r.sensor, 6)
	dst = append(dst, `","site":"site-`...)
	dst = strconv.AppendInt(dst, int64(r.sensor%100), 10)
	dst = append(dst, `","kind":"`...)
	dst = append(dst, iotKinds[r.sensor%len(iotKinds)]...)
	dst = append(dst, `","floor":`...)
	dst = strconv.AppendInt(dst, int64(r.sensor%5), 10)
	dst = append(dst, `},"value":`...)
	dst = strconv.AppendFloat(dst, r.value, 'f', -1, 64)
	for f := 1; f < fields; f++ {
		dst = append(dst, `,"`...)
		dst = append(dst, iotFields[f]...)
		dst = append(dst, `":`...)
		dst = strconv.AppendInt(dst, r.ints[f-1], 10)
	}
	return append(dst, "}\n"...)
}
