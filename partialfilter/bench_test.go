package partialfilter

import (
	"testing"
	"time"
)

// BenchmarkMatchMeta measures the per-series check of the time-series query
// path: a meta filter evaluated on {metaField: metaValue}.
func BenchmarkMatchMeta(b *testing.B) {
	f := MustParseJSON(`{"sensor.site": "nyc", "sensor.id": {"$in": [3, 5, 7]}}`)
	d := map[string]any{"sensor": map[string]any{"site": "nyc", "id": int64(5), "kind": "temp"}}
	if !f.Match(d) {
		b.Fatal("filter should match")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !f.Match(d) {
			b.Fatal("no match")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "matches/s")
}

// BenchmarkMatchRow measures a per-measurement residual filter with a date
// comparison.
func BenchmarkMatchRow(b *testing.B) {
	f := MustParseJSON(`{"ts": {"$gte": {"$date": "2024-01-01T00:00:00Z"}}, "temp": {"$gt": 20.5}}`)
	d := map[string]any{"ts": time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC), "temp": 21.0, "hum": int64(40)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !f.Match(d) {
			b.Fatal("no match")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "matches/s")
}
