package timeseries

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// fleetQuery is one of the fleet queries of the iot workload (the bodies
// of bench.IoT.Queries) as an in-process call.
type fleetQuery struct {
	name     string
	find     *FindOptions          // a find, or
	agg      *AggregateOptions     // an aggregate, or
	distinct *partialfilter.Filter // the distinct tags.sensor of a filter
	rows     int64                 // the rows (or values) it answers
}

// iotFleet loads an iot-shaped fleet into collection "iot" of db the way
// `hourglass bench ingest --workload iot` sends it: n sensors (meta
// {sensor, site, kind}, site the sensor number modulo 100, kind one of 4),
// fields value and battery, every 10 s for span, time-major in batches,
// 1% of the points late by up to 5 minutes. Nothing is flushed: the last
// hour's buckets stay open in memory, as on a server under load. It
// returns the end of the load.
func iotFleet(tb testing.TB, db *DB, n int, span time.Duration) time.Time {
	tb.Helper()
	mustCreate(tb, db, "iot", model.TimeSeriesOptions{TimeField: "time", MetaField: "tags"})
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	const interval = 10 * time.Second
	rng := rand.New(rand.NewSource(1))
	metas := make([]any, n)
	kinds := []string{"temperature", "humidity", "pressure", "vibration"}
	for s := range metas {
		metas[s] = map[string]any{"sensor": fmt.Sprintf("s%06d", s), "site": "site-" + strconv.Itoa(s%100), "kind": kinds[s%4]}
	}
	ticks := int(span / interval)
	batch := make([]model.Measurement, 0, 5000)
	for tick := 0; tick < ticks; tick++ {
		for s := 0; s < n; s++ {
			t := start.Add(time.Duration(tick) * interval).UnixNano()
			t += int64((rng.Float64()*2 - 1) * 0.1 * float64(interval))
			if rng.Float64() < 0.01 {
				t -= int64(rng.Float64() * float64(5*time.Minute))
			}
			batch = append(batch, model.Measurement{Time: t, Meta: metas[s], Fields: []model.Field{
				{Name: "value", Value: model.Float(20 + float64(s%10) + rng.Float64())}, {Name: "battery", Value: model.Int(int64(100 - tick*50/ticks))}}})
			if len(batch) == cap(batch) {
				if _, err := db.Insert(ctx, "iot", Batch{Measurements: batch}, InsertOptions{}); err != nil {
					tb.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	if _, err := db.Insert(ctx, "iot", Batch{Measurements: batch}, InsertOptions{}); err != nil {
		tb.Fatal(err)
	}
	return start.Add(span)
}

// iotFleetQueries returns the five fleet queries on a fleet of n sensors
// loaded by iotFleet up to end, with the rows each answers.
func iotFleetQueries(tb testing.TB, n int, span time.Duration, end time.Time) []fleetQuery {
	const ms = time.Millisecond
	date := func(t time.Time) string { return `{"$date": "` + t.UTC().Format(time.RFC3339Nano) + `"}` }
	between := func(from, to time.Time) string {
		return `"time": {"$gte": ` + date(from.Add(ms)) + `, "$lt": ` + date(to.Add(ms)) + `}`
	}
	f := func(s string) *partialfilter.Filter { return mustFilter(tb, s) }
	first := end.Add(-span - 5*time.Minute - 10*time.Second)
	lo1m, lo1h := first.Truncate(time.Minute), first.Truncate(time.Hour)
	sensor := fmt.Sprintf("s%06d", 42%n)
	value := []string{"value"}
	hours := int64(span / time.Hour)
	return []fleetQuery{
		{name: "sensor-raw-3h", rows: int64(min(span, 3*time.Hour) / (10 * time.Second)), find: &FindOptions{
			Filter: f(`{"tags.sensor": "` + sensor + `", ` + between(end.Add(-3*time.Hour), end) + `}`), Fields: []string{"time", "value"}}},
		{name: "sensor-avg-1m", rows: int64(span / time.Minute), agg: &AggregateOptions{
			Filter: f(`{"tags.sensor": "` + sensor + `", ` + between(lo1m, end) + `}`),
			Window: time.Minute, Origin: lo1m.Add(ms), Fields: value, Funcs: []AggFunc{AggAvg}}},
		{name: "lastpoint", rows: int64(n), agg: &AggregateOptions{
			Filter: f(`{` + between(end.Add(-time.Hour), end) + `}`),
			Window: time.Hour, Origin: end.Add(-time.Hour + ms), GroupBy: "tags.sensor", Fields: value, Funcs: []AggFunc{AggLast}}},
		// site-avg-1h: the hour before the start holds late points too.
		{name: "site-avg-1h", rows: hours + 1, agg: &AggregateOptions{
			Filter: f(`{"tags.site": "site-7", ` + between(lo1h, end) + `}`),
			Window: time.Hour, Origin: lo1h.Add(ms), GroupBy: "tags.site", Fields: value, Funcs: []AggFunc{AggAvg}}},
		{name: "sensors-by-meta", rows: int64(n / 50),
			distinct: f(`{"tags.kind": "humidity", "tags.site": {"$in": ["site-1", "site-2", "site-5"]}, ` + between(end.Add(-10*time.Minute), end) + `}`)},
	}
}

// run executes q once and returns the rows of its answer.
func (q *fleetQuery) run(tb testing.TB, db *DB) int64 {
	if q.distinct != nil {
		vs, err := db.DistinctMeta(ctx, "iot", "tags.sensor", q.distinct)
		if err != nil {
			tb.Fatal(err)
		}
		return int64(len(vs))
	}
	if q.find != nil {
		cur, err := db.Find(ctx, "iot", *q.find)
		if err != nil {
			tb.Fatal(err)
		}
		n := int64(0)
		for cur.Next() {
			n += cur.Record().NumRows()
		}
		if err := cur.Err(); err != nil {
			tb.Fatal(err)
		}
		cur.Close()
		return n
	}
	rec, err := db.Aggregate(ctx, "iot", *q.agg)
	if err != nil {
		tb.Fatal(err)
	}
	defer rec.Release()
	return rec.NumRows()
}

// BenchmarkFleetQueries runs the iot workload's fleet queries in process
// on a fleet of HG_FLEET_SENSORS sensors (default 10,000) over
// HG_FLEET_HOURS hours (default 3) at 10 s, 1% of the points late, the
// last hour's buckets open in memory (open) or, as on a server left idle
// for a checkpoint interval, every bucket sealed and written to Pebble
// (stored):
//
//	go test ./timeseries -run '^$' -bench FleetQueries -benchtime 20x
func BenchmarkFleetQueries(b *testing.B) {
	b.Run("open", func(b *testing.B) { benchmarkFleetQueries(b, false) })
	b.Run("stored", func(b *testing.B) { benchmarkFleetQueries(b, true) })
}

func benchmarkFleetQueries(b *testing.B, stored bool) {
	n := 10000
	if s := os.Getenv("HG_FLEET_SENSORS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			b.Fatalf("HG_FLEET_SENSORS=%q: want a number >= 100", s)
		}
	}
	span := 3 * time.Hour
	if s := os.Getenv("HG_FLEET_HOURS"); s != "" {
		h, err := strconv.Atoi(s)
		if err != nil || h < 1 {
			b.Fatalf("HG_FLEET_HOURS=%q: want a number of hours >= 1", s)
		}
		span = time.Duration(h) * time.Hour
	}
	clock := newTestClock(t0)
	db := openTest(b, b.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	start := time.Now()
	end := iotFleet(b, db, n, span)
	// A checkpoint writes the closed hours to Pebble, as the server's
	// background checkpoints do during the load; one a checkpoint
	// interval later seals the open buckets as idle and writes them.
	if err := db.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	if stored {
		clock.Advance(time.Hour)
		if err := db.Checkpoint(); err != nil {
			b.Fatal(err)
		}
		if st := db.Stats(); st.SealedIdle < int64(n) {
			b.Fatalf("%d buckets sealed as idle; want the %d open", st.SealedIdle, n)
		}
	}
	b.Logf("loaded %d sensors in %v", n, time.Since(start))
	for _, q := range iotFleetQueries(b, n, span, end) {
		q := q
		b.Run(q.name, func(b *testing.B) {
			if got := q.run(b, db); got != q.rows {
				b.Fatalf("%d rows, want %d", got, q.rows)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.run(b, db)
			}
		})
	}
}

// BenchmarkRecentOpen: the iot fleet with its last hour open, the last
// 2 minutes of `value` of every sensor (a count, and a read of the
// numbers), as dashboards refresh them: most open buckets' rows since
// their last freeze (freezeRows rows) begin before the range.
//
//	go test ./timeseries -run '^$' -bench RecentOpen -benchtime 50x
func BenchmarkRecentOpen(b *testing.B) {
	clock := newTestClock(t0)
	db := openTest(b, b.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	end := iotFleet(b, db, 10000, 3*time.Hour)
	if err := db.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	f := mustFilter(b, fmt.Sprintf(`{"time": {"$gte": {"$date": {"$numberLong": "%d"}}, "$lt": {"$date": {"$numberLong": "%d"}}}}`,
		end.Add(-2*time.Minute).UnixMilli(), end.UnixMilli()))
	b.Run("count", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			rec, err := db.Aggregate(ctx, "iot", AggregateOptions{Filter: f, WholeRange: true, Fields: []string{"value"}, Funcs: []AggFunc{AggCount}})
			if err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
	})
	b.Run("avg", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			rec, err := db.Aggregate(ctx, "iot", AggregateOptions{Filter: f, WholeRange: true, Fields: []string{"value"}, Funcs: []AggFunc{AggAvg}})
			if err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
	})
}
