package timeseries

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

var ctx = context.Background()

func openTest(t testing.TB, dir string, mod func(*Options)) *DB {
	t.Helper()
	o := Options{Dir: dir, NoSync: true, CheckpointInterval: time.Hour}
	if mod != nil {
		mod(&o)
	}
	db, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func mustCreate(t testing.TB, db *DB, name string, ts model.TimeSeriesOptions) {
	t.Helper()
	if _, err := db.CreateCollection(ctx, name, CollectionOptions{TimeSeries: &ts}); err != nil {
		t.Fatal(err)
	}
}

func mustFilter(t testing.TB, s string) *partialfilter.Filter {
	t.Helper()
	f, err := partialfilter.ParseJSON([]byte(s))
	if err != nil {
		t.Fatalf("filter %s: %v", s, err)
	}
	return f
}

// row is a measurement as a find returns it, for comparisons.
type row struct {
	t    int64
	meta string
	vals string
}

func (r row) String() string { return fmt.Sprintf("%d %s %s", r.t, r.meta, r.vals) }

// findRows runs a find and flattens its records.
func findRows(t testing.TB, db *DB, coll string, o FindOptions) []row {
	t.Helper()
	cur, err := db.Find(ctx, coll, o)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []row
	for cur.Next() {
		rec := cur.Record()
		for i := 0; i < int(rec.NumRows()); i++ {
			var r row
			for c := 0; c < int(rec.NumCols()); c++ {
				col := rec.Column(c)
				name := rec.ColumnName(c)
				if col.IsNull(i) {
					continue
				}
				switch a := col.(type) {
				case *array.Timestamp:
					if c == 0 && !o.OmitTime {
						r.t = int64(a.Value(i))
						continue
					}
					r.vals += fmt.Sprintf("%s=%d ", name, a.Value(i))
				case *array.String:
					if c == 1 && !o.OmitMeta && rec.Schema().Field(c).HasMetadata() {
						r.meta = a.Value(i)
						continue
					}
					r.vals += fmt.Sprintf("%s=%q ", name, a.Value(i))
				case *array.Float64:
					r.vals += fmt.Sprintf("%s=%v ", name, a.Value(i))
				case *array.Int64:
					r.vals += fmt.Sprintf("%s=%d ", name, a.Value(i))
				case *array.Boolean:
					r.vals += fmt.Sprintf("%s=%v ", name, a.Value(i))
				}
			}
			out = append(out, r)
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sensor(s string) map[string]any { return map[string]any{"id": s} }

// crash stops db as a crash would: the log and the store closed, no
// final checkpoint.
func crash(db *DB) {
	close(db.stop)
	<-db.done
	db.wal.Close()
	db.pdb.Close()
}

func TestInsertFindRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var ms []model.Measurement
	for i := 0; i < 3000; i++ {
		ms = append(ms, model.Measurement{Time: base + int64(i)*10e9, Meta: sensor(fmt.Sprint("s", i%3)),
			Fields: []model.Field{{Name: "v", Value: model.Float(float64(i) / 4)}, {Name: "n", Value: model.Int(int64(i))}}})
	}
	res, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{})
	if err != nil || res.Inserted != 3000 || len(res.Errors) != 0 {
		t.Fatalf("insert: %+v %v", res, err)
	}
	check := func(db *DB) {
		t.Helper()
		rows := findRows(t, db, "m", FindOptions{Order: SortAscending})
		if len(rows) != 3000 {
			t.Fatalf("got %d rows, want 3000", len(rows))
		}
		for i, r := range rows {
			// Fields in the order they were first written.
			want := fmt.Sprintf("v=%v n=%d ", float64(i)/4, i)
			if r.t != base+int64(i)*10e9 || r.vals != want || r.meta != fmt.Sprintf(`{"id":"s%d"}`, i%3) {
				t.Fatalf("row %d = %v, want t=%d %s", i, r, base+int64(i)*10e9, want)
			}
		}
		desc := findRows(t, db, "m", FindOptions{Order: SortDescending, Limit: 5})
		if len(desc) != 5 || desc[0].t != base+2999*10e9 || desc[4].t != base+2995*10e9 {
			t.Fatalf("descending: %v", desc)
		}
		bySeries := findRows(t, db, "m", FindOptions{Filter: mustFilter(t, `{"s.id": "s1"}`)})
		if len(bySeries) != 1000 {
			t.Fatalf("s1: %d rows", len(bySeries))
		}
		for i := 1; i < len(bySeries); i++ {
			if bySeries[i].t <= bySeries[i-1].t {
				t.Fatalf("s1 rows out of order at %d", i)
			}
		}
		info, err := db.Describe(ctx, "m")
		if err != nil || info.Count != 3000 {
			t.Fatalf("describe: %+v %v", info, err)
		}
	}
	check(db) // all in memory
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	check(db) // sealed buckets in Pebble, open ones in memory
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	defer db.Close()
	check(db) // after restart
}

func TestRecoveryWithoutCheckpoint(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	for i := 0; i < 50; i++ {
		if _, err := db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{{Time: int64(i) * 1e9, Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}}}}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	crash(db)
	db = openTest(t, dir, nil)
	defer db.Close()
	rows := findRows(t, db, "m", FindOptions{})
	if len(rows) != 50 {
		t.Fatalf("after replay: %d rows, want 50", len(rows))
	}
}

func TestFindFilters(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	var ms []model.Measurement
	for i := 0; i < 100; i++ {
		m := model.Measurement{Time: time.Date(2024, 1, 1, 0, i, 0, 0, time.UTC).UnixNano(), Meta: map[string]any{"site": fmt.Sprint("x", i%2), "n": int64(i % 5)},
			Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}}
		if i%10 == 0 {
			m.Fields = append(m.Fields, model.Field{Name: "tag", Value: model.String("ten")})
		}
		ms = append(ms, m)
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		filter string
		want   int
	}{
		{`{}`, 100},
		{`{"s.site": "x0"}`, 50},
		{`{"s.site": "x0", "s.n": {"$in": [0, 2]}}`, 20},
		{`{"ts": {"$gte": {"$date": "2024-01-01T00:10:00Z"}, "$lt": {"$date": "2024-01-01T00:20:00Z"}}}`, 10},
		{`{"ts": {"$gt": {"$date": "2024-01-01T00:10:00Z"}}}`, 89},
		{`{"ts": {"$lte": {"$date": "2024-01-01T00:10:00Z"}}}`, 11},
		{`{"ts": {"$gt": 5}}`, 0},
		{`{"v": {"$gte": 90}}`, 10},
		{`{"tag": "ten"}`, 10},
		{`{"tag": {"$exists": false}}`, 90},
		{`{"$or": [{"v": 1}, {"s.site": "x0"}]}`, 51},
		{`{"s.site": "x0", "v": {"$lt": 10}, "ts": {"$gte": {"$date": "2024-01-01T00:04:00Z"}}}`, 3},
		{`{"s.site": "nope"}`, 0},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			for _, srt := range []int{SortSeries, SortAscending, SortDescending} {
				rows := findRows(t, db, "m", FindOptions{Filter: mustFilter(t, tc.filter), Order: srt})
				if len(rows) != tc.want {
					t.Fatalf("sort %d: %d rows, want %d", srt, len(rows), tc.want)
				}
			}
		})
	}
	// Projection.
	rows := findRows(t, db, "m", FindOptions{Fields: []string{"tag"}, OmitMeta: true, Limit: 3, Order: SortAscending})
	if len(rows) != 3 || rows[0].vals != `tag="ten" ` || rows[1].vals != "" {
		t.Fatalf("projection: %v", rows)
	}
}

func TestInsertOrderedUnordered(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts"})
	bad := model.Measurement{Time: 2, Fields: []model.Field{{Name: "$x", Value: model.Int(1)}}}
	good := func(t int64) model.Measurement {
		return model.Measurement{Time: t, Fields: []model.Field{{Name: "v", Value: model.Int(t)}}}
	}
	res, err := db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{good(1), bad, good(3)}}, InsertOptions{})
	if err != nil || res.Inserted != 1 || len(res.Errors) != 1 || res.Errors[0].Index != 1 || mongoerr.CodeOf(res.Errors[0].Err) != mongoerr.BadValue {
		t.Fatalf("ordered: %+v %v", res, err)
	}
	res, err = db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{good(4), bad, good(5), {Time: 6, Meta: "x"}}}, InsertOptions{Unordered: true})
	if err != nil || res.Inserted != 2 || len(res.Errors) != 2 || res.Errors[1].Index != 3 {
		t.Fatalf("unordered: %+v %v", res, err)
	}
	rows := findRows(t, db, "m", FindOptions{Order: SortAscending})
	var ts []int64
	for _, r := range rows {
		ts = append(ts, r.t)
	}
	if fmt.Sprint(ts) != "[1 4 5]" {
		t.Fatalf("stored %v, want [1 4 5]", ts)
	}
	if _, err := db.Insert(ctx, "nope", Batch{Measurements: []model.Measurement{good(1)}}, InsertOptions{}); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Fatalf("missing collection: %v", err)
	}
}

// Rows after a valid one are checked whole, whatever names they share
// with it (validate skips names equal to the previous row's).
func TestInsertValidatesEveryRow(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts"})
	m := func(names ...string) model.Measurement {
		var fs []model.Field
		for _, n := range names {
			fs = append(fs, model.Field{Name: n, Value: model.Int(1)})
		}
		return model.Measurement{Time: 1, Fields: fs}
	}
	res, err := db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{m("a", "b"), m("a", "a"), m("a", "$b"), m("a", "ts"), m("a", ""), m("a", "b")}}, InsertOptions{Unordered: true})
	var refused []int
	for _, e := range res.Errors {
		refused = append(refused, e.Index)
	}
	if err != nil || res.Inserted != 2 || fmt.Sprint(refused) != "[1 2 3 4]" {
		t.Fatalf("inserted %d, refused %v, err %v; want 2, [1 2 3 4]", res.Inserted, refused, err)
	}
}

// TestRollover checks the bucket rollover rules of SPEC §1.3 one by one.
func TestRollover(t *testing.T) {
	const min = int64(60e9)
	type step struct {
		t      int64
		fields []model.Field
	}
	f := func(v float64) []model.Field { return []model.Field{{Name: "v", Value: model.Float(v)}} }
	for _, tc := range []struct {
		name    string
		steps   []step
		buckets int // buckets of the series afterwards
		maxOpen int
		open    int // open buckets afterwards; 0: not checked
	}{
		{"same bucket within span", []step{{0, f(1)}, {30 * min, f(2)}, {59 * min, f(3)}}, 1, 4, 0},
		{"span exceeded", []step{{0, f(1)}, {60 * min, f(2)}}, 2, 4, 0},
		{"older than min time", []step{{10 * min, f(1)}, {9 * min, f(2)}}, 2, 4, 0},
		{"older one that fits is reused", []step{{10 * min, f(1)}, {9 * min, f(2)}, {10*min + 1, f(3)}}, 2, 4, 0},
		{"type change", []step{{0, f(1)}, {1, []model.Field{{Name: "v", Value: model.String("x")}}}}, 2, 4, 0},
		{"new field is no type change", []step{{0, f(1)}, {1, []model.Field{{Name: "w", Value: model.String("x")}}}}, 1, 4, 0},
		{"open bucket limit seals the oldest", []step{{40 * min, f(1)}, {30 * min, f(1)}, {20 * min, f(1)}}, 3, 2, 2},
		// Late data just after a rollover joins the previous bucket, which
		// stays open until in-order data is a quarter of a span past its
		// end (sealGrace).
		{"late after a rollover joins the previous bucket", []step{{0, f(1)}, {60 * min, f(2)}, {59 * min, f(3)}}, 2, 4, 2},
		{"late a little after a rollover joins the previous bucket", []step{{0, f(1)}, {60 * min, f(2)}, {74 * min, f(3)}, {59 * min, f(4)}}, 2, 4, 2},
		{"a bucket a quarter of a span behind is closed", []step{{0, f(1)}, {60 * min, f(2)}, {75 * min, f(3)}}, 2, 4, 1},
		{"late data then opens a bucket of its own", []step{{0, f(1)}, {60 * min, f(2)}, {75 * min, f(3)}, {59 * min, f(4)}}, 3, 4, 2},
		{"a bucket a span behind is closed", []step{{0, f(1)}, {60 * min, f(2)}, {120 * min, f(3)}}, 3, 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTest(t, t.TempDir(), func(o *Options) { o.MaxOpenBucketsPerSeries = tc.maxOpen })
			defer db.Close()
			mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
			for _, s := range tc.steps {
				if _, err := db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{{Time: s.t, Meta: "a", Fields: s.fields}}}, InsertOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			db.mu.RLock()
			s := db.coll.byName["m"].series.get(`"a"`)
			n := len(s.buckets)
			open := 0
			for _, b := range s.buckets {
				if !b.sealed {
					open++
				}
				if b.minTime%min != 0 {
					t.Errorf("bucket min time %d not rounded to a minute", b.minTime)
				}
			}
			db.mu.RUnlock()
			if n != tc.buckets {
				t.Fatalf("%d buckets, want %d", n, tc.buckets)
			}
			if open > tc.maxOpen {
				t.Fatalf("%d open buckets, limit %d", open, tc.maxOpen)
			}
			if tc.open != 0 && open != tc.open {
				t.Fatalf("%d open buckets, want %d", open, tc.open)
			}
			if rows := findRows(t, db, "m", FindOptions{}); len(rows) != len(tc.steps) {
				t.Fatalf("%d rows back, want %d", len(rows), len(tc.steps))
			}
		})
	}
	t.Run("count and size limits", func(t *testing.T) {
		db := openTest(t, t.TempDir(), nil)
		defer db.Close()
		mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
		var ms []model.Measurement
		for i := 0; i < 2500; i++ {
			ms = append(ms, model.Measurement{Time: int64(i), Meta: "count", Fields: f(1)})
		}
		big := string(make([]byte, 50000))
		for i := 0; i < 5; i++ {
			ms = append(ms, model.Measurement{Time: int64(i), Meta: "size", Fields: []model.Field{{Name: "big", Value: model.String(big)}}})
		}
		if res, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil || res.Inserted != len(ms) {
			t.Fatal(res, err)
		}
		db.mu.RLock()
		defer db.mu.RUnlock()
		var counts []int
		for _, b := range db.coll.byName["m"].series.get(`"count"`).buckets {
			counts = append(counts, b.rows())
		}
		sort.Ints(counts)
		if fmt.Sprint(counts) != "[500 1000 1000]" {
			t.Fatalf("bucket sizes %v, want [500 1000 1000]", counts)
		}
		if n := len(db.coll.byName["m"].series.get(`"size"`).buckets); n != 3 {
			t.Fatalf("50 kB rows: %d buckets, want 3 (two per 128000-byte bucket)", n)
		}
	})
}

func TestDelete(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var ms []model.Measurement
	for i := 0; i < 2000; i++ {
		ms = append(ms, model.Measurement{Time: base.Add(time.Duration(i) * time.Minute).UnixNano(), Meta: fmt.Sprint("s", i%2),
			Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil { // part in Pebble, part in memory
		t.Fatal(err)
	}
	n, err := db.Delete(ctx, "m", mustFilter(t, `{"s": "s0", "ts": {"$gte": {"$date": "2024-01-01T05:00:00Z"}, "$lt": {"$date": "2024-01-01T10:30:00Z"}}}`), DeleteOptions{})
	if err != nil || n != 165 {
		t.Fatalf("deleted %d, %v; want 165", n, err)
	}
	n, err = db.Delete(ctx, "m", mustFilter(t, `{"s": "s1"}`), DeleteOptions{})
	if err != nil || n != 1000 {
		t.Fatalf("deleted %d, %v; want 1000", n, err)
	}
	check := func(db *DB) {
		t.Helper()
		rows := findRows(t, db, "m", FindOptions{})
		if len(rows) != 835 {
			t.Fatalf("%d rows left, want 835", len(rows))
		}
		for _, r := range rows {
			tm := time.Unix(0, r.t).UTC()
			if r.meta != `"s0"` || (!tm.Before(base.Add(5*time.Hour)) && tm.Before(base.Add(10*time.Hour+30*time.Minute))) {
				t.Fatalf("row %v should be gone", r)
			}
		}
	}
	check(db)
	// A crash right after: the delete is replayed from the log.
	crash(db)
	db = openTest(t, dir, nil)
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	defer db.Close()
	check(db)
}

func TestAggregate(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	rng := rand.New(rand.NewSource(1))
	type key struct {
		s string
		w int64
	}
	want := map[key][]float64{}
	var ms []model.Measurement
	for i := 0; i < 5000; i++ {
		tm := int64(rng.Intn(4*3600)) * 1e9
		s := fmt.Sprint("h", rng.Intn(3))
		v := float64(rng.Intn(1000)) / 10
		ms = append(ms, model.Measurement{Time: tm, Meta: map[string]any{"host": s}, Fields: []model.Field{{Name: "v", Value: model.Float(v)}}})
		k := key{fmt.Sprintf(`"%s"`, s), tm / 600e9 * 600e9}
		want[k] = append(want[k], v)
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	rec, err := db.Aggregate(ctx, "m", AggregateOptions{Window: 10 * time.Minute, GroupBy: "s.host", Funcs: []AggFunc{AggCount, AggSum, AggMin, AggMax}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if int(rec.NumRows()) != len(want) {
		t.Fatalf("%d rows, want %d", rec.NumRows(), len(want))
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		w := int64(rec.Column(0).(*array.Timestamp).Value(i))
		g := rec.Column(1).(*array.String).Value(i)
		vals := want[key{g, w}]
		var sum, mn, mx float64
		mn, mx = 1e9, -1e9
		for _, v := range vals {
			sum += v
			mn, mx = minf(mn, v), maxf(mx, v)
		}
		cnt := rec.Column(2).(*array.Int64).Value(i)
		gotSum := rec.Column(3).(*array.Float64).Value(i)
		if cnt != int64(len(vals)) || abs(gotSum-sum) > 1e-6 || rec.Column(4).(*array.Float64).Value(i) != mn || rec.Column(5).(*array.Float64).Value(i) != mx {
			t.Fatalf("group %s window %d: count %d sum %v, want %d %v", g, w, cnt, gotSum, len(vals), sum)
		}
	}
	if rec.Schema().Field(2).Name != "v_count" || rec.Schema().Field(0).Type.ID() != arrow.TIMESTAMP {
		t.Fatalf("schema %v", rec.Schema())
	}
}

func minf(a, b float64) float64 {
	if a < b {
		return a
	}
	return b
}
func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
func abs(a float64) float64 {
	if a < 0 {
		return -a
	}
	return a
}

func TestMemoryBudgetSealsEarly(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.MemoryBudget = 1 << 20 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	total := 0
	for round := 0; round < 20; round++ {
		var ms []model.Measurement
		for s := 0; s < 2000; s++ {
			ms = append(ms, model.Measurement{Time: int64(round) * 1e9, Meta: int64(s), Fields: []model.Field{{Name: "a", Value: model.Float(1)}, {Name: "b", Value: model.Float(2)}, {Name: "c", Value: model.Int(3)}}})
		}
		res, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{})
		if err != nil {
			t.Fatal(err)
		}
		total += res.Inserted
		if m := db.headMem.Load(); m > 4<<20 {
			t.Fatalf("memory held %d bytes with a budget of 1 MiB", m)
		}
	}
	if db.stats.sealedEarly.Load() == 0 {
		t.Fatal("no bucket was sealed early")
	}
	if rows := findRows(t, db, "m", FindOptions{}); len(rows) != total {
		t.Fatalf("%d rows, want %d", len(rows), total)
	}
}

// TestSealForBudgetKeepsRecent checks what memory pressure leaves open: the
// most recently written buckets, within half the bucket budget when the
// buckets sealed are full, within 1/sealKeep of it when they hold a row
// each (series come back more rarely than the budget keeps them).
func TestSealForBudgetKeepsRecent(t *testing.T) {
	for _, tc := range []struct {
		rows int   // a bucket
		keep int64 // the part of the bucket budget left open
	}{{1, sealKeep}, {3, sealKeep}, {20, 2}} {
		t.Run(fmt.Sprint(tc.rows, "rows"), func(t *testing.T) { testSealForBudget(t, tc.rows, tc.keep) })
	}
}

func testSealForBudget(t *testing.T, rows int, keep int64) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.MemoryBudget = 64 << 20 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	for s := 0; s < 400; s++ { // one insert a series: each bucket its own write sequence
		var ms []model.Measurement
		for i := 0; i < rows; i++ {
			ms = append(ms, model.Measurement{Time: int64(i+1) * 1e9, Meta: int64(s), Fields: []model.Field{{Name: "a", Value: model.Float(float64(i))}}})
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	db.mu.Lock()
	var held int64
	for _, c := range db.mu.byID {
		for _, s := range c.hot {
			for _, b := range s.buckets {
				held += b.mem
			}
		}
	}
	// A budget the open buckets pass by half: pressure.
	db.opts.MemoryBudget = db.seriesMem.Load() + held*2/3
	budget := db.bucketBudget()
	db.mu.Unlock()
	db.sealForBudget()

	db.mu.Lock()
	defer db.mu.Unlock()
	var openMem, maxMem int64
	var newestSealed, oldestOpen uint64 = 0, math.MaxUint64
	open := 0
	for _, c := range db.mu.byID {
		for _, s := range c.hot {
			for _, b := range s.buckets {
				maxMem = max(maxMem, b.mem)
				if b.sealed {
					newestSealed = max(newestSealed, b.lastWrite)
					continue
				}
				open++
				openMem += b.mem
				oldestOpen = min(oldestOpen, b.lastWrite)
			}
		}
	}
	if openMem > budget/keep || openMem+maxMem <= budget/keep {
		t.Fatalf("%d open buckets of %d rows hold %d bytes after sealing for a bucket budget of %d; want at most %d, and no bucket sealed past it", open, rows, openMem, budget, budget/keep)
	}
	if open == 0 || oldestOpen < newestSealed {
		t.Fatalf("%d left open; the oldest written at %d, a sealed one at %d: want the most recently written left open", open, oldestOpen, newestSealed)
	}
}

func TestCreateDropCollection(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	ts := model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"}
	created, err := db.CreateCollection(ctx, "m", CollectionOptions{TimeSeries: &ts})
	if err != nil || !created {
		t.Fatal(created, err)
	}
	same := model.TimeSeriesOptions{TimeField: "ts", MetaField: "s", Granularity: model.GranularitySeconds}
	if created, err := db.CreateCollection(ctx, "m", CollectionOptions{TimeSeries: &same}); err != nil || created {
		t.Fatalf("identical options: created=%v %v", created, err)
	}
	other := model.TimeSeriesOptions{TimeField: "ts", Granularity: model.GranularityHours}
	if _, err := db.CreateCollection(ctx, "m", CollectionOptions{TimeSeries: &other}); mongoerr.CodeOf(err) != mongoerr.NamespaceExists {
		t.Fatalf("different options: %v", err)
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{{Time: 1, Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := db.CollMod(ctx, "m", CollModOptions{TimeSeries: &model.TimeSeriesOptions{Granularity: model.GranularityMinutes}})
	if err != nil || res.NewTimeSeries.Granularity != model.GranularityMinutes {
		t.Fatalf("collMod: %+v %v", res, err)
	}
	if _, err := db.CollMod(ctx, "m", CollModOptions{TimeSeries: &model.TimeSeriesOptions{Granularity: model.GranularitySeconds}}); mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("finer granularity: %v", err)
	}
	db.Close()
	db = openTest(t, dir, nil)
	info, err := db.Describe(ctx, "m")
	if err != nil || info.Options.TimeSeries.Granularity != model.GranularityMinutes || info.Count != 1 {
		t.Fatalf("after restart: %+v %v", info, err)
	}
	if err := db.DropCollection(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Describe(ctx, "m"); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Fatalf("after drop: %v", err)
	}
	mustCreate(t, db, "m", ts)
	if rows := findRows(t, db, "m", FindOptions{}); len(rows) != 0 {
		t.Fatalf("recreated collection has %d rows", len(rows))
	}
	db.Close()
	db = openTest(t, dir, nil)
	defer db.Close()
	if rows := findRows(t, db, "m", FindOptions{}); len(rows) != 0 {
		t.Fatalf("recreated collection has %d rows after restart", len(rows))
	}
}

// Aggregates of only first and/or last pass over buckets that cannot
// change them (fewer buckets read, counted by stats.aggBuckets); the
// answers equal those of a full fold, with out-of-order
// data (overlapping buckets), sparse fields, windows smaller and larger
// than buckets, a time filter, data in memory and on disk.
func TestAggregateFirstLastSkipsBuckets(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s", Granularity: model.GranularityMinutes})
	rng := rand.New(rand.NewSource(2))
	used := map[string]bool{}
	for round := 0; round < 3; round++ {
		var ms []model.Measurement
		for i := 0; i < 6000; i++ {
			s := fmt.Sprint("h", rng.Intn(4))
			tm := int64(rng.Intn(48*3600)) * 1e9
			if used[fmt.Sprint(s, tm)] {
				continue // unique times per series: no ties for first and last
			}
			used[fmt.Sprint(s, tm)] = true
			fs := []model.Field{{Name: "v", Value: model.Float(float64(rng.Intn(1000)))}}
			if rng.Intn(3) == 0 {
				fs = append(fs, model.Field{Name: "w", Value: model.Int(int64(rng.Intn(50)))})
			}
			ms = append(ms, model.Measurement{Time: tm, Meta: s, Fields: fs})
		}
		// Batches of 10 random times: each batch is applied in time
		// order, so small buckets come from out-of-order batches.
		for len(ms) > 0 {
			n := min(10, len(ms))
			if _, err := db.Insert(ctx, "m", Batch{Measurements: ms[:n]}, InsertOptions{}); err != nil {
				t.Fatal(err)
			}
			ms = ms[n:]
		}
		if round < 2 {
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	render := func(rec arrow.Record, cols []int) []string {
		var out []string
		for i := 0; i < int(rec.NumRows()); i++ {
			row := fmt.Sprint(rec.Column(0).(*array.Timestamp).Value(i), rec.Column(1).(*array.String).Value(i))
			for _, c := range cols {
				row += " " + rec.Column(c).ValueStr(i)
			}
			out = append(out, row)
		}
		return out
	}
	filter := mustFilter(t, `{"ts": {"$gte": {"$date": "1970-01-01T03:00:00Z"}, "$lt": {"$date": "1970-01-02T20:00:00Z"}}}`)
	for _, window := range []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 24 * time.Hour, 30 * 24 * time.Hour} {
		for _, f := range []*partialfilter.Filter{nil, filter} {
			before := db.stats.aggBuckets.Load()
			full, err := db.Aggregate(ctx, "m", AggregateOptions{Filter: f, Window: window, Fields: []string{"v", "w"},
				Funcs: []AggFunc{AggCount, AggFirst, AggLast}})
			if err != nil {
				t.Fatal(err)
			}
			fullRead := db.stats.aggBuckets.Load() - before
			// Columns: time, group, v_count v_first v_last w_count w_first w_last.
			for _, c := range []struct {
				funcs []AggFunc
				cols  []int // of full
			}{
				{[]AggFunc{AggLast}, []int{4, 7}},
				{[]AggFunc{AggFirst}, []int{3, 6}},
				{[]AggFunc{AggFirst, AggLast}, []int{3, 4, 6, 7}},
			} {
				before := db.stats.aggBuckets.Load()
				got, err := db.Aggregate(ctx, "m", AggregateOptions{Filter: f, Window: window, Fields: []string{"v", "w"}, Funcs: c.funcs})
				if err != nil {
					t.Fatal(err)
				}
				read := db.stats.aggBuckets.Load() - before
				// The skip must show: fewer buckets read once windows hold
				// several buckets, and a small part of them when one window
				// holds all the data and only one end is asked for.
				switch {
				case read > fullRead,
					window >= 24*time.Hour && read >= fullRead,
					window > 24*time.Hour && f == nil && len(c.funcs) == 1 && read*4 > fullRead:
					t.Fatalf("window %v funcs %v filter %v: read %d of the %d buckets the full fold reads", window, c.funcs, f != nil, read, fullRead)
				}
				cols := make([]int, len(c.cols))
				for i := range cols {
					cols[i] = 2 + i
				}
				if a, b := render(got, cols), render(full, c.cols); !slices.Equal(a, b) {
					t.Fatalf("window %v funcs %v filter %v: %d rows differ from the full fold (%d rows)", window, c.funcs, f != nil, len(a), len(b))
				}
				got.Release()
			}
			full.Release()
		}
	}
}

// Buckets sealed since the last checkpoint wake the checkpointer once they
// hold an eighth of the bucket budget, before writers would wait for
// memory: here neither the log's size nor the interval nor the budget asks
// for one, and what is sealed (800 series' hour) is between an eighth and
// a quarter of the budget.
func TestSealedBucketsWakeCheckpoint(t *testing.T) {
	// Enough series that their hour's buckets, ~1.2 KB each frozen, are
	// more than an eighth of the budget.
	const wakeSeries = 1100
	db := openTest(t, t.TempDir(), func(o *Options) {
		o.MemoryBudget = 8 << 20
		o.CheckpointLogBytes = 1 << 40
	})
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	insert := func(hour int, rows int) {
		t.Helper()
		var ms []model.Measurement
		for s := 0; s < wakeSeries; s++ {
			for i := 0; i < rows; i++ {
				ms = append(ms, model.Measurement{Time: int64(hour)*3600e9 + int64(i)*10e9, Meta: int64(s),
					Fields: []model.Field{{Name: "a", Value: model.Float(float64(i) + 0.5)}, {Name: "b", Value: model.Int(int64(i))}}})
			}
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	insert(0, 300) // an hour's bucket a series
	before := db.Stats().Checkpoints
	insert(2, 1) // two hours on: the first hour's buckets are sealed
	// What they hold (sealedSince) is not checked here: the checkpoint the
	// insert woke may already have captured them and reset it.
	sealed, budget := db.sealedSince.Load(), db.bucketBudget()
	if db.headMem.Load() > budget {
		t.Fatalf("%d bytes in memory, bucket budget %d: want all within the budget", db.headMem.Load(), budget)
	}
	deadline := time.Now().Add(10 * time.Second)
	for db.Stats().Checkpoints == before {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint with %d bytes sealed since the last (bucket budget %d)", sealed, budget)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rows := findRows(t, db, "m", FindOptions{}); len(rows) != wakeSeries*301 {
		t.Fatalf("%d rows, want %d", len(rows), wakeSeries*301)
	}
}

// TestSealMovedOn: a bucket is sealed once its series wrote a quarter of
// its span past its end, whatever the batches: rows written one by one or
// together seal the same buckets, and a late row after that opens a
// bucket of its own. movedOn does not overflow at either end of time.
func TestSealMovedOn(t *testing.T) {
	const minute = int64(60e9)
	for _, batches := range [][][]int64{
		{{0}, {60, 61, 76}, {59}},
		{{0}, {60}, {61}, {76}, {59}},
		{{0}, {60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 119}, {59}},
	} {
		db := openTest(t, t.TempDir(), nil)
		mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
		for _, b := range batches {
			var ms []model.Measurement
			for _, m := range b {
				ms = append(ms, model.Measurement{Time: m * minute, Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(m)}}})
			}
			if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		db.mu.RLock()
		s := db.coll.byName["m"].series.get(`"a"`)
		var got []string
		for _, b := range s.buckets {
			got = append(got, fmt.Sprintf("%d:%d:%v", b.minTime/minute, b.rows(), b.sealed))
		}
		db.mu.RUnlock()
		// [0, 60) sealed with its one row, the in-order rows, then 59
		// alone in a bucket of its own.
		if len(got) != 3 || got[0] != "0:1:true" || got[2] != "59:1:false" {
			t.Errorf("batches %v: buckets %v, want [0,60) sealed, the rows after, 59 alone", batches, got)
		}
		db.Close()
	}
	for _, c := range []struct {
		minTime, span, t int64
		want             bool
	}{
		{0, 3600e9, 3600e9 + 900e9, true},
		{0, 3600e9, 3600e9 + 900e9 - 1, false},
		{math.MaxInt64 - 10, 3600e9, math.MaxInt64, false}, // ends past the last time
		{math.MinInt64, 3600e9, math.MaxInt64, true},       // t - end past int64
		{math.MinInt64, 3600e9, math.MinInt64 + 3600e9, false},
	} {
		b := &memBucket{minTime: c.minTime, span: c.span}
		if got := b.movedOn(c.t); got != c.want {
			t.Errorf("movedOn(%d) of [%d, +%d) = %v, want %v", c.t, c.minTime, c.span, got, c.want)
		}
	}
}
