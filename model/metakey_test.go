package model

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// FuzzDecodeMetaKey checks that the fast decoding of canonical meta keys
// returns what DecodeMeta returns, for every key CanonicalMeta writes.
func FuzzDecodeMetaKey(f *testing.F) {
	for _, v := range []any{
		nil, true, false, int64(-3), 2.5, math.Inf(-1), math.NaN(), "s1", "a\"b", "é\u2028",
		time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC),
		map[string]any{"sensor": "s000001", "site": "site-3", "kind": "temperature"},
		map[string]any{"a": []any{int64(1), 1e300, map[string]any{}, []any{}}, "b": map[string]any{"c": nil}},
		[]any{"x", int64(math.MaxInt64), -0.0, 1e-7},
		map[string]any{"id": int32(7), "oid": partialfilter.ObjectID{1, 2, 3}, "d": mustDecimal("1.10"),
			"b": partialfilter.Binary{Subtype: 4, Data: []byte{0xde, 0xad}}},
	} {
		k, err := CanonicalMeta(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(k)
	}
	f.Add(`{"$date":"2024-01-01T00:00:00Z"}`)
	f.Add(`99999999999999999999`)
	f.Fuzz(func(t *testing.T, s string) {
		v, err := DecodeMeta(s)
		if err != nil {
			return
		}
		key, err := CanonicalMeta(v)
		if err != nil {
			return
		}
		want, err := DecodeMeta(key)
		if err != nil {
			t.Fatalf("DecodeMeta(%q): %v", key, err)
		}
		got, err := DecodeMetaKey(key)
		if err != nil {
			t.Fatalf("decodeMetaKey(%q): %v", key, err)
		}
		if !equalMeta(got, want) {
			t.Fatalf("decodeMetaKey(%q) = %#v, want %#v", key, got, want)
		}
	})
}

// equalMeta is reflect.DeepEqual with NaN equal to NaN.
func equalMeta(a, b any) bool {
	if x, ok := a.(float64); ok {
		y, ok := b.(float64)
		return ok && (x == y && math.Signbit(x) == math.Signbit(y) || math.IsNaN(x) && math.IsNaN(y))
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			if f, ok := y[k]; !ok || !equalMeta(e, f) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalMeta(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// TestDecodeMetaKeyShares checks that the fast path parses a fleet's
// meta keys itself (no fallback), sharing the key's memory.
func TestDecodeMetaKeyShares(t *testing.T) {
	key := `{"kind":"temperature","sensor":"s000001","site":"site-3"}`
	d := metaKeyDecoder{s: key}
	v, ok := d.value(0)
	if !ok || d.i != len(key) {
		t.Fatalf("fast path refused %q", key)
	}
	m := v.(map[string]any)
	if m["sensor"] != "s000001" || m["site"] != "site-3" || len(m) != 3 {
		t.Fatalf("decoded %v", m)
	}
	// The map (header and one group) and a box per string value; the
	// strings themselves are the key's.
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeMetaKey(key) }); n > 5 {
		t.Fatalf("decodeMetaKey allocates %v times, want 5 at most", n)
	}
}

// BenchmarkDecodeMetaKey times decoding a fleet's meta key, the one-pass
// decoder against DecodeMeta: the cost a meta filter pays per series it
// evaluates outside the series-match cache.
func BenchmarkDecodeMetaKey(b *testing.B) {
	key := `{"kind":"temperature","sensor":"s000001","site":"site-3"}`
	b.Run("decodeMetaKey", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeMetaKey(key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeMeta", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeMeta(key); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzMetaKeyFields checks that the fields MetaKeyFields cuts from a
// canonical key are the document's, in order, each decoding to the
// field's value, and that it reads every plain document (no escape, no
// Extended JSON, no empty name).
func FuzzMetaKeyFields(f *testing.F) {
	for _, v := range []any{
		map[string]any{"sensor": "s000001", "site": "site-3", "kind": "temperature", "n": int64(3), "x": 2.50, "ok": true},
		map[string]any{"a": []any{int64(1), 1e300, map[string]any{}, []any{}}, "b": map[string]any{"c": nil}, "e": ""},
		map[string]any{"id": int32(7), "q": "a\"b"},
		map[string]any{}, "s1", int64(4), []any{"x"},
	} {
		k, err := CanonicalMeta(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := DecodeMeta(s)
		if err != nil {
			return
		}
		key, err := CanonicalMeta(v)
		if err != nil {
			return
		}
		doc, isDoc := v.(map[string]any)
		var names []string
		ok := MetaKeyFields(key, func(name, raw string) {
			names = append(names, name)
			got, err := DecodeMeta(raw)
			if err != nil {
				t.Fatalf("%q: field %s: %q: %v", key, name, raw, err)
			}
			if !isDoc || !equalMeta(got, doc[name]) {
				t.Fatalf("%q: field %s is %#v, want %#v", key, name, got, doc[name])
			}
		})
		if !ok {
			if isDoc && !strings.ContainsAny(key, `\$`) && !strings.Contains(key, `"":`) {
				t.Fatalf("%q: a plain document not read", key)
			}
			return
		}
		if !isDoc || len(names) != len(doc) || !slices.IsSorted(names) {
			t.Fatalf("%q: fields %q of %#v", key, names, v)
		}
	})
}
