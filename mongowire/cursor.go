package mongowire

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"slices"
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
	// ahead is the next batch, being built while the client reads the
	// last one; while it runs, only its goroutine uses src and pending.
	ahead *prefetch
}

// prefetch is a batch built ahead of its getMore.
type prefetch struct {
	done chan struct{} // closed when the fields below are set
	b    *batchReply
	next bsoncore.Document // pending after the batch
	end  bool              // src is exhausted
	err  error
}

// wait waits for c's prefetch, if any, and detaches it.
func (c *cursor) wait() *prefetch {
	a := c.ahead
	if a != nil {
		<-a.done
		c.ahead = nil
	}
	return a
}

// closeSource closes c's source once no prefetch uses it, giving the
// prefetched batch's buffer back with put.
func (c *cursor) closeSource(put func([]byte)) {
	if a := c.wait(); a != nil && a.b != nil {
		put(a.b.buf[:0])
	}
	c.src.close()
}

// cursorSet holds the open cursors of a server, across connections.
type cursorSet struct {
	mu sync.Mutex // guards m and each cursor's used and busy
	m  map[int64]*cursor
	// put gives a prefetched batch's buffer back when its cursor closes
	// unread.
	put func([]byte)
}

func newCursorSet(put func([]byte)) *cursorSet { return &cursorSet{m: map[int64]*cursor{}, put: put} }

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
		c.closeSource(cs.put)
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
	c.closeSource(cs.put)
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
		c.closeSource(cs.put)
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

// queuedSource yields the documents of a batch built ahead for another
// batch size, then those of its source.
type queuedSource struct {
	docs []bsoncore.Document
	src  source
}

// newQueuedSource queues the documents of b, then next (the document after
// them, if any), before those of src.
func newQueuedSource(b *batchReply, next bsoncore.Document, src source) *queuedSource {
	// The batch's array, closed on a copy (b's buffer stays as it is).
	arr := slices.Clone(b.buf[b.arr:])
	arr, _ = bsoncore.AppendArrayEnd(arr, 0)
	q := &queuedSource{src: src}
	vals, _ := bsoncore.Array(arr).Values()
	for _, v := range vals {
		q.docs = append(q.docs, v.Document())
	}
	if next != nil {
		q.docs = append(q.docs, next)
	}
	return q
}

func (q *queuedSource) next() (bsoncore.Document, error) {
	if len(q.docs) > 0 {
		d := q.docs[0]
		q.docs = q.docs[1:]
		return d, nil
	}
	return q.src.next()
}

func (q *queuedSource) close() { q.src.close() }
