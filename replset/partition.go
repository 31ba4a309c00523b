package replset

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// errPartitioned is what a partitioned member's raft traffic gets.
var errPartitioned = errors.New("replset: partitioned (fault injection)")

// tcpLayer is raft's stream layer over TCP, with a switch that cuts this
// member off from the others while it keeps running (Node.Partition): the
// chaos run's network partition, where network namespaces are not at hand.
// Cut, it closes every raft connection, accepts none and dials none.
type tcpLayer struct {
	ln net.Listener

	mu    sync.Mutex
	until time.Time // cut off until then
	conns map[net.Conn]struct{}
}

func newTCPLayer(addr string) (*tcpLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &tcpLayer{ln: ln, conns: map[net.Conn]struct{}{}}, nil
}

func (l *tcpLayer) cut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Before(l.until)
}

// partition cuts the member off for d.
func (l *tcpLayer) partition(d time.Duration) {
	l.mu.Lock()
	l.until = time.Now().Add(d)
	conns := l.conns
	l.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// track adds c to the connections a partition closes; if the member was
// cut off meanwhile (while c was dialed or accepted), it closes c and
// returns false.
func (l *tcpLayer) track(c net.Conn) (net.Conn, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Now().Before(l.until) {
		c.Close()
		return nil, false
	}
	l.conns[c] = struct{}{}
	return &trackedConn{Conn: c, l: l}, true
}

// Accept accepts the next connection, closing those that come while the
// member is cut off.
func (l *tcpLayer) Accept() (net.Conn, error) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return nil, err
		}
		if tc, ok := l.track(c); ok {
			return tc, nil
		}
	}
}

func (l *tcpLayer) Close() error   { return l.ln.Close() }
func (l *tcpLayer) Addr() net.Addr { return l.ln.Addr() }

// Dial connects to another member, unless this one is cut off.
func (l *tcpLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if l.cut() {
		return nil, errPartitioned
	}
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	tc, ok := l.track(c)
	if !ok {
		return nil, errPartitioned
	}
	return tc, nil
}

// trackedConn leaves the layer's set when closed.
type trackedConn struct {
	net.Conn
	l *tcpLayer
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c.Conn)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
