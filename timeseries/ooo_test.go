package timeseries

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/model"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
)

// oooSeries is the load: one sensor, n measurements 10 s apart.
func oooSeries(n int) []model.Measurement {
	rng := rand.New(rand.NewSource(1))
	const t0 = int64(1_700_000_000e9)
	ms := make([]model.Measurement, n)
	temp := 20.0
	for i := range ms {
		temp += float64(rng.Intn(21)-10) / 100
		ms[i] = model.Measurement{Time: t0 + int64(i)*10e9, Meta: map[string]any{"sensor": "s1"},
			Fields: []model.Field{{Name: "temp", Value: model.Float(temp)}, {Name: "seq", Value: model.Int(int64(i))}}}
	}
	return ms
}

// oooOrders are the batch orders of the table: each is a list of
// batches sent one after another.
func oooOrders(ms []model.Measurement) map[string][][]model.Measurement {
	asc := append([]model.Measurement(nil), ms...)
	desc := make([]model.Measurement, len(ms))
	for i := range ms {
		desc[len(ms)-1-i] = ms[i]
	}
	shuf := append([]model.Measurement(nil), ms...)
	rand.New(rand.NewSource(2)).Shuffle(len(shuf), func(i, j int) { shuf[i], shuf[j] = shuf[j], shuf[i] })
	var backfill [][]model.Measurement
	for end := len(ms); end > 0; end -= 500 {
		backfill = append(backfill, ms[max(0, end-500):end])
	}
	return map[string][][]model.Measurement{
		"ascending":  {asc},
		"descending": {desc},
		"shuffled":   {shuf},
		"backfill":   backfill,
	}
}

// loadOrder inserts batches into a fresh collection (granularity seconds),
// flushes and returns the collection's buckets and storage bytes.
func loadOrder(t *testing.T, batches [][]model.Measurement) (buckets, storage int64) {
	t.Helper()
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "meta", Granularity: "seconds"})
	n := 0
	for _, b := range batches {
		res, err := db.Insert(ctx, "m", Batch{Measurements: b}, InsertOptions{})
		if err != nil || res.Inserted != len(b) {
			t.Fatalf("insert: %+v %v", res, err)
		}
		n += len(b)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	info, err := db.Describe(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if info.Count != int64(n) {
		t.Fatalf("count %d, want %d", info.Count, n)
	}
	return info.Buckets, info.StorageBytes
}

// TestOutOfOrderBatchTable measures issue 20's table: 5,000 measurements of
// one sensor in one batch, ascending, descending, shuffled, and as ten
// batches of 500 newest first. Descending and shuffled batches must be
// stored as ascending ones are.
func TestOutOfOrderBatchTable(t *testing.T) {
	orders := oooOrders(oooSeries(5000))
	got := map[string][2]int64{}
	for _, name := range []string{"ascending", "descending", "shuffled", "backfill"} {
		b, s := loadOrder(t, orders[name])
		got[name] = [2]int64{b, s}
		t.Logf("%-10s buckets %5d storageBytes %8d", name, b, s)
	}
	asc := got["ascending"]
	for _, name := range []string{"descending", "shuffled"} {
		g := got[name]
		if g[0] != asc[0] || float64(g[1]) > 1.1*float64(asc[1]) {
			t.Errorf("%s: %d buckets, %d bytes; ascending: %d buckets, %d bytes", name, g[0], g[1], asc[0], asc[1])
		}
	}

}

// checkBuckets checks the rollover rules on every bucket of collection
// name, in memory and in Pebble, and returns how many there are.
func checkBuckets(t *testing.T, db *DB, name string) int {
	t.Helper()
	db.mu.RLock()
	c := db.coll.byName[name]
	span, rounding := c.opts.TimeSeries.Span(), c.opts.TimeSeries.Rounding()
	n := 0
	for _, s := range c.series.byOrd {
		for _, b := range s.buckets {
			n++
			if b.rows() > db.lim.maxCount || b.size > db.lim.maxBytes {
				t.Errorf("bucket %d in memory: %d rows, %d bytes", b.id, b.rows(), b.size)
			}
			if b.minTime%rounding != 0 || b.minT < b.minTime || b.maxT >= b.minTime+span {
				t.Errorf("bucket %d in memory: times %d..%d outside [%d, +%d)", b.id, b.minT, b.maxT, b.minTime, span)
			}
		}
	}
	id := c.id
	db.mu.RUnlock()
	p := collPrefix(spaceBucket, id)
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		n++
		k, err := parseBucketKey(it.Key())
		if err != nil {
			t.Fatal(err)
		}
		rows, lo, hi, err := bucket.Peek(it.Value())
		if err != nil {
			t.Fatal(err)
		}
		if rows > db.lim.maxCount || len(it.Value()) > db.lim.maxBytes {
			t.Errorf("stored bucket %d: %d rows, %d bytes", k.id, rows, len(it.Value()))
		}
		if lo < k.minTime || hi >= k.minTime+span {
			t.Errorf("stored bucket %d: times %d..%d outside [%d, +%d)", k.id, lo, hi, k.minTime, span)
		}
	}
	return n
}

// TestOutOfOrderProperty inserts random series in random orders and batch
// splits. Whatever the order, the buckets keep the rollover rules, every
// measurement is read back once and the count is exact; within one batch
// the order does not change the buckets made.
func TestOutOfOrderProperty(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for round := 0; round < rounds; round++ {
		seed := int64(round)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			const t0 = int64(1_700_000_000e9)
			var ms []model.Measurement
			for si, n := range []int{rng.Intn(3000), rng.Intn(300), 1 + rng.Intn(10)} {
				meta := fmt.Sprintf("s%d", si)
				step := int64(1+rng.Intn(30)) * 1e9
				bigEvery := 1 + rng.Intn(40)
				for i := 0; i < n; i++ {
					fs := []model.Field{{Name: "seq", Value: model.Int(int64(i))}, {Name: "v", Value: model.Float(rng.Float64())}}
					if i%bigEvery == 0 {
						fs = append(fs, model.Field{Name: "note", Value: model.String(strings.Repeat("x", rng.Intn(3000)))})
					}
					ms = append(ms, model.Measurement{Time: t0 + int64(i)*step + rng.Int63n(step), Meta: meta, Fields: fs})
				}
			}
			want := len(ms)
			// The order: shuffled, descending, ascending or runs of each.
			switch rng.Intn(4) {
			case 0:
				rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
			case 1:
				slices.Reverse(ms)
			case 2:
			case 3:
				for i := 0; i < len(ms); {
					j := min(len(ms), i+1+rng.Intn(200))
					if rng.Intn(2) == 0 {
						slices.Reverse(ms[i:j])
					} else {
						rng.Shuffle(j-i, func(a, b int) { ms[i+a], ms[i+b] = ms[i+b], ms[i+a] })
					}
					i = j
				}
			}
			split := 1 + rng.Intn(4)
			dir := t.TempDir()
			db := openTest(t, dir, nil)
			mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s", Granularity: "seconds"})
			for i := 0; i < len(ms); {
				j := len(ms)
				if split > 1 {
					j = min(len(ms), i+1+rng.Intn(len(ms)/split+1))
				}
				res, err := db.Insert(ctx, "m", Batch{Measurements: ms[i:j]}, InsertOptions{})
				if err != nil || res.Inserted != j-i {
					t.Fatalf("insert: %+v %v", res, err)
				}
				i = j
			}
			checkBuckets(t, db, "m")
			if split == 1 {
				// One batch: the same buckets as the rows sent in order.
				sorted := slices.Clone(ms)
				slices.SortStableFunc(sorted, func(a, b model.Measurement) int { return cmp.Compare(a.Time, b.Time) })
				ref := openTest(t, t.TempDir(), nil)
				mustCreate(t, ref, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s", Granularity: "seconds"})
				if _, err := ref.Insert(ctx, "m", Batch{Measurements: sorted}, InsertOptions{}); err != nil {
					t.Fatal(err)
				}
				a, _ := db.Describe(ctx, "m")
				b, _ := ref.Describe(ctx, "m")
				ref.Close()
				if a.Buckets != b.Buckets {
					t.Errorf("one batch: %d buckets, %d when sent in time order", a.Buckets, b.Buckets)
				}
			}
			// Half the rounds replay the log, the others read from Pebble.
			if rng.Intn(2) == 0 {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openTest(t, dir, nil)
			defer db.Close()
			checkBuckets(t, db, "m")
			info, err := db.Describe(ctx, "m")
			if err != nil || info.Count != int64(want) {
				t.Fatalf("count %d, want %d (%v)", info.Count, want, err)
			}
			seen := map[string]bool{}
			rows := findRows(t, db, "m", FindOptions{Fields: []string{"seq"}})
			for _, r := range rows {
				k := r.meta + " " + r.vals
				if seen[k] {
					t.Fatalf("%s read twice", k)
				}
				seen[k] = true
			}
			if len(rows) != want {
				t.Fatalf("%d rows read, want %d", len(rows), want)
			}
		})
	}
}

// BenchmarkInsertOrder inserts batches of 5,000 rows of 50 series (100
// rows each) in time order, newest first and shuffled, into a store without
// fsync, and times sortRows alone on the ordered batches: the cost
// ordered data pays for the sort is sortRows' ns/row against Insert's.
//
//	go test ./timeseries -run '^$' -bench InsertOrder -benchtime 200x
func BenchmarkInsertOrder(b *testing.B) {
	const series, perSeries = 50, 100
	batch := func(i int) []model.Measurement {
		ms := make([]model.Measurement, 0, series*perSeries)
		t0 := int64(1_700_000_000e9) + int64(i)*perSeries*10e9
		for r := 0; r < perSeries; r++ {
			for s := 0; s < series; s++ {
				ms = append(ms, model.Measurement{Time: t0 + int64(r)*10e9, Meta: model.MetaKey(fmt.Sprintf(`"s%d"`, s)),
					Fields: []model.Field{{Name: "v", Value: model.Float(float64(r))}}})
			}
		}
		return ms
	}
	for _, o := range []string{"asc", "desc", "shuffle"} {
		b.Run(o, func(b *testing.B) {
			db := openTest(b, b.TempDir(), nil)
			defer db.Close()
			mustCreate(b, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
			rng := rand.New(rand.NewSource(1))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ms := batch(i)
				switch o {
				case "desc":
					slices.Reverse(ms)
				case "shuffle":
					rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
				}
				b.StartTimer()
				if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*series*perSeries), "ns/row")
		})
	}
	b.Run("sortRows-ordered", func(b *testing.B) {
		rows := batch(0)[:perSeries]
		for i := 0; i < b.N; i++ {
			sortRows(rows)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perSeries), "ns/row")
	})
}

// TestSortRows checks that sortRows orders by time and keeps rows of equal
// times in the caller's order, whichever way it sorts.
func TestSortRows(t *testing.T) {
	for _, tc := range []struct {
		times []int64
		want  string // the rows' original positions, in the sorted order
	}{
		{nil, "[]"},
		{[]int64{5}, "[0]"},
		{[]int64{1, 2, 2, 3}, "[0 1 2 3]"},
		{[]int64{4, 3, 2, 1}, "[3 2 1 0]"},
		{[]int64{4, 3, 3, 1}, "[3 1 2 0]"},
		{[]int64{3, 1, 3, 1}, "[1 3 0 2]"},
		{[]int64{1, 3, 2, 2}, "[0 2 3 1]"},
	} {
		rows := make([]model.Measurement, len(tc.times))
		for i, tm := range tc.times {
			rows[i] = model.Measurement{Time: tm, Fields: []model.Field{{Name: "i", Value: model.Int(int64(i))}}}
		}
		sortRows(rows)
		pos := []int64{}
		for _, r := range rows {
			pos = append(pos, r.Fields[0].Value.I)
		}
		if got := fmt.Sprint(pos); got != tc.want {
			t.Errorf("times %v: order %s, want %s", tc.times, got, tc.want)
		}
	}
}
