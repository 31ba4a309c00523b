package api

import (
	"bytes"
	"sync"

	"github.com/hourglassdb/hourglass/model"
)

// promKeys is the meta key of the series remote write has seen lately,
// found by their labels as encoded in the request: a series sends the
// same labels, the same bytes, with every request, and its labels are
// then neither decoded, checked nor encoded again. Identical bytes decode
// to identical labels, so a key is right for any request and collection;
// a series whose labels were refused is not kept.
var promKeys = newPromKeyCache(promKeyCacheBytes)

const (
	// promKeyCacheBytes bounds the memory of promKeys: about 200,000
	// series of node-exporter-like labels. Past it, the series seen
	// least lately are dropped and made again when they come back.
	promKeyCacheBytes = 64 << 20
	// promKeyMaxWire: labels longer than this when encoded are not kept.
	promKeyMaxWire = 8 << 10
	// promKeyEntryBytes is what an entry takes beyond its encoded labels
	// (counted in its generation's chunks) and its key: its map slot, its
	// entry, the boxed key, its series slot.
	promKeyEntryBytes = 112
)

// promKeyCache maps encoded labels to a meta key, in two generations:
// entries are added to cur; when cur holds half the cache's bytes, it
// becomes prev and the old prev is dropped; an entry found in prev is
// moved to cur. A series sent at least once in each generation's time
// stays; the memory stays within max.
//
// A generation keeps its entries in the order they were added, their
// encoded labels in chunks of bytes in the same order: a sender sends its
// series in the same order with every request, so the series after one
// found at entry i is most often entry i+1, compared there in place
// (memory read in order) before the map is asked (a hash of the labels
// and reads of memory anywhere). Out of order, the map finds it as
// before.
type promKeyCache struct {
	mu        sync.RWMutex
	cur, prev *promKeyGen
	genBytes  int // a generation's bytes at most
}

// promKeyGen is one generation of a promKeyCache.
type promKeyGen struct {
	index   map[string]int32 // encoded labels -> entries
	entries []promKeyEntry   // in the order added
	chunk   []byte           // where the next entry's encoded labels go
	bytes   int
}

// promKeyChunk is the size of the chunks a generation keeps encoded
// labels in (at most an eighth of a generation).
const promKeyChunk = 64 << 10

type promKeyEntry struct {
	wire string // a view of one of its generation's chunks
	key  any    // a model.MetaKey
	// slot is where the engine remembers the key's series (model.SeriesSlot).
	slot *model.SeriesSlot
}

func newPromKeyCache(max int) *promKeyCache {
	return &promKeyCache{cur: newPromKeyGen(), prev: newPromKeyGen(), genBytes: max / 2}
}

func newPromKeyGen() *promKeyGen { return &promKeyGen{index: map[string]int32{}} }

// find returns the position of the entry of encoded labels wire in g, -1
// if none, trying the entry after at first.
func (g *promKeyGen) find(wire []byte, at int32) int32 {
	if next := int(at) + 1; at >= 0 && next < len(g.entries) && g.entries[next].wire == string(wire) {
		return int32(next)
	}
	if i, ok := g.index[string(wire)]; ok {
		return i
	}
	return -1
}

// lookup sets the key of each series of a request whose labels c holds.
func (c *promKeyCache) lookup(series []promWSeries) {
	if c == nil {
		return
	}
	promote := false
	var last *promWSeries // the series before with encoded labels
	at := int32(-1)       // the entry in cur of the series before
	c.mu.RLock()
	for i := range series {
		s := &series[i]
		if s.wire == nil {
			continue
		}
		if last != nil && bytes.Equal(s.wire, last.wire) {
			// A series sent once a sample: found, or not, as before.
			s.key, s.cached, s.slot = last.key, last.cached, last.slot
			continue
		}
		last = s
		if at = c.cur.find(s.wire, at); at >= 0 {
			e := &c.cur.entries[at]
			s.key, s.cached, s.slot = e.key, true, e.slot
		} else if j := c.prev.find(s.wire, -1); j >= 0 {
			e := &c.prev.entries[j]
			s.key, s.cached, s.promote, s.slot = e.key, true, true, e.slot
			promote = true
		}
	}
	c.mu.RUnlock()
	if !promote {
		return
	}
	c.mu.Lock()
	for i := range series {
		if s := &series[i]; s.promote {
			s.promote = false
			if j := c.prev.find(s.wire, -1); j >= 0 {
				c.addLocked(s.wire, c.prev.entries[j].key, c.prev.entries[j].slot)
			}
		}
	}
	c.mu.Unlock()
}

// add keeps the keys check made for the series of a request that lookup
// did not find, in the request's order.
func (c *promKeyCache) add(series []promWSeries) {
	if c == nil {
		return
	}
	locked := false
	for i := range series {
		s := &series[i]
		if s.cached || s.key == nil || s.wire == nil || len(s.wire) > promKeyMaxWire {
			continue
		}
		if !locked {
			c.mu.Lock()
			locked = true
		}
		c.addLocked(s.wire, s.key, nil)
	}
	if locked {
		c.mu.Unlock()
	}
}

// addLocked adds the entry of encoded labels wire to cur, unless it is
// there; slot nil makes a new one.
func (c *promKeyCache) addLocked(wire []byte, key any, slot *model.SeriesSlot) {
	g := c.cur
	if _, ok := g.index[string(wire)]; ok {
		return
	}
	// A generation starts before it would pass its bytes: neither holds
	// more than half the cache (an entry larger than that, which
	// promKeyMaxWire rules out at any useful size, has one to itself).
	// Its bytes count its chunks whole, and each entry beyond its labels.
	n, chunk := len(key.(model.MetaKey))+promKeyEntryBytes, 0
	if cap(g.chunk)-len(g.chunk) < len(wire) {
		chunk = max(min(promKeyChunk, c.genBytes/8), len(wire))
	}
	if g.bytes > 0 && g.bytes+n+chunk > c.genBytes {
		c.prev, c.cur = c.cur, newPromKeyGen()
		g = c.cur
		chunk = max(min(promKeyChunk, c.genBytes/8), len(wire))
	}
	if chunk > 0 {
		g.chunk = make([]byte, 0, chunk)
	}
	if slot == nil {
		slot = new(model.SeriesSlot)
	}
	off := len(g.chunk)
	g.chunk = append(g.chunk, wire...)
	w := model.StringView(g.chunk[off:len(g.chunk):len(g.chunk)])
	g.index[w] = int32(len(g.entries))
	g.entries = append(g.entries, promKeyEntry{wire: w, key: key, slot: slot})
	g.bytes += n + chunk
}

// size is the number of entries and their bytes, for tests.
func (c *promKeyCache) size() (entries, bytes int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.cur.entries) + len(c.prev.entries), c.cur.bytes + c.prev.bytes
}
