package timeseries

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/ttl"
)

// testClock is a settable clock for the store.
type testClock struct{ ns atomic.Int64 }

func newTestClock(t time.Time) *testClock {
	c := &testClock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

var t0 = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

func int64p(v int64) *int64 { return &v }

// openTTL opens a store with clock, and a collection "s" with hourly
// buckets on meta "sensor" and collection TTL e (nil: none).
func openTTL(t *testing.T, dir string, clock *testClock, e *int64) *DB {
	t.Helper()
	db := openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	opts := CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor", Granularity: model.GranularitySeconds}, ExpireAfterSeconds: e}
	if _, err := db.CreateCollection(ctx, "s", opts); err != nil {
		t.Fatal(err)
	}
	return db
}

// insertMinutes inserts one measurement per minute of [from, from+n) for
// each sensor.
func insertMinutes(t *testing.T, db *DB, from time.Time, n int, sensors ...string) {
	t.Helper()
	var ms []model.Measurement
	for _, s := range sensors {
		for i := 0; i < n; i++ {
			ms = append(ms, model.Measurement{Time: from.Add(time.Duration(i) * time.Minute).UnixNano(), Meta: s,
				Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
		}
	}
	res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("insert: %v %v", err, res.Errors)
	}
}

func countRows(t *testing.T, db *DB, filter string) int {
	t.Helper()
	o := FindOptions{}
	if filter != "" {
		o.Filter = mustFilter(t, filter)
	}
	return len(findRows(t, db, "s", o))
}

func expireAll(t *testing.T, db *DB, now time.Time) ttl.Batch {
	t.Helper()
	targets, err := db.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sum ttl.Batch
	for _, tg := range targets {
		b, err := db.Expire(ctx, tg, now, ttl.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		sum.Docs += b.Docs
		sum.Buckets += b.Buckets
	}
	return sum
}

// SPEC 2.1 and 4.5: reads hide each expired measurement at once; the
// monitor removes a bucket only when its newest measurement has expired.
func TestExactReadsAndWholeBucketExpiry(t *testing.T) {
	for _, flushed := range []bool{false, true} {
		clock := newTestClock(t0)
		db := openTTL(t, t.TempDir(), clock, int64p(3600))
		// Two hourly buckets per sensor: 00:00-00:59 and 01:00-01:59.
		insertMinutes(t, db, t0, 120, "a", "b")
		if flushed {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		// At 02:30, measurements before 01:30 have expired (t + 1h < now).
		clock.Set(t0.Add(150 * time.Minute))
		if n := countRows(t, db, ""); n != 2*30 {
			t.Fatalf("flushed=%v: %d visible, want 60", flushed, n)
		}
		// Exactly at t + E a measurement is still there.
		clock.Set(t0.Add(90 * time.Minute))
		if n := countRows(t, db, `{"sensor": "a"}`); n != 90 {
			t.Fatalf("flushed=%v: %d visible at 01:30, want 90 (00:30..01:59)", flushed, n)
		}
		// The monitor at 02:30: the first bucket (newest 00:59) has expired,
		// the second (newest 01:59) has not, though half of it is hidden.
		clock.Set(t0.Add(150 * time.Minute))
		b := expireAll(t, db, clock.Now())
		if b.Docs != 120 || b.Buckets != 2 {
			t.Fatalf("flushed=%v: expired %+v, want 120 measurements in 2 buckets", flushed, b)
		}
		info, _ := db.Describe(ctx, "s")
		if info.Count != 120 {
			t.Fatalf("flushed=%v: count %d after expiry, want 120", flushed, info.Count)
		}
		if n := countRows(t, db, ""); n != 60 {
			t.Fatalf("flushed=%v: %d visible after expiry", flushed, n)
		}
		// Idempotent.
		if b := expireAll(t, db, clock.Now()); b.Docs != 0 {
			t.Fatalf("second sweep deleted %+v", b)
		}
		// After 02:59 + 1h everything goes.
		clock.Set(t0.Add(3*time.Hour + time.Second))
		if b := expireAll(t, db, clock.Now()); b.Docs != 120 || countRows(t, db, "") != 0 {
			t.Fatalf("flushed=%v: final sweep %+v", flushed, b)
		}
		db.Close()
	}
}

// SPEC 2.2 and 2.3: partial TTL indexes on the meta field, the smallest
// matching value wins, and without a collection value only matching series
// expire.
func TestPartialTTLIndexes(t *testing.T) {
	clock := newTestClock(t0)
	db := openTTL(t, t.TempDir(), clock, nil)
	defer db.Close()
	insertMinutes(t, db, t0, 60, "a", "b", "c")
	mk := func(name, filter string, e int64) {
		t.Helper()
		spec := IndexSpec{Name: name, Key: []IndexKey{{"t", 1}}, ExpireAfterSeconds: &e}
		if err := json.Unmarshal([]byte(filter), &spec.PartialFilterExpression); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.CreateIndex(ctx, "s", spec); err != nil {
			t.Fatal(err)
		}
	}
	clock.Set(t0.Add(2 * time.Hour)) // everything is 1..2 h old
	if n := countRows(t, db, ""); n != 180 {
		t.Fatalf("no rule: %d visible", n)
	}
	mk("a_short", `{"sensor": "a"}`, 1800)
	if countRows(t, db, `{"sensor": "a"}`) != 0 || countRows(t, db, `{"sensor": {"$ne": "a"}}`) != 120 {
		t.Fatal("index on a: a should be gone, b and c kept")
	}
	// A collection value shorter than the index governs everything.
	if _, err := db.CollMod(ctx, "s", CollModOptions{ExpireAfterSeconds: int64p(7200 - 30*60)}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, db, ""); n != 2*30 {
		t.Fatalf("collection 5400 s: %d visible, want b and c from 00:30", n)
	}
	// An index on b shorter still.
	mk("b_shorter", `{"sensor": {"$in": ["b"]}}`, 60)
	if countRows(t, db, `{"sensor": "b"}`) != 0 || countRows(t, db, `{"sensor": "c"}`) != 30 {
		t.Fatal("index on b")
	}
	b := expireAll(t, db, clock.Now())
	if b.Docs != 120 { // a and b's whole buckets; c's bucket straddles
		t.Fatalf("expired %+v", b)
	}
	// Dropping the index and turning the collection TTL off brings
	// nothing back (deleted), and c's hidden rows are visible again.
	if err := db.DropIndex(ctx, "s", "a_short"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CollMod(ctx, "s", CollModOptions{ExpireOff: true}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, db, ""); n != 60 {
		t.Fatalf("after off: %d visible, want c's 60", n)
	}
}

// SPEC 2.4: a measurement outside 1970..2038 suspends all expiry in its
// collection, reads included, until it is deleted; the state survives a
// restart.
func TestOutOfRangeSuspendsExpiry(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock(t0)
	db := openTTL(t, dir, clock, int64p(60))
	insertMinutes(t, db, t0, 60, "a")
	if _, err := db.Insert(ctx, "s", Batch{Measurements: []model.Measurement{{Time: ttl.MaxTimeNanos + 1, Meta: "z", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(24 * time.Hour))
	check := func(stage string, wantSuspended bool, oor int64) {
		t.Helper()
		st, err := db.TTLState(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if st.Suspended != wantSuspended || st.OutOfRangeBuckets != oor || (st.Reason != nil) != wantSuspended {
			t.Fatalf("%s: state %+v", stage, st)
		}
		targets, _ := db.Targets(ctx)
		if wantSuspended && len(targets) != 0 {
			t.Fatalf("%s: suspended collection offered to the monitor: %v", stage, targets)
		}
	}
	check("after insert", true, 1)
	if n := countRows(t, db, ""); n != 61 {
		t.Fatalf("suspended: %d visible, want all 61", n)
	}
	if b, err := db.Expire(ctx, ttl.Target{Collection: "s"}, clock.Now(), ttl.Budget{}); err != nil || b.Docs != 0 {
		t.Fatalf("suspended expire: %+v %v", b, err)
	}
	// Survives a checkpoint and a restart.
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	defer func() { db.Close() }()
	check("after restart", true, 1)
	// Deleting the out-of-range data resumes expiry without a restart.
	if _, err := db.Delete(ctx, "s", mustFilter(t, `{"sensor": "z"}`), DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after delete", false, 0)
	if n := countRows(t, db, ""); n != 0 {
		t.Fatalf("resumed: %d visible", n)
	}
	if b := expireAll(t, db, clock.Now()); b.Docs != 60 {
		t.Fatalf("resumed expire: %+v", b)
	}
	// Before 1970 too.
	if _, err := db.Insert(ctx, "s", Batch{Measurements: []model.Measurement{{Time: -1, Meta: "old", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	check("before 1970", true, 1)
}

func TestExpireBudgetResumes(t *testing.T) {
	clock := newTestClock(t0)
	db := openTTL(t, t.TempDir(), clock, int64p(60))
	defer db.Close()
	// 10 sensors x 3 hourly buckets of 60.
	insertMinutes(t, db, t0, 180, "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(24 * time.Hour))
	tg := ttl.Target{Collection: "s"}
	var total int64
	batches := 0
	for {
		b, err := db.Expire(ctx, tg, clock.Now(), ttl.Budget{Docs: 250})
		if err != nil {
			t.Fatal(err)
		}
		total += b.Docs
		batches++
		if b.Docs > 250+60 {
			t.Fatalf("batch of %d over its budget", b.Docs)
		}
		if !b.More {
			break
		}
		if batches > 20 {
			t.Fatal("no end")
		}
	}
	if total != 1800 || batches < 7 {
		t.Fatalf("%d deleted in %d batches", total, batches)
	}
	// A deadline in the past stops at once with work left.
	insertMinutes(t, db, t0, 60, "s0")
	b, err := db.Expire(ctx, tg, clock.Now(), ttl.Budget{Deadline: clock.Now().Add(-time.Second)})
	if err != nil || !b.More || b.Docs != 0 {
		t.Fatalf("past deadline: %+v %v", b, err)
	}
}

// SPEC 2.2, 3.2, 3.3: index validation and conflict rules.
func TestIndexRules(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock(t0)
	db := openTTL(t, dir, clock, nil)
	e := func(v int64) *int64 { return &v }
	filt := map[string]any{"sensor": "a"}
	for _, c := range []struct {
		name string
		spec IndexSpec
		code mongoerr.Code
	}{
		{"compound TTL", IndexSpec{Key: []IndexKey{{"t", 1}, {"sensor", 1}}, ExpireAfterSeconds: e(1), PartialFilterExpression: filt}, mongoerr.CannotCreateIndex},
		{"TTL on another field", IndexSpec{Key: []IndexKey{{"v", 1}}, ExpireAfterSeconds: e(1), PartialFilterExpression: filt}, mongoerr.InvalidOptions},
		{"TTL without filter", IndexSpec{Key: []IndexKey{{"t", 1}}, ExpireAfterSeconds: e(1)}, mongoerr.InvalidOptions},
		{"filter on a field", IndexSpec{Key: []IndexKey{{"t", 1}}, ExpireAfterSeconds: e(1), PartialFilterExpression: map[string]any{"v": int64(1)}}, mongoerr.InvalidOptions},
		{"filter with $ne", IndexSpec{Key: []IndexKey{{"t", 1}}, ExpireAfterSeconds: e(1), PartialFilterExpression: map[string]any{"sensor": map[string]any{"$ne": "a"}}}, mongoerr.CannotCreateIndex},
		{"negative", IndexSpec{Key: []IndexKey{{"t", 1}}, ExpireAfterSeconds: e(-1), PartialFilterExpression: filt}, mongoerr.CannotCreateIndex},
		{"too large", IndexSpec{Key: []IndexKey{{"t", 1}}, ExpireAfterSeconds: e(1 << 31), PartialFilterExpression: filt}, mongoerr.CannotCreateIndex},
		{"bad direction", IndexSpec{Key: []IndexKey{{"t", 2}}}, mongoerr.CannotCreateIndex},
	} {
		if _, _, err := db.CreateIndex(ctx, "s", c.spec); mongoerr.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want code %d", c.name, err, c.code)
		}
	}
	ok := IndexSpec{Key: []IndexKey{{"t", 1}}, ExpireAfterSeconds: e(60), PartialFilterExpression: filt}
	created, name, err := db.CreateIndex(ctx, "s", ok)
	if err != nil || !created || name != "t_1" {
		t.Fatalf("create: %v %v %q", created, err, name)
	}
	if created, _, err := db.CreateIndex(ctx, "s", ok); err != nil || created {
		t.Fatalf("identical: %v %v", created, err)
	}
	changed := ok
	changed.ExpireAfterSeconds = e(61)
	if _, _, err := db.CreateIndex(ctx, "s", changed); mongoerr.CodeOf(err) != mongoerr.IndexOptionsConflict {
		t.Fatalf("changed expireAfterSeconds: %v", err)
	}
	otherKey := IndexSpec{Name: "t_1", Key: []IndexKey{{"sensor", 1}}}
	if _, _, err := db.CreateIndex(ctx, "s", otherKey); mongoerr.CodeOf(err) != mongoerr.IndexKeySpecsConflict {
		t.Fatalf("same name other key: %v", err)
	}
	// Same key, another sensor: a second partial TTL index.
	other := IndexSpec{Name: "t_b", Key: []IndexKey{{"t", 1}}, ExpireAfterSeconds: e(30), PartialFilterExpression: map[string]any{"sensor": "b"}}
	if created, _, err := db.CreateIndex(ctx, "s", other); err != nil || !created {
		t.Fatalf("second partial index: %v", err)
	}
	// A non-TTL index on a key, then a TTL index with the same key: 85.
	plain := IndexSpec{Key: []IndexKey{{"sensor", 1}}}
	if _, _, err := db.CreateIndex(ctx, "s", plain); err != nil {
		t.Fatal(err)
	}
	// A non-TTL index with a key and filter, then a TTL index over it: 85.
	nonTTL := IndexSpec{Name: "t_c_plain", Key: []IndexKey{{"t", 1}}, PartialFilterExpression: map[string]any{"sensor": "c"}}
	if _, _, err := db.CreateIndex(ctx, "s", nonTTL); err != nil {
		t.Fatal(err)
	}
	overIt := IndexSpec{Name: "t_c_ttl", Key: []IndexKey{{"t", 1}}, ExpireAfterSeconds: e(5), PartialFilterExpression: map[string]any{"sensor": "c"}}
	if _, _, err := db.CreateIndex(ctx, "s", overIt); mongoerr.CodeOf(err) != mongoerr.IndexOptionsConflict {
		t.Fatalf("TTL over a non-TTL index: %v", err)
	}
	// collMod turns it into a TTL index.
	if res, err := db.CollModIndex(ctx, "s", IndexMod{Name: "t_c_plain", ExpireAfterSeconds: 5}); err != nil || res.OldExpireAfterSeconds != nil {
		t.Fatalf("collMod to TTL: %+v %v", res, err)
	}
	if err := db.DropIndex(ctx, "s", "t_c_plain"); err != nil {
		t.Fatal(err)
	}
	// collMod by name and by (ambiguous) key pattern.
	res, err := db.CollModIndex(ctx, "s", IndexMod{Name: "t_b", ExpireAfterSeconds: 10})
	if err != nil || *res.OldExpireAfterSeconds != 30 || res.NewExpireAfterSeconds != 10 {
		t.Fatalf("collMod by name: %+v %v", res, err)
	}
	if _, err := db.CollModIndex(ctx, "s", IndexMod{KeyPattern: []IndexKey{{"t", 1}}, ExpireAfterSeconds: 5}); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Fatalf("ambiguous key pattern: %v", err)
	}
	if _, err := db.CollModIndex(ctx, "s", IndexMod{Name: "nope", ExpireAfterSeconds: 5}); mongoerr.CodeOf(err) != mongoerr.IndexNotFound {
		t.Fatalf("unknown index: %v", err)
	}
	if _, err := db.CollModIndex(ctx, "s", IndexMod{Name: "sensor_1", ExpireAfterSeconds: 5}); mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("TTL on the meta field of a time series: %v", err)
	}
	if err := db.DropIndex(ctx, "s", "nope"); mongoerr.CodeOf(err) != mongoerr.IndexNotFound {
		t.Fatalf("drop unknown: %v", err)
	}
	// Index definitions survive a restart, and keep working.
	db.Close()
	db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	specs, err := db.ListIndexes(ctx, "s")
	if err != nil || len(specs) != 3 || specs[1].Name != "t_b" || *specs[1].ExpireAfterSeconds != 10 {
		t.Fatalf("after restart: %+v %v", specs, err)
	}
	insertMinutes(t, db, t0, 10, "b")
	clock.Set(t0.Add(time.Hour))
	if n := countRows(t, db, ""); n != 0 {
		t.Fatalf("b's rows visible after restart: %d", n)
	}
}

// Ingest, reads and sweeps together: an insert racing the monitor never
// loses an unexpired measurement, and reads never see an expired one.
func TestIngestRacesExpiry(t *testing.T) {
	clock := newTestClock(t0)
	db := openTTL(t, t.TempDir(), clock, int64p(100))
	defer db.Close()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		written []int64
	)
	const writers, perWriter = 2, 300
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				// Each write is "now" on the shared clock, which moves a
				// second per write.
				now := clock.Now().UnixNano()
				clock.Advance(time.Second)
				m := model.Measurement{Time: now, Meta: "s" + string(rune('0'+w)), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}}
				if _, err := db.Insert(ctx, "s", Batch{Measurements: []model.Measurement{m}}, InsertOptions{}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				written = append(written, now)
				mu.Unlock()
			}
		}(w)
	}
	stop := make(chan struct{})
	// A reader: no row it gets has expired when its query began.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			cutoff := ttl.Cutoff(clock.Now(), 100)
			for _, r := range findRows(t, db, "s", FindOptions{}) {
				if r.t < cutoff {
					t.Errorf("read a measurement at %d, expired before the query (cutoff %d)", r.t, cutoff)
					return
				}
			}
		}
	}()
	sweeps := make(chan int)
	go func() {
		n := 0
		defer func() { sweeps <- n }()
		// At least one sweep runs, however the goroutines are scheduled.
		for {
			expireAll(t, db, clock.Now())
			if n%4 == 0 {
				if err := db.Flush(); err != nil {
					t.Error(err)
					return
				}
			}
			n++
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-readerDone
	if n := <-sweeps; n == 0 {
		t.Fatal("no sweep ran")
	}
	cutoff := ttl.Cutoff(clock.Now(), 100)
	want := 0
	for _, w := range written {
		if w >= cutoff {
			want++
		}
	}
	if got := countRows(t, db, ""); got != want || want < 50 {
		t.Fatalf("%d visible, want %d", got, want)
	}
	info, _ := db.Describe(ctx, "s")
	if info.Count < int64(want) {
		t.Fatalf("count %d below the %d unexpired", info.Count, want)
	}
}

// SPEC 2.4 and the issue: one warning per collection when expiry becomes
// suspended, not one per measurement, and one at start-up while it lasts.
func TestSuspensionWarnsOnce(t *testing.T) {
	dir := t.TempDir()
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	clock := newTestClock(t0)
	db := openTest(t, dir, func(o *Options) { o.Now = clock.Now; o.Logger = logger })
	mustCreate(t, db, "s", model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor"})
	for i := 0; i < 3; i++ {
		ms := []model.Measurement{{Time: -int64(i+1) * int64(time.Hour), Meta: "old", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}
		if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(buf.String(), "expiry suspended"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, buf.String())
	}
	db.Close()
	buf.Reset()
	db = openTest(t, dir, func(o *Options) { o.Now = clock.Now; o.Logger = logger })
	defer db.Close()
	if n := strings.Count(buf.String(), "expiry suspended"); n != 1 || !strings.Contains(buf.String(), "outOfRangeBuckets=3") {
		t.Fatalf("start-up: %d warnings, want 1 naming 3 buckets:\n%s", n, buf.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// TestExpireCountAfterCrash: a TTL pass deletes buckets that a checkpoint
// wrote, Pebble makes that durable (a memtable flush) and the process dies
// before the next checkpoint. The collection's count recovered must be
// what it holds, not the last checkpoint's.
func TestExpireCountAfterCrash(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprint("reopen=", reopen), func(t *testing.T) { testExpireCountAfterCrash(t, reopen) })
	}
}

// testExpireCountAfterCrash is TestExpireCountAfterCrash; with reopen,
// the open buckets' snapshots the TTL batch deletes were loaded at open
// rather than written by a checkpoint of the same process.
func testExpireCountAfterCrash(t *testing.T, reopen bool) {
	dir := t.TempDir()
	clock := newTestClock(t0)
	db := openTTL(t, dir, clock, int64p(3600))
	defer func() { db.Close() }()
	insertMinutes(t, db, t0, 180, "s0", "s1") // 3 hourly buckets each
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if reopen {
		db.Close()
		db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
		db.mu.RLock()
		snaps := 0
		for _, s := range db.coll.byName["s"].byID {
			for _, b := range s.buckets {
				if b.snapshot {
					snaps++
				}
			}
		}
		db.mu.RUnlock()
		if snaps == 0 {
			t.Fatal("no open bucket loaded from its snapshot")
		}
	}
	insertMinutes(t, db, t0.Add(3*time.Hour), 30, "s0") // in the log only
	clock.Set(t0.Add(4 * time.Hour))
	if b := expireAll(t, db, clock.Now()); b.Docs != 360 {
		t.Fatalf("expired %d, want 360", b.Docs)
	}
	if err := db.pdb.Flush(); err != nil {
		t.Fatal(err)
	}
	// The crash: the store and the log as they are now.
	crashed := t.TempDir()
	if err := db.pdb.Checkpoint(filepath.Join(crashed, "store")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(crashed, "wal"), os.DirFS(filepath.Join(dir, "wal"))); err != nil {
		t.Fatal(err)
	}
	re := openTest(t, crashed, func(o *Options) { o.Now = clock.Now })
	defer re.Close()
	info, err := re.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, re, ""); info.Count != 30 || n != 30 {
		t.Fatalf("recovered count %d, %d measurements found; want 30", info.Count, n)
	}
}

// TestRecountOutOfRangeOnOpen checks that the count of stored buckets
// outside 1970..2038 made at open is the same whether it seeks each
// series or reads every bucket key: a bucket before 1970, one after 2038,
// one that starts before 2038 and ends after it (its control block read),
// and ordinary ones.
func TestRecountOutOfRangeOnOpen(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock(t0)
	db := openTTL(t, dir, clock, int64p(60))
	insertMinutes(t, db, t0, 60, "a", "b")
	for _, m := range []model.Measurement{
		{Time: -1e9, Meta: "old", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}},
		{Time: ttl.MaxTimeNanos + 3600e9, Meta: "late", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}},
		{Time: ttl.MaxTimeNanos - 10e9, Meta: "across", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}},
		{Time: ttl.MaxTimeNanos + 10e9, Meta: "across", Fields: []model.Field{{Name: "v", Value: model.Int(2)}}},
		{Time: ttl.MaxTimeNanos - 20e9, Meta: "near", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}},
	} {
		if _, err := db.Insert(ctx, "s", Batch{Measurements: []model.Measurement{m}}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Idle for two checkpoint intervals: every bucket is sealed and
	// written out, so that the count at open reads them all from Pebble.
	for i := 0; i < 3; i++ {
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
	}
	db.mu.RLock()
	for _, s := range db.coll.byName["s"].series.byOrd {
		if len(s.buckets) > 0 {
			t.Fatalf("series %s keeps %d buckets in memory", s.metaKey, len(s.buckets))
		}
	}
	db.mu.RUnlock()
	db.Close()
	defer func(n int64) { recountScanBuckets = n }(recountScanBuckets)
	for _, mode := range []int64{0, 1 << 30} {
		recountScanBuckets = mode
		db := openTest(t, dir, func(o *Options) { o.Now = clock.Now })
		st, err := db.TTLState(ctx, "s")
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.OutOfRangeBuckets != 3 {
			t.Errorf("recountScanBuckets %d: %d buckets out of range, want 3", mode, st.OutOfRangeBuckets)
		}
	}
}

// TestExpireNothingDueVisitsNoSeries checks that a TTL batch whose cutoff
// is not past the oldest bucket's min time returns without visiting a
// series, and that the bound follows late data, restarts (both ways of
// counting at open) and the clock: what is due is still deleted, all of it.
func TestExpireNothingDueVisitsNoSeries(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock(t0.Add(30 * time.Minute))
	db := openTTL(t, dir, clock, int64p(3600))
	insertMinutes(t, db, t0, 60, "a", "b")
	pass := func(stage string, wantIdle bool, wantDocs int64) {
		t.Helper()
		idle := db.stats.ttlIdle.Load()
		b := expireAll(t, db, clock.Now())
		if got := db.stats.ttlIdle.Load() > idle; got != wantIdle || b.Docs != wantDocs {
			t.Fatalf("%s: idle %v, %d deleted; want idle %v, %d deleted", stage, got, b.Docs, wantIdle, wantDocs)
		}
	}
	pass("young data", true, 0)
	// A late measurement an hour older than the rest: due an hour sooner.
	if _, err := db.Insert(ctx, "s", Batch{Measurements: []model.Measurement{{Time: t0.Add(-2 * time.Hour).UnixNano(), Meta: "late", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(-30 * time.Minute).Add(time.Hour))
	pass("the late measurement due", false, 1)
	// The late bucket's bound stays until a recount: a pass visits
	// series and finds nothing.
	pass("after the late one went", false, 0)
	defer func(n int64) { recountScanBuckets = n }(recountScanBuckets)
	for _, mode := range []int64{0, 1 << 30} {
		// Idle so that every bucket is stored, then reopened.
		for i := 0; i < 3; i++ {
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Hour)
		}
		clock.Set(t0.Add(30 * time.Minute))
		db.Close()
		recountScanBuckets = mode
		db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
		pass(fmt.Sprintf("reopened (recountScanBuckets %d)", mode), true, 0)
	}
	defer db.Close()
	clock.Set(t0.Add(2 * time.Hour))
	pass("an hour of both sensors due", false, 120)
	if n := countRows(t, db, ""); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}
