package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// body is a request body read into memory. bodyPool recycles the structs;
// their buffers go back to command's size-class pools.
type body struct {
	b      []byte
	budget *command.Budget // holds held bytes of it while the body is in use
	held   int64
}

var bodyPool = sync.Pool{New: func() any { return new(body) }}

func putBody(b *body) {
	if b.budget != nil {
		b.budget.Give(b.held)
		b.budget, b.held = nil, 0
	}
	command.PutBuffer(b.b)
	b.b = nil
	bodyPool.Put(b)
}

func errBodyBudget(max int64) *httpError {
	return &httpError{status: http.StatusTooManyRequests, code: mongoerr.IngressRequestRateLimitExceeded,
		msg: fmt.Sprintf("request bodies being received hold the server's body memory (%d bytes); retry later", max)}
}

// zstdDecoders recycles zstd decoders; each is single-threaded and bounded
// in memory.
var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(64<<20))
	if err != nil {
		panic("api: zstd decoder options: " + err.Error())
	}
	return d
}}

func tooLarge(limit int64) *httpError {
	return newHTTPError(http.StatusRequestEntityTooLarge, mongoerr.BSONObjectTooLarge,
		"request body exceeds the limit of %d bytes (after decompression); send smaller batches", limit)
}

// readBody reads the whole request body, decompressed according to its
// Content-Encoding (identity, gzip, zstd), refusing more than limit bytes
// after decompression with 413, and a body that arrives slower than
// Options.MinBodyRate after Options.BodyRateGrace with 408. Nothing is
// acted on before the whole body is read, so a refused body changes
// nothing. Memory follows the bytes received (at most twice as many, in
// reused buffer classes), never the length a client announces. The caller must putBody the returned body.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) (*body, error) {
	return s.readBodyAs(w, r, limit, strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))))
}

// readBodyAs is readBody with the body's content coding given: enc,
// lower case, where "" is identity. A door whose protocol compresses the
// payload itself (remote write's snappy) reads the body as identity.
func (s *Server) readBodyAs(w http.ResponseWriter, r *http.Request, limit int64, enc string) (*body, error) {
	raw := io.Reader(r.Body)
	if s.opts.MinBodyRate > 0 {
		rr := newRateReader(w, r.Body, s.opts.MinBodyRate, s.opts.BodyRateGrace)
		defer rr.done()
		raw = rr
	}
	var src io.Reader = http.MaxBytesReader(nil, readCloser{raw}, limit)
	switch enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, bodyReadError(err, limit, "gzip")
		}
		defer zr.Close()
		src = zr
	case "zstd":
		d := zstdDecoders.Get().(*zstd.Decoder)
		if err := d.Reset(src); err != nil {
			return nil, bodyReadError(err, limit, "zstd")
		}
		defer func() {
			d.Reset(nil)
			zstdDecoders.Put(d)
		}()
		src = d
	default:
		return nil, newHTTPError(http.StatusUnsupportedMediaType, mongoerr.BadValue,
			"unsupported Content-Encoding %q; use gzip, zstd or none", enc)
	}
	hint := int64(-1)
	if r.ContentLength >= 0 && r.ContentLength <= limit && (enc == "" || enc == "identity") {
		hint = r.ContentLength
	}
	buf := bodyPool.Get().(*body) // with no buffer: the first chunk comes as bytes arrive
	buf.budget = s.cmd.Bodies()
	err := buf.readAll(io.LimitReader(src, limit+1), hint, limit)
	if err != nil {
		putBody(buf)
		return nil, bodyReadError(err, limit, enc)
	}
	if int64(len(buf.b)) > limit {
		putBody(buf)
		return nil, tooLarge(limit)
	}
	return buf, nil
}

// readAll appends src (at most limit+1 bytes) to the body until EOF. The
// buffer grows by doubling with the bytes that arrive, up to limit+1, and
// stops at the class holding hint+1 (the announced length and room for the
// EOF) when hint is known, so a body of n bytes takes n to 2n bytes and a
// client that announces a large body but sends little costs little. Each
// growth is taken from the budget first, a whole class at a time.
func (b *body) readAll(src io.Reader, hint, limit int64) error {
	dst := b.b
	defer func() { b.b = dst }()
	for {
		if int64(len(dst)) > limit {
			return nil // over the limit: the caller refuses it
		}
		if len(dst) == cap(dst) {
			n := int(min(int64(max(2*cap(dst), command.MinBufferClass)), limit+1))
			if hint >= 0 && int64(len(dst)) <= hint {
				n = int(min(int64(n), hint+1))
			}
			if n <= len(dst) {
				n = len(dst) + command.MinBufferClass
			}
			if !b.take(int64(command.BufferClass(n) - cap(dst))) {
				return errBodyBudget(b.budget.Max())
			}
			grown := command.GetBuffer(n)[:len(dst)]
			copy(grown, dst)
			command.PutBuffer(dst)
			dst = grown
		}
		m, err := src.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+m]
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// take reserves n more bytes of the budget for the body.
func (b *body) take(n int64) bool {
	if !b.budget.TryTake(n) {
		return false
	}
	b.held += n
	return true
}

// readCloser gives a reader the Close that http.MaxBytesReader wants; the
// request body itself is closed by net/http.
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

// rateReader enforces a minimum body rate: after grace, the bytes received
// must keep up with rate bytes per second since the start. It sets the
// connection's read deadline before each read to the moment the body
// falls behind, so a stalled client is cut off at that moment rather than
// at the server's ReadTimeout. Where the connection has no deadlines (a
// ResponseWriter that is not net/http's), it does nothing.
type rateReader struct {
	r     io.Reader
	rc    *http.ResponseController
	start time.Time
	rate  int64
	grace time.Duration
	n     int64
	set   bool // a deadline was set: done clears it
	off   bool // the connection does not support deadlines
}

func newRateReader(w http.ResponseWriter, r io.Reader, rate int64, grace time.Duration) *rateReader {
	return &rateReader{r: r, rc: http.NewResponseController(w), start: time.Now(), rate: rate, grace: grace}
}

func (b *rateReader) Read(p []byte) (int, error) {
	if !b.off {
		due := b.start.Add(b.grace + time.Duration(float64(b.n)/float64(b.rate)*float64(time.Second)))
		if err := b.rc.SetReadDeadline(due); err != nil {
			b.off = true
		} else {
			b.set = true
		}
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	var ne net.Error
	if err != nil && b.set && errors.As(err, &ne) && ne.Timeout() {
		return n, newHTTPError(http.StatusRequestTimeout, mongoerr.BadValue,
			"the request body arrived too slowly: %d bytes in %s, below the minimum of %d bytes/s after the first %s; send it faster or in smaller batches",
			b.n, time.Since(b.start).Round(time.Millisecond), b.rate, b.grace)
	}
	return n, err
}

// done clears the read deadline once the body is read: net/http reads on
// in the background to notice a client that leaves, and a deadline passing
// then would cancel the request.
func (b *rateReader) done() {
	if b.set {
		b.rc.SetReadDeadline(time.Time{})
	}
}

func bodyReadError(err error, limit int64, enc string) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(limit)
	}
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	if enc != "" && enc != "identity" {
		return badRequest("cannot decompress the %s request body: %v", enc, err)
	}
	return badRequest("cannot read the request body: %v", err)
}

// mediaType returns the request's media type, lower case, without
// parameters; "" when there is no Content-Type. The form type that curl
// sends with -d counts as none, so that `curl -d '{...}'` works as users
// expect.
func mediaType(r *http.Request) (string, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return "", nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", newHTTPError(http.StatusUnsupportedMediaType, mongoerr.BadValue, "malformed Content-Type %q: %v", ct, err)
	}
	if mt == "application/x-www-form-urlencoded" {
		return "", nil
	}
	return mt, nil
}

// readJSONRequest reads a small JSON request body (commands, queries) of at
// most limit bytes into a generic value, and returns its text as well, for
// the members whose order matters (index key patterns, sort). Numbers stay
// json.Number. A GET or HEAD request carries the JSON in its "q" query
// parameter instead, so that queries can be plain URLs.
func (s *Server) readJSONRequest(w http.ResponseWriter, r *http.Request, limit int64, dst *map[string]any) ([]byte, error) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		q := r.URL.Query().Get("q")
		if int64(len(q)) > limit {
			return nil, tooLarge(limit)
		}
		return []byte(q), decodeJSONObject([]byte(q), dst)
	}
	mt, err := mediaType(r)
	if err != nil {
		return nil, err
	}
	if mt != "" && mt != "application/json" {
		return nil, newHTTPError(http.StatusUnsupportedMediaType, mongoerr.BadValue,
			"unsupported Content-Type %q; send application/json", mt)
	}
	buf, err := s.readBody(w, r, limit)
	if err != nil {
		return nil, err
	}
	defer putBody(buf)
	text := bytes.Clone(buf.b)
	return text, decodeJSONObject(text, dst)
}

// decodeJSONObject decodes a JSON object; empty input is an empty object.
func decodeJSONObject(b []byte, dst *map[string]any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		*dst = map[string]any{}
		return nil
	}
	v, err := decodeJSON(b)
	if err != nil {
		return err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return badRequest("the request body must be a JSON object")
	}
	*dst = m
	return nil
}
