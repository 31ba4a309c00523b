package mongowire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"unicode/utf8"

	"github.com/hourglassdb/hourglass/model"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// The limits a server announces in hello; MongoDB's values, which the
// drivers size their batches by.
const (
	// MaxMessageSizeBytes bounds a whole message, header included.
	MaxMessageSizeBytes = 48000000
	// MaxBSONObjectSize bounds one document.
	MaxBSONObjectSize = 16 << 20
	// maxCommandSize is MaxBSONObjectSize plus the 16 KiB MongoDB allows a
	// command body for its own fields around a maximal document.
	maxCommandSize = MaxBSONObjectSize + 16<<10
	// MaxWriteBatchSize bounds the documents of one insert.
	MaxWriteBatchSize = 100000
)

const headerLen = 16

// OP_MSG flag bits. Bits 0 to 15 are required: a receiver must refuse a
// message with one it does not know.
const (
	flagChecksumPresent wiremessage.MsgFlag = 1 << 0
	flagMoreToCome      wiremessage.MsgFlag = 1 << 1
	flagExhaustAllowed  wiremessage.MsgFlag = 1 << 16
	requiredFlagBits                        = 0xffff
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors of the message layer.
var (
	// errMessageSize is a header announcing a length outside
	// [headerLen, MaxMessageSizeBytes]: the stream cannot be trusted, so the
	// connection is closed.
	errMessageSize = errors.New("mongowire: message length out of range")
)

// header is the standard message header.
type header struct {
	length, requestID, responseTo int32
	opCode                        wiremessage.OpCode
}

// request is a decoded client message: a command and its document
// sequences. Its documents alias the message's bytes.
type request struct {
	header header
	// opCode is that of the command's message (OP_MSG or OP_QUERY), also
	// when it came inside OP_COMPRESSED.
	opCode wiremessage.OpCode
	flags  wiremessage.MsgFlag
	// body is the command: the kind-0 section of an OP_MSG, the query of
	// an OP_QUERY.
	body bsoncore.Document
	// seqs are the kind-1 sections, in message order.
	seqs []sequence
	// ns is the full collection name of an OP_QUERY ("admin.$cmd").
	ns string
	// compressor is the algorithm of an OP_COMPRESSED request, which its
	// reply uses too.
	compressor wiremessage.CompressorID
}

// sequence is a kind-1 section: documents under an identifier that stands
// for an array field of the command ("documents" of an insert).
type sequence struct {
	id   string
	docs []bsoncore.Document
}

// moreToCome reports whether the client expects no reply.
func (r *request) moreToCome() bool { return r.flags&flagMoreToCome != 0 }

// readHeader reads and checks a message header.
func readHeader(rd io.Reader, buf []byte) (header, error) {
	var h header
	if _, err := io.ReadFull(rd, buf[:headerLen]); err != nil {
		return h, err
	}
	length, reqID, respTo, op, _, ok := wiremessage.ReadHeader(buf[:headerLen])
	if !ok {
		return h, errMessageSize
	}
	h = header{length: length, requestID: reqID, responseTo: respTo, opCode: op}
	if length < headerLen || length > MaxMessageSizeBytes {
		return h, fmt.Errorf("%w: %d bytes, want %d to maxMessageSizeBytes %d", errMessageSize, length, headerLen, MaxMessageSizeBytes)
	}
	return h, nil
}

// decodeError is a malformed message whose header was sound: the client
// gets an error reply and the connection stays usable.
func decodeError(format string, args ...any) error {
	return mongoerr.New(mongoerr.BadValue, format, args...)
}

// decodeMessage decodes the body (the bytes after the header) of a
// message. Every document it returns has been validated, so that reading
// its elements cannot fail on bad lengths. The body of an OP_COMPRESSED
// message is decompressed into inflated's spare capacity when it has room
// (see compressedSize).
func decodeMessage(h header, body, inflated []byte) (*request, error) {
	r := &request{header: h, opCode: h.opCode}
	if h.opCode == wiremessage.OpCompressed {
		inner, op, id, err := decompress(body, inflated)
		if err != nil {
			return nil, err
		}
		r.compressor = id
		if op == wiremessage.OpCompressed {
			return nil, decodeError("OP_COMPRESSED inside OP_COMPRESSED")
		}
		body, r.opCode = inner, op
	}
	switch r.opCode {
	case wiremessage.OpMsg:
		return r, decodeOpMsg(r, body)
	case wiremessage.OpQuery:
		return r, decodeOpQuery(r, body)
	}
	return nil, decodeError("unsupported opCode %d: Hourglass answers OP_MSG, and OP_QUERY for the handshake", int32(r.opCode))
}

func decodeOpMsg(r *request, body []byte) error {
	flags, rem, ok := wiremessage.ReadMsgFlags(body)
	if !ok {
		return decodeError("OP_MSG too short for its flags")
	}
	r.flags = flags
	if unknown := flags & requiredFlagBits &^ (flagChecksumPresent | flagMoreToCome); unknown != 0 {
		return decodeError("OP_MSG has unknown required flag bits %#x", uint32(unknown))
	}
	if flags&flagChecksumPresent != 0 {
		if len(rem) < 4 {
			return decodeError("OP_MSG too short for its checksum")
		}
		// The checksum covers the header too, which the caller passed
		// separately: rebuild it.
		var hb [headerLen]byte
		putHeader(hb[:], r.header)
		sum := crc32.Update(crc32.Checksum(hb[:], castagnoli), castagnoli, body[:len(body)-4])
		if got := binary.LittleEndian.Uint32(body[len(body)-4:]); got != sum {
			return decodeError("OP_MSG checksum %#08x does not match its contents (%#08x)", got, sum)
		}
		rem = rem[:len(rem)-4]
	}
	for len(rem) > 0 {
		kind, rest, _ := wiremessage.ReadMsgSectionType(rem)
		switch kind {
		case wiremessage.SingleDocument:
			if r.body != nil {
				return decodeError("OP_MSG has more than one kind-0 section")
			}
			doc, err := readDocument(rest, maxCommandSize)
			if err != nil {
				return err
			}
			r.body, rem = doc, rest[len(doc):]
		case wiremessage.DocumentSequence:
			if len(rest) < 4 {
				return decodeError("OP_MSG document sequence too short")
			}
			size := int(int32(binary.LittleEndian.Uint32(rest)))
			if size < 5 || size > len(rest) {
				return decodeError("OP_MSG document sequence of %d bytes in %d remaining", size, len(rest))
			}
			seq, err := decodeSequence(rest[4:size])
			if err != nil {
				return err
			}
			r.seqs, rem = append(r.seqs, seq), rest[size:]
		default:
			return decodeError("OP_MSG section kind %d is unknown", byte(kind))
		}
	}
	if r.body == nil {
		return decodeError("OP_MSG has no kind-0 section")
	}
	return nil
}

func decodeSequence(b []byte) (sequence, error) {
	var s sequence
	end := 0
	for end < len(b) && b[end] != 0 {
		end++
	}
	if end == len(b) {
		return s, decodeError("OP_MSG document sequence identifier is not terminated")
	}
	s.id, b = string(b[:end]), b[end+1:]
	if !utf8.ValidString(s.id) {
		return s, mongoerr.New(mongoerr.InvalidBSON, "OP_MSG document sequence identifier %q is not valid UTF-8", s.id)
	}
	for len(b) > 0 {
		doc, err := readDocument(b, MaxBSONObjectSize)
		if err != nil {
			return s, fmt.Errorf("document %d of sequence %q: %w", len(s.docs), s.id, err)
		}
		s.docs, b = append(s.docs, doc), b[len(doc):]
	}
	return s, nil
}

// readDocument reads one document at the start of b, refusing one over
// limit bytes with BSONObjectTooLarge, and one holding a key or string
// that is not UTF-8 with InvalidBSON.
func readDocument(b []byte, limit int) (bsoncore.Document, error) {
	if len(b) < 5 {
		return nil, decodeError("truncated BSON document")
	}
	size := int(int32(binary.LittleEndian.Uint32(b)))
	if size > limit {
		return nil, mongoerr.New(mongoerr.BSONObjectTooLarge, "BSON document of %d bytes is over the limit of %d (maxBsonObjectSize)", size, limit)
	}
	if size < 5 || size > len(b) {
		return nil, decodeError("BSON document length %d does not fit the %d bytes left", size, len(b))
	}
	doc := bsoncore.Document(b[:size])
	if err := model.ValidateBSON(doc); err != nil {
		var me *mongoerr.Error
		if errors.As(err, &me) {
			return nil, err
		}
		return nil, decodeError("invalid BSON document: %v", err)
	}
	return doc, nil
}

func decodeOpQuery(r *request, body []byte) error {
	_, rem, ok := wiremessage.ReadQueryFlags(body)
	if !ok {
		return decodeError("OP_QUERY too short for its flags")
	}
	ns, rem, ok := wiremessage.ReadQueryFullCollectionName(rem)
	if !ok {
		return decodeError("OP_QUERY collection name is not terminated")
	}
	if !utf8.ValidString(ns) {
		return mongoerr.New(mongoerr.InvalidBSON, "OP_QUERY collection name %q is not valid UTF-8", ns)
	}
	if _, rem, ok = wiremessage.ReadQueryNumberToSkip(rem); !ok {
		return decodeError("OP_QUERY too short")
	}
	if _, rem, ok = wiremessage.ReadQueryNumberToReturn(rem); !ok {
		return decodeError("OP_QUERY too short")
	}
	doc, err := readDocument(rem, maxCommandSize)
	if err != nil {
		return err
	}
	rem = rem[len(doc):]
	if len(rem) > 0 {
		// The optional field selector: checked, then ignored.
		if _, err := readDocument(rem, maxCommandSize); err != nil {
			return err
		}
	}
	r.ns, r.body = ns, doc
	return nil
}

func putHeader(b []byte, h header) {
	binary.LittleEndian.PutUint32(b[0:], uint32(h.length))
	binary.LittleEndian.PutUint32(b[4:], uint32(h.requestID))
	binary.LittleEndian.PutUint32(b[8:], uint32(h.responseTo))
	binary.LittleEndian.PutUint32(b[12:], uint32(h.opCode))
}

// appendOpMsg appends an OP_MSG reply holding doc to dst, with a checksum
// when withChecksum is set.
func appendOpMsg(dst []byte, requestID, responseTo int32, doc bsoncore.Document, withChecksum bool) []byte {
	start := len(dst)
	idx, dst := wiremessage.AppendHeaderStart(dst, requestID, responseTo, wiremessage.OpMsg)
	var flags wiremessage.MsgFlag
	if withChecksum {
		flags |= flagChecksumPresent
	}
	dst = wiremessage.AppendMsgFlags(dst, flags)
	dst = wiremessage.AppendMsgSectionType(dst, wiremessage.SingleDocument)
	dst = append(dst, doc...)
	if withChecksum {
		dst = binary.LittleEndian.AppendUint32(dst, 0)
	}
	dst = bsoncore.UpdateLength(dst, idx, int32(len(dst)-start))
	if withChecksum {
		sum := crc32.Checksum(dst[start:len(dst)-4], castagnoli)
		binary.LittleEndian.PutUint32(dst[len(dst)-4:], sum)
	}
	return dst
}

// appendOpReply appends the OP_REPLY answering an OP_QUERY.
func appendOpReply(dst []byte, requestID, responseTo int32, doc bsoncore.Document) []byte {
	start := len(dst)
	idx, dst := wiremessage.AppendHeaderStart(dst, requestID, responseTo, wiremessage.OpReply)
	dst = wiremessage.AppendReplyFlags(dst, 0)
	dst = wiremessage.AppendReplyCursorID(dst, 0)
	dst = wiremessage.AppendReplyStartingFrom(dst, 0)
	dst = wiremessage.AppendReplyNumberReturned(dst, 1)
	dst = append(dst, doc...)
	return bsoncore.UpdateLength(dst, idx, int32(len(dst)-start))
}
