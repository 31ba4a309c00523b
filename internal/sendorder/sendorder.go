// Package sendorder makes, for tests, the orders in which a sender may
// send a fleet's series request after request: for the caches that
// remember the order they saw series in and look for a series after the
// one before it (remote write's key cache, the line-protocol series
// cache), every order must find each series' own entry.
package sendorder

import (
	"math/rand/v2"
	"slices"
)

// Rounds returns rounds lists of series ids, from the ids 0 to n-1: each
// round, in turn, the last round's ids as they were, reversed, shuffled,
// and shifted by one with a new id at the end; each list then with five
// of its ids sent a second time, some next to the first.
func Rounds(seed uint64, n, rounds int) [][]int {
	rng := rand.New(rand.NewPCG(seed, seed))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	out := make([][]int, 0, rounds)
	for round := range rounds {
		switch round % 4 {
		case 1:
			slices.Reverse(ids)
		case 2:
			rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		case 3:
			ids = append(ids[1:], ids[0]+1000) // shifted, and a new series
		}
		sent := slices.Clone(ids)
		for range 5 {
			k := rng.IntN(len(sent))
			sent = slices.Insert(sent, k, sent[k])
		}
		out = append(out, sent)
	}
	return out
}
