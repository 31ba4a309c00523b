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
	// promKeyEntryBytes is what an entry takes beyond its two strings:
	// its map slot, the boxed key, the strings' headers, its series slot.
	promKeyEntryBytes = 112
)

// promKeyCache maps encoded labels to a meta key, in two generations:
// entries are added to cur; when cur holds half the cache's bytes, it
// becomes prev and the old prev is dropped; an entry found in prev is
// moved to cur. A series sent at least once in each generation's time
// stays; the memory stays within max.
type promKeyCache struct {
	mu        sync.RWMutex
	cur, prev map[string]promKeyEntry
	curBytes  int
	genBytes  int // a generation's bytes at most
}

type promKeyEntry struct {
	wire string
	key  any // a model.MetaKey
	// slot is where the engine remembers the key's series (model.SeriesSlot).
	slot *model.SeriesSlot
}

func newPromKeyCache(max int) *promKeyCache {
	return &promKeyCache{cur: map[string]promKeyEntry{}, genBytes: max / 2}
}

// lookup sets the key of each series of a request whose labels c holds.
func (c *promKeyCache) lookup(series []promWSeries) {
	if c == nil {
		return
	}
	promote := false
	var last *promWSeries // the series before with encoded labels
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
		if e, ok := c.cur[string(s.wire)]; ok {
			s.key, s.cached, s.slot = e.key, true, e.slot
		} else if e, ok := c.prev[string(s.wire)]; ok {
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
			if e, ok := c.prev[string(s.wire)]; ok {
				c.addLocked(e)
			}
		}
	}
	c.mu.Unlock()
}

// add keeps the keys check made for the series of a request that lookup
// did not find.
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
		if _, ok := c.cur[string(s.wire)]; !ok {
			c.addLocked(promKeyEntry{wire: string(s.wire), key: s.key, slot: new(model.SeriesSlot)})
		}
	}
	if locked {
		c.mu.Unlock()
	}
}

func (c *promKeyCache) addLocked(e promKeyEntry) {
	if _, ok := c.cur[e.wire]; ok {
		return
	}
	// A generation starts before it would pass its bytes: neither holds
	// more than half the cache (an entry larger than that, which
	// promKeyMaxWire rules out at any useful size, has one to itself).
	n := len(e.wire) + len(e.key.(model.MetaKey)) + promKeyEntryBytes
	if c.curBytes > 0 && c.curBytes+n > c.genBytes {
		c.prev, c.cur, c.curBytes = c.cur, map[string]promKeyEntry{}, 0
	}
	c.cur[e.wire] = e
	c.curBytes += n
}

// size is the number of entries and their bytes, for tests.
func (c *promKeyCache) size() (entries, bytes int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, m := range []map[string]promKeyEntry{c.cur, c.prev} {
		for _, e := range m {
			entries++
			bytes += len(e.wire) + len(e.key.(model.MetaKey)) + promKeyEntryBytes
		}
	}
	return entries, bytes
}
