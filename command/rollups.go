package command

import (
	"context"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// CreateRollup makes collection rollup a rollup of source by spec
// (spec.Source is set here): a time-series collection with the source's
// timeField and metaField and its own expireAfterSeconds, created through
// the writer, so that a replica set creates it on every member. created
// is false, without error, when the same rollup exists; a collection of
// that name that is anything else is NamespaceExists (48).
func (s *Service) CreateRollup(ctx context.Context, source, rollup string, spec timeseries.RollupSpec, expireAfterSeconds *int64) (created bool, err error) {
	info, err := s.db.DescribeShallow(ctx, source)
	if err != nil {
		return false, err
	}
	spec.Source = source
	opts, err := timeseries.RollupOptions(info.Options.TimeSeries, spec, expireAfterSeconds)
	if err != nil {
		return false, err
	}
	created, err = s.w.CreateCollection(ctx, rollup, opts)
	if err == nil && created {
		s.opts.Logger.Info("rollup created", "collection", source, "rollup", rollup, "window", opts.RollupOf.Window)
		s.WakeTTL()
	}
	return created, err
}

// ListRollups describes the rollups of collection source.
func (s *Service) ListRollups(ctx context.Context, source string) ([]timeseries.RollupInfo, error) {
	return s.db.ListRollups(ctx, source)
}

// DropRollup stops maintaining rollup, a rollup of source: the collection
// stays, with what it holds. NamespaceNotFound (26) when rollup is not a
// rollup of source.
func (s *Service) DropRollup(ctx context.Context, source, rollup string) error {
	info, err := s.db.DescribeShallow(ctx, rollup)
	if err == nil && (info.Options.RollupOf == nil || info.Options.RollupOf.Source != source) {
		err = mongoerr.New(mongoerr.NamespaceNotFound, "collection %q has no rollup %q", source, rollup)
	}
	if err != nil {
		return err
	}
	if _, err := s.w.CollMod(ctx, rollup, timeseries.CollModOptions{StopRollup: true}); err != nil {
		return err
	}
	s.opts.Logger.Info("rollup stopped", "collection", source, "rollup", rollup)
	return nil
}
