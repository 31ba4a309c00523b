package timeseries

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/ttl"
)

// BenchmarkArchive measures, on 30 days of an iot fleet (100 sensors, a
// float temperature as a random walk and an integer humidity every 2
// minutes: 2.16 million measurements) stored twice, once live and once to
// be archived: the rate of archive passes (measurements/s, with the TTL
// monitor's default budget of 50,000 a batch), the archive's Parquet
// bytes per measurement against the stored buckets', and a 30-day
// aggregate (a window of a day per sensor: count, avg, min, max) read from
// the archive against the same read from live data, timed alternately.
//
//	go test -run '^$' -bench BenchmarkArchive -benchtime 5x ./timeseries
func BenchmarkArchive(b *testing.B) {
	const sensors, days, step = 100, 30, 2 * time.Minute
	clock := newTestClock(t0)
	st, err := objstore.Open(ctx, "file://"+b.TempDir(), objstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	db := openTest(b, b.TempDir(), func(o *Options) { o.Now = clock.Now; o.Archive = st; o.CheckpointInterval = time.Minute })
	defer db.Close()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor", Granularity: model.GranularityMinutes}
	for _, name := range []string{"live", "arch"} {
		o := CollectionOptions{TimeSeries: ts}
		if name == "arch" {
			o.ExpireAfterSeconds, o.Archive = int64p(3600), true
		}
		if _, err := db.CreateCollection(ctx, name, o); err != nil {
			b.Fatal(err)
		}
	}
	from := t0.Add(-days * 24 * time.Hour)
	rng := rand.New(rand.NewPCG(1, 2))
	temp := make([]float64, sensors)
	var points int64
	for at := from; at.Before(t0); at = at.Add(6 * time.Hour) {
		var ms []model.Measurement
		for s := 0; s < sensors; s++ {
			for t := at; t.Before(at.Add(6 * time.Hour)); t = t.Add(step) {
				temp[s] += math.Round((rng.Float64()-0.5)*20) / 100
				ms = append(ms, model.Measurement{Time: t.UnixNano(), Meta: fmt.Sprintf("sensor-%03d", s), Fields: []model.Field{
					{Name: "temp", Value: model.Float(20 + temp[s])}, {Name: "hum", Value: model.Int(int64(40 + rng.IntN(20)))}}})
			}
		}
		for _, name := range []string{"live", "arch"} {
			if res, err := db.Insert(ctx, name, Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
				b.Fatal(err, res.Errors)
			}
		}
		points += int64(len(ms))
	}
	storeAll(b, db, clock)
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	live, err := db.Describe(ctx, "live")
	if err != nil {
		b.Fatal(err)
	}

	clock.Advance(48 * time.Hour)
	start := time.Now()
	for {
		got, err := db.Expire(ctx, ttl.Target{Collection: "arch"}, clock.Now(), ttl.Budget{Docs: 50000})
		if err != nil {
			b.Fatal(err)
		}
		if !got.More && got.Docs == 0 {
			break
		}
	}
	took := time.Since(start)
	arch, err := db.Describe(ctx, "arch")
	if err != nil {
		b.Fatal(err)
	}
	if arch.Archived == nil || arch.Archived.Measurements != points || arch.Count != 0 {
		b.Fatalf("archived %+v of %d, %d left", arch.Archived, points, arch.Count)
	}

	agg := func(name string, archive bool) time.Duration {
		t := time.Now()
		rec, err := db.Aggregate(ctx, name, AggregateOptions{Window: 24 * time.Hour, Fields: []string{"temp"},
			Funcs: []AggFunc{AggCount, AggAvg, AggMin, AggMax}, Archive: archive})
		if err != nil {
			b.Fatal(err)
		}
		if rec.NumRows() != sensors*days {
			b.Fatalf("%s: %d rows", name, rec.NumRows())
		}
		rec.Release()
		return time.Since(t)
	}
	b.ResetTimer()
	var tl, ta time.Duration
	for i := 0; i < b.N; i++ {
		tl += agg("live", false)
		ta += agg("arch", true)
	}
	b.ReportMetric(float64(points)/took.Seconds(), "archived-pts/s")
	b.ReportMetric(float64(arch.Archived.Bytes)/float64(points), "parquet-B/pt")
	b.ReportMetric(float64(live.StorageBytes)/float64(points), "bucket-B/pt")
	b.ReportMetric(float64(arch.Archived.Files), "files")
	b.ReportMetric(float64(tl.Milliseconds())/float64(b.N), "live-agg-ms")
	b.ReportMetric(float64(ta.Milliseconds())/float64(b.N), "archive-agg-ms")
	b.ReportMetric(float64(ta)/float64(tl), "archive/live")
}
