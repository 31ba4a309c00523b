package ttl

import (
	"math"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/partialfilter"
)

func filter(t *testing.T, js string) *partialfilter.Filter {
	t.Helper()
	f, err := partialfilter.ParseJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// SPEC 2.1: a bucket covering data up to 2023-03-27T18:29:59Z with E = 300
// expires after 2023-03-27T18:34:59Z.
func TestExpiredSpecExample(t *testing.T) {
	upper := time.Date(2023, 3, 27, 18, 29, 59, 0, time.UTC).UnixNano()
	at := time.Date(2023, 3, 27, 18, 34, 59, 0, time.UTC)
	if Expired(upper, 300, at) {
		t.Fatal("expired at exactly upper + E")
	}
	if !Expired(upper, 300, at.Add(time.Nanosecond)) {
		t.Fatal("not expired just after upper + E")
	}
	if Expired(upper, 300, at.Add(-time.Minute)) {
		t.Fatal("expired a minute early")
	}
	if Cutoff(at, 300) != upper {
		t.Fatalf("cutoff %d, want %d", Cutoff(at, 300), upper)
	}
}

func TestCutoffExtremes(t *testing.T) {
	if c := Cutoff(time.Unix(0, math.MinInt64+5), 10); c != math.MinInt64 {
		t.Fatalf("cutoff underflows: %d", c)
	}
	now := time.Unix(4102444800, 0) // 2100
	if c := Cutoff(now, math.MaxInt32); c != now.UnixNano()-math.MaxInt32*int64(time.Second) {
		t.Fatalf("cutoff with the largest TTL: %d", c)
	}
	if Expired(now.UnixNano(), 0, now) || !Expired(now.UnixNano()-1, 0, now) {
		t.Fatal("TTL 0: expires one nanosecond after its time")
	}
}

// SPEC 2.3: the effective TTL is the smallest of the collection value and
// every matching partial index; without a collection value only matching
// series expire.
func TestEffective(t *testing.T) {
	north := map[string]any{"sensor": map[string]any{"site": "north", "id": int64(7)}}
	south := map[string]any{"sensor": map[string]any{"site": "south", "id": int64(8)}}
	idx := Rule{Index: "north_short", ExpireAfterSeconds: 60, Filter: filter(t, `{"sensor.site": "north"}`)}
	idx2 := Rule{Index: "ids", ExpireAfterSeconds: 30, Filter: filter(t, `{"sensor.id": {"$gte": 7}}`)}
	coll := Rule{ExpireAfterSeconds: 3600}
	for _, c := range []struct {
		name  string
		rules Rules
		doc   map[string]any
		want  int64
		ok    bool
	}{
		{"collection only", Rules{coll}, north, 3600, true},
		{"index shortens matching", Rules{coll, idx}, north, 60, true},
		{"index leaves others", Rules{coll, idx}, south, 3600, true},
		{"index alone, matching", Rules{idx}, north, 60, true},
		{"index alone, not matching", Rules{idx}, south, 0, false},
		{"smallest of several", Rules{coll, idx, idx2}, north, 30, true},
		{"collection smaller than index", Rules{{ExpireAfterSeconds: 10}, idx}, north, 10, true},
		{"no rules", nil, north, 0, false},
		{"zero TTL", Rules{{ExpireAfterSeconds: 0}, idx}, north, 0, true},
	} {
		got, ok := c.rules.Effective(c.doc)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %d %v, want %d %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// SPEC 2.4: the range TTL works on.
func TestInRange(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want bool
	}{
		{time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC), false},
		{time.Date(2038, 1, 19, 3, 14, 7, 0, time.UTC), true},
		{time.Date(2038, 1, 19, 3, 14, 7, 1, time.UTC), false},
		{time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), false},
	} {
		if got := InRange(c.t.UnixNano()); got != c.want {
			t.Errorf("%s: %v", c.t, got)
		}
	}
	if !MaxTime.Equal(time.Date(2038, 1, 19, 3, 14, 7, 0, time.UTC)) || MaxTime.UnixNano() != MaxTimeNanos {
		t.Fatalf("MaxTime %s", MaxTime)
	}
}
