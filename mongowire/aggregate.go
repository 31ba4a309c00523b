package mongowire

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/command/pipeline"
	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// MongoDB's codes of the aggregation framework (named Location<code>).
const (
	codeUnrecognizedStage mongoerr.Code = 40324
	codeUnknownGroupOp    mongoerr.Code = 15952
	codeNotImplemented                  = mongoerr.NotImplemented
)

// knownStages are MongoDB's stage names that Hourglass does not run: they
// are refused as not supported rather than as unknown.
var knownStages = map[string]bool{"$bucket": true, "$bucketAuto": true, "$changeStream": true,
	"$collStats": true, "$facet": true, "$geoNear": true, "$graphLookup": true,
	"$indexStats": true, "$lookup": true, "$merge": true, "$out": true, "$redact": true, "$replaceRoot": true,
	"$replaceWith": true, "$sample": true, "$search": true,
	"$sortByCount": true, "$unionWith": true, "$unwind": true, "$documents": true,
	"$listSessions": true, "$planCacheStats": true}

// stage is one stage of a pipeline: its name and its argument.
type stage struct {
	name string
	arg  bsoncore.Value
}

func (st stage) unsupported(why string) error {
	return mongoerr.New(codeNotImplemented, "%s %s is not supported by Hourglass; aggregate runs $match, $sort, $skip, $limit, $project, $count, $setWindowFields, $fill, $densify, $set, $addFields, $unset and $group by $dateTrunc windows and the metaField", st.name, why)
}

// aggregateOptionsIgnored are aggregate's fields that change nothing here.
var aggregateOptionsIgnored = map[string]bool{"allowDiskUse": true, "hint": true, "bypassDocumentValidation": true}

func parsePipeline(cmd *wireCommand) ([]stage, int64, error) {
	batchSize := int64(-1)
	var pipeline []stage
	sawCursor := false
	err := model.EachBSONElement(cmd.body, func(key string, v bsoncore.Value) error {
		switch {
		case key == cmd.name || genericFields[key]:
		case key == "pipeline":
			arr, ok := v.ArrayOK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "'pipeline' option must be specified as an array")
			}
			return model.EachBSONElement(bsoncore.Document(arr), func(_ string, e bsoncore.Value) error {
				d, ok := e.DocumentOK()
				if !ok {
					return mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
				}
				elems, _ := d.Elements()
				if len(elems) != 1 {
					return mongoerr.New(40323, "A pipeline stage specification object must contain exactly one field.")
				}
				pipeline = append(pipeline, stage{name: elems[0].Key(), arg: elems[0].Value()})
				return nil
			})
		case key == "cursor":
			d, ok := v.DocumentOK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "cursor field must be missing or an object")
			}
			sawCursor = true
			if bv, err := d.LookupErr("batchSize"); err == nil {
				n, ok := bv.AsInt64OK()
				if !ok || n < 0 {
					return mongoerr.New(mongoerr.BadValue, "'cursor.batchSize' must be a non-negative integer")
				}
				batchSize = n
			}
		case key == "explain":
			return mongoerr.New(codeNotImplemented, "aggregate with explain is not supported by Hourglass")
		case !aggregateOptionsIgnored[key]:
			return mongoerr.New(unknownField, "BSON field 'aggregate.%s' is an unknown field; Hourglass supports pipeline and cursor", key)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if !sawCursor {
		return nil, 0, mongoerr.New(mongoerr.FailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	}
	for _, st := range pipeline {
		if !supportedStages[st.name] {
			if knownStages[st.name] {
				return nil, 0, st.unsupported("stage")
			}
			return nil, 0, mongoerr.New(codeUnrecognizedStage, "Unrecognized pipeline stage name: '%s'", st.name)
		}
	}
	return pipeline, batchSize, nil
}

var supportedStages = map[string]bool{"$match": true, "$sort": true, "$skip": true, "$limit": true,
	"$project": true, "$count": true, "$group": true, "$currentOp": true, "$setWindowFields": true, "$fill": true, "$densify": true,
	"$set": true, "$addFields": true, "$unset": true}

// cmdAggregate is aggregate. On a collection, the leading $match stages
// are its filter; a $group that follows them runs on the engine's windowed
// aggregate (time-series collections), a count-only $group ({_id: <constant>,
// n: {$sum: 1}}, as countDocuments sends) anywhere on the engine's count;
// $sort, $skip, $limit and $project before them run in the find; the stages
// after a $group or $count run on its (small) result. On admin,
// aggregate: 1 runs $currentOp, and the collection atlascli is empty.
func cmdAggregate(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	pipeline, batchSize, err := parsePipeline(cmd)
	if err != nil {
		return nil, err
	}
	v, _ := cmd.body.LookupErr(cmd.name)
	if _, isName := v.StringValueOK(); !isName || cmd.db == "admin" {
		return s.aggregateDatabase(cmd, pipeline, batchSize)
	}
	name, err := cmd.collectionName()
	if err != nil {
		return nil, err
	}
	ns := cmd.db + "." + name
	for _, st := range pipeline {
		if st.name == "$currentOp" {
			return nil, mongoerr.New(73, "$currentOp must be run against the 'admin' database with {aggregate: 1}")
		}
	}
	info, err := s.db.DescribeShallow(cmd.ctx, name)
	if isNotFound(err) {
		return cursorReply(0, ns, "firstBatch", bson.A{}), nil
	}
	if err != nil {
		return nil, err
	}
	src, err := s.aggregateCollection(cmd.ctx, name, info, pipeline)
	if err != nil {
		return nil, err
	}
	return s.firstBatch(cmd.conn, ns, src, batchSize, false)
}

// aggregateDatabase answers aggregate: 1 and aggregates on admin: the
// $currentOp stage, and mongosh's look-up of Atlas CLI deployments (the
// collection atlascli, which this server does not have).
func (s *Server) aggregateDatabase(cmd *wireCommand, pipeline []stage, batchSize int64) (bson.D, error) {
	ns := cmd.db + ".$cmd.aggregate"
	if v, _ := cmd.body.LookupErr(cmd.name); v.Type == bsoncore.TypeString {
		// A collection of admin: none holds documents.
		return cursorReply(0, cmd.db+"."+v.StringValue(), "firstBatch", bson.A{}), nil
	}
	if len(pipeline) == 0 || pipeline[0].name != "$currentOp" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "{aggregate: 1} runs $currentOp only; name a collection to aggregate")
	}
	if cmd.db != "admin" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "$currentOp must be run against the 'admin' database with {aggregate: 1}")
	}
	if _, ok := pipeline[0].arg.DocumentOK(); !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "$currentOp options must be specified in an object")
	}
	docs, err := runInMemory(s.currentOps(), pipeline[1:])
	if err != nil {
		return nil, err
	}
	return s.firstBatch(cmd.conn, ns, &sliceSource{docs: docs}, batchSize, false)
}

// firstBatch answers the first batch of src, keeping a cursor open for
// the rest.
func (s *Server) firstBatch(conn int64, ns string, src source, n int64, single bool) (bson.D, error) {
	if n < 0 {
		n = defaultFirstBatch
	}
	b := newBatchReply(nil, "firstBatch")
	if n == 0 {
		// MongoDB's batchSize 0: an empty first batch and an open cursor,
		// whose first getMore reads (a single batch of none ends there).
		if single {
			src.close()
			return rawReply(b.finish(0, ns)), nil
		}
		id, err := s.cursors.add(ns, src, nil, conn)
		if err != nil {
			src.close()
			return nil, err
		}
		return rawReply(b.finish(id, ns)), nil
	}
	pending, done, err := b.fill(src, nil, n)
	if err != nil {
		src.close()
		return nil, err
	}
	if done || single {
		src.close()
		return rawReply(b.finish(0, ns)), nil
	}
	id, err := s.cursors.add(ns, src, pending, conn)
	if err != nil {
		src.close()
		return nil, err
	}
	return rawReply(b.finish(id, ns)), nil
}

// aggregateCollection runs a pipeline on a collection.
func (s *Server) aggregateCollection(ctx context.Context, name string, info timeseries.CollectionInfo, pipeline []stage) (source, error) {
	// The leading $match stages: the filter.
	var matches []any
	i := 0
	for ; i < len(pipeline) && pipeline[i].name == "$match"; i++ {
		m, err := stageDocument(pipeline[i])
		if err != nil {
			return nil, err
		}
		if len(m) > 0 {
			matches = append(matches, m)
		}
	}
	var filterDoc map[string]any
	switch len(matches) {
	case 0:
	case 1:
		filterDoc = matches[0].(map[string]any)
	default:
		filterDoc = map[string]any{"$and": matches}
	}
	var filter *partialfilter.Filter
	if filterDoc != nil {
		f, err := partialfilter.Parse(filterDoc)
		if err != nil {
			return nil, err
		}
		filter = f
	}
	ts := info.Options.TimeSeries
	if i < len(pipeline) && pipeline[i].name == "$group" && !isCountGroup(pipeline[i]) {
		if ts == nil {
			return nil, pipeline[i].unsupported("on a collection that is not a time-series collection (other than a count: {_id: null, n: {$sum: 1}})")
		}
		docs, err := s.groupMeasurements(ctx, name, ts, filter, pipeline[i])
		if err != nil {
			return nil, err
		}
		docs, err = runInMemory(docs, pipeline[i+1:])
		if err != nil {
			return nil, err
		}
		return &sliceSource{docs: docs}, nil
	}
	// A find: $sort, $skip, $limit and $project, then perhaps a count.
	a := findArgs{filter: filterDoc, batchSize: -1}
	empty := false
	for ; i < len(pipeline); i++ {
		st := pipeline[i]
		switch st.name {
		case "$sort":
			if a.sort != nil || a.skip > 0 || a.limit > 0 || a.projection != nil {
				return nil, st.unsupported("after $sort, $skip, $limit or $project (before a $group)")
			}
			keys, err := sortKeys(st)
			if err != nil {
				return nil, err
			}
			a.sort = keys
			continue
		case "$skip", "$limit":
			n, ok := st.arg.AsInt64OK()
			if !ok || n < 0 || (st.name == "$limit" && n == 0) {
				return nil, mongoerr.New(mongoerr.BadValue, "%s must be a positive integer; got %s", st.name, st.arg)
			}
			if st.name == "$skip" {
				if a.limit > 0 {
					if n >= a.limit {
						empty = true
					}
					a.limit -= n
				}
				a.skip += n
			} else if a.limit == 0 || n < a.limit {
				a.limit = n
			}
			continue
		case "$project":
			if a.projection != nil {
				return nil, st.unsupported("twice (before a $group)")
			}
			m, err := stageDocument(st)
			if err != nil {
				return nil, err
			}
			a.projection = m
			continue
		case "$match":
			return nil, st.unsupported("after $sort, $skip, $limit or $project")
		}
		break
	}
	if i < len(pipeline) && (pipeline[i].name == "$count" || pipeline[i].name == "$group") {
		st := pipeline[i]
		if st.name == "$group" && !isCountGroup(st) {
			return nil, st.unsupported("after $sort, $skip, $limit or $project (other than a count: {_id: null, n: {$sum: 1}})")
		}
		var n int64
		if !empty {
			var err error
			if n, err = s.cmd.Count(ctx, name, filter, timeseries.CountOptions{Skip: a.skip, Limit: a.limit}); err != nil {
				return nil, err
			}
		}
		var docs []map[string]any
		if st.name == "$count" {
			field, ok := st.arg.StringValueOK()
			if !ok || field == "" || strings.HasPrefix(field, "$") || strings.Contains(field, ".") {
				return nil, mongoerr.New(40156, "the count field must be a non-empty string, not starting with '$' nor holding '.'")
			}
			if n > 0 {
				docs = []map[string]any{{field: countValue(n)}}
			}
		} else {
			g, err := countGroupDocument(st, n)
			if err != nil {
				return nil, err
			}
			if n > 0 {
				docs = []map[string]any{g}
			}
		}
		docs, err := runInMemory(docs, pipeline[i+1:])
		if err != nil {
			return nil, err
		}
		return &sliceSource{docs: docs}, nil
	}
	if i < len(pipeline) && streamStages[pipeline[i].name] {
		return s.streamCollection(ctx, name, info, filter, &a, empty, pipeline[i:])
	}
	if i < len(pipeline) {
		return nil, pipeline[i].unsupported("after $sort, $skip, $limit or $project")
	}
	if empty {
		return &sliceSource{}, nil
	}
	return s.find(name, filter, &a)
}

func countValue(n int64) any {
	if n <= math.MaxInt32 {
		return int32(n)
	}
	return n
}

// stageDocument decodes a stage's document argument.
func stageDocument(st stage) (map[string]any, error) {
	d, ok := st.arg.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "the %s stage specification must be an object", st.name)
	}
	return model.FromBSON(d)
}

// sortKeys reads a $sort in its order.
func sortKeys(st stage) ([]timeseries.SortKey, error) {
	d, ok := st.arg.DocumentOK()
	if !ok {
		return nil, mongoerr.New(15973, "the $sort key specification must be an object")
	}
	var keys []timeseries.SortKey
	err := model.EachBSONElement(d, func(key string, e bsoncore.Value) error {
		dir, ok := e.AsInt64OK()
		if !ok || (dir != 1 && dir != -1) {
			return mongoerr.New(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending); got '%s'", key)
		}
		keys = append(keys, timeseries.SortKey{Field: key, Desc: dir < 0})
		return nil
	})
	if err == nil && len(keys) == 0 {
		err = mongoerr.New(15976, "$sort stage must have at least one sort key")
	}
	return keys, err
}

// isCountGroup tells a $group of one group that only counts: {_id:
// <constant>, <name>: {$sum: 1} or {$count: {}}, ...}.
func isCountGroup(st stage) bool {
	d, ok := st.arg.DocumentOK()
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
func countGroupDocument(st stage, n int64) (map[string]any, error) {
	d, _ := st.arg.DocumentOK()
	out := map[string]any{}
	elems, _ := d.Elements()
	for _, e := range elems {
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
}

type accumulator struct {
	out   string
	op    string // $min, $max, $avg, $sum, $first, $last, or "n" (documents counted)
	field string
	per   float64 // "n": what each document adds
	isInt bool    // "n": the sum is an integer
}

// parseGroup reads a $group on a time-series collection.
func parseGroup(st stage, ts *model.TimeSeriesOptions) (*groupSpec, error) {
	d, ok := st.arg.DocumentOK()
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
func (s *Server) groupMeasurements(ctx context.Context, name string, ts *model.TimeSeriesOptions, filter *partialfilter.Filter, st stage) ([]map[string]any, error) {
	g, err := parseGroup(st, ts)
	if err != nil {
		return nil, err
	}
	opts := timeseries.AggregateOptions{Filter: filter, Origin: g.origin, GroupBy: g.groupBy, Ungrouped: !g.hasMeta,
		Fields: append([]string{}, g.fields...), Funcs: g.funcs(), CountDocs: true}
	switch {
	case !g.hasWin:
		opts.WholeRange = true
	case g.months > 0:
		opts.Months = int(g.months)
	default:
		opts.Window = g.window
	}
	rec, err := s.cmd.Aggregate(ctx, name, opts)
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

// document is the output of one group.
func (g *groupSpec) document(gr *group) (map[string]any, error) {
	out := map[string]any{}
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

// sliceSource yields documents held in memory.
type sliceSource struct {
	docs []map[string]any
}

func (s *sliceSource) next() (bsoncore.Document, error) {
	if len(s.docs) == 0 {
		return nil, nil
	}
	d := mapDocument(s.docs[0])
	s.docs = s.docs[1:]
	return d, nil
}

func (s *sliceSource) close() { s.docs = nil }

// stageFilter parses a $match stage's filter.
func stageFilter(st stage) (*partialfilter.Filter, error) {
	m, err := stageDocument(st)
	if err != nil {
		return nil, err
	}
	return partialfilter.Parse(m)
}

// runInMemory runs the stages that follow a $group, $count or $currentOp
// on their result.
func runInMemory(docs []map[string]any, stages []stage) ([]map[string]any, error) {
	for _, st := range stages {
		switch st.name {
		case "$match":
			f, err := stageFilter(st)
			if err != nil {
				return nil, err
			}
			docs = slices.DeleteFunc(docs, func(d map[string]any) bool { return !f.Match(d) })
		case "$sort":
			keys, err := sortKeys(st)
			if err != nil {
				return nil, err
			}
			slices.SortStableFunc(docs, func(a, b map[string]any) int {
				for _, k := range keys {
					c := partialfilter.Compare(lookupPath(a, k.Field), lookupPath(b, k.Field))
					if k.Desc {
						c = -c
					}
					if c != 0 {
						return c
					}
				}
				return 0
			})
		case "$skip", "$limit":
			n, ok := st.arg.AsInt64OK()
			if !ok || n < 0 || (st.name == "$limit" && n == 0) {
				return nil, mongoerr.New(mongoerr.BadValue, "%s must be a positive integer; got %s", st.name, st.arg)
			}
			if st.name == "$skip" {
				docs = docs[min(n, int64(len(docs))):]
			} else {
				docs = docs[:min(n, int64(len(docs)))]
			}
		case "$count":
			field, ok := st.arg.StringValueOK()
			if !ok || field == "" || strings.HasPrefix(field, "$") || strings.Contains(field, ".") {
				return nil, mongoerr.New(40156, "the count field must be a non-empty string, not starting with '$' nor holding '.'")
			}
			if len(docs) == 0 {
				continue
			}
			docs = []map[string]any{{field: countValue(int64(len(docs)))}}
		case "$project":
			m, err := stageDocument(st)
			if err != nil {
				return nil, err
			}
			if docs, err = projectInMemory(docs, m); err != nil {
				return nil, err
			}
		case "$setWindowFields", "$fill", "$densify", "$set", "$addFields", "$unset":
			it, _, err := streamStagesOver(pipeline.Slice(docs), []stage{st}, false, 0)
			if err != nil {
				return nil, err
			}
			if docs, err = pipeline.Collect(it); err != nil {
				return nil, err
			}
		default:
			return nil, st.unsupported("after $group, $count or $currentOp")
		}
	}
	return docs, nil
}

// projectInMemory applies a projection of top-level fields.
func projectInMemory(docs []map[string]any, p map[string]any) ([]map[string]any, error) {
	in, out := map[string]bool{}, map[string]bool{}
	for f, v := range p {
		var on bool
		switch x := v.(type) {
		case bool:
			on = x
		case int32:
			on = x != 0
		case int64:
			on = x != 0
		case float64:
			on = x != 0
		default:
			return nil, mongoerr.New(codeNotImplemented, "$project of '%s' must be 0, 1, true or false in Hourglass; expressions are not supported", f)
		}
		if strings.Contains(f, ".") {
			return nil, mongoerr.New(codeNotImplemented, "$project of the sub-field '%s' is not supported by Hourglass", f)
		}
		if on {
			in[f] = true
		} else {
			out[f] = true
		}
	}
	delete(in, "_id")
	if len(in) > 0 && len(out) > 0 && !(len(out) == 1 && out["_id"]) {
		return nil, mongoerr.New(31254, "Cannot do exclusion in inclusion projection")
	}
	for i, d := range docs {
		n := map[string]any{}
		for k, v := range d {
			keep := !out[k]
			if len(in) > 0 && k != "_id" {
				keep = in[k]
			}
			if keep {
				n[k] = v
			}
		}
		docs[i] = n
	}
	return docs, nil
}

func lookupPath(d map[string]any, path string) any {
	var v any = d
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}
