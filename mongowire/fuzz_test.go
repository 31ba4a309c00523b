package mongowire

import (
	"bytes"
	"testing"

	"github.com/hourglassdb/hourglass/model"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// FuzzDecodeMessage feeds arbitrary bytes to the message decoder: it never
// panics, and a command it accepts converts to values and survives being
// written as a reply and read back unchanged.
func FuzzDecodeMessage(f *testing.F) {
	hello, _ := bson.Marshal(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	f.Add(appendOpMsg(nil, 1, 0, hello, false))
	f.Add(appendOpMsg(nil, 1, 0, hello, true))
	f.Add(opQuery(f, "admin.$cmd", bson.D{{Key: "isMaster", Value: 1}}))
	// A string of a wrong length inside a sub-document: one level of
	// validation lets it through to toMap.
	f.Add(appendOpMsg(nil, 1, 0, []byte("9\x00\x00\x00\tts\x0000000000\x03000000\x00 \x00\x00\x00\x0200000000000000000\x00\x00\x00\x00\x0000000\x00"), false))
	plain := appendOpMsg(nil, 2, 0, hello, false)
	for _, id := range []wiremessage.CompressorID{wiremessage.CompressorSnappy, wiremessage.CompressorZstd, wiremessage.CompressorZLib, wiremessage.CompressorNoOp} {
		f.Add(compressMessage(nil, plain, id))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := readHeader(bytes.NewReader(data), make([]byte, headerLen))
		if err != nil || int(h.length) > len(data) {
			return
		}
		req, err := decodeMessage(h, data[headerLen:h.length], nil)
		if err != nil {
			return
		}
		if _, err := model.FromBSON(req.body); err != nil {
			return
		}
		for _, sq := range req.seqs {
			for _, d := range sq.docs {
				model.FromBSON(d)
			}
		}
		out := appendOpMsg(nil, 1, 2, req.body, true)
		h2, _ := readHeader(bytes.NewReader(out), make([]byte, headerLen))
		back, err := decodeMessage(h2, out[headerLen:], nil)
		if err != nil {
			t.Fatalf("a reply of an accepted command does not decode: %v", err)
		}
		if !bytes.Equal(back.body, req.body) {
			t.Fatalf("body changed in a round trip")
		}
	})
}
