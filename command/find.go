package command

import (
	"context"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// Find is a find on one collection of either kind, as a door decodes it:
// MongoDB's find (and distinct, and a pipeline that is a find), or the
// HTTP find.
type Find struct {
	Collection string
	// Filter selects; nil selects everything.
	Filter *partialfilter.Filter
	// Projection is a MongoDB projection document; nil or empty returns
	// measurements and documents whole.
	Projection map[string]any
	// Sort orders the result: by the timeField alone on a time series,
	// by any fields on a plain collection; empty is the collection's
	// natural order (by series, or by _id).
	Sort        []timeseries.SortKey
	Skip, Limit int64
	// ExactTypes: time-series values with the BSON types they were
	// written with (timeseries.FindOptions.ExactTypes), for doors that
	// speak BSON or Extended JSON.
	ExactTypes bool
	// Archive reads a time series' archived data with its live data
	// (docs/archive.md).
	Archive bool
	// MetaRuns gives a time series' meta values as runs of rows of one
	// series instead of a column (timeseries.FindOptions.MetaRuns).
	MetaRuns bool
}

// Find runs f. The cursor yields Arrow records on a time-series
// collection and documents on a plain one (Cursor.Documents); it reads
// under ctx until it is closed, so a cursor that outlives the request
// (a wire cursor's getMore) is given a context of its own.
func (s *Service) Find(ctx context.Context, f Find) (*timeseries.Cursor, error) {
	h, err := s.db.Collection(f.Collection)
	if err != nil {
		return nil, err
	}
	opts := timeseries.FindOptions{Filter: f.Filter, Sort: f.Sort, Skip: f.Skip, Limit: f.Limit, ExactTypes: f.ExactTypes, Archive: f.Archive, MetaRuns: f.MetaRuns}
	if err := archiveOfPlain(h, f.Archive); err != nil {
		return nil, err
	}
	if ts := h.TimeSeries(); ts != nil {
		p, err := ParseProjection(f.Projection)
		if err != nil {
			return nil, err
		}
		p.Apply(&opts, ts, h.FieldNames())
	} else if opts.Projection, err = document.ParseProjection(f.Projection); err != nil {
		return nil, err
	}
	return h.Find(ctx, opts)
}

// Count counts what f matches in the collection name (see
// timeseries.DB.Count): the wire door's count and countDocuments.
func (s *Service) Count(ctx context.Context, name string, f *partialfilter.Filter, o timeseries.CountOptions) (int64, error) {
	h, err := s.db.Collection(name)
	if err != nil {
		return 0, err
	}
	if err := archiveOfPlain(h, o.Archive); err != nil {
		return 0, err
	}
	return h.Count(ctx, f, o)
}

// archiveOfPlain refuses a read of the archive of h when h is a plain
// collection: only time series archive what expires.
func archiveOfPlain(h *timeseries.Collection, archive bool) error {
	if archive && h.TimeSeries() == nil {
		return mongoerr.New(mongoerr.BadValue, "'archive' reads a time-series collection's archive; %q is a plain collection", h.Name())
	}
	return nil
}

// Aggregate runs a windowed aggregate on a time-series collection (see
// timeseries.DB.Aggregate).
func (s *Service) Aggregate(ctx context.Context, name string, opts timeseries.AggregateOptions) (arrow.Record, error) {
	return s.db.Aggregate(ctx, name, opts)
}

// DistinctMeta returns the distinct values of a path inside the meta field
// of a time-series collection from its series index (see
// timeseries.DB.DistinctMeta).
func (s *Service) DistinctMeta(ctx context.Context, name, path string, f *partialfilter.Filter) ([]any, error) {
	return s.db.DistinctMeta(ctx, name, path, f)
}

// SeriesFields lists the series a filter selects, each with its fields
// that hold a number in a row it selects (timeseries.DB.SeriesFields):
// Prometheus' series API over a collection whose numeric fields are
// series.
func (s *Service) SeriesFields(ctx context.Context, name string, f *partialfilter.Filter, fields []string) ([]timeseries.SeriesFields, error) {
	return s.db.SeriesFields(ctx, name, f, fields)
}

// ReadNumbers gives each series' numbers of the fields asked for, a
// field at a time (timeseries.DB.ReadNumbers): what Prometheus' engine
// reads of a collection.
func (s *Service) ReadNumbers(ctx context.Context, name string, f *partialfilter.Filter, fields []string, fn func(key, field string, ts []int64, vs []float64) error) error {
	return s.db.ReadNumbers(ctx, name, f, fields, fn)
}

// HasRows reports whether a time series holds a row a filter selects
// (timeseries.DB.HasRows).
func (s *Service) HasRows(ctx context.Context, name string, f *partialfilter.Filter) (bool, error) {
	return s.db.HasRows(ctx, name, f)
}

// MetaValuesDistinct reports whether no two series a filter selects have
// meta values that compare equal (see timeseries.DB.MetaValuesDistinct):
// whether the engine's order by series is an order by meta value, which
// Pipeline asks before it streams a stage partitioned by the metaField.
func (s *Service) MetaValuesDistinct(ctx context.Context, name string, f *partialfilter.Filter) (bool, error) {
	return s.db.MetaValuesDistinct(ctx, name, f)
}
