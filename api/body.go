package api

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// bodyPool recycles request body buffers. Buffers that grew past
// maxPooledBody are dropped rather than kept, so one huge request does not
// pin its memory.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 8 << 20

func putBody(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBody {
		b.Reset()
		bodyPool.Put(b)
	}
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
// after decompression with 413. Nothing is acted on before the whole body
// is read, so a refused body changes nothing. The caller must putBody the
// returned buffer.
func readBody(r *http.Request, limit int64) (*bytes.Buffer, error) {
	var src io.Reader = http.MaxBytesReader(nil, r.Body, limit)
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
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
	buf := bodyPool.Get().(*bytes.Buffer)
	if r.ContentLength > 0 && r.ContentLength <= limit && enc == "" {
		buf.Grow(int(r.ContentLength) + 1)
	}
	n, err := buf.ReadFrom(io.LimitReader(src, limit+1))
	if err != nil {
		putBody(buf)
		return nil, bodyReadError(err, limit, enc)
	}
	if n > limit {
		putBody(buf)
		return nil, tooLarge(limit)
	}
	return buf, nil
}

func bodyReadError(err error, limit int64, enc string) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(limit)
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
// most limit bytes into a generic value. Numbers stay json.Number. A GET
// request carries the JSON in its "q" query parameter instead, so that
// queries can be plain URLs.
func readJSONRequest(r *http.Request, limit int64, dst *map[string]any) error {
	_, err := readJSONRequestBytes(r, limit, dst)
	return err
}

// readJSONRequestBytes is readJSONRequest that also returns the JSON text,
// for the members whose order matters (index key patterns).
func readJSONRequestBytes(r *http.Request, limit int64, dst *map[string]any) ([]byte, error) {
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
	buf, err := readBody(r, limit)
	if err != nil {
		return nil, err
	}
	defer putBody(buf)
	text := bytes.Clone(buf.Bytes())
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
