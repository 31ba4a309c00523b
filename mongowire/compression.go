package mongowire

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// compressors are the OP_COMPRESSED algorithms answered, in the order
// hello prefers them when a client offers several.
var compressors = []string{"zstd", "snappy", "zlib"}

var compressorIDs = map[string]wiremessage.CompressorID{
	"snappy": wiremessage.CompressorSnappy,
	"zlib":   wiremessage.CompressorZLib,
	"zstd":   wiremessage.CompressorZstd,
}

// zstdDecoders recycles streaming zstd decoders: a message is read
// through one into a buffer of its announced size, so that a frame
// decoding to more (a bomb) costs no more memory than that size and the
// decoder's window.
var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(16<<20), zstd.WithDecoderMaxMemory(MaxMessageSizeBytes))
	if err != nil {
		panic("mongowire: zstd decoder: " + err.Error()) // options are constant
	}
	return d
}}

var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic("mongowire: zstd encoder: " + err.Error())
	}
	return e
})

// compressedSize returns the size an OP_COMPRESSED body (the bytes after
// the header) announces for the message it holds, after its header; ok is
// false when the body is too short to say or the size is out of range.
func compressedSize(body []byte) (int, bool) {
	_, rem, ok := wiremessage.ReadCompressedOriginalOpCode(body)
	if !ok {
		return 0, false
	}
	size, _, ok := wiremessage.ReadCompressedUncompressedSize(rem)
	if !ok || size < 0 || size > MaxMessageSizeBytes-headerLen {
		return 0, false
	}
	return int(size), true
}

// decompress opens the body of an OP_COMPRESSED message: it returns the
// original message's body (after its header) and opCode. The body is
// written into dst's spare capacity when it has room for the announced
// size (the caller sizes it with compressedSize), else into a new buffer.
func decompress(body, dst []byte) ([]byte, wiremessage.OpCode, wiremessage.CompressorID, error) {
	op, rem, ok := wiremessage.ReadCompressedOriginalOpCode(body)
	if !ok {
		return nil, 0, 0, decodeError("OP_COMPRESSED too short")
	}
	size, rem, ok := wiremessage.ReadCompressedUncompressedSize(rem)
	if !ok {
		return nil, 0, 0, decodeError("OP_COMPRESSED too short")
	}
	id, rem, ok := wiremessage.ReadCompressedCompressorID(rem)
	if !ok {
		return nil, 0, 0, decodeError("OP_COMPRESSED too short")
	}
	if size < 0 || size > MaxMessageSizeBytes-headerLen {
		return nil, 0, 0, decodeError("OP_COMPRESSED uncompressed size %d is over maxMessageSizeBytes %d", size, MaxMessageSizeBytes)
	}
	if cap(dst) < int(size) {
		dst = make([]byte, 0, size)
	}
	dst = dst[:0]
	var out []byte
	var err error
	switch id {
	case wiremessage.CompressorNoOp:
		out = rem
	case wiremessage.CompressorSnappy:
		n, lerr := snappy.DecodedLen(rem)
		if lerr != nil || n != int(size) {
			return nil, 0, 0, decodeError("OP_COMPRESSED snappy data does not hold %d bytes", size)
		}
		out, err = snappy.Decode(dst[:size], rem)
	case wiremessage.CompressorZLib:
		var zr io.ReadCloser
		if zr, err = zlib.NewReader(bytes.NewReader(rem)); err == nil {
			out, err = readExactly(zr, dst[:size])
		}
	case wiremessage.CompressorZstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		if err = d.Reset(bytes.NewReader(rem)); err == nil {
			out, err = readExactly(d, dst[:size])
		}
		d.Reset(nil)
		zstdDecoders.Put(d)
	default:
		return nil, 0, 0, decodeError("OP_COMPRESSED compressor %d is not supported; use zstd, snappy or zlib", uint8(id))
	}
	if err != nil {
		return nil, 0, 0, decodeError("OP_COMPRESSED %s data: %v", id, err)
	}
	if len(out) != int(size) {
		return nil, 0, 0, decodeError("OP_COMPRESSED data holds %d bytes, not the %d announced", len(out), size)
	}
	return out, op, id, nil
}

// readExactly fills buf from r and checks that r ends there: a stream
// shorter or longer than buf is an error, found without reading more than
// one byte past it.
func readExactly(r io.Reader, buf []byte) ([]byte, error) {
	n, err := io.ReadFull(r, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return buf[:n], nil // short: the caller's length check says so
	}
	if err != nil {
		return nil, err
	}
	var one [1]byte
	if m, _ := r.Read(one[:]); m > 0 {
		return nil, fmt.Errorf("the stream holds more than the %d bytes announced", len(buf))
	}
	return buf, nil
}

// compressMessage rewrites the message msg (header included) as an
// OP_COMPRESSED message with compressor id, appended to dst.
func compressMessage(dst, msg []byte, id wiremessage.CompressorID) []byte {
	h := header{}
	h.length, h.requestID, h.responseTo, h.opCode, _, _ = wiremessage.ReadHeader(msg)
	body := msg[headerLen:]
	start := len(dst)
	idx, dst := wiremessage.AppendHeaderStart(dst, h.requestID, h.responseTo, wiremessage.OpCompressed)
	dst = wiremessage.AppendCompressedOriginalOpCode(dst, h.opCode)
	dst = wiremessage.AppendCompressedUncompressedSize(dst, int32(len(body)))
	dst = wiremessage.AppendCompressedCompressorID(dst, id)
	switch id {
	case wiremessage.CompressorSnappy:
		dst = append(dst, snappy.Encode(nil, body)...)
	case wiremessage.CompressorZstd:
		dst = zstdEncoder().EncodeAll(body, dst)
	case wiremessage.CompressorZLib:
		var b bytes.Buffer
		zw, _ := zlib.NewWriterLevel(&b, zlib.BestSpeed)
		zw.Write(body)
		zw.Close()
		dst = append(dst, b.Bytes()...)
	default:
		dst = append(dst, body...)
	}
	putLength(dst[idx:], int32(len(dst)-start))
	return dst
}

func putLength(b []byte, n int32) {
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
}
