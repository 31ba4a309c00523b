package timeseries

import (
	"hash/maphash"
	"math"
	"strings"
	"unsafe"
)

// A collection's series and their meta keys live in chunks rather than
// each in an object of its own: a fleet of a million sensors is then a
// thousand chunks of series and a few thousand of keys for the collector
// to find, not two million small objects whose every pointer it looks up.
// Series are never removed from a collection (collection.addSeries), so
// nothing is freed before the collection is.
const (
	minSlabSeries = 8
	maxSlabSeries = 1024
	minKeyChunk   = 512
	maxKeyChunk   = 64 << 10
	// maxChunkedKey: a longer meta key keeps a string of its own, so that
	// a chunk does not outlive a few large keys by much.
	maxChunkedKey = 1 << 10
)

// seriesSlab hands out a collection's series and copies of their meta keys.
// Guarded by DB.mu (held for writing), as collection.addSeries.
type seriesSlab struct {
	series []series // the chunk being handed out: its first len are in use
	keys   []byte   // the key chunk being filled: its first len are in use
}

// alloc returns a zeroed series from the current chunk, first making a new
// chunk, each twice the last up to maxSlabSeries, when it is used up.
func (a *seriesSlab) alloc() *series {
	if len(a.series) == cap(a.series) {
		a.series = make([]series, 0, min(max(2*cap(a.series), minSlabSeries), maxSlabSeries))
	}
	a.series = a.series[:len(a.series)+1]
	return &a.series[len(a.series)-1]
}

// key returns a copy of k in the current key chunk. The chunk's bytes are
// never written again once handed out, so the string stays immutable.
func (a *seriesSlab) key(k string) string {
	if len(k) == 0 {
		return ""
	}
	if len(k) > maxChunkedKey {
		return strings.Clone(k)
	}
	if cap(a.keys)-len(a.keys) < len(k) {
		a.keys = make([]byte, 0, min(max(2*cap(a.keys), minKeyChunk), maxKeyChunk))
	}
	off := len(a.keys)
	a.keys = append(a.keys, k...)
	return unsafe.String(&a.keys[off], len(k))
}

// newSeries returns a series of c with id and a copy of metaKey, nothing
// stored and nothing known of its last row. It is not yet added
// (collection.addSeries). DB.mu is held for writing.
func (c *collection) newSeries(id uint64, metaKey string) *series {
	s := c.slab.alloc()
	s.id, s.coll, s.metaKey = id, c, c.slab.key(metaKey)
	s.storedMax, s.lastT = math.MinInt64, math.MinInt64
	return s
}

// seriesIndex finds a collection's series by meta key. Its tables hold no
// pointer for the collector to follow: each slot is a series' ordinal and
// 32 bits of its key's hash, found by linear probing; byOrd holds the
// series themselves by ordinal (series.ord). The top bits of the hash pick
// one of indexShards tables, each grown on its own, so that growing moves
// a shard's slots, not the whole index's (the pause of one table of a
// million series would be tens of milliseconds, with inserts waiting).
// Series are never removed. Its writers hold DB.mu and the collection's
// lookupMu for writing, its readers either.
type seriesIndex struct {
	seed   maphash.Seed
	shards [indexShards][]uint64 // hash<<32 | ord+1; 0: empty
	counts [indexShards]uint32
	byOrd  []*series
}

// indexShards is the number of tables of a seriesIndex, picked by a hash's
// top indexShardBits bits.
const (
	indexShardBits = 6
	indexShards    = 1 << indexShardBits
)

// hash is the 32 hash bits of key a slot keeps.
func (x *seriesIndex) hash(key string) uint32 { return uint32(maphash.String(x.seed, key) >> 32) }

// get returns the series with meta key key, nil if there is none.
func (x *seriesIndex) get(key string) *series {
	if len(x.byOrd) == 0 {
		return nil
	}
	h := x.hash(key)
	t := x.shards[h>>(32-indexShardBits)]
	if len(t) == 0 {
		return nil
	}
	mask := uint32(len(t) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := t[i]
		if v == 0 {
			return nil
		}
		if uint32(v>>32) == h {
			if s := x.byOrd[uint32(v)-1]; s.metaKey == key {
				return s
			}
		}
	}
}

// add indexes s, whose key is not indexed, as the series of ordinal
// x.len() (collection.addSeries sets s.ord so).
func (x *seriesIndex) add(s *series) {
	if len(x.byOrd) == 0 {
		x.seed = maphash.MakeSeed()
	}
	h := x.hash(s.metaKey)
	sh := h >> (32 - indexShardBits)
	if 4*(x.counts[sh]+1) > 3*uint32(len(x.shards[sh])) {
		x.grow(sh)
	}
	x.byOrd = append(x.byOrd, s)
	x.counts[sh]++
	place(x.shards[sh], h, uint32(len(x.byOrd)))
}

// place puts the slot value of hash h and ordinal ord-1 in table t.
func place(t []uint64, h, ord uint32) {
	mask := uint32(len(t) - 1)
	i := h & mask
	for t[i] != 0 {
		i = (i + 1) & mask
	}
	t[i] = uint64(h)<<32 | uint64(ord)
}

// grow doubles shard sh's table (8 slots at first) and places its series
// again by the hash bits the old table kept.
func (x *seriesIndex) grow(sh uint32) {
	old := x.shards[sh]
	t := make([]uint64, max(2*len(old), 8))
	for _, v := range old {
		if v != 0 {
			place(t, uint32(v>>32), uint32(v))
		}
	}
	x.shards[sh] = t
}

// len is the number of series indexed.
func (x *seriesIndex) len() int { return len(x.byOrd) }
