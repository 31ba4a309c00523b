package timeseries

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// seriesOracle is the rows of a collection as a brute-force reader sees
// them: every measurement stored and not deleted, with the TTL that cuts
// its series.
type seriesOracle struct {
	ts   model.TimeSeriesOptions
	rows []model.Measurement
	ttl  func(meta any) int64 // seconds, -1 for none
	now  time.Time
}

// visible returns the rows f matches (nil: all) that have not expired,
// in the order of a find by series: meta key, then time.
func (o *seriesOracle) visible(f *partialfilter.Filter) []model.Measurement {
	var out []model.Measurement
	doc := map[string]any{}
	for _, m := range o.rows {
		if e := o.ttl(m.Meta); e >= 0 && m.Time < o.now.Add(-time.Duration(e)*time.Second).UnixNano() {
			continue
		}
		clear(doc)
		doc[o.ts.TimeField] = time.Unix(0, m.Time).UTC()
		if m.Meta != nil {
			doc[o.ts.MetaField] = m.Meta
		}
		for _, fl := range m.Fields {
			doc[fl.Name] = fl.Value.Interface()
		}
		if f == nil || f.Match(doc) {
			out = append(out, m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ki, kj := metaKeyOf(out[i].Meta), metaKeyOf(out[j].Meta)
		if ki != kj {
			return ki < kj
		}
		return out[i].Time < out[j].Time
	})
	return out
}

func metaKeyOf(meta any) string {
	k, err := model.CanonicalMeta(meta)
	if err != nil {
		panic(err)
	}
	return k
}

// asRow is m as findRows flattens it, with fields v (int) and w (float).
func asRow(m model.Measurement) row {
	r := row{t: m.Time}
	if m.Meta != nil {
		r.meta = metaKeyOf(m.Meta)
	}
	for _, name := range []string{"v", "w"} {
		for _, f := range m.Fields {
			if f.Name == name {
				if f.Value.Kind == model.KindInt {
					r.vals += fmt.Sprintf("%s=%d ", name, f.Value.I)
				} else {
					r.vals += fmt.Sprintf("%s=%v ", name, f.Value.F)
				}
			}
		}
	}
	return r
}

// distinctOracle is the distinct values at path of the rows, as MongoDB's
// distinct makes them, each as the canonical text of the value with
// integers as floats below 2^53, sorted.
func distinctOracle(rows []model.Measurement, ts model.TimeSeriesOptions, path string) []string {
	var sub []string
	if path != ts.MetaField {
		sub = strings.Split(strings.TrimPrefix(path, ts.MetaField+"."), ".")
	}
	seen := map[string]bool{}
	for _, m := range rows {
		if m.Meta == nil {
			continue
		}
		document.DistinctValues(m.Meta, sub, func(v any) { seen[numberKey(v)] = true })
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// numberKey is the canonical text of v, an integer below 2^53 as a float:
// what distinct takes as one value.
func numberKey(v any) string {
	if i, ok := v.(int64); ok && math.Abs(float64(i)) < 1<<53 {
		v = float64(i)
	}
	return metaKeyOf(v)
}

// checkDistinct compares DistinctMeta with the oracle: the same values,
// in partialfilter.Compare order.
func checkDistinct(t *testing.T, db *DB, o *seriesOracle, path string, f *partialfilter.Filter, name string) {
	t.Helper()
	got, err := db.DistinctMeta(ctx, "m", path, f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for i := 1; i < len(got); i++ {
		if partialfilter.Compare(got[i-1], got[i]) > 0 {
			t.Fatalf("%s: values out of order: %v before %v", name, got[i-1], got[i])
		}
	}
	keys := make([]string, len(got))
	for i, v := range got {
		keys[i] = numberKey(v)
	}
	sort.Strings(keys)
	if want := distinctOracle(o.visible(f), o.ts, path); !slices.Equal(keys, want) {
		t.Fatalf("%s: distinct %v, want %v", name, keys, want)
	}
}

// TestSeriesReadsOracle checks a find by series (with and without a
// limit), Count and DistinctMeta against a brute-force reader, with
// chunks of a few series (planYieldEvery 7): series with meta values of
// every shape (objects, arrays on the path, nulls, 1 and 1.0, strings,
// none), rows in memory and stored, out of order, series whose rows are
// all deleted or all expired (a partial TTL index), and a range deleted.
func TestSeriesReadsOracle(t *testing.T) {
	defer func(n int) { planYieldEvery = n }(planYieldEvery)
	planYieldEvery = 7
	clock := newTestClock(t0)
	db := openTest(t, t.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	ts := model.TimeSeriesOptions{TimeField: "ts", MetaField: "tags"}
	mustCreate(t, db, "m", ts)
	rng := rand.New(rand.NewSource(9))
	var metas []any
	var all []model.Measurement
	used := map[int64]bool{}
	for i := 0; i < 120; i++ {
		m := map[string]any{"sensor": fmt.Sprintf("s%03d", i), "site": fmt.Sprintf("site-%d", i%7), "kind": fmt.Sprintf("k%d", i%3)}
		switch i % 10 {
		case 1:
			m["labels"] = []any{"a", fmt.Sprintf("l%d", i%4)}
		case 2:
			m["site"] = nil
		case 3:
			m["n"] = int64(i / 10 % 2)
		case 4:
			m["n"] = float64(i / 10 % 2)
		case 5:
			m["deep"] = []any{map[string]any{"x": int64(i % 3)}, map[string]any{"y": true}}
		}
		metas = append(metas, m)
	}
	metas = append(metas, "bare", int64(7), nil, []any{"x", int64(3), []any{"y"}})
	// Series whose one row is exactly at a bound of the filters below,
	// stored (these) or in memory (edge, after the rounds).
	edge := func(name string) {
		for i, at := range []string{"2024-04-30T22:30:00Z", "2024-04-30T21:00:00Z"} {
			tm, err := time.Parse(time.RFC3339, at)
			if err != nil {
				t.Fatal(err)
			}
			m := model.Measurement{Time: tm.UnixNano(), Meta: map[string]any{"sensor": fmt.Sprintf("%s%d", name, i), "site": name, "kind": "k2"},
				Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}
			insertMeasurements(t, db, "m", []model.Measurement{m})
			all = append(all, m)
			used[tm.UnixNano()] = true
		}
	}
	edge("stored-edge")
	for round := 0; round < 4; round++ {
		var ms []model.Measurement
		for _, meta := range metas {
			for k := rng.Intn(4); k > 0; k-- {
				// From five hours ago to now, in random order.
				tm := t0.UnixNano() - rng.Int63n(int64(5*time.Hour))
				if used[tm] {
					continue
				}
				used[tm] = true
				fs := []model.Field{{Name: "v", Value: model.Int(int64(rng.Intn(20)))}}
				if rng.Intn(2) == 0 {
					fs = append(fs, model.Field{Name: "w", Value: model.Float(float64(rng.Intn(64)) / 8)})
				}
				ms = append(ms, model.Measurement{Time: tm, Meta: meta, Fields: fs})
			}
		}
		insertMeasurements(t, db, "m", ms)
		all = append(all, ms...)
		if round == 1 {
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
		if round == 2 {
			db.mu.Lock()
			for _, s := range db.coll.byName["m"].series.byOrd {
				for _, b := range s.buckets {
					db.seal(b)
				}
			}
			db.mu.Unlock()
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	edge("edge")
	// Every row of three sensors deleted, and a range of every series.
	cut := t0.Add(-150 * time.Minute)
	del := mustFilter(t, `{"tags.sensor": {"$in": ["s010", "s011", "s017"]}}`)
	if _, err := db.Delete(ctx, "m", del, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rangeDel := mustFilter(t, fmt.Sprintf(`{"ts": {"$gte": {"$date": %q}, "$lt": {"$date": %q}}}`,
		cut.Format(time.RFC3339Nano), cut.Add(10*time.Minute).Format(time.RFC3339Nano)))
	if _, err := db.Delete(ctx, "m", rangeDel, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	o := &seriesOracle{ts: ts, now: t0, ttl: func(any) int64 { return -1 }}
	for _, m := range all {
		if s, _ := m.Meta.(map[string]any); s != nil && slices.Contains([]any{"s010", "s011", "s017"}, s["sensor"]) {
			continue
		}
		if m.Time >= cut.UnixNano() && m.Time < cut.Add(10*time.Minute).UnixNano() {
			continue
		}
		o.rows = append(o.rows, m)
	}
	filters := []string{
		"",
		`{"tags.site": "site-3"}`,
		`{"tags.kind": {"$in": ["k0", "k2"]}, "ts": {"$gte": {"$date": "2024-04-30T22:30:00Z"}}}`,
		`{"ts": {"$gt": {"$date": "2024-04-30T19:00:00Z"}, "$lte": {"$date": "2024-04-30T21:00:00Z"}}}`,
		`{"v": {"$gt": 15}}`,
		`{"tags.labels": "l1", "w": {"$exists": true}}`,
	}
	paths := []string{"tags", "tags.site", "tags.labels", "tags.n", "tags.deep.x", "tags.missing", "tags.kind"}
	check := func(pass string) {
		t.Helper()
		for _, src := range filters {
			var f *partialfilter.Filter
			if src != "" {
				f = mustFilter(t, src)
			}
			want := o.visible(f)
			name := fmt.Sprintf("%s: filter %s", pass, src)
			n, err := db.Count(ctx, "m", f, CountOptions{})
			if err != nil || n != int64(len(want)) {
				t.Fatalf("%s: count %d, %v; want %d", name, n, err, len(want))
			}
			for _, limit := range []int64{0, 1, 7, 50} {
				got := findRows(t, db, "m", FindOptions{Filter: f, Limit: limit, Fields: []string{"v", "w"}, BatchRows: 5})
				w := want
				if limit > 0 && int64(len(w)) > limit {
					w = w[:limit]
				}
				if len(got) != len(w) {
					t.Fatalf("%s limit %d: %d rows, want %d", name, limit, len(got), len(w))
				}
				for i := range w {
					if got[i] != asRow(w[i]) {
						t.Fatalf("%s limit %d: row %d is %v, want %v", name, limit, i, got[i], asRow(w[i]))
					}
				}
			}
			for _, path := range paths {
				checkDistinct(t, db, o, path, f, name+" path "+path)
			}
		}
		if db.queryMem.Load() != 0 {
			t.Fatalf("%s: %d bytes of query memory held after the reads", pass, db.queryMem.Load())
		}
	}
	before := db.stats.catalogCounts.Load()
	check("no TTL")
	if db.stats.catalogCounts.Load() == before {
		t.Error("a count of everything with nothing expired was not answered from the catalog")
	}
	// A partial TTL index of an hour on kind k1: its series whose rows
	// are all older have nothing left to read.
	e := int64(3600)
	if _, _, err := db.CreateIndex(ctx, "m", IndexSpec{Name: "k1", Key: []IndexKey{{"ts", 1}}, ExpireAfterSeconds: &e,
		PartialFilterExpression: map[string]any{"tags.kind": "k1"}}); err != nil {
		t.Fatal(err)
	}
	o.ttl = func(meta any) int64 {
		if m, ok := meta.(map[string]any); ok && m["kind"] == "k1" {
			return e
		}
		return -1
	}
	before = db.stats.catalogCounts.Load()
	check("partial TTL")
	if db.stats.catalogCounts.Load() != before {
		t.Error("a count with rows expired was answered from the catalog")
	}
}

// fleetKeys returns the meta keys of the n series loadFleet makes, and
// their sensor numbers in the order of the keys (a find by series).
func fleetKeys(n int) (keys []string, order []int) {
	kinds := []string{"temperature", "humidity", "pressure", "vibration"}
	keys = make([]string, n)
	for i := range keys {
		keys[i] = metaKeyOf(map[string]any{"sensor": fmt.Sprintf("s%06d", i), "site": fmt.Sprintf("site-%d", i%100), "kind": kinds[i%len(kinds)]})
	}
	order = make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return keys[order[a]] < keys[order[b]] })
	return keys, order
}

// TestReadsOfManySeries reads 50,000 series (10,000 with -short) within
// a query memory of 768 KiB, where holding them all at once (168 bytes a
// series) needs 8 MiB (1.6 MiB): a find by series with a limit and without, a
// count with and without a filter, distinct values of meta paths and an
// aggregate, over series stored and in memory. Distinct values that
// alone pass the limit fail with 292.
func TestReadsOfManySeries(t *testing.T) {
	n := 50_000
	if testing.Short() {
		n = 10_000
	}
	clock := newTestClock(t0)
	db := openTest(t, t.TempDir(), func(o *Options) {
		o.Now = clock.Now
		o.QueryMemoryBytes = 768 << 10
		o.CheckpointLogBytes = 1 << 30
	})
	defer db.Close()
	loadFleet(t, db, n, 2, "")
	if need := int64(n) * (seriesSnapBytes + 8); need <= db.opts.QueryMemoryBytes {
		t.Fatalf("the series need %d bytes at once, within the limit of %d", need, db.opts.QueryMemoryBytes)
	}
	// Every bucket stored (sealed as idle), then a third point for a
	// tenth of the series, in memory.
	idleFleet(t, db, func() { clock.Advance(time.Hour) }, n, 0)
	base := time.Date(2024, 1, 1, 0, 0, 20, 0, time.UTC).UnixNano()
	var ms []model.Measurement
	keys, order := fleetKeys(n)
	for i := 0; i < n; i += 10 {
		ms = append(ms, model.Measurement{Time: base + int64(i%1000)*1e6, Meta: model.MetaKey(keys[i]),
			Fields: []model.Field{{Name: "value", Value: model.Float(1)}, {Name: "battery", Value: model.Int(1)}}})
	}
	insertMeasurements(t, db, "iot", ms)
	rows := int64(2*n + n/10)
	rowsOf := func(i int) int { return 2 + btoi(i%10 == 0) }

	// A find by series with a limit of one: the first series in meta
	// order, its first row.
	first := findRows(t, db, "iot", FindOptions{Limit: 1, Fields: []string{"battery"}})
	if want := (row{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() + int64(order[0]%1000)*1e6, meta: keys[order[0]], vals: "battery=100 "}); len(first) != 1 || first[0] != want {
		t.Fatalf("find with limit 1: %v, want %v", first, want)
	}
	// Without a limit: every row, series after series in meta order.
	cur, err := db.Find(ctx, "iot", FindOptions{Fields: []string{}, BatchRows: 8192})
	if err != nil {
		t.Fatal(err)
	}
	got, pos, inSeries := int64(0), 0, 0
	for cur.Next() {
		rec := cur.Record()
		metas := rec.Column(1).(interface{ Value(int) string })
		for r := 0; r < int(rec.NumRows()); r++ {
			if inSeries == rowsOf(order[pos]) {
				pos, inSeries = pos+1, 0
			}
			if m := metas.Value(r); m != keys[order[pos]] {
				t.Fatalf("row %d: series %s, want %s", got, m, keys[order[pos]])
			}
			got++
			inSeries++
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	cur.Close()
	if got != rows {
		t.Fatalf("find by series: %d rows, want %d", got, rows)
	}

	before := db.stats.catalogCounts.Load()
	if c, err := db.Count(ctx, "iot", nil, CountOptions{}); err != nil || c != rows || db.stats.catalogCounts.Load() != before+1 {
		t.Fatalf("count: %d, %v, from the catalog %v; want %d from it", c, err, db.stats.catalogCounts.Load() != before, rows)
	}
	site7 := mustFilter(t, `{"sensor.site": "site-7"}`)
	wantSite7 := int64(0)
	for i := 7; i < n; i += 100 {
		wantSite7 += int64(rowsOf(i))
	}
	if c, err := db.Count(ctx, "iot", site7, CountOptions{}); err != nil || c != wantSite7 {
		t.Fatalf("count of site-7: %d, %v; want %d", c, err, wantSite7)
	}
	late := mustFilter(t, `{"time": {"$gte": {"$date": "2024-01-01T00:00:10Z"}}}`)
	if c, err := db.Count(ctx, "iot", late, CountOptions{}); err != nil || c != int64(n+n/10) {
		t.Fatalf("count of the later points: %d, %v; want %d", c, err, n+n/10)
	}
	sites, err := db.DistinctMeta(ctx, "iot", "sensor.site", nil)
	if err != nil || len(sites) != 100 || sites[0] != "site-0" || sites[99] != "site-99" {
		t.Fatalf("distinct sites: %d values, %v", len(sites), err)
	}
	kinds, err := db.DistinctMeta(ctx, "iot", "sensor.kind", site7)
	if err != nil || !slices.Equal(kinds, []any{"vibration"}) {
		t.Fatalf("distinct kinds of site-7: %v, %v", kinds, err)
	}
	if _, err := db.DistinctMeta(ctx, "iot", "sensor.sensor", nil); mongoerr.CodeOf(err) != mongoerr.QueryExceededMemoryLimit {
		t.Fatalf("distinct sensors past the memory limit: %v, want code 292", err)
	}
	rec, err := db.Aggregate(ctx, "iot", AggregateOptions{WholeRange: true, GroupBy: "sensor.site", CountDocs: true, Fields: []string{"value"}, Funcs: []AggFunc{AggCount}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() != 100 {
		t.Fatalf("aggregate per site: %d rows, want 100", rec.NumRows())
	}
	rec.Release()
	if db.queryMem.Load() != 0 {
		t.Fatalf("%d bytes of query memory held after the reads", db.queryMem.Load())
	}
	// A sorted find still holds every series: refused.
	if _, err := db.Find(ctx, "iot", FindOptions{Order: SortAscending, Limit: 1}); mongoerr.CodeOf(err) != mongoerr.QueryExceededMemoryLimit {
		t.Fatalf("sorted find over the limit: %v, want code 292", err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSeriesStreamAcrossCheckpoints reads a find by series a few rows at
// a time while, between batches, every bucket in memory is sealed and
// written out (and dropped from memory), then merged: each chunk of
// series is taken after, from memory and a snapshot taken together, so
// that every row is read, once.
func TestSeriesStreamAcrossCheckpoints(t *testing.T) {
	defer func(n int) { planYieldEvery = n }(planYieldEvery)
	planYieldEvery = 4
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	var want []row
	for batch := 0; batch < 3; batch++ {
		// Batches newest first: small buckets beside each other, for the
		// merge.
		var ms []model.Measurement
		for i := 0; i < 40; i++ {
			m := model.Measurement{Time: int64(3-batch)*int64(10*time.Minute) + int64(i)*1e9, Meta: fmt.Sprintf("s%02d", i),
				Fields: []model.Field{{Name: "v", Value: model.Int(int64(batch))}}}
			ms = append(ms, m)
			want = append(want, asRow(m))
		}
		insertMeasurements(t, db, "m", ms)
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	sort.Slice(want, func(i, j int) bool {
		if want[i].meta != want[j].meta {
			return want[i].meta < want[j].meta
		}
		return want[i].t < want[j].t
	})
	cur, err := db.Find(ctx, "m", FindOptions{BatchRows: 5, Fields: []string{"v"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var got []row
	for step := 0; cur.Next(); step++ {
		rec := cur.Record()
		for i := 0; i < int(rec.NumRows()); i++ {
			got = append(got, row{t: int64(rec.Column(0).(interface{ Value(int) arrow.Timestamp }).Value(i)),
				meta: rec.Column(1).(interface{ Value(int) string }).Value(i), vals: fmt.Sprintf("v=%d ", rec.Column(2).(interface{ Value(int) int64 }).Value(i))})
		}
		switch step % 3 {
		case 0:
			db.mu.Lock()
			for _, s := range db.coll.byName["m"].series.byOrd {
				for _, b := range s.buckets {
					db.seal(b)
				}
			}
			db.mu.Unlock()
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := db.MergeBuckets(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	if db.stats.merged.Load() == 0 {
		t.Fatal("no bucket was merged during the read")
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %d rows, want %d:\n%v\nwant\n%v", len(got), len(want), got, want)
	}
}

// TestCountSuspendedExpiry checks Count while expiry is suspended by a
// measurement before 1970 (nothing counts as expired: the catalog's count
// is exact) and once it is deleted (expired rows are not counted, and the
// catalog's count, which holds them, is not used).
func TestCountSuspendedExpiry(t *testing.T) {
	clock := newTestClock(t0)
	db := openTTL(t, t.TempDir(), clock, int64p(3600))
	defer db.Close()
	insertMinutes(t, db, t0.Add(-3*time.Hour), 180, "a", "b") // the first two hours have expired
	insertMeasurements(t, db, "s", []model.Measurement{{Time: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), Meta: "old",
		Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}})
	before := db.stats.catalogCounts.Load()
	if n, err := db.Count(ctx, "s", nil, CountOptions{}); err != nil || n != 361 || db.stats.catalogCounts.Load() != before+1 {
		t.Fatalf("count while expiry is suspended: %d, %v, from the catalog %v; want 361 from it", n, err, db.stats.catalogCounts.Load() != before)
	}
	if _, err := db.Delete(ctx, "s", mustFilter(t, `{"sensor": "old"}`), DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	before = db.stats.catalogCounts.Load()
	if n, err := db.Count(ctx, "s", nil, CountOptions{}); err != nil || n != 120 || db.stats.catalogCounts.Load() != before {
		t.Fatalf("count with expiry on: %d, %v, from the catalog %v; want 120 by reading", n, err, db.stats.catalogCounts.Load() != before)
	}
	if n := len(findRows(t, db, "s", FindOptions{})); n != 120 {
		t.Fatalf("find with expiry on: %d rows, want 120", n)
	}
}
