package api

// keeper holds up to cap(free) values for reuse. Unlike a sync.Pool, which
// drops what it holds at every garbage collection, it keeps them: the
// decoders it holds carry caches of the series they have seen (meta values,
// field names), which take thousands of documents to fill again. The
// number kept is bounded; what does not fit is left to the collector.
type keeper[T any] struct {
	free  chan T
	fresh func() T
}

func newKeeper[T any](n int, fresh func() T) *keeper[T] {
	return &keeper[T]{free: make(chan T, n), fresh: fresh}
}

func (k *keeper[T]) get() T {
	select {
	case v := <-k.free:
		return v
	default:
		return k.fresh()
	}
}

func (k *keeper[T]) put(v T) {
	select {
	case k.free <- v:
	default:
	}
}
