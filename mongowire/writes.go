package mongowire

import (
	"errors"
	"math"
	"strings"

	"github.com/hourglassdb/hourglass/model"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// isNotFound reports the engine's NamespaceNotFound.
func isNotFound(err error) bool {
	return errors.Is(err, mongoerr.New(mongoerr.NamespaceNotFound, ""))
}

// filterArg parses the filter args[key]: nil when absent or null.
func filterArg(args map[string]any, key, cmdName string) (*partialfilter.Filter, error) {
	v, ok := args[key]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'%s.%s' must be a document", cmdName, key)
	}
	return partialfilter.Parse(m)
}

// countOptionsIgnored are count's fields that change nothing here.
var countOptionsIgnored = map[string]bool{"hint": true, "collation": true, "fields": true}

// cmdCount is count: the documents matching query, after skip, at most
// limit (a negative limit counts as its absolute value, as in MongoDB). A
// missing collection counts 0.
func cmdCount(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, args, err := cmd.collectionArgs()
	if err != nil {
		return nil, err
	}
	var skip, limit int64
	for k, v := range args {
		switch k {
		case "query":
		case "skip", "limit":
			n, err := integer(k, v)
			if err != nil {
				return nil, err
			}
			if k == "skip" {
				if n < 0 {
					return nil, mongoerr.New(mongoerr.BadValue, "skip value is negative in count query")
				}
				skip = n
			} else {
				limit = max(n, -n)
			}
		default:
			if !countOptionsIgnored[k] {
				return nil, mongoerr.New(unknownField, "BSON field 'count.%s' is an unknown field; Hourglass supports query, skip and limit", k)
			}
		}
	}
	filter, err := filterArg(args, "query", "count")
	if err != nil {
		return nil, err
	}
	n, err := s.cmd.Count(cmd.ctx, name, filter, timeseries.CountOptions{Skip: skip, Limit: limit})
	if isNotFound(err) {
		return bson.D{{Key: "n", Value: int32(0)}}, nil
	}
	if err != nil {
		return nil, err
	}
	if n <= math.MaxInt32 {
		return bson.D{{Key: "n", Value: int32(n)}}, nil
	}
	return bson.D{{Key: "n", Value: n}}, nil
}

// cmdDistinct is distinct: the values of key among the documents matching
// query, arrays unwound, each once, in MongoDB's order of values. On a
// time-series collection key is the metaField or one of its sub-fields
// (a time or measurement field too: they are read the same way); on a
// plain collection, any field (command.Service.Distinct).
func cmdDistinct(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, args, err := cmd.collectionArgs()
	if err != nil {
		return nil, err
	}
	key, ok := args["key"].(string)
	if !ok || key == "" {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'distinct.key' must be a non-empty string")
	}
	for k := range args {
		if k != "key" && k != "query" && !countOptionsIgnored[k] {
			return nil, mongoerr.New(unknownField, "BSON field 'distinct.%s' is an unknown field; Hourglass supports key and query", k)
		}
	}
	filter, err := filterArg(args, "query", "distinct")
	if err != nil {
		return nil, err
	}
	values, err := s.cmd.Distinct(cmd.ctx, name, key, filter)
	if isNotFound(err) {
		return bson.D{{Key: "values", Value: bson.A{}}}, nil
	}
	if err != nil {
		return nil, err
	}
	return distinctReply(values), nil
}

// distinctReply is distinct's answer of values, in order.
func distinctReply(values []any) bson.D {
	out := make(bson.A, len(values))
	for i, v := range values {
		out[i] = rawValue(v)
	}
	return bson.D{{Key: "values", Value: out}}
}

// rawValue encodes one value of the engine's value set as a BSON value.
func rawValue(v any) bson.RawValue {
	el := appendValue(nil, "", v)
	return bson.RawValue{Type: bson.Type(el[0]), Value: el[2:]}
}

// writeArgs reads what a delete or update names: the collection, its
// statements (the key array: "deletes" or "updates") and ordered.
func (cmd *wireCommand) writeArgs(key string) (name string, stmts []map[string]any, ordered bool, err error) {
	name, args, err := cmd.collectionArgs()
	if err != nil {
		return "", nil, false, err
	}
	if stmts, err = writeStatements(args, key, cmd.name); err != nil {
		return "", nil, false, err
	}
	ordered, err = orderedArg(args, cmd.name)
	return name, stmts, ordered, err
}

// writeStatements reads the statements of a delete or update (the
// "deletes" or "updates" array or document sequence).
func writeStatements(args map[string]any, key, cmdName string) ([]map[string]any, error) {
	arr, ok := args[key].([]any)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'%s.%s' must be an array of statements", cmdName, key)
	}
	if len(arr) == 0 || len(arr) > MaxWriteBatchSize {
		return nil, mongoerr.New(mongoerr.InvalidLength, "Write batch sizes must be between 1 and %d. Got %d operations.", MaxWriteBatchSize, len(arr))
	}
	out := make([]map[string]any, len(arr))
	for i, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "'%s.%s.%d' must be a document", cmdName, key, i)
		}
		out[i] = m
	}
	return out, nil
}

// orderedArg reads a write's ordered (default true).
func orderedArg(args map[string]any, cmdName string) (bool, error) {
	v, ok := args["ordered"]
	if !ok {
		return true, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, mongoerr.New(mongoerr.TypeMismatch, "'%s.ordered' must be a boolean", cmdName)
	}
	return b, nil
}

// writeErrorsReply appends writeErrors, if any, to reply.
func (s *Server) writeErrorsReply(reply bson.D, wes []writeError) bson.D {
	if len(wes) == 0 {
		return reply
	}
	arr := make(bson.A, len(wes))
	for i, we := range wes {
		c := s.classify(we.err)
		arr[i] = bson.D{{Key: "index", Value: int32(we.index)}, {Key: "code", Value: int32(c.Code)},
			{Key: "codeName", Value: c.CodeName}, {Key: "errmsg", Value: document.ValidUTF8(c.Message)}}
	}
	return append(reply, bson.E{Key: "writeErrors", Value: arr})
}

// cmdDelete is delete. On a plain collection a statement's limit 0
// deletes every match and limit 1 the first in _id order; on a time-series
// collection, as over HTTP, limit 0 deletes every measurement the filter
// matches (any filter, as MongoDB 7.0), and limit 1 is refused. n counts
// the documents deleted; refused statements are in writeErrors.
func cmdDelete(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, stmts, ordered, err := cmd.writeArgs("deletes")
	if err != nil {
		return nil, err
	}
	_, err = s.db.DescribeShallow(cmd.ctx, name)
	if isNotFound(err) {
		return bson.D{{Key: "n", Value: int32(0)}}, nil
	}
	if err != nil {
		return nil, err
	}
	var n int64
	var wes []writeError
	for i, st := range stmts {
		d, err := s.deleteOne(cmd, name, st)
		n += d
		if err != nil {
			if classifyInternal(err) {
				return nil, err
			}
			wes = append(wes, writeError{index: i, err: err})
			if ordered {
				break
			}
		}
	}
	return s.writeErrorsReply(bson.D{{Key: "n", Value: int32(n)}}, wes), nil
}

// classifyInternal reports errors that fail the whole command rather than
// one statement: those without a MongoDB code (I/O, shutdown).
func classifyInternal(err error) bool {
	var me *mongoerr.Error
	return !errors.As(err, &me) && !timeseries.IsCorrupt(err)
}

func (s *Server) deleteOne(cmd *wireCommand, name string, st map[string]any) (int64, error) {
	limit := int64(0)
	for k, v := range st {
		switch k {
		case "q":
		case "limit":
			n, err := integer("limit", v)
			if err != nil || (n != 0 && n != 1) {
				return 0, mongoerr.New(mongoerr.FailedToParse, "The limit field in delete objects must be 0 or 1. Got %v", v)
			}
			limit = n
		case "hint", "collation":
		default:
			return 0, mongoerr.New(unknownField, "BSON field 'delete.deletes.%s' is an unknown field", k)
		}
	}
	q, ok := st["q"].(map[string]any)
	if !ok {
		return 0, mongoerr.New(mongoerr.FailedToParse, "BSON field 'delete.deletes.q' is missing but a required field; {} deletes everything")
	}
	f, err := partialfilter.Parse(q)
	if err != nil {
		return 0, err
	}
	return s.w.Delete(cmd.ctx, name, f, timeseries.DeleteOptions{Limit: limit})
}

// cmdUpdate is update: u with the update operators the HTTP API's update
// takes ($set, $unset, $inc, $currentDate, $rename), or a replacement document (the
// HTTP API's replace: the first match, its _id kept); multi. On a
// time-series collection, as over HTTP, only MongoDB's meta update is
// taken (multi, a filter and operators on the metaField only; anything
// else is InvalidOptions 72), and counts are of measurements. upsert and
// pipelines are refused in writeErrors. n counts the documents matched,
// nModified those changed.
func cmdUpdate(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, stmts, ordered, err := cmd.writeArgs("updates")
	if err != nil {
		return nil, err
	}
	var matched, modified int64
	var wes []writeError
	for i, st := range stmts {
		res, err := s.updateOne(cmd, name, st, cmd.statement("updates", i))
		matched += res.Matched
		modified += res.Modified
		if err != nil {
			if classifyInternal(err) {
				return nil, err
			}
			wes = append(wes, writeError{index: i, err: err})
			if ordered {
				break
			}
		}
	}
	reply := bson.D{{Key: "n", Value: int32(matched)}, {Key: "nModified", Value: int32(modified)}}
	return s.writeErrorsReply(reply, wes), nil
}

func (s *Server) updateOne(cmd *wireCommand, name string, st map[string]any, raw bsoncore.Document) (timeseries.UpdateResult, error) {
	var none timeseries.UpdateResult
	multi := false
	for k, v := range st {
		switch k {
		case "q", "u":
		case "multi", "upsert":
			b, ok := v.(bool)
			if !ok {
				return none, mongoerr.New(mongoerr.TypeMismatch, "'update.updates.%s' must be a boolean", k)
			}
			if k == "multi" {
				multi = b
			} else if b {
				return none, mongoerr.New(mongoerr.IllegalOperation, "upsert is not supported by Hourglass: insert the document when the update matches none (n: 0)")
			}
		case "hint", "collation":
		case "arrayFilters":
			return none, mongoerr.New(mongoerr.IllegalOperation, "arrayFilters are not supported by Hourglass")
		default:
			return none, mongoerr.New(unknownField, "BSON field 'update.updates.%s' is an unknown field", k)
		}
	}
	q, ok := st["q"].(map[string]any)
	if !ok {
		return none, mongoerr.New(mongoerr.FailedToParse, "BSON field 'update.updates.q' is missing but a required field")
	}
	f, err := partialfilter.Parse(q)
	if err != nil {
		return none, err
	}
	var u map[string]any
	switch x := st["u"].(type) {
	case map[string]any:
		u = x
	case []any:
		return none, mongoerr.New(mongoerr.IllegalOperation, "update pipelines are not supported by Hourglass; use $set, $unset, $inc, $currentDate or $rename")
	default:
		return none, mongoerr.New(mongoerr.FailedToParse, "BSON field 'update.updates.u' must be a document of update operators or a replacement document")
	}
	if _, err := s.db.Collection(name); isNotFound(err) {
		return none, nil // MongoDB matches nothing in a missing collection
	} else if err != nil {
		return none, err
	}
	operators := false
	for k := range u {
		operators = operators || strings.HasPrefix(k, "$")
	}
	if !operators && len(u) > 0 {
		if multi {
			return none, mongoerr.New(mongoerr.FailedToParse, "multi update is not supported for replacement-style update")
		}
		repl, err := document.FromJSON(u)
		if err != nil {
			return none, err
		}
		var order *document.Order
		if v, err := raw.LookupErr("u"); err == nil {
			if d, ok := v.DocumentOK(); ok {
				order = model.BSONOrder(d)
			}
		}
		return s.w.Update(cmd.ctx, name, timeseries.Update{Filter: f, Replacement: repl, ReplacementOrder: order})
	}
	up, err := document.ParseUpdate(u)
	if err != nil {
		return none, err
	}
	return s.w.Update(cmd.ctx, name, timeseries.Update{Filter: f, Operators: up, Multi: multi})
}
