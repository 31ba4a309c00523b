package promstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/hourglassdb/hourglass/command"
)

// AllQueryable is a storage.Queryable over every time-series collection
// of a command.Service that has a metaField, each mapped as a Queryable
// maps its one: a collection of remote write's shape (fieldsShape)
// gives its series with their own labels, any other its numeric fields
// as <measurement>_<field> (line-protocol data) or <collection>_<field>.
// Plain collections, and time series without a metaField, are left out.
//
// A Querier's collections are merged by Prometheus' own merge querier
// (storage.NewMergeQuerier with storage.ChainedSeriesMerge): every
// Select asks each collection for its series sorted, and series of equal
// label sets from two collections are one series, their samples merged
// in time order, a sample of a timestamp both hold given once (which
// collection's, when their values differ, is not specified). A collection
// whose series' names cannot match a Select's __name__ matchers is not
// read (see Options.Scanned). The limits of Options (MaxSamples, Memory)
// bound the sum of what the collections read. It is safe for concurrent
// use.
type AllQueryable struct {
	svc  *command.Service
	opts Options
	// fullReads: see Queryable.fullReads.
	fullReads bool
}

// NewAll returns the AllQueryable of svc.
func NewAll(svc *command.Service, opts Options) (*AllQueryable, error) {
	if svc == nil {
		return nil, errors.New("promstore: a command.Service is required")
	}
	if opts.MaxSamples < 0 {
		return nil, fmt.Errorf("promstore: MaxSamples %d is negative", opts.MaxSamples)
	}
	return &AllQueryable{svc: svc, opts: opts}, nil
}

// Querier implements storage.Queryable: the merge of a Querier of each
// time-series collection there is now, over [mint, maxt]
// (milliseconds, both included), their reads counted together. The
// caller closes it, which gives back the memory their samples held.
func (a *AllQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	names, err := a.Collections(context.Background())
	if err != nil {
		return nil, err
	}
	m := &meter{opts: a.opts}
	qs := make([]storage.Querier, 0, len(names))
	each := make([]*Querier, 0, len(names))
	for _, name := range names {
		q := &Queryable{svc: a.svc, collection: name, opts: a.opts, fullReads: a.fullReads}
		qr := &Querier{q: q, mint: mint, maxt: maxt, m: m, index: true}
		qs, each = append(qs, qr), append(each, qr)
	}
	return &allQuerier{Querier: storage.NewMergeQuerier(qs, nil, storage.ChainedSeriesMerge), each: each, m: m}, nil
}

// Collections returns the names of the collections an AllQueryable
// reads: every time-series collection with a metaField, sorted.
func (a *AllQueryable) Collections(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	db := a.svc.DB()
	var out []string
	for _, name := range db.CollectionNames() {
		h, err := db.Collection(name)
		if err != nil {
			continue // dropped meanwhile
		}
		if ts := h.TimeSeries(); ts != nil && ts.MetaField != "" {
			out = append(out, name)
		}
	}
	return out, nil
}

// allQuerier is the merge of the Queriers of every collection, which
// share one meter: closing it gives back what they all read.
type allQuerier struct {
	storage.Querier
	each []*Querier // the merged Queriers, one a collection
	m    *meter
}

// Select is the merge querier's, but for last_over_time at one instant
// over several collections: each collection reads only the last samples
// of its series (readTail), but the series that end with a staleness
// marker in any collection, which every collection holding them reads
// whole (as the merge of a series held by two collections may need the
// samples before the marker from the other); with more than
// maxStaleSeries of those, every collection reads its whole range. The
// series sets are merged as the merge querier merges them.
func (q *allQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	if len(q.each) < 2 || !q.each[0].fastLast(hints) {
		return q.Querier.Select(ctx, sortSeries, hints, ms...)
	}
	type part struct {
		sc  readScope
		in  bool // the collection may hold a matching sample
		all []Series
	}
	parts := make([]part, len(q.each))
	var stale []labels.Labels
	tails := true
	for i, qr := range q.each {
		p := &parts[i]
		start, end := qr.selectRange(hints)
		var err error
		if p.sc, p.in, err = qr.scope(ctx, start, end, ms); err != nil {
			return newSeriesSet(nil, err, nil)
		}
		if !p.in || !tails {
			continue
		}
		var (
			ok bool
			st []labels.Labels
		)
		if p.all, st, ok, err = qr.readTail(ctx, p.sc, ms); err != nil {
			return newSeriesSet(nil, err, nil)
		}
		stale = append(stale, st...)
		tails = ok && len(stale) <= maxStaleSeries
	}
	slices.SortFunc(stale, labels.Compare)
	stale = slices.CompactFunc(stale, labels.Equal)
	sets := make([]storage.SeriesSet, len(q.each))
	for i, qr := range q.each {
		p := &parts[i]
		var err error
		switch {
		case !p.in:
		case tails:
			err = qr.readWhole(ctx, p.sc, ms, p.all, stale)
		default:
			p.all, err = qr.read(ctx, p.sc, ms)
			dedupe(p.all)
		}
		if err != nil {
			return newSeriesSet(nil, err, nil)
		}
		sets[i] = newSeriesSet(p.all, nil, hints)
	}
	var limit int
	if hints != nil {
		limit = hints.Limit
	}
	return storage.NewMergeSeriesSet(sets, limit, storage.ChainedSeriesMerge)
}

func (q *allQuerier) Close() error {
	err := q.Querier.Close()
	return errors.Join(err, q.m.close())
}
