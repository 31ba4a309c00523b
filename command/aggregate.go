package command

import (
	"context"
	"math"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/command/pipeline"
	"github.com/hourglassdb/hourglass/model"
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

// Stage is one stage of an aggregation pipeline as MongoDB writes it: its
// name ("$match") and its argument, a BSON value. The wire door reads
// stages as they come; the HTTP door reads a pipeline's Extended JSON
// into BSON first, so that one parser reads both.
type Stage struct {
	Name string
	Arg  bsoncore.Value
}

func (st Stage) unsupported(why string) error {
	return mongoerr.New(codeNotImplemented, "%s %s is not supported by Hourglass; aggregate runs $match, $sort, $skip, $limit, $project, $count, $setWindowFields, $fill, $densify, $set, $addFields, $unset and $group by $dateTrunc windows and the metaField", st.Name, why)
}

var supportedStages = map[string]bool{"$match": true, "$sort": true, "$skip": true, "$limit": true,
	"$project": true, "$count": true, "$group": true, "$currentOp": true, "$setWindowFields": true, "$fill": true, "$densify": true,
	"$set": true, "$addFields": true, "$unset": true}

// ParseStages reads a pipeline, a BSON array of one-field documents, and
// refuses a stage Hourglass does not run: MongoDB's unknown stage (40324),
// or one it knows that Hourglass does not support (NotImplemented), each
// naming it. The stages' arguments are checked when the pipeline runs.
func ParseStages(arr bsoncore.Document) ([]Stage, error) {
	var stages []Stage
	err := model.EachBSONElement(arr, func(_ string, e bsoncore.Value) error {
		d, ok := e.DocumentOK()
		if !ok {
			return mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		elems, _ := d.Elements()
		if len(elems) != 1 {
			return mongoerr.New(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		stages = append(stages, Stage{Name: elems[0].Key(), Arg: elems[0].Value()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, st := range stages {
		if !supportedStages[st.Name] {
			if knownStages[st.Name] {
				return nil, st.unsupported("stage")
			}
			return nil, mongoerr.New(codeUnrecognizedStage, "Unrecognized pipeline stage name: '%s'", st.Name)
		}
	}
	return stages, nil
}

// Pipeline is an aggregation pipeline on one collection, as a door
// decodes it.
type Pipeline struct {
	Collection string
	Stages     []Stage
	// MaxMemory bounds the documents a blocking stage holds (a window
	// stage that sorts, and the stages that gather documents after a
	// stream stage); beyond it the pipeline fails with MongoDB's 292.
	// 0 means the Service's Options.StageMemory.
	MaxMemory int64
	// AllowDiskUse lets the sort a window, $fill or $densify stage makes
	// of its input spill to temporary files past MaxMemory (see
	// pipeline.Options). Other blocking work stays within MaxMemory:
	// beyond it, 146 ExceededMemoryLimit (292 without AllowDiskUse).
	AllowDiskUse bool
	// Documents asks for documents always: a pipeline that is a find
	// answers Docs too (read from the find's cursor), for a door that
	// encodes every result one way. Otherwise it answers Find.
	Documents bool
	// Archive reads a time series' archived data with its live data
	// (docs/archive.md): the find, the engine's aggregate and the count
	// the pipeline runs on read both.
	Archive bool
}

// PipelineResult is what a pipeline yields: exactly one of Find and Docs.
type PipelineResult struct {
	// Find is set when the pipeline is a find (leading $match stages,
	// then $sort, $skip, $limit and $project): the door runs it as it
	// runs its finds (Service.Find), its documents in its own codec.
	Find *Find
	// Docs yields the documents otherwise, each with its field order
	// (DocOrder). A door reads them until nil, then calls Close.
	Docs  pipeline.Iterator
	close func()
}

// Close releases what the result reads (a find's cursor). Calling it
// twice is harmless.
func (r *PipelineResult) Close() {
	if r.close != nil {
		r.close()
		r.close = nil
	}
}

func docsResult(docs []pipeline.Doc) *PipelineResult {
	return &PipelineResult{Docs: pipeline.Slice(docs)}
}

// Pipeline plans and runs p. The leading $match stages are the filter; a
// $group that follows them runs on the engine's windowed aggregate
// (time-series collections), a count-only $group ({_id: <constant>, n:
// {$sum: 1}}, as countDocuments sends) anywhere on the engine's count;
// $sort, $skip, $limit and $project before them run in the find; the
// window stages stream over the find, in the engine's order when it is
// theirs (memory bounded by the window, not the collection); the stages
// after a $group or $count run on its (small) result. A missing
// collection is timeseries' NamespaceNotFound. The documents are read
// under ctx until Close: a door whose cursor outlives the request gives
// it a context of its own.
func (s *Service) Pipeline(ctx context.Context, p Pipeline) (*PipelineResult, error) {
	for _, st := range p.Stages {
		if st.Name == "$currentOp" {
			return nil, mongoerr.New(73, "$currentOp must be run against the 'admin' database with {aggregate: 1}")
		}
	}
	info, err := s.db.DescribeShallow(ctx, p.Collection)
	if err != nil {
		return nil, err
	}
	if p.Archive && info.Options.TimeSeries == nil {
		return nil, mongoerr.New(mongoerr.BadValue, "'archive' reads a time-series collection's archive; %q is a plain collection", p.Collection)
	}
	if p.MaxMemory <= 0 {
		p.MaxMemory = s.opts.StageMemory
	}
	// The files a sort spills close with the result, also when the door
	// gives it up before its end.
	spills := &pipeline.Spills{}
	res, err := s.aggregateCollection(ctx, p.Collection, info, p.Stages, pipeline.Options{MaxMemory: p.MaxMemory, AllowDiskUse: p.AllowDiskUse, Spills: spills}, p.Archive)
	if err != nil {
		spills.Close()
		return nil, err
	}
	if res.Find != nil && p.Documents {
		cur, err := s.Find(ctx, *res.Find)
		if err != nil {
			return nil, err
		}
		res = &PipelineResult{Docs: &cursorDocs{cur: cur}, close: func() { cur.Close() }}
	}
	if p.AllowDiskUse {
		closeIn := res.close
		res.close = func() {
			if closeIn != nil {
				closeIn()
			}
			spills.Close()
		}
	}
	return res, nil
}

// aggregateCollection runs a pipeline on a collection.
func (s *Service) aggregateCollection(ctx context.Context, name string, info timeseries.CollectionInfo, stages []Stage, mem pipeline.Options, archive bool) (*PipelineResult, error) {
	// The leading $match stages: the filter.
	var matches []any
	i := 0
	for ; i < len(stages) && stages[i].Name == "$match"; i++ {
		m, err := stageDocument(stages[i])
		if err != nil {
			return nil, err
		}
		if len(m) > 0 {
			matches = append(matches, m)
		}
	}
	var filterDoc pipeline.Doc
	switch len(matches) {
	case 0:
	case 1:
		filterDoc = matches[0].(pipeline.Doc)
	default:
		filterDoc = pipeline.Doc{"$and": matches}
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
	if i < len(stages) && stages[i].Name == "$group" && !isCountGroup(stages[i]) {
		if ts == nil {
			return nil, stages[i].unsupported("on a collection that is not a time-series collection (other than a count: {_id: null, n: {$sum: 1}})")
		}
		docs, err := s.groupMeasurements(ctx, name, ts, filter, stages[i], archive)
		if err != nil {
			return nil, err
		}
		docs, err = runInMemory(docs, stages[i+1:])
		if err != nil {
			return nil, err
		}
		return docsResult(docs), nil
	}
	// A find: $sort, $skip, $limit and $project, then perhaps a count.
	a := Find{Collection: name, Filter: filter, ExactTypes: true, Archive: archive}
	empty := false
	for ; i < len(stages); i++ {
		st := stages[i]
		switch st.Name {
		case "$sort":
			if a.Sort != nil || a.Skip > 0 || a.Limit > 0 || a.Projection != nil {
				return nil, st.unsupported("after $sort, $skip, $limit or $project (before a $group)")
			}
			keys, err := sortKeys(st)
			if err != nil {
				return nil, err
			}
			a.Sort = keys
			continue
		case "$skip", "$limit":
			n, ok := st.Arg.AsInt64OK()
			if !ok || n < 0 || (st.Name == "$limit" && n == 0) {
				return nil, mongoerr.New(mongoerr.BadValue, "%s must be a positive integer; got %s", st.Name, st.Arg)
			}
			if st.Name == "$skip" {
				if a.Limit > 0 {
					if n >= a.Limit {
						empty = true
					}
					a.Limit -= n
				}
				a.Skip += n
			} else if a.Limit == 0 || n < a.Limit {
				a.Limit = n
			}
			continue
		case "$project":
			if a.Projection != nil {
				return nil, st.unsupported("twice (before a $group)")
			}
			m, err := stageDocument(st)
			if err != nil {
				return nil, err
			}
			a.Projection = m
			continue
		case "$match":
			return nil, st.unsupported("after $sort, $skip, $limit or $project")
		}
		break
	}
	if i < len(stages) && (stages[i].Name == "$count" || stages[i].Name == "$group") {
		st := stages[i]
		if st.Name == "$group" && !isCountGroup(st) {
			return nil, st.unsupported("after $sort, $skip, $limit or $project (other than a count: {_id: null, n: {$sum: 1}})")
		}
		var n int64
		if !empty {
			var err error
			n, err = s.Count(ctx, name, filter, timeseries.CountOptions{Skip: a.Skip, Limit: a.Limit, Archive: archive})
			if err != nil {
				return nil, err
			}
		}
		var docs []pipeline.Doc
		if st.Name == "$count" {
			field, ok := st.Arg.StringValueOK()
			if !ok || field == "" || strings.HasPrefix(field, "$") || strings.Contains(field, ".") {
				return nil, mongoerr.New(40156, "the count field must be a non-empty string, not starting with '$' nor holding '.'")
			}
			if n > 0 {
				docs = []pipeline.Doc{{field: countValue(n)}}
			}
		} else {
			g, err := countGroupDocument(st, n)
			if err != nil {
				return nil, err
			}
			if n > 0 {
				docs = []pipeline.Doc{g}
			}
		}
		docs, err := runInMemory(docs, stages[i+1:])
		if err != nil {
			return nil, err
		}
		return docsResult(docs), nil
	}
	if i < len(stages) && streamStages[stages[i].Name] {
		return s.streamCollection(ctx, info, &a, empty, stages[i:], mem)
	}
	if i < len(stages) {
		return nil, stages[i].unsupported("after $sort, $skip, $limit or $project")
	}
	if empty {
		return docsResult(nil), nil
	}
	return &PipelineResult{Find: &a}, nil
}

func countValue(n int64) any {
	if n <= math.MaxInt32 {
		return int32(n)
	}
	return n
}

// stageDocument decodes a stage's document argument.
func stageDocument(st Stage) (pipeline.Doc, error) {
	d, ok := st.Arg.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "the %s stage specification must be an object", st.Name)
	}
	return model.FromBSON(d)
}

// sortKeys reads a $sort in its order.
func sortKeys(st Stage) ([]timeseries.SortKey, error) {
	d, ok := st.Arg.DocumentOK()
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

// stageFilter parses a $match stage's filter.
func stageFilter(st Stage) (*partialfilter.Filter, error) {
	m, err := stageDocument(st)
	if err != nil {
		return nil, err
	}
	return partialfilter.Parse(m)
}

// runInMemory runs the stages that follow a $group, $count or $currentOp
// on their result.
func runInMemory(docs []pipeline.Doc, stages []Stage) ([]pipeline.Doc, error) {
	for _, st := range stages {
		switch st.Name {
		case "$match":
			f, err := stageFilter(st)
			if err != nil {
				return nil, err
			}
			docs = slices.DeleteFunc(docs, func(d pipeline.Doc) bool { return !f.Match(d) })
		case "$sort":
			keys, err := sortKeys(st)
			if err != nil {
				return nil, err
			}
			slices.SortStableFunc(docs, func(a, b pipeline.Doc) int {
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
			n, ok := st.Arg.AsInt64OK()
			if !ok || n < 0 || (st.Name == "$limit" && n == 0) {
				return nil, mongoerr.New(mongoerr.BadValue, "%s must be a positive integer; got %s", st.Name, st.Arg)
			}
			if st.Name == "$skip" {
				docs = docs[min(n, int64(len(docs))):]
			} else {
				docs = docs[:min(n, int64(len(docs)))]
			}
		case "$count":
			field, ok := st.Arg.StringValueOK()
			if !ok || field == "" || strings.HasPrefix(field, "$") || strings.Contains(field, ".") {
				return nil, mongoerr.New(40156, "the count field must be a non-empty string, not starting with '$' nor holding '.'")
			}
			if len(docs) == 0 {
				continue
			}
			docs = []pipeline.Doc{{field: countValue(int64(len(docs)))}}
		case "$project":
			m, err := stageDocument(st)
			if err != nil {
				return nil, err
			}
			if docs, err = projectInMemory(docs, m); err != nil {
				return nil, err
			}
		case "$setWindowFields", "$fill", "$densify", "$set", "$addFields", "$unset":
			it, _, err := streamStagesOver(pipeline.Slice(docs), []Stage{st}, false, pipeline.Options{})
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
func projectInMemory(docs []pipeline.Doc, p pipeline.Doc) ([]pipeline.Doc, error) {
	in, out := map[string]bool{}, map[string]bool{}
	for f, v := range p {
		on, ok := truth(v) // as a find's projection reads its values
		if !ok {
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
		n := pipeline.Doc{}
		for k, v := range d {
			keep := !out[k]
			// An inclusion keeps the document's order, as MongoDB's does.
			if len(in) > 0 && k != "_id" && k != fieldOrderKey {
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

func lookupPath(d pipeline.Doc, path string) any {
	var v any = d
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(pipeline.Doc)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}
