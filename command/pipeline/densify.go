package pipeline

import (
	"math"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/document"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// MaxDensifyDocuments bounds the documents one $densify generates, as
// MongoDB's internalQueryMaxAllowedDensifyDocs does (its default).
const MaxDensifyDocuments = 500_000

// codeDensifyTooMany is MongoDB's code past MaxDensifyDocuments.
const codeDensifyTooMany mongoerr.Code = 5897900

// Densify bounds modes.
const (
	DensifyFull      = "full"
	DensifyPartition = "partition"
	DensifyExplicit  = "explicit"
)

// DensifySpec is a parsed $densify.
type DensifySpec struct {
	Field       string
	PartitionBy []string // partitionByFields
	Step        float64
	// Unit is the step's time unit over dates; 0 over numbers.
	Unit time.Duration
	// Bounds is DensifyFull, DensifyPartition or DensifyExplicit, whose
	// range is [Lo, Hi) (dates in milliseconds).
	Bounds string
	Lo, Hi float64
	// intStep tells that the step and the numbers are integers: generated
	// values are then int64 (int32 when the bounds are).
	intStep bool
}

func densifyError(format string, args ...any) error {
	return mongoerr.New(mongoerr.FailedToParse, "$densify "+format, args...)
}

// ParseDensify reads the argument of a $densify stage.
func ParseDensify(arg any) (*DensifySpec, error) {
	m, ok := arg.(map[string]any)
	if !ok {
		return nil, densifyError("specification must be an object, found %T", arg)
	}
	spec := &DensifySpec{}
	var rng map[string]any
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch k {
		case "field":
			s, ok := v.(string)
			if !ok || strings.HasPrefix(s, "$") {
				return nil, densifyError("'field' must be a field name, not %s", describe(v))
			}
			if err := checkPath(s); err != nil {
				return nil, err
			}
			spec.Field = s
		case "partitionByFields":
			arr, ok := v.([]any)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$densify 'partitionByFields' must be an array of field names")
			}
			for _, e := range arr {
				s, ok := e.(string)
				if !ok || strings.HasPrefix(s, "$") {
					return nil, densifyError("partitionByFields must hold field names, not %s", describe(e))
				}
				if err := checkPath(s); err != nil {
					return nil, err
				}
				spec.PartitionBy = append(spec.PartitionBy, s)
			}
		case "range":
			if rng, ok = v.(map[string]any); !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$densify 'range' must be an object")
			}
		default:
			return nil, mongoerr.New(codeUnknownField, "BSON field '$densify.%s' is an unknown field", k)
		}
	}
	if spec.Field == "" || rng == nil {
		return nil, densifyError("requires 'field' and 'range'")
	}
	for _, p := range spec.PartitionBy {
		if p == spec.Field || strings.HasPrefix(p, spec.Field+".") || strings.HasPrefix(spec.Field, p+".") {
			return nil, densifyError("'field' may not be a partitionByFields field or hold one: '%s'", p)
		}
	}
	return spec, spec.parseRange(rng)
}

func (spec *DensifySpec) parseRange(rng map[string]any) error {
	stepV, ok := rng["step"]
	step, isNum := asFloat(stepV)
	if !ok || !isNum || !(step > 0) || math.IsInf(step, 0) {
		return densifyError("the step must be a positive number, got %s", describe(stepV))
	}
	spec.Step = step
	_, intStep := stepV.(float64)
	intStep = !intStep
	if u, ok := rng["unit"]; ok {
		s, _ := u.(string)
		if s == "month" || s == "quarter" || s == "year" {
			return mongoerr.New(mongoerr.NotImplemented, "$densify of the calendar unit '%s' is not supported by Hourglass; units are millisecond to week", s)
		}
		d, ok := units[s]
		if !ok {
			return densifyError("unknown time unit value: %s", describe(u))
		}
		if step != math.Trunc(step) {
			return densifyError("the step must be an integer with a unit, got %v", step)
		}
		spec.Unit = d
	}
	for k := range rng {
		if k != "step" && k != "unit" && k != "bounds" {
			return mongoerr.New(codeUnknownField, "BSON field '$densify.range.%s' is an unknown field", k)
		}
	}
	switch b := rng["bounds"].(type) {
	case string:
		if b != DensifyFull && b != DensifyPartition {
			return densifyError("bounds must be \"full\", \"partition\" or an array of two values, got %q", b)
		}
		spec.Bounds = b
	case []any:
		if len(b) != 2 {
			return densifyError("bounds must be \"full\", \"partition\" or an array of two values")
		}
		lo, kl := numericKey(b[0])
		hi, kh := numericKey(b[1])
		want := keyNumber
		if spec.Unit != 0 {
			want = keyDate
		}
		if kl != want || kh != want {
			return densifyError("bounds must both be dates with a unit, numbers without one; got %s and %s", describe(b[0]), describe(b[1]))
		}
		if lo > hi {
			return densifyError("the lower bound must not be above the upper one")
		}
		spec.Bounds, spec.Lo, spec.Hi = DensifyExplicit, lo, hi
		_, f0 := b[0].(float64)
		intStep = intStep && !f0
	default:
		return densifyError("requires 'bounds': \"full\", \"partition\" or an array of two values")
	}
	spec.intStep = intStep
	return nil
}

// Densify runs spec over in, sorting it first (by partitionByFields, then
// field) unless opts.Sorted; bounds "full" reads all the input first, to
// know its range.
func Densify(in Iterator, spec *DensifySpec, opts Options) Iterator {
	ord := order{parts: spec.PartitionBy, sortBy: []SortKey{{Field: spec.Field}}}
	d := &densifyIter{spec: spec, ord: ord, in: in}
	if spec.Bounds == DensifyFull || !opts.Sorted {
		s := &sortingIter{in: in, order: ord, max: opts.maxMemory()}
		if spec.Bounds != DensifyFull {
			// "full" reads the sorted input whole; the others may spill.
			s.spill = opts.spill()
		}
		d.in, d.all = s, s
	}
	return d
}

type densifyIter struct {
	spec *DensifySpec
	ord  order
	in   Iterator
	all  *sortingIter // the whole input, sorted, for bounds "full"

	started   bool
	min, max  float64 // bounds "full": the input's range
	hasRange  bool    // the input has a value in the field
	prev      Doc     // the last document of the current partition
	origin    float64 // the current partition's grid starts here
	hasOrigin bool
	k         int64 // the next grid point: origin + k*step
	generated int
	out       []Doc
	done      bool
}

func (d *densifyIter) Next() (Doc, error) {
	for len(d.out) == 0 {
		if d.done {
			return nil, nil
		}
		if err := d.step(); err != nil {
			d.done = true
			return nil, err
		}
	}
	doc := d.out[0]
	d.out = d.out[1:]
	return doc, nil
}

// value reads a document's field: its number (dates in milliseconds) and
// whether it has one; a value that is neither is an error.
func (d *densifyIter) value(doc Doc) (float64, bool, error) {
	v, ok := Lookup(doc, d.spec.Field)
	if !ok || v == nil {
		return 0, false, nil
	}
	x, kind := numericKey(v)
	switch {
	case d.spec.Unit == 0 && kind != keyNumber:
		return 0, false, mongoerr.New(mongoerr.TypeMismatch, "$densify without a unit needs numbers in '%s'; found %s", d.spec.Field, describe(v))
	case d.spec.Unit != 0 && kind != keyDate:
		return 0, false, mongoerr.New(mongoerr.TypeMismatch, "$densify with a unit needs dates in '%s'; found %s", d.spec.Field, describe(v))
	}
	return x, true, nil
}

func (d *densifyIter) step() error {
	if !d.started {
		d.started = true
		if d.spec.Bounds == DensifyFull {
			if err := d.all.fill(); err != nil {
				return err
			}
			d.all.read = true
			first := true
			for _, doc := range d.all.sorted {
				x, ok, err := d.value(doc)
				if err != nil {
					return err
				}
				if ok {
					if first || x < d.min {
						d.min = x
					}
					if first || x > d.max {
						d.max = x
					}
					first, d.hasRange = false, true
				}
			}
		}
	}
	doc, err := d.in.Next()
	if err != nil {
		return err
	}
	if d.prev != nil && (doc == nil || !d.ord.samePartition(d.prev, doc)) {
		if err := d.endPartition(); err != nil {
			return err
		}
	}
	if doc == nil {
		d.done = true
		return nil
	}
	if d.prev == nil {
		d.startPartition()
	}
	x, ok, err := d.value(doc)
	if err != nil {
		return err
	}
	if ok {
		if !d.hasOrigin {
			d.origin, d.hasOrigin = x, true // bounds "partition"
		}
		if err := d.generate(doc, x, d.upper()); err != nil {
			return err
		}
		if d.point(d.k) == x {
			d.k++
		}
	}
	d.prev = doc
	d.out = append(d.out, doc)
	return nil
}

func (d *densifyIter) startPartition() {
	d.k, d.hasOrigin = 0, false
	switch d.spec.Bounds {
	case DensifyFull:
		d.origin, d.hasOrigin = d.min, d.hasRange
	case DensifyExplicit:
		d.origin, d.hasOrigin = d.spec.Lo, true
	}
}

// upper is the exclusive end of the grid: hi for explicit bounds.
func (d *densifyIter) upper() float64 {
	if d.spec.Bounds == DensifyExplicit {
		return d.spec.Hi
	}
	return math.Inf(1)
}

// endPartition generates the grid points after the partition's last
// document: up to hi (explicit) or the input's maximum (full).
func (d *densifyIter) endPartition() error {
	switch d.spec.Bounds {
	case DensifyExplicit:
		if err := d.generate(d.prev, d.spec.Hi, d.spec.Hi); err != nil {
			return err
		}
	case DensifyFull:
		if d.hasOrigin {
			if err := d.generate(d.prev, math.Nextafter(d.max, math.Inf(1)), math.Inf(1)); err != nil {
				return err
			}
		}
	}
	d.prev = nil
	return nil
}

func (d *densifyIter) point(k int64) float64 { return d.origin + float64(k)*d.stepSize() }

func (d *densifyIter) stepSize() float64 {
	if d.spec.Unit == 0 {
		return d.spec.Step
	}
	return d.spec.Step * float64(d.spec.Unit/time.Millisecond)
}

// generate adds the grid points before x (and before upper), as
// documents of the partition of like.
func (d *densifyIter) generate(like Doc, x, upper float64) error {
	if !d.hasOrigin {
		return nil
	}
	for {
		g := d.point(d.k)
		if !(g < x && g < upper) {
			return nil
		}
		if d.generated++; d.generated > MaxDensifyDocuments {
			return mongoerr.New(codeDensifyTooMany, "$densify would generate more than %d documents", MaxDensifyDocuments)
		}
		// MongoDB's order: the partition's fields, then the field.
		doc, order := Doc{}, &document.Order{}
		for _, p := range d.spec.PartitionBy {
			if v, ok := Lookup(like, p); ok {
				doc = withField(doc, p, v)
				appendPath(order, p)
			}
		}
		doc = withField(doc, d.spec.Field, d.gridValue(g))
		appendPath(order, d.spec.Field)
		doc[OrderKey] = order
		d.out = append(d.out, doc)
		d.k++
	}
}

// gridValue is a grid point as a value: a date, an integer when the step
// and the bounds are integers, a double otherwise.
func (d *densifyIter) gridValue(g float64) any {
	switch {
	case d.spec.Unit != 0:
		return time.UnixMilli(int64(g)).UTC()
	case d.spec.intStep && g == math.Trunc(g) && math.Abs(g) < 1<<53:
		if g >= math.MinInt32 && g <= math.MaxInt32 {
			return int32(g)
		}
		return int64(g)
	}
	return g
}
