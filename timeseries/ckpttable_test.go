package timeseries

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/hourglassdb/hourglass/model"
)

// storeContents returns every key and value of db's store, in order.
func storeContents(t *testing.T, db *DB) [][2][]byte {
	t.Helper()
	var kvs [][2][]byte
	if err := db.scan([]byte{0x00}, []byte{0xff}, func(k, v []byte) error {
		kvs = append(kvs, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return kvs
}

// tableOpsWorkload runs on db what TestCheckpointTableSameAsBatch
// compares: rows of 1,100 sensors over three hours (over 1,024 buckets a
// checkpoint: encoded in parallel, in several of a table's windows), checkpointed at each
// hour's turn (sealed buckets, open ones snapshotted, then sealed with
// their snapshot deleted), a meta update (whose checkpoint writes its
// moves of stored buckets first) and a delete.
func tableOpsWorkload(t *testing.T, db *DB) {
	t.Helper()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for h := range 3 {
		var ms []model.Measurement
		for s := range 1100 {
			k, _ := model.CanonicalMeta(fmt.Sprintf("s%04d", s))
			for i := range 20 {
				ms = append(ms, model.Measurement{Time: t0 + int64(h)*int64(time.Hour) + int64(i)*int64(3*time.Minute) + int64(s)*int64(time.Millisecond),
					Meta: model.MetaKey(k), Fields: []model.Field{{Name: "v", Value: model.Float(float64(h*1000 + s*30 + i))}}})
			}
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Update(ctx, "m", Update{Filter: mustFilter(t, `{"s": "s0003"}`), Operators: mustUpdate(t, `{"$set": {"s": "s0004"}}`), Multi: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "m", mustFilter(t, `{"s": "s0007"}`), DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointTableSameAsBatch checks that a checkpoint written as a
// table leaves the store as the batch does, key for key, and that the
// tables were ingested; the store opened again reads the same rows.
func TestCheckpointTableSameAsBatch(t *testing.T) {
	clock := func() time.Time { return time.Date(2026, 1, 1, 4, 0, 0, 0, time.UTC) }
	dirs := []string{t.TempDir(), t.TempDir()}
	var contents [2][][2][]byte
	var rows [2][]string
	for i, table := range []int{-1, 1} {
		db := openTest(t, dirs[i], func(o *Options) { o.Now, o.tableCheckpoint = clock, table })
		tableOpsWorkload(t, db)
		contents[i] = storeContents(t, db)
		ingested := ingestedTables(db)
		if table > 0 && ingested < 4 {
			t.Fatalf("tables ingested: %d, want a checkpoint's at least each time", ingested)
		}
		if table < 0 && ingested != 0 {
			t.Fatalf("tables ingested by batch checkpoints: %d", ingested)
		}
		db.Close()
		db = openTest(t, dirs[i], func(o *Options) { o.Now, o.tableCheckpoint = clock, table })
		rows[i] = rowStrings(findRows(t, db, "m", FindOptions{}))
		db.Close()
	}
	if len(contents[0]) != len(contents[1]) {
		t.Fatalf("the store holds %d keys after batches, %d after tables", len(contents[0]), len(contents[1]))
	}
	for i := range contents[0] {
		a, b := contents[0][i], contents[1][i]
		if !bytes.Equal(a[0], b[0]) || !bytes.Equal(a[1], b[1]) {
			t.Fatalf("key %d: %x = %d bytes after batches, %x = %d bytes after tables", i, a[0], len(a[1]), b[0], len(b[1]))
		}
	}
	if len(rows[0]) != 1100*20*3-20*3 {
		t.Fatalf("read %d rows, want %d", len(rows[0]), 1100*20*3-20*3)
	}
	for i := range rows[0] {
		if rows[0][i] != rows[1][i] {
			t.Fatalf("row %d: %s after batches, %s after tables", i, rows[0][i], rows[1][i])
		}
	}
}

// ingestedTables counts the tables db's store has ingested.
func ingestedTables(db *DB) uint64 {
	n := uint64(0)
	for _, l := range db.pdb.Metrics().Levels {
		n += l.TablesIngested
	}
	return n
}

// TestCheckpointTableFailure checks a checkpoint whose table the store
// did not take: its rows stay in memory and in the log, the table's file
// is gone, and the next checkpoint writes them; a table a crash left is
// removed at open.
func TestCheckpointTableFailure(t *testing.T) {
	fs := vfs.NewMem()
	open := func() *DB {
		db, err := Open(Options{Dir: "/d", FS: fs, NoSync: true, CheckpointInterval: time.Hour, tableCheckpoint: 1})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var ms []model.Measurement
	for i := range 100 {
		k, _ := model.CanonicalMeta(fmt.Sprintf("s%d", i%10))
		ms = append(ms, model.Measurement{Time: t0 + int64(i)*int64(time.Second), Meta: model.MetaKey(k),
			Fields: []model.Field{{Name: "v", Value: model.Float(float64(i))}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	tablePath := filepath.Join("/d", checkpointTableName)
	fail := errors.New("injected")
	db.hooks.checkpointWrite = func() error {
		if _, err := fs.Stat(tablePath); err != nil {
			t.Errorf("no table written before the store takes it: %v", err)
		}
		return fail
	}
	if err := db.Checkpoint(); !errors.Is(err, fail) {
		t.Fatalf("checkpoint: %v, want the injected failure", err)
	}
	if _, err := fs.Stat(tablePath); err == nil {
		t.Fatal("the failed checkpoint's table is left")
	}
	if n := ingestedTables(db); n != 0 {
		t.Fatalf("%d tables ingested", n)
	}
	if got := len(rowStrings(findRows(t, db, "m", FindOptions{}))); got != 100 {
		t.Fatalf("read %d rows after the failed checkpoint, want 100", got)
	}
	db.hooks.checkpointWrite = nil
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := ingestedTables(db); n != 1 {
		t.Fatalf("%d tables ingested, want 1", n)
	}
	db.Close()

	// A table a crash left before its ingestion.
	f, err := fs.Create(tablePath)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("not a table"))
	f.Close()
	db = open()
	defer db.Close()
	if _, err := fs.Stat(tablePath); err == nil {
		t.Fatal("open left a checkpoint's table")
	}
	if got := len(rowStrings(findRows(t, db, "m", FindOptions{}))); got != 100 {
		t.Fatalf("read %d rows after a restart, want 100", got)
	}
}

// TestCheckpointOpsLastWriteWins: the writes of a checkpoint's pre
// functions come out in key order, and of two writes of one key (pre
// functions kept from failed checkpoints can write a key twice) the
// later is kept, as in a batch.
func TestCheckpointOpsLastWriteWins(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	k := func(i int) []byte { return fmt.Appendf([]byte{spaceBucket}, "k%03d", i) }
	const n = 60
	pre := []func(*pebble.Batch) error{
		func(b *pebble.Batch) error { // every key set to 1
			for i := range n {
				b.Set(k(i), []byte("1"), nil)
			}
			return nil
		},
		func(b *pebble.Batch) error { // then to 2, backwards
			for i := n - 1; i >= 0; i-- {
				b.Set(k(i), []byte("2"), nil)
			}
			return nil
		},
		func(b *pebble.Batch) error { // then the even ones deleted
			for i := 0; i < n; i += 2 {
				b.Delete(k(i), nil)
			}
			return nil
		},
	}
	ops, tail, err := db.checkpointOps(&ckptRun{}, pre)
	if err != nil {
		t.Fatal(err)
	}
	var st checkpointState
	if len(tail) != 1 || !bytes.Equal(tail[0].key, keyCheckpoint) || !bytes.Equal(tail[0].value, st.encode()) {
		t.Fatalf("the writes after the buckets: %v, want the checkpoint record alone", tail)
	}
	render := func(key []byte, del bool, v []byte) string {
		if del {
			return fmt.Sprintf("%x del", key)
		}
		return fmt.Sprintf("%x=%x", key, v)
	}
	var got []string
	for _, op := range ops {
		got = append(got, render(op.key, op.del, op.value))
	}
	var want []string
	for i := range n {
		want = append(want, render(k(i), i%2 == 0, []byte("2")))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ops\n%v\nwant\n%v", got, want)
	}
}

// TestCheckpointTableKindFallsBack: a checkpoint whose writes hold a kind
// a table cannot (here a range delete from a pre function) is written as
// a batch instead, whole.
func TestCheckpointTableKindFallsBack(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.tableCheckpoint = 1 })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	ms := []model.Measurement{{Time: t0, Meta: sensor("a"), Fields: []model.Field{{Name: "v", Value: model.Float(1)}}}}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	lo, hi := []byte{spaceMeta, 'x', 'a'}, []byte{spaceMeta, 'x', 'z'}
	if err := db.pdb.Set([]byte{spaceMeta, 'x', 'm'}, []byte("gone"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	db.maintMu.Lock()
	err := db.checkpointWith(nil, &ckptChange{under: func() error { return nil }, pre: func(b *pebble.Batch) error { return b.DeleteRange(lo, hi, nil) }})
	db.maintMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if n := ingestedTables(db); n != 0 {
		t.Fatalf("%d tables ingested", n)
	}
	if _, closer, err := db.pdb.Get([]byte{spaceMeta, 'x', 'm'}); err == nil {
		closer.Close()
		t.Fatal("the pre function's range delete was not written")
	}
	if got := len(findRows(t, db, "m", FindOptions{})); got != 1 {
		t.Fatalf("%d rows", got)
	}
	// The next checkpoint, with nothing a table cannot hold, is a table.
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := ingestedTables(db); n != 1 {
		t.Fatalf("%d tables ingested, want 1", n)
	}
}

// TestCheckpointTableCollisions: where a pre function writes a key the
// checkpoint writes again (a bucket's, a new series'), the table keeps
// the checkpoint's write, as the batch does: the stores end the same and
// read every row after a restart.
func TestCheckpointTableCollisions(t *testing.T) {
	clock := func() time.Time { return time.Date(2026, 1, 1, 4, 0, 0, 0, time.UTC) }
	var contents [2][][2][]byte
	for i, table := range []int{-1, 1} {
		dir := t.TempDir()
		db := openTest(t, dir, func(o *Options) { o.Now, o.tableCheckpoint = clock, table })
		mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		ms := []model.Measurement{
			{Time: t0, Meta: sensor("a"), Fields: []model.Field{{Name: "v", Value: model.Float(1)}}},
			{Time: t0 + 1, Meta: sensor("a"), Fields: []model.Field{{Name: "v", Value: model.Float(2)}}},
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		c, err := db.lookup("m")
		if err != nil {
			t.Fatal(err)
		}
		db.mu.RLock()
		var s *series
		for _, x := range c.series.byOrd {
			s = x
		}
		b := s.buckets[0]
		keys := [][]byte{bucketKey(spaceOpen, c.id, s.id, b.minTime, b.id), seriesKey(c.id, s.id)}
		db.mu.RUnlock()
		db.maintMu.Lock()
		err = db.checkpointWith(nil, &ckptChange{under: func() error { return nil }, pre: func(pb *pebble.Batch) error {
			pb.Set(keys[0], []byte("junk"), nil)
			return pb.Delete(keys[1], nil)
		}})
		db.maintMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if n := ingestedTables(db); (n > 0) != (table > 0) {
			t.Fatalf("%d tables ingested with tableCheckpoint %d", n, table)
		}
		contents[i] = storeContents(t, db)
		db.Close()
		db = openTest(t, dir, nil)
		if got := len(findRows(t, db, "m", FindOptions{})); got != 2 {
			t.Fatalf("tableCheckpoint %d: %d rows after a restart, want 2", table, got)
		}
		db.Close()
	}
	if fmt.Sprint(contents[0]) != fmt.Sprint(contents[1]) {
		t.Fatalf("the stores differ:\nbatch %x\ntable %x", contents[0], contents[1])
	}
}

// BenchmarkCheckpointFleet times the checkpoint of a fleet's hour: 10,000
// sensors, a row every 10 s each, open buckets captured at each 10
// minutes and sealed at the hour's turn, written as one batch or as one
// table (tableCheckpoint -1 or 1). Each op loads 10 minutes of
// rows, untimed, then checkpoints. It reports the checkpoint's time, the
// bytes it allocated and the largest Go heap seen while it ran (sampled
// every 200 µs), against the heap before it:
//
//	go test ./timeseries -run '^$' -bench CheckpointFleet -benchtime 12x
func BenchmarkCheckpointFleet(b *testing.B) {
	for _, mode := range []struct {
		name  string
		table int
	}{{"batch", -1}, {"table", 1}} {
		b.Run(mode.name, func(b *testing.B) {
			db := openTest(b, b.TempDir(), func(o *Options) {
				o.tableCheckpoint = mode.table
				o.MemoryBudget, o.CheckpointLogBytes = 4<<30, 4<<30
			})
			defer db.Close()
			mustCreate(b, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
			const sensors = 10000
			metas := make([]model.MetaKey, sensors)
			for i := range metas {
				k, _ := model.CanonicalMeta(fmt.Sprintf("sensor-%05d", i))
				metas[i] = model.MetaKey(k)
			}
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			step := 0
			var spent time.Duration
			var allocated, grew, peak uint64
			sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			heap := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
			b.ResetTimer()
			b.StopTimer()
			for range b.N {
				for range 60 { // 10 minutes of rows
					ms := make([]model.Measurement, sensors)
					for i := range ms {
						ms[i] = model.Measurement{Time: t0 + int64(step)*int64(10*time.Second) + int64(i), Meta: metas[i],
							Fields: []model.Field{{Name: "v", Value: model.Float(float64(step%100) + float64(i%7)/8)}}}
					}
					if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
						b.Fatal(err)
					}
					step++
				}
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				base := heap()
				stop := make(chan struct{})
				seen := make(chan uint64)
				go func() {
					top := uint64(0)
					for {
						top = max(top, heap())
						select {
						case <-stop:
							seen <- top
							return
						case <-time.After(200 * time.Microsecond):
						}
					}
				}()
				start := time.Now()
				if err := db.Checkpoint(); err != nil {
					b.Fatal(err)
				}
				spent += time.Since(start)
				close(stop)
				top := <-seen
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				allocated += after.TotalAlloc - before.TotalAlloc
				grew += top - base
				peak = max(peak, top-base)
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(allocated)/float64(b.N)/(1<<20), "MiB-alloc/op")
			b.ReportMetric(float64(grew)/float64(b.N)/(1<<20), "MiB-heap-grew/op")
			b.ReportMetric(float64(peak)/(1<<20), "MiB-heap-grew-max")
		})
	}
}

// TestCheckpointTableBytes: by default a checkpoint of many buckets is
// written as a table only when they hold tableCheckpointBytes or more; a
// million sparse series' checkpoints of one-row buckets are batches.
func TestCheckpointTableBytes(t *testing.T) {
	const sensors = 2 * defaultTableCheckpoint
	for _, least := range []int{0, 64 << 10} {
		db := openTest(t, t.TempDir(), func(o *Options) { o.tableCheckpointBytes = least })
		mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
		ms := make([]model.Measurement, sensors)
		for i := range ms {
			ms[i] = model.Measurement{Time: t0.UnixNano() + int64(i), Meta: int64(i), Fields: []model.Field{{Name: "v", Value: model.Float(1.5)}}}
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		want := uint64(0)
		if least > 0 {
			want = 1 // 2,048 buckets of one row: ~150 KB estimated
		}
		if n := ingestedTables(db); n != want {
			t.Errorf("%d one-row buckets, tableCheckpointBytes %d: %d tables ingested, want %d", sensors, least, n, want)
		}
		if got := len(findRows(t, db, "m", FindOptions{})); got != sensors {
			t.Errorf("%d rows found, want %d", got, sensors)
		}
		db.Close()
	}
}
