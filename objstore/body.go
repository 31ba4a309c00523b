package objstore

import (
	"context"
	"fmt"
	"io"
)

// exactBody returns a reader of exactly size bytes of body that fails,
// before handing over the last byte, when body holds fewer or more: the
// request then ends short of its Content-Length and the server stores
// nothing. A body that can seek and read at offsets is measured instead,
// and given as a section that minio-go can rewind to retry a request.
func exactBody(ctx context.Context, body io.Reader, size int64) (io.Reader, error) {
	if ra, off, end, ok := seekable(body); ok {
		if end-off != size {
			return nil, fmt.Errorf("body holds %d bytes, not the %d announced", end-off, size)
		}
		return io.NewSectionReader(ra, off, size), nil
	}
	return &exactReader{r: withContext(ctx, body), size: size, left: size}, nil
}

// seekable reports whether body can seek and read at offsets, as a file or
// an in-memory reader can (a pipe's *os.File has the methods but cannot
// seek), with its offset and end, where it leaves it.
func seekable(body io.Reader) (ra io.ReaderAt, off, end int64, ok bool) {
	rs, ok := body.(interface {
		io.ReaderAt
		io.Seeker
	})
	if !ok {
		return nil, 0, 0, false
	}
	off, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, 0, false
	}
	end, err = rs.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, 0, 0, false
	}
	if _, err := rs.Seek(off, io.SeekStart); err != nil {
		return nil, 0, 0, false
	}
	return rs, off, end, true
}

type exactReader struct {
	r          io.Reader
	size, left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if e.left > 0 {
		if err == io.EOF {
			return 0, fmt.Errorf("objstore: body holds %d bytes, not the %d announced", e.size-e.left, e.size)
		}
		return n, err
	}
	if err != nil && err != io.EOF {
		return 0, err
	}
	// The last bytes: give them only if the body ends here.
	var one [1]byte
	for {
		m, err := e.r.Read(one[:])
		if m > 0 {
			return 0, fmt.Errorf("objstore: body holds more than the %d bytes announced", e.size)
		}
		if err == io.EOF {
			return n, io.EOF
		}
		if err != nil {
			return 0, err
		}
	}
}

// withContext returns body, or for a body that may block (a pipe, a
// network stream) a reader whose Read ends with ctx: body is read in a
// goroutine of its own, which a cancelled Read leaves behind until body
// answers. (net/http waits for a request body's Read to return before it
// gives up a request, so a stalled body would hold a Put past its context.)
// Files and in-memory readers, which can seek and read at offsets, are
// returned as they are.
func withContext(ctx context.Context, body io.Reader) io.Reader {
	if _, _, _, ok := seekable(body); ok {
		return body
	}
	return &ctxReader{ctx: ctx, r: body}
}

type ctxReader struct {
	ctx  context.Context
	r    io.Reader
	buf  []byte // owned by a read that ctx abandoned, once dead
	dead bool
}

type readResult struct {
	n   int
	err error
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if c.dead || c.ctx.Err() != nil {
		c.dead = true
		return 0, c.ctx.Err()
	}
	if len(p) == 0 {
		return 0, nil
	}
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	buf := c.buf[:len(p)]
	done := make(chan readResult, 1)
	go func() {
		n, err := c.r.Read(buf)
		done <- readResult{n, err}
	}()
	select {
	case r := <-done:
		return copy(p, buf[:r.n]), r.err
	case <-c.ctx.Done():
		c.dead, c.buf = true, nil // the read goroutine keeps buf
		return 0, c.ctx.Err()
	}
}
