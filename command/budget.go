package command

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Budget bounds the bytes of requests held in memory at once across every
// front door and connection: HTTP bodies and MongoDB messages take from
// one Budget, so that what the doors hold together is known before it is
// allocated. It is safe for concurrent use.
type Budget struct {
	mu    sync.Mutex
	used  int64         // guarded by mu
	freed chan struct{} // guarded by mu; closed by Give when a Take waits
	max   int64
}

// ErrOverBudget is a request for more than a budget holds in all.
var ErrOverBudget = errors.New("command: request larger than the whole budget")

// NewBudget returns a budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// TryTake reserves n bytes, or reports false at once when that would pass
// the budget.
func (b *Budget) TryTake(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// Take reserves n bytes, waiting for others to give theirs back until ctx
// ends (then ctx.Err()). n above the whole budget fails at once with
// ErrOverBudget.
func (b *Budget) Take(ctx context.Context, n int64) error {
	if n > b.max {
		return fmt.Errorf("%w: %d bytes of %d", ErrOverBudget, n, b.max)
	}
	for {
		b.mu.Lock()
		if b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Give returns n bytes taken before.
func (b *Budget) Give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.mu.Unlock()
		panic("command: budget given back more than was taken")
	}
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

// InUse returns the bytes taken and not given back.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Max returns the budget's size in bytes.
func (b *Budget) Max() int64 { return b.max }

// Request buffers are recycled by size class, powers of two from
// MinBufferClass to MaxPooledBuffer, so that steady ingest of batches of
// similar size allocates no request bytes (batches of 5,000 lines are about
// 600 KiB each). A larger buffer is left to the collector, so one huge
// request does not pin its memory.
const (
	MinBufferClass  = 64 << 10
	MaxPooledBuffer = 8 << 20
	bufferClasses   = 8 // 64 KiB, 128 KiB, ..., 8 MiB
)

var bufferPools [bufferClasses]sync.Pool

// BufferClass returns the size of the buffer GetBuffer returns for n
// bytes: its class's size, or n itself below MinBufferClass and above
// MaxPooledBuffer (such buffers are allocated to measure).
func BufferClass(n int) int {
	_, size, _ := bufferClass(n)
	return size
}

func bufferClass(n int) (class, size int, ok bool) {
	if n < MinBufferClass {
		return 0, n, false
	}
	size = MinBufferClass
	for class = 0; class < bufferClasses; class++ {
		if n <= size {
			return class, size, true
		}
		size *= 2
	}
	return 0, n, false
}

// GetBuffer returns an empty buffer with a capacity of BufferClass(n), from
// the pool when one is there.
func GetBuffer(n int) []byte {
	class, size, ok := bufferClass(n)
	if !ok {
		return make([]byte, 0, n)
	}
	if v := bufferPools[class].Get(); v != nil {
		return (*v.(*[]byte))[:0]
	}
	return make([]byte, 0, size)
}

// PutBuffer gives b back to its class for reuse; buffers of other sizes
// are dropped. The caller must hold no reference into b afterwards.
func PutBuffer(b []byte) {
	if class, size, ok := bufferClass(cap(b)); ok && size == cap(b) {
		bufferPools[class].Put(&b)
	}
}
