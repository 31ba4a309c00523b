package timeseries

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"
)

// TestMetaInternerShares: compacted meta values equal the originals, share
// names and low-cardinality values between series, and stop sharing the
// values of a field past maxInternValues distinct ones.
func TestMetaInternerShares(t *testing.T) {
	var in metaInterner
	decode := func(sensor, site string) map[string]any {
		t.Helper()
		key, err := CanonicalMeta(map[string]any{"sensor": sensor, "site": site, "loc": map[string]any{"site": site, "n": int64(3)}, "tags": []any{"a", site}})
		if err != nil {
			t.Fatal(err)
		}
		v, err := DecodeMeta(key)
		if err != nil {
			t.Fatal(err)
		}
		out := in.compact(v)
		if !reflect.DeepEqual(out, v) {
			t.Fatalf("compact(%v) = %v", v, out)
		}
		return out.(map[string]any)
	}
	// box is the address of the value an interface holds.
	box := func(v any) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] }
	a, b := decode("s1", "north"), decode("s2", "north")
	if box(a["site"]) != box(b["site"]) {
		t.Errorf("the site of two series is not shared")
	}
	if box(a["sensor"]) == box(b["sensor"]) {
		t.Errorf("distinct sensors share a value")
	}
	for k := range a {
		for k2 := range b {
			if k == k2 && unsafe.StringData(k) != unsafe.StringData(k2) {
				t.Errorf("name %q is not shared", k)
			}
		}
	}
	// "sensor" takes one value per series: past maxInternValues the field
	// stops being interned and its table is dropped.
	for i := 0; i < maxInternValues+10; i++ {
		decode(fmt.Sprintf("x%d", i), "north")
	}
	if vs, seen := in.values["sensor"]; !seen || vs != nil {
		t.Errorf("sensor values still interned after %d distinct ones (%d kept)", maxInternValues+10, len(vs))
	}
	if len(in.values["site"]) != 1 {
		t.Errorf("%d site values interned; want 1", len(in.values["site"]))
	}
}
