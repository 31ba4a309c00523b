package timeseries

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// TestGroupBatchMarks checks that groupBatch finds a series held again
// through its mark only when the mark names a group of that series: a
// mark left by another insert, naming a group of this batch that holds
// another series, makes a group of the series' own.
func TestGroupBatchMarks(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	ts := model.TimeSeriesOptions{TimeField: "t", MetaField: "s"}
	mustCreate(t, db, "c", ts)
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	m := func(s string, i int) model.Measurement {
		return model.Measurement{Time: t0 + int64(i), Meta: sensor(s), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}}
	}
	if _, err := db.Insert(ctx, "c", Batch{Measurements: []model.Measurement{m("a", 0), m("b", 0)}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := db.lookup("c")
	if err != nil {
		t.Fatal(err)
	}
	key := func(s string) string { k, _ := model.CanonicalMeta(sensor(s)); return k }
	a, b := c.series.get(key("a")), c.series.get(key("b"))
	a.group.Store(1) // as if another insert had given a its group 0
	sc := new(insertScratch)
	sc.index = map[string]int{}
	batch := []model.Measurement{m("b", 1), m("a", 2), m("b", 3), m("new", 4), m("a", 5), m("new", 6)}
	groups, gidx, counts, res := db.groupBatch(sc, c, &ts, batch, InsertOptions{})
	if res.Inserted != 6 || len(res.Errors) != 0 || len(groups) != 3 {
		t.Fatalf("%d inserted, errors %v, %d groups", res.Inserted, res.Errors, len(groups))
	}
	if groups[0].s != b || groups[1].s != a || groups[2].s != nil || groups[2].metaKey != key("new") {
		t.Fatalf("groups %+v", groups)
	}
	if want := []int32{0, 1, 0, 2, 1, 2}; fmt.Sprint(gidx) != fmt.Sprint(want) || fmt.Sprint(counts) != "[2 2 2]" {
		t.Fatalf("rows' groups %v (want %v), counts %v", gidx, want, counts)
	}
}

// TestDuplicateGroups: a series another insert took the mark of in the
// middle of a batch gets a second group, merged into its first before the
// insert goes on; its rows are all stored once, in the log too (the
// collection is read again after a crash).
func TestDuplicateGroups(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	mustCreate(t, db, "c", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	m := func(s string, i int) model.Measurement {
		return model.Measurement{Time: t0 + int64(i)*int64(time.Second), Meta: sensor(s), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}}
	}
	if _, err := db.Insert(ctx, "c", Batch{Measurements: []model.Measurement{m("a", 0), m("b", 1)}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	dups := 0
	db.hooks.grouped = func(c *collection, i int) {
		// Another insert's marks: every series' after each row.
		for _, s := range c.series.byOrd {
			s.group.Store(0)
		}
		dups++
	}
	// Out of order, so that the log's record and the buckets take each
	// group's rows sorted apart.
	batch := []model.Measurement{m("a", 5), m("b", 6), m("a", 3), m("b", 2), m("a", 7), m("c", 9), m("c", 8)}
	if _, err := db.Insert(ctx, "c", Batch{Measurements: batch}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if dups != len(batch) {
		t.Fatalf("the hook ran %d times", dups)
	}
	c, err := db.lookup("c")
	if err != nil {
		t.Fatal(err)
	}
	sc := &insertScratch{index: map[string]int{}}
	groups, gidx, counts, _ := db.groupBatch(sc, c, c.opts.TimeSeries, batch, InsertOptions{})
	if len(groups) != 3 || fmt.Sprint(gidx) != "[0 1 0 1 0 2 2]" || fmt.Sprint(counts) != "[3 2 2]" {
		t.Fatalf("%d groups, rows' groups %v, counts %v; want a group a series", len(groups), gidx, counts)
	}
	db.hooks.grouped = nil
	want := "[" + t0s(t0, 0, "a") + " " + t0s(t0, 3, "a") + " " + t0s(t0, 5, "a") + " " + t0s(t0, 7, "a") + " " +
		t0s(t0, 1, "b") + " " + t0s(t0, 2, "b") + " " + t0s(t0, 6, "b") + " " + t0s(t0, 8, "c") + " " + t0s(t0, 9, "c") + "]"
	sorted := func(db *DB) string {
		rows := findRows(t, db, "c", FindOptions{})
		slices.SortFunc(rows, func(x, y row) int { return cmp.Or(strings.Compare(x.meta, y.meta), cmp.Compare(x.t, y.t)) })
		return fmt.Sprint(rows)
	}
	if got := sorted(db); got != want {
		t.Fatalf("stored\n%s\nwant\n%s", got, want)
	}
	crash(db)
	db = openTest(t, dir, nil)
	defer db.Close()
	if got := sorted(db); got != want {
		t.Fatalf("replayed\n%s\nwant\n%s", got, want)
	}
}

// TestDuplicateGroupsKeepBatchOrder: a series whose mark other inserts
// moved back to its first group after it got a second keeps its rows of
// one time in the order of the batch.
func TestDuplicateGroupsKeepBatchOrder(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "c", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	m := func(s string, i, v int) model.Measurement {
		return model.Measurement{Time: t0 + int64(i)*int64(time.Second), Meta: sensor(s), Fields: []model.Field{{Name: "v", Value: model.Int(int64(v))}}}
	}
	if _, err := db.Insert(ctx, "c", Batch{Measurements: []model.Measurement{m("a", 0, 0), m("x", 0, 0)}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	c, _ := db.lookup("c")
	key := func(s string) string { k, _ := model.CanonicalMeta(sensor(s)); return k }
	a := c.series.get(key("a"))
	db.hooks.grouped = func(c *collection, i int) {
		switch i {
		case 1:
			a.group.Store(2) // another insert's group 1 (here x's)
		case 3:
			a.group.Store(1) // another insert's group 0 (here a's first)
		}
	}
	batch := []model.Measurement{m("a", 9, 90), m("x", 1, 1), m("a", 5, 51), m("x", 2, 2), m("a", 5, 52)}
	if _, err := db.Insert(ctx, "c", Batch{Measurements: batch}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	db.hooks.grouped = nil
	var at5 []string
	for _, r := range findRows(t, db, "c", FindOptions{}) {
		if r.meta == key("a") && r.t == t0+5*int64(time.Second) {
			at5 = append(at5, r.vals)
		}
	}
	if got := fmt.Sprint(at5); got != "[v=51  v=52 ]" {
		t.Fatalf("a's rows at t0+5s in stored order %s, want the batch's [v=51 v=52]", got)
	}
}

// t0s is the row of sensor s at t0 + i seconds holding v=i, as findRows
// prints it.
func t0s(t0 int64, i int, s string) string {
	k, _ := model.CanonicalMeta(sensor(s))
	return row{t: t0 + int64(i)*int64(time.Second), meta: k, vals: fmt.Sprintf("v=%d ", i)}.String()
}

// TestConcurrentInsertsShareSeries inserts, from several writers at once,
// batches that each hold every series of a collection several times
// (apart, as a fleet's batches do), where writers may move each other's
// marks (groupBatch; how often depends on the scheduler, and
// TestDuplicateGroups forces it); each series then holds every row once,
// in the log too: after a crash the replayed collection holds the same.
func TestConcurrentInsertsShareSeries(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	mustCreate(t, db, "c", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	const writers, batches, sensors, perBatch = 4, 40, 50, 4
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for bi := range batches {
				var ms []model.Measurement
				for r := range perBatch {
					for s := range sensors {
						i := (bi*perBatch+r)*writers + w
						ms = append(ms, model.Measurement{Time: t0 + int64(i)*int64(time.Second), Meta: sensor(fmt.Sprint(s)),
							Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
					}
				}
				if _, err := db.Insert(ctx, "c", Batch{Measurements: ms}, InsertOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	check := func(db *DB, when string) {
		t.Helper()
		rows := findRows(t, db, "c", FindOptions{})
		if len(rows) != writers*batches*sensors*perBatch {
			t.Fatalf("%s: %d rows, want %d", when, len(rows), writers*batches*sensors*perBatch)
		}
		seen := map[string]bool{}
		for _, r := range rows {
			k := fmt.Sprint(r.meta, r.t)
			if seen[k] {
				t.Fatalf("%s: row %s twice", when, r)
			}
			seen[k] = true
			if i := (r.t - t0) / int64(time.Second); r.vals != fmt.Sprintf("v=%d ", i) {
				t.Fatalf("%s: row %s holds the value of another", when, r)
			}
		}
	}
	check(db, "written")
	crash(db)
	db = openTest(t, dir, nil)
	defer db.Close()
	check(db, "replayed")
}

// BenchmarkInsertFleetBatch inserts batches of 5,000 rows, each of another
// of 10,000 sensors (given as MetaKeys, as line protocol and remote write
// give them), with no log (ExternalLog): grouping and applying alone.
// Reports ns a row.
func BenchmarkInsertFleetBatch(b *testing.B) {
	for _, slots := range []bool{false, true} {
		b.Run(fmt.Sprintf("slots=%v", slots), func(b *testing.B) { benchmarkInsertFleetBatch(b, slots) })
	}
}

// benchmarkInsertFleetBatch: with slots, each sensor's measurements carry
// a series slot, as those of the line-protocol and remote-write decoders'
// caches do.
func benchmarkInsertFleetBatch(b *testing.B, withSlots bool) {
	const sensors, batchRows = 10000, 5000
	db := openTest(b, b.TempDir(), func(o *Options) { o.ExternalLog = true })
	defer db.Close()
	mustCreate(b, db, "c", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
	metas := make([]model.MetaKey, sensors)
	slots := make([]*model.SeriesSlot, sensors)
	for i := range metas {
		k, _ := model.CanonicalMeta(map[string]any{"site": "north-east-7", "sensor": fmt.Sprintf("sensor-%05d", i), "kind": "temperature"})
		metas[i] = model.MetaKey(k)
		if withSlots {
			slots[i] = new(model.SeriesSlot)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	ms := make([]model.Measurement, batchRows)
	row := 0
	fill := func() {
		for i := range ms {
			s := row % sensors
			ms[i] = model.Measurement{Time: t0 + int64(row/sensors)*int64(10*time.Second) + int64(s), Meta: metas[s],
				Fields: []model.Field{{Name: "v", Value: model.Float(float64(row % 1000))}}, Slot: slots[s]}
			row++
		}
	}
	for range 2 * sensors / batchRows { // every series made
		fill()
		if _, err := db.Insert(ctx, "c", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		fill()
		b.StartTimer()
		if _, err := db.Insert(ctx, "c", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchRows), "ns/row")
}

// TestSeriesSlot: an insert keeps in a measurement's slot the series it
// found for the key, and a later insert takes the series from there; a
// slot holding another key's series, or the same key's series of another
// collection, is not taken.
func TestSeriesSlot(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	for _, name := range []string{"c", "d"} {
		mustCreate(t, db, name, model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	key := func(s string) model.MetaKey {
		k, err := model.CanonicalMeta(sensor(s))
		if err != nil {
			t.Fatal(err)
		}
		return model.MetaKey(k)
	}
	slotA, slotB := new(model.SeriesSlot), new(model.SeriesSlot)
	insert := func(coll, s string, slot *model.SeriesSlot, i int) {
		t.Helper()
		m := model.Measurement{Time: t0 + int64(i)*int64(time.Second), Meta: key(s), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}, Slot: slot}
		if _, err := db.Insert(ctx, coll, Batch{Measurements: []model.Measurement{m}}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// New series: the slot is filled once the series exists.
	insert("c", "a", slotA, 0)
	insert("c", "b", slotB, 1)
	insert("c", "a", slotA, 2)
	insert("c", "b", slotB, 3)
	c, err := db.lookup("c")
	if err != nil {
		t.Fatal(err)
	}
	sa := c.series.get(string(key("a")))
	if v := slotA.Load(); v == 0 || c.byID[uint32(v)-1] != sa {
		t.Fatalf("slot of a holds %#x; want the place of a's series", v)
	}
	// A slot naming b's series, given with a's key; then a slot naming
	// a's series of collection c, given to collection d, where another
	// series has a's place (the key refuses both: the collection's id in
	// a slot only spares the comparison).
	insert("c", "a", slotB, 4)
	insert("d", "b", nil, 6)
	insert("d", "a", slotA, 5)
	want := "[" + t0s(t0, 0, "a") + " " + t0s(t0, 2, "a") + " " + t0s(t0, 4, "a") + " " +
		t0s(t0, 1, "b") + " " + t0s(t0, 3, "b") + "]"
	sorted := func(coll string) string {
		rows := findRows(t, db, coll, FindOptions{})
		slices.SortFunc(rows, func(x, y row) int { return cmp.Or(strings.Compare(x.meta, y.meta), cmp.Compare(x.t, y.t)) })
		return fmt.Sprint(rows)
	}
	if got := sorted("c"); got != want {
		t.Fatalf("c holds\n%s\nwant\n%s", got, want)
	}
	if got, want := sorted("d"), "["+t0s(t0, 5, "a")+" "+t0s(t0, 6, "b")+"]"; got != want {
		t.Fatalf("d holds\n%s\nwant\n%s", got, want)
	}
}
