package mongowire

import (
	"context"
	"errors"
	"slices"

	"github.com/hourglassdb/hourglass/model"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// writeError is one refused document, in MongoDB's writeErrors shape.
type writeError struct {
	index int
	err   error
}

// insertDocuments returns the documents of an insert, from its
// "documents" sequence or array, as raw BSON.
func (cmd *wireCommand) insertDocuments() ([]bsoncore.Document, error) {
	var docs []bsoncore.Document
	found := false
	for _, sq := range cmd.seqs {
		if sq.id == "documents" {
			docs, found = append(docs, sq.docs...), true
		}
	}
	if v, err := cmd.body.LookupErr("documents"); err == nil {
		if found {
			return nil, mongoerr.New(mongoerr.BadValue, "'documents' is given both in the command and as a document sequence")
		}
		arr, ok := v.ArrayOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "'insert.documents' must be an array")
		}
		vals, _ := arr.Values()
		for i, e := range vals {
			d, ok := e.DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "'insert.documents.%d' must be a document", i)
			}
			docs = append(docs, d)
		}
		found = true
	}
	if !found || len(docs) == 0 || len(docs) > MaxWriteBatchSize {
		return nil, mongoerr.New(mongoerr.InvalidLength, "Write batch sizes must be between 1 and %d. Got %d operations.", MaxWriteBatchSize, len(docs))
	}
	return docs, nil
}

func cmdInsert(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, err := cmd.collectionName()
	if err != nil {
		return nil, err
	}
	raw, err := cmd.insertDocuments()
	if err != nil {
		return nil, err
	}
	ordered := true
	if v, err := cmd.body.LookupErr("ordered"); err == nil {
		b, ok := v.BooleanOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "'insert.ordered' must be a boolean")
		}
		ordered = b
	}
	info, err := s.db.DescribeShallow(cmd.ctx, name)
	if errors.Is(err, mongoerr.New(mongoerr.NamespaceNotFound, "")) {
		// As in MongoDB, an insert creates a missing collection: a plain
		// one.
		if _, err = s.w.CreateCollection(cmd.ctx, name, timeseries.CollectionOptions{}); err == nil {
			info, err = s.db.DescribeShallow(cmd.ctx, name)
		}
	}
	if err != nil {
		return nil, err
	}
	var n int
	var wes []writeError
	if ts := info.Options.TimeSeries; ts != nil {
		n, wes, err = s.insertMeasurements(cmd, name, ts, raw, ordered)
	} else {
		n, wes, err = s.insertPlain(cmd, name, raw, ordered)
	}
	if err != nil {
		// The engine stored nothing (unknown collection, closed, I/O).
		return nil, err
	}
	return s.writeErrorsReply(bson.D{{Key: "n", Value: int32(n)}}, wes), nil
}

// convertBatch converts raw documents with conv; with ordered, conversion
// stops at the first failure, so that only the valid prefix is stored. It returns the converted values with their
// indexes in raw, and the failures.
func convertBatch[T any](raw []bsoncore.Document, ordered bool, conv func(bsoncore.Document) (T, error)) ([]T, []int, []writeError) {
	out := make([]T, 0, len(raw))
	idx := make([]int, 0, len(raw))
	var wes []writeError
	for i, d := range raw {
		v, err := conv(d)
		if err != nil {
			wes = append(wes, writeError{index: i, err: err})
			if ordered {
				break
			}
			continue
		}
		out, idx = append(out, v), append(idx, i)
	}
	return out, idx, wes
}

// mergeErrors combines conversion failures with the engine's (whose
// indexes are into the converted batch), in index order; with ordered only
// the first counts.
func mergeErrors(conv []writeError, engine []timeseries.WriteError, idx []int, ordered bool) []writeError {
	wes := slices.Clone(conv)
	for _, e := range engine {
		wes = append(wes, writeError{index: idx[e.Index], err: e.Err})
	}
	slices.SortFunc(wes, func(a, b writeError) int { return a.index - b.index })
	if ordered && len(wes) > 1 {
		wes = wes[:1]
	}
	return wes
}

func (s *Server) insertMeasurements(cmd *wireCommand, name string, ts *model.TimeSeriesOptions, raw []bsoncore.Document, ordered bool) (int, []writeError, error) {
	c := s.converters.Get()
	defer func() {
		c.Reset()
		s.converters.Put(c)
	}()
	ms, idx, wes := convertBatch(raw, ordered, func(d bsoncore.Document) (model.Measurement, error) {
		// A BSON time field must be a date: the engine's JSON conveniences
		// (numbers of milliseconds, RFC 3339 strings) are not MongoDB's.
		if v, err := d.LookupErr(ts.TimeField); err != nil || v.Type != bsoncore.TypeDateTime {
			return model.Measurement{}, mongoerr.New(mongoerr.BadValue, "'%s' must be present and contain a valid date", ts.TimeField)
		}
		return c.Decode(ts, d)
	})
	if len(ms) == 0 {
		return 0, wes, nil
	}
	res, err := s.insert(cmd.ctx, name, timeseries.Batch{Measurements: ms}, ordered)
	if err != nil {
		return 0, wes, err
	}
	return res.Inserted, mergeErrors(wes, res.Errors, idx, ordered), nil
}

func (s *Server) insertPlain(cmd *wireCommand, name string, raw []bsoncore.Document, ordered bool) (int, []writeError, error) {
	docs, idx, wes := convertBatch(raw, ordered, func(d bsoncore.Document) (document.Doc, error) {
		m, err := model.FromBSON(d)
		if err != nil {
			return nil, err
		}
		return document.FromJSON(m)
	})
	if len(docs) == 0 {
		return 0, wes, nil
	}
	// Each document is stored in the order the driver wrote it.
	orders := make([]*document.Order, len(docs))
	for i, j := range idx {
		orders[i] = model.BSONOrder(raw[j])
	}
	res, err := s.insert(cmd.ctx, name, timeseries.Batch{Documents: docs, Orders: orders}, ordered)
	if err != nil {
		return 0, wes, err
	}
	return res.Inserted, mergeErrors(wes, res.Errors, idx, ordered), nil
}

// insert stores a batch in one of the ingest slots every door's writes
// share (command.Ingest): when they are all taken it waits in the bounded
// queue, or is refused with IngressRequestRateLimitExceeded.
func (s *Server) insert(ctx context.Context, name string, b timeseries.Batch, ordered bool) (timeseries.InsertResult, error) {
	in := s.cmd.Ingest()
	if err := in.Acquire(ctx); err != nil {
		return timeseries.InsertResult{}, err
	}
	defer in.Release()
	return s.w.Insert(ctx, name, b, timeseries.InsertOptions{Unordered: !ordered})
}
