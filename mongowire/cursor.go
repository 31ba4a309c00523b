package mongowire

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// source yields the documents of a query one at a time.
type source interface {
	// next returns the next document, or nil at the end. The document is
	// valid until the next call.
	next() (bsoncore.Document, error)
	close()
}

// cursor is a query left open between find and getMore.
type cursor struct {
	id  int64
	ns  string // "db.collection", as getMore must name it
	src source
	// pending is a document read but not sent: it did not fit the last
	// batch.
	pending bsoncore.Document
	used    time.Time
	busy    bool // a getMore is running on it; guarded by cursorSet.mu
}

// cursorSet holds the open cursors of a server, across connections.
type cursorSet struct {
	mu sync.Mutex // guards m and each cursor's used and busy
	m  map[int64]*cursor
}

func newCursorSet() *cursorSet { return &cursorSet{m: map[int64]*cursor{}} }

// add registers a cursor and returns its id: random, positive, never 0
// (which means "exhausted" on the wire).
func (cs *cursorSet) add(ns string, src source, pending bsoncore.Document) int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for {
		var b [8]byte
		rand.Read(b[:])
		id := int64(binary.LittleEndian.Uint64(b[:]) &^ (1 << 63))
		if _, taken := cs.m[id]; id == 0 || taken {
			continue
		}
		cs.m[id] = &cursor{id: id, ns: ns, src: src, pending: pending, used: time.Now()}
		return id
	}
}

// acquire takes a cursor for a getMore; release gives it back. A cursor
// being used is not reaped and cannot be taken twice.
func (cs *cursorSet) acquire(id int64) (*cursor, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.m[id]
	if !ok || c.busy {
		return nil, false
	}
	c.busy = true
	return c, true
}

// release returns c after a getMore; done closes it.
func (cs *cursorSet) release(c *cursor, done bool) {
	cs.mu.Lock()
	c.busy = false
	c.used = time.Now()
	if done {
		delete(cs.m, c.id)
	}
	cs.mu.Unlock()
	if done {
		c.src.close()
	}
}

// kill closes the cursor id, reporting whether it was open.
func (cs *cursorSet) kill(id int64) bool {
	cs.mu.Lock()
	c, ok := cs.m[id]
	if ok && !c.busy {
		delete(cs.m, id)
	}
	cs.mu.Unlock()
	if !ok || c.busy {
		return false
	}
	c.src.close()
	return true
}

// reapIdle closes the cursors unused since now-timeout and returns how
// many it closed.
func (cs *cursorSet) reapIdle(now time.Time, timeout time.Duration) int {
	var idle []*cursor
	cs.mu.Lock()
	for id, c := range cs.m {
		if !c.busy && now.Sub(c.used) >= timeout {
			idle = append(idle, c)
			delete(cs.m, id)
		}
	}
	cs.mu.Unlock()
	for _, c := range idle {
		c.src.close()
	}
	return len(idle)
}

// open returns the number of open cursors.
func (cs *cursorSet) open() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.m)
}

// closeAll closes every cursor (at shutdown, when no command runs).
func (cs *cursorSet) closeAll() {
	cs.reapIdle(time.Now().Add(1<<62), 0)
}

func (cs *cursorSet) len() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.m)
}

// funcSource adapts a push-style scan (FindDocuments) to a source: the
// scan runs in its own goroutine and hands over one document at a time.
type funcSource struct {
	docs   chan bsoncore.Document
	done   chan error
	cancel context.CancelFunc
	err    error
	ended  bool
}

// newFuncSource runs scan with a context that close cancels. scan calls
// emit for each document and stops when emit returns an error.
func newFuncSource(scan func(ctx context.Context, emit func(bsoncore.Document) error) error) *funcSource {
	ctx, cancel := context.WithCancel(context.Background())
	fs := &funcSource{docs: make(chan bsoncore.Document), done: make(chan error, 1), cancel: cancel}
	go func() {
		fs.done <- scan(ctx, func(d bsoncore.Document) error {
			select {
			case fs.docs <- d:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		close(fs.docs)
	}()
	return fs
}

func (fs *funcSource) next() (bsoncore.Document, error) {
	if fs.ended {
		return nil, fs.err
	}
	if d, ok := <-fs.docs; ok {
		return d, nil
	}
	fs.ended = true
	fs.err = <-fs.done
	return nil, fs.err
}

func (fs *funcSource) close() {
	fs.cancel()
	if !fs.ended {
		for range fs.docs {
		}
		fs.ended = true
		fs.err = <-fs.done
	}
}
