package timeseries

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet/file"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"
	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/hourglassdb/hourglass/archive"
	"github.com/hourglassdb/hourglass/internal/s3test"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/ttl"
)

// openArchiveTest opens a store whose archive is the directory arch, and
// a collection "s" (meta "sensor", hourly buckets) with opts' TTL.
func openArchiveTest(t *testing.T, dir, arch string, clock *testClock, opts CollectionOptions) *DB {
	t.Helper()
	st, err := objstore.Open(ctx, "file://"+arch, objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db := openTest(t, dir, func(o *Options) { o.Now = clock.Now; o.Archive = st; o.CheckpointInterval = time.Minute })
	t.Cleanup(func() { db.Close() })
	opts.TimeSeries = &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor", Granularity: model.GranularitySeconds}
	if _, err := db.CreateCollection(ctx, "s", opts); err != nil {
		t.Fatal(err)
	}
	return db
}

// storeAll makes checkpoints write every bucket to Pebble: the first
// writes snapshots, the second, a checkpoint interval later, seals the
// idle buckets and writes them out.
func storeAll(t testing.TB, db *DB, clock *testClock) {
	t.Helper()
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(db.opts.CheckpointInterval + time.Second)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}

// parquetRows reads every archived file under arch and returns, per
// sensor, the times (ns) and values "v" in file order.
func parquetRows(t *testing.T, arch string) (times map[string][]int64, vals map[string][]int64, files int) {
	t.Helper()
	times, vals = map[string][]int64{}, map[string][]int64{}
	err := filepath.WalkDir(arch, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		files++
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		pr, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			return err
		}
		fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			return err
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			return err
		}
		defer tbl.Release()
		col := func(name string) any {
			idx := tbl.Schema().FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("%s: no column %q: %v", p, name, tbl.Schema())
			}
			return tbl.Column(idx[0]).Data().Chunk(0)
		}
		ts, ss, vs := col("t").(*array.Timestamp), col("sensor").(*array.String), col("v").(*array.Int64)
		for i := 0; i < int(tbl.NumRows()); i++ {
			s := ss.Value(i)
			times[s] = append(times[s], int64(ts.Value(i))*1000)
			vals[s] = append(vals[s], vs.Value(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return times, vals, files
}

// twoDaysToArchive opens a collection whose TTL (1 h) archives, with two
// sensors' minutes over two days (22:00 to 02:00, from on), stored, and
// ten fresh minutes of sensor a (from fresh on), at the clock's now, 26 h
// after t0.
func twoDaysToArchive(t *testing.T) (db *DB, arch string, clock *testClock, from, fresh time.Time) {
	t.Helper()
	clock = newTestClock(t0)
	arch = t.TempDir()
	db = openArchiveTest(t, t.TempDir(), arch, clock, CollectionOptions{ExpireAfterSeconds: int64p(3600), Archive: true})
	from = t0.Add(-2 * time.Hour)
	insertMinutes(t, db, from, 240, "a", "b")
	storeAll(t, db, clock)
	clock.Set(t0.Add(26 * time.Hour))
	fresh = clock.Now().Add(-10 * time.Minute)
	insertMinutes(t, db, fresh, 10, "a")
	return db, arch, clock, from, fresh
}

// Expired buckets of an archiving rule leave the store only as Parquet
// files holding exactly their rows, one file per day; the catalog records
// the files and counts them; later data stays.
func TestArchiveMovesExpiredData(t *testing.T) {
	db, arch, clock, from, _ := twoDaysToArchive(t)
	now := clock.Now()

	got := expireDone(t, db, now)
	if got.Docs != 480 {
		t.Fatalf("archived %d measurements, want 480", got.Docs)
	}
	if n := countRows(t, db, ""); n != 10 {
		t.Fatalf("%d measurements left, want the 10 fresh ones", n)
	}
	times, vals, files := parquetRows(t, arch)
	if files != 2 {
		t.Fatalf("%d files, want one per day (2)", files)
	}
	for _, s := range []string{"a", "b"} {
		if len(times[s]) != 240 {
			t.Fatalf("sensor %s: %d rows archived, want 240", s, len(times[s]))
		}
		// Files are walked in day order: rows come back in time order.
		for i := range times[s] {
			if want := from.Add(time.Duration(i) * time.Minute).UnixNano(); times[s][i] != want || vals[s][i] != int64(i) {
				t.Fatalf("sensor %s row %d: t=%d v=%d, want t=%d v=%d", s, i, times[s][i], vals[s][i], want, i)
			}
		}
	}
	info, err := db.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if a := info.Archived; a == nil || a.Files != 2 || a.Measurements != 480 || a.Bytes <= 0 {
		t.Fatalf("archive stats %+v", info.Archived)
	}
	recs, err := db.ArchivedFiles(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Date < recs[j].Date })
	if len(recs) != 2 || recs[0].Date != "2024-04-30" || recs[1].Date != "2024-05-01" || recs[0].Rows != 240 ||
		recs[0].MinT != from.UnixNano() || !strings.HasPrefix(recs[0].Key, "s/date=2024-04-30/") {
		t.Fatalf("file records %+v", recs)
	}
	for _, r := range recs {
		st, err := os.Stat(filepath.Join(arch, r.Key))
		if err != nil || st.Size() != r.Size {
			t.Fatalf("file %s: %v, size %d, recorded %d", r.Key, err, st.Size(), r.Size)
		}
	}
	// A second pass finds nothing more to move.
	if got := expireDone(t, db, now); got.Docs != 0 {
		t.Fatalf("second pass archived %d", got.Docs)
	}
	// The counts survive a restart.
	db.Close()
	db = openTest(t, db.opts.Dir, func(o *Options) { o.Now = clock.Now; o.Archive = db.opts.Archive })
	defer db.Close()
	if info, err := db.Describe(ctx, "s"); err != nil || info.Archived == nil || info.Archived.Measurements != 480 || info.Count != 10 {
		t.Fatalf("after restart: %+v %v", info, err)
	}
}

// A partial TTL index that archives moves its sensor's data; the
// collection's TTL, which does not, deletes the others'.
func TestArchivePerSensor(t *testing.T) {
	clock := newTestClock(t0)
	arch := t.TempDir()
	db := openArchiveTest(t, t.TempDir(), arch, clock, CollectionOptions{ExpireAfterSeconds: int64p(3600)})
	if _, _, err := db.CreateIndex(ctx, "s", IndexSpec{Name: "a_arch", Key: []IndexKey{{Field: "t", Direction: 1}},
		ExpireAfterSeconds: int64p(3600), PartialFilterExpression: map[string]any{"sensor": "a"}, Archive: true}); err != nil {
		t.Fatal(err)
	}
	insertMinutes(t, db, t0, 60, "a", "b")
	storeAll(t, db, clock)
	now := t0.Add(3 * time.Hour)
	clock.Set(now)
	if got := expireDone(t, db, now); got.Docs != 120 {
		t.Fatalf("expired %d, want 120", got.Docs)
	}
	times, _, _ := parquetRows(t, arch)
	if len(times["a"]) != 60 || len(times["b"]) != 0 {
		t.Fatalf("archived a=%d b=%d, want 60 and 0", len(times["a"]), len(times["b"]))
	}
}

// While the archive cannot be written nothing that archives is deleted,
// the TTL state says why, and a later pass, once it can, moves it.
func TestArchiveUnwritableKeepsData(t *testing.T) {
	clock := newTestClock(t0)
	arch := t.TempDir()
	db := openArchiveTest(t, t.TempDir(), arch, clock, CollectionOptions{ExpireAfterSeconds: int64p(3600), Archive: true})
	insertMinutes(t, db, t0, 60, "a")
	storeAll(t, db, clock)
	now := t0.Add(3 * time.Hour)
	clock.Set(now)
	// The archive directory becomes a file: every write fails.
	if err := os.RemoveAll(arch); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(arch, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := expireDone(t, db, now); got.Docs != 0 {
		t.Fatalf("expired %d with an unwritable archive", got.Docs)
	}
	st, err := db.TTLState(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Suspended || st.Reason == nil || !strings.Contains(*st.Reason, "archive") {
		t.Fatalf("TTL state %+v", st)
	}
	if info, _ := db.Describe(ctx, "s"); info.Count != 60 {
		t.Fatalf("%d measurements kept, want 60", info.Count)
	}
	// Writable again: the pass waits for its retry time, then moves it.
	if err := os.Remove(arch); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(arch, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := expireDone(t, db, now); got.Docs != 0 {
		t.Fatalf("a pass before the retry time moved %d", got.Docs)
	}
	clock.Advance(time.Minute)
	if got := expireDone(t, db, clock.Now()); got.Docs != 60 {
		t.Fatalf("after the store came back: %d archived, want 60", got.Docs)
	}
	if st, _ := db.TTLState(ctx, "s"); st.Suspended {
		t.Fatalf("still suspended: %v", *st.Reason)
	}
}

// The files of a pass cut off before its commit (an intent left in the
// catalog) are removed by the next pass, which archives the data again:
// no row is read back twice.
func TestArchiveIntentUndone(t *testing.T) {
	clock := newTestClock(t0)
	arch := t.TempDir()
	db := openArchiveTest(t, t.TempDir(), arch, clock, CollectionOptions{ExpireAfterSeconds: int64p(3600), Archive: true})
	insertMinutes(t, db, t0, 60, "a")
	storeAll(t, db, clock)
	// What a pass leaves when the process dies after its files are
	// written: the intent, and a file under its key (of a day the next
	// pass does not write, so that only the undo removes it).
	c, err := db.lookup("s")
	if err != nil {
		t.Fatal(err)
	}
	key := archiveFileKey(c, "2024-04-29", 1, []byte("partial"))
	if err := db.opts.Archive.Put(ctx, key, strings.NewReader("partial"), 7); err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Set(archiveKey(c.id, archiveIntent, 1), []byte(`["`+key+`"]`), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(3 * time.Hour)
	clock.Set(now)
	if got := expireDone(t, db, now); got.Docs != 60 {
		t.Fatalf("archived %d, want 60", got.Docs)
	}
	times, _, files := parquetRows(t, arch)
	if files != 1 || len(times["a"]) != 60 {
		t.Fatalf("%d files, %d rows: want 1 file of 60 rows", files, len(times["a"]))
	}
}

// Options that name archive without a TTL, or on a plain collection, are
// refused.
func TestArchiveRefusals(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}
	for _, o := range []CollectionOptions{{TimeSeries: ts, Archive: true}, {Archive: true, ExpireAfterSeconds: int64p(5)}} {
		if _, err := db.CreateCollection(ctx, "x", o); err == nil {
			t.Fatalf("created with %+v", o)
		}
	}
	mustCreate(t, db, "ts", *ts)
	if _, err := db.CollMod(ctx, "ts", CollModOptions{Archive: new(true)}); err == nil {
		t.Fatal("collMod archive without a TTL accepted")
	}
	if _, _, err := db.CreateIndex(ctx, "ts", IndexSpec{Name: "i", Key: []IndexKey{{Field: "t", Direction: 1}}, Archive: true}); err == nil {
		t.Fatal("archive on an index without a TTL accepted")
	}
}

// Finds and aggregates with Archive read archived and live data together:
// every measurement once, in time order, filters and projections applied
// to archived rows as to stored ones; without Archive, only live data.
func TestArchiveReadBack(t *testing.T) {
	db, arch, clock, from, fresh := twoDaysToArchive(t)
	now := clock.Now()
	if got := expireDone(t, db, now); got.Docs != 480 {
		t.Fatalf("archived %d", got.Docs)
	}
	// Sorted by time, every row of a: 240 archived, then 10 live.
	rows := findRows(t, db, "s", FindOptions{Archive: true, Order: SortAscending, Filter: mustFilter(t, `{"sensor": "a"}`)})
	if len(rows) != 250 {
		t.Fatalf("%d rows of a, want 250", len(rows))
	}
	for i, r := range rows {
		want := from.Add(time.Duration(i) * time.Minute)
		v := i
		if i >= 240 {
			want, v = fresh.Add(time.Duration(i-240)*time.Minute), i-240
		}
		if r.t != want.UnixNano() || r.meta != `"a"` || r.vals != fmt.Sprintf("v=%d ", v) {
			t.Fatalf("row %d: %v, want t=%d v=%d", i, r, want.UnixNano(), v)
		}
	}
	if n := len(findRows(t, db, "s", FindOptions{})); n != 10 {
		t.Fatalf("without archive: %d rows, want the 10 live", n)
	}
	// A time range inside one archived day, and a filter on the value.
	f := mustFilter(t, fmt.Sprintf(`{"t": {"$gte": {"$date": %q}, "$lt": {"$date": %q}}, "v": {"$gte": 100}}`,
		t0.Format(time.RFC3339), t0.Add(time.Hour).Format(time.RFC3339)))
	rows = findRows(t, db, "s", FindOptions{Archive: true, Filter: f})
	if len(rows) != 2*60 {
		t.Fatalf("a day's hour with v >= 100: %d rows, want 120", len(rows))
	}
	// Aggregates: a count and a sum per sensor over all time.
	rec, err := db.Aggregate(ctx, "s", AggregateOptions{Archive: true, WholeRange: true, Fields: []string{"v"}, Funcs: []AggFunc{AggCount, AggSum}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	got := map[string]string{}
	for i := 0; i < int(rec.NumRows()); i++ {
		got[rec.Column(1).(*array.String).Value(i)] = fmt.Sprintf("%v %v", rec.Column(2).(*array.Int64).Value(i), rec.Column(3).(*array.Float64).Value(i))
	}
	// a: 0..239 archived and 0..9 live; b: 0..239.
	if got[`"a"`] != "250 28725" || got[`"b"`] != "240 28680" || len(got) != 2 {
		t.Fatalf("aggregate %v", got)
	}
	// A damaged file is refused, naming it, not parsed.
	recs, err := db.ArchivedFiles(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(arch, recs[0].Key)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cur, err := db.Find(ctx, "s", FindOptions{Archive: true})
	if err == nil {
		cur.Close()
		t.Fatal("a damaged archive file was read")
	}
	if !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), recs[0].Key) {
		t.Fatalf("damaged file: %v", err)
	}
	// A file removed from the archive is skipped: its rows are gone.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if n := len(findRows(t, db, "s", FindOptions{Archive: true})); n != 490-int(recs[0].Rows) {
		t.Fatalf("with %s removed: %d rows, want %d", recs[0].Key, n, 490-recs[0].Rows)
	}
}

// dyingStore is a directory store that stops writing once its process
// is taken for dead: after a simulated power cut, a pass that goes on
// running must not reach the archive, as a dead process would not.
type dyingStore struct {
	objstore.Store
	dead atomic.Bool
}

var errDead = errors.New("the process is dead")

func (d *dyingStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if d.dead.Load() {
		return errDead
	}
	return d.Store.Put(ctx, key, body, size)
}

func (d *dyingStore) Delete(ctx context.Context, key string) error {
	if d.dead.Load() {
		return errDead
	}
	return d.Store.Delete(ctx, key)
}

// Power cuts at every step of archive passes (after the intent is
// durable, after the files are written, after the commit is applied but
// before it is durable, or none), on a file system that forgets what was
// not synced while the archive keeps every file: after each restart a read
// with the archive returns every acknowledged measurement exactly once,
// and once a pass completes, the archive directory holds each archived
// measurement exactly once, as a Parquet engine reads it.
func TestArchivePowerLoss(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("HOURGLASS_ARCHIVE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with HOURGLASS_ARCHIVE_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	fs := vfs.NewStrictMem()
	arch := t.TempDir()
	dir, err := objstore.Open(ctx, "file://"+arch, objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &dyingStore{Store: dir}
	clock := newTestClock(t0)
	open := func() *DB {
		db, err := Open(Options{Dir: "/data", FS: fs, Now: clock.Now, Archive: st, CheckpointInterval: time.Minute})
		if err != nil {
			t.Fatalf("seed %d: open: %v", seed, err)
		}
		return db
	}
	db := open()
	defer func() { db.Close() }()
	if _, err := db.CreateCollection(ctx, "s", CollectionOptions{ExpireAfterSeconds: int64p(3600), Archive: true,
		TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor", BucketMaxSpanSeconds: 3600, BucketRoundingSeconds: 3600}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	acked := map[int64]bool{}
	next := int64(0)
	check := func(what string) {
		t.Helper()
		seen := map[int64]int{}
		for _, r := range findRows(t, db, "s", FindOptions{Archive: true}) {
			var n int64
			if _, err := fmt.Sscanf(r.vals, "n=%d", &n); err != nil {
				t.Fatalf("seed %d, %s: row %v (%q)", seed, what, r, r.vals)
			}
			seen[n]++
		}
		for n := range acked {
			if seen[n] != 1 {
				t.Fatalf("seed %d, %s: measurement %d read %d times", seed, what, n, seen[n])
			}
		}
		if len(seen) != len(acked) {
			t.Fatalf("seed %d, %s: %d measurements read, %d acknowledged", seed, what, len(seen), len(acked))
		}
	}
	steps := []string{"", "intent", "files", "commit"}
	for round := 0; round < 24; round++ {
		// Rows of the last day, for a few sensors: the older expire.
		var ms []model.Measurement
		for range 1 + rng.IntN(40) {
			tm := clock.Now().Add(-time.Duration(rng.Int64N(int64(30 * time.Hour))))
			ms = append(ms, model.Measurement{Time: tm.UnixNano(), Meta: fmt.Sprintf("s%d", rng.IntN(4)),
				Fields: []model.Field{{Name: "n", Value: model.Int(next)}}})
			acked[next] = true
			next++
		}
		if res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Fatalf("insert: %v %v", err, res.Errors)
		}
		storeAll(t, db, clock)
		clock.Advance(time.Duration(rng.IntN(3)) * time.Hour)
		cut := steps[rng.IntN(len(steps))]
		db.hooks.archiveStep = func(step string) {
			if step == cut {
				fs.SetIgnoreSyncs(true)
				st.dead.Store(true)
			}
		}
		targets, err := db.Targets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range targets {
			db.Expire(ctx, tg, clock.Now(), ttl.Budget{Docs: int64(1 + rng.IntN(60))}) // a cut fails it
		}
		if st.dead.Load() {
			db.Close()
			fs.ResetToSyncedState()
			fs.SetIgnoreSyncs(false)
			st.dead.Store(false)
			db = open()
			check("after a power cut at " + cut)
		} else {
			db.hooks.archiveStep = nil
			check("after a pass")
		}
		// The retry after a failure waits.
		clock.Advance(archiveRetryMax)
	}
	// A complete pass removes what interrupted ones left: the directory
	// and the store together hold every measurement once.
	db.hooks.archiveStep = nil
	clock.Advance(48 * time.Hour)
	expireDone(t, db, clock.Now())
	check("at the end")
	live := len(findRows(t, db, "s", FindOptions{}))
	seen := map[int64]int{}
	err = filepath.WalkDir(arch, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		r, err := archive.NewReader(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for g := 0; g < r.NumRowGroups(); g++ {
			segs, _, err := r.ReadRowGroup(ctx, g, []string{"n"}, math.MinInt64, math.MaxInt64, nil)
			if err != nil {
				return err
			}
			for _, s := range segs {
				for _, v := range s.Cols.Fields[0].Ints {
					seen[v]++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for n, k := range seen {
		if k != 1 {
			t.Fatalf("seed %d: the directory holds measurement %d %d times", seed, n, k)
		}
	}
	if len(seen)+live != len(acked) || live != 0 {
		t.Fatalf("seed %d: %d in the directory, %d live, %d acknowledged", seed, len(seen), live, len(acked))
	}
}

// expireDone runs TTL batches of every rule, as the monitor does, until
// none has more to do, and sums them.
func expireDone(t *testing.T, db *DB, now time.Time) ttl.Batch {
	t.Helper()
	var sum ttl.Batch
	for range 1000 {
		b := expireAll(t, db, now)
		sum.Docs += b.Docs
		sum.Buckets += b.Buckets
		if b.Docs == 0 {
			return sum
		}
	}
	t.Fatal("TTL batches never ended")
	return sum
}

// An engine whose writes are logged elsewhere (a replica set member's)
// refuses rules that archive: rebuilt from that log, it would hold again
// what it archived.
func TestArchiveRefusedWithExternalLog(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.ExternalLog = true })
	defer db.Close()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}
	if _, err := db.CreateCollection(ctx, "x", CollectionOptions{TimeSeries: ts, ExpireAfterSeconds: int64p(5), Archive: true}); mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("create: %v", err)
	}
	if _, err := db.CreateCollection(ctx, "x", CollectionOptions{TimeSeries: ts, ExpireAfterSeconds: int64p(5)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CollMod(ctx, "x", CollModOptions{Archive: new(true)}); mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("collMod: %v", err)
	}
	if _, _, err := db.CreateIndex(ctx, "x", IndexSpec{Name: "i", Key: []IndexKey{{Field: "t", Direction: 1}}, ExpireAfterSeconds: int64p(5),
		PartialFilterExpression: map[string]any{"m": "a"}, Archive: true}); mongoerr.CodeOf(err) != mongoerr.CannotCreateIndex {
		t.Fatalf("index: %v", err)
	}
}

// An archive in an S3 bucket (a real S3 server on loopback): passes move
// expired data there, reads with the archive find it, and while the
// server is down nothing is deleted and the TTL state says why.
func TestArchiveToS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	st, err := objstore.Open(ctx, "s3://"+srv.Bucket+"/hourglass/archive", objstore.Options{S3Endpoint: srv.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := newTestClock(t0)
	db := openTest(t, t.TempDir(), func(o *Options) { o.Now = clock.Now; o.Archive = st; o.CheckpointInterval = time.Minute })
	defer db.Close()
	if _, err := db.CreateCollection(ctx, "s", CollectionOptions{ExpireAfterSeconds: int64p(3600), Archive: true,
		TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor"}}); err != nil {
		t.Fatal(err)
	}
	insertMinutes(t, db, t0, 90, "a", "b")
	storeAll(t, db, clock)
	clock.Set(t0.Add(26 * time.Hour))
	if got := expireDone(t, db, clock.Now()); got.Docs != 180 {
		t.Fatalf("archived %d, want 180", got.Docs)
	}
	var keys []string
	if err := st.List(ctx, "s/", func(in objstore.Info) error { keys = append(keys, in.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "s/date=2024-05-01/") {
		t.Fatalf("objects %v", keys)
	}
	if n := len(findRows(t, db, "s", FindOptions{Archive: true})); n != 180 {
		t.Fatalf("read back %d", n)
	}
	// The server goes away: the next data stays, suspended.
	insertMinutes(t, db, clock.Now().Add(-3*time.Hour), 30, "a")
	storeAll(t, db, clock)
	srv.Stop()
	if got := expireDone(t, db, clock.Now()); got.Docs != 0 {
		t.Fatalf("archived %d with the server down", got.Docs)
	}
	if s, _ := db.TTLState(ctx, "s"); !s.Suspended || !strings.Contains(*s.Reason, "s3://"+srv.Bucket+"/hourglass/archive") {
		t.Fatalf("TTL state %+v", s)
	}
	if info, _ := db.Describe(ctx, "s"); info.Count != 30 {
		t.Fatalf("%d live measurements, want the 30 kept", info.Count)
	}
}

// A collection without a metaField archives and reads back (its one
// series has the meta key "null", which its files do not hold).
func TestArchiveWithoutMetaField(t *testing.T) {
	clock := newTestClock(t0)
	st, err := objstore.Open(ctx, "file://"+t.TempDir(), objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db := openTest(t, t.TempDir(), func(o *Options) { o.Now = clock.Now; o.Archive = st; o.CheckpointInterval = time.Minute })
	defer db.Close()
	if _, err := db.CreateCollection(ctx, "s", CollectionOptions{ExpireAfterSeconds: int64p(3600), Archive: true,
		TimeSeries: &model.TimeSeriesOptions{TimeField: "t"}}); err != nil {
		t.Fatal(err)
	}
	var ms []model.Measurement
	for i := range 100 {
		ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(i) * time.Minute).UnixNano(), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
	}
	if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	storeAll(t, db, clock)
	clock.Set(t0.Add(48 * time.Hour))
	if got := expireDone(t, db, clock.Now()); got.Docs != 100 {
		t.Fatalf("archived %d", got.Docs)
	}
	if n := len(findRows(t, db, "s", FindOptions{Archive: true})); n != 100 {
		t.Fatalf("read back %d of 100", n)
	}
}

// An error after a pass committed (here: refreshing the field types meets
// a damaged bucket of another series) does not undo its files: what it
// moved stays readable.
func TestArchiveErrorAfterCommit(t *testing.T) {
	clock := newTestClock(t0)
	arch := t.TempDir()
	db := openArchiveTest(t, t.TempDir(), arch, clock, CollectionOptions{ExpireAfterSeconds: int64p(3600), Archive: true})
	insertMinutes(t, db, t0.Add(-2*time.Hour), 240, "a", "b")
	storeAll(t, db, clock)
	clock.Set(t0.Add(26 * time.Hour))
	// A damaged stored bucket of b that starts now: the pass does not
	// reach it (it has not expired), but refreshing the field types
	// after the pass (no bucket in memory holds v) reads every stored
	// bucket, and fails on it.
	c, _ := db.lookup("s")
	var bid uint64
	for _, s := range c.series.byOrd {
		if s.metaKey == `"b"` {
			bid = s.id
		}
	}
	if err := db.pdb.Set(bucketKey(spaceBucket, c.id, bid, clock.Now().UnixNano(), 1<<40), []byte("damaged"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if got := expireDone(t, db, clock.Now()); got.Docs != 480 {
		t.Fatalf("archived %d, want 480", got.Docs)
	}
	_, _, files := parquetRows(t, arch)
	if files != 2 {
		t.Fatalf("%d files in the archive after the pass, want 2", files)
	}
	if n := len(findRows(t, db, "s", FindOptions{Archive: true, Filter: mustFilter(t, `{"sensor": "a"}`)})); n != 240 {
		t.Fatalf("a with the archive: %d rows, want 240", n)
	}
}

// A rule change between a pass's read and its commit (here the TTL made
// ten years long while its files are written) makes the pass start over:
// nothing that no longer expires is moved.
func TestArchiveRuleChangeDuringPass(t *testing.T) {
	db, _, clock, _, _ := twoDaysToArchive(t)
	db.hooks.archiveStep = func(step string) {
		if step == "files" {
			db.hooks.archiveStep = nil
			if _, err := db.CollMod(ctx, "s", CollModOptions{ExpireAfterSeconds: int64p(10 * 365 * 86400)}); err != nil {
				t.Error(err)
			}
		}
	}
	if got := expireDone(t, db, clock.Now()); got.Docs != 0 {
		t.Fatalf("moved %d after the TTL became ten years", got.Docs)
	}
	if n := len(findRows(t, db, "s", FindOptions{})); n != 490 {
		t.Fatalf("%d live rows, want 490", n)
	}
}

// A read with the archive during which a pass commits (between its
// listing of the files and its snapshot) fails with QueryPlanKilled
// rather than miss the rows moved; read again, it has them all.
func TestArchiveReadDuringPass(t *testing.T) {
	db, _, clock, _, _ := twoDaysToArchive(t)
	defer func(n int) { planYieldEvery = n }(planYieldEvery)
	planYieldEvery = 1 // the walk lets go of DB.mu between series
	db.hooks.planYielded = func() {
		db.hooks.planYielded = nil
		if got := expireDone(t, db, clock.Now()); got.Docs == 0 {
			t.Error("the pass in the read moved nothing")
		}
	}
	cur, err := db.Find(ctx, "s", FindOptions{Archive: true, Order: SortAscending})
	if mongoerr.CodeOf(err) != mongoerr.QueryPlanKilled {
		if err == nil {
			cur.Close()
		}
		t.Fatalf("a read across a pass: %v", err)
	}
	if n := len(findRows(t, db, "s", FindOptions{Archive: true, Order: SortAscending})); n != 490 {
		t.Fatalf("read again: %d rows, want 490", n)
	}
}

// The files of a pass cut off by a crash are removed when the store
// opens, even when nothing archives any more (archiving turned off since).
func TestArchiveIntentSweptAtOpen(t *testing.T) {
	db, arch, clock, _, _ := twoDaysToArchive(t)
	c, _ := db.lookup("s")
	key := archiveFileKey(c, "2024-04-29", 1, []byte("left"))
	if err := db.opts.Archive.Put(ctx, key, strings.NewReader("left"), 4); err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Set(archiveKey(c.id, archiveIntent, 1), []byte(`["`+key+`"]`), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CollMod(ctx, "s", CollModOptions{Archive: new(false)}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openTest(t, db.opts.Dir, func(o *Options) { o.Now = clock.Now; o.Archive = db.opts.Archive })
	defer db.Close()
	if _, err := os.Stat(filepath.Join(arch, key)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file of the interrupted pass: %v", err)
	}
}

// Files moved to one archive are not looked for in another: a read with
// the archive of a store opened with a different archive fails, naming
// both, rather than answer without them.
func TestArchiveReadFromAnotherArchive(t *testing.T) {
	db, _, clock, _, _ := twoDaysToArchive(t)
	if got := expireDone(t, db, clock.Now()); got.Docs != 480 {
		t.Fatalf("archived %d", got.Docs)
	}
	first := db.opts.Archive.String()
	db.Close()
	other, err := objstore.Open(ctx, "file://"+t.TempDir(), objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db = openTest(t, db.opts.Dir, func(o *Options) { o.Now = clock.Now; o.Archive = other })
	defer db.Close()
	_, err = db.Find(ctx, "s", FindOptions{Archive: true})
	if err == nil || !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), "--archive-url") {
		t.Fatalf("a read from another archive: %v", err)
	}
	if n := len(findRows(t, db, "s", FindOptions{})); n != 10 {
		t.Fatalf("live rows %d, want 10", n)
	}
}
