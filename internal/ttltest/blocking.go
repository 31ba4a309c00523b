// Package ttltest holds what tests of the TTL monitor's users share: a
// store whose batches can be held, so that a batch is seen in progress.
package ttltest

import (
	"context"
	"time"

	"github.com/hourglassdb/hourglass/ttl"
)

// BlockingStore is a ttl.Store whose Expire announces itself on Entered
// and waits for Release (closed, or one value per batch) before it runs.
type BlockingStore struct {
	ttl.Store
	Entered chan struct{}
	Release chan struct{}
}

// NewBlockingStore wraps s.
func NewBlockingStore(s ttl.Store) *BlockingStore {
	return &BlockingStore{Store: s, Entered: make(chan struct{}), Release: make(chan struct{})}
}

// Expire runs s's Expire once released.
func (b *BlockingStore) Expire(ctx context.Context, t ttl.Target, now time.Time, budget ttl.Budget) (ttl.Batch, error) {
	b.Entered <- struct{}{}
	<-b.Release
	return b.Store.Expire(ctx, t, now, budget)
}
