package timeseries

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/ttl"
)

// loadBatches inserts batches into a fresh collection (granularity
// seconds), then one live measurement a day after the newest (which seals
// the series' open buckets, as live data does after a backfill), flushes
// and returns the store, open.
func loadBatches(t *testing.T, batches [][]model.Measurement, live model.Measurement) *DB {
	t.Helper()
	db := openTest(t, t.TempDir(), nil)
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "meta", Granularity: "seconds"})
	for _, b := range append(batches, []model.Measurement{live}) {
		res, err := db.Insert(ctx, "m", Batch{Measurements: b}, InsertOptions{})
		if err != nil || res.Inserted != len(b) {
			t.Fatalf("insert: %+v %v", res, err)
		}
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestMergeBackfill sends issue 20's backfill (5,000 measurements of one
// sensor in ten batches of 500, newest batch first, a checkpoint after
// each): the merge pass leaves the buckets an ascending load makes, and
// has nothing to read when the batches come in time order.
func TestMergeBackfill(t *testing.T) {
	ms := oooSeries(5000)
	live := ms[len(ms)-1]
	live.Time += int64(24 * time.Hour)
	live.Fields = []model.Field{{Name: "temp", Value: model.Float(20)}, {Name: "seq", Value: model.Int(5000)}}

	var asc [][]model.Measurement
	for i := 0; i < len(ms); i += 500 {
		asc = append(asc, ms[i:i+500])
	}
	ref := loadBatches(t, asc, live)
	defer ref.Close()
	if n := ref.stats.mergeReads.Load(); n != 0 {
		t.Errorf("ascending batches: the merge pass read %d series, want none", n)
	}
	want, err := ref.Describe(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	db := loadBatches(t, oooOrders(ms)["backfill"], live)
	defer db.Close()
	got, err := db.Describe(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ascending: %d buckets, %d bytes; backfill merged: %d buckets, %d bytes (%d merged away)",
		want.Buckets, want.StorageBytes, got.Buckets, got.StorageBytes, db.stats.merged.Load())
	if want.Buckets != 15 { // 14 for the 5,000, one for the live measurement
		t.Fatalf("ascending load: %d buckets, want 15", want.Buckets)
	}
	if got.Buckets != want.Buckets || got.Count != want.Count || float64(got.StorageBytes) > 1.1*float64(want.StorageBytes) {
		t.Errorf("backfill: %d buckets, %d rows, %d bytes; ascending: %d, %d, %d", got.Buckets, got.Count,
			got.StorageBytes, want.Buckets, want.Count, want.StorageBytes)
	}
	if n := checkBuckets(t, db, "m"); int64(n) != got.Buckets {
		t.Errorf("%d buckets stored and in memory, the catalog says %d", n, got.Buckets)
	}
	a := findRows(t, ref, "m", FindOptions{})
	b := findRows(t, db, "m", FindOptions{})
	if !slices.Equal(a, b) {
		t.Errorf("backfill reads %d rows, ascending %d, or they differ", len(b), len(a))
	}
}

// TestMergeProperty inserts random series in random batch orders and
// splits, with checkpoints and merge passes in between, and checks that
// every measurement is read once, counts are exact, buckets keep the
// rollover rules and their control max (the TTL bound) is their newest
// row, before and after a reopen, and that a TTL pass removes exactly the
// buckets whose newest row expired.
func TestMergeProperty(t *testing.T) {
	rounds := 30
	if testing.Short() {
		rounds = 8
	}
	var merged int64
	defer func() {
		t.Logf("%d buckets merged away in %d rounds", merged, rounds)
		if merged == 0 && !t.Failed() {
			t.Error("no round merged a bucket")
		}
	}()
	for round := 0; round < rounds; round++ {
		seed := int64(round)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			var ms []model.Measurement
			for si, n := range []int{rng.Intn(3000), rng.Intn(400), 1 + rng.Intn(20)} {
				meta := fmt.Sprintf("s%d", si)
				step := int64(1+rng.Intn(30)) * 1e9
				bigEvery := 1 + rng.Intn(40)
				for i := 0; i < n; i++ {
					fs := []model.Field{{Name: "seq", Value: model.Int(int64(si*10000 + i))}, {Name: "v", Value: model.Float(rng.Float64())}}
					if i%bigEvery == 0 {
						fs = append(fs, model.Field{Name: "note", Value: model.String(fmt.Sprintf("%0*d", rng.Intn(3000), i))})
					}
					if rng.Intn(50) == 0 {
						fs[1] = model.Field{Name: "v", Value: model.String("text")} // a type clash within the column
					}
					tm := base + int64(i)*step + rng.Int63n(step)
					if rng.Intn(20) == 0 && i > 0 {
						tm = ms[len(ms)-1].Time // the same time twice
					}
					ms = append(ms, model.Measurement{Time: tm, Meta: meta, Fields: fs})
				}
			}
			want := len(ms)
			// Batches of consecutive rows, sent newest batch first,
			// shuffled, or ascending with late rows moved to later
			// batches.
			var batches [][]model.Measurement
			for i := 0; i < len(ms); {
				j := min(len(ms), i+1+rng.Intn(400))
				batches = append(batches, ms[i:j])
				i = j
			}
			switch rng.Intn(3) {
			case 0:
				slices.Reverse(batches)
			case 1:
				rng.Shuffle(len(batches), func(i, j int) { batches[i], batches[j] = batches[j], batches[i] })
			default:
				var late []model.Measurement
				for bi := range batches {
					var kept []model.Measurement
					for _, m := range batches[bi] {
						if rng.Intn(10) == 0 {
							late = append(late, m)
						} else {
							kept = append(kept, m)
						}
					}
					batches[bi] = kept
				}
				batches = append(batches, late)
			}
			// Some rounds commit a merge batch per series, and some hold
			// so few marks that most are dropped: what is read stays the
			// same.
			defer func(chunk, marks int) { mergeChunkBytes, maxMarks = chunk, marks }(mergeChunkBytes, maxMarks)
			switch round % 3 {
			case 1:
				mergeChunkBytes = 1
			case 2:
				maxMarks = 1 + rng.Intn(3)
			}
			const ttlSecs = 30 * 24 * 3600
			clock := newTestClock(time.Unix(0, base))
			dir := t.TempDir()
			opts := func(o *Options) { o.Now = clock.Now; o.MemoryBudget = 1 << 20 }
			db := openTest(t, dir, opts)
			if _, err := db.CreateCollection(ctx, "m", CollectionOptions{ExpireAfterSeconds: int64p(ttlSecs),
				TimeSeries: &model.TimeSeriesOptions{TimeField: "ts", MetaField: "s", Granularity: "seconds"}}); err != nil {
				t.Fatal(err)
			}
			for _, b := range batches {
				if len(b) == 0 {
					continue
				}
				res, err := db.Insert(ctx, "m", Batch{Measurements: b}, InsertOptions{})
				if err != nil || res.Inserted != len(b) {
					t.Fatalf("insert: %+v %v", res, err)
				}
				switch rng.Intn(4) {
				case 0:
					if err := db.Checkpoint(); err != nil {
						t.Fatal(err)
					}
				case 1:
					if err := db.Checkpoint(); err != nil {
						t.Fatal(err)
					}
					if err := db.MergeBuckets(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			checkMerged(t, db, ms, want)
			merged += db.stats.merged.Load()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openTest(t, dir, opts)
			defer db.Close()
			checkMerged(t, db, ms, want)

			// Expire at a random row's time: a stored bucket goes when
			// its newest row is older than the cutoff, and only then.
			times := make([]int64, len(ms))
			for i := range ms {
				times[i] = ms[i].Time
			}
			slices.Sort(times)
			cutoff := times[rng.Intn(len(times))]
			clock.Set(time.Unix(0, cutoff).Add(ttlSecs * time.Second))
			targets, err := db.Targets(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, tg := range targets {
				for {
					b, err := db.Expire(ctx, tg, clock.Now(), ttl.Budget{Docs: 1000})
					if err != nil {
						t.Fatal(err)
					}
					if !b.More {
						break
					}
				}
			}
			kept := 0
			for _, tm := range times {
				if tm >= cutoff {
					kept++
				}
			}
			stored := 0
			for _, sb := range storedBuckets(t, db) {
				if sb.max < cutoff {
					t.Errorf("stored bucket %d (newest row %d) outlived the cutoff %d", sb.id, sb.max, cutoff)
				}
				for _, tm := range sb.times {
					if tm >= cutoff {
						stored++
					}
				}
			}
			inMem := 0
			db.mu.RLock()
			for _, s := range db.coll.byName["m"].series.byOrd {
				for _, b := range s.buckets {
					for _, tm := range b.capture().cols.Times {
						if tm >= cutoff {
							inMem++
						}
					}
				}
			}
			db.mu.RUnlock()
			if stored+inMem != kept {
				t.Errorf("after expiry at %d: %d rows at or after it stored and %d in memory, want %d", cutoff, stored, inMem, kept)
			}
		})
	}
}

// checkMerged checks the rules, counts and reads of collection m against
// the measurements ms.
func checkMerged(t *testing.T, db *DB, ms []model.Measurement, want int) {
	t.Helper()
	n := checkBuckets(t, db, "m")
	info, err := db.Describe(ctx, "m")
	if err != nil || info.Count != int64(want) || info.Buckets != int64(n) {
		t.Fatalf("count %d, want %d; %d buckets, %d there (%v)", info.Count, want, info.Buckets, n, err)
	}
	for _, sb := range storedBuckets(t, db) {
		if sb.max != slices.Max(sb.times) || sb.min != slices.Min(sb.times) {
			t.Errorf("stored bucket %d: control %d..%d, rows %d..%d", sb.id, sb.min, sb.max, slices.Min(sb.times), slices.Max(sb.times))
		}
	}
	wantRows := map[string]int{}
	for _, m := range ms {
		seq := m.Fields[0].Value.I
		wantRows[fmt.Sprintf("%d %q seq=%d", m.Time, m.Meta, seq)]++
	}
	rows := findRows(t, db, "m", FindOptions{Fields: []string{"seq"}})
	for _, r := range rows {
		k := fmt.Sprintf("%d %s %s", r.t, r.meta, r.vals[:len(r.vals)-1])
		if wantRows[k] == 0 {
			t.Fatalf("%s read twice or never written", k)
		}
		wantRows[k]--
	}
	if len(rows) != want {
		t.Fatalf("%d rows read, want %d", len(rows), want)
	}
}

type storedInfo struct {
	id       uint64
	min, max int64 // control block
	times    []int64
}

// storedBuckets decodes the times of collection m's sealed buckets in
// Pebble.
func storedBuckets(t *testing.T, db *DB) []storedInfo {
	t.Helper()
	db.mu.RLock()
	c := db.coll.byName["m"]
	id, names := c.id, c.names
	db.mu.RUnlock()
	p := collPrefix(spaceBucket, id)
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []storedInfo
	var r bucket.Reader
	for it.First(); it.Valid(); it.Next() {
		k, err := parseBucketKey(it.Key())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.ResetNames(it.Value(), names); err != nil {
			t.Fatal(err)
		}
		times, err := r.Times(nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, storedInfo{id: k.id, min: r.MinTime(), max: r.MaxTime(), times: times})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// BenchmarkMergeIdle times a merge pass with nothing marked, what ordered
// ingest pays after each checkpoint:
//
//	go test ./timeseries -run '^$' -bench MergeIdle
func BenchmarkMergeIdle(b *testing.B) {
	db := openTest(b, b.TempDir(), nil)
	defer db.Close()
	mustCreate(b, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "meta", Granularity: "seconds"})
	if _, err := db.Insert(ctx, "m", Batch{Measurements: oooSeries(5000)}, InsertOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := db.MergeBuckets(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if n := db.stats.mergeReads.Load(); n != 0 {
		b.Fatalf("%d series read", n)
	}
}

// TestFoldMarks checks that folding merge marks keeps every marked time
// covered by a range of its series, at most maxMergeMarks a series, in
// series and time order.
func TestFoldMarks(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 200; round++ {
		var in []mergeMark
		for i := rng.Intn(300); i > 0; i-- {
			lo := rng.Int63n(1000)
			in = append(in, mergeMark{uint64(rng.Intn(5)), lo, lo + rng.Int63n(20), 0})
		}
		out := foldMarks(slices.Clone(in))
		per := map[uint64]int{}
		for i, m := range out {
			per[m.series]++
			if m.lo > m.hi {
				t.Fatalf("range %v upside down", m)
			}
			if i > 0 && (out[i-1].series > m.series || out[i-1].series == m.series && out[i-1].hi >= m.lo) {
				t.Fatalf("out of order or overlapping: %v then %v", out[i-1], m)
			}
		}
		for id, n := range per {
			if n > maxMergeMarks {
				t.Fatalf("series %d keeps %d ranges", id, n)
			}
		}
		for _, m := range in {
			if !slices.ContainsFunc(out, func(o mergeMark) bool { return o.series == m.series && o.lo <= m.lo && m.hi <= o.hi }) {
				t.Fatalf("mark %v not covered by %v", m, out)
			}
		}
	}
}

// TestMergeChunks backfills several sensors newest batch first and merges
// them with a batch committed per series (mergeChunkBytes 1): the buckets
// and reads are those of one big batch, and the catalog's bucket count is
// the buckets there are.
func TestMergeChunks(t *testing.T) {
	load := func(chunk int) *DB {
		defer func(c int) { mergeChunkBytes = c }(mergeChunkBytes)
		mergeChunkBytes = chunk
		var batches [][]model.Measurement
		for _, b := range oooOrders(oooSeries(2000))["backfill"] {
			var batch []model.Measurement
			for s := 0; s < 8; s++ {
				for _, m := range b {
					m.Meta = map[string]any{"sensor": fmt.Sprint("s", s)}
					batch = append(batch, m)
				}
			}
			batches = append(batches, batch)
		}
		live := model.Measurement{Time: int64(1_800_000_000e9), Meta: map[string]any{"sensor": "s0"}, Fields: []model.Field{{Name: "seq", Value: model.Int(0)}}}
		return loadBatches(t, batches, live)
	}
	ref := load(64 << 20)
	defer ref.Close()
	db := load(1)
	defer db.Close()
	want, err := ref.Describe(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Describe(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one batch: %d buckets; a batch a series: %d buckets (%d merged away)", want.Buckets, got.Buckets, db.stats.merged.Load())
	if db.stats.merged.Load() == 0 || got.Buckets != want.Buckets || got.Count != want.Count {
		t.Errorf("a batch a series: %d buckets, %d rows, %d merged away; one batch: %d, %d", got.Buckets, got.Count,
			db.stats.merged.Load(), want.Buckets, want.Count)
	}
	if n := checkBuckets(t, db, "m"); int64(n) != got.Buckets {
		t.Errorf("%d buckets stored and in memory, the catalog says %d", n, got.Buckets)
	}
	if a, b := findRows(t, ref, "m", FindOptions{}), findRows(t, db, "m", FindOptions{}); !slices.Equal(a, b) {
		t.Errorf("a batch a series reads %d rows, one batch %d, or they differ", len(b), len(a))
	}
}

// TestMergeWaitsForRipeMarks checks that a background merge pass leaves
// the marks of ranges the series may still write into (within two spans of
// the newest measurement) until they are mergeWait old, then merges them,
// and that reads are the same all along.
func TestMergeWaitsForRipeMarks(t *testing.T) {
	ms := oooSeries(5000)
	clock := newTestClock(time.Now())
	db := openTest(t, t.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "meta", Granularity: "seconds"})
	for _, b := range oooOrders(ms)["backfill"] {
		if _, err := db.Insert(ctx, "m", Batch{Measurements: b}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	want := findRows(t, db, "m", FindOptions{})
	marks := func() (n, young int) {
		db.mu.RLock()
		defer db.mu.RUnlock()
		c := db.coll.byName["m"]
		for _, m := range c.mergeMarks {
			if satAdd(m.hi, 2*c.opts.TimeSeries.Span()) >= c.newest {
				young++
			}
		}
		return len(c.mergeMarks), young
	}
	n, young := marks()
	if young == 0 || young == n {
		t.Fatalf("%d marks, %d of them young; the load should leave both kinds", n, young)
	}
	for _, wait := range []time.Duration{0, mergeWait / 2, mergeWait / 2} {
		clock.Advance(wait)
		if err := db.mergeBuckets(ctx, nil, false); err != nil {
			t.Fatal(err)
		}
		left, _ := marks()
		switch done := clock.Now().Sub(db.coll.byName["m"].created) >= mergeWait; {
		case !done && left != young:
			t.Fatalf("before mergeWait: %d marks left, want the %d young ones", left, young)
		case done && left != 0:
			t.Fatalf("after mergeWait: %d marks left, want none", left)
		}
		if got := findRows(t, db, "m", FindOptions{}); !slices.Equal(got, want) {
			t.Fatalf("after a background pass: reads differ")
		}
	}
	if left, _ := marks(); left != 0 {
		t.Fatalf("%d marks left after mergeWait", left)
	}
	info, err := db.Describe(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if n := checkBuckets(t, db, "m"); int64(n) != info.Buckets {
		t.Errorf("%d buckets stored and in memory, the catalog says %d", n, info.Buckets)
	}
	t.Logf("%d marks, %d young; %d buckets merged away", n, young, db.stats.merged.Load())
}

// TestMergeMarksFull checks that full marks fold to one range a series,
// that a mark of a series there then widens its range, that a mark of
// another series is dropped, and that adding stays cheap when full.
func TestMergeMarksFull(t *testing.T) {
	defer func(n int) { maxMarks = n }(maxMarks)
	maxMarks = 1000
	c := &collection{}
	for i := 0; i < maxMarks; i++ {
		if !c.addMergeMark(mergeMark{uint64(i % 500), int64(i), int64(i), uint32(i)}) {
			t.Fatalf("mark %d dropped before the marks were full", i)
		}
	}
	// Full: folded to 500 ranges, then room again.
	if !c.addMergeMark(mergeMark{7, 5000, 5000, 9}) || len(c.mergeMarks) != 501 || c.marksSorted != 500 {
		t.Fatalf("after the fold: %d marks, %d sorted; want 501, 500", len(c.mergeMarks), c.marksSorted)
	}
	// Marks of new series fill the rest; the next add folds them all (a
	// thousand series: nothing to fold) and finds them full.
	for id := uint64(1000); len(c.mergeMarks) < maxMarks; id++ {
		c.addMergeMark(mergeMark{id, 1, 1, 1})
	}
	for id := uint64(2000); !c.marksFull && (len(c.mergeMarks) < maxMarks || c.marksSorted < len(c.mergeMarks)); id++ {
		c.addMergeMark(mergeMark{id, 1, 1, 1})
	}
	if !c.addMergeMark(mergeMark{3, -10, -10, 0}) {
		t.Fatal("a mark of a series already marked was dropped")
	}
	if c.addMergeMark(mergeMark{999_999, 0, 0, 0}) {
		t.Fatal("a mark of a new series was kept in full marks")
	}
	i := slices.IndexFunc(c.mergeMarks, func(m mergeMark) bool { return m.series == 3 })
	if m := c.mergeMarks[i]; m.lo != -10 || m.hi != 503 || m.at != 0 {
		t.Fatalf("series 3's range: %+v; want -10..503 marked at 0", m)
	}
	if n := testing.AllocsPerRun(1000, func() { c.addMergeMark(mergeMark{3, 0, 0, 0}) }); n != 0 {
		t.Fatalf("adding to full marks allocates %v times", n)
	}
}

// TestMergeMarksFoldOnce checks that marks of nearly as many series as
// marks fold once and then stay full, instead of folding again every few
// marks added (a million-series fleet sorted its marks that way), and that
// a merge pass taking the marks makes room again.
func TestMergeMarksFoldOnce(t *testing.T) {
	defer func(n int) { maxMarks = n }(maxMarks)
	maxMarks = 1000
	c := &collection{}
	for i := 0; i < maxMarks; i++ {
		c.addMergeMark(mergeMark{uint64(i % 990), int64(i), int64(i), 1}) // 990 series
	}
	// The fold frees 10 places: too few to take marks again.
	if c.addMergeMark(mergeMark{5000, 1, 1, 1}) || len(c.mergeMarks) != 990 || c.marksSorted != 990 {
		t.Fatalf("after folding to 990 of 1000: %d marks, %d sorted, a new series' mark kept; want it dropped", len(c.mergeMarks), c.marksSorted)
	}
	if !c.addMergeMark(mergeMark{4, -1, -1, 0}) {
		t.Fatal("a mark of a series already marked was dropped")
	}
	// A pass that finds no mark ripe (they all wait mergeWait) leaves
	// them full: a new series' mark is still dropped, not appended to be
	// sorted with the others again.
	if ripe := c.takeRipe(1, time.Unix(11, 0)); len(ripe) != 0 || len(c.mergeMarks) != 990 || c.marksSorted != 990 {
		t.Fatalf("a pass with nothing ripe took %d marks, left %d (%d sorted); want 0, 990, 990", len(ripe), len(c.mergeMarks), c.marksSorted)
	}
	if c.addMergeMark(mergeMark{5001, 1, 1, 1}) {
		t.Fatal("after a pass taking no mark, a new series' mark was kept: the marks were no longer full")
	}
	// A pass taking over half of them frees them.
	if ripe := c.takeRipe(1, time.Unix(1+int64(mergeWait/time.Second), 0)); len(ripe) != 990 || len(c.mergeMarks) != 0 {
		t.Fatalf("a pass after mergeWait took %d marks and left %d; want 990 and 0", len(ripe), len(c.mergeMarks))
	}
	if !c.addMergeMark(mergeMark{5000, 1, 1, 1}) {
		t.Fatal("a mark was dropped after the marks were taken")
	}
}

// TestTakeRipeBounds: takeRipe takes exactly the ripe marks, over adds,
// folds and passes, whether it reads the marks or passes over them by
// their bounds (marksAt, marksHi).
func TestTakeRipeBounds(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	defer func(n int) { maxMarks = n }(maxMarks)
	maxMarks = 64
	span := int64(time.Hour)
	for round := range 200 {
		c := &collection{newest: int64(rng.Intn(10)) * span}
		now := time.Unix(1_700_000_000, 0)
		var want []mergeMark // the marks kept, as a plain list
		for step := range 40 {
			if rng.Intn(3) > 0 {
				m := mergeMark{series: uint64(rng.Intn(20)), at: uint32(now.Unix()) - uint32(rng.Intn(200))}
				m.lo = int64(rng.Intn(10)) * span
				m.hi = m.lo + int64(rng.Intn(3))*span
				c.addMergeMark(m)
				continue
			}
			now = now.Add(time.Duration(rng.Intn(60)) * time.Second)
			c.newest += int64(rng.Intn(2)) * span
			// What a pass must take: every ripe mark held (after folds).
			want = want[:0]
			for _, m := range c.mergeMarks {
				if c.ripe(m, span, now) {
					want = append(want, m)
				}
			}
			got := c.takeRipe(span, now)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d step %d: took %v, want %v", round, step, got, want)
			}
			for _, m := range c.mergeMarks {
				if c.ripe(m, span, now) {
					t.Fatalf("round %d step %d: a ripe mark kept: %+v", round, step, m)
				}
				if m.at < c.marksAt || m.hi < c.marksHi {
					t.Fatalf("round %d step %d: mark %+v below the bounds %d %d", round, step, m, c.marksAt, c.marksHi)
				}
			}
		}
	}
}

// BenchmarkMergeWaiting times a background merge pass over a fleet's
// million marks, none ripe yet (they wait mergeWait): what follows every
// checkpoint of a load of a million sensors, with DB.mu held.
//
//	go test ./timeseries -run '^$' -bench MergeWaiting
func BenchmarkMergeWaiting(b *testing.B) {
	db := openTest(b, b.TempDir(), nil)
	defer db.Close()
	mustCreate(b, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "meta", Granularity: "seconds"})
	db.mu.Lock()
	c := db.coll.byName["m"]
	now := db.opts.Now()
	for i := range 1_000_000 {
		c.markMerge(uint64(i+1), 0, now)
	}
	db.mu.Unlock()
	b.ResetTimer()
	for range b.N {
		db.mergePending.Store(true)
		if err := db.mergeBuckets(ctx, db.stop, false); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if n := db.stats.mergeReads.Load(); n != 0 {
		b.Fatalf("%d series read", n)
	}
}
