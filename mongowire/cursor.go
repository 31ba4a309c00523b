package mongowire

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
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
	id   int64
	conn int64  // the connection that opened it
	ns   string // "db.collection", as getMore must name it
	src  source
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
	mu sync.Mutex // guards the fields below and each cursor's used and busy
	m  map[int64]*cursor
	// perConn counts the open cursors each connection opened.
	perConn map[int64]int
	// killed remembers why cursors were closed by the server before they
	// were exhausted, so that their getMore says so (CursorKilled)
	// instead of not finding them; killedOrder bounds it, oldest first.
	killed      map[int64]string
	killedOrder []int64
	// limits: open cursors in all and of one connection.
	maxTotal, maxPerConn int
	// put gives a prefetched batch's buffer back when its cursor closes
	// unread.
	put func([]byte)
}

// maxKilled bounds the cursors whose killing is remembered.
const maxKilled = 4096

func newCursorSet(put func([]byte), maxTotal, maxPerConn int) *cursorSet {
	return &cursorSet{m: map[int64]*cursor{}, perConn: map[int64]int{}, killed: map[int64]string{},
		maxTotal: maxTotal, maxPerConn: maxPerConn, put: put}
}

// add registers a cursor that connection conn opened and returns its id:
// random, positive, never 0 (which means "exhausted" on the wire). A
// connection holding maxPerConn cursors is refused another; past maxTotal
// the least recently used idle cursor is killed to make room, so that
// clients leaving cursors open cannot lock others out.
func (cs *cursorSet) add(ns string, src source, pending bsoncore.Document, conn int64) (int64, error) {
	cs.mu.Lock()
	if cs.perConn[conn] >= cs.maxPerConn {
		cs.mu.Unlock()
		return 0, mongoerr.New(mongoerr.IngressRequestRateLimitExceeded,
			"this connection holds %d open cursors, the most one may (Options.MaxCursorsPerConnection); exhaust or close some (killCursors)", cs.maxPerConn)
	}
	var victim *cursor
	if len(cs.m) >= cs.maxTotal {
		if victim = cs.lruIdleLocked(nil); victim == nil {
			cs.mu.Unlock()
			return 0, mongoerr.New(mongoerr.IngressRequestRateLimitExceeded,
				"the server holds %d open cursors, all in use; retry when some are exhausted or closed", cs.maxTotal)
		}
		cs.killLocked(victim, fmt.Sprintf("the server held %d open cursors, the most it may, and this one was the least recently used", cs.maxTotal))
	}
	var id int64
	for {
		var b [8]byte
		rand.Read(b[:])
		id = int64(binary.LittleEndian.Uint64(b[:]) &^ (1 << 63))
		if _, taken := cs.m[id]; id != 0 && !taken {
			break
		}
	}
	cs.m[id] = &cursor{id: id, conn: conn, ns: ns, src: src, pending: pending, used: time.Now()}
	cs.perConn[conn]++
	cs.mu.Unlock()
	if victim != nil {
		victim.closeSource(cs.put)
	}
	return id, nil
}

// lruIdleLocked returns the least recently used cursor that neither a
// getMore nor a batch built ahead is using and that ok accepts (nil: any),
// nil when there is none.
func (cs *cursorSet) lruIdleLocked(ok func(*cursor) bool) *cursor {
	var lru *cursor
	for _, c := range cs.m {
		if !c.busy && c.ahead == nil && (ok == nil || ok(c)) && (lru == nil || c.used.Before(lru.used)) {
			lru = c
		}
	}
	return lru
}

// removeLocked forgets c.
func (cs *cursorSet) removeLocked(c *cursor) {
	delete(cs.m, c.id)
	if cs.perConn[c.conn]--; cs.perConn[c.conn] <= 0 {
		delete(cs.perConn, c.conn)
	}
}

// killLocked removes c, remembering why; the caller closes its source.
func (cs *cursorSet) killLocked(c *cursor, why string) {
	cs.removeLocked(c)
	if len(cs.killedOrder) >= maxKilled {
		delete(cs.killed, cs.killedOrder[0])
		cs.killedOrder = cs.killedOrder[1:]
	}
	cs.killed[c.id] = why
	cs.killedOrder = append(cs.killedOrder, c.id)
}

// evictIdle kills up to n of the least recently used idle cursors that
// ok accepts, for why, and returns how many it killed.
func (cs *cursorSet) evictIdle(n int, ok func(*cursor) bool, why string) int {
	var victims []*cursor
	cs.mu.Lock()
	for len(victims) < n {
		c := cs.lruIdleLocked(ok)
		if c == nil {
			break
		}
		cs.killLocked(c, why)
		victims = append(victims, c)
	}
	cs.mu.Unlock()
	for _, c := range victims {
		c.closeSource(cs.put)
	}
	return len(victims)
}

// whyKilled returns why the server killed cursor id, if it did.
func (cs *cursorSet) whyKilled(id int64) (string, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	why, ok := cs.killed[id]
	return why, ok
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
		cs.removeLocked(c)
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
		cs.removeLocked(c)
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
	for _, c := range cs.m {
		if !c.busy && now.Sub(c.used) >= timeout {
			idle = append(idle, c)
			cs.removeLocked(c)
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
