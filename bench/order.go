package bench

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
)

// Order is the order of each series' rows inside a batch. The rows of a
// batch stay the same; only their order changes.
type Order uint8

const (
	// OrderAsc sends each series' rows in time order, as generated.
	OrderAsc Order = 0
	// OrderDesc sends the rows of each batch newest first (as many device
	// APIs return history).
	OrderDesc Order = 1
	// OrderShuffle sends the rows of each batch in a random order (a
	// gateway flushing buffers from several threads); the shuffle is
	// seeded, so the same batches are sent the same way.
	OrderShuffle Order = 2
)

// String returns "asc", "desc" or "shuffle", the names ParseOrder takes.
func (o Order) String() string {
	switch o {
	case OrderAsc:
		return "asc"
	case OrderDesc:
		return "desc"
	case OrderShuffle:
		return "shuffle"
	}
	return fmt.Sprintf("Order(%d)", uint8(o))
}

// ParseOrder returns the Order named s: asc, desc or shuffle.
func ParseOrder(s string) (Order, error) {
	for _, o := range []Order{OrderAsc, OrderDesc, OrderShuffle} {
		if o.String() == s {
			return o, nil
		}
	}
	return 0, fmt.Errorf("%w: order %q; want asc, desc or shuffle", ErrInvalidWorkload, s)
}

// orderSeed seeds the shuffles of OrderShuffle.
const orderSeed = 7

// reorder puts the n items of one batch in order o: swap(i, j) exchanges
// two of them. rng is used by OrderShuffle.
func (o Order) reorder(n int, swap func(i, j int), rng *rand.Rand) {
	switch o {
	case OrderDesc:
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			swap(i, j)
		}
	case OrderShuffle:
		rng.Shuffle(n, swap)
	}
}

// lineReorderer reorders the lines of line-protocol batches.
type lineReorderer struct {
	order Order
	rng   *rand.Rand
	lines [][]byte
	spare []byte // a buffer the next batch is reordered into
}

func newLineReorderer(o Order) *lineReorderer {
	return &lineReorderer{order: o, rng: rand.New(rand.NewSource(orderSeed))}
}

// apply returns buf's lines (each ending in '\n') in r's order. With
// OrderAsc it returns buf; otherwise it returns another buffer and keeps
// buf to build the next batch in, so the caller owns only the result.
func (r *lineReorderer) apply(buf []byte) []byte {
	if r.order == OrderAsc {
		return buf
	}
	r.lines = r.lines[:0]
	for rest := buf; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest) - 1
		}
		r.lines = append(r.lines, rest[:i+1])
		rest = rest[i+1:]
	}
	r.order.reorder(len(r.lines), func(i, j int) { r.lines[i], r.lines[j] = r.lines[j], r.lines[i] }, r.rng)
	out := slices.Grow(r.spare[:0], len(buf))
	for _, l := range r.lines {
		out = append(out, l...)
	}
	r.spare = buf
	return out
}
