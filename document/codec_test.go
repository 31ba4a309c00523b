package document

import (
	"errors"
	"testing"

	"github.com/hourglassdb/hourglass/mongoerr"
)

func TestDecodeCorruptIsCorruption(t *testing.T) {
	b, err := Encode(nil, Doc{"a": int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{append(b, 0), b[:len(b)-1], {0xff}} {
		_, err := Decode(bad)
		if !errors.Is(err, ErrCorrupt) || !errors.Is(err, mongoerr.ErrCorrupt) {
			t.Errorf("% x: %v, want corruption", bad, err)
		}
	}
}
