package timeseries

import (
	"encoding/binary"
	"fmt"
)

// The Pebble key schema (docs/format/keys.md draws it). The first byte of
// every key names its space; integers are big-endian so that byte order is
// numeric order, and signed times have their sign bit flipped.
const (
	spaceMeta     byte = 0x00 // 0x00 <name>                      -> state of the store
	spaceCatalog  byte = 0x01 // 0x01 <collection name>           -> collection record (JSON)
	spaceSeries   byte = 0x02 // 0x02 <coll u32> <series u64>     -> canonical meta value
	spaceBucket   byte = 0x03 // 0x03 <coll u32> <series u64> <minTime i64> <bucket u64> -> sealed bucket
	spaceOpen     byte = 0x04 // 0x04 <coll u32> <series u64> <minTime i64> <bucket u64> -> open-bucket snapshot
	spaceDocument byte = 0x05 // reserved for plain collections
	spaceRollup   byte = 0x06 // 0x06 <coll u32>                  -> a rollup's windows to recompute
	spaceArchive  byte = 0x07 // 0x07 <coll u32> <kind u8> <seq u64> [<n u16>] -> archive intents and files (archive.go)
)

// Keys of the meta space.
var (
	keyCheckpoint = []byte{spaceMeta, 'c', 'h', 'e', 'c', 'k', 'p', 'o', 'i', 'n', 't'}
	keyFormat     = []byte{spaceMeta, 'f', 'o', 'r', 'm', 'a', 't'}
)

// formatVersion is the version of the key schema, record layouts and
// bucket encodings a store may hold; a store written by a newer version is
// refused, and an older one is raised to it on open (this build reads
// every older version). 1: the first; 2: time columns of buckets may be
// scaled to whole microseconds, milliseconds or seconds (bucket format,
// time mode 2), which builds of version 1 cannot read; 3: int and date
// columns may be divided by a power of ten (bucket encoding 6, scaled int);
// 4: measurement values of types int32, bson and objectid (bucket types
// 6-8, bucket encoding 7, log record value kinds 6-8); 5: an open bucket's
// snapshot may be its frozen rows (bucket.VersionSnapshot); 6: time columns
// may be stored in blocks (bucket format, time mode 3), which builds of
// version 5 cannot read; 7: insert log records may name series by id
// (record kind 6), which builds of version 6 cannot replay; 8: the times of
// a frozen chunk (open-bucket snapshots) may be in a unit of microseconds,
// milliseconds or seconds, which builds of version 7 cannot read; 9: a
// float value of an insert log record may be a whole number written as a
// varint (value kind 0x41), which builds of version 8 cannot replay.
const formatVersion = 9

const bucketKeyLen = 1 + 4 + 8 + 8 + 8

func catalogKey(name string) []byte {
	return append([]byte{spaceCatalog}, name...)
}

func seriesKey(coll uint32, series uint64) []byte {
	k := make([]byte, 13)
	k[0] = spaceSeries
	binary.BigEndian.PutUint32(k[1:], coll)
	binary.BigEndian.PutUint64(k[5:], series)
	return k
}

// collPrefix returns the key prefix of one collection in space.
func collPrefix(space byte, coll uint32) []byte {
	k := make([]byte, 5)
	k[0] = space
	binary.BigEndian.PutUint32(k[1:], coll)
	return k
}

// seriesPrefix returns the prefix of one series' buckets in space.
func seriesPrefix(space byte, coll uint32, series uint64) []byte {
	k := make([]byte, 13)
	k[0] = space
	binary.BigEndian.PutUint32(k[1:], coll)
	binary.BigEndian.PutUint64(k[5:], series)
	return k
}

func flipTime(t int64) uint64 { return uint64(t) ^ (1 << 63) }

func unflipTime(u uint64) int64 { return int64(u ^ (1 << 63)) }

// bucketKey is the key of a bucket in space (spaceBucket or spaceOpen).
func bucketKey(space byte, coll uint32, series uint64, minTime int64, id uint64) []byte {
	k := make([]byte, bucketKeyLen)
	k[0] = space
	binary.BigEndian.PutUint32(k[1:], coll)
	binary.BigEndian.PutUint64(k[5:], series)
	binary.BigEndian.PutUint64(k[13:], flipTime(minTime))
	binary.BigEndian.PutUint64(k[21:], id)
	return k
}

// seriesTimeKey is the smallest bucket key of series with min time >= t.
func seriesTimeKey(space byte, coll uint32, series uint64, t int64) []byte {
	k := make([]byte, 21)
	k[0] = space
	binary.BigEndian.PutUint32(k[1:], coll)
	binary.BigEndian.PutUint64(k[5:], series)
	binary.BigEndian.PutUint64(k[13:], flipTime(t))
	return k
}

// appendSeriesTimeKey appends seriesTimeKey(space, coll, series, t) to
// dst.
func appendSeriesTimeKey(dst []byte, space byte, coll uint32, series uint64, t int64) []byte {
	dst = append(dst, space)
	dst = binary.BigEndian.AppendUint32(dst, coll)
	dst = binary.BigEndian.AppendUint64(dst, series)
	return binary.BigEndian.AppendUint64(dst, flipTime(t))
}

type bucketKeyParts struct {
	coll    uint32
	series  uint64
	minTime int64
	id      uint64
}

func parseBucketKey(k []byte) (bucketKeyParts, error) {
	if len(k) != bucketKeyLen || (k[0] != spaceBucket && k[0] != spaceOpen) {
		return bucketKeyParts{}, fmt.Errorf("%w: bucket key of %d bytes", ErrCorrupt, len(k))
	}
	return bucketKeyParts{
		coll:    binary.BigEndian.Uint32(k[1:]),
		series:  binary.BigEndian.Uint64(k[5:]),
		minTime: unflipTime(binary.BigEndian.Uint64(k[13:])),
		id:      binary.BigEndian.Uint64(k[21:]),
	}, nil
}

// prefixEnd returns the smallest key greater than every key with prefix p.
// prefixEndInPlace is prefixEnd changing p itself.
func prefixEndInPlace(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] < 0xff {
			p[i]++
			return p[:i+1]
		}
	}
	return nil
}

func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
