package pipeline

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// DefaultMaxMemory is the memory a stage may hold (its buffered documents,
// or its sort) when Options.MaxMemory is 0: 100 MiB, MongoDB's limit of a
// blocking stage without allowDiskUse.
const DefaultMaxMemory = 100 << 20

// Options configure a stage. The zero value is the default.
type Options struct {
	// Sorted promises that the input arrives partition by partition (the
	// documents of one partition together) and, within a partition, in
	// sortBy order. The stage checks the promise and fails with
	// InternalError when the input breaks it. Without it the stage sorts
	// its input first.
	Sorted bool
	// MaxMemory bounds the documents a stage holds, as Size counts them:
	// the sort of an unsorted input (then error 292,
	// QueryExceededMemoryLimitNoDiskUseAllowed), the window of a sorted one
	// (then error 5414201). 0 means DefaultMaxMemory.
	MaxMemory int64
	// AllowDiskUse lets the sort of an unsorted input spill: past
	// MaxMemory it writes sorted runs to temporary files in SpillDir
	// ("": os.TempDir()) and merges them, holding one document of each
	// run, instead of failing with 292. A window's own documents, and
	// $densify's bounds "full" (which reads its whole input), stay within
	// MaxMemory.
	AllowDiskUse bool
	SpillDir     string
	// Spills, when set, also holds the files spilled, for the caller
	// to close when it gives the pipeline up before its end.
	Spills *Spills
}

func (o Options) maxMemory() int64 {
	if o.MaxMemory <= 0 {
		return DefaultMaxMemory
	}
	return o.MaxMemory
}

// spill is how the stage's sort may spill: nil when it may not.
func (o Options) spill() *spillOptions {
	if !o.AllowDiskUse {
		return nil
	}
	return &spillOptions{dir: o.SpillDir, files: o.Spills}
}

// entry is a buffered document of the current partition.
type entry struct {
	doc Doc
	key any     // the sortBy value (nil: missing)
	num float64 // key as a number: a date in milliseconds
	// kind is key's kind: keyNumber, keyDate or keyOther.
	kind keyKind
	size int64
}

type keyKind uint8

const (
	keyOther keyKind = iota
	keyNumber
	keyDate
)

func numericKey(v any) (float64, keyKind) {
	if t, ok := v.(time.Time); ok {
		return float64(t.UnixMilli()), keyDate
	}
	if n, ok := asFloat(v); ok {
		return n, keyNumber
	}
	return 0, keyOther
}

// windowIter runs $setWindowFields over a sorted input.
type windowIter struct {
	spec *WindowSpec
	in   Iterator
	max  int64

	// The current partition: buf holds its documents base..base+len(buf)-1
	// of n read; out is the next one to answer; ended once its last
	// document is read.
	buf     []entry
	base    int
	n       int
	out     int
	ended   bool
	part    any
	started bool
	lastKey any // the sortBy value of the last document read
	lastNum float64
	mem     int64
	// seen lists the partitions done, by describe(key): a partition read
	// again means the input was not grouped.
	seen map[string]bool
	// next is the first document of the next partition, read ahead.
	next Doc
	// running are the states of the outputs whose window starts at the
	// partition's first document, and of $expMovingAvg.
	running []*running
	ready   []Doc
	done    bool
	// peak is the most documents buffered at once (for tests).
	peak int
}

// running is the state of an output computed incrementally over its
// partition: a window whose lower bound is unbounded grows at its upper
// end only; absorbed is the number of documents in it.
type running struct {
	acc      accumulator
	absorbed int
	ema      any  // $expMovingAvg's last value (nil: none yet)
	decimal  bool // $expMovingAvg has read a Decimal128: it answers one
}

// emaNumber reads a number $expMovingAvg averages (or its N or alpha): a
// Decimal128 too, as the double nearest to it.
func emaNumber(v any) (float64, bool) {
	if d, ok := v.(partialfilter.Decimal128); ok {
		return d.Float64(), true
	}
	return asFloat(v)
}

// decimalOf is f as a Decimal128, in the shortest digits that read back
// as f.
func decimalOf(f float64) any {
	var s string
	switch {
	case math.IsNaN(f):
		s = "NaN"
	case math.IsInf(f, 1):
		s = "Infinity"
	case math.IsInf(f, -1):
		s = "-Infinity"
	default:
		s = strconv.FormatFloat(f, 'g', -1, 64)
	}
	d, err := partialfilter.ParseDecimal128(s)
	if err != nil {
		return f // a double's digits always fit a Decimal128
	}
	return d
}

// SetWindowFields runs spec over in. Without opts.Sorted it first sorts
// in by partition and sortBy (stable: documents that tie keep their
// input order), within opts.MaxMemory.
func SetWindowFields(in Iterator, spec *WindowSpec, opts Options) Iterator {
	w := &windowIter{spec: spec, in: in, max: opts.maxMemory(), seen: map[string]bool{}}
	if !opts.Sorted {
		w.in = &sortingIter{in: in, order: spec.order(), max: opts.maxMemory(), spill: opts.spill()}
	}
	w.running = make([]*running, len(spec.Outputs))
	return w
}

// Peak returns the most documents a SetWindowFields iterator has held at
// once (0 for another iterator).
func Peak(it Iterator) int {
	if w, ok := it.(*windowIter); ok {
		return w.peak
	}
	return 0
}

func (w *windowIter) Next() (Doc, error) {
	for len(w.ready) == 0 {
		if w.done {
			return nil, nil
		}
		if err := w.step(); err != nil {
			w.done = true
			return nil, err
		}
	}
	d := w.ready[0]
	w.ready[0] = nil
	w.ready = w.ready[1:]
	return d, nil
}

// step reads one document (or ends a partition) and answers what it
// makes ready.
func (w *windowIter) step() error {
	if w.ended {
		w.startPartition()
		if w.next == nil {
			w.done = true
			return nil
		}
		d := w.next
		w.next = nil
		return w.add(d)
	}
	d, err := w.in.Next()
	if err != nil {
		return err
	}
	if d == nil {
		w.ended = true
		return w.emit()
	}
	part, _ := Lookup(d, w.spec.PartitionBy)
	if w.spec.PartitionBy == "" {
		part = nil
	}
	if w.started && partialfilter.Compare(part, w.part) != 0 {
		w.ended, w.next = true, d
		return w.emit()
	}
	return w.add(d)
}

func (w *windowIter) startPartition() {
	if w.started {
		w.seen[fmt.Sprintf("%T:%v", w.part, w.part)] = true
	}
	w.buf, w.base, w.n, w.out, w.ended, w.started, w.mem = w.buf[:0], 0, 0, 0, false, false, 0
	clear(w.running)
}

// add buffers d, the next document of the current partition.
func (w *windowIter) add(d Doc) error {
	part, _ := Lookup(d, w.spec.PartitionBy)
	if w.spec.PartitionBy == "" {
		part = nil
	}
	if !w.started {
		if w.seen[fmt.Sprintf("%T:%v", part, part)] {
			return mongoerr.New(mongoerr.InternalError, "$setWindowFields: the input is not grouped by partition: %s again", describe(part))
		}
		w.part, w.started = part, true
	}
	e := entry{doc: d, size: Size(d)}
	if len(w.spec.SortBy) > 0 {
		e.key, _ = Lookup(d, w.spec.SortBy[0].Field)
		e.num, e.kind = numericKey(e.key)
		if w.n > 0 {
			c := partialfilter.Compare(w.lastKey, e.key)
			if w.spec.SortBy[0].Desc {
				c = -c
			}
			if c > 0 {
				return mongoerr.New(mongoerr.InternalError, "$setWindowFields: the input is not in sortBy order")
			}
		}
	}
	w.lastKey, w.lastNum = e.key, e.num
	if err := w.checkRangeKey(&e); err != nil {
		return err
	}
	w.buf = append(w.buf, e)
	w.n++
	w.mem += e.size
	w.peak = max(w.peak, len(w.buf))
	if w.mem > w.max {
		return mongoerr.New(codeWindowMemory, "Exceeded memory limit in $setWindowFields: %d documents of %d bytes held, the limit is %d bytes", len(w.buf), w.mem, w.max)
	}
	return w.emit()
}

// checkRangeKey refuses a sortBy value a range window cannot use: a
// number without a unit, a date with one.
func (w *windowIter) checkRangeKey(e *entry) error {
	for _, o := range w.spec.Outputs {
		win := o.Window
		// Every sortBy value must be of the range's kind, whatever the
		// bounds, ["unbounded", "unbounded"] too (range.js, time.js).
		if !win.Range || o.Op == "$shift" || o.Op == "$expMovingAvg" {
			continue
		}
		if win.Unit == 0 && e.kind != keyNumber {
			return mongoerr.New(codeRangeNotNumber, "Invalid range: Expected the sortBy field to be a number, but it was %s", describe(e.key))
		}
		if win.Unit != 0 && e.kind != keyDate {
			return mongoerr.New(codeRangeNotDate, "Invalid range: Expected the sortBy field to be a Date, but it was %s", describe(e.key))
		}
	}
	return nil
}

// at returns the buffered document of partition index i.
func (w *windowIter) at(i int) *entry { return &w.buf[i-w.base] }

// emit answers the documents whose windows are complete, then drops the
// documents no window needs any more.
func (w *windowIter) emit() error {
	for w.out < w.n && w.complete(w.out) {
		d, err := w.compute(w.out)
		if err != nil {
			return err
		}
		w.ready = append(w.ready, d)
		w.out++
	}
	w.evict()
	return nil
}

// complete tells whether every document of i's windows has been read.
func (w *windowIter) complete(i int) bool {
	if w.ended {
		return true
	}
	for _, o := range w.spec.Outputs {
		switch o.Op {
		case "$expMovingAvg":
			continue
		case "$shift":
			if i+o.By >= w.n {
				return false
			}
			continue
		}
		hi := o.Window.Hi
		switch {
		case hi.Kind == BoundUnbounded:
			return false
		case !o.Window.Range:
			off := 0
			if hi.Kind == BoundNumber {
				off = int(hi.N)
			}
			if i+off >= w.n {
				return false
			}
		default:
			// Complete once a document past the bound's value is read.
			if w.lastNum <= w.rangeValue(i, hi, o.Window) {
				return false
			}
		}
	}
	return true
}

// rangeValue is the sortBy value a bound of range window win stands for
// at document i.
func (w *windowIter) rangeValue(i int, b Bound, win Window) float64 {
	v := w.at(i).num
	if b.Kind != BoundNumber {
		return v
	}
	return v + b.N*unitScale(win.Unit)
}

// span returns the partition indexes [lo, hi] of output o's window at
// document i (lo > hi: empty).
func (w *windowIter) span(o *Output, i int) (int, int) {
	win := o.Window
	lo, hi := 0, w.n-1
	if !win.Range {
		if win.Lo.Kind != BoundUnbounded {
			lo = i + offset(win.Lo)
		}
		if win.Hi.Kind != BoundUnbounded {
			hi = i + offset(win.Hi)
		}
		return max(lo, 0), min(hi, w.n-1)
	}
	// "current" is the current document itself, not the documents that
	// tie with it (as 0 is).
	first, last := w.base, w.n-1
	switch win.Lo.Kind {
	case BoundCurrent:
		lo = i
	case BoundNumber:
		v := w.rangeValue(i, win.Lo, win)
		lo = first + sort.Search(last-first+1, func(j int) bool { return w.at(first+j).num >= v })
	}
	switch win.Hi.Kind {
	case BoundCurrent:
		hi = i
	case BoundNumber:
		v := w.rangeValue(i, win.Hi, win)
		hi = first + sort.Search(last-first+1, func(j int) bool { return w.at(first+j).num > v }) - 1
	}
	return lo, hi
}

func offset(b Bound) int {
	if b.Kind == BoundNumber {
		return int(b.N)
	}
	return 0
}

// unitScale is a range unit in milliseconds (1 over numbers).
func unitScale(u time.Duration) float64 {
	if u == 0 {
		return 1
	}
	return float64(u / time.Millisecond)
}

// compute answers document i with its outputs.
func (w *windowIter) compute(i int) (Doc, error) {
	e := w.at(i)
	d := e.doc
	for k := range w.spec.Outputs {
		o := &w.spec.Outputs[k]
		v, err := w.value(k, o, i)
		if err != nil {
			return nil, err
		}
		d = withField(d, o.Field, v)
	}
	return d, nil
}

// value is output o's value at document i.
func (w *windowIter) value(k int, o *Output, i int) (any, error) {
	switch o.Op {
	case "$shift":
		j := i + o.By
		if j < 0 || j >= w.n {
			return o.Default, nil
		}
		v, ok := o.Input.eval(w.at(j).doc)
		if !ok {
			return o.Default, nil
		}
		return v, nil
	case "$expMovingAvg":
		r := w.running[k]
		if r == nil {
			r = &running{}
			w.running[k] = r
		}
		if x, ok := o.Input.eval(w.at(i).doc); ok {
			if f, ok := emaNumber(x); ok {
				if _, isDec := x.(partialfilter.Decimal128); isDec {
					r.decimal = true
				}
				if prev, ok := r.ema.(float64); ok {
					r.ema = f*o.Alpha + prev*(1-o.Alpha)
				} else {
					r.ema = f
				}
			}
		}
		if f, ok := r.ema.(float64); ok && r.decimal {
			return decimalOf(f), nil
		}
		return r.ema, nil
	}
	lo, hi := w.span(o, i)
	if o.Window.Lo.Kind == BoundUnbounded {
		r := w.running[k]
		if r == nil {
			r = &running{acc: newAccumulator(o)}
			w.running[k] = r
		}
		for ; r.absorbed <= hi; r.absorbed++ {
			if err := r.acc.add(w.at(r.absorbed)); err != nil {
				return nil, err
			}
		}
		return r.acc.result(), nil
	}
	acc := newAccumulator(o)
	for j := lo; j <= hi; j++ {
		if err := acc.add(w.at(j)); err != nil {
			return nil, err
		}
	}
	return acc.result(), nil
}

// evict drops the buffered documents before the first one a window of a
// document not yet answered can hold.
func (w *windowIter) evict() {
	keep := w.out
	for k := range w.spec.Outputs {
		o := &w.spec.Outputs[k]
		switch {
		case o.Op == "$expMovingAvg":
			continue
		case o.Op == "$shift":
			keep = min(keep, w.out+min(o.By, 0))
		case o.Window.Lo.Kind == BoundUnbounded:
			if r := w.running[k]; r != nil {
				keep = min(keep, r.absorbed)
			} else {
				keep = min(keep, 0)
			}
		case !o.Window.Range:
			keep = min(keep, w.out+min(offset(o.Window.Lo), 0))
		case w.out < w.n:
			lo, _ := w.span(o, w.out)
			keep = min(keep, lo)
		default:
			// The next document's sortBy value is at least the last
			// one's: keep what its window may hold.
			v := w.lastNum
			if o.Window.Lo.Kind == BoundNumber {
				v += o.Window.Lo.N * unitScale(o.Window.Unit)
			}
			first := w.base
			keep = min(keep, first+sort.Search(w.n-first, func(j int) bool { return w.at(first+j).num >= v }))
		}
	}
	if drop := keep - w.base; drop > 0 {
		for j := range drop {
			w.mem -= w.buf[j].size
			w.buf[j] = entry{}
		}
		w.buf = append(w.buf[:0], w.buf[drop:]...)
		w.base = keep
	}
}
