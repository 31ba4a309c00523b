package mongowire

import (
	"context"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/command/pipeline"
	"github.com/hourglassdb/hourglass/model"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// aggregateOptionsIgnored are aggregate's fields that change nothing here.
var aggregateOptionsIgnored = map[string]bool{"hint": true, "bypassDocumentValidation": true}

func parsePipeline(cmd *wireCommand) (command.Pipeline, int64, error) {
	batchSize := int64(-1)
	var pipeline []command.Stage
	var allowDiskUse, archive bool
	sawCursor := false
	err := model.EachBSONElement(cmd.body, func(key string, v bsoncore.Value) error {
		switch {
		case key == cmd.name || genericFields[key]:
		case key == "pipeline":
			arr, ok := v.ArrayOK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "'pipeline' option must be specified as an array")
			}
			var err error
			pipeline, err = command.ParseStages(bsoncore.Document(arr))
			return err
		case key == "cursor":
			d, ok := v.DocumentOK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "cursor field must be missing or an object")
			}
			sawCursor = true
			if bv, err := d.LookupErr("batchSize"); err == nil {
				n, ok := bv.AsInt64OK()
				if !ok || n < 0 {
					return mongoerr.New(mongoerr.BadValue, "'cursor.batchSize' must be a non-negative integer")
				}
				batchSize = n
			}
		case key == "allowDiskUse":
			switch b, isBool := v.BooleanOK(); {
			case isBool:
				allowDiskUse = b
			case v.IsNumber():
				n, _ := v.AsFloat64OK()
				allowDiskUse = n != 0
			default:
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'aggregate.allowDiskUse' is the wrong type '%s', expected types '[bool]'", v.Type)
			}
		case key == "archive":
			// Hourglass' own: read the archive too (docs/archive.md).
			b, ok := v.BooleanOK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'aggregate.archive' is the wrong type '%s', expected type 'bool'", v.Type)
			}
			archive = b
		case key == "explain":
			return mongoerr.New(mongoerr.NotImplemented, "aggregate with explain is not supported by Hourglass")
		case !aggregateOptionsIgnored[key]:
			return mongoerr.New(unknownField, "BSON field 'aggregate.%s' is an unknown field; Hourglass supports pipeline, cursor, allowDiskUse and archive", key)
		}
		return nil
	})
	if err != nil {
		return command.Pipeline{}, 0, err
	}
	if !sawCursor {
		return command.Pipeline{}, 0, mongoerr.New(mongoerr.FailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	}
	return command.Pipeline{Stages: pipeline, AllowDiskUse: allowDiskUse, Archive: archive}, batchSize, nil
}

// cmdAggregate is aggregate: on a collection, a codec over the command
// layer's pipeline (command.Service.Pipeline), its documents encoded in
// their field order; a pipeline that is a find runs as find does. On admin,
// aggregate: 1 runs $currentOp, and the collection atlascli is empty.
func cmdAggregate(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	p, batchSize, err := parsePipeline(cmd)
	if err != nil {
		return nil, err
	}
	v, _ := cmd.body.LookupErr(cmd.name)
	if _, isName := v.StringValueOK(); !isName || cmd.db == "admin" {
		return s.aggregateDatabase(cmd, p.Stages, batchSize)
	}
	name, err := cmd.collectionName()
	if err != nil {
		return nil, err
	}
	ns := cmd.db + "." + name
	// The documents are read under a context of the cursor's own: it
	// outlives the command, until the client reads its last batch or
	// kills it.
	ctx, cancel := context.WithCancel(context.Background())
	p.Collection, p.MaxMemory = name, s.opts.StageMemory
	res, err := s.cmd.Pipeline(ctx, p)
	if isNotFound(err) {
		cancel()
		return cursorReply(0, ns, "firstBatch", bson.A{}), nil
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if res.Find != nil {
		cancel()
		src, err := s.find(name, res.Find.Filter, &findArgs{projection: res.Find.Projection, sort: res.Find.Sort, skip: res.Find.Skip, limit: res.Find.Limit})
		if err != nil {
			return nil, err
		}
		return s.firstBatch(cmd.conn, ns, src, batchSize, false)
	}
	return s.firstBatch(cmd.conn, ns, &pipelineSource{res: res, cancel: cancel}, batchSize, false)
}

// aggregateDatabase answers aggregate: 1 and aggregates on admin: the
// $currentOp stage, and mongosh's look-up of Atlas CLI deployments (the
// collection atlascli, which this server does not have).
func (s *Server) aggregateDatabase(cmd *wireCommand, stages []command.Stage, batchSize int64) (bson.D, error) {
	ns := cmd.db + ".$cmd.aggregate"
	if v, _ := cmd.body.LookupErr(cmd.name); v.Type == bsoncore.TypeString {
		// A collection of admin: none holds documents.
		return cursorReply(0, cmd.db+"."+v.StringValue(), "firstBatch", bson.A{}), nil
	}
	if len(stages) == 0 || stages[0].Name != "$currentOp" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "{aggregate: 1} runs $currentOp only; name a collection to aggregate")
	}
	if cmd.db != "admin" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "$currentOp must be run against the 'admin' database with {aggregate: 1}")
	}
	if _, ok := stages[0].Arg.DocumentOK(); !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "$currentOp options must be specified in an object")
	}
	docs, err := command.RunStages(s.currentOps(), stages[1:])
	if err != nil {
		return nil, err
	}
	return s.firstBatch(cmd.conn, ns, &pipelineSource{res: &command.PipelineResult{Docs: pipeline.Slice(docs)}}, batchSize, false)
}

// pipelineSource encodes a pipeline's documents, each in its field order.
type pipelineSource struct {
	res    *command.PipelineResult
	cancel context.CancelFunc // nil: nothing to cancel
}

func (p *pipelineSource) next() (bsoncore.Document, error) {
	d, err := p.res.Docs.Next()
	if err != nil || d == nil {
		return nil, err
	}
	return orderedDocument(d, command.DocOrder(d)), nil
}

func (p *pipelineSource) close() {
	p.res.Close()
	if p.cancel != nil {
		p.cancel()
	}
}

// firstBatch answers the first batch of src, keeping a cursor open for
// the rest.
func (s *Server) firstBatch(conn int64, ns string, src source, n int64, single bool) (bson.D, error) {
	if n < 0 {
		n = defaultFirstBatch
	}
	b := newBatchReply(nil, "firstBatch")
	if n == 0 {
		// MongoDB's batchSize 0: an empty first batch and an open cursor,
		// whose first getMore reads (a single batch of none ends there).
		if single {
			src.close()
			return rawReply(b.finish(0, ns)), nil
		}
		id, err := s.cursors.add(ns, src, nil, conn)
		if err != nil {
			src.close()
			return nil, err
		}
		return rawReply(b.finish(id, ns)), nil
	}
	pending, done, err := b.fill(src, nil, n)
	if err != nil {
		src.close()
		return nil, err
	}
	if done || single {
		src.close()
		return rawReply(b.finish(0, ns)), nil
	}
	id, err := s.cursors.add(ns, src, pending, conn)
	if err != nil {
		src.close()
		return nil, err
	}
	return rawReply(b.finish(id, ns)), nil
}
