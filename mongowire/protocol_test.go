package mongowire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// roundTrip sends msg on a new connection and returns the reply's opCode,
// its document and the whole reply message.
func roundTrip(t *testing.T, addr string, msg []byte) (wiremessage.OpCode, bson.Raw, []byte) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	var hb [headerLen]byte
	if _, err := io.ReadFull(nc, hb[:]); err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	length, _, _, op, _, _ := wiremessage.ReadHeader(hb[:])
	body := make([]byte, length-headerLen)
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatal(err)
	}
	full := append(hb[:], body...)
	switch op {
	case wiremessage.OpReply:
		doc, _, ok := wiremessage.ReadReplyDocument(body[20:])
		if !ok {
			t.Fatal("bad OP_REPLY")
		}
		return op, bson.Raw(doc), full
	case wiremessage.OpMsg:
		_, rem, _ := wiremessage.ReadMsgFlags(body)
		_, rem, _ = wiremessage.ReadMsgSectionType(rem)
		doc, _, ok := wiremessage.ReadMsgSectionSingleDocument(rem)
		if !ok {
			t.Fatal("bad OP_MSG reply")
		}
		return op, bson.Raw(doc), full
	}
	t.Fatalf("reply opCode %v", op)
	return 0, nil, nil
}

func opMsg(t *testing.T, cmd bson.D, checksum bool) []byte {
	t.Helper()
	b, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return appendOpMsg(nil, 7, 0, b, checksum)
}

func opQuery(t testing.TB, ns string, cmd bson.D) []byte {
	b, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	idx, dst := wiremessage.AppendHeaderStart(nil, 9, 0, wiremessage.OpQuery)
	dst = wiremessage.AppendQueryFlags(dst, 0)
	dst = wiremessage.AppendQueryFullCollectionName(dst, ns)
	dst = wiremessage.AppendQueryNumberToSkip(dst, 0)
	dst = wiremessage.AppendQueryNumberToReturn(dst, -1)
	dst = append(dst, b...)
	return bsoncore.UpdateLength(dst, idx, int32(len(dst)))
}

func TestProtocol(t *testing.T) {
	_, _, addr := startServer(t, Options{})

	t.Run("legacy handshake", func(t *testing.T) {
		op, doc, _ := roundTrip(t, addr, opQuery(t, "admin.$cmd", bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}}))
		if op != wiremessage.OpReply {
			t.Fatalf("OP_QUERY answered with %v, want OP_REPLY", op)
		}
		if v := doc.Lookup("ismaster"); !v.Boolean() {
			t.Fatalf("isMaster reply %v has no ismaster: true", doc)
		}
		if v := doc.Lookup("maxWireVersion").Int32(); v < 9 {
			t.Fatalf("maxWireVersion %d: the Go driver v2 needs 9 or more", v)
		}
		_, doc, _ = roundTrip(t, addr, opQuery(t, "test.$cmd", bson.D{{Key: "find", Value: "x"}}))
		if doc.Lookup("code").Int32() != 352 {
			t.Fatalf("find over OP_QUERY: %v, want code 352", doc)
		}
	})
	t.Run("hello", func(t *testing.T) {
		_, doc, _ := roundTrip(t, addr, opMsg(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}, false))
		if !doc.Lookup("isWritablePrimary").Boolean() || doc.Lookup("maxMessageSizeBytes").Int32() != MaxMessageSizeBytes ||
			doc.Lookup("maxBsonObjectSize").Int32() != MaxBSONObjectSize || doc.Lookup("ok").Double() != 1 {
			t.Fatalf("hello reply %v", doc)
		}
	})
	t.Run("checksum", func(t *testing.T) {
		msg := opMsg(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}, true)
		_, doc, full := roundTrip(t, addr, msg)
		if doc.Lookup("ok").Double() != 1 {
			t.Fatalf("ping with a checksum: %v", doc)
		}
		// The reply carries a checksum too, and it is right.
		flags := binary.LittleEndian.Uint32(full[headerLen:])
		if flags&uint32(flagChecksumPresent) == 0 {
			t.Fatal("the reply to a checksummed request has no checksum")
		}
		if _, err := decodeMessage(header{length: int32(len(full)), opCode: wiremessage.OpMsg,
			requestID: int32(binary.LittleEndian.Uint32(full[4:])), responseTo: int32(binary.LittleEndian.Uint32(full[8:]))}, full[headerLen:], nil); err != nil {
			t.Fatalf("the reply's checksum does not verify: %v", err)
		}
		msg[len(msg)-1] ^= 0xff
		_, doc, _ = roundTrip(t, addr, msg)
		if doc.Lookup("ok").Double() != 0 || !strings.Contains(doc.Lookup("errmsg").StringValue(), "checksum") {
			t.Fatalf("a bad checksum was answered with %v", doc)
		}
	})
	t.Run("unknown command", func(t *testing.T) {
		_, doc, _ := roundTrip(t, addr, opMsg(t, bson.D{{Key: "frobnicate", Value: 1}, {Key: "$db", Value: "test"}}, false))
		want := bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "no such command: 'frobnicate'"}, {Key: "code", Value: int32(59)}, {Key: "codeName", Value: "CommandNotFound"}}
		wb, _ := bson.Marshal(want)
		if string(doc) != string(wb) {
			t.Fatalf("unknown command answered %v, want %v", doc, bson.Raw(wb))
		}
	})
	t.Run("document too large", func(t *testing.T) {
		big := strings.Repeat("x", MaxBSONObjectSize)
		idx, dst := wiremessage.AppendHeaderStart(nil, 3, 0, wiremessage.OpMsg)
		dst = wiremessage.AppendMsgFlags(dst, 0)
		dst = wiremessage.AppendMsgSectionType(dst, wiremessage.SingleDocument)
		cmd, _ := bson.Marshal(bson.D{{Key: "insert", Value: "big"}, {Key: "$db", Value: "test"}})
		dst = append(dst, cmd...)
		dst = wiremessage.AppendMsgSectionType(dst, wiremessage.DocumentSequence)
		sidx, dst := bsoncore.ReserveLength(dst)
		dst = append(dst, "documents\x00"...)
		doc, _ := bson.Marshal(bson.D{{Key: "s", Value: big}})
		dst = append(dst, doc...)
		dst = bsoncore.UpdateLength(dst, sidx, int32(len(dst)-int(sidx)))
		dst = bsoncore.UpdateLength(dst, idx, int32(len(dst)))
		_, reply, _ := roundTrip(t, addr, dst)
		if reply.Lookup("code").Int32() != 10334 || !strings.Contains(reply.Lookup("errmsg").StringValue(), "maxBsonObjectSize") {
			t.Fatalf("an oversized document was answered with %v", reply)
		}
	})
	t.Run("message too large", func(t *testing.T) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		hdr := wiremessage.AppendHeader(nil, MaxMessageSizeBytes+1, 1, 0, wiremessage.OpMsg)
		nc.Write(hdr)
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := nc.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("a header over maxMessageSizeBytes: read %d, %v; want the connection closed", n, err)
		}
	})
}

// TestInsertWriteErrors: refused documents are reported in MongoDB's
// writeErrors shape; an ordered insert stops at the first, an unordered one
// stores the rest.
func TestInsertWriteErrors(t *testing.T) {
	db, _, addr := startServer(t, Options{})
	ctx := context.Background()
	cl := connect(t, addr, "")
	mdb := cl.Database("test")
	if err := mdb.CreateCollection(ctx, "m", options.CreateCollection().SetTimeSeriesOptions(options.TimeSeries().SetTimeField("t"))); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	docs := []any{bson.D{{Key: "t", Value: now}}, bson.D{{Key: "t", Value: "yesterday"}}, bson.D{{Key: "t", Value: now}}}
	for _, ordered := range []bool{true, false} {
		before, _ := db.DescribeShallow(ctx, "m")
		_, err := mdb.Collection("m").InsertMany(ctx, docs, options.InsertMany().SetOrdered(ordered))
		var bwe mongo.BulkWriteException
		if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 1 || bwe.WriteErrors[0].Code != 2 ||
			!strings.Contains(bwe.WriteErrors[0].Message, "'t' must be present and contain a valid date") {
			t.Fatalf("ordered=%v: %v", ordered, err)
		}
		want := 1
		if !ordered {
			want = 2
		}
		after, _ := db.DescribeShallow(ctx, "m")
		if got := after.Count - before.Count; got != int64(want) {
			t.Fatalf("ordered=%v: %d stored, want %d", ordered, got, want)
		}
	}
}

// TestListCollections: time-series options, type and nameOnly, and a
// filter, across both kinds of collection.
func TestListCollections(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	ctx := context.Background()
	mdb := connect(t, addr, "").Database("anyname")
	if err := mdb.CreateCollection(ctx, "ts", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("t").SetMetaField("m").SetGranularity("hours")).SetExpireAfterSeconds(3600)); err != nil {
		t.Fatal(err)
	}
	if err := mdb.CreateCollection(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	specs, err := mdb.ListCollectionSpecifications(ctx, bson.D{{Key: "type", Value: "timeseries"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 || specs[0].Name != "ts" || specs[0].Type != "timeseries" {
		t.Fatalf("listCollections {type: timeseries} = %+v", specs)
	}
	var opts struct {
		Expire int64 `bson:"expireAfterSeconds"`
		TS     struct {
			TimeField, MetaField, Granularity string
		} `bson:"timeseries"`
	}
	if err := bson.Unmarshal(specs[0].Options, &opts); err != nil {
		t.Fatal(err)
	}
	if opts.Expire != 3600 || opts.TS.TimeField != "t" || opts.TS.MetaField != "m" || opts.TS.Granularity != "hours" {
		t.Fatalf("options %v", specs[0].Options)
	}
	names, err := connect(t, addr, "").Database("other").ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "plain,ts" {
		t.Fatalf("another database name lists %v, want the same collections", names)
	}
	dbs, err := connect(t, addr, "").ListDatabaseNames(ctx, bson.D{})
	if err != nil || strings.Join(dbs, ",") != DatabaseName {
		t.Fatalf("listDatabases = %v, %v", dbs, err)
	}
}

// TestCursors: getMore pages through a plain collection's find, killCursors
// closes a cursor, and an idle cursor is closed by the reaper.
func TestCursors(t *testing.T) {
	_, srv, addr := startServer(t, Options{})
	ctx := context.Background()
	coll := connect(t, addr, "").Database("test").Collection("docs")
	var docs []any
	for i := range 250 {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "v", Value: i % 7}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{{Key: "v", Value: bson.D{{Key: "$lt", Value: 3}}}}, options.Find().SetBatchSize(20).SetSort(bson.D{{Key: "_id", Value: -1}}).SetSkip(5))
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		ID int64 `bson:"_id"`
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	var want []int64
	for i := 249; i >= 0; i-- {
		if i%7 < 3 {
			want = append(want, int64(i))
		}
	}
	want = want[5:]
	if len(got) != len(want) || got[0].ID != want[0] || got[len(got)-1].ID != want[len(want)-1] {
		t.Fatalf("find returned %d documents from %v, want %d from %d", len(got), got[:1], len(want), want[0])
	}
	if srv.cursors.len() != 0 {
		t.Fatalf("%d cursors open after an exhausted find", srv.cursors.len())
	}

	// Killed: the next getMore does not find it.
	cur, err = coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if srv.cursors.len() != 1 {
		t.Fatalf("%d cursors open, want 1", srv.cursors.len())
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.cursors.len() != 0 {
		t.Fatalf("%d cursors open after killCursors", srv.cursors.len())
	}

	// Idle: the reaper closes it, and getMore says so.
	cur, err = coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.cursors.reapIdle(time.Now(), time.Hour); n != 0 {
		t.Fatalf("reaped %d cursors used just now", n)
	}
	if n := srv.cursors.reapIdle(time.Now().Add(DefaultCursorTimeout), DefaultCursorTimeout); n != 1 {
		t.Fatalf("reaped %d idle cursors, want 1", n)
	}
	for cur.Next(ctx) {
	}
	var ce mongo.CommandError
	if !errors.As(cur.Err(), &ce) || ce.Code != 43 || ce.Name != "CursorNotFound" {
		t.Fatalf("getMore on a reaped cursor: %v, want CursorNotFound", cur.Err())
	}
}

// TestCompressedRoundTrip: a message compressed with each algorithm decodes
// to the same command, and a bad announced size is refused.
func TestCompressedRoundTrip(t *testing.T) {
	cmd, _ := bson.Marshal(bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "test"}, {Key: "pad", Value: strings.Repeat("ab", 500)}})
	plain := appendOpMsg(nil, 5, 0, cmd, false)
	for _, id := range []wiremessage.CompressorID{wiremessage.CompressorNoOp, wiremessage.CompressorSnappy, wiremessage.CompressorZLib, wiremessage.CompressorZstd} {
		msg := compressMessage(nil, plain, id)
		h, err := readHeader(bytes.NewReader(msg), make([]byte, headerLen))
		if err != nil || h.opCode != wiremessage.OpCompressed {
			t.Fatalf("%v: header %+v, %v", id, h, err)
		}
		req, err := decodeMessage(h, msg[headerLen:], nil)
		if err != nil {
			t.Fatalf("%v: %v", id, err)
		}
		if req.opCode != wiremessage.OpMsg || req.compressor != id || !bytes.Equal(req.body, cmd) {
			t.Fatalf("%v: decoded %v (opCode %v, compressor %v)", id, bson.Raw(req.body), req.opCode, req.compressor)
		}
		// The uncompressed size is at offset 4 of the body.
		binary.LittleEndian.PutUint32(msg[headerLen+4:], uint32(len(plain)-headerLen+1))
		if _, err := decodeMessage(h, msg[headerLen:], nil); err == nil {
			t.Fatalf("%v: a wrong uncompressed size was accepted", id)
		}
	}
}

// TestAuthTokenGate: with an auth token, a client that does not
// authenticate gets only the handshake commands; one that authenticates
// with SCRAM-SHA-256 as hourglass with the token as password gets every
// command, in the same connection, speculatively in hello or with
// saslStart; a wrong password or user fails with AuthenticationFailed (18).
func TestAuthTokenGate(t *testing.T) {
	_, _, addr := startServer(t, Options{AuthToken: "s3cret-token"})
	ctx := context.Background()
	cl := connect(t, addr, "")
	if err := cl.Ping(ctx, nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	_, err := cl.Database("test").ListCollectionNames(ctx, bson.D{})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 13 || ce.Name != "Unauthorized" {
		t.Fatalf("listCollections without authentication: %v, want Unauthorized", err)
	}

	for _, extra := range []string{"", "&authMechanism=SCRAM-SHA-256", "&authSource=test"} {
		cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://hourglass:s3cret-token@" + addr + "/?directConnection=true&serverSelectionTimeoutMS=5000" + extra))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Database("test").CreateCollection(ctx, fmt.Sprintf("c%d", len(extra))); err != nil {
			t.Errorf("%q: create after authentication: %v", extra, err)
		}
		var st struct {
			AuthInfo struct {
				Users []struct {
					User string `bson:"user"`
				} `bson:"authenticatedUsers"`
			} `bson:"authInfo"`
		}
		if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "connectionStatus", Value: 1}}).Decode(&st); err != nil ||
			len(st.AuthInfo.Users) != 1 || st.AuthInfo.Users[0].User != "hourglass" {
			t.Errorf("%q: connectionStatus = %+v, %v", extra, st, err)
		}
		cl.Disconnect(ctx)
	}

	for _, uri := range []string{"hourglass:wrong@", "admin:s3cret-token@", "hourglass:s3cret-token@"} {
		extra := ""
		if uri == "hourglass:s3cret-token@" {
			extra = "&authMechanism=SCRAM-SHA-1" // not offered
		}
		cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + uri + addr + "/?directConnection=true&serverSelectionTimeoutMS=2000" + extra))
		if err != nil {
			t.Fatal(err)
		}
		err = cl.Ping(ctx, nil)
		cl.Disconnect(ctx)
		want := "(AuthenticationFailed) Authentication failed."
		if extra != "" {
			want = "(MechanismUnavailable)"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s%s: %v, want %s", uri, extra, err, want)
		}
	}
}

// TestSpeculativeAuthentication runs SCRAM-SHA-256 by hand on one
// connection: the client's first message in hello's
// speculativeAuthenticate, its final one in saslContinue, then a command
// that needs authentication.
func TestSpeculativeAuthentication(t *testing.T) {
	_, _, addr := startServer(t, Options{AuthToken: "tok"})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	send := func(cmd bson.D) bson.Raw {
		t.Helper()
		if _, err := nc.Write(opMsg(t, cmd, false)); err != nil {
			t.Fatal(err)
		}
		var hb [headerLen]byte
		if _, err := io.ReadFull(nc, hb[:]); err != nil {
			t.Fatal(err)
		}
		length, _, _, _, _, _ := wiremessage.ReadHeader(hb[:])
		body := make([]byte, length-headerLen)
		if _, err := io.ReadFull(nc, body); err != nil {
			t.Fatal(err)
		}
		_, rem, _ := wiremessage.ReadMsgFlags(body)
		_, rem, _ = wiremessage.ReadMsgSectionType(rem)
		doc, _, _ := wiremessage.ReadMsgSectionSingleDocument(rem)
		return bson.Raw(doc)
	}
	client, err := scram.SHA256.NewClient("hourglass", "tok", "")
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	first, _ := conv.Step("")
	hello := send(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "saslSupportedMechs", Value: "admin.hourglass"},
		{Key: "speculativeAuthenticate", Value: bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-256"},
			{Key: "payload", Value: bson.Binary{Data: []byte(first)}}, {Key: "db", Value: "admin"}}}})
	if mechs := hello.Lookup("saslSupportedMechs").String(); mechs != `["SCRAM-SHA-256"]` {
		t.Errorf("saslSupportedMechs = %s", mechs)
	}
	spec, ok := hello.Lookup("speculativeAuthenticate").DocumentOK()
	if !ok {
		t.Fatalf("hello answered no speculativeAuthenticate: %v", hello)
	}
	_, serverFirst := spec.Lookup("payload").Binary()
	final, err := conv.Step(string(serverFirst))
	if err != nil {
		t.Fatal(err)
	}
	if r := send(bson.D{{Key: "listCollections", Value: 1}, {Key: "$db", Value: "test"}}); r.Lookup("code").Int32() != 13 {
		t.Errorf("listCollections before the final message: %v, want Unauthorized", r)
	}
	done := send(bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: spec.Lookup("conversationId")},
		{Key: "payload", Value: bson.Binary{Data: []byte(final)}}, {Key: "$db", Value: "admin"}})
	_, serverFinal := done.Lookup("payload").Binary()
	if _, err := conv.Step(string(serverFinal)); err != nil || !conv.Valid() || !done.Lookup("done").Boolean() {
		t.Fatalf("saslContinue = %v; the server's signature: %v", done, err)
	}
	if r := send(bson.D{{Key: "listCollections", Value: 1}, {Key: "$db", Value: "test"}}); r.Lookup("ok").Double() != 1 {
		t.Errorf("listCollections after authentication: %v", r)
	}
}
