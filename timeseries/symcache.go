package timeseries

import (
	"bytes"
	"container/list"
	"sync"
)

// symbolCache is a bucket.SymbolCache: decoded shared symbol blocks, least
// recently used first out, within a byte budget. An entry is found by the
// block's exact bytes, so a bucket rewritten under the same key (an open
// bucket's snapshot, a partial delete) never meets its old symbols.
type symbolCache struct {
	mu     sync.Mutex
	max    int64
	size   int64
	m      map[string]*list.Element
	lru    list.List // of *symbolEntry, most recent first
	hits   int64
	misses int64
}

type symbolEntry struct {
	key  string
	syms []byte
}

// newSymbolCacheOrNil returns a cache of max bytes, nil when max <= 0.
func newSymbolCacheOrNil(max int64) *symbolCache {
	if max <= 0 {
		return nil
	}
	return newSymbolCache(max)
}

func newSymbolCache(max int64) *symbolCache {
	return &symbolCache{max: max, m: make(map[string]*list.Element)}
}

func (e *symbolEntry) bytes() int64 { return int64(len(e.key)+len(e.syms)) + 96 }

// Get returns the symbols of block, or nil.
func (c *symbolCache) Get(block []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[string(block)]; ok {
		c.lru.MoveToFront(el)
		c.hits++
		return el.Value.(*symbolEntry).syms
	}
	c.misses++
	return nil
}

// Put keeps copies of block and syms, evicting the least recently used
// entries beyond the budget. An entry larger than a quarter of the budget
// is not kept.
func (c *symbolCache) Put(block, syms []byte) {
	e := &symbolEntry{key: string(block), syms: bytes.Clone(syms)}
	if e.bytes() > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[e.key]; ok {
		return
	}
	c.m[e.key] = c.lru.PushFront(e)
	c.size += e.bytes()
	for c.size > c.max {
		el := c.lru.Back()
		old := el.Value.(*symbolEntry)
		c.lru.Remove(el)
		delete(c.m, old.key)
		c.size -= old.bytes()
	}
}

// stats returns the entries, bytes held, hits and misses.
func (c *symbolCache) stats() (entries int, size, hits, misses int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.size, c.hits, c.misses
}
