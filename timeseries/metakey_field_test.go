package timeseries

import (
	"math"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// FuzzMetaKeyField checks that a group cut from a canonical meta key is
// what decoding the key and encoding the value at the path gives.
func FuzzMetaKeyField(f *testing.F) {
	for _, v := range []any{
		nil, "bare", int64(7),
		map[string]any{"sensor": "s000001", "site": "site-3", "kind": "temperature"},
		map[string]any{"a": map[string]any{"b": []any{int64(1), "x"}, "c": 2.5}, "b": "a\"b", "d": true},
		map[string]any{"a": map[string]any{"b": time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)}, "z": nil},
		map[string]any{"a": map[string]any{}, "b": []any{}, "c": math.Inf(1), "e": -1e-300},
	} {
		k, err := model.CanonicalMeta(v)
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range []string{"m.a", "m.b", "m.a.b", "m.a.c", "m.sensor", "m.sensors", "m.ab", "m.z", "m.a.b.c", "m.e"} {
			f.Add(k, p)
		}
	}
	f.Fuzz(func(t *testing.T, s, groupBy string) {
		v, err := model.DecodeMeta(s)
		if err != nil {
			return
		}
		key, err := model.CanonicalMeta(v)
		if err != nil {
			return
		}
		opts := AggregateOptions{GroupBy: groupBy}
		path := groupPath("m", opts)
		if path == nil {
			return
		}
		got, ok := model.MetaKeyField(key, path)
		if !ok {
			return // decoded instead
		}
		if want := groupOf(model.MetaOfKey(key), "m", opts); got != want {
			t.Fatalf("metaKeyField(%q, %q) = %s, want %s", key, path, got, want)
		}
	})
}
