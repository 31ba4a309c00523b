package mongowire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// PreAuthMaxMessage bounds a message, header included, from a client that
// has not authenticated on a server that requires it: the handshake and
// SASL messages of every driver fit (the client metadata of hello is at
// most 512 bytes by the drivers' handshake specification), and a client
// that announces more is disconnected before anything is allocated for it.
const PreAuthMaxMessage = 8 << 10

// conn is one client connection: requests are read and answered in turn.
type conn struct {
	s  *Server
	nc net.Conn
	id int64
	// The connection's authentication, used by its serving goroutine
	// only: the conversation in progress, and the user once
	// authenticated.
	sasl *saslConversation
	user string
	// pooled is the reply being sent when it came from Server.replyBufs,
	// to be given back once framed.
	pooled []byte
	// The message being handled: its body and, for OP_COMPRESSED, the
	// body decompressed, both taken from the request budget (held bytes
	// of it) and given back once the reply is sent.
	body, inflated []byte
	held           int64
	hbuf           [headerLen]byte
}

// authenticated reports whether the connection may run any command: the
// server requires no authentication, or the client has authenticated.
func (c *conn) authenticated() bool { return c.s.scram == nil || c.user != "" }

// setReadDeadline sets the connection's read deadline to t, unless the
// server is closing: then the deadline is now, so that a connection
// waiting for a request stops at once (Server.beginClose sets the flag
// before it sets the deadlines, so one of the two writes now last).
func (c *conn) setReadDeadline(t time.Time) {
	c.nc.SetReadDeadline(t)
	if c.s.closingFlag.Load() {
		c.nc.SetReadDeadline(time.Now())
	}
}

func (c *conn) serve() {
	s := c.s
	defer func() {
		c.release()
		c.nc.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	var out []byte
	for {
		h, err := readHeader(c.nc, c.hbuf[:])
		if err == nil && !c.authenticated() && h.length > PreAuthMaxMessage {
			err = fmt.Errorf("%w: %d bytes before authentication, over the %d allowed until the client authenticates",
				errMessageSize, h.length, PreAuthMaxMessage)
		}
		if err != nil {
			if errors.Is(err, errMessageSize) {
				s.log.Warn("closing a MongoDB connection", "remote", c.nc.RemoteAddr().String(), "err", err)
			} else if !errors.Is(err, io.EOF) && !isTimeout(err) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("MongoDB connection read failed", "remote", c.nc.RemoteAddr().String(), "err", err)
			}
			return
		}
		var req *request
		err = c.readBody(h)
		if err == nil {
			req, err = decodeMessage(h, c.body, c.inflated)
		}
		var reply []byte
		fatal := false
		switch {
		case err == nil:
			reply, fatal = c.handleSafely(req)
		case errors.Is(err, errConnBroken):
			return
		default:
			// The header was sound and the body read (or skipped), so the
			// client can be told.
			reply = s.errorDoc(err)
			req = &request{header: h, opCode: h.opCode}
			if req.opCode != wiremessage.OpQuery {
				req.opCode = wiremessage.OpMsg
			}
		}
		if req.moreToCome() {
			c.release()
			continue
		}
		if len(reply) > 1<<20 {
			out = s.replyBufs.Get()
		}
		out = c.frame(out[:0], req, reply)
		c.release()
		if c.pooled != nil {
			s.replyBufs.Put(c.pooled[:0])
			c.pooled = nil
		}
		if _, err := c.nc.Write(out); err != nil || fatal {
			return
		}
		if cap(out) > 1<<20 {
			s.replyBufs.Put(out[:0]) // a large reply's buffer is shared, not kept
			out = nil
		}
	}
}

// handleSafely is handle, turning a panic into an InternalError reply after
// which the connection closes: a command that breaks an invariant takes
// down its connection, logged with its stack, not the server.
func (c *conn) handleSafely(req *request) (reply []byte, fatal bool) {
	defer func() {
		if r := recover(); r != nil {
			c.s.panics.Add(1)
			c.s.log.Error("a MongoDB command panicked; closing its connection", "remote", c.nc.RemoteAddr().String(),
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			reply, fatal = c.s.errorDoc(mongoerr.New(mongoerr.InternalError, "internal error; see the server log")), true
		}
	}()
	return c.handle(req), false
}

// errConnBroken is a message that could not be read whole: the stream is
// lost and the connection closes.
var errConnBroken = errors.New("mongowire: connection broken")

// readBody reads the body of the message whose header is h into c.body,
// and makes room for its decompressed body in c.inflated. Memory follows
// the bytes that arrive: the buffer grows by doubling from the first
// buffer class, and each growth is taken from the request budget before
// it is allocated, so a client that announces a large message but sends
// little holds little. The bytes must keep up with Options.MinMessageRate
// after Options.MessageRateGrace, or the connection is closed. A message
// the budget cannot hold within Options.MessageMemoryWait is read to its end and
// dropped, and the error (IngressRequestRateLimitExceeded) is the reply;
// a read that fails is errConnBroken.
func (c *conn) readBody(h header) error {
	s := c.s
	n := int(h.length) - headerLen
	start := time.Now()
	got := 0
	rate, grace := s.opts.MinMessageRate, s.opts.MessageRateGrace
	defer c.setReadDeadline(time.Time{})
	read := func(p []byte) (int, error) {
		if rate > 0 {
			c.setReadDeadline(start.Add(grace + time.Duration(float64(got)/float64(rate)*float64(time.Second))))
		}
		m, err := c.nc.Read(p)
		got += m
		if err != nil {
			if isTimeout(err) && rate > 0 && !s.closingFlag.Load() {
				s.log.Warn("closing a MongoDB connection: its message arrived too slowly", "remote", c.nc.RemoteAddr().String(),
					"bytes", got, "of", n, "elapsed", time.Since(start).Round(time.Millisecond), "min_rate", rate, "grace", grace)
			}
			return m, errConnBroken
		}
		return m, nil
	}
	for got < n {
		if got == cap(c.body) {
			size := min(max(2*cap(c.body), command.MinBufferClass), n)
			if err := c.take(command.BufferClass(size) - cap(c.body)); err != nil {
				return c.skip(read, n-got, err)
			}
			grown := command.GetBuffer(size)[:got]
			copy(grown, c.body)
			command.PutBuffer(c.body)
			c.body = grown
		}
		if _, err := read(c.body[got:min(cap(c.body), n)]); err != nil {
			return err
		}
		c.body = c.body[:got]
	}
	if h.opCode == wiremessage.OpCompressed {
		if size, ok := compressedSize(c.body); ok {
			if err := c.take(command.BufferClass(size)); err != nil {
				return err
			}
			c.inflated = command.GetBuffer(size)
		}
	}
	return nil
}

// take reserves n more bytes of the request budget for the message.
func (c *conn) take(n int) error {
	b := c.s.opts.Messages
	wait := c.s.opts.MessageMemoryWait
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := b.Take(ctx, int64(n)); errors.Is(err, command.ErrOverBudget) {
		return mongoerr.New(mongoerr.IngressRequestRateLimitExceeded,
			"a message needing %d bytes more is larger than the server's whole request memory (%d bytes, --max-body-memory); send smaller batches", n, b.Max())
	} else if err != nil {
		return mongoerr.New(mongoerr.IngressRequestRateLimitExceeded,
			"messages being received hold the server's request memory (%d of %d bytes, --max-body-memory): a message of %d bytes more waited %s; retry later",
			b.InUse(), b.Max(), n, wait)
	}
	c.held += int64(n)
	return nil
}

// skip reads and drops the rest of a message that cannot be held, n bytes,
// through a small buffer, and returns why (err).
func (c *conn) skip(read func([]byte) (int, error), n int, err error) error {
	var scratch [4 << 10]byte
	for n > 0 {
		m, rerr := read(scratch[:min(n, len(scratch))])
		if rerr != nil {
			return rerr
		}
		n -= m
	}
	return err
}

// release gives the message's buffers and budget back.
func (c *conn) release() {
	command.PutBuffer(c.body)
	command.PutBuffer(c.inflated)
	c.body, c.inflated = nil, nil
	c.s.opts.Messages.Give(c.held)
	c.held = 0
}
