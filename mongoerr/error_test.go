package mongoerr

import (
	"errors"
	"fmt"
	"testing"
)

func TestCorrupt(t *testing.T) {
	if n := DataCorruptionDetected.Name(); n != "DataCorruptionDetected" || DataCorruptionDetected != 301 {
		t.Fatalf("code %d named %q", DataCorruptionDetected, n)
	}
	a, b := Corrupt("a: corrupt"), Corrupt("b: corrupt")
	err := fmt.Errorf("reading x: %w: offset 3", a)
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, a) {
		t.Fatalf("%v: not corruption", err)
	}
	if errors.Is(err, b) || errors.Is(b, a) {
		t.Fatal("two packages' sentinels match each other")
	}
	if CodeOf(err) != DataCorruptionDetected {
		t.Fatalf("code %d", CodeOf(err))
	}
	if err.Error() != "reading x: a: corrupt: offset 3" {
		t.Fatalf("text %q", err.Error())
	}
	if errors.Is(New(BadValue, "x"), ErrCorrupt) || errors.Is(errors.New("x"), ErrCorrupt) {
		t.Fatal("other errors match ErrCorrupt")
	}
}
