package command

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBudget: takes within the budget succeed, TryTake past it fails at
// once, Take past it waits until bytes are given back or its context ends,
// and a request larger than the whole budget fails at once.
func TestBudget(t *testing.T) {
	b := NewBudget(100)
	if !b.TryTake(60) || b.TryTake(50) || b.InUse() != 60 {
		t.Fatalf("TryTake: in use %d", b.InUse())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Take(ctx, 50); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Take past the budget: %v, want the context's deadline", err)
	}
	if err := b.Take(context.Background(), 101); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("Take over the whole budget: %v", err)
	}
	done := make(chan error)
	go func() { done <- b.Take(context.Background(), 50) }()
	select {
	case err := <-done:
		t.Fatalf("Take returned %v before room was given back", err)
	case <-time.After(20 * time.Millisecond):
	}
	b.Give(30)
	select {
	case err := <-done:
		if err != nil || b.InUse() != 80 {
			t.Fatalf("Take after Give: %v, in use %d", err, b.InUse())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Take still waits after Give made room")
	}
	b.Give(80)
	if b.InUse() != 0 {
		t.Fatalf("in use %d after everything was given back", b.InUse())
	}
}

// TestBufferClasses: buffers come in powers of two from MinBufferClass to
// MaxPooledBuffer, and exactly sized outside them.
func TestBufferClasses(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 0}, {100, 100}, {MinBufferClass - 1, MinBufferClass - 1}, {MinBufferClass, MinBufferClass},
		{MinBufferClass + 1, 2 * MinBufferClass}, {MaxPooledBuffer, MaxPooledBuffer}, {MaxPooledBuffer + 1, MaxPooledBuffer + 1},
	} {
		if got := BufferClass(c.n); got != c.want {
			t.Errorf("BufferClass(%d) = %d, want %d", c.n, got, c.want)
		}
		if b := GetBuffer(c.n); cap(b) != c.want || len(b) != 0 {
			t.Errorf("GetBuffer(%d): len %d cap %d", c.n, len(b), cap(b))
		} else {
			PutBuffer(b)
		}
	}
}
