package command

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// isCountGroup tells a $group of one group that only counts: {_id:
// <constant>, <name>: {$sum: 1} or {$count: {}}, ...}.
func isCountGroup(st Stage) bool {
	d, ok := st.Arg.DocumentOK()
	if !ok {
		return false
	}
	elems, _ := d.Elements()
	count := len(elems) > 0
	for _, e := range elems {
		if e.Key() == "_id" {
			count = count && isConstant(e.Value())
			continue
		}
		_, ok := docCountAccumulator(e.Value())
		count = count && ok
	}
	return count
}

func isConstant(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		return false
	case bsoncore.TypeString:
		return !strings.HasPrefix(v.StringValue(), "$")
	}
	return true
}

// docCountAccumulator reads {$count: {}} or {$sum: <number>}: the number
// each document adds.
func docCountAccumulator(v bsoncore.Value) (float64, bool) {
	d, ok := v.DocumentOK()
	if !ok {
		return 0, false
	}
	elems, _ := d.Elements()
	if len(elems) != 1 {
		return 0, false
	}
	switch elems[0].Key() {
	case "$count":
		inner, ok := elems[0].Value().DocumentOK()
		if ok {
			n, _ := inner.Elements()
			return 1, len(n) == 0
		}
	case "$sum":
		return elems[0].Value().AsFloat64OK()
	}
	return 0, false
}

// countGroupDocument is the one group of a count-only $group over n
// documents.
func countGroupDocument(st Stage, n int64) (map[string]any, error) {
	d, _ := st.Arg.DocumentOK()
	order := &document.Order{Keys: []string{"_id"}}
	out := map[string]any{fieldOrderKey: order}
	elems, _ := d.Elements()
	for _, e := range elems {
		if e.Key() != "_id" {
			order.Keys = append(order.Keys, e.Key())
		}
		if e.Key() == "_id" {
			id, err := model.ValueFromBSON("_id", e.Value(), 0)
			if err != nil {
				return nil, err
			}
			out["_id"] = id
			continue
		}
		per, _ := docCountAccumulator(e.Value())
		if per == math.Trunc(per) && e.Value().Type != bsoncore.TypeDouble {
			out[e.Key()] = countValue(int64(per) * n)
		} else {
			out[e.Key()] = per * float64(n)
		}
	}
	return out, nil
}

// groupSpec is a $group the engine computes.
type groupSpec struct {
	// idKeys are the names of the _id document's fields; nil when _id is
	// one expression (idWindow or idMeta) or a constant (idConst).
	idKeys   []string
	idWindow string // the key holding the window, or "" for _id itself
	idMeta   string
	hasWin   bool
	hasMeta  bool
	idConst  any
	window   time.Duration
	origin   time.Time
	// months, for the calendar units (month, quarter, year), is the
	// months of one window: the engine computes day windows (UTC days
	// begin months), merged here into the windows of $dateTrunc.
	months  int64
	groupBy string // a path in the meta field
	accs    []accumulator
	fields  []string
	ord     *document.Order // the output's field order (order), shared
}

type accumulator struct {
	out   string
	op    string // $min, $max, $avg, $sum, $first, $last, or "n" (documents counted)
	field string
	per   float64 // "n": what each document adds
	isInt bool    // "n": the sum is an integer
}

// parseGroup reads a $group on a time-series collection.
func parseGroup(st Stage, ts *model.TimeSeriesOptions) (*groupSpec, error) {
	d, ok := st.Arg.DocumentOK()
	if !ok {
		return nil, mongoerr.New(15947, "a group's fields must be specified in an object")
	}
	g := &groupSpec{}
	idv, err := d.LookupErr("_id")
	if err != nil {
		return nil, mongoerr.New(15955, "a group specification must include an _id")
	}
	idKey := func(key string, v bsoncore.Value) error {
		if s, ok := v.StringValueOK(); ok && strings.HasPrefix(s, "$") {
			path := s[1:]
			if ts.MetaField == "" || (path != ts.MetaField && !strings.HasPrefix(path, ts.MetaField+".")) {
				return st.unsupported("with _id '" + s + "' (only the metaField '" + ts.MetaField + "', its sub-fields and $dateTrunc of the timeField group)")
			}
			if g.hasMeta {
				return st.unsupported("with two metaField keys in _id")
			}
			g.hasMeta, g.idMeta, g.groupBy = true, key, path
			return nil
		}
		dd, ok := v.DocumentOK()
		if !ok {
			return st.unsupported("with an _id field '" + key + "' that is neither the metaField nor $dateTrunc")
		}
		if g.hasWin {
			return st.unsupported("with two $dateTrunc keys in _id")
		}
		if err := parseDateTrunc(dd, ts, g); err != nil {
			return err
		}
		g.hasWin, g.idWindow = true, key
		return nil
	}
	switch {
	case isConstant(idv):
		if g.idConst, err = model.ValueFromBSON("_id", idv, 0); err != nil {
			return nil, err
		}
	case idv.Type == bsoncore.TypeString:
		err = idKey("", idv)
	default:
		dd := idv.Document()
		elems, _ := dd.Elements()
		if len(elems) == 1 && strings.HasPrefix(elems[0].Key(), "$") {
			err = idKey("", idv)
			break
		}
		for _, e := range elems {
			g.idKeys = append(g.idKeys, e.Key())
			if err = idKey(e.Key(), e.Value()); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	elems, _ := d.Elements()
	for _, e := range elems {
		if e.Key() == "_id" {
			continue
		}
		if strings.HasPrefix(e.Key(), "$") || strings.Contains(e.Key(), ".") {
			return nil, mongoerr.New(40236, "the field name '%s' cannot be an operator name nor hold '.'", e.Key())
		}
		if per, ok := docCountAccumulator(e.Value()); ok {
			g.accs = append(g.accs, accumulator{out: e.Key(), op: "n", per: per, isInt: per == math.Trunc(per) && e.Value().Document().Index(0).Value().Type != bsoncore.TypeDouble})
			continue
		}
		ad, ok := e.Value().DocumentOK()
		acc, _ := ad.Elements()
		if !ok || len(acc) != 1 {
			return nil, mongoerr.New(40234, "the field '%s' must be an accumulator object", e.Key())
		}
		op := acc[0].Key()
		switch op {
		case "$min", "$max", "$avg", "$sum", "$first", "$last":
		default:
			return nil, mongoerr.New(codeUnknownGroupOp, "unknown group operator '%s'; Hourglass supports $min, $max, $avg, $sum, $first, $last and $count", op)
		}
		path, ok := acc[0].Value().StringValueOK()
		if !ok || !strings.HasPrefix(path, "$") || strings.Contains(path, ".") || path[1:] == ts.TimeField || path[1:] == ts.MetaField {
			return nil, st.unsupported("with " + op + " of " + acc[0].Value().String() + " (only a measurement field, as '$field', or {$sum: 1})")
		}
		g.accs = append(g.accs, accumulator{out: e.Key(), op: op, field: path[1:]})
		if !slices.Contains(g.fields, path[1:]) {
			g.fields = append(g.fields, path[1:])
		}
	}
	return g, nil
}

// parseDateTrunc reads {$dateTrunc: {date: "$<timeField>", unit, binSize}}
// into fixed windows aligned as MongoDB aligns them: on 2000-01-01 (a
// Sunday, 2000-01-02, for weeks).
func parseDateTrunc(d bsoncore.Document, ts *model.TimeSeriesOptions, g *groupSpec) error {
	elems, _ := d.Elements()
	if len(elems) != 1 || elems[0].Key() != "$dateTrunc" {
		name := "{}"
		if len(elems) > 0 {
			name = elems[0].Key()
		}
		return mongoerr.New(codeNotImplemented, "$group _id expression %s is not supported by Hourglass; only $dateTrunc of the timeField groups by time", name)
	}
	args, ok := elems[0].Value().DocumentOK()
	if !ok {
		return mongoerr.New(5439007, "$dateTrunc only supports an object as its argument")
	}
	var unit string
	bin := int64(1)
	fields, _ := args.Elements()
	for _, f := range fields {
		v := f.Value()
		switch f.Key() {
		case "date":
			if s, ok := v.StringValueOK(); !ok || s != "$"+ts.TimeField {
				return mongoerr.New(codeNotImplemented, "$dateTrunc's date must be the timeField '$%s' in Hourglass; got %s", ts.TimeField, v)
			}
		case "unit":
			unit, _ = v.StringValueOK()
		case "binSize":
			n, ok := v.AsInt64OK()
			if !ok || n <= 0 {
				return mongoerr.New(5439017, "$dateTrunc requires 'binSize' to be a positive 64-bit integer; got %s", v)
			}
			bin = n
		case "timezone":
			if s, _ := v.StringValueOK(); s != "UTC" && s != "Z" && s != "+00:00" && s != "GMT" {
				return mongoerr.New(codeNotImplemented, "$dateTrunc's timezone %s is not supported by Hourglass; windows are in UTC", v)
			}
		case "startOfWeek":
			if s, _ := v.StringValueOK(); !strings.EqualFold(s, "sunday") && !strings.EqualFold(s, "sun") {
				return mongoerr.New(codeNotImplemented, "$dateTrunc's startOfWeek %s is not supported by Hourglass; weeks start on Sunday", v)
			}
		default:
			return mongoerr.New(5439007, "Unrecognized argument to $dateTrunc: %s", f.Key())
		}
	}
	units := map[string]time.Duration{"millisecond": time.Millisecond, "second": time.Second, "minute": time.Minute,
		"hour": time.Hour, "day": 24 * time.Hour, "week": 7 * 24 * time.Hour}
	u, ok := units[unit]
	switch {
	case unit == "month" || unit == "quarter" || unit == "year":
		per := map[string]int64{"month": 1, "quarter": 3, "year": 12}[unit]
		if bin > (model.MaxDateYear-model.MinDateYear)*12/per {
			return mongoerr.New(mongoerr.BadValue, "$dateTrunc binSize %d %s exceeds the range of dates", bin, unit)
		}
		g.months = bin * per
		g.origin = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		return nil
	case !ok:
		return mongoerr.New(5439014, "$dateTrunc parameter 'unit' value cannot be recognized as a time unit: %s", unit)
	case bin > math.MaxInt64/int64(u):
		return mongoerr.New(mongoerr.BadValue, "$dateTrunc binSize %d %s exceeds the range of dates", bin, unit)
	}
	g.window = time.Duration(bin) * u
	g.origin = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if unit == "week" {
		g.origin = g.origin.AddDate(0, 0, 1)
	}
	return nil
}

// groupCell gathers one field of one group.
type groupCell struct {
	count              int64
	sum, min, max      float64
	first, last        float64
	hasMinMax, hasEnds bool
}

// group is one output document of a $group being built.
type group struct {
	window int64
	meta   string
	cells  []groupCell
	docs   int64
}

// groupMeasurements runs a $group as one engine Aggregate: one row per
// (window, group), with the windows $dateTrunc names (fixed, or calendar
// months, quarters and years), or one over the whole range when _id has no
// $dateTrunc, and every group's documents counted in the same pass
// (CountDocs), also a group none of whose documents holds one of the
// fields.
func (s *Service) groupMeasurements(ctx context.Context, name string, ts *model.TimeSeriesOptions, filter *partialfilter.Filter, st Stage, archive bool) ([]map[string]any, error) {
	g, err := parseGroup(st, ts)
	if err != nil {
		return nil, err
	}
	opts := timeseries.AggregateOptions{Filter: filter, Origin: g.origin, GroupBy: g.groupBy, Ungrouped: !g.hasMeta,
		Fields: append([]string{}, g.fields...), Funcs: g.funcs(), CountDocs: true, Archive: archive}
	switch {
	case !g.hasWin:
		opts.WholeRange = true
	case g.months > 0:
		opts.Months = int(g.months)
	default:
		opts.Window = g.window
	}
	rec, err := s.Aggregate(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	groups, err := foldAggregate(rec, g)
	if err != nil {
		return nil, err
	}
	docs := make([]map[string]any, 0, len(groups))
	for _, gr := range groups {
		doc, err := g.document(gr)
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
	return docs, nil
}

// funcs are the engine's functions g's accumulators need, count always
// (a field with no value is null).
func (g *groupSpec) funcs() []timeseries.AggFunc {
	need := map[timeseries.AggFunc]bool{timeseries.AggCount: true}
	for _, a := range g.accs {
		switch a.op {
		case "$sum":
			need[timeseries.AggSum] = true
		case "$avg":
			need[timeseries.AggSum] = true
		case "$min":
			need[timeseries.AggMin] = true
		case "$max":
			need[timeseries.AggMax] = true
		case "$first":
			need[timeseries.AggFirst] = true
		case "$last":
			need[timeseries.AggLast] = true
		}
	}
	var out []timeseries.AggFunc
	for _, f := range timeseries.AllAggFuncs {
		if need[f] {
			out = append(out, f)
		}
	}
	return out
}

// foldAggregate reads the engine's rows, one group each.
func foldAggregate(rec arrow.Record, g *groupSpec) ([]*group, error) {
	cols := map[string]arrow.Array{}
	for i, f := range rec.Schema().Fields() {
		cols[f.Name] = rec.Column(i)
	}
	times, ok := rec.Column(0).(*array.Timestamp)
	if !ok {
		return nil, mongoerr.New(mongoerr.InternalError, "aggregate: the first column is %s, not the window", rec.Column(0).DataType())
	}
	var metas *array.String
	if g.hasMeta {
		if metas, ok = rec.Column(1).(*array.String); !ok {
			return nil, mongoerr.New(mongoerr.InternalError, "aggregate: the second column is %s, not the group", rec.Column(1).DataType())
		}
	}
	docs, ok := cols[timeseries.AggregateDocsColumn].(*array.Int64)
	if !ok {
		return nil, mongoerr.New(mongoerr.InternalError, "aggregate: the documents counted are missing")
	}
	type fieldCols struct {
		count                      *array.Int64
		sum, min, max, first, last *array.Float64
	}
	fc := make([]fieldCols, len(g.fields))
	for i, f := range g.fields {
		c, _ := cols[f+"_count"].(*array.Int64)
		fl := func(fn string) *array.Float64 { a, _ := cols[f+"_"+fn].(*array.Float64); return a }
		fc[i] = fieldCols{c, fl("sum"), fl("min"), fl("max"), fl("first"), fl("last")}
		if c == nil {
			return nil, mongoerr.New(mongoerr.InternalError, "aggregate: the columns of field %q are missing", f)
		}
	}
	groups := make([]*group, rec.NumRows())
	for row := range groups {
		gr := &group{window: int64(times.Value(row)), docs: docs.Value(row), cells: make([]groupCell, len(g.fields))}
		if metas != nil {
			gr.meta = metas.Value(row)
		}
		for i := range g.fields {
			c := &fc[i]
			n := c.count.Value(row)
			if n == 0 {
				continue
			}
			cell := &gr.cells[i]
			cell.count = n
			if c.sum != nil {
				cell.sum = c.sum.Value(row)
			}
			if c.min != nil && !math.IsNaN(c.min.Value(row)) {
				cell.min, cell.hasMinMax = c.min.Value(row), true
			}
			if c.max != nil && !math.IsNaN(c.max.Value(row)) {
				cell.max, cell.hasMinMax = c.max.Value(row), true
			}
			if c.first != nil {
				cell.first = c.first.Value(row)
			}
			if c.last != nil {
				cell.last = c.last.Value(row)
			}
		}
		groups[row] = gr
	}
	return groups, nil
}

// order is the field order of a group's document, as MongoDB writes it:
// _id (its fields in the spec's order), then the accumulators in the
// spec's order.
func (g *groupSpec) order() *document.Order {
	if g.ord == nil {
		g.ord = &document.Order{Keys: []string{"_id"}}
		for _, a := range g.accs {
			g.ord.Keys = append(g.ord.Keys, a.out)
		}
		if g.idKeys != nil {
			g.ord.Sub = map[string]*document.Order{"_id": {Keys: g.idKeys}}
		}
	}
	return g.ord
}

// document is the output of one group.
func (g *groupSpec) document(gr *group) (map[string]any, error) {
	out := map[string]any{fieldOrderKey: g.order()}
	var win, meta any
	if g.hasWin {
		win = time.Unix(0, gr.window).UTC()
	}
	if g.hasMeta {
		v, err := model.DecodeMeta(gr.meta)
		if err != nil {
			return nil, err
		}
		meta = v
	}
	switch {
	case g.idKeys != nil:
		id := map[string]any{}
		for _, k := range g.idKeys {
			if k == g.idWindow && g.hasWin {
				id[k] = win
			} else {
				id[k] = meta
			}
		}
		out["_id"] = id
	case g.hasWin:
		out["_id"] = win
	case g.hasMeta:
		out["_id"] = meta
	default:
		out["_id"] = g.idConst
	}
	for _, a := range g.accs {
		if a.op == "n" {
			if a.isInt {
				out[a.out] = countValue(int64(a.per) * gr.docs)
			} else {
				out[a.out] = a.per * float64(gr.docs)
			}
			continue
		}
		c := gr.cells[slices.Index(g.fields, a.field)]
		var v any
		switch {
		case a.op == "$sum":
			v = c.sum
		case c.count == 0:
			v = nil
		case a.op == "$avg":
			v = c.sum / float64(c.count)
		case a.op == "$min" && c.hasMinMax:
			v = c.min
		case a.op == "$max" && c.hasMinMax:
			v = c.max
		case a.op == "$first":
			v = c.first
		case a.op == "$last":
			v = c.last
		}
		out[a.out] = v
	}
	return out, nil
}
