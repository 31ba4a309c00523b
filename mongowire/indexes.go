package mongowire

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/model"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// codeAmbiguousIndexKeyPattern is MongoDB's code for a dropIndexes key
// pattern that several indexes (with different partial filters) share.
const codeAmbiguousIndexKeyPattern = mongoerr.AmbiguousIndexKeyPattern

// keyPattern reads an index key pattern ({field: 1 | -1, ...}) in order;
// refusals carry code, as the HTTP API's do.
func keyPattern(v bsoncore.Value, code mongoerr.Code, what string) ([]timeseries.IndexKey, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.New(code, "'%s' must be a document such as {timestamp: 1}", what)
	}
	var keys []timeseries.IndexKey
	err := model.EachBSONElement(d, func(k string, e bsoncore.Value) error {
		dir, ok := e.AsFloat64OK()
		if !ok || (dir != 1 && dir != -1) {
			return mongoerr.New(code, "index key %q: the value must be 1 or -1; special index types are not supported", k)
		}
		keys = append(keys, timeseries.IndexKey{Field: k, Direction: int(dir)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, mongoerr.New(code, "the index key pattern is empty")
	}
	return keys, nil
}

// indexOptionNames are what commitQuorum holds when mongosh's third
// createIndex argument was meant as index options.
var indexOptionNames = map[string]bool{"expireAfterSeconds": true, "partialFilterExpression": true, "name": true,
	"unique": true, "sparse": true, "hidden": true, "background": true}

// checkCommitQuorum refuses createIndexes' commitQuorum, which a
// standalone server refuses. mongosh sends its third createIndex argument
// as commitQuorum, so index options found there get an error saying where
// they belong: an index created without them would silently lack its TTL.
func checkCommitQuorum(body bsoncore.Document) error {
	v, err := body.LookupErr("commitQuorum")
	if err != nil {
		return nil
	}
	if d, ok := v.DocumentOK(); ok {
		var misplaced []string
		model.EachBSONElement(d, func(k string, _ bsoncore.Value) error {
			if indexOptionNames[k] {
				misplaced = append(misplaced, k)
			}
			return nil
		})
		if len(misplaced) > 0 {
			return mongoerr.New(mongoerr.BadValue,
				"'%s' was sent as commitQuorum, createIndex's third argument; index options belong in the second argument, "+
					"with partialFilterExpression: createIndex({timestamp: 1}, {partialFilterExpression: {...}, expireAfterSeconds: 3600}). No index was created",
				strings.Join(misplaced, "', '"))
		}
	}
	return mongoerr.New(mongoerr.BadValue, "Standalones can't specify commitQuorum")
}

// indexSpec reads one entry of createIndexes' indexes, with the HTTP API's
// options and refusals (CannotCreateIndex, 67).
func indexSpec(d bsoncore.Document) (timeseries.IndexSpec, error) {
	var spec timeseries.IndexSpec
	err := model.EachBSONElement(d, func(k string, v bsoncore.Value) error {
		switch k {
		case "key":
			key, err := keyPattern(v, mongoerr.CannotCreateIndex, "key")
			spec.Key = key
			return err
		case "name":
			n, ok := v.StringValueOK()
			if !ok || n == "" {
				return mongoerr.New(mongoerr.CannotCreateIndex, "'name' must be a non-empty string")
			}
			spec.Name = n
		case "expireAfterSeconds":
			x, err := model.ValueFromBSON(k, v, 0)
			if err != nil {
				return mongoerr.New(mongoerr.CannotCreateIndex, "%s", mongoerr.MessageOf(err))
			}
			e, err := timeseries.ParseExpireAfterSeconds(x, mongoerr.CannotCreateIndex)
			if err != nil {
				return err
			}
			spec.ExpireAfterSeconds = &e
		case "partialFilterExpression":
			pd, ok := v.DocumentOK()
			if !ok {
				return mongoerr.New(mongoerr.CannotCreateIndex, "'partialFilterExpression' must be a document")
			}
			m, err := model.FromBSON(pd)
			if err != nil {
				return mongoerr.New(mongoerr.CannotCreateIndex, "invalid partialFilterExpression: %s", mongoerr.MessageOf(err))
			}
			spec.PartialFilterExpression = extJSONMap(m)
		case "archive":
			b, ok := v.BooleanOK()
			if !ok {
				return mongoerr.New(mongoerr.CannotCreateIndex, "'archive' must be true or false")
			}
			spec.Archive = b
		case "v", "background":
			// Accepted and ignored, as drivers and mongosh send them.
		default:
			return mongoerr.New(mongoerr.CannotCreateIndex,
				"unknown index option %q; accepted: key, name, expireAfterSeconds, partialFilterExpression, archive", k)
		}
		return nil
	})
	if err != nil {
		return spec, err
	}
	if spec.Key == nil {
		return spec, mongoerr.New(mongoerr.CannotCreateIndex, "'key' is required, e.g. {key: {timestamp: 1}}")
	}
	return spec, nil
}

// extJSONMap turns the values of a filter that JSON cannot carry as they
// are (dates, regular expressions) into Extended JSON wrappers, so that the
// catalog, which stores index definitions as JSON, reads them back the same.
func extJSONMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = extJSON(v)
	}
	return out
}

func extJSON(v any) any {
	switch x := v.(type) {
	case time.Time:
		return map[string]any{"$date": x.UTC().Format(time.RFC3339Nano)}
	case partialfilter.Regex:
		return map[string]any{"$regularExpression": map[string]any{"pattern": x.Pattern, "options": x.Options}}
	case map[string]any:
		return extJSONMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = extJSON(e)
		}
		return out
	}
	return v
}

func cmdCreateIndexes(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, err := cmd.collectionName()
	if err != nil {
		return nil, err
	}
	if err := checkCommitQuorum(cmd.body); err != nil {
		return nil, err
	}
	var specs []timeseries.IndexSpec
	err = model.EachBSONElement(cmd.body, func(k string, v bsoncore.Value) error {
		switch {
		case k == cmd.name || genericFields[k]:
		case k == "indexes":
			arr, ok := v.ArrayOK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "'createIndexes.indexes' must be an array")
			}
			vals, _ := arr.Values()
			for i, e := range vals {
				d, ok := e.DocumentOK()
				if !ok {
					return mongoerr.New(mongoerr.TypeMismatch, "'createIndexes.indexes.%d' must be a document", i)
				}
				spec, err := indexSpec(d)
				if err != nil {
					return err
				}
				specs = append(specs, spec)
			}
		default:
			return mongoerr.New(unknownField, "BSON field 'createIndexes.%s' is an unknown field", k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one index")
	}
	// All or none; a missing collection is created, plain, as MongoDB does.
	res, err := s.cmd.CreateIndexes(cmd.ctx, name, specs, true)
	if err != nil {
		return nil, err
	}
	reply := bson.D{
		{Key: "numIndexesBefore", Value: int32(res.Before)},
		{Key: "numIndexesAfter", Value: int32(res.After)},
		{Key: "createdCollectionAutomatically", Value: res.CreatedCollection},
	}
	if res.After == res.Before {
		reply = append(reply, bson.E{Key: "note", Value: "all indexes already exist"})
	}
	return reply, nil
}

// indexDocument is an index as listIndexes shows it: v, key (in order),
// name, expireAfterSeconds, partialFilterExpression.
func indexDocument(spec timeseries.IndexSpec) (bsoncore.Document, error) {
	idx, dst := bsoncore.AppendDocumentStart(nil)
	dst = bsoncore.AppendInt32Element(dst, "v", 2)
	kidx, dst := bsoncore.AppendDocumentElementStart(dst, "key")
	for _, k := range spec.Key {
		dst = bsoncore.AppendInt32Element(dst, k.Field, int32(k.Direction))
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, kidx)
	dst = bsoncore.AppendStringElement(dst, "name", spec.Name)
	if spec.ExpireAfterSeconds != nil {
		dst = appendInt(dst, "expireAfterSeconds", *spec.ExpireAfterSeconds)
	}
	if spec.PartialFilterExpression != nil {
		pf, err := partialfilter.FromExtJSON(spec.PartialFilterExpression)
		if err != nil {
			return nil, err
		}
		dst = appendValue(dst, "partialFilterExpression", pf)
	}
	if spec.Archive {
		dst = bsoncore.AppendBooleanElement(dst, "archive", true)
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst, nil
}

// appendInt appends n as a 32-bit integer when it fits, as MongoDB shows
// small counts and durations.
func appendInt(dst []byte, key string, n int64) []byte {
	if n >= -1<<31 && n < 1<<31 {
		return bsoncore.AppendInt32Element(dst, key, int32(n))
	}
	return bsoncore.AppendInt64Element(dst, key, n)
}

func cmdListIndexes(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, err := cmd.collectionName()
	if err != nil {
		return nil, err
	}
	specs, err := s.db.ListIndexes(cmd.ctx, name)
	if errors.Is(err, mongoerr.New(mongoerr.NamespaceNotFound, "")) {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s.%s", cmd.db, name)
	}
	if err != nil {
		return nil, err
	}
	batch := bson.A{}
	for _, spec := range specs {
		d, err := indexDocument(spec)
		if err != nil {
			return nil, err
		}
		batch = append(batch, bson.Raw(d))
	}
	return cursorReply(0, cmd.db+"."+name, "firstBatch", batch), nil
}

func cmdDropIndexes(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, err := cmd.collectionName()
	if err != nil {
		return nil, err
	}
	specs, err := s.db.ListIndexes(cmd.ctx, name)
	if errors.Is(err, mongoerr.New(mongoerr.NamespaceNotFound, "")) {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "ns not found %s.%s", cmd.db, name)
	}
	if err != nil {
		return nil, err
	}
	v, err := cmd.body.LookupErr("index")
	if err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "BSON field 'dropIndexes.index' is missing but a required field")
	}
	var names []string
	switch v.Type {
	case bsoncore.TypeString:
		if n := v.StringValue(); n == "*" {
			for _, sp := range specs {
				if sp.Name != timeseries.IDIndexName {
					names = append(names, sp.Name)
				}
			}
		} else {
			names = []string{n}
		}
	case bsoncore.TypeArray:
		vals, _ := v.Array().Values()
		for _, e := range vals {
			n, ok := e.StringValueOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "'dropIndexes.index' must be a name, a key pattern, \"*\" or an array of names")
			}
			names = append(names, n)
		}
	case bsoncore.TypeEmbeddedDocument:
		key, err := keyPattern(v, mongoerr.InvalidOptions, "index")
		if err != nil {
			return nil, err
		}
		var match []string
		for _, sp := range specs {
			if sameKey(sp.Key, key) {
				match = append(match, sp.Name)
			}
		}
		switch len(match) {
		case 0:
			return nil, mongoerr.New(mongoerr.IndexNotFound, "can't find index with key: %s", keyText(key))
		case 1:
			names = match
		default:
			return nil, mongoerr.New(codeAmbiguousIndexKeyPattern,
				"%d indexes found for key: %s, identify by name instead. Conflicting indexes: %s", len(match), keyText(key), strings.Join(match, ", "))
		}
	default:
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'dropIndexes.index' must be a name, a key pattern, \"*\" or an array of names")
	}
	// All or none: every name is checked before any is dropped, as in
	// MongoDB.
	if err := s.cmd.DropIndexes(cmd.ctx, name, names); err != nil {
		return nil, err
	}
	return bson.D{{Key: "nIndexesWas", Value: int32(len(specs))}}, nil
}

func sameKey(a, b []timeseries.IndexKey) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func keyText(key []timeseries.IndexKey) string {
	var b strings.Builder
	b.WriteString("{ ")
	for i, k := range key {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", k.Field, k.Direction)
	}
	b.WriteString(" }")
	return b.String()
}

// cmdCollMod is collMod with what the HTTP API's PATCH changes: the
// collection's expireAfterSeconds (a number or "off"), an index's
// expireAfterSeconds (by keyPattern or name), and the time-series
// bucketing. The reply carries MongoDB's expireAfterSeconds_old/_new.
func cmdCollMod(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, err := cmd.collectionName()
	if err != nil {
		return nil, err
	}
	var idx *timeseries.IndexMod
	var m timeseries.CollModOptions
	changes := 0
	err = model.EachBSONElement(cmd.body, func(k string, v bsoncore.Value) error {
		switch {
		case k == cmd.name || genericFields[k]:
			return nil
		case k == "index":
			im, err := indexMod(v)
			idx = &im
			return err
		case k == "expireAfterSeconds":
			changes++
			x, err := model.ValueFromBSON(k, v, 0)
			if err != nil {
				return mongoerr.New(mongoerr.InvalidOptions, "%s", mongoerr.MessageOf(err))
			}
			m.ExpireAfterSeconds, m.ExpireOff, err = timeseries.ParseCollModExpire(x)
			return err
		case k == "timeseries":
			changes++
			x, err := model.ValueFromBSON(k, v, 0)
			if err != nil {
				return err
			}
			m.TimeSeries, err = timeseries.ParseCollModTimeSeries(x)
			return err
		case k == "archive":
			changes++
			b, ok := v.BooleanOK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.archive' is the wrong type '%s', expected type 'bool'", v.Type)
			}
			m.Archive = &b
			return nil
		default:
			return mongoerr.New(mongoerr.InvalidOptions, "unknown collMod option %q; accepted: 'expireAfterSeconds', 'archive', 'index', 'timeseries'", k)
		}
	})
	if err != nil {
		return nil, err
	}
	if idx == nil && changes == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "collMod needs at least one of 'expireAfterSeconds', 'index', 'timeseries'")
	}
	mod := command.CollMod{Index: idx}
	if changes > 0 {
		mod.Collection = &m
	}
	res, err := s.cmd.CollMod(cmd.ctx, name, mod)
	if err != nil {
		return nil, err
	}
	var reply bson.D
	if ix := res.Index; ix != nil {
		// An index made a TTL index has no old value, as in MongoDB.
		if ix.OldExpireAfterSeconds != nil {
			reply = append(reply, bson.E{Key: "expireAfterSeconds_old", Value: *ix.OldExpireAfterSeconds})
		}
		reply = append(reply, bson.E{Key: "expireAfterSeconds_new", Value: ix.NewExpireAfterSeconds})
	}
	if c := res.Collection; c != nil && (m.ExpireAfterSeconds != nil || m.ExpireOff) {
		reply = append(reply, bson.E{Key: "expireAfterSeconds_old", Value: expireValue(c.OldExpireAfterSeconds)},
			bson.E{Key: "expireAfterSeconds_new", Value: expireValue(c.NewExpireAfterSeconds)})
	}
	return reply, nil
}

// expireValue is an expireAfterSeconds as collMod reports it: "off" when
// there is none.
func expireValue(v *int64) any {
	if v == nil {
		return "off"
	}
	return *v
}

// indexMod reads collMod's index: keyPattern or name, and
// expireAfterSeconds (a number: TypeMismatch, 14, otherwise; out of range
// InvalidOptions, 72; as over HTTP). hidden is
// refused: Hourglass's indexes cannot be hidden from the planner.
func indexMod(v bsoncore.Value) (timeseries.IndexMod, error) {
	var m timeseries.IndexMod
	d, ok := v.DocumentOK()
	if !ok {
		return m, mongoerr.New(mongoerr.InvalidOptions, "'index' must be a document: {keyPattern or name, expireAfterSeconds}")
	}
	seenExpire := false
	err := model.EachBSONElement(d, func(k string, e bsoncore.Value) error {
		switch k {
		case "name":
			n, ok := e.StringValueOK()
			if !ok || n == "" {
				return mongoerr.New(mongoerr.InvalidOptions, "'index.name' must be a non-empty string")
			}
			m.Name = n
		case "keyPattern":
			key, err := keyPattern(e, mongoerr.InvalidOptions, "index.keyPattern")
			if err != nil {
				return err
			}
			m.KeyPattern = key
		case "expireAfterSeconds":
			x, err := model.ValueFromBSON(k, e, 0)
			if err != nil {
				return mongoerr.New(mongoerr.InvalidOptions, "%s", mongoerr.MessageOf(err))
			}
			if m.ExpireAfterSeconds, err = timeseries.ParseExpireAfterSecondsOption("collMod.index.expireAfterSeconds", x); err != nil {
				return err
			}
			seenExpire = true
		default:
			return mongoerr.New(mongoerr.InvalidOptions, "unknown collMod index option %q; accepted: name, keyPattern, expireAfterSeconds", k)
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	if !seenExpire {
		return m, mongoerr.New(mongoerr.InvalidOptions, "'index.expireAfterSeconds' is required")
	}
	return m, nil
}

// cmdDropDatabase drops every collection, but only when the command names
// the database listDatabases reports (DatabaseName): every other name
// reaches the same collections, and a dropDatabase typed in a scratch
// database must not empty the server.
func cmdDropDatabase(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	switch cmd.db {
	case "admin", "local", "config":
		return nil, mongoerr.New(mongoerr.IllegalOperation, "Dropping the '%s' database is prohibited.", cmd.db)
	case DatabaseName:
	default:
		if err := checkDatabase(cmd.db); err != nil {
			return nil, err
		}
		return nil, mongoerr.New(mongoerr.IllegalOperation,
			"dropDatabase would drop every collection of this server: all database names but admin, local and config name the same collections. "+
				"Run it in database '%s' to mean that, or drop collections one by one", DatabaseName)
	}
	infos, err := s.db.ListCollections(cmd.ctx)
	if err != nil {
		return nil, err
	}
	for _, in := range infos {
		// Through the writer: on a replica set, each drop goes through
		// the log.
		err := s.w.DropCollection(cmd.ctx, in.Name)
		if err != nil && !errors.Is(err, mongoerr.New(mongoerr.NamespaceNotFound, "")) {
			return nil, err
		}
		s.log.Info("collection dropped", "collection", in.Name, "by", "dropDatabase")
	}
	return bson.D{{Key: "dropped", Value: cmd.db}}, nil
}
