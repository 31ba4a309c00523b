package timeseries

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// numRow is a number of the ReadNumbers model: a sensor's field at a time.
type numRow struct {
	sensor, field string
	t             int64
	bits          uint64 // of the value as a float
}

// TestReadNumbers reads the numbers of random ranges and fields after
// random inserts (late rows, a field changing between a number and a
// text, NaNs of any bits), checkpoints that store buckets, and deletes,
// and compares them with a model of what was written: the same numbers,
// in time order for each series and field; then again after a reopen.
func TestReadNumbers(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { readNumbersRun(t, seed) })
	}
}

func readNumbersRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	clock := newTestClock(t0.Add(6 * time.Hour))
	dir := t.TempDir()
	db := openTTL(t, dir, clock, nil)
	defer func() { db.Close() }()
	minute := func(n int) int64 {
		return t0.Add(time.Duration(n)*time.Minute + time.Duration(rng.IntN(1000))).UnixNano()
	}
	var rows []numRow
	insert := func() {
		var ms []model.Measurement
		for range 1 + rng.IntN(60) {
			sensor, at := fmt.Sprintf("s%d", rng.IntN(6)), minute(rng.IntN(300))
			var fs []model.Field
			add := func(name string, v model.Value, f float64) {
				fs = append(fs, model.Field{Name: name, Value: v})
				if numberKind(v.Kind) {
					rows = append(rows, numRow{sensor, name, at, math.Float64bits(f)})
				}
			}
			if rng.IntN(5) > 0 {
				if i := rng.Int64N(1000) - 500; rng.IntN(2) == 0 {
					add("v", model.Int(i), float64(i))
				} else {
					add("v", model.Float(float64(i)/8), float64(i)/8)
				}
			}
			if rng.IntN(3) == 0 {
				f := rng.NormFloat64()
				if rng.IntN(10) == 0 {
					f = math.Float64frombits(0x7ff0000000000002) // a staleness marker's bits
				}
				add("w", model.Float(f), f)
			}
			if rng.IntN(4) == 0 {
				if rng.IntN(2) == 0 {
					add("m", model.Int32(7), 7)
				} else {
					add("m", model.String("seven"), 0)
				}
			}
			if len(fs) == 0 {
				add("v", model.Int(1), 1)
			}
			ms = append(ms, model.Measurement{Time: at, Meta: sensor, Fields: fs})
		}
		if res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Fatalf("insert: %v %v", err, res.Errors)
		}
	}
	date := func(ns int64) string { return `{"$date": "` + time.Unix(0, ns).UTC().Format(time.RFC3339Nano) + `"}` }
	check := func(when string) {
		t.Helper()
		for range 5 {
			lo, hi := minute(rng.IntN(320)-10), minute(rng.IntN(320)-10)
			if lo > hi {
				lo, hi = hi, lo
			}
			var fields []string
			if rng.IntN(2) == 0 {
				fields = []string{[]string{"v", "w", "m", "none"}[rng.IntN(4)]}
			}
			filter := fmt.Sprintf(`{"t": {"$gte": %s, "$lte": %s}}`, date(lo), date(hi))
			var want, got []string
			for _, r := range rows {
				if r.t >= lo && r.t <= hi && (fields == nil || slices.Contains(fields, r.field)) {
					want = append(want, fmt.Sprintf("%q %s %d %x", r.sensor, r.field, r.t, r.bits))
				}
			}
			err := db.ReadNumbers(ctx, "s", mustFilter(t, filter), fields, func(key, field string, ts []int64, vs []float64) error {
				if !slices.IsSorted(ts) {
					t.Errorf("%s: %s %s: times out of order", when, key, field)
				}
				for i := range ts {
					got = append(got, fmt.Sprintf("%s %s %d %x", key, field, ts[i], math.Float64bits(vs[i])))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %s %v: %d numbers, want %d\n got %.400q\nwant %.400q", when, filter, fields, len(got), len(want), got, want)
			}
		}
	}
	for step := range 80 {
		switch k := rng.IntN(10); {
		case k < 6:
			insert()
		case k < 8:
			clock.Advance(time.Duration(rng.IntN(90)) * time.Minute)
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		default:
			s, lo, hi := fmt.Sprintf("s%d", rng.IntN(6)), minute(rng.IntN(300)), minute(rng.IntN(300))
			f := fmt.Sprintf(`{"sensor": %q, "t": {"$gte": %s, "$lt": %s}}`, s, date(lo), date(hi))
			if _, err := db.Delete(ctx, "s", mustFilter(t, f), DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			rows = slices.DeleteFunc(rows, func(r numRow) bool { return r.sensor == s && r.t >= lo && r.t < hi })
		}
		check(fmt.Sprintf("step %d", step))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	check("reopened")
}

// A filter on a field selects rows: ReadNumbers and SeriesFields give the
// numbers of the rows it matches only.
func TestReadNumbersFieldFilter(t *testing.T) {
	db := openTTL(t, t.TempDir(), newTestClock(t0), nil)
	defer db.Close()
	insertOne(t, db, "x", t0, model.Field{Name: "v", Value: model.Int(1)}, model.Field{Name: "w", Value: model.Float(10)})
	insertOne(t, db, "x", t0.Add(time.Minute), model.Field{Name: "v", Value: model.Int(2)}, model.Field{Name: "w", Value: model.Float(20)})
	for _, stored := range []bool{false, true} {
		if stored {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		err := db.ReadNumbers(ctx, "s", mustFilter(t, `{"v": {"$gt": 1}}`), nil, func(key, field string, ts []int64, vs []float64) error {
			got = append(got, fmt.Sprintf("%s %s %v", key, field, vs))
			return nil
		})
		if err != nil || fmt.Sprint(got) != `["x" v [2] "x" w [20]]` {
			t.Fatalf("stored %v: %q %v", stored, got, err)
		}
		for filter, want := range map[string]int{`{"v": {"$gt": 1}}`: 1, `{"v": {"$gt": 5}}`: 0} {
			if l, err := db.SeriesFields(ctx, "s", mustFilter(t, filter), []string{"w"}); err != nil || len(l) != want {
				t.Fatalf("stored %v: SeriesFields %s: %v %v", stored, filter, l, err)
			}
		}
	}
}
