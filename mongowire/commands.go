package mongowire

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// Codes of the wire protocol's own answers.
const (
	codeCursorNotFound            = mongoerr.CursorNotFound
	codeCommandNotFound           = mongoerr.CommandNotFound
	codeUnsupportedOpQueryCommand = mongoerr.UnsupportedOpQueryCommand
)

// The server's identity in hello and buildInfo: MongoDB 7.0's wire version
// (time-series collections with custom bucketing, expireAfterSeconds on
// them). The Go driver v2 needs at least 9 (MongoDB 4.4).
const (
	serverVersion  = "7.0.0"
	maxWireVersion = 21
)

// DatabaseName is the database listDatabases reports: every database name
// but admin, local and config names the same collections (docs/mongodb.md).
const DatabaseName = "hourglass"

// command is a request being answered.
type wireCommand struct {
	ctx  context.Context
	name string
	db   string
	body bsoncore.Document
	seqs []sequence
	// legacy is an OP_QUERY handshake.
	legacy bool
	// conn is the id of the connection it came on.
	conn int64
}

type handler func(s *Server, c *conn, cmd *wireCommand) (bson.D, error)

// handlers maps command names, as MongoDB spells them, to their
// implementation.
var handlers = map[string]handler{
	"hello": cmdHello, "isMaster": cmdHello, "ismaster": cmdHello,
	"ping": cmdPing, "buildInfo": cmdBuildInfo, "buildinfo": cmdBuildInfo,
	"connectionStatus": cmdConnectionStatus, "endSessions": cmdPing,
	"listDatabases": cmdListDatabases, "listCollections": cmdListCollections,
	"create": cmdCreate, "drop": cmdDrop, "insert": cmdInsert,
	"find": cmdFind, "getMore": cmdGetMore, "killCursors": cmdKillCursors,
	"createIndexes": cmdCreateIndexes, "listIndexes": cmdListIndexes, "dropIndexes": cmdDropIndexes,
	"collMod": cmdCollMod, "dropDatabase": cmdDropDatabase,
	"getParameter": cmdGetParameter, "setParameter": cmdSetParameter,
	"serverStatus": cmdServerStatus, "currentOp": cmdCurrentOp,
	"saslStart": cmdSaslStart, "saslContinue": cmdSaslContinue,
	"replSetGetStatus": cmdReplSetGetStatus,
	"count":            cmdCount, "aggregate": cmdAggregate, "distinct": cmdDistinct, "delete": cmdDelete, "update": cmdUpdate,
}

// preAuth are the commands answered without authentication.
var preAuth = map[string]bool{"hello": true, "isMaster": true, "ismaster": true, "ping": true, "buildInfo": true, "buildinfo": true, "endSessions": true, "connectionStatus": true,
	"saslStart": true, "saslContinue": true}

// handle runs a request and returns the reply document.
func (c *conn) handle(req *request) []byte {
	s := c.s
	cmd := &wireCommand{ctx: context.Background(), body: req.body, seqs: req.seqs, conn: c.id}
	first, ok := firstElement(req.body)
	if !ok {
		return s.errorDoc(mongoerr.New(mongoerr.BadValue, "empty command document"))
	}
	cmd.name = first
	if req.opCode == wiremessage.OpQuery {
		// MongoDB 6 and later answer only the handshake over OP_QUERY.
		cmd.legacy = true
		if !strings.HasSuffix(req.ns, ".$cmd") || (first != "hello" && first != "isMaster" && first != "ismaster") {
			return s.errorDoc(mongoerr.New(codeUnsupportedOpQueryCommand,
				"Unsupported OP_QUERY command: %s. The client driver may require an upgrade.", first))
		}
		cmd.db, _, _ = strings.Cut(req.ns, ".")
	} else {
		v, err := req.body.LookupErr("$db")
		db, ok := v.StringValueOK()
		if err != nil || !ok || db == "" {
			return s.errorDoc(mongoerr.New(mongoerr.BadValue, "OP_MSG command %q has no '$db' string", first))
		}
		cmd.db = db
	}
	h, ok := handlers[first]
	if !ok {
		return s.errorDoc(mongoerr.New(codeCommandNotFound, "no such command: '%s'", first))
	}
	if s.commandHook != nil {
		s.commandHook(first)
	}
	if s.scram != nil && c.user == "" && !preAuth[first] {
		return s.errorDoc(mongoerr.New(mongoerr.Unauthorized,
			"Command %s requires authentication: connect as user '%s' with the server's auth token as the password (SCRAM-SHA-256)", first, AuthUser))
	}
	if err := s.replicaCheck(cmd); err != nil {
		return s.errorDoc(err)
	}
	if v, err := req.body.LookupErr("txnNumber"); err == nil {
		if s.opts.ReplicaSet == nil {
			return s.errorDoc(mongoerr.New(mongoerr.IllegalOperation, "Transaction numbers are only allowed on a replica set member or mongos"))
		}
		ctx, err := retryableWrite(cmd, first, v)
		if err != nil {
			return s.errorDoc(err)
		}
		cmd.ctx = ctx
	}
	if err := s.readConcern(cmd, first); err != nil {
		return s.errorDoc(err)
	}
	s.opcounters.count(first)
	o := s.beginOp(c, cmd)
	reply, err := h(s, c, cmd)
	s.cmd.Ops().End(o)
	if err != nil {
		return s.errorDoc(err)
	}
	if len(reply) == 1 && reply[0].Key == rawReplyKey {
		return s.withOperationTime(reply[0].Value.(bson.Raw))
	}
	return s.withOperationTime(marshal(append(reply, bson.E{Key: "ok", Value: 1.0})))
}

// A replica set member's replies carry operationTime: the last log entry
// its engine had applied, as a BSON timestamp (high and low 32 bits of
// the index). A driver's causally consistent session sends the newest it
// saw back as readConcern.afterClusterTime, and a member waits until it
// has applied that far before it reads (readConcern), so that a
// read on a secondary sees the session's earlier writes.

// withOperationTime appends operationTime to a reply on a replica set.
func (s *Server) withOperationTime(doc []byte) []byte {
	rs := s.opts.ReplicaSet
	if rs == nil || len(doc) < 5 {
		return doc
	}
	i := rs.Node.AppliedIndex()
	out := make([]byte, 0, len(doc)+32)
	out = append(out, doc[:len(doc)-1]...)
	out = bsoncore.AppendTimestampElement(out, "operationTime", uint32(i>>32), uint32(i))
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// readConcern decodes a read's readConcern, $readPreference and
// maxTimeMS into the command layer's ReadConcern and applies it before
// the read (command.Service.BeforeRead):
//
//   - a secondary serves the read only when $readPreference allows it
//     (a mode other than primary), else NotPrimaryNoSecondaryOk;
//   - level local, available or majority (or none) reads what this member
//     has applied: only committed entries are applied, so it is majority
//     committed whatever the level;
//   - linearizable, on a replica set, reads on the primary only, once a
//     majority has confirmed it still leads and it has applied everything
//     committed when the read arrived;
//   - snapshot is refused (InvalidOptions): there are no point-in-time
//     reads;
//   - afterClusterTime (a BSON timestamp of operationTime's form) makes the
//     read wait until this member has applied the log up to it.
//
// The waits are bounded by the command's maxTimeMS, else 10 s, and then
// fail with MaxTimeMSExpired (50). Outside a replica set nothing is
// waited for.
func (s *Server) readConcern(cmd *wireCommand, name string) error {
	if !secondaryReads[name] {
		return nil
	}
	rc := command.ReadConcern{SecondaryOK: secondaryOk(cmd), AfterName: "afterClusterTime"}
	if mt, err := cmd.body.LookupErr("maxTimeMS"); err == nil {
		if ms, ok := mt.AsInt64OK(); ok && ms > 0 {
			rc.Wait = time.Duration(ms) * time.Millisecond
		}
	}
	if v, err := cmd.body.LookupErr("readConcern"); err == nil {
		doc, ok := v.DocumentOK()
		if !ok {
			return mongoerr.New(mongoerr.TypeMismatch, "readConcern must be a document")
		}
		var level string
		if v, err := doc.LookupErr("level"); err == nil {
			if level, ok = v.StringValueOK(); !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "readConcern.level must be a string")
			}
		}
		after, hasAfter := doc.LookupErr("afterClusterTime")
		switch level {
		case "", "local", "available", "majority":
		case "linearizable":
			if hasAfter == nil {
				return mongoerr.New(mongoerr.InvalidOptions, "readConcern level linearizable does not take afterClusterTime")
			}
			rc.Linearizable = true
		case "snapshot":
			return mongoerr.New(mongoerr.InvalidOptions, "readConcern level snapshot is not supported: Hourglass has no point-in-time reads; use local or majority")
		default:
			return mongoerr.New(mongoerr.BadValue, "readConcern level %q is not one of local, available, majority, linearizable, snapshot", level)
		}
		if hasAfter == nil {
			t, inc, ok := after.TimestampOK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "readConcern.afterClusterTime must be a timestamp")
			}
			rc.AfterIndex = uint64(t)<<32 | uint64(inc)
		}
	}
	return s.cmd.BeforeRead(cmd.ctx, rc)
}

// retryableWrites are the commands a session's txnNumber makes retryable.
var retryableWrites = map[string]bool{"insert": true, "update": true, "delete": true}

// retryableWrite returns the context under which a retryable write runs
// on a replica set: its statements carry the session and transaction
// number through the log, and a retry (the same lsid and txnNumber, as a
// driver sends after a failover) gets the first attempt's results
// instead of writing again (command.Retryable). Transactions are
// refused.
func retryableWrite(cmd *wireCommand, name string, txn bsoncore.Value) (context.Context, error) {
	for _, k := range []string{"autocommit", "startTransaction"} {
		if _, err := cmd.body.LookupErr(k); err == nil {
			return nil, mongoerr.New(mongoerr.IllegalOperation, "Hourglass does not support multi-document transactions")
		}
	}
	if !retryableWrites[name] {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "%s is not a retryable write in Hourglass (txnNumber): connect with retryWrites=false for it", name)
	}
	n, ok := txn.AsInt64OK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "txnNumber must be a number")
	}
	lsid, err := cmd.body.LookupErr("lsid", "id")
	if err != nil {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "a txnNumber needs a session: 'lsid.id'")
	}
	_, id, ok := lsid.BinaryOK()
	if !ok || len(id) == 0 {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "'lsid.id' must be a UUID")
	}
	return command.Retryable(cmd.ctx, hex.EncodeToString(id), n), nil
}

func firstElement(doc bsoncore.Document) (string, bool) {
	var name string
	model.EachBSONElement(doc, func(k string, _ bsoncore.Value) error {
		name = k
		return errStop
	})
	return name, name != ""
}

var errStop = errors.New("stop")

// errorDoc is MongoDB's error reply for err. Errors that carry no code are
// internal faults: the client sees a generic message and the log the
// details.
func (s *Server) errorDoc(err error) []byte {
	c := s.classify(err)
	return marshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: document.ValidUTF8(c.Message)},
		{Key: "code", Value: int32(c.Code)}, {Key: "codeName", Value: c.CodeName}})
}

// classify is the command layer's classification of err at this door,
// with internal faults logged.
func (s *Server) classify(err error) command.Class {
	c := s.cmd.Classify(err, command.MongoDB)
	if c.Internal {
		s.log.Error("command failed", "err", err)
	}
	return c
}

// collectionName reads the collection a command names as its first value,
// in a database that holds collections.
func (cmd *wireCommand) collectionName() (string, error) {
	if err := checkDatabase(cmd.db); err != nil {
		return "", err
	}
	v, err := cmd.body.LookupErr(cmd.name)
	name, ok := v.StringValueOK()
	if err != nil || !ok {
		return "", mongoerr.New(mongoerr.BadValue, "collection name has invalid type %s", v.Type)
	}
	if err := timeseries.ValidateName(name); err != nil {
		return "", mongoerr.New(mongoerr.InvalidNamespace, "Invalid namespace specified '%s.%s': %v", cmd.db, name, err)
	}
	return name, nil
}

// checkDatabase refuses the databases MongoDB keeps for itself: Hourglass
// has one namespace of collections, reached through any other name.
func checkDatabase(db string) error {
	switch db {
	case "admin", "local", "config":
		return mongoerr.New(mongoerr.InvalidNamespace,
			"database '%s' holds no collections in Hourglass; every other database name (e.g. '%s') names its collections", db, DatabaseName)
	}
	if strings.ContainsAny(db, "/\\. \"$\x00") {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid database name: '%s'", db)
	}
	return nil
}

// collectionArgs is collectionName and args, for the commands that name a
// collection and take arguments.
func (cmd *wireCommand) collectionArgs() (string, map[string]any, error) {
	name, err := cmd.collectionName()
	if err != nil {
		return "", nil, err
	}
	args, err := cmd.args()
	return name, args, err
}

// args decodes the command's fields other than its name and the generic
// ones (session, read and write concerns, API version), with the kind-1
// sequences merged in as arrays, into the engine's value set.
func (cmd *wireCommand) args() (map[string]any, error) {
	m := make(map[string]any)
	err := model.EachBSONElement(cmd.body, func(key string, v bsoncore.Value) error {
		if key == cmd.name || genericFields[key] {
			return nil
		}
		x, err := model.ValueFromBSON(key, v, 0)
		m[key] = x
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, sq := range cmd.seqs {
		if _, dup := m[sq.id]; dup {
			return nil, mongoerr.New(mongoerr.BadValue, "'%s' is given both in the command and as a document sequence", sq.id)
		}
		arr := make([]any, len(sq.docs))
		for i, d := range sq.docs {
			if arr[i], err = model.FromBSON(d); err != nil {
				return nil, err
			}
		}
		m[sq.id] = arr
	}
	return m, nil
}

// genericFields are accepted on every command and not interpreted: there
// is one server, writes are durable when acknowledged, and sessions carry
// no state.
var genericFields = map[string]bool{"$db": true, "lsid": true, "$clusterTime": true, "$readPreference": true,
	"writeConcern": true, "readConcern": true, "apiVersion": true, "apiStrict": true, "apiDeprecationErrors": true,
	"comment": true, "maxTimeMS": true, "$audit": true, "$client": true, "txnNumber": true}

func cmdHello(s *Server, c *conn, cmd *wireCommand) (bson.D, error) {
	primary := "isWritablePrimary"
	if cmd.name != "hello" {
		primary = "ismaster"
	}
	d := bson.D{
		{Key: "helloOk", Value: true},
		{Key: primary, Value: true},
		{Key: "maxBsonObjectSize", Value: int32(MaxBSONObjectSize)},
		{Key: "maxMessageSizeBytes", Value: int32(MaxMessageSizeBytes)},
		{Key: "maxWriteBatchSize", Value: int32(MaxWriteBatchSize)},
		{Key: "localTime", Value: time.Now()},
		{Key: "logicalSessionTimeoutMinutes", Value: int32(30)},
		{Key: "connectionId", Value: c.id},
		{Key: "minWireVersion", Value: int32(0)},
		{Key: "maxWireVersion", Value: int32(maxWireVersion)},
		{Key: "readOnly", Value: false},
	}
	// Compression: the client's algorithms this server has, in the
	// client's order.
	if v, err := cmd.body.LookupErr("compression"); err == nil {
		if arr, ok := v.ArrayOK(); ok {
			var agreed bson.A
			vals, _ := arr.Values()
			for _, e := range vals {
				if name, ok := e.StringValueOK(); ok {
					if _, have := compressorIDs[name]; have {
						agreed = append(agreed, name)
					}
				}
			}
			if len(agreed) > 0 {
				d = append(d, bson.E{Key: "compression", Value: agreed})
			}
		}
	}
	return c.helloAuth(cmd, s.helloReplica(d, primary)), nil
}

func cmdPing(*Server, *conn, *wireCommand) (bson.D, error) { return bson.D{}, nil }

func cmdBuildInfo(s *Server, _ *conn, _ *wireCommand) (bson.D, error) {
	return bson.D{
		{Key: "version", Value: serverVersion},
		{Key: "versionArray", Value: bson.A{int32(7), int32(0), int32(0), int32(0)}},
		{Key: "gitVersion", Value: ""},
		{Key: "hourglassVersion", Value: s.opts.Version},
		{Key: "bits", Value: int32(64)},
		{Key: "maxBsonObjectSize", Value: int32(MaxBSONObjectSize)},
		{Key: "storageEngines", Value: bson.A{"hourglass"}},
	}, nil
}

func cmdConnectionStatus(_ *Server, c *conn, _ *wireCommand) (bson.D, error) {
	users, roles := bson.A{}, bson.A{}
	if c.user != "" {
		users = append(users, bson.D{{Key: "user", Value: c.user}, {Key: "db", Value: "admin"}})
		roles = append(roles, bson.D{{Key: "role", Value: "root"}, {Key: "db", Value: "admin"}})
	}
	return bson.D{{Key: "authInfo", Value: bson.D{
		{Key: "authenticatedUsers", Value: users},
		{Key: "authenticatedUserRoles", Value: roles},
	}}}, nil
}

func cmdListDatabases(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	args, err := cmd.args()
	if err != nil {
		return nil, err
	}
	infos, err := s.db.ListCollections(cmd.ctx)
	if err != nil {
		return nil, err
	}
	var size int64
	for _, in := range infos {
		size += in.StorageBytes
	}
	entry := map[string]any{"name": DatabaseName, "sizeOnDisk": size, "empty": len(infos) == 0}
	if err := matchArg(args, "filter", entry); err != nil {
		if errors.Is(err, errNoMatch) {
			return bson.D{{Key: "databases", Value: bson.A{}}, {Key: "totalSize", Value: int64(0)}}, nil
		}
		return nil, err
	}
	if nameOnly, _ := args["nameOnly"].(bool); nameOnly {
		return bson.D{{Key: "databases", Value: bson.A{bson.D{{Key: "name", Value: DatabaseName}}}}}, nil
	}
	return bson.D{
		{Key: "databases", Value: bson.A{bson.D{{Key: "name", Value: DatabaseName}, {Key: "sizeOnDisk", Value: size}, {Key: "empty", Value: len(infos) == 0}}}},
		{Key: "totalSize", Value: size},
		{Key: "totalSizeMb", Value: size >> 20},
	}, nil
}

var errNoMatch = errors.New("no match")

// matchArg applies the filter args[key], if any, to doc: errNoMatch when
// it does not match, BadValue when it is not a filter.
func matchArg(args map[string]any, key string, doc map[string]any) error {
	v, ok := args[key]
	if !ok || v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "'%s' must be a document", key)
	}
	f, err := partialfilter.Parse(m)
	if err != nil {
		return err
	}
	if !f.Match(doc) {
		return errNoMatch
	}
	return nil
}

func cmdListCollections(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	args, err := cmd.args()
	if err != nil {
		return nil, err
	}
	var infos []timeseries.CollectionInfo
	if checkDatabase(cmd.db) == nil {
		if infos, err = s.db.ListCollections(cmd.ctx); err != nil {
			return nil, err
		}
	}
	nameOnly, _ := args["nameOnly"].(bool)
	batch := bson.A{}
	for _, in := range infos {
		entry := collectionEntry(in)
		if err := matchArg(args, "filter", entry); err != nil {
			if errors.Is(err, errNoMatch) {
				continue
			}
			return nil, err
		}
		if nameOnly {
			entry = map[string]any{"name": entry["name"], "type": entry["type"]}
		}
		batch = append(batch, bson.Raw(mapDocument(entry)))
	}
	return cursorReply(0, cmd.db+".$cmd.listCollections", "firstBatch", batch), nil
}

// collectionEntry describes a collection as listCollections does.
func collectionEntry(in timeseries.CollectionInfo) map[string]any {
	opts := map[string]any{}
	o := in.Options
	if o.ExpireAfterSeconds != nil {
		opts["expireAfterSeconds"] = *o.ExpireAfterSeconds
	}
	if o.Capped {
		opts["capped"] = true
		if o.Size > 0 {
			opts["size"] = o.Size
		}
		if o.Max > 0 {
			opts["max"] = o.Max
		}
	}
	entry := map[string]any{"name": in.Name, "type": "collection", "options": opts,
		"info": map[string]any{"readOnly": false}}
	if ts := o.TimeSeries; ts != nil {
		t := map[string]any{"timeField": ts.TimeField, "bucketMaxSpanSeconds": ts.Span() / int64(time.Second)}
		if ts.MetaField != "" {
			t["metaField"] = ts.MetaField
		}
		if ts.Granularity != "" {
			t["granularity"] = string(ts.Granularity)
		} else {
			t["bucketRoundingSeconds"] = ts.Rounding() / int64(time.Second)
		}
		opts["timeseries"] = t
		entry["type"] = "timeseries"
	} else {
		entry["idIndex"] = map[string]any{"v": int64(2), "key": map[string]any{"_id": int64(1)}, "name": "_id_"}
	}
	return entry
}

// cursorReply is the cursor document of find, getMore and the list
// commands.
// batch is a bson.A or a BSON array (bson.RawValue).
func cursorReply(id int64, ns, batchKey string, batch any) bson.D {
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: batchKey, Value: batch}, {Key: "id", Value: id}, {Key: "ns", Value: ns},
	}}}
}

func cmdCreate(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, args, err := cmd.collectionArgs()
	if err != nil {
		return nil, err
	}
	opts, err := timeseries.ParseCollectionOptions(args)
	if err != nil {
		return nil, err
	}
	created, err := s.w.CreateCollection(cmd.ctx, name, opts)
	if err != nil {
		return nil, err
	}
	if !created {
		// MongoDB answers a create with the options the collection has as
		// a success.
		return bson.D{{Key: "note", Value: fmt.Sprintf("collection '%s' already exists with these options", name)}}, nil
	}
	return bson.D{}, nil
}

func cmdDrop(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	name, err := cmd.collectionName()
	if err != nil {
		return nil, err
	}
	err = s.w.DropCollection(cmd.ctx, name)
	if errors.Is(err, mongoerr.New(mongoerr.NamespaceNotFound, "")) {
		// MongoDB 7.0 drops a missing collection without error.
		return bson.D{}, nil
	}
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "ns", Value: cmd.db + "." + name}, {Key: "nIndexesWas", Value: int32(1)}}, nil
}
