package lineproto

import (
	"sync"
	"sync/atomic"

	"github.com/hourglassdb/hourglass/model"
)

// DefaultSeriesCacheBytes bounds a server's series cache: about 250,000
// series of iot-like keys (a 45-byte key, a 75-byte meta value, two field
// names), and a fleet of about half that written in turn, which must fit
// in one generation.
const DefaultSeriesCacheBytes = 64 << 20

const (
	// seriesEntryBytes is what a cached series takes beyond its key and
	// meta value: its map slot, its place in order, the series, the boxed
	// meta key.
	seriesEntryBytes = 120
	// maxPending and maxPendingBytes bound the series a decoder found or
	// made and holds until it can add them to the cache (flush).
	maxPending      = 4096
	maxPendingBytes = 1 << 20
	// relockLines: a decoder lets go of the read lock and takes it again
	// every relockLines lines, and adds what it holds for the cache then
	// if it holds relockFlush or more and the write lock is free.
	relockLines = 256
	relockFlush = 64
	// minFieldBytes is what a cached series' field names count at least.
	minFieldBytes = 64
)

// SeriesCache holds the series line-protocol decoders have seen lately:
// their meta values found by the bytes that name them in a line. One
// cache serves all the decoders of a server, so that a fleet's sensors
// are found whichever decoder takes their request, and held once rather
// than once a decoder. Decoders read it under a read lock taken for a
// chunk and taken again every relockLines lines, and add what they made
// under the write lock when they get it without waiting (flush).
//
// Entries go to cur; when cur holds half the cache's bytes it becomes
// prev and the old prev is dropped; an entry found in prev is moved back
// to cur. A series written at least once in each generation's time stays.
// A full cache that answered few lookups (a fleet larger than the cache,
// written in turn: each series is gone before it comes again) is kept as
// it is, without prev, and the next misses, as many as it holds, are not
// cached: refilling it would only cost a map insert and a key copy a line.
//
// cur also keeps its series in the order they were added (order), and
// each series its place there (pos): a sender writes its fleet in the
// same order body after body, so the series of a line is most often the
// one after the series of the line before, compared in place (memory
// read in order) before the map is asked (a hash of the key and reads of
// memory anywhere).
type SeriesCache struct {
	mu        sync.RWMutex
	cur, prev map[string]*series
	order     []*series // cur's series, in the order added
	curBytes  int
	genBytes  int // a generation's bytes at most
	// hits counts the lookups answered since cur was last judged full;
	// skip the misses left that are not cached.
	hits, skip atomic.Int64
}

// NewSeriesCache returns an empty cache of at most maxBytes.
func NewSeriesCache(maxBytes int) *SeriesCache {
	return &SeriesCache{cur: make(map[string]*series), genBytes: max(maxBytes/2, 1)}
}

// series is a cached series: its key, meta value, and the field names of
// its last entry, which the next entry most likely repeats. Decoders share
// it: fields is the one part that changes.
type series struct {
	key    string
	meta   any // a model.MetaKey, boxed once
	fields atomic.Pointer[fieldSet]
	// fieldBytes is what the cache counts for fields, set when the
	// series is added to it and not changed after; -1 before. A series in
	// the cache takes only field lists no larger (setFields).
	fieldBytes int
	// slot is where the engine remembers the series of meta
	// (model.Measurement.Slot), for a series kept (key set).
	slot model.SeriesSlot
	// pos is the series' place in its cache's order, when last added to
	// cur (under the write lock).
	pos int32
}

func newSeries(meta string) *series { return &series{meta: model.MetaKey(meta), fieldBytes: -1} }

// bytes is what the cache counts for s once added.
func (s *series) bytes() int {
	return len(s.key) + len(s.meta.(model.MetaKey)) + seriesEntryBytes + max(s.fieldBytes, 0)
}

// setFields makes fs the field names of s, unless s is in a cache that
// counted less for them.
func (s *series) setFields(fs *fieldSet) {
	if s.fieldBytes < 0 || fs.bytes() <= s.fieldBytes {
		s.fields.Store(fs)
	}
}

// bytes is the memory of fs: the list, the names' headers and bytes.
func (fs *fieldSet) bytes() int {
	if fs == nil {
		return 0
	}
	n := 24 + 16*len(fs.names)
	for _, name := range fs.names {
		n += len(name)
	}
	return n
}

// find returns the series named key, under the read lock, trying the
// series after cur's order[at] first; prev is true when it came from the
// older generation. at is where the series found is in order, -1 when it
// came from prev or nowhere.
func (c *SeriesCache) find(key []byte, at int32) (s *series, prev bool, pos int32) {
	if next := int(at) + 1; at >= 0 && next < len(c.order) && c.order[next].key == string(key) {
		return c.order[next], false, int32(next)
	}
	if s, ok := c.cur[model.StringView(key)]; ok {
		return s, false, s.pos
	}
	if s, ok := c.prev[model.StringView(key)]; ok {
		return s, true, -1
	}
	return nil, false, -1
}

// skipMiss reports whether a miss is not to be cached, and counts it.
func (c *SeriesCache) skipMiss() bool {
	if c.skip.Load() <= 0 {
		return false
	}
	c.skip.Add(-1)
	return true
}

// addLocked adds s, found in prev or made on a miss, to cur.
func (c *SeriesCache) addLocked(s *series) {
	if _, ok := c.cur[s.key]; ok || c.skip.Load() > 0 {
		return
	}
	if s.fieldBytes < 0 {
		s.fieldBytes = max(s.fields.Load().bytes(), minFieldBytes)
	}
	size := s.bytes()
	if c.curBytes+size > c.genBytes {
		if c.hits.Load() < int64(len(c.cur)/missesPerHit) {
			c.skip.Store(int64(len(c.cur)))
			c.hits.Store(0)
			c.prev = nil
			return
		}
		c.prev, c.cur, c.curBytes = c.cur, make(map[string]*series, len(c.cur)), 0
		c.order = make([]*series, 0, len(c.order))
		c.hits.Store(0)
	}
	c.cur[s.key] = s
	s.pos = int32(len(c.order))
	c.order = append(c.order, s)
	c.curBytes += size
}

// size is the number of series held and their bytes, for tests.
func (c *SeriesCache) size() (entries, bytes int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, m := range []map[string]*series{c.cur, c.prev} {
		for _, s := range m {
			entries++
			bytes += s.bytes()
		}
	}
	return entries, bytes
}

// beginChunk takes the cache's read lock for the lookups of a chunk.
func (d *Decoder) beginChunk() {
	d.cache.mu.RLock()
	d.pos = -1
}

// endChunk releases the read lock and adds to the cache the series the
// chunk made or found in prev (flush).
func (d *Decoder) endChunk() {
	d.cache.mu.RUnlock()
	d.flush()
}

// relock lets go of the read lock and takes it again (relockLines),
// adding what the decoder holds for the cache if it is much.
func (d *Decoder) relock() {
	d.cache.mu.RUnlock()
	if len(d.made)+len(d.promote) >= relockFlush {
		d.flush()
	}
	d.cache.mu.RLock()
	d.pos = -1
}

// flush adds to the cache the series made or found in prev, if the write
// lock is free: a decoder never waits for another (waiting made a fleet
// of a million sensors in turn 20% slower to decode). Otherwise they wait
// for a later try; meanwhile this decoder finds what it made in made, and
// holds no more than maxPending and maxPendingBytes. The read lock is not
// held.
func (d *Decoder) flush() {
	c := d.cache
	if d.hits > 0 {
		c.hits.Add(int64(d.hits))
		d.hits = 0
	}
	if len(d.made) == 0 && len(d.promote) == 0 || !c.mu.TryLock() {
		return
	}
	// A promote may rotate the generations: what was found in the
	// dropped one still moves to cur.
	prev := c.prev
	for _, s := range d.promote {
		if prev[s.key] == s || c.prev[s.key] == s {
			c.addLocked(s)
		}
	}
	for _, s := range d.madeOrder {
		c.addLocked(s)
	}
	c.mu.Unlock()
	clear(d.promote)
	d.promote = d.promote[:0]
	clear(d.made)
	clear(d.madeOrder)
	d.madeOrder = d.madeOrder[:0]
	d.madeBytes = 0
}
