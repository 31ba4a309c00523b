package command

import (
	"context"
	"slices"

	"github.com/hourglassdb/hourglass/command/pipeline"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// streamStages are the stages that run on a stream of documents
// (package command/pipeline), after a find.
var streamStages = map[string]bool{"$setWindowFields": true, "$fill": true, "$densify": true, "$set": true, "$addFields": true, "$unset": true}

// stageArg decodes a stage's argument to the values pipeline reads.
func stageArg(st Stage) (any, error) {
	return model.ValueFromBSON(st.Name, st.Arg, 0)
}

// streamCollection runs the stages from stages[0] (a stream stage) on
// the find a, then the stages after them on their result: $match, $skip,
// $limit and $project document by document, anything else on the
// documents gathered.
func (s *Service) streamCollection(ctx context.Context, info timeseries.CollectionInfo, a *Find, empty bool, stages []Stage, mem pipeline.Options) (*PipelineResult, error) {
	first, err := stageArg(stages[0])
	if err != nil {
		return nil, err
	}
	var sorted bool
	var parts []string
	switch stages[0].Name {
	case "$setWindowFields":
		spec, err := pipeline.ParseSetWindowFields(first)
		if err != nil {
			return nil, err
		}
		if spec.PartitionBy != "" {
			parts = []string{spec.PartitionBy}
		}
		sorted = orderFind(info, parts, spec.SortBy, a)
	case "$fill":
		spec, err := pipeline.ParseFill(first)
		if err != nil {
			return nil, err
		}
		parts = spec.PartitionBy
		sorted = orderFind(info, parts, spec.SortBy, a)
	case "$densify":
		spec, err := pipeline.ParseDensify(first)
		if err != nil {
			return nil, err
		}
		parts = spec.PartitionBy
		sorted = orderFind(info, parts, []pipeline.SortKey{{Field: spec.Field}}, a)
	}
	if sorted && len(parts) == 1 {
		// Series by series is partition by partition only when no two
		// series' meta values are one partition (1 and 1.0 are two
		// series, one value): then the stage sorts.
		if sorted, err = s.MetaValuesDistinct(ctx, a.Collection, a.Filter); err != nil {
			return nil, err
		}
	}
	var in pipeline.Iterator = pipeline.Slice(nil)
	closeIn := func() {}
	if !empty {
		cur, err := s.Find(ctx, *a)
		if err != nil {
			return nil, err
		}
		in, closeIn = &cursorDocs{cur: cur}, func() { cur.Close() }
	}
	it, rest, err := streamStagesOver(in, stages, sorted, mem)
	if err != nil {
		closeIn()
		return nil, err
	}
	if it, err = tailStages(it, rest, mem); err != nil {
		closeIn()
		return nil, err
	}
	return &PipelineResult{Docs: it, close: closeIn}, nil
}

// orderFind makes the find give a stage partitioned by parts and sorted
// by sortBy its input in order when it can, and
// tells whether it does: on a time series, the engine's order by series
// (each series together, in ascending time) is partitionBy the metaField
// and sortBy the timeField ascending, and its time order is sortBy the
// timeField without partitionBy (asked for when no $skip or $limit comes
// before, or given by a $sort before). A plain collection's sort holds
// every document as the stage's own would, and may order arrays as the
// stage does not: the stage sorts.
func orderFind(info timeseries.CollectionInfo, parts []string, sortBy []pipeline.SortKey, a *Find) bool {
	if len(sortBy) == 0 {
		return len(parts) == 0
	}
	ts := info.Options.TimeSeries
	key := timeseries.SortKey{Field: sortBy[0].Field, Desc: sortBy[0].Desc}
	if ts == nil || key.Field != ts.TimeField || len(parts) > 1 {
		return false
	}
	if len(parts) == 1 {
		return ts.MetaField != "" && parts[0] == ts.MetaField && !key.Desc && a.Sort == nil
	}
	if a.Sort == nil && a.Skip == 0 && a.Limit == 0 {
		a.Sort = []timeseries.SortKey{key}
	}
	return slices.Equal(a.Sort, []timeseries.SortKey{key})
}

// streamStagesOver wraps it in the leading stream stages and returns the
// stages after them. sorted tells that it comes in the first stage's
// order; mem bounds each stage (MaxMemory, AllowDiskUse).
func streamStagesOver(it pipeline.Iterator, stages []Stage, sorted bool, mem pipeline.Options) (pipeline.Iterator, []Stage, error) {
	opts := func(sorted bool) pipeline.Options {
		o := mem
		o.Sorted = sorted
		return o
	}
	var last *pipeline.WindowSpec
	i := 0
	for ; i < len(stages) && streamStages[stages[i].Name]; i++ {
		arg, err := stageArg(stages[i])
		if err != nil {
			return nil, nil, err
		}
		switch stages[i].Name {
		case "$setWindowFields":
			spec, err := pipeline.ParseSetWindowFields(arg)
			if err != nil {
				return nil, nil, err
			}
			// A window stage's output is in its partition and sortBy
			// order: a second one of the same order reads it as it is.
			inOrder := sorted && i == 0 || last != nil && last.PartitionBy == spec.PartitionBy && slices.Equal(last.SortBy, spec.SortBy)
			it = pipeline.SetWindowFields(it, spec, opts(inOrder))
			it = addedFieldOrder(it, specOrder(stages[i].Arg, "output", false))
			last = spec
		case "$fill":
			spec, err := pipeline.ParseFill(arg)
			if err != nil {
				return nil, nil, err
			}
			it, last = pipeline.Fill(it, spec, opts(sorted && i == 0)), nil
			it = addedFieldOrder(it, specOrder(stages[i].Arg, "output", false))
		case "$densify":
			spec, err := pipeline.ParseDensify(arg)
			if err != nil {
				return nil, nil, err
			}
			it, last = pipeline.Densify(it, spec, opts(sorted && i == 0)), nil
		case "$set", "$addFields":
			fields, err := pipeline.ParseSet(stages[i].Name, arg)
			if err != nil {
				return nil, nil, err
			}
			// It may change the fields a window stage orders by.
			it, last, sorted = pipeline.Set(it, fields), nil, false
			it = addedFieldOrder(it, specOrder(stages[i].Arg, "", true))
		case "$unset":
			paths, err := pipeline.ParseUnset(arg)
			if err != nil {
				return nil, nil, err
			}
			it, last, sorted = pipeline.Unset(it, paths), nil, false
		}
	}
	return it, stages[i:], nil
}

// tailStages runs the stages after the stream stages: $match, $skip,
// $limit and $project document by document; from the first other stage
// on, over the documents gathered (within mem.MaxMemory, 0: the
// default; these are not spilled, allowDiskUse or not).
func tailStages(it pipeline.Iterator, rest []Stage, mem pipeline.Options) (pipeline.Iterator, error) {
	maxMemory := mem.MaxMemory
	if maxMemory <= 0 {
		maxMemory = pipeline.DefaultMaxMemory
	}
	t := &tailIterator{in: it, max: maxMemory, disk: mem.AllowDiskUse}
	for i, st := range rest {
		switch st.Name {
		case "$match":
			f, err := stageFilter(st)
			if err != nil {
				return nil, err
			}
			t.steps = append(t.steps, func(d pipeline.Doc) (pipeline.Doc, bool, bool) { return d, f.Match(d), false })
		case "$project":
			m, err := stageDocument(st)
			if err != nil {
				return nil, err
			}
			if _, err := projectInMemory(nil, m); err != nil {
				return nil, err
			}
			t.steps = append(t.steps, func(d pipeline.Doc) (pipeline.Doc, bool, bool) {
				out, _ := projectInMemory([]pipeline.Doc{d}, m)
				return out[0], true, false
			})
		case "$skip", "$limit":
			n, ok := st.Arg.AsInt64OK()
			if !ok || n < 0 || (st.Name == "$limit" && n == 0) {
				return nil, mongoerr.New(mongoerr.BadValue, "%s must be a positive integer; got %s", st.Name, st.Arg)
			}
			var seen int64
			if st.Name == "$skip" {
				t.steps = append(t.steps, func(d pipeline.Doc) (pipeline.Doc, bool, bool) { seen++; return d, seen > n, false })
			} else {
				t.steps = append(t.steps, func(d pipeline.Doc) (pipeline.Doc, bool, bool) { seen++; return d, true, seen >= n })
			}
		default:
			t.rest = rest[i:]
			return t, nil
		}
	}
	return t, nil
}

// step is a per-document stage: the document it passes on, whether it
// does, and whether no document may follow (a $limit reached).
type step func(pipeline.Doc) (pipeline.Doc, bool, bool)

// tailIterator applies per-document steps, then perhaps in-memory stages.
type tailIterator struct {
	in    pipeline.Iterator
	steps []step
	rest  []Stage // stages run over the documents gathered
	max   int64   // the memory of the documents gathered
	disk  bool    // allowDiskUse: past max is 146, not 292
	docs  []pipeline.Doc
	ran   bool
	done  bool
}

func (t *tailIterator) Next() (pipeline.Doc, error) {
	if t.rest == nil {
		return t.nextStreamed()
	}
	if !t.ran {
		t.ran = true
		var all []pipeline.Doc
		var mem int64
		for {
			d, err := t.nextStreamed()
			if err != nil {
				return nil, err
			}
			if d == nil {
				break
			}
			if mem += pipeline.Size(d); mem > t.max {
				if t.disk {
					// MongoDB would spill here; Hourglass does not.
					return nil, mongoerr.New(mongoerr.ExceededMemoryLimit, "the stages after a stream stage exceeded the memory limit of %d bytes; Hourglass spills only a window, $fill or $densify stage's sort to disk, not the documents gathered after it", t.max)
				}
				return nil, mongoerr.New(292, "the stages after a stream stage exceeded the memory limit of %d bytes, but did not opt in to external sorting", t.max)
			}
			all = append(all, d)
		}
		var err error
		if t.docs, err = runInMemory(all, t.rest); err != nil {
			return nil, err
		}
	}
	if len(t.docs) == 0 {
		return nil, nil
	}
	d := t.docs[0]
	t.docs = t.docs[1:]
	return d, nil
}

// nextStreamed is the next document through the steps.
func (t *tailIterator) nextStreamed() (pipeline.Doc, error) {
	for !t.done {
		d, err := t.in.Next()
		if err != nil || d == nil {
			t.done = true
			return nil, err
		}
		keep := true
		for _, st := range t.steps {
			var stop bool
			d, keep, stop = st(d)
			if stop {
				// Past a $limit, nothing more comes: stop reading.
				t.done = true
			}
			if !keep {
				break
			}
		}
		if keep {
			return d, nil
		}
	}
	return nil, nil
}
