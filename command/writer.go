package command

import (
	"context"

	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/replset"
	"github.com/hourglassdb/hourglass/timeseries"
)

// Retryable returns the context under which the writes of one command of
// a MongoDB session (its id, as text, and transaction number) are
// retryable through the Writer: on a replica set, a retry of the command
// after a failover, with the same id and number, gets the first attempt's
// results instead of writing again; a server of its own ignores it.
func Retryable(ctx context.Context, session string, txn int64) context.Context {
	return replset.WithSession(ctx, session, txn)
}

// Writer is what every write goes through: the engine itself
// (*timeseries.DB) on a server of its own, the member's *replset.Node on a
// replica set, where the leader logs each write and every member applies
// it to its engine. Its requests are values (filters, update operators,
// batches, options) that a replica set serialises into its log, so that a
// front door writes the same way whether or not it runs in a replica set.
// Both implementations answer the same refusals with the same errors; a
// replica set adds its own (not the leader, leadership lost) that the
// error table maps (Classify).
type Writer interface {
	CreateCollection(ctx context.Context, name string, opts timeseries.CollectionOptions) (created bool, err error)
	DropCollection(ctx context.Context, name string) error
	// CollMod changes the collection's options and an index (m.Index)
	// as one change: all of it, or nothing when any part is refused.
	CollMod(ctx context.Context, name string, m timeseries.CollModOptions) (timeseries.CollModResult, error)
	CreateIndex(ctx context.Context, name string, spec timeseries.IndexSpec) (created bool, indexName string, err error)
	// CreateIndexes and DropIndexes create and drop several indexes, all
	// or none.
	CreateIndexes(ctx context.Context, name string, specs []timeseries.IndexSpec) ([]timeseries.IndexCreated, error)
	DropIndex(ctx context.Context, name, index string) error
	DropIndexes(ctx context.Context, name string, indexes []string) error
	CollModIndex(ctx context.Context, name string, m timeseries.IndexMod) (timeseries.IndexModResult, error)
	Insert(ctx context.Context, name string, b timeseries.Batch, opts timeseries.InsertOptions) (timeseries.InsertResult, error)
	Delete(ctx context.Context, name string, f *partialfilter.Filter, opts timeseries.DeleteOptions) (int64, error)
	Update(ctx context.Context, name string, u timeseries.Update) (timeseries.UpdateResult, error)
}

var _ Writer = (*timeseries.DB)(nil)

// kindChecked is the Service's Writer: it refuses what the collection's
// kind rules out before the write reaches the engine or a replica set's
// log, with one message for every door.
type kindChecked struct {
	Writer
	db *timeseries.DB
}

// Update refuses, on a time-series collection, what is not a meta update
// (a filter on the metaField, operators on it, multi), with MongoDB's
// codes and messages (timeseries.DB.Update, which checks it again on every
// member of a replica set).
func (w kindChecked) Update(ctx context.Context, name string, u timeseries.Update) (timeseries.UpdateResult, error) {
	if h, err := w.db.Collection(name); err == nil && h.TimeSeries() != nil {
		if err := timeseries.CheckMetaUpdate(h.TimeSeries(), &u); err != nil {
			return timeseries.UpdateResult{}, err
		}
	}
	return w.Writer.Update(ctx, name, u)
}
