// Package keep holds values for reuse across requests without losing them
// at garbage collections, as sync.Pool does.
package keep

// Keeper holds up to a fixed number of values for reuse. Unlike a
// sync.Pool, which drops what it holds at every garbage collection, it
// keeps them: the decoders it is made for carry caches of the series they
// have seen (meta values, field names), which take thousands of documents
// to fill again. What does not fit is left to the collector.
type Keeper[T any] struct {
	free  chan T
	fresh func() T
}

// New returns a Keeper of at most n values, making new ones with fresh.
func New[T any](n int, fresh func() T) *Keeper[T] {
	return &Keeper[T]{free: make(chan T, n), fresh: fresh}
}

// Get returns a kept value, or a fresh one when none is kept.
func (k *Keeper[T]) Get() T {
	select {
	case v := <-k.free:
		return v
	default:
		return k.fresh()
	}
}

// Put keeps v for a later Get, unless the Keeper is full.
func (k *Keeper[T]) Put(v T) {
	select {
	case k.free <- v:
	default:
	}
}
