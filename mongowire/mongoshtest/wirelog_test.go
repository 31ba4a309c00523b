package mongoshtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// exchange is one command a client sent and the server's reply.
type exchange struct {
	name  string   // the command, the first key of its document
	db    string   // $db, or the OP_QUERY namespace's database
	op    string   // OP_MSG or OP_QUERY
	body  bson.Raw // the command document
	reply bson.Raw // nil until answered (or never, with moreToCome)
}

// ok reports whether the reply says ok: 1.
func (e *exchange) ok() bool {
	if e.reply == nil {
		return false
	}
	v, err := e.reply.LookupErr("ok")
	if err != nil {
		return false
	}
	f, ok := v.AsFloat64OK()
	return ok && f == 1
}

// code is the reply's error code, 0 when it has none.
func (e *exchange) code() int32 {
	if e.reply == nil {
		return 0
	}
	v, err := e.reply.LookupErr("code")
	if err != nil {
		return 0
	}
	c, _ := v.Int32OK()
	return c
}

func (e *exchange) String() string {
	switch {
	case e.reply == nil:
		return fmt.Sprintf("%s %s.%s: no reply", e.op, e.db, e.name)
	case e.ok():
		return fmt.Sprintf("%s %s.%s: ok", e.op, e.db, e.name)
	}
	msg, _ := e.reply.Lookup("errmsg").StringValueOK()
	body := e.body.String()
	if len(body) > 300 {
		body = body[:300] + "..."
	}
	return fmt.Sprintf("%s %s.%s: code %d %q; sent %s", e.op, e.db, e.name, e.code(), msg, body)
}

// wireLog is a loopback proxy in front of a server that records the
// commands passing through it and their replies: what a client asks, at
// start-up and for each of its helpers, and how it was answered.
type wireLog struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	log     []*exchange
	pending map[int32]*exchange // by request id
	conns   map[net.Conn]struct{}
}

// startWireLog listens on a loopback port and forwards every connection to
// target; it stops when the test ends.
func startWireLog(t *testing.T, target string) *wireLog {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireLog{ln: ln, target: target, pending: map[int32]*exchange{}, conns: map[net.Conn]struct{}{}}
	w.wg.Add(1)
	go w.accept()
	t.Cleanup(func() {
		ln.Close()
		w.mu.Lock()
		for c := range w.conns {
			c.Close()
		}
		w.mu.Unlock()
		w.wg.Wait()
	})
	return w
}

func (w *wireLog) addr() string { return w.ln.Addr().String() }

func (w *wireLog) accept() {
	defer w.wg.Done()
	for {
		client, err := w.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", w.target)
		if err != nil {
			client.Close()
			continue
		}
		w.mu.Lock()
		w.conns[client], w.conns[server] = struct{}{}, struct{}{}
		w.mu.Unlock()
		w.wg.Add(2)
		go w.pump(client, server, w.request)
		go w.pump(server, client, w.reply)
	}
}

// pump copies whole messages from src to dst, showing each to record,
// until either side closes.
func (w *wireLog) pump(src, dst net.Conn, record func([]byte)) {
	defer w.wg.Done()
	defer src.Close()
	defer dst.Close()
	for {
		var head [4]byte
		if _, err := io.ReadFull(src, head[:]); err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint32(head[:]))
		if n < 16 || n > 48_000_000 {
			return
		}
		msg := make([]byte, n)
		copy(msg, head[:])
		if _, err := io.ReadFull(src, msg[4:]); err != nil {
			return
		}
		record(msg)
		if _, err := dst.Write(msg); err != nil {
			return
		}
	}
}

func (w *wireLog) request(msg []byte) {
	_, id, _, opcode, rem, ok := wiremessage.ReadHeader(msg)
	if !ok {
		return
	}
	e := &exchange{op: opcode.String()}
	switch opcode {
	case wiremessage.OpMsg:
		doc, err := msgBody(rem)
		if err != nil {
			e.name = "(" + err.Error() + ")"
			break
		}
		e.body = bson.Raw(doc)
		e.db, _ = doc.Lookup("$db").StringValueOK()
	case wiremessage.OpQuery:
		_, rem, ok = wiremessage.ReadQueryFlags(rem)
		var ns string
		if ok {
			ns, rem, ok = wiremessage.ReadQueryFullCollectionName(rem)
		}
		if ok {
			_, rem, ok = wiremessage.ReadQueryNumberToSkip(rem)
		}
		if ok {
			_, rem, ok = wiremessage.ReadQueryNumberToReturn(rem)
		}
		var doc bsoncore.Document
		if ok {
			doc, _, ok = wiremessage.ReadQueryQuery(rem)
		}
		if ok {
			e.body = bson.Raw(doc)
			e.db, _, _ = strings.Cut(ns, ".")
		}
	}
	if e.body != nil {
		if el, err := e.body.IndexErr(0); err == nil {
			e.name = el.Key()
			if e.name == "$query" { // OP_QUERY's wrapped form
				if d, ok := el.Value().DocumentOK(); ok {
					if el, err := d.IndexErr(0); err == nil {
						e.name = el.Key()
					}
				}
			}
		}
	} else if e.name == "" {
		e.name = "(undecoded)"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, e)
	w.pending[id] = e
}

func (w *wireLog) reply(msg []byte) {
	_, _, to, opcode, rem, ok := wiremessage.ReadHeader(msg)
	if !ok {
		return
	}
	var doc bsoncore.Document
	switch opcode {
	case wiremessage.OpMsg:
		doc, _ = msgBody(rem)
	case wiremessage.OpReply:
		_, rem, ok = wiremessage.ReadReplyFlags(rem)
		if ok {
			_, rem, ok = wiremessage.ReadReplyCursorID(rem)
		}
		if ok {
			_, rem, ok = wiremessage.ReadReplyStartingFrom(rem)
		}
		if ok {
			_, rem, ok = wiremessage.ReadReplyNumberReturned(rem)
		}
		if ok {
			doc, _, _ = wiremessage.ReadReplyDocument(rem)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.pending[to]; e != nil {
		e.reply = bson.Raw(doc)
		delete(w.pending, to)
	}
}

// msgBody is the kind-0 section of an OP_MSG after its header.
func msgBody(rem []byte) (bsoncore.Document, error) {
	flags, rem, ok := wiremessage.ReadMsgFlags(rem)
	if !ok {
		return nil, errors.New("short OP_MSG")
	}
	if flags&wiremessage.ChecksumPresent != 0 && len(rem) >= 4 {
		rem = rem[:len(rem)-4]
	}
	for len(rem) > 0 {
		var stype wiremessage.SectionType
		stype, rem, ok = wiremessage.ReadMsgSectionType(rem)
		if !ok {
			break
		}
		switch stype {
		case wiremessage.SingleDocument:
			doc, _, ok := wiremessage.ReadMsgSectionSingleDocument(rem)
			if !ok {
				return nil, errors.New("bad OP_MSG body")
			}
			return doc, nil
		case wiremessage.DocumentSequence:
			_, _, rem, ok = wiremessage.ReadMsgSectionRawDocumentSequence(rem)
			if !ok {
				return nil, errors.New("bad OP_MSG document sequence")
			}
		default:
			return nil, fmt.Errorf("OP_MSG section kind %d", stype)
		}
	}
	return nil, errors.New("OP_MSG without a body")
}

// exchanges returns a copy of what was recorded so far.
func (w *wireLog) exchanges() []*exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*exchange(nil), w.log...)
}

// reset forgets what was recorded.
func (w *wireLog) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = nil
}
