package mongowire

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/timeseries"
)

// rawCommand builds a command document element by element, so that keys
// and strings can hold any bytes.
func rawCommand(build func(dst []byte) []byte) []byte {
	idx, dst := bsoncore.AppendDocumentStart(nil)
	dst = build(dst)
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

// checkReply fails unless reply is a whole, valid BSON document whose keys
// and strings are all UTF-8, at every depth.
func checkReply(t testing.TB, reply []byte) {
	t.Helper()
	if _, err := readDocument(reply, len(reply)); err != nil || int(int32(len(reply))) != len(reply) {
		t.Fatalf("reply is not valid BSON with UTF-8 strings: %v\n%q", err, reply)
	}
}

// TestInvalidUTF8Refused: a key or string that is not UTF-8, anywhere in
// a command (its name, a document inserted into either kind of
// collection, a filter, at any depth), is refused with InvalidBSON (22)
// in a reply that is itself valid, and nothing is stored.
func TestInvalidUTF8Refused(t *testing.T) {
	db, _, addr := startServer(t, Options{})
	ctx := context.Background()
	if _, err := db.CreateCollection(ctx, "ts", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "plain", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	insert := func(coll string, doc func(dst []byte) []byte) []byte {
		return rawCommand(func(dst []byte) []byte {
			dst = bsoncore.AppendStringElement(dst, "insert", coll)
			aidx, dst := bsoncore.AppendArrayElementStart(dst, "documents")
			didx, dst := bsoncore.AppendDocumentElementStart(dst, "0")
			dst = doc(dst)
			dst, _ = bsoncore.AppendDocumentEnd(dst, didx)
			dst, _ = bsoncore.AppendArrayEnd(dst, aidx)
			return bsoncore.AppendStringElement(dst, "$db", "test")
		})
	}
	cases := map[string][]byte{
		"string value, time series": insert("ts", func(d []byte) []byte {
			d = bsoncore.AppendDateTimeElement(d, "t", at)
			return bsoncore.AppendStringElement(d, "s", "caf\xe9")
		}),
		"meta value, time series": insert("ts", func(d []byte) []byte {
			d = bsoncore.AppendDateTimeElement(d, "t", at)
			return bsoncore.AppendStringElement(d, "m", "\xff")
		}),
		"field name, plain": insert("plain", func(d []byte) []byte {
			return bsoncore.AppendInt32Element(d, "k\xc3", 1)
		}),
		"nested string, plain": insert("plain", func(d []byte) []byte {
			idx, d := bsoncore.AppendDocumentElementStart(d, "sub")
			aidx, d := bsoncore.AppendArrayElementStart(d, "a")
			d = bsoncore.AppendStringElement(d, "0", "ok")
			d = bsoncore.AppendStringElement(d, "1", "\xed\xa0\x80") // an encoded surrogate
			d, _ = bsoncore.AppendArrayEnd(d, aidx)
			d, _ = bsoncore.AppendDocumentEnd(d, idx)
			return d
		}),
		"regular expression in a filter": rawCommand(func(d []byte) []byte {
			d = bsoncore.AppendStringElement(d, "find", "plain")
			idx, d := bsoncore.AppendDocumentElementStart(d, "filter")
			d = bsoncore.AppendRegexElement(d, "k", "^\xff", "")
			d, _ = bsoncore.AppendDocumentEnd(d, idx)
			return bsoncore.AppendStringElement(d, "$db", "test")
		}),
		"command name": rawCommand(func(d []byte) []byte {
			d = bsoncore.AppendInt32Element(d, "nosuch\xff", 1)
			return bsoncore.AppendStringElement(d, "$db", "test")
		}),
	}
	for name, cmd := range cases {
		t.Run(name, func(t *testing.T) {
			_, doc, full := roundTrip(t, addr, appendOpMsg(nil, 1, 0, cmd, false))
			checkReply(t, full[headerLen+5:])
			if code, _ := doc.Lookup("code").AsInt64OK(); code != 22 || doc.Lookup("codeName").StringValue() != "InvalidBSON" ||
				!strings.Contains(doc.Lookup("errmsg").StringValue(), "UTF-8") {
				t.Fatalf("reply %v, want InvalidBSON", doc)
			}
		})
	}
	for _, coll := range []string{"ts", "plain"} {
		if info, err := db.Describe(ctx, coll); err != nil || info.Count != 0 {
			t.Errorf("%s: %d documents stored, %v", coll, info.Count, err)
		}
	}
}

// TestInvalidUTF8StoredReadable: strings and field names stored before
// they were checked on the way in (written here through the engine, which
// the doors stand in front of) are read back with U+FFFD in place of the
// bytes that are not UTF-8, so that drivers can decode the replies.
func TestInvalidUTF8StoredReadable(t *testing.T) {
	db, _, addr := startServer(t, Options{})
	ctx := context.Background()
	if _, err := db.CreateCollection(ctx, "ts", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "plain", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := db.Insert(ctx, "ts", timeseries.Batch{Measurements: []model.Measurement{{Time: at.UnixNano(), Meta: map[string]any{"id": "s\xff"},
		Fields: []model.Field{{Name: "s", Value: model.String("caf\xe9")}}}}}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Insert(ctx, "plain", timeseries.Batch{Documents: []document.Doc{{"_id": int64(1), "k\xc3": "v\xff", "sub": map[string]any{"x\xfe": []any{"\xed\xa0\x80"}}}}}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ts": `"s\ufffd"`, "plain": `"k\ufffd"`}
	for coll, w := range want {
		cmd, _ := bson.Marshal(bson.D{{Key: "find", Value: coll}, {Key: "$db", Value: "test"}})
		_, doc, full := roundTrip(t, addr, appendOpMsg(nil, 1, 0, cmd, false))
		checkReply(t, full[headerLen+5:])
		batch := doc.Lookup("cursor", "firstBatch").Array().String()
		if !strings.Contains(strings.ToLower(batch), strings.ToLower(strings.ReplaceAll(w, `\ufffd`, "\ufffd"))) {
			t.Errorf("%s: first batch %s, want it to hold %s", coll, batch, w)
		}
	}
}

// FuzzReplies: whatever bytes a client sends as the body of an OP_MSG,
// the reply is a valid BSON document whose keys and strings are UTF-8.
func FuzzReplies(f *testing.F) {
	seed := func(d bson.D) {
		b, _ := bson.Marshal(d)
		f.Add(b)
	}
	seed(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	seed(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "a", Value: "x"}}}}, {Key: "$db", Value: "test"}})
	seed(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: "x"}}}, {Key: "$db", Value: "test"}})
	seed(bson.D{{Key: "create", Value: "t"}, {Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "t"}}}, {Key: "$db", Value: "test"}})
	seed(bson.D{{Key: "nosuch", Value: 1}, {Key: "$db", Value: "test"}})
	// Every BSON type a value can take.
	seed(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{
		{Key: "r", Value: bson.Regex{Pattern: "a", Options: "i"}}, {Key: "p", Value: bson.DBPointer{DB: "n.c", Pointer: bson.NewObjectID()}},
		{Key: "c", Value: bson.CodeWithScope{Code: "f", Scope: bson.D{{Key: "q", Value: 1}}}}, {Key: "j", Value: bson.JavaScript("x")},
		{Key: "s", Value: bson.Symbol("y")}, {Key: "b", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}},
		{Key: "ts", Value: bson.Timestamp{T: 1, I: 2}}, {Key: "d", Value: bson.DateTime(5)}, {Key: "dec", Value: bson.NewDecimal128(1, 2)},
		{Key: "u", Value: bson.Undefined{}}, {Key: "mn", Value: bson.MinKey{}}, {Key: "mx", Value: bson.MaxKey{}}, {Key: "n", Value: nil},
	}}}, {Key: "$db", Value: "test"}})
	f.Add(rawCommand(func(d []byte) []byte {
		d = bsoncore.AppendInt32Element(d, "nosuch\xff", 1)
		return bsoncore.AppendStringElement(d, "$db", "t\xffest")
	}))
	db, err := timeseries.Open(timeseries.Options{Dir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	srv, err := New(Options{DB: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &conn{s: srv, nc: a, id: 1}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg := appendOpMsg(nil, 1, 0, body, false)
		h, err := readHeader(strings.NewReader(string(msg)), make([]byte, headerLen))
		if err != nil {
			return
		}
		var reply []byte
		req, err := decodeMessage(h, msg[headerLen:], nil)
		if err != nil {
			reply = srv.errorDoc(err)
		} else {
			reply = c.handle(req)
		}
		checkReply(t, reply)
	})
}

// TestMalformedInnerLength: a message holding an element whose own length
// is right but whose inside is not (a DBPointer's namespace of length 0,
// without even its NUL, which bsoncore's Validate lets through and its
// reader panics on) is answered with an error, and the server goes on
// serving.
func TestMalformedInnerLength(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	cmd := rawCommand(func(d []byte) []byte {
		d = bsoncore.AppendStringElement(d, "insert", "plain")
		aidx, d := bsoncore.AppendArrayElementStart(d, "documents")
		didx, d := bsoncore.AppendDocumentElementStart(d, "0")
		// A namespace of length 0: not even its NUL.
		d = append(d, byte(bsoncore.TypeDBPointer), 'p', 0, 0, 0, 0, 0)
		d = append(d, make([]byte, 12)...) // the ObjectID
		d, _ = bsoncore.AppendDocumentEnd(d, didx)
		d, _ = bsoncore.AppendArrayEnd(d, aidx)
		return bsoncore.AppendStringElement(d, "$db", "test")
	})
	_, doc, full := roundTrip(t, addr, appendOpMsg(nil, 1, 0, cmd, false))
	checkReply(t, full[headerLen+5:])
	if ok, _ := doc.Lookup("ok").AsFloat64OK(); ok != 0 {
		t.Fatalf("a malformed DBPointer inserted: %v", doc)
	}
	ping := rawCommand(func(d []byte) []byte {
		d = bsoncore.AppendInt32Element(d, "ping", 1)
		return bsoncore.AppendStringElement(d, "$db", "admin")
	})
	if _, doc, _ := roundTrip(t, addr, appendOpMsg(nil, 2, 0, ping, false)); doc.Lookup("ok").Double() != 1 {
		t.Fatalf("ping after the malformed message: %v", doc)
	}
}
