package pipeline

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// MongoDB's codes of $setWindowFields (named Location<code>).
const (
	codeUnknownField       mongoerr.Code = 40415
	codeBoundsBackwards    mongoerr.Code = 5339900
	codeDocumentsNeedSort  mongoerr.Code = 5339901
	codeRangeNeedsOneSort  mongoerr.Code = 5339902
	codeUnitTooLarge       mongoerr.Code = 5490710
	codeUnitWithNumbers    mongoerr.Code = 5624900
	codeDateWithoutUnit    mongoerr.Code = 5624901
	codeRangeNotNumber     mongoerr.Code = 5429414
	codeRangeNotDate       mongoerr.Code = 5429513
	codeConflictingOutputs mongoerr.Code = 6307900
	codeWindowMemory       mongoerr.Code = 5414201
	codeSortMemory         mongoerr.Code = 292
)

// Expr is a stage's argument expression: a field path ("$a.b", Path
// "a.b") or a constant (Path "").
type Expr struct {
	Path  string
	Const any
}

// eval returns the expression's value in d and whether it is there (a
// constant always is).
func (e Expr) eval(d Doc) (any, bool) {
	if e.Path == "" {
		return e.Const, true
	}
	return Lookup(d, e.Path)
}

// BoundKind is what a window bound is.
type BoundKind uint8

const (
	// BoundNumber is an offset: documents from the current one, or a
	// value added to the current sortBy value.
	BoundNumber BoundKind = iota
	// BoundCurrent is the current document (documents) or the current
	// sortBy value (range).
	BoundCurrent
	// BoundUnbounded is the partition's edge.
	BoundUnbounded
)

// Bound is one end of a window.
type Bound struct {
	Kind BoundKind
	N    float64 // BoundNumber's offset (a whole number for documents)
}

// Window is the documents an output is computed over.
type Window struct {
	// Range is a range window over the sortBy value; otherwise a
	// documents window over positions.
	Range bool
	// Unit is a range window's unit over dates (its bounds count Units);
	// 0 for a range over numbers.
	Unit   time.Duration
	Lo, Hi Bound
}

// Output is one output field of $setWindowFields.
type Output struct {
	// Field is the output's (dotted) path.
	Field string
	// Op is the window function: $avg $sum $min $max $count $first $last
	// $derivative $integral $shift $expMovingAvg.
	Op    string
	Input Expr
	// Window is the window; $shift and $expMovingAvg have none (their
	// own positions), the others default to [unbounded, unbounded].
	Window Window
	// Unit is $derivative's and $integral's time unit (0: numbers).
	Unit time.Duration
	// By and Default are $shift's offset and default value.
	By      int
	Default any
	// Alpha is $expMovingAvg's weight of the current value.
	Alpha float64
}

// SortKey is a sortBy field.
type SortKey struct {
	Field string
	Desc  bool
}

// WindowSpec is a parsed $setWindowFields.
type WindowSpec struct {
	// PartitionBy is the partition's field path; "" is one partition
	// (also a constant partitionBy).
	PartitionBy string
	// SortBy is the order within a partition; nil: none (input order).
	SortBy  []SortKey
	Outputs []Output
}

// units are the time units of range windows, $derivative and $integral
// (month, quarter and year are refused: their length varies).
var units = map[string]time.Duration{"millisecond": time.Millisecond, "second": time.Second,
	"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour, "week": 7 * 24 * time.Hour}

func notImplemented(format string, args ...any) error {
	return mongoerr.New(mongoerr.NotImplemented, "$setWindowFields "+format+" is not supported by Hourglass", args...)
}

func failedToParse(format string, args ...any) error {
	return mongoerr.New(mongoerr.FailedToParse, format, args...)
}

// ParseSetWindowFields reads the argument of a $setWindowFields stage.
// arg is the stage's argument as decoded (nil or a non-map: FailedToParse).
func ParseSetWindowFields(arg any) (*WindowSpec, error) {
	m, ok := arg.(map[string]any)
	if !ok {
		return nil, failedToParse("the $setWindowFields stage specification must be an object, found %T", arg)
	}
	spec := &WindowSpec{}
	var output map[string]any
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch k {
		case "partitionBy":
			if err := spec.parsePartition(v); err != nil {
				return nil, err
			}
		case "sortBy":
			keys, err := parseSortBy(v)
			if err != nil {
				return nil, err
			}
			spec.SortBy = keys
		case "output":
			o, ok := v.(map[string]any)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$setWindowFields 'output' must be an object, found %T", v)
			}
			output = o
		default:
			return nil, mongoerr.New(codeUnknownField, "BSON field '$setWindowFields.%s' is an unknown field", k)
		}
	}
	if output == nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "$setWindowFields requires 'output'")
	}
	for _, f := range sortedKeys(output) {
		o, err := spec.parseOutput(f, output[f])
		if err != nil {
			return nil, err
		}
		spec.Outputs = append(spec.Outputs, o)
	}
	for i, a := range spec.Outputs {
		for _, b := range spec.Outputs[i+1:] {
			if strings.HasPrefix(b.Field, a.Field+".") || strings.HasPrefix(a.Field, b.Field+".") {
				return nil, mongoerr.New(codeConflictingOutputs, "$setWindowFields specification contains two conflicting paths: '%s' and '%s'", a.Field, b.Field)
			}
		}
	}
	return spec, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (spec *WindowSpec) parsePartition(v any) error {
	switch x := v.(type) {
	case string:
		switch {
		case strings.HasPrefix(x, "$$"):
			return notImplemented("partitionBy of the variable %q", x)
		case strings.HasPrefix(x, "$"):
			if err := checkPath(x[1:]); err != nil {
				return err
			}
			spec.PartitionBy = x[1:]
		}
		return nil
	case map[string]any, []any:
		return notImplemented("partitionBy %s (only a field path, \"$field\", or a constant)", describe(v))
	}
	return nil
}

func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") || strings.Contains(p, "$") {
		return failedToParse("invalid field path '$%s'", p)
	}
	return nil
}

func parseSortBy(v any) ([]SortKey, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "$setWindowFields 'sortBy' must be an object, found %T", v)
	}
	if len(m) == 0 {
		return nil, mongoerr.New(15976, "$sort stage must have at least one sort key")
	}
	if len(m) > 1 {
		return nil, notImplemented("sortBy of more than one field")
	}
	for f, d := range m {
		n, ok := asFloat(d)
		if !ok || (n != 1 && n != -1) {
			if _, meta := d.(map[string]any); meta {
				return nil, notImplemented("sortBy %s of '%s'", describe(d), f)
			}
			return nil, mongoerr.New(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		if err := checkPath(f); err != nil {
			return nil, err
		}
		return []SortKey{{Field: f, Desc: n < 0}}, nil
	}
	return nil, nil
}

// asFloat reads a number.
func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}

// parseExpr reads an argument expression: a field path or a constant.
func parseExpr(op string, v any) (Expr, error) {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$$") {
			return Expr{}, notImplemented("%s of the variable %q", op, x)
		}
		if strings.HasPrefix(x, "$") {
			if err := checkPath(x[1:]); err != nil {
				return Expr{}, err
			}
			return Expr{Path: x[1:]}, nil
		}
	case map[string]any:
		if lit, ok := x["$literal"]; ok && len(x) == 1 {
			return Expr{Const: lit}, nil
		}
		return Expr{}, notImplemented("%s of the expression %s (only a field path, \"$field\", or a constant)", op, describe(v))
	case []any:
		return Expr{}, notImplemented("%s of an array expression", op)
	}
	return Expr{Const: v}, nil
}

func (spec *WindowSpec) parseOutput(field string, v any) (Output, error) {
	if err := checkPath(field); err != nil {
		return Output{}, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Output{}, failedToParse("$setWindowFields output field '%s' must be an object", field)
	}
	o := Output{Field: field}
	var window any
	for _, k := range sortedKeys(m) {
		switch {
		case k == "window":
			window = m[k]
		case strings.HasPrefix(k, "$"):
			if o.Op != "" {
				return Output{}, failedToParse("Window function found an unknown argument: %s", k)
			}
			o.Op = k
		default:
			if o.Op == "" && len(m) == 1 {
				return Output{}, failedToParse("Expected a $-prefixed window function, %s", k)
			}
			return Output{}, failedToParse("Window function found an unknown argument: %s", k)
		}
	}
	if o.Op == "" {
		return Output{}, failedToParse("Expected a $-prefixed window function")
	}
	if err := spec.parseFunction(&o, m[o.Op], window); err != nil {
		return Output{}, err
	}
	return o, nil
}

// parseFunction reads a window function's argument and window.
func (spec *WindowSpec) parseFunction(o *Output, arg, window any) error {
	var err error
	switch o.Op {
	case "$avg", "$sum", "$min", "$max", "$first", "$last":
		o.Input, err = parseExpr(o.Op, arg)
	case "$count":
		if a, ok := arg.(map[string]any); !ok || len(a) != 0 {
			return failedToParse("$count only accepts an empty object as input")
		}
	case "$derivative", "$integral":
		err = parseRate(o, arg)
	case "$shift":
		err = parseShift(o, arg)
	case "$expMovingAvg":
		err = parseExpMovingAvg(o, arg)
	case "$stdDevPop", "$stdDevSamp", "$push", "$addToSet", "$rank", "$denseRank", "$documentNumber",
		"$covariancePop", "$covarianceSamp", "$top", "$bottom", "$topN", "$bottomN", "$firstN", "$lastN",
		"$maxN", "$minN", "$locf", "$linearFill", "$percentile", "$median", "$minMaxScaler", "$concatArrays", "$setUnion":
		return notImplemented("window function %s", o.Op)
	default:
		return failedToParse("Unrecognized window function, %s", o.Op)
	}
	if err != nil {
		return err
	}
	switch o.Op {
	case "$shift", "$expMovingAvg":
		if window != nil {
			return failedToParse("%s does not accept a 'window' field", o.Op)
		}
		if len(spec.SortBy) == 0 {
			return failedToParse("%s requires a sortBy", o.Op)
		}
		return nil
	}
	if window == nil {
		if o.Op == "$derivative" {
			return failedToParse("$derivative requires explicit window bounds")
		}
		o.Window = Window{Lo: Bound{Kind: BoundUnbounded}, Hi: Bound{Kind: BoundUnbounded}}
		if o.Op == "$integral" && len(spec.SortBy) == 0 {
			return failedToParse("$integral requires a sortBy")
		}
		return nil
	}
	if o.Window, err = spec.parseWindow(window); err != nil {
		return err
	}
	if (o.Op == "$derivative" || o.Op == "$integral") && len(spec.SortBy) != 1 {
		return failedToParse("%s requires a sortBy of a single field", o.Op)
	}
	return nil
}

func parseUnit(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, failedToParse("'unit' must be a string, found %s", describe(v))
	}
	u, ok := units[s]
	if !ok {
		if s == "month" || s == "quarter" || s == "year" {
			return 0, mongoerr.New(codeUnitTooLarge, "unit must be 'week' or smaller; got '%s'", s)
		}
		return 0, failedToParse("unknown time unit value: %s", s)
	}
	return u, nil
}

// parseRate reads {input, unit} of $derivative and $integral.
func parseRate(o *Output, arg any) error {
	m, ok := arg.(map[string]any)
	if !ok {
		return failedToParse("%s expects an object of the form {input: <expr>, unit: <string>}", o.Op)
	}
	in, ok := m["input"]
	if !ok {
		return failedToParse("%s requires an 'input' expression", o.Op)
	}
	var err error
	if o.Input, err = parseExpr(o.Op, in); err != nil {
		return err
	}
	for k, v := range m {
		switch k {
		case "input":
		case "unit":
			if o.Unit, err = parseUnit(v); err != nil {
				return err
			}
		default:
			return failedToParse("%s got unexpected argument: %s", o.Op, k)
		}
	}
	return nil
}

// parseShift reads {output, by, default}.
func parseShift(o *Output, arg any) error {
	m, ok := arg.(map[string]any)
	if !ok {
		return failedToParse("$shift must be an object of the form {output: <expr>, by: <int>, default: <const>}")
	}
	out, okOut := m["output"]
	by, okBy := m["by"]
	if !okOut || !okBy {
		return failedToParse("$shift requires 'output' and 'by'")
	}
	var err error
	if o.Input, err = parseExpr(o.Op, out); err != nil {
		return err
	}
	n, ok := asFloat(by)
	if !ok || n != math.Trunc(n) || math.Abs(n) > math.MaxInt32 {
		return failedToParse("'$shift:by' field must be an integer, but found %s", describe(by))
	}
	o.By = int(n)
	for k, v := range m {
		switch k {
		case "output", "by":
		case "default":
			d, err := parseExpr(o.Op, v)
			if err != nil {
				return err
			}
			if d.Path != "" {
				return failedToParse("'$shift:default' expression must yield a constant value")
			}
			o.Default = d.Const
		default:
			return failedToParse("Unknown argument in $shift: %s", k)
		}
	}
	return nil
}

// parseExpMovingAvg reads {input, N} or {input, alpha}.
func parseExpMovingAvg(o *Output, arg any) error {
	m, ok := arg.(map[string]any)
	if !ok {
		return failedToParse("$expMovingAvg must have exactly one argument that is an object")
	}
	in, ok := m["input"]
	if !ok {
		return failedToParse("$expMovingAvg requires an 'input' expression")
	}
	var err error
	if o.Input, err = parseExpr(o.Op, in); err != nil {
		return err
	}
	n, hasN := m["N"]
	alpha, hasAlpha := m["alpha"]
	if hasN == hasAlpha || len(m) != 2 {
		return failedToParse("$expMovingAvg takes 'input' and exactly one of 'N' and 'alpha'")
	}
	if hasN {
		x, ok := emaNumber(n)
		if !ok || x != math.Trunc(x) || x <= 0 {
			return failedToParse("'N' field must be a positive integer, but found %s", describe(n))
		}
		o.Alpha = 2 / (x + 1)
		return nil
	}
	x, ok := emaNumber(alpha)
	if !ok || !(x > 0 && x < 1) {
		return failedToParse("'alpha' must be a number between 0 and 1 exclusive, but found %s", describe(alpha))
	}
	o.Alpha = x
	return nil
}

// parseWindow reads {documents: [lo, hi]} or {range: [lo, hi], unit}.
func (spec *WindowSpec) parseWindow(v any) (Window, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Window{}, failedToParse("'window' field must be an object")
	}
	var w Window
	var bounds any
	docs, hasDocs := m["documents"]
	rng, hasRange := m["range"]
	unit, hasUnit := m["unit"]
	switch {
	case hasDocs && hasRange:
		return w, failedToParse("Window bounds can specify either 'documents' or 'unit', not both")
	case hasDocs:
		if hasUnit {
			return w, failedToParse("Window bounds can specify either 'documents' or 'unit', not both")
		}
		bounds = docs
	case hasRange:
		w.Range, bounds = true, rng
	default:
		return w, failedToParse("'window' field must specify 'documents' or 'range'")
	}
	for k := range m {
		if k != "documents" && k != "range" && k != "unit" {
			return w, failedToParse("'window' field can only contain 'documents' as the only argument or 'range' with an optional 'unit' field; found %s", k)
		}
	}
	if hasUnit {
		var err error
		if w.Unit, err = parseUnit(unit); err != nil {
			return w, err
		}
	}
	arr, ok := bounds.([]any)
	if !ok || len(arr) != 2 {
		return w, failedToParse("Window bounds must be a 2-element array")
	}
	var err error
	if w.Lo, err = parseBound(arr[0], w.Range); err != nil {
		return w, err
	}
	if w.Hi, err = parseBound(arr[1], w.Range); err != nil {
		return w, err
	}
	for _, b := range []Bound{w.Lo, w.Hi} {
		if w.Unit != 0 && b.Kind == BoundNumber && b.N != math.Trunc(b.N) {
			return w, failedToParse("With a unit, range-based bounds must be an integer; got %v", b.N)
		}
	}
	if backwards(w.Lo, w.Hi) {
		return w, mongoerr.New(codeBoundsBackwards, "Lower bound must not exceed upper bound")
	}
	whole := w.Lo.Kind == BoundUnbounded && w.Hi.Kind == BoundUnbounded
	switch {
	case w.Range && len(spec.SortBy) != 1:
		return w, mongoerr.New(codeRangeNeedsOneSort, "Range-based bounds require sortBy a single field")
	case w.Range && !whole && spec.SortBy[0].Desc:
		return w, notImplemented("range window over a descending sortBy")
	case !w.Range && !whole && len(spec.SortBy) == 0:
		return w, mongoerr.New(codeDocumentsNeedSort, "Document-based bounds require a sortBy")
	}
	return w, nil
}

func parseBound(v any, rng bool) (Bound, error) {
	if s, ok := v.(string); ok {
		switch s {
		case "current":
			return Bound{Kind: BoundCurrent}, nil
		case "unbounded":
			return Bound{Kind: BoundUnbounded}, nil
		}
	}
	n, ok := asFloat(v)
	switch {
	case rng && (!ok || math.IsNaN(n) || math.IsInf(n, 0)):
		if _, expr := v.(map[string]any); expr {
			return Bound{}, notImplemented("window bound expression %s (only numbers, 'current' and 'unbounded')", describe(v))
		}
		return Bound{}, failedToParse("Range-based bounds expression must be a number")
	case !rng && (!ok || n != math.Trunc(n) || math.Abs(n) > math.MaxInt32):
		if _, expr := v.(map[string]any); expr {
			return Bound{}, notImplemented("window bound expression %s (only integers, 'current' and 'unbounded')", describe(v))
		}
		return Bound{}, failedToParse("Numeric document-based bounds must be an integer")
	}
	return Bound{Kind: BoundNumber, N: n}, nil
}

// backwards tells a lower bound past the upper one. ["unbounded", x]
// and [x, "unbounded"] are always in order; ["current", x] compares as 0.
func backwards(lo, hi Bound) bool {
	if lo.Kind == BoundUnbounded || hi.Kind == BoundUnbounded {
		return false
	}
	l, h := lo.N, hi.N
	if lo.Kind == BoundCurrent {
		l = 0
	}
	if hi.Kind == BoundCurrent {
		h = 0
	}
	return l > h
}
