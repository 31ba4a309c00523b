package command

import (
	"context"
	"slices"
	"strings"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// maxDistinctBytes bounds what a distinct over measurements or documents
// gathers (the key forms of its values): MongoDB's 16 MB cap on a
// distinct's answer. Past it, QueryExceededMemoryLimit, as a distinct of
// meta values answers past the query memory
// (timeseries.Options.QueryMemoryBytes), which bounds it instead. A
// variable for the tests.
var maxDistinctBytes = 16 << 20

// Distinct returns the values of key (a dotted path) among what f
// selects in collection name, as MongoDB's distinct gives them: arrays
// unwound (document.DistinctValues), nothing where the path is missing,
// numbers of equal value (1 and 1.0) once, in MongoDB's order of values
// (partialfilter.Compare). On a time series whose metaField key names
// (or a path inside it) the values come from the series index without
// reading a measurement (timeseries.DB.DistinctMeta); otherwise from a
// find of the key's top field. Values are as a find with exact types
// gives them; the caller owns the slice. An unknown collection is
// NamespaceNotFound (the wire door answers it with no values, as
// MongoDB does).
func (s *Service) Distinct(ctx context.Context, name, key string, f *partialfilter.Filter) ([]any, error) {
	if key == "" {
		return nil, mongoerr.New(mongoerr.BadValue, "distinct needs a key: the field whose values to list")
	}
	path := strings.Split(key, ".")
	if slices.Contains(path, "") {
		return nil, mongoerr.New(mongoerr.BadValue, "distinct key %q: a dotted path has no empty part", key)
	}
	info, err := s.db.DescribeShallow(ctx, name)
	if err != nil {
		return nil, err
	}
	if ts := info.Options.TimeSeries; ts != nil && ts.MetaField != "" && path[0] == ts.MetaField {
		// A million series answer within the query memory.
		return s.db.DistinctMeta(ctx, name, key, f)
	}
	cur, err := s.Find(ctx, Find{Collection: name, Filter: f, Projection: map[string]any{path[0]: int64(1)}, ExactTypes: true})
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	docs := &cursorDocs{cur: cur}
	var (
		set    document.DistinctSet
		addErr error
	)
	add := func(v any) {
		if addErr == nil && set.Add(v) && set.Bytes() > maxDistinctBytes {
			addErr = mongoerr.New(mongoerr.QueryExceededMemoryLimit, "distinct too big: the values of %q pass the %d MiB cap; narrow the filter", key, maxDistinctBytes>>20)
		}
	}
	for {
		d, err := docs.Next()
		if err != nil {
			return nil, err
		}
		if d == nil {
			break
		}
		delete(d, fieldOrderKey)
		document.DistinctValues(map[string]any(d), path, add)
		if addErr != nil {
			return nil, addErr
		}
	}
	return set.Sorted(), nil
}
