package pipeline

import (
	"math"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// accumulator folds the documents of a window, in sort order.
type accumulator interface {
	add(e *entry) error
	result() any
}

func newAccumulator(o *Output) accumulator {
	switch o.Op {
	case "$sum":
		return &sumAcc{in: o.Input, small: true}
	case "$avg":
		return &avgAcc{in: o.Input}
	case "$min", "$max":
		return &extremeAcc{in: o.Input, max: o.Op == "$max"}
	case "$count":
		return &countAcc{}
	case "$first", "$last":
		return &endAcc{in: o.Input, last: o.Op == "$last"}
	case "$derivative":
		return &derivativeAcc{o: o}
	case "$integral":
		return &integralAcc{o: o}
	}
	panic("pipeline: no accumulator for " + o.Op)
}

// sumAcc is $sum: the numbers' sum, an int32 while every addend and the
// sum fit one, an int64 while they are integers that fit one, a double
// otherwise; 0 over no numbers.
type sumAcc struct {
	in     Expr
	i      int64
	f      float64
	small  bool // every addend an int32 and the sum fits one
	double bool
}

func (a *sumAcc) add(e *entry) error {
	v, _ := a.in.eval(e.doc)
	switch x := v.(type) {
	case int32:
		a.addInt(int64(x))
	case int64:
		a.small = false
		a.addInt(x)
	case float64:
		a.double, a.small = true, false
		a.f += x
	}
	return nil
}

func (a *sumAcc) addInt(x int64) {
	if a.double {
		a.f += float64(x)
		return
	}
	s := a.i + x
	if (x > 0 && s < a.i) || (x < 0 && s > a.i) {
		a.double, a.small, a.f = true, false, float64(a.i)+float64(x)
		return
	}
	a.i = s
	if s > math.MaxInt32 || s < math.MinInt32 {
		a.small = false
	}
}

func (a *sumAcc) result() any {
	switch {
	case a.double:
		return a.f + float64(a.i)
	case a.small:
		return int32(a.i)
	}
	return a.i
}

// avgAcc is $avg: the numbers' mean as a double, null over none.
type avgAcc struct {
	in  Expr
	sum float64
	n   int64
}

func (a *avgAcc) add(e *entry) error {
	v, _ := a.in.eval(e.doc)
	if f, ok := asFloat(v); ok {
		a.sum += f
		a.n++
	}
	return nil
}

func (a *avgAcc) result() any {
	if a.n == 0 {
		return nil
	}
	return a.sum / float64(a.n)
}

// extremeAcc is $min or $max in MongoDB's order of values, null and
// missing values left out; null over none.
type extremeAcc struct {
	in  Expr
	max bool
	v   any
	has bool
}

func (a *extremeAcc) add(e *entry) error {
	v, ok := a.in.eval(e.doc)
	if !ok || v == nil {
		return nil
	}
	c := partialfilter.Compare(v, a.v)
	if !a.has || (a.max && c > 0) || (!a.max && c < 0) {
		a.v, a.has = v, true
	}
	return nil
}

func (a *extremeAcc) result() any { return a.v }

// countAcc is $count: the documents, an int32.
type countAcc struct{ n int64 }

func (a *countAcc) add(*entry) error { a.n++; return nil }

func (a *countAcc) result() any {
	if a.n > math.MaxInt32 {
		return a.n
	}
	return int32(a.n)
}

// endAcc is $first or $last: the value at the window's first or last
// document (null when missing, or over no document).
type endAcc struct {
	in   Expr
	last bool
	v    any
	has  bool
}

func (a *endAcc) add(e *entry) error {
	if a.has && !a.last {
		return nil
	}
	a.v, _ = a.in.eval(e.doc)
	a.has = true
	return nil
}

func (a *endAcc) result() any { return a.v }

// point is a document of a rate: its sortBy value (milliseconds for a
// date) and its input. Differences of sortBy values are taken before they
// are scaled to the unit: milliseconds since 1970 divided first would
// lose the digits of a small difference.
type point struct{ t, y float64 }

// ratePoint reads a document of $derivative or $integral: a sortBy
// number without unit, a date with one; ok is false when the input is
// not a number.
func ratePoint(o *Output, e *entry) (point, bool, error) {
	switch {
	case e.kind == keyDate && o.Unit == 0:
		return point{}, false, mongoerr.New(codeDateWithoutUnit, "%s (with no 'unit') expects the sortBy field to be numeric; found a date: give a 'unit'", o.Op)
	case e.kind == keyNumber && o.Unit != 0:
		return point{}, false, mongoerr.New(codeUnitWithNumbers, "%s with 'unit' expects the sortBy field to be a Date; found %s", o.Op, describe(e.key))
	case e.kind == keyOther:
		return point{}, false, mongoerr.New(codeUnitWithNumbers, "%s expects the sortBy field to be a number or a Date; found %s", o.Op, describe(e.key))
	}
	v, _ := o.Input.eval(e.doc)
	y, ok := asFloat(v)
	return point{e.num, y}, ok, nil
}

// derivativeAcc is $derivative: the change of the input from the
// window's first document to its last, per unit of the sortBy value;
// null over fewer than two documents.
type derivativeAcc struct {
	o               *Output
	first, last     point
	firstOK, lastOK bool
	n               int
}

func (a *derivativeAcc) add(e *entry) error {
	p, ok, err := ratePoint(a.o, e)
	if err != nil {
		return err
	}
	if a.n == 0 {
		a.first, a.firstOK = p, ok
	}
	a.last, a.lastOK = p, ok
	a.n++
	return nil
}

func (a *derivativeAcc) result() any {
	if a.n < 2 || !a.firstOK || !a.lastOK || a.last.t == a.first.t {
		return nil
	}
	return (a.last.y - a.first.y) / ((a.last.t - a.first.t) / unitScale(a.o.Unit))
}

// integralAcc is $integral: the trapezoidal area under the input over
// the sortBy value, in units; documents whose input is not a number are
// left out; null over no document.
type integralAcc struct {
	o    *Output
	prev point
	has  bool
	sum  float64
	n    int
}

func (a *integralAcc) add(e *entry) error {
	p, ok, err := ratePoint(a.o, e)
	if err != nil {
		return err
	}
	a.n++
	if !ok {
		return nil
	}
	if a.has {
		a.sum += (p.t - a.prev.t) / unitScale(a.o.Unit) * (p.y + a.prev.y) / 2
	}
	a.prev, a.has = p, true
	return nil
}

func (a *integralAcc) result() any {
	if a.n == 0 {
		return nil
	}
	return a.sum
}
