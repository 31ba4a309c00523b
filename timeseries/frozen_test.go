package timeseries

import (
	"cmp"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
)

// frozenLoad writes to db what TestOpenBucketsFrozen compares: series
// whose rows come mostly in time order (some late), with a reading, a
// counter, and fields that come and go (a string every 7th row, a bool
// from row 100 on, an int that turns up in one stretch), in batches that
// interleave the series as writers do.
func frozenLoad(t *testing.T, db *DB, series, rows int) {
	t.Helper()
	rng := rand.New(rand.NewSource(7))
	base := int64(1_735_689_600e9) // 2025-01-01
	vals := make([]float64, series)
	var batch []model.Measurement
	for r := 0; r < rows; r++ {
		for s := 0; s < series; s++ {
			tm := base + int64(r)*10e9 + rng.Int63n(1e9)
			if rng.Intn(50) == 0 {
				tm -= rng.Int63n(300e9) // late
			}
			vals[s] = math.Round((vals[s]+rng.Float64()-0.5)*100) / 100
			fs := []model.Field{{Name: "v", Value: model.Float(vals[s])}, {Name: "n", Value: model.Int(int64(r * s))}}
			if r%7 == 0 {
				fs = append(fs, model.Field{Name: "note", Value: model.String(fmt.Sprintf("r%d", r))})
			}
			if r >= 100 {
				fs = append(fs, model.Field{Name: "ok", Value: model.Bool(r%3 == 0)})
			}
			if r > 150 && r < 170 {
				fs = append(fs, model.Field{Name: "spike", Value: model.Float(rng.NormFloat64())})
			}
			batch = append(batch, model.Measurement{Time: tm, Meta: sensor(fmt.Sprintf("s%d", s)), Fields: fs})
			if len(batch) == 500 {
				if _, err := db.Insert(ctx, "m", Batch{Measurements: batch}, InsertOptions{}); err != nil {
					t.Fatal(err)
				}
				batch = nil
			}
		}
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: batch}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestOpenBucketsFrozen: open buckets freeze their rows as they fill,
// and hold a few bytes a row rather than 8 a value; finds, aggregates,
// deletes, a checkpoint and a reopen give what buckets that never freeze
// give.
func TestOpenBucketsFrozen(t *testing.T) {
	const series, rows = 40, 800 // 2 h 13 min: the first hour's buckets seal
	open := func(dir string, freeze bool) *DB {
		db := openTest(t, dir, func(o *Options) { o.CheckpointLogBytes = 1 << 40 })
		if !freeze {
			db.lim.freezeAt = math.MaxInt
		}
		return db
	}
	dir := t.TempDir()
	db, plain := open(dir, true), open(t.TempDir(), false)
	defer func() { db.Close() }()
	defer plain.Close()
	for _, d := range []*DB{db, plain} {
		mustCreate(t, d, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
		frozenLoad(t, d, series, rows)
	}
	db.mu.RLock()
	frozen, open0, sealed, left := 0, 0, 0, 0
	for _, s := range db.coll.byName["m"].series.byOrd {
		newest := slices.MaxFunc(s.buckets, func(a, b *memBucket) int { return cmp.Compare(a.minTime, b.minTime) })
		for _, b := range s.buckets {
			if !b.sealed && b != newest {
				// Left open for late rows when the series moved on: its
				// plain rows were frozen then, and what came late since
				// has a small room.
				left++
				if c := cap(b.cols.Times); c >= freezeRows {
					t.Errorf("bucket %d, left open for late rows, has plain room for %d rows", b.id, c)
				}
			}
			frozen += b.frozenRows
			if all := b.capture().cols.Times; b.minT != slices.Min(all) || b.maxT != slices.Max(all) {
				t.Errorf("bucket %d: bounds [%d, %d], rows [%d, %d]", b.id, b.minT, b.maxT, slices.Min(all), slices.Max(all))
			}
			if b.sealed && b.unordered && b.frozenRows > 0 {
				sealed++
			}
			if !b.sealed {
				open0++
				if len(b.cols.Times) >= freezeRows {
					t.Errorf("an open bucket holds %d plain rows; want fewer than %d", len(b.cols.Times), freezeRows)
				}
			}
		}
	}
	db.mu.RUnlock()
	if frozen < series*rows/2 || open0 == 0 || sealed == 0 || left == 0 {
		t.Fatalf("%d rows frozen in %d open buckets (%d left open for late rows; %d sealed out of order) of %d rows: the test proves nothing",
			frozen, open0, left, sealed, series*rows)
	}
	// The plain buckets hold 8 bytes a time and a value, more for the
	// strings; frozen ones under half that.
	if got, want := db.headMem.Load(), plain.headMem.Load(); got*2 > want {
		t.Errorf("buckets in memory hold %d bytes frozen, %d plain; want under half", got, want)
	}
	same := func(step string) {
		t.Helper()
		for _, o := range []FindOptions{{}, {Order: SortAscending}, {Order: SortDescending, Limit: 500},
			{Filter: mustFilter(t, `{"s.id": "s3", "v": {"$gt": 0}}`)},
			{Filter: mustFilter(t, `{"ts": {"$gte": {"$date": "2025-01-01T00:40:00Z"}, "$lt": {"$date": "2025-01-01T01:30:00Z"}}}`)}} {
			got, want := findRows(t, db, "m", o), findRows(t, plain, "m", o)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: find %+v: %d rows differ from the %d of buckets that never froze", step, o, len(got), len(want))
			}
		}
		agg := AggregateOptions{Window: 60e9, GroupBy: "s", Fields: []string{"v", "n", "spike"}, Funcs: []AggFunc{AggCount, AggSum, AggFirst, AggLast, AggMin}}
		got, err := db.Aggregate(ctx, "m", agg)
		if err != nil {
			t.Fatal(err)
		}
		defer got.Release()
		want, err := plain.Aggregate(ctx, "m", agg)
		if err != nil {
			t.Fatal(err)
		}
		defer want.Release()
		if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
			t.Fatalf("%s: the aggregate differs from that of buckets that never froze", step)
		}
	}
	same("loaded")
	for _, d := range []*DB{db, plain} {
		if _, err := d.Delete(ctx, "m", mustFilter(t, `{"s.id": {"$in": ["s1", "s2"]}, "n": {"$gt": 300}}`), DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	same("after a delete")
	// A checkpoint writes the open buckets' snapshots from their frozen
	// rows; the reopened store freezes them again.
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if frozen, all := openSnapshots(t, db); frozen != all {
		t.Errorf("%d of %d open buckets' snapshots are their frozen rows; want all", frozen, all)
	}
	crash(db)
	db = open(dir, true)
	same("reopened")
	db.mu.RLock()
	frozen = 0
	for _, s := range db.coll.byName["m"].series.byOrd {
		for _, b := range s.buckets {
			frozen += b.frozenRows
		}
	}
	db.mu.RUnlock()
	if frozen == 0 {
		t.Error("no open bucket read back at open froze its rows")
	}
	// Rows hours later seal the buckets read back: the checkpoint writes
	// their rows in time order, late ones included.
	for _, d := range []*DB{db, plain} {
		var ms []model.Measurement
		for s := 0; s < series; s++ {
			ms = append(ms, model.Measurement{Time: int64(1_735_689_600e9) + 6*3600e9, Meta: sensor(fmt.Sprintf("s%d", s)),
				Fields: []model.Field{{Name: "v", Value: model.Float(1)}}})
		}
		if _, err := d.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	same("sealed after the reopen")
	// A compaction (Flush) writes the open buckets as encoded buckets,
	// which take fewer bytes on disk than frozen rows.
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if frozen, all := openSnapshots(t, db); frozen != 0 {
		t.Errorf("%d of %d open buckets' snapshots are their frozen rows after a flush; want none", frozen, all)
	}
	crash(db)
	db = open(dir, true)
	same("reopened after a flush")
}

// openSnapshots counts the open-bucket snapshots in db's store, and those
// of them that are frozen rows (bucket.VersionSnapshot); it fails the test
// if there is none.
func openSnapshots(t *testing.T, db *DB) (frozen, all int) {
	t.Helper()
	if err := db.scan([]byte{spaceOpen}, []byte{spaceOpen + 1}, func(k, v []byte) error {
		if v[0] == bucket.VersionSnapshot {
			frozen++
		}
		all++
		return nil
	}); err != nil || all == 0 {
		t.Fatalf("%d open-bucket snapshots, %v", all, err)
	}
	return frozen, all
}

// TestSealedSortedCopyReleased: a read of a sealed bucket whose rows came
// out of order keeps a sorted copy for the reads after it; the checkpoint
// that writes the bucket out lets the copy go from DB.sortedMem.
func TestSealedSortedCopyReleased(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.BucketMaxCount = 100; o.MemoryBudget = 1 << 20 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s", Granularity: model.GranularityHours})
	insert := func(from int) {
		var ms []model.Measurement
		for k := from; k < from+50; k++ {
			ms = append(ms, model.Measurement{Time: int64(1_700_000_000e9) + int64(k)*1e9, Meta: "s0",
				Fields: []model.Field{{Name: "v", Value: model.Int(int64(k))}}})
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	insert(50)
	insert(0) // the 100th row seals the bucket, its rows out of order
	if rows := findRows(t, db, "m", FindOptions{Filter: mustFilter(t, `{"s": "s0"}`), Order: SortAscending}); len(rows) != 100 || rows[0].t > rows[99].t {
		t.Fatalf("%d rows", len(rows))
	}
	if db.sortedMem.Load() == 0 {
		t.Fatal("no sorted copy kept: the test proves nothing")
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := db.sortedMem.Load(); n != 0 {
		t.Fatalf("%d bytes of sorted copies counted after the bucket left memory", n)
	}
}

// TestOpenHourPlainRowsFew: a fleet partway through its open hour holds
// most of its rows frozen, not plain: 2,000 sensors of 48 rows each (a
// reading and an integer, every 10 s) hold under maxOpenHourRowBytes of
// buckets a row. With freezeRows at 64 all 48 rows are plain.
func TestOpenHourPlainRowsFew(t *testing.T) {
	const series, rows = 2000, 48
	db := openTest(t, t.TempDir(), func(o *Options) { o.CheckpointLogBytes = 1 << 40 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	base := int64(1_735_689_600e9) // 2025-01-01
	rng := rand.New(rand.NewSource(3))
	for r := 0; r < rows; r++ {
		batch := make([]model.Measurement, 0, series)
		for s := 0; s < series; s++ {
			fs := []model.Field{{Name: "v", Value: model.Float(float64(rng.Intn(3000)) / 100)}, {Name: "n", Value: model.Int(int64(100 - r/10))}}
			batch = append(batch, model.Measurement{Time: base + int64(r)*10e9 + rng.Int63n(1e9), Meta: int64(s), Fields: fs})
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: batch}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	perRow := float64(db.headMem.Load()) / (series * rows)
	t.Logf("%.1f budgeted bytes a row", perRow)
	if perRow > maxOpenHourRowBytes {
		t.Errorf("the open hour holds %.1f bytes a row; want <= %d", perRow, maxOpenHourRowBytes)
	}
}

// maxOpenHourRowBytes bounds TestOpenHourPlainRowsFew: 32 rows frozen at a
// few bytes, 16 plain at 24 (the budget counts the rows the columns hold,
// not their room), and each bucket's struct and column headers, ~25
// bytes a row in all (35 when freezeRows was 64).
const maxOpenHourRowBytes = 28
