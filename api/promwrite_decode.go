package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/hourglassdb/hourglass/model"
)

// A remote write request as the write path needs it, decoded by hand from
// the decompressed body: label names and values are sub-slices of the
// body (no string a label), samples are cut from one slab, and the labels
// of a series whose encoded labels were seen before (promKeys) are not
// decoded at all. The decoder accepts and refuses what prompb's generated
// (gogo) Unmarshal does, field by field (FuzzPromDecode): the same varint,
// length and wire-type rules, unknown fields skipped as its skipTypes
// does, exemplars and metadata checked and dropped.
type promReq struct {
	series  []promWSeries
	labels  []promLabel  // the labels of the series, in series order
	samples []promSample // the samples of the series, in series order
	// take, when not nil, takes memory from the body budget; the rooms
	// are how many elements of each kind the decode has taken it for.
	take                              func(int64) error
	seriesRoom, labelRoom, sampleRoom int
}

// promWSeries is one TimeSeries of a request.
type promWSeries struct {
	// wire is the encoded labels (tag, length and Label message each) when
	// they are one run of the message, the key of promKeys; nil otherwise.
	wire []byte
	// lmsg holds the encoded labels for decodeLabels: wire, or the whole
	// TimeSeries message when the labels are not one run.
	lmsg []byte
	// key is the series' meta key (a boxed model.MetaKey) once known:
	// from promKeys at decode, else made by promBatch.check.
	key any
	// l0, l1: its labels, labels[l0:l1], decoded only when key is not
	// known at decode.
	l0, l1 int
	// s0, s1: its samples, samples[s0:s1].
	s0, s1 int
	// badTime: a sample's timestamp is beyond the engine's range.
	badTime bool
	// cached: key came from promKeys; promote: from its older generation.
	cached, promote bool
	// slot: the cache entry's series slot (model.Measurement.Slot).
	slot *model.SeriesSlot
}

type promLabel struct{ name, value []byte }

type promSample struct {
	t int64 // ms
	v float64
}

// Elements a pooled promReq keeps between requests at most; a request
// larger than these has its slices dropped afterwards.
const (
	maxPooledSeries  = 1 << 16
	maxPooledLabels  = 1 << 19
	maxPooledSamples = 1 << 18
)

var promReqs = sync.Pool{New: func() any { return new(promReq) }}

func getPromReq() *promReq { return promReqs.Get().(*promReq) }

// putPromReq drops what rq points to (the body's bytes, the keys) and
// pools it, unless a large request grew it past the caps.
func putPromReq(rq *promReq) {
	if cap(rq.series) > maxPooledSeries || cap(rq.labels) > maxPooledLabels || cap(rq.samples) > maxPooledSamples {
		return
	}
	clear(rq.series)
	clear(rq.labels)
	rq.series, rq.labels, rq.samples = rq.series[:0], rq.labels[:0], rq.samples[:0]
	promReqs.Put(rq)
}

// errPBHistograms refuses a series of native histograms.
var errPBHistograms = errors.New("native histograms are not stored yet; send float samples (send_native_histograms: false)")

// The errors of prompb's generated code, the same text.
var (
	errPBLength   = errors.New("proto: negative length found during unmarshaling")
	errPBOverflow = errors.New("proto: integer overflow")
	errPBEndGroup = errors.New("proto: unexpected end of group")
)

// pbVarint reads a varint at b[i:] as gogo's generated code does: up to
// ten bytes, the bits beyond 64 dropped.
func pbVarint(b []byte, i int) (uint64, int, error) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1, nil
	}
	var x uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, i, errPBOverflow
		}
		if i >= len(b) {
			return 0, i, io.ErrUnexpectedEOF
		}
		c := b[i]
		i++
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x, i, nil
		}
	}
}

// pbTag reads a field's tag at b[i:] and checks it as the generated code
// of message msg does.
func pbTag(b []byte, i int, msg string) (num int32, typ int, next int, err error) {
	wire, next, err := pbVarint(b, i)
	if err != nil {
		return 0, 0, next, err
	}
	num, typ = int32(wire>>3), int(wire&7)
	if typ == 4 {
		return 0, 0, next, fmt.Errorf("proto: %s: wiretype end group for non-group", msg)
	}
	if num <= 0 {
		return 0, 0, next, fmt.Errorf("proto: %s: illegal tag %d (wire type %d)", msg, num, wire)
	}
	return num, typ, next, nil
}

// pbBytes reads a length-delimited value at b[i:]: its bounds in b.
func pbBytes(b []byte, i int) (start, end int, err error) {
	x, i, err := pbVarint(b, i)
	if err != nil {
		return 0, 0, err
	}
	n := int(x)
	if n < 0 {
		return 0, 0, errPBLength
	}
	end = i + n
	if end < 0 {
		return 0, 0, errPBLength
	}
	if end > len(b) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return i, end, nil
}

// pbSkip skips the unknown field whose tag starts at b[pre:], as the
// generated code does (skipTypes and its checks); it returns where the
// next field starts.
func pbSkip(b []byte, pre int) (int, error) {
	n, err := pbSkipTypes(b[pre:])
	if err != nil {
		return 0, err
	}
	if n < 0 || pre+n < 0 {
		return 0, errPBLength
	}
	if pre+n > len(b) {
		return 0, io.ErrUnexpectedEOF
	}
	return pre + n, nil
}

// pbSkipTypes is prompb's skipTypes.
func pbSkipTypes(b []byte) (int, error) {
	i, depth := 0, 0
	for i < len(b) {
		wire, next, err := pbVarint(b, i)
		if err != nil {
			return 0, err
		}
		i = next
		switch typ := int(wire & 7); typ {
		case 0:
			if _, i, err = pbVarint(b, i); err != nil {
				return 0, err
			}
		case 1:
			i += 8
		case 2:
			n, next, err := pbVarint(b, i)
			if err != nil {
				return 0, err
			}
			length := int(n)
			if length < 0 {
				return 0, errPBLength
			}
			i = next + length
		case 3:
			depth++
		case 4:
			if depth == 0 {
				return 0, errPBEndGroup
			}
			depth--
		case 5:
			i += 4
		default:
			return 0, fmt.Errorf("proto: illegal wireType %d", typ)
		}
		if i < 0 {
			return 0, errPBLength
		}
		if depth == 0 {
			return i, nil
		}
	}
	return 0, io.ErrUnexpectedEOF
}

// pbLenField returns where the length-delimited field at i (its tag, of
// wire type typ, read) lies, or an error for a field of another type or
// cut short. field names it.
func pbLenField(b []byte, i, typ int, field string) (start, end int, err error) {
	if typ != 2 {
		return 0, 0, pbWrongType(typ, field)
	}
	return pbBytes(b, i)
}

func pbWrongType(typ int, field string) error {
	return fmt.Errorf("proto: wrong wireType = %d for field %s", typ, field)
}

// decode decodes pb, a WriteRequest, into rq (emptied first). The labels
// of a series whose encoded labels keys holds are not decoded: its key is
// taken from there (keys may be nil).
//
// The memory of the elements decoded is taken with take (nil: none) as
// they are decoded, before each is appended (need): a body that decodes
// into more than the budget allows stops where it reaches it, with
// take's error in a promBudgetError. A small body can announce many
// elements (a series of two bytes is a struct of over 100), so the
// elements are paid for, not the bytes.
func (rq *promReq) decode(pb []byte, take func(int64) error, keys *promKeyCache) error {
	rq.series = rq.series[:0]
	rq.labels = rq.labels[:0]
	rq.samples = rq.samples[:0]
	rq.take, rq.seriesRoom, rq.labelRoom, rq.sampleRoom = take, 0, 0, 0
	defer func() { rq.take = nil }()
	for i := 0; i < len(pb); {
		pre := i
		num, typ, next, err := pbTag(pb, i, "WriteRequest")
		if err != nil {
			return err
		}
		i = next
		switch num {
		case 1:
			start, end, err := pbLenField(pb, i, typ, "Timeseries")
			if err != nil {
				return err
			}
			if err := rq.decodeSeries(pb[start:end]); err != nil {
				return err
			}
			i = end
		case 3:
			start, end, err := pbLenField(pb, i, typ, "Metadata")
			if err != nil {
				return err
			}
			if err := pbCheckMetadata(pb[start:end]); err != nil {
				return err
			}
			i = end
		default:
			if i, err = pbSkip(pb, pre); err != nil {
				return err
			}
		}
	}
	// The series whose encoded labels were seen before take their key
	// from there, under one lock; the others' labels are decoded now.
	keys.lookup(rq.series)
	for si := range rq.series {
		s := &rq.series[si]
		if s.cached {
			continue
		}
		s.l0 = len(rq.labels)
		if err := rq.decodeLabels(s.lmsg); err != nil {
			return err
		}
		s.l1 = len(rq.labels)
	}
	return nil
}

// decodeSeries decodes a TimeSeries message: its samples, and where its
// labels are (decodeLabels decodes them later, unless their key is
// cached). Exemplars are checked and dropped; histograms are refused.
func (rq *promReq) decodeSeries(b []byte) error {
	s := promWSeries{s0: len(rq.samples)}
	lstart, lend := -1, -1
	contiguous := true
	for i := 0; i < len(b); {
		pre := i
		num, typ, next, err := pbTag(b, i, "TimeSeries")
		if err != nil {
			return err
		}
		i = next
		switch num {
		case 1:
			_, end, err := pbLenField(b, i, typ, "Labels")
			if err != nil {
				return err
			}
			switch {
			case lstart < 0:
				lstart = pre
			case lend != pre:
				contiguous = false
			}
			lend, i = end, end
		case 2:
			start, end, err := pbLenField(b, i, typ, "Samples")
			if err != nil {
				return err
			}
			sm, err := pbSample(b[start:end])
			if err != nil {
				return err
			}
			if sm.t > math.MaxInt64/int64(1e6) || sm.t < math.MinInt64/int64(1e6) {
				s.badTime = true
			}
			if err := rq.need(len(rq.samples), &rq.sampleRoom, sizeSample); err != nil {
				return err
			}
			rq.samples = append(rq.samples, sm)
			i = end
		case 3:
			start, end, err := pbLenField(b, i, typ, "Exemplars")
			if err != nil {
				return err
			}
			if err := pbCheckExemplar(b[start:end]); err != nil {
				return err
			}
			i = end
		case 4:
			if typ != 2 {
				return pbWrongType(typ, "Histograms")
			}
			return errPBHistograms
		default:
			if i, err = pbSkip(b, pre); err != nil {
				return err
			}
		}
	}
	switch {
	case lstart < 0: // no labels: refused by check
	case contiguous:
		s.wire = b[lstart:lend:lend]
		s.lmsg = s.wire
	default:
		// Labels between other fields: decodeLabels walks the whole
		// message, and the series is not cached.
		s.lmsg = b
	}
	s.s1 = len(rq.samples)
	if err := rq.need(len(rq.series), &rq.seriesRoom, sizeSeries); err != nil {
		return err
	}
	rq.series = append(rq.series, s)
	return nil
}

// need makes room for one more element of a kind of which the decode
// holds have, of size bytes (grow), when what it took is used up.
func (rq *promReq) need(have int, room *int, size int64) error {
	if have < *room {
		return nil
	}
	return rq.grow(room, size)
}

// grow takes from the budget the memory of more elements of size bytes
// before they are decoded, and moves *room on by as many: as many as it
// holds already (at least one, at most promRoomMax), so that what is
// taken is at most about twice what is decoded, as a slice grown by
// append holds.
func (rq *promReq) grow(room *int, size int64) error {
	n := min(max(*room, 1), promRoomMax)
	if rq.take != nil {
		if err := rq.take(int64(n) * size); err != nil {
			return &promBudgetError{err}
		}
	}
	*room += n
	return nil
}

// promRoomMax is the most elements of a kind a request's decode pays for
// at a time (grow).
const promRoomMax = 1 << 14

// decodeLabels decodes the Label messages (field 1) among the fields b,
// whose tags and lengths decodeSeries checked, into rq.labels. b is a
// series' run of labels, or (a series whose labels are not one run, wire
// nil) the whole TimeSeries message, whose other fields are skipped.
func (rq *promReq) decodeLabels(b []byte) error {
	for i := 0; i < len(b); {
		pre := i
		num, typ, next, err := pbTag(b, i, "TimeSeries")
		if err != nil {
			return err
		}
		i = next
		if num != 1 || typ != 2 {
			if i, err = pbSkip(b, pre); err != nil {
				return err
			}
			continue
		}
		start, end, err := pbBytes(b, i)
		if err != nil {
			return err
		}
		l, err := pbLabel(b[start:end])
		if err != nil {
			return err
		}
		if err := rq.need(len(rq.labels), &rq.labelRoom, sizeLabel); err != nil {
			return err
		}
		rq.labels = append(rq.labels, l)
		i = end
	}
	return nil
}

// pbLabel decodes a Label message; its name and value are sub-slices of b.
func pbLabel(b []byte) (promLabel, error) {
	var l promLabel
	for i := 0; i < len(b); {
		pre := i
		num, typ, next, err := pbTag(b, i, "Label")
		if err != nil {
			return l, err
		}
		i = next
		switch num {
		case 1, 2:
			start, end, err := pbLenField(b, i, typ, [...]string{1: "Name", 2: "Value"}[num])
			if err != nil {
				return l, err
			}
			if num == 1 {
				l.name = b[start:end:end]
			} else {
				l.value = b[start:end:end]
			}
			i = end
		default:
			if i, err = pbSkip(b, pre); err != nil {
				return l, err
			}
		}
	}
	return l, nil
}

// pbSample decodes a Sample message.
func pbSample(b []byte) (promSample, error) {
	var sm promSample
	// Prometheus' own encoding first: value, then timestamp.
	if len(b) >= 10 && b[0] == 0x09 && b[9] == 0x10 {
		if t, n, err := pbVarint(b, 10); err == nil && n == len(b) {
			return promSample{t: int64(t), v: math.Float64frombits(binary.LittleEndian.Uint64(b[1:]))}, nil
		}
	}
	for i := 0; i < len(b); {
		pre := i
		num, typ, next, err := pbTag(b, i, "Sample")
		if err != nil {
			return sm, err
		}
		i = next
		switch num {
		case 1:
			if typ != 1 {
				return sm, pbWrongType(typ, "Value")
			}
			if i+8 > len(b) {
				return sm, io.ErrUnexpectedEOF
			}
			sm.v = math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
			i += 8
		case 2:
			if typ != 0 {
				return sm, pbWrongType(typ, "Timestamp")
			}
			t, next, err := pbVarint(b, i)
			if err != nil {
				return sm, err
			}
			sm.t, i = int64(t), next
		default:
			if i, err = pbSkip(b, pre); err != nil {
				return sm, err
			}
		}
	}
	return sm, nil
}

// pbField is a known field of a message pbCheck checks: its wire type,
// and its message's checker when it is a message.
type pbField struct {
	name string
	typ  int
	msg  func([]byte) error
}

// pbCheck checks the message b (named msg) whose known fields are fields,
// as the generated Unmarshal does, keeping nothing.
func pbCheck(b []byte, msg string, fields []pbField) error {
	for i := 0; i < len(b); {
		pre := i
		num, typ, next, err := pbTag(b, i, msg)
		if err != nil {
			return err
		}
		i = next
		if int(num) >= len(fields) || fields[num].name == "" {
			if i, err = pbSkip(b, pre); err != nil {
				return err
			}
			continue
		}
		f := fields[num]
		if typ != f.typ {
			return pbWrongType(typ, f.name)
		}
		switch typ {
		case 0:
			_, i, err = pbVarint(b, i)
		case 1:
			if i+8 > len(b) {
				return io.ErrUnexpectedEOF
			}
			i += 8
		case 2:
			var start, end int
			if start, end, err = pbBytes(b, i); err == nil && f.msg != nil {
				err = f.msg(b[start:end])
			}
			i = end
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var (
	pbLabelFields    = []pbField{1: {name: "Name", typ: 2}, 2: {name: "Value", typ: 2}}
	pbExemplarFields = []pbField{1: {name: "Labels", typ: 2, msg: func(b []byte) error {
		return pbCheck(b, "Label", pbLabelFields)
	}}, 2: {name: "Value", typ: 1}, 3: {name: "Timestamp", typ: 0}}
	pbMetadataFields = []pbField{1: {name: "Type", typ: 0}, 2: {name: "MetricFamilyName", typ: 2},
		4: {name: "Help", typ: 2}, 5: {name: "Unit", typ: 2}}
)

func pbCheckExemplar(b []byte) error { return pbCheck(b, "Exemplar", pbExemplarFields) }
func pbCheckMetadata(b []byte) error { return pbCheck(b, "MetricMetadata", pbMetadataFields) }
