// Package document encodes the JSON documents of plain collections: a compact
// binary form for storage, an order-preserving key form for indexes, and
// Extended JSON for output. It is pure: bytes in, values out.
//
// Values are those of package partialfilter: nil, bool, int32, int64,
// float64, partialfilter.Decimal128, string, time.Time (dates),
// partialfilter.ObjectID, partialfilter.Binary, []any and map[string]any;
// each keeps its BSON type through storage and output.
package document

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// Doc is a decoded document.
type Doc = map[string]any

// MaxDepth bounds the nesting of arrays and sub-documents (MongoDB allows
// 100 levels in BSON).
const MaxDepth = 100

// MaxSize bounds the encoded size of one document (MongoDB's 16 MiB).
const MaxSize = 16 << 20

var (
	oidProcess [5]byte
	oidCounter atomic.Uint32
)

func init() {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	copy(oidProcess[:], b[:5])
	oidCounter.Store(binary.BigEndian.Uint32(b[4:]))
}

// NewObjectID returns a new ObjectId as MongoDB drivers make them: seconds
// since the epoch, five random bytes fixed for the process, and a counter.
// Ids made by one process increase with time.
func NewObjectID(now time.Time) partialfilter.ObjectID {
	var id partialfilter.ObjectID
	binary.BigEndian.PutUint32(id[0:], uint32(now.Unix()))
	copy(id[4:9], oidProcess[:])
	c := oidCounter.Add(1)
	id[9], id[10], id[11] = byte(c>>16), byte(c>>8), byte(c)
	return id
}
