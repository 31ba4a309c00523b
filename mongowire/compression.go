package mongowire

import (
	"bytes"
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

// zstdDecoder is shared: DecodeAll is safe for concurrent use. Its memory is
// bounded by the message size checked before it runs.
var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxMessageSizeBytes), zstd.WithDecoderConcurrency(0))
	if err != nil {
		panic("mongowire: zstd decoder: " + err.Error()) // options are constant
	}
	return d
})

var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic("mongowire: zstd encoder: " + err.Error())
	}
	return e
})

// decompress opens the body of an OP_COMPRESSED message: it returns the
// original message's body (after its header) and opCode.
func decompress(body []byte) ([]byte, wiremessage.OpCode, wiremessage.CompressorID, error) {
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
		out, err = snappy.Decode(nil, rem)
	case wiremessage.CompressorZLib:
		var zr io.ReadCloser
		if zr, err = zlib.NewReader(bytes.NewReader(rem)); err == nil {
			// One byte past the announced size tells a longer stream.
			out, err = io.ReadAll(io.LimitReader(zr, int64(size)+1))
		}
	case wiremessage.CompressorZstd:
		out, err = zstdDecoder().DecodeAll(rem, make([]byte, 0, size))
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
