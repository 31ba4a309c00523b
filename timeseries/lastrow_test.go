package timeseries

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// EarliestLast is the earliest of the series' last rows the filter
// selects that hold one of the fields, read from open and stored buckets
// alike.
func TestEarliestLast(t *testing.T) {
	clock := newTestClock(t0)
	db := openTTL(t, t.TempDir(), clock, nil)
	defer db.Close()
	insertMinutes(t, db, t0, 7, "a")
	insertMinutes(t, db, t0, 3, "b")
	insertMinutes(t, db, t0, 5, "c")
	// b holds w in its first minute only; c's last row lacks v.
	ms := []model.Measurement{
		{Time: t0.UnixNano(), Meta: "b", Fields: []model.Field{{Name: "w", Value: model.Float(1)}}},
		{Time: t0.Add(9 * time.Minute).UnixNano(), Meta: "c", Fields: []model.Field{{Name: "w", Value: model.Float(2)}}},
	}
	if res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
		t.Fatalf("insert: %v %v", err, res.Errors)
	}
	minute := func(n int) int64 { return t0.Add(time.Duration(n) * time.Minute).UnixNano() }
	for _, stored := range []bool{false, true} {
		if stored {
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			filter string
			fields []string
			want   int64 // -1: none
		}{
			{``, []string{"v"}, minute(2)},
			{``, nil, minute(0)}, // b's w
			{`{"sensor": {"$in": ["a", "c"]}}`, []string{"v"}, minute(4)},
			{`{"sensor": {"$in": ["a", "c"]}}`, nil, minute(4)}, // c's v
			{`{"sensor": "c"}`, []string{"w"}, minute(9)},
			{`{"t": {"$lt": {"$date": "2024-05-01T00:01:30Z"}}}`, []string{"v"}, minute(1)},
			{`{"t": {"$gte": {"$date": "2024-05-01T00:05:00Z"}}}`, []string{"v"}, minute(6)},
			{`{"t": {"$gte": {"$date": "2024-05-01T00:07:00Z"}}}`, []string{"v"}, -1},
			{``, []string{"nothing"}, -1},
		} {
			o := FindOptions{}
			if c.filter != "" {
				o.Filter = mustFilter(t, c.filter)
			}
			got, ok, err := db.EarliestLast(ctx, "s", o.Filter, c.fields)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				got = -1
			}
			if got != c.want {
				t.Errorf("stored %v, %s %v: %d, want %d", stored, c.filter, c.fields, got, c.want)
			}
		}
	}
}

// BenchmarkEarliestLast: EarliestLast of the iot fleet's value over its
// last 5 minutes (Prometheus' last_over_time at one instant asks it),
// settled by the series' newest rows, against the aggregate over every
// series that answered it before (aggregate).
//
//	go test -run '^$' -bench BenchmarkEarliestLast -benchtime 20x ./timeseries
func BenchmarkEarliestLast(b *testing.B) {
	for _, stored := range []bool{false, true} {
		clock := newTestClock(t0)
		db := openTest(b, b.TempDir(), func(o *Options) { o.Now = clock.Now })
		end := iotFleet(b, db, 10000, 3*time.Hour)
		if err := db.Checkpoint(); err != nil {
			b.Fatal(err)
		}
		state := "open"
		if stored {
			state = "stored"
			clock.Advance(time.Hour)
			if err := db.Checkpoint(); err != nil {
				b.Fatal(err)
			}
		}
		f := mustFilter(b, fmt.Sprintf(`{"time": {"$gte": {"$date": {"$numberLong": "%d"}}, "$lte": {"$date": {"$numberLong": "%d"}}}}`,
			end.Add(-5*time.Minute).UnixMilli(), end.UnixMilli()))
		fields := []string{"value"}
		want, _, err := db.EarliestLast(ctx, "iot", f, fields)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(state+"/settled", func(b *testing.B) {
			for range b.N {
				if got, _, err := db.EarliestLast(ctx, "iot", f, fields); err != nil || got != want {
					b.Fatal(got, want, err)
				}
			}
		})
		b.Run(state+"/aggregate", func(b *testing.B) {
			for range b.N {
				opts := AggregateOptions{Filter: f, WholeRange: true, Fields: fields, Funcs: []AggFunc{AggLast}, exactGroups: true}
				win, err := aggWindowing(&opts)
				if err != nil {
					b.Fatal(err)
				}
				guard, done, err := db.startQuery(ctx)
				if err != nil {
					b.Fatal(err)
				}
				c, err := db.lookup("iot")
				if err != nil {
					b.Fatal(err)
				}
				a, err := db.aggregate(ctx, c, "iot", opts, opts.Funcs, win, guard)
				if err != nil {
					b.Fatal(err)
				}
				got := int64(math.MaxInt64)
				for _, row := range a.cells.rows {
					if row[0].count > 0 {
						got = min(got, row[0].lastT)
					}
				}
				done()
				if got != want {
					b.Fatal(got, want)
				}
			}
		})
		db.Close()
	}
}
