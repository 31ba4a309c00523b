package timeseries

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/hourglassdb/hourglass/mongoerr"
)

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
// series) needs 8 MiB (1.6 MiB): a find by series with a limit and
// without, and an aggregate, over series stored and in memory.
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
	if _, err := db.Find(ctx, "iot", FindOptions{Sort: SortAscending, Limit: 1}); mongoerr.CodeOf(err) != mongoerr.QueryExceededMemoryLimit {
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
			for _, s := range db.collections["m"].series {
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
