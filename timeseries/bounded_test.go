package timeseries

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// openSeries makes collection "s" of n series of rows rows each, 10 s
// apart, series i starting i seconds after t0, written to Pebble; the
// last series keeps a bucket in memory.
func openSeries(t testing.TB, n, rows int, mod func(*Options)) *DB {
	t.Helper()
	db := openTest(t, t.TempDir(), mod)
	t.Cleanup(func() { db.Close() })
	mustCreate(t, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	ms := make([]model.Measurement, 0, n*rows)
	for s := 0; s < n; s++ {
		for r := 0; r < rows; r++ {
			ms = append(ms, model.Measurement{Time: t0 + int64(s)*1e9 + int64(r)*10e9, Meta: int64(s),
				Fields: []model.Field{{Name: "v", Value: model.Int(int64(s*rows + r))}}})
		}
	}
	if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Insert(ctx, "s", Batch{Measurements: []model.Measurement{{Time: t0 + 5e9, Meta: int64(n - 1), Fields: []model.Field{{Name: "v", Value: model.Int(-1)}}}}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	return db
}

type sortedRow struct {
	t    int64
	meta string
	v    int64
}

// findAll runs a find and returns its rows and the buckets it decoded
// (headers read for the bounds of a sorted find apart).
func findAll(t *testing.T, db *DB, opts FindOptions) ([]sortedRow, int64) {
	t.Helper()
	cur, err := db.Find(ctx, "s", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []sortedRow
	for cur.Next() {
		rec := cur.Record()
		ts := rec.Column(0).(*array.Timestamp)
		ms := rec.Column(1).(*array.String)
		vs := rec.Column(2).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, sortedRow{int64(ts.Value(i)), ms.Value(i), vs.Value(i)})
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out, cur.scan.guard.buckets - cur.scan.guard.headers
}

// TestSortedLimitStreams checks that a sorted find with a limit reads the
// buckets of the rows it returns, not every series' (4000 series, 3 stored
// buckets each), and that its answers equal a full sort, ascending and
// descending, for random limits and time ranges.
func TestSortedLimitStreams(t *testing.T) {
	const series, rows = 4000, 30
	db := openSeries(t, series, rows, func(o *Options) { o.BucketMaxCount = 10 })
	all, _ := findAll(t, db, FindOptions{Fields: []string{"v"}})
	if len(all) != series*rows+1 {
		t.Fatalf("%d rows, want %d", len(all), series*rows+1)
	}
	for _, sortOrder := range []int{SortAscending, SortDescending} {
		want := append([]sortedRow(nil), all...)
		sort.SliceStable(want, func(i, j int) bool {
			if want[i].t != want[j].t {
				return (want[i].t < want[j].t) == (sortOrder == SortAscending)
			}
			return want[i].meta < want[j].meta
		})
		got, buckets := findAll(t, db, FindOptions{Fields: []string{"v"}, Order: sortOrder, Limit: 50})
		if !equalRows(got, want[:50]) {
			t.Fatalf("sort %d limit 50: got %v, want %v", sortOrder, got[:3], want[:3])
		}
		// The headers of the buckets that may hold a series' first row
		// (its first, or those in its last span), and the buckets of the
		// rows returned: never every bucket decoded.
		if buckets > 2*50 {
			t.Errorf("sort %d limit 50 decoded %d buckets; want at most %d of %d", sortOrder, buckets, 2*50, series*3)
		}
	}
	rng := rand.New(rand.NewSource(1))
	t0 := all[0].t
	for i := 0; i < 20; i++ {
		lo := t0 + rng.Int63n(int64(series+rows*10)*1e9)
		hi := lo + rng.Int63n(300e9)
		f := mustFilter(t, `{"t": {"$gte": {"$date": "`+time.Unix(0, lo).UTC().Format(time.RFC3339Nano)+
			`"}, "$lt": {"$date": "`+time.Unix(0, hi).UTC().Format(time.RFC3339Nano)+`"}}}`)
		sortOrder := []int{SortAscending, SortDescending}[i%2]
		limit := int64(1 + rng.Intn(200))
		var want []sortedRow
		for _, r := range all {
			if r.t >= lo && r.t < hi {
				want = append(want, r)
			}
		}
		sort.SliceStable(want, func(i, j int) bool {
			if want[i].t != want[j].t {
				return (want[i].t < want[j].t) == (sortOrder == SortAscending)
			}
			return want[i].meta < want[j].meta
		})
		if int64(len(want)) > limit {
			want = want[:limit]
		}
		got, _ := findAll(t, db, FindOptions{Filter: f, Fields: []string{"v"}, Order: sortOrder, Limit: limit})
		if !equalRows(got, want) {
			t.Fatalf("range [%d, %d) sort %d limit %d: %d rows, want %d", lo, hi, sortOrder, limit, len(got), len(want))
		}
	}
}

func equalRows(a, b []sortedRow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// armedCtx is cancelled once armed: its Err answers Canceled from then on.
type armedCtx struct {
	context.Context
	armed bool
}

func (c *armedCtx) Err() error {
	if c.armed {
		return context.Canceled
	}
	return nil
}

// TestScanStopsOnCancel checks that a find and an aggregate stop soon after
// their context is cancelled in the middle of a scan, even when no row
// matches (a batch is never filled), by the buckets read after the cancel.
func TestScanStopsOnCancel(t *testing.T) {
	db := openSeries(t, 500, 30, func(o *Options) { o.BucketMaxCount = 10 })
	f := mustFilter(t, `{"v": {"$lt": -5}}`)
	for _, sortOrder := range []int{SortSeries, SortAscending} {
		cctx := &armedCtx{Context: context.Background()}
		cur, err := db.Find(cctx, "s", FindOptions{Filter: f, Order: sortOrder, BatchRows: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		before := cur.scan.guard.buckets // a sorted find reads headers first
		cur.ctx = context.Background()   // the check before a batch passes
		cctx.armed = true
		if cur.Next() {
			t.Fatal("a row matched")
		}
		if !errors.Is(cur.Err(), context.Canceled) {
			t.Errorf("sort %d: err %v, want context.Canceled", sortOrder, cur.Err())
		}
		if n := cur.scan.guard.buckets - before; n > guardEvery {
			t.Errorf("sort %d: %d buckets read after the cancel; want at most %d", sortOrder, n, guardEvery)
		}
		cur.Close()
	}
	before := db.stats.aggBuckets.Load()
	cctx := &armedCtx{Context: context.Background(), armed: true}
	if _, err := db.Aggregate(cctx, "s", AggregateOptions{Window: time.Minute, Filter: f}); !errors.Is(err, context.Canceled) {
		t.Errorf("aggregate: err %v, want context.Canceled", err)
	}
	if n := db.stats.aggBuckets.Load() - before; n > guardEvery {
		t.Errorf("aggregate: %d buckets read after the cancel; want at most %d", n, guardEvery)
	}
}

// TestQueryMemoryLimit checks the limit on the series a sorted find
// matches, just below and just above it, and that the error names the
// limit; a find by series and an aggregate, which take their series a
// chunk at a time within half the memory left, run within both.
func TestQueryMemoryLimit(t *testing.T) {
	const series, rows = 40, 8
	// Each series holds one open bucket of eight rows of one column in
	// memory, open rows a read decodes into columns of its own.
	open := bucket.Columns{Times: make([]int64, rows), Fields: []bucket.Column{{Name: "v", Type: model.KindInt, Ints: make([]int64, rows)}}}
	need := int64(series) * (seriesSnapBytes + 8 + capturedBytes(&open, true))
	for _, c := range []struct {
		limit int64
		ok    bool
	}{{need, true}, {need - 1, false}} {
		db := openTest(t, t.TempDir(), func(o *Options) { o.QueryMemoryBytes = c.limit })
		mustCreate(t, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
		var ms []model.Measurement
		for s := 0; s < series; s++ {
			for r := range rows {
				ms = append(ms, model.Measurement{Time: int64(s)*1e9 + int64(r), Meta: int64(s), Fields: []model.Field{{Name: "v", Value: model.Int(1)}}})
			}
		}
		if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := planCharge(db, "s"); got != need {
			t.Fatalf("the plan would charge %d bytes, want %d", got, need)
		}
		cur, err := db.Find(ctx, "s", FindOptions{Order: SortAscending})
		if err == nil {
			cur.Close()
		}
		checkLimitErr(t, "sorted find", err, c.ok, mongoerr.QueryExceededMemoryLimit, c.limit)
		if n := len(findRows(t, db, "s", FindOptions{})); n != series*rows {
			t.Errorf("find by series within %d bytes: %d rows, want %d", c.limit, n, series*rows)
		}
		rec, err := db.Aggregate(ctx, "s", AggregateOptions{Window: time.Hour})
		if err != nil {
			t.Errorf("aggregate within %d bytes: %v", c.limit, err)
		} else {
			rec.Release()
		}
		db.Close()
	}
}

func checkLimitErr(t *testing.T, what string, err error, ok bool, code mongoerr.Code, limit int64) {
	t.Helper()
	switch {
	case ok && err != nil:
		t.Errorf("%s at the limit %d: %v", what, limit, err)
	case !ok && mongoerr.CodeOf(err) != code:
		t.Errorf("%s over the limit %d: err %v, want code %d", what, limit, err, code)
	case !ok && !strings.Contains(mongoerr.MessageOf(err), strconv.FormatInt(limit, 10)):
		t.Errorf("%s: message %q does not name the limit %d", what, mongoerr.MessageOf(err), limit)
	}
}

// TestAggregateCellLimit checks Options.AggregateMaxCells just at and just
// over the cells an aggregate makes: 3 series x 10 one-minute windows.
func TestAggregateCellLimit(t *testing.T) {
	for _, c := range []struct {
		limit int
		ok    bool
	}{{30, true}, {29, false}} {
		db := openTest(t, t.TempDir(), func(o *Options) { o.AggregateMaxCells = c.limit })
		mustCreate(t, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
		var ms []model.Measurement
		for s := 0; s < 3; s++ {
			for i := 0; i < 10; i++ {
				ms = append(ms, model.Measurement{Time: int64(i) * 60e9, Meta: int64(s), Fields: []model.Field{{Name: "v", Value: model.Int(1)}}})
			}
		}
		if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		rec, err := db.Aggregate(ctx, "s", AggregateOptions{Window: time.Minute})
		if err == nil {
			if rec.NumRows() != 30 {
				t.Errorf("%d rows, want 30", rec.NumRows())
			}
			rec.Release()
		}
		checkLimitErr(t, "aggregate", err, c.ok, mongoerr.ExceededMemoryLimit, int64(c.limit))
		db.Close()
	}
}

// TestAggregateLongSpan checks windows over more than 292 years of filter
// and an origin before 1678, both beyond int64 nanoseconds: no panic, and
// windows on the origin's minute.
func TestAggregateLongSpan(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
	t0 := time.Date(1990, 3, 4, 10, 0, 30, 0, time.UTC)
	if _, err := db.Insert(ctx, "s", Batch{Measurements: []model.Measurement{
		{Time: t0.UnixNano(), Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}},
		{Time: time.Date(1680, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(2)}}},
		{Time: time.Date(2260, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(3)}}},
	}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	f := mustFilter(t, `{"t": {"$gte": {"$date": "1700-01-01T00:00:00Z"}, "$lt": {"$date": "2000-01-01T00:00:00Z"}}}`)
	rec, err := db.Aggregate(ctx, "s", AggregateOptions{Filter: f, Window: time.Hour, Funcs: []AggFunc{AggCount}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() != 1 || time.Unix(0, int64(rec.Column(0).(*array.Timestamp).Value(0))).UTC() != t0.Truncate(time.Hour) {
		t.Errorf("1h windows: %v", rec)
	}
	rec.Release()
	origin := time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, w := range []time.Duration{time.Minute, 7 * time.Minute, 290 * 365 * 24 * time.Hour} {
		rec, err = db.Aggregate(ctx, "s", AggregateOptions{Window: w, Origin: origin, Funcs: []AggFunc{AggCount}})
		if err != nil {
			t.Fatal(err)
		}
		ts := rec.Column(0).(*array.Timestamp)
		for i := 0; i < int(rec.NumRows()); i++ {
			start := time.Unix(0, int64(ts.Value(i))).UTC()
			// start - origin must be a multiple of w, in seconds (a
			// Duration cannot hold it); a start before 1677 is clamped to
			// the earliest time.
			if d := start.Unix() - origin.Unix(); ts.Value(i) != math.MinInt64 && (d%int64(w/time.Second) != 0 || start.Nanosecond() != 0) {
				t.Errorf("window %v: start %v is not origin + k*window", w, start)
			}
			if w == time.Minute && i == 1 && !start.Equal(time.Date(1990, 3, 4, 10, 0, 0, 0, time.UTC)) {
				t.Errorf("1m window from 1700: start %v, want 1990-03-04T10:00:00Z", start)
			}
		}
		if rec.NumRows() != 3 && w < time.Hour {
			t.Errorf("window %v: %d rows, want 3", w, rec.NumRows())
		}
		rec.Release()
	}
}

// planCharge is what a plan of every series of coll charges for them and
// their buckets in memory (all in range).
func planCharge(db *DB, coll string) int64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	var n int64
	for _, s := range db.coll.byName[coll].byID {
		n += seriesSnapBytes + 8*int64(len(s.buckets))
		for _, b := range s.buckets {
			cp := b.capture()
			n += capturedBytes(&cp.cols, cp.thawed)
		}
	}
	return n
}
