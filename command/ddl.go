package command

import (
	"context"

	"github.com/hourglassdb/hourglass/timeseries"
)

// CollMod is a collMod: an index's expireAfterSeconds, the collection's
// options (its expireAfterSeconds, the time-series bucketing), or both.
type CollMod struct {
	Index      *timeseries.IndexMod
	Collection *timeseries.CollModOptions
}

// CollModResult is what a CollMod changed: the index's and the
// collection's results, each nil when that part was not asked for.
type CollModResult struct {
	Index      *timeseries.IndexModResult
	Collection *timeseries.CollModResult
}

// CollMod applies m to collection name through the writer: the index
// change first, the one more likely refused (an error then changes
// nothing), then the collection's; the TTL monitor is woken to apply the
// new rules. Each part is one write of its own: an error of the
// collection's part leaves the index's done, and the result says so.
func (s *Service) CollMod(ctx context.Context, name string, m CollMod) (CollModResult, error) {
	var res CollModResult
	if m.Index != nil {
		r, err := s.w.CollModIndex(ctx, name, *m.Index)
		if err != nil {
			return res, err
		}
		res.Index = &r
		s.opts.Logger.Info("index modified", "collection", name, "index", r.Name, "expireAfterSeconds", r.NewExpireAfterSeconds)
	}
	if m.Collection != nil {
		r, err := s.w.CollMod(ctx, name, *m.Collection)
		if err != nil {
			s.WakeTTL()
			return res, err
		}
		res.Collection = &r
		s.opts.Logger.Info("collection modified", "collection", name)
	}
	s.WakeTTL()
	return res, nil
}

// CreateIndex creates an index through the writer and wakes the TTL
// monitor when it was created (a TTL index may make data expire now).
func (s *Service) CreateIndex(ctx context.Context, name string, spec timeseries.IndexSpec) (created bool, index string, err error) {
	created, index, err = s.w.CreateIndex(ctx, name, spec)
	if err == nil && created {
		s.opts.Logger.Info("index created", "collection", name, "index", index)
		s.WakeTTL()
	}
	return created, index, err
}
