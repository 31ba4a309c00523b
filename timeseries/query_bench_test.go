package timeseries

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// BenchmarkFindResidual finds with a filter on a measurement field, which
// is evaluated row by row: 100 series x 1000 rows, half of them matching.
//
//	go test ./timeseries -run '^$' -bench FindResidual
func BenchmarkFindResidual(b *testing.B) {
	db := openTest(b, b.TempDir(), nil)
	defer db.Close()
	mustCreate(b, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor"})
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var ms []model.Measurement
	for s := 0; s < 100; s++ {
		for i := 0; i < 1000; i++ {
			ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(i) * time.Second).UnixNano(), Meta: int64(s),
				Fields: []model.Field{{Name: "v", Value: model.Int(int64(i % 100))}, {Name: "w", Value: model.Float(float64(i))}}})
		}
	}
	if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
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

// BenchmarkAggregateLast is the lastpoint query in process: the last value
// of one field of each of 100 series, over a day of 10-second points in
// sealed buckets. funcs=last passes over the buckets that cannot hold it;
// funcs=last+count must fold every row.
//
//	go test ./timeseries -run '^$' -bench AggregateLast
func BenchmarkAggregateLast(b *testing.B) {
	db := openTest(b, b.TempDir(), nil)
	defer db.Close()
	mustCreate(b, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "host"})
	t0 := time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)
	for s := 0; s < 100; s++ {
		ms := make([]model.Measurement, 0, 8640)
		for i := 0; i < 8640; i++ {
			ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(i) * 10 * time.Second).UnixNano(), Meta: int64(s),
				Fields: []model.Field{{Name: "usage_user", Value: model.Int(int64(i % 100))}, {Name: "usage_system", Value: model.Int(int64(i % 7))}}})
		}
		if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		funcs []AggFunc
	}{{"last", []AggFunc{AggLast}}, {"last+count", []AggFunc{AggLast, AggCount}}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rec, err := db.Aggregate(ctx, "s", AggregateOptions{Window: 24 * time.Hour, Fields: []string{"usage_user"}, Funcs: c.funcs})
				if err != nil {
					b.Fatal(err)
				}
				if rec.NumRows() != 100 {
					b.Fatalf("%d rows", rec.NumRows())
				}
				rec.Release()
			}
		})
	}
}

// BenchmarkAggregateWindows is the peers harness's q2 in process: 1-minute
// averages of one field of ten for one host over 12 hours (720 windows,
// 12 or 13 buckets read), on a day of TSBS-like random walks for 10 hosts,
// flushed to Pebble.
//
//	go test ./timeseries -run '^$' -bench AggregateWindows
func BenchmarkAggregateWindows(b *testing.B) {
	db := openTest(b, b.TempDir(), nil)
	defer db.Close()
	mustCreate(b, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "host"})
	t0 := time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)
	names := []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
		"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}
	rng := rand.New(rand.NewSource(1))
	for s := 0; s < 10; s++ {
		walk := make([]int64, len(names))
		for f := range walk {
			walk[f] = rng.Int63n(100)
		}
		ms := make([]model.Measurement, 0, 8640)
		for i := 0; i < 8640; i++ {
			fs := make([]model.Field, len(names))
			for f := range fs {
				walk[f] = min(100, max(0, walk[f]+int64(math.Round(rng.NormFloat64()))))
				fs[f] = model.Field{Name: names[f], Value: model.Int(walk[f])}
			}
			ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(i) * 10 * time.Second).UnixNano(), Meta: fmt.Sprintf("host_%d", s), Fields: fs})
		}
		if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	f := mustFilter(b, `{"host": "host_0", "t": {"$gte": {"$date": "2016-01-01T06:00:00Z"}, "$lt": {"$date": "2016-01-01T18:00:00Z"}}}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec, err := db.Aggregate(ctx, "s", AggregateOptions{Filter: f, Window: time.Minute, Fields: []string{"usage_user"}, Funcs: []AggFunc{AggAvg}})
		if err != nil {
			b.Fatal(err)
		}
		if rec.NumRows() != 720 {
			b.Fatalf("%d rows", rec.NumRows())
		}
		rec.Release()
	}
}

// BenchmarkFindOneSeries finds the 10 rows of one sensor of 10,000, by an
// equality on a sub-field of the meta value: the cost of selecting series.
//
//	go test ./timeseries -run '^$' -bench FindOneSeries
func BenchmarkFindOneSeries(b *testing.B) {
	db := openTest(b, b.TempDir(), nil)
	defer db.Close()
	mustCreate(b, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "tags"})
	var ms []model.Measurement
	for s := 0; s < 10000; s++ {
		meta := map[string]any{"hostname": fmt.Sprintf("host_%d", s), "region": fmt.Sprintf("r%d", s%7), "rack": int64(s % 100)}
		for i := 0; i < 10; i++ {
			ms = append(ms, model.Measurement{Time: int64(i) * 10e9, Meta: meta, Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
		}
	}
	if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	f := mustFilter(b, `{"tags.hostname": "host_4242"}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cur, err := db.Find(ctx, "s", FindOptions{Filter: f})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for cur.Next() {
			n += int(cur.Record().NumRows())
		}
		cur.Close()
		if n != 10 {
			b.Fatalf("%d rows", n)
		}
	}
}

// BenchmarkDeleteByFilter deletes half of 100 series x 1000 stored rows:
// by a measurement field (filter=field: every stored bucket decoded, each
// row matched, every bucket rewritten), and by a time range
// (filter=time: whole buckets deleted, one partly covered rewritten per
// series), for comparison.
//
//	go test ./timeseries -run '^$' -bench DeleteByFilter
func BenchmarkDeleteByFilter(b *testing.B) {
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, bc := range []struct{ name, filter string }{
		{"field", `{"v": {"$gte": 50}}`},
		{"time", fmt.Sprintf(`{"t": {"$gte": {"$date": %q}}}`, t0.Add(500*time.Second).Format(time.RFC3339))},
	} {
		b.Run("filter="+bc.name, func(b *testing.B) {
			f := mustFilter(b, bc.filter)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				db := openTest(b, b.TempDir(), nil)
				mustCreate(b, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor"})
				var ms []model.Measurement
				for s := 0; s < 100; s++ {
					for i := 0; i < 1000; i++ {
						v := int64(i % 100)
						if bc.name == "time" {
							v = int64(i / 10)
						}
						ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(i) * time.Second).UnixNano(), Meta: int64(s),
							Fields: []model.Field{{Name: "v", Value: model.Int(v)}, {Name: "w", Value: model.Float(float64(i))}}})
					}
				}
				if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
					b.Fatal(err)
				}
				if err := db.Flush(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				n, err := db.Delete(ctx, "s", f, DeleteOptions{})
				if err != nil || n != 50000 {
					b.Fatalf("deleted %d, %v", n, err)
				}
				b.StopTimer()
				db.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N)*100000/b.Elapsed().Seconds(), "rows-scanned/s")
		})
	}
}
