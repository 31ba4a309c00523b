package mongowire

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// announce dials addr and sends a header announcing an OP_MSG of length
// bytes, then prefix of its body; the caller sends the rest or not.
func announce(t *testing.T, addr string, length int, prefix []byte) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	var hb [headerLen]byte
	putHeader(hb[:], header{length: int32(length), requestID: 1, opCode: wiremessage.OpMsg})
	if _, err := nc.Write(append(hb[:], prefix...)); err != nil {
		t.Fatal(err)
	}
	return nc
}

// closedByServer reports whether the server closed nc within d.
func closedByServer(nc net.Conn, d time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	_, err := nc.Read(b[:])
	return err != nil && !isTimeout(err)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPreAuthMessageBounded: on a server that requires authentication, a
// client that has not authenticated and announces a message over
// PreAuthMaxMessage is disconnected with nothing of the message held,
// while the handshake and a failed login still work; a client that has
// authenticated may send large messages.
func TestPreAuthMessageBounded(t *testing.T) {
	budget := command.NewBudget(64 << 20)
	_, _, addr := startServer(t, Options{AuthToken: "tok", Messages: budget})
	nc := announce(t, addr, 48000000, bytes.Repeat([]byte{0}, 32<<10))
	if !closedByServer(nc, 5*time.Second) {
		t.Fatal("a 48 MB message before authentication did not close the connection")
	}
	if n := budget.InUse(); n != 0 {
		t.Fatalf("%d bytes of request memory held after the connection closed", n)
	}
	// A message just under the bound is read and answered (Unauthorized).
	_, doc, _ := roundTrip(t, addr, opMsg(t, bson.D{{Key: "listCollections", Value: 1}, {Key: "$db", Value: "test"},
		{Key: "pad", Value: strings.Repeat("x", PreAuthMaxMessage-200)}}, false))
	if code, _ := doc.Lookup("code").AsInt64OK(); code != 13 {
		t.Fatalf("a large command before authentication: %v, want Unauthorized", doc)
	}
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://hourglass:tok@" + addr + "/?directConnection=true&serverSelectionTimeoutMS=5000"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Disconnect(context.Background())
	coll := cl.Database("test").Collection("big")
	docs := make([]any, 200)
	for i := range docs {
		docs[i] = bson.D{{Key: "i", Value: i}, {Key: "pad", Value: strings.Repeat("y", 1000)}}
	}
	if _, err := coll.InsertMany(context.Background(), docs); err != nil {
		t.Fatalf("a 200 KB insert after authentication: %v", err)
	}
	waitUntil(t, "request memory given back", func() bool { return budget.InUse() == 0 })
}

// TestMessageMemoryFollowsBytes: a message's memory follows the bytes that
// arrive, not the length its header announces, and is given back when its
// connection closes.
func TestMessageMemoryFollowsBytes(t *testing.T) {
	budget := command.NewBudget(256 << 20)
	_, _, addr := startServer(t, Options{Messages: budget})
	nc := announce(t, addr, 40<<20, bytes.Repeat([]byte{0}, 100<<10))
	waitUntil(t, "the first bytes held", func() bool { return budget.InUse() > 0 })
	time.Sleep(50 * time.Millisecond)
	if n := budget.InUse(); n > 256<<10 {
		t.Fatalf("100 KiB received of a 40 MiB message hold %d bytes", n)
	}
	nc.Close()
	waitUntil(t, "request memory given back", func() bool { return budget.InUse() == 0 })
}

// TestMessageMemoryBudget: messages take from the request budget; one that
// does not fit waits for room (back-pressure) and is served once another
// gives its bytes back, or is refused with IngressRequestRateLimitExceeded
// once MessageMemoryWait has passed, its bytes read and dropped, the
// connection still usable.
func TestMessageMemoryBudget(t *testing.T) {
	budget := command.NewBudget(1 << 20)
	_, _, addr := startServer(t, Options{Messages: budget, MessageMemoryWait: 300 * time.Millisecond})
	hold := func() net.Conn {
		nc := announce(t, addr, 900<<10, bytes.Repeat([]byte{0}, 600<<10))
		// Until its buffer has grown past the 600 KiB sent (to the whole
		// budget): a ping started while it still grows would take room
		// the holder then waits for, and both would wait their time out.
		waitUntil(t, "a large message held", func() bool { return budget.InUse() >= 900<<10 })
		return nc
	}
	ping := opMsg(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "pad", Value: strings.Repeat("p", 600<<10)}}, false)

	holder := hold()
	_, doc, _ := roundTrip(t, addr, ping)
	if code, _ := doc.Lookup("code").AsInt64OK(); code != 462 || !strings.Contains(doc.Lookup("errmsg").StringValue(), "request memory") {
		t.Fatalf("a message past the budget: %v, want IngressRequestRateLimitExceeded", doc)
	}
	holder.Close()
	waitUntil(t, "the holder's memory given back", func() bool { return budget.InUse() == 0 })

	// Back-pressure: the holder goes away while the ping waits.
	holder = hold()
	go func() { time.Sleep(100 * time.Millisecond); holder.Close() }()
	if _, doc, _ = roundTrip(t, addr, ping); doc.Lookup("ok").Double() != 1 {
		t.Fatalf("a message that waited for room: %v", doc)
	}
	waitUntil(t, "request memory given back", func() bool { return budget.InUse() == 0 })
}

// TestSlowMessageClosed: a message that arrives slower than
// MinMessageRate after MessageRateGrace closes its connection, and its
// memory is given back; an idle connection between messages stays open.
func TestSlowMessageClosed(t *testing.T) {
	budget := command.NewBudget(64 << 20)
	_, _, addr := startServer(t, Options{Messages: budget, MinMessageRate: 1 << 10, MessageRateGrace: 100 * time.Millisecond})
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	nc := announce(t, addr, 1<<20, []byte("slow"))
	start := time.Now()
	if !closedByServer(nc, 5*time.Second) {
		t.Fatal("a stalled message did not close its connection")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a stalled message closed after %s", d)
	}
	waitUntil(t, "request memory given back", func() bool { return budget.InUse() == 0 })
	if closedByServer(idle, 300*time.Millisecond) {
		t.Fatal("an idle connection was closed")
	}
	if _, doc, _ := roundTrip(t, addr, opMsg(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}, false)); doc.Lookup("ok").Double() != 1 {
		t.Fatalf("ping: %v", doc)
	}
}

// TestMaxConnections: past MaxConnections a new connection is closed as
// soon as it is accepted; one closing makes room for another.
func TestMaxConnections(t *testing.T) {
	_, srv, addr := startServer(t, Options{MaxConnections: 3})
	ping := opMsg(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}, false)
	var open []net.Conn
	for range 3 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write(ping)
		var hb [headerLen]byte
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(nc, hb[:]); err != nil {
			t.Fatalf("connection %d of 3: %v", len(open)+1, err)
		}
		length := binary.LittleEndian.Uint32(hb[:])
		io.CopyN(io.Discard, nc, int64(length-headerLen))
		open = append(open, nc)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if !closedByServer(extra, 5*time.Second) {
		t.Fatal("a fourth connection past MaxConnections 3 was not closed")
	}
	if srv.refused.Load() != 1 {
		t.Fatalf("refused %d, want 1", srv.refused.Load())
	}
	open[0].Close()
	waitUntil(t, "the closed connection gone", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns) == 2
	})
	if _, doc, _ := roundTrip(t, addr, ping); doc.Lookup("ok").Double() != 1 {
		t.Fatalf("ping after a connection closed: %v", doc)
	}
}

// TestDecompressBomb: an OP_COMPRESSED body that decodes to more than it
// announces is refused without being decoded past the announced size.
func TestDecompressBomb(t *testing.T) {
	enc, _ := zstd.NewWriter(nil)
	bomb := enc.EncodeAll(make([]byte, 64<<20), nil)
	body := []byte{}
	body = binary.LittleEndian.AppendUint32(body, uint32(wiremessage.OpMsg))
	body = binary.LittleEndian.AppendUint32(body, 100)
	body = append(body, byte(wiremessage.CompressorZstd))
	body = append(body, bomb...)
	_, _, _, err := decompress(body, make([]byte, 0, 100))
	if err == nil || !strings.Contains(err.Error(), "more than the 100 bytes") {
		t.Fatalf("a zstd bomb: %v", err)
	}
}

// TestCommandPanicClosesConnection: a command whose handler panics is
// answered InternalError and its connection closed; the server and its
// other connections go on.
func TestCommandPanicClosesConnection(t *testing.T) {
	_, srv, addr := startServer(t, Options{})
	srv.commandHook = func(name string) {
		if name == "buildInfo" {
			panic("a broken invariant")
		}
	}
	ping := opMsg(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}, false)
	other, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write(opMsg(t, bson.D{{Key: "buildInfo", Value: 1}, {Key: "$db", Value: "admin"}}, false))
	var hb [headerLen]byte
	if _, err := io.ReadFull(nc, hb[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.LittleEndian.Uint32(hb[:])-headerLen)
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte("InternalError")) {
		t.Fatalf("the panicking command's reply: %q", body)
	}
	if !closedByServer(nc, 5*time.Second) {
		t.Fatal("the connection of the panicking command stayed open")
	}
	if srv.panics.Load() != 1 {
		t.Fatalf("panics %d, want 1", srv.panics.Load())
	}
	// The other connection, opened before, and a new one still work.
	other.SetDeadline(time.Now().Add(10 * time.Second))
	other.Write(ping)
	if _, err := io.ReadFull(other, hb[:]); err != nil {
		t.Fatalf("another connection after the panic: %v", err)
	}
	if _, doc, _ := roundTrip(t, addr, ping); doc.Lookup("ok").Double() != 1 {
		t.Fatalf("ping after the panic: %v", doc)
	}
}

// panicSource is a cursor's source that breaks an invariant.
type panicSource struct{}

func (panicSource) next() (bsoncore.Document, error) { panic("a broken source") }
func (panicSource) close()                           {}

// TestBatchAheadPanic: a batch built ahead whose source panics gives its
// getMore InternalError instead of taking the server down.
func TestBatchAheadPanic(t *testing.T) {
	_, srv, _ := startServer(t, Options{})
	c := &cursor{src: panicSource{}}
	srv.buildAhead(c)
	if c.ahead == nil {
		t.Fatal("no batch built ahead")
	}
	<-c.ahead.done
	if mongoerr.CodeOf(c.ahead.err) != mongoerr.InternalError || srv.panics.Load() != 1 {
		t.Fatalf("the batch's error: %v; panics %d", c.ahead.err, srv.panics.Load())
	}
}
