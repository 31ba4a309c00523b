package timeseries

import (
	"testing"
	"time"
)

// BenchmarkFindResidual finds with a filter on a measurement field, which
// is evaluated row by row: 100 series x 1000 rows, half of them matching.
//
//	go test ./timeseries -run '^$' -bench FindResidual
func BenchmarkFindResidual(b *testing.B) {
	db := openTest(b, b.TempDir(), nil)
	defer db.Close()
	mustCreate(b, db, "s", TimeSeriesOptions{TimeField: "t", MetaField: "sensor"})
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var ms []Measurement
	for s := 0; s < 100; s++ {
		for i := 0; i < 1000; i++ {
			ms = append(ms, Measurement{Time: t0.Add(time.Duration(i) * time.Second).UnixNano(), Meta: int64(s),
				Fields: []Field{{"v", Int(int64(i % 100))}, {"w", Float(float64(i))}}})
		}
	}
	if _, err := db.Insert(ctx, "s", ms, InsertOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	f := mustFilter(b, `{"v": {"$gte": 50}}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cur, err := db.Find(ctx, "s", FindOptions{Filter: f})
		if err != nil {
			b.Fatal(err)
		}
		n := int64(0)
		for cur.Next() {
			n += cur.Record().NumRows()
		}
		cur.Close()
		if n != 50000 {
			b.Fatalf("%d rows", n)
		}
	}
	b.ReportMetric(float64(b.N)*100000/b.Elapsed().Seconds(), "rows-scanned/s")
}
