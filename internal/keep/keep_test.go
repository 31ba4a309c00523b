package keep

import (
	"runtime"
	"testing"
)

func TestKeeperKeepsAcrossCollections(t *testing.T) {
	made := 0
	k := New(2, func() *[]byte { made++; b := make([]byte, 1); return &b })
	a, b, c := k.Get(), k.Get(), k.Get()
	if made != 3 {
		t.Fatalf("made %d, want 3", made)
	}
	k.Put(a)
	k.Put(b)
	k.Put(c) // over the bound: dropped
	runtime.GC()
	runtime.GC()
	if x, y := k.Get(), k.Get(); (x != a && x != b) || (y != a && y != b) || x == y {
		t.Fatal("kept values not returned after garbage collections")
	}
	k.Get()
	if made != 4 {
		t.Fatalf("made %d, want 4: the third put should have been dropped", made)
	}
}
