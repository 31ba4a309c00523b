package pipeline

import (
	"strings"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// MongoDB's codes of $fill.
const (
	codeFillBothPartitions mongoerr.Code = 6050204
	codeFillRepeatedSort   mongoerr.Code = 6050106
)

// FillOutput is one output field of $fill.
type FillOutput struct {
	Field string
	// Method is "value", "locf" or "linear".
	Method string
	Value  any // the constant of "value"
}

// FillSpec is a parsed $fill.
type FillSpec struct {
	// PartitionBy are the paths whose values make a partition (partitionBy
	// "$a" is ["a"]); none is one partition.
	PartitionBy []string
	SortBy      []SortKey
	Outputs     []FillOutput
}

func fillError(format string, args ...any) error {
	return mongoerr.New(mongoerr.FailedToParse, "$fill "+format, args...)
}

// ParseFill reads the argument of a $fill stage.
func ParseFill(arg any) (*FillSpec, error) {
	m, ok := arg.(map[string]any)
	if !ok {
		return nil, fillError("specification must be an object, found %T", arg)
	}
	spec := &FillSpec{}
	_, hasBy := m["partitionBy"]
	_, hasFields := m["partitionByFields"]
	if hasBy && hasFields {
		return nil, mongoerr.New(codeFillBothPartitions, "$fill: only one of 'partitionBy' and 'partitionByFields' may be given")
	}
	var output map[string]any
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch k {
		case "partitionBy":
			var w WindowSpec
			if err := w.parsePartition(v); err != nil {
				return nil, mongoerr.New(mongoerr.NotImplemented, "$fill partitionBy: %v", err)
			}
			if w.PartitionBy != "" {
				spec.PartitionBy = []string{w.PartitionBy}
			}
		case "partitionByFields":
			arr, ok := v.([]any)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$fill 'partitionByFields' must be an array of field names")
			}
			for _, e := range arr {
				s, ok := e.(string)
				if !ok || strings.HasPrefix(s, "$") {
					return nil, fillError("partitionByFields must hold field names, not %s", describe(e))
				}
				if err := checkPath(s); err != nil {
					return nil, err
				}
				spec.PartitionBy = append(spec.PartitionBy, s)
			}
		case "sortBy":
			keys, err := parseSortBy(v)
			if err != nil {
				return nil, err
			}
			spec.SortBy = keys
		case "output":
			if output, ok = v.(map[string]any); !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$fill 'output' must be an object")
			}
		default:
			return nil, mongoerr.New(codeUnknownField, "BSON field '$fill.%s' is an unknown field", k)
		}
	}
	if len(output) == 0 {
		return nil, fillError("requires a non-empty 'output'")
	}
	for _, f := range sortedKeys(output) {
		o, err := parseFillOutput(f, output[f])
		if err != nil {
			return nil, err
		}
		if o.Method != "value" && len(spec.SortBy) == 0 {
			return nil, fillError("'sortBy' is required with method '%s'", o.Method)
		}
		spec.Outputs = append(spec.Outputs, o)
	}
	return spec, nil
}

func parseFillOutput(field string, v any) (FillOutput, error) {
	if err := checkPath(field); err != nil {
		return FillOutput{}, err
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return FillOutput{}, fillError("output field '%s' must be {value: <expression>} or {method: <string>}", field)
	}
	o := FillOutput{Field: field}
	if val, ok := m["value"]; ok {
		e, err := parseExpr("$fill value", val)
		if err != nil {
			return o, err
		}
		if e.Path != "" {
			return o, mongoerr.New(mongoerr.NotImplemented, "$fill value of the field path '$%s' is not supported by Hourglass; only constants", e.Path)
		}
		o.Method, o.Value = "value", e.Const
		return o, nil
	}
	method, ok := m["method"].(string)
	if !ok || (method != "locf" && method != "linear") {
		return o, fillError("output field '%s': method must be 'locf' or 'linear', got %s", field, describe(m["method"]))
	}
	o.Method = method
	return o, nil
}

// Fill runs spec over in, sorting it first unless opts.Sorted (or no
// output needs an order). It holds the documents of a gap of a linear
// output (from the last value to the next) and no more.
func Fill(in Iterator, spec *FillSpec, opts Options) Iterator {
	ord := order{parts: spec.PartitionBy, sortBy: spec.SortBy}
	if !opts.Sorted && (len(spec.PartitionBy) > 0 || len(spec.SortBy) > 0) {
		in = &sortingIter{in: in, order: ord, max: opts.maxMemory(), spill: opts.spill()}
	}
	f := &fillIter{spec: spec, in: in, ord: ord, max: opts.maxMemory(), state: make([]fillState, len(spec.Outputs))}
	return f
}

// fillState is an output's state in the current partition.
type fillState struct {
	last    any     // locf: the last value; linear: its y
	x       float64 // linear: the last value's sortBy value
	has     bool
	waiting []int // linear: the queue positions of the documents in its gap
}

// fillEntry is a document waiting for its linear outputs.
type fillEntry struct {
	doc     Doc
	x       float64
	pending int
	size    int64
}

type fillIter struct {
	spec  *FillSpec
	in    Iterator
	ord   order
	max   int64
	state []fillState
	queue []fillEntry
	base  int // the position of queue[0]
	prev  Doc // the last document read
	mem   int64
	out   []Doc
	done  bool
}

func (f *fillIter) Next() (Doc, error) {
	for len(f.out) == 0 {
		if f.done {
			return nil, nil
		}
		d, err := f.in.Next()
		if err != nil {
			f.done = true
			return nil, err
		}
		if d == nil || (f.prev != nil && !f.ord.samePartition(f.prev, d)) {
			f.endPartition()
		}
		if d == nil {
			f.done = true
			continue
		}
		if err := f.add(d); err != nil {
			f.done = true
			return nil, err
		}
	}
	d := f.out[0]
	f.out = f.out[1:]
	return d, nil
}

// endPartition leaves the gaps of linear outputs null and answers the
// documents held.
func (f *fillIter) endPartition() {
	for k := range f.state {
		for _, pos := range f.state[k].waiting {
			e := &f.queue[pos-f.base]
			e.doc = withField(e.doc, f.spec.Outputs[k].Field, nil)
			e.pending--
		}
	}
	clear(f.state)
	f.flush()
	f.prev = nil
}

// flush answers the documents at the head of the queue that wait for
// nothing.
func (f *fillIter) flush() {
	n := 0
	for n < len(f.queue) && f.queue[n].pending == 0 {
		f.out = append(f.out, f.queue[n].doc)
		f.mem -= f.queue[n].size
		n++
	}
	f.queue = append(f.queue[:0], f.queue[n:]...)
	f.base += n
}

func (f *fillIter) add(d Doc) error {
	in := d
	e := fillEntry{size: Size(d)}
	var key any
	if len(f.spec.SortBy) > 0 {
		key, _ = Lookup(d, f.spec.SortBy[0].Field)
	}
	pos := f.base + len(f.queue)
	for k := range f.spec.Outputs {
		o := &f.spec.Outputs[k]
		st := &f.state[k]
		v, ok := Lookup(in, o.Field)
		known := ok && v != nil
		switch o.Method {
		case "value":
			if !known {
				d = withField(d, o.Field, o.Value)
			}
		case "locf":
			if known {
				st.last, st.has = v, true
			} else {
				d = withField(d, o.Field, st.last)
			}
		case "linear":
			x, kind := numericKey(key)
			if kind == keyOther {
				return mongoerr.New(mongoerr.TypeMismatch, "$fill method 'linear' expects the sortBy field to be a number or a date, found %s", describe(key))
			}
			if f.prev != nil {
				if px, _ := numericKey(f.prevKey()); px == x {
					return mongoerr.New(codeFillRepeatedSort, "$fill method 'linear': there can be no repeated values in the sortBy field, found %s twice", describe(key))
				}
			}
			e.x = x
			if !known {
				if st.has {
					st.waiting = append(st.waiting, pos)
					e.pending++
				} else {
					d = withField(d, o.Field, nil)
				}
				continue
			}
			y, isNum := asFloat(v)
			if !isNum {
				return mongoerr.New(mongoerr.TypeMismatch, "$fill method 'linear' fills numbers; '%s' is %s", o.Field, describe(v))
			}
			for _, w := range st.waiting {
				we := &f.queue[w-f.base]
				we.doc = withField(we.doc, o.Field, st.last.(float64)+(y-st.last.(float64))*(we.x-st.x)/(x-st.x))
				we.pending--
			}
			st.waiting = st.waiting[:0]
			st.last, st.x, st.has = y, x, true
		}
	}
	e.doc = d
	f.queue = append(f.queue, e)
	f.prev = in
	f.mem += e.size
	f.flush()
	if f.mem > f.max {
		return mongoerr.New(codeWindowMemory, "Exceeded memory limit in $fill: a gap of %d documents holds %d bytes, the limit is %d bytes", len(f.queue), f.mem, f.max)
	}
	return nil
}

func (f *fillIter) prevKey() any {
	v, _ := Lookup(f.prev, f.spec.SortBy[0].Field)
	return v
}
