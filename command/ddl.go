package command

import (
	"context"
	"errors"

	"github.com/hourglassdb/hourglass/mongoerr"
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

// CollMod applies m to collection name through the writer as one change:
// every part is checked before any is made, a refusal of one changes
// nothing, and a replica set logs it as one entry. The TTL monitor is
// woken to apply the new rules.
func (s *Service) CollMod(ctx context.Context, name string, m CollMod) (CollModResult, error) {
	var opts timeseries.CollModOptions
	if m.Collection != nil {
		opts = *m.Collection
	}
	opts.Index = m.Index
	r, err := s.w.CollMod(ctx, name, opts)
	if err != nil {
		return CollModResult{}, err
	}
	res := CollModResult{Index: r.Index}
	if r.Index != nil {
		s.opts.Logger.Info("index modified", "collection", name, "index", r.Index.Name, "expireAfterSeconds", r.Index.NewExpireAfterSeconds)
	}
	if m.Collection != nil {
		r.Index = nil
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

// CreateIndexesResult is what CreateIndexes did.
type CreateIndexesResult struct {
	// Indexes says, for each spec, the index's name and whether it was
	// created.
	Indexes []timeseries.IndexCreated
	// Before and After count the collection's indexes (the built-in _id
	// index among them) before and after.
	Before, After int
	// CreatedCollection is true when the collection was created first.
	CreatedCollection bool
}

// CreateIndexes creates indexes through the writer, all or none
// (timeseries.DB.CreateIndexes), and wakes the TTL monitor when any was
// created. With create, a missing collection is first created, plain, as
// MongoDB's createIndexes does, once the specs are checked: a refused
// list creates no collection either.
func (s *Service) CreateIndexes(ctx context.Context, name string, specs []timeseries.IndexSpec, create bool) (CreateIndexesResult, error) {
	var res CreateIndexesResult
	before, err := s.db.ListIndexes(ctx, name)
	if create && errors.Is(err, mongoerr.New(mongoerr.NamespaceNotFound, "")) {
		if err := timeseries.ValidateIndexSpecs(specs); err != nil {
			return res, err
		}
		if res.CreatedCollection, err = s.w.CreateCollection(ctx, name, timeseries.CollectionOptions{}); err == nil {
			before, err = s.db.ListIndexes(ctx, name)
		}
	}
	if err != nil {
		return res, err
	}
	res.Before, res.After = len(before), len(before)
	if res.Indexes, err = s.w.CreateIndexes(ctx, name, specs); err != nil {
		return res, err
	}
	for _, ix := range res.Indexes {
		if ix.Created {
			res.After++
			s.opts.Logger.Info("index created", "collection", name, "index", ix.Name)
		}
	}
	if res.After > res.Before {
		s.WakeTTL()
	}
	return res, nil
}

// DropIndexes drops indexes by name through the writer, all or none
// (timeseries.DB.DropIndexes).
func (s *Service) DropIndexes(ctx context.Context, name string, indexes []string) error {
	if err := s.w.DropIndexes(ctx, name, indexes); err != nil {
		return err
	}
	for _, ix := range indexes {
		s.opts.Logger.Info("index dropped", "collection", name, "index", ix)
	}
	return nil
}
