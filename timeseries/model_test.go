package timeseries

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/cockroachdb/pebble/vfs"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/ttl"
)

// The power-loss model test runs seeded random sequences of writes,
// deletes (by series and time range, and by measurement fields), meta
// updates, TTL passes, collMod, index changes, checkpoints and compactions
// against a store on a file system that forgets everything not synced
// (vfs.NewStrictMem), cuts the power at random points, reopens, and checks
// the store against a simple model in memory: every acknowledged write is
// there, nothing deleted or expired is returned, counts equal a full scan,
// indexes and TTL settings are the model's.
//
//	HOURGLASS_MODEL_SEED=n      run the one sequence of seed n (as logged)
//	HOURGLASS_MODEL_RUNS=n      sequences to run (default 4, 2 with -short)
//	HOURGLASS_MODEL_DURATION=d  run sequences until d has passed (soak)
//	HOURGLASS_MODEL_STEPS=n     operations per sequence (default 300)
//
// `make soak-model` runs it for HOURGLASS_MODEL_DURATION (default 10m).

func TestPowerLossModel(t *testing.T) {
	steps := envInt(t, "HOURGLASS_MODEL_STEPS", 300)
	if s := os.Getenv("HOURGLASS_MODEL_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HOURGLASS_MODEL_SEED=%q: %v", s, err)
		}
		runModel(t, seed, steps)
		return
	}
	runs := 4
	if testing.Short() {
		runs = 2
	}
	runs = envInt(t, "HOURGLASS_MODEL_RUNS", runs)
	var until time.Time
	if s := os.Getenv("HOURGLASS_MODEL_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("HOURGLASS_MODEL_DURATION=%q: %v", s, err)
		}
		until = time.Now().Add(d)
	}
	base := uint64(time.Now().UnixNano())
	for i := 0; i < runs || time.Now().Before(until); i++ {
		seed := base + uint64(i)
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runModel(t, seed, steps) }) {
			return
		}
	}
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, s)
	}
	return n
}

// Every time in the model is a whole hour plus 1..3599 s, and every TTL and
// clock step whole hours, so no row sits on an expiry cutoff and, with
// buckets rounded to the hour, a TTL pass removes every expired row.
const (
	modelTS     = "ts"   // time-series collection
	modelDocs   = "docs" // plain collection
	modelHour   = int64(time.Hour)
	modelSensor = 5 // sensors s0..s4
)

// modelRow is a measurement the model knows of.
type modelRow struct {
	t      int64 // ns
	sensor int
	maybe  bool // written by an insert cut by the crash: may or may not be there
	// ttlGone: a TTL pass removed it, durably only once a checkpoint ran
	// (see expireAll).
	ttlGone bool
}

// modelDoc is a document of the plain collection.
type modelDoc struct {
	at      int64 // ns, the TTL field
	g       int
	maybe   bool
	ttlGone bool
}

type refModel struct {
	rows    map[int64]*modelRow // by field n
	docs    map[int64]*modelDoc // by _id (rendered "d<n>")
	collTTL *int64              // ts expireAfterSeconds
	tsTTL   map[int]int64       // ts partial TTL index on sensor -> seconds
	tsIndex bool                // ts secondary index on the meta field
	docsTTL *int64              // TTL index at_1 on docs
	docsG   bool                // secondary index g_1 on docs
	nextID  int64
}

// rowTTL is the effective TTL of a sensor's rows in seconds, -1 for none.
func (m *refModel) rowTTL(sensor int) int64 {
	e := int64(-1)
	if m.collTTL != nil {
		e = *m.collTTL
	}
	if v, ok := m.tsTTL[sensor]; ok && (e < 0 || v < e) {
		e = v
	}
	return e
}

func (m *refModel) rowExpired(r *modelRow, now int64) bool {
	e := m.rowTTL(r.sensor)
	return e >= 0 && r.t < now-e*int64(time.Second)
}

func (m *refModel) docExpired(d *modelDoc, now int64) bool {
	return m.docsTTL != nil && d.at < now-*m.docsTTL*int64(time.Second)
}

type modelRun struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	fs    *vfs.MemFS
	clock *testClock
	db    *DB
	m     refModel
	log   []string // the operations so far, for the failure message
	// merged counts the buckets merge passes removed (before the
	// crashes and closes that end the stores' lives).
	merged int64
	// tables: every checkpoint is written as a table the store ingests
	// (Options.tableCheckpoint 1), not as a batch; odd seeds.
	tables bool
}

func (r *modelRun) open() {
	o := Options{Dir: "/data", FS: r.fs, Now: r.clock.Now, CheckpointInterval: time.Hour,
		LogSegmentSize: 16 << 10, BucketMaxCount: 16, MemoryBudget: 1 << 20, tableCheckpoint: -1}
	if r.tables {
		o.tableCheckpoint = 1
	}
	db, err := Open(o)
	if err != nil {
		r.fatalf("open: %v", err)
	}
	r.db = db
}

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	tail := r.log[max(0, len(r.log)-25):]
	r.t.Fatalf("seed %d (HOURGLASS_MODEL_SEED=%d): %s\nlast operations:\n  %s",
		r.seed, r.seed, fmt.Sprintf(format, args...), strings.Join(tail, "\n  "))
}

func (r *modelRun) note(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf("%d: ", len(r.log))+fmt.Sprintf(format, args...))
}

func runModel(t *testing.T, seed uint64, steps int) {
	r := &modelRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		fs: vfs.NewStrictMem(), clock: newTestClock(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)), tables: seed%2 == 1}
	t.Logf("seed %d (rerun with HOURGLASS_MODEL_SEED=%d), checkpoints as tables: %v", seed, seed, r.tables)
	r.m = refModel{rows: map[int64]*modelRow{}, docs: map[int64]*modelDoc{}, tsTTL: map[int]int64{}, nextID: 1}
	r.open()
	defer func() {
		if r.db != nil {
			r.db.Close()
		}
	}()
	if _, err := r.db.CreateCollection(ctx, modelTS, CollectionOptions{TimeSeries: &model.TimeSeriesOptions{
		TimeField: "t", MetaField: "sensor", BucketMaxSpanSeconds: 3600, BucketRoundingSeconds: 3600}}); err != nil {
		r.fatalf("create %s: %v", modelTS, err)
	}
	if _, err := r.db.CreateCollection(ctx, modelDocs, CollectionOptions{}); err != nil {
		r.fatalf("create %s: %v", modelDocs, err)
	}
	r.note("create collections")
	for i := 0; i < steps; i++ {
		switch op := r.rng.IntN(100); {
		case op < 25:
			r.insertRows()
		case op < 40:
			r.insertDocs()
		case op < 43:
			r.deleteRows()
		case op < 46:
			r.updateMeta()
		case op < 52:
			r.deleteDocs()
		case op < 60:
			r.ttlPass()
		case op < 64:
			r.collMod()
		case op < 72:
			r.changeIndex()
		case op < 78:
			r.note("checkpoint")
			if err := r.db.Checkpoint(); err != nil {
				r.fatalf("checkpoint: %v", err)
			}
			r.checkpointed()
		case op < 81:
			r.note("compact")
			if err := r.db.Flush(); err != nil {
				r.fatalf("compact: %v", err)
			}
			r.checkpointed()
		case op < 84:
			r.note("checkpoint and merge")
			if err := r.db.Checkpoint(); err != nil {
				r.fatalf("checkpoint: %v", err)
			}
			r.checkpointed()
			if err := r.db.MergeBuckets(ctx); err != nil {
				r.fatalf("merge: %v", err)
			}
		case op < 86:
			r.mergeCrash()
		case op < 93:
			r.crash(false)
		default:
			r.crash(true)
		}
		if i%25 == 24 {
			r.note("ttl pass and check")
			r.expireAll()
			r.check(true)
		}
	}
	r.crash(false)
	r.note("close")
	r.merged += r.db.stats.merged.Load()
	t.Logf("merge passes removed %d buckets", r.merged)
	if err := r.db.Close(); err != nil {
		r.fatalf("close: %v", err)
	}
	r.db = nil
	r.open()
	r.check(false)
	r.expireAll()
	r.check(true)
}

// hourTime returns a time h whole hours before now (negative: after), plus
// 1..3599 s, and one time in four plus a fraction of a second: buckets of
// whole seconds store their times scaled (bucket time mode 2), the others
// not.
func (r *modelRun) hourTime(h int) int64 {
	now := r.clock.Now().UnixNano()
	t := now - int64(h)*modelHour + (1+r.rng.Int64N(3599))*int64(time.Second)
	if r.rng.IntN(4) == 0 {
		t += r.rng.Int64N(int64(time.Second))
	}
	return t
}

func (r *modelRun) newRows() ([]model.Measurement, []int64) {
	n := 1 + r.rng.IntN(30)
	ms := make([]model.Measurement, 0, n)
	ids := make([]int64, 0, n)
	for range n {
		id := r.m.nextID
		r.m.nextID++
		s := r.rng.IntN(modelSensor)
		tm := r.hourTime(r.rng.IntN(8) - 1)
		fs := []model.Field{{Name: "n", Value: model.Int(id)}}
		if v, ok := modelValue(id); ok {
			fs = append(fs, model.Field{Name: "v", Value: v})
		}
		ms = append(ms, model.Measurement{Time: tm, Meta: fmt.Sprintf("s%d", s), Fields: fs})
		r.m.rows[id] = &modelRow{t: tm, sensor: s, maybe: true}
		ids = append(ids, id)
	}
	return ms, ids
}

func (r *modelRun) insertRows() {
	ms, ids := r.newRows()
	res, err := r.db.Insert(ctx, modelTS, Batch{Measurements: ms}, InsertOptions{})
	r.note("insert %d rows n=%d..%d: %v", len(ms), ids[0], ids[len(ids)-1], err)
	if err != nil || len(res.Errors) > 0 {
		return // not acknowledged: the rows stay "maybe"
	}
	for _, id := range ids {
		r.m.rows[id].maybe = false
	}
}

func (r *modelRun) newDocs() ([]document.Doc, []int64) {
	n := 1 + r.rng.IntN(10)
	docs := make([]document.Doc, 0, n)
	ids := make([]int64, 0, n)
	for range n {
		id := r.m.nextID
		r.m.nextID++
		at := r.hourTime(r.rng.IntN(8) - 1)
		g := r.rng.IntN(5)
		docs = append(docs, jsonDoc(r.t, fmt.Sprintf(`{"_id": "d%d", "at": {"$date": %q}, "g": %d}`,
			id, time.Unix(0, at).UTC().Format(time.RFC3339), g)))
		r.m.docs[id] = &modelDoc{at: at, g: g, maybe: true}
		ids = append(ids, id)
	}
	return docs, ids
}

func (r *modelRun) insertDocs() {
	docs, ids := r.newDocs()
	res, err := r.db.Insert(ctx, modelDocs, Batch{Documents: docs}, InsertOptions{})
	r.note("insert %d docs d%d..d%d: %v", len(docs), ids[0], ids[len(ids)-1], err)
	if err != nil || len(res.Errors) > 0 {
		return
	}
	for _, id := range ids {
		r.m.docs[id].maybe = false
	}
}

func (r *modelRun) deleteRows() {
	s := r.rng.IntN(modelSensor)
	filter := fmt.Sprintf(`{"sensor": "s%d"}`, s)
	var lo, hi int64 = -1 << 62, 1 << 62
	if r.rng.IntN(3) == 0 {
		// By a measurement field: a range of n, of one sensor or all.
		a := r.rng.Int64N(r.m.nextID + 1)
		b := a + 1 + r.rng.Int64N(40)
		filter = fmt.Sprintf(`{"n": {"$gte": %d, "$lt": %d}}`, a, b)
		all := r.rng.IntN(2) == 0
		if !all {
			filter = fmt.Sprintf(`{"sensor": "s%d", "n": {"$gte": %d, "$lt": %d}}`, s, a, b)
		}
		n, err := r.db.Delete(ctx, modelTS, mustFilter(r.t, filter), DeleteOptions{})
		r.note("delete rows %s: %d %v", filter, n, err)
		if err != nil {
			r.fatalf("delete rows %s: %v", filter, err)
		}
		for id, row := range r.m.rows {
			if id >= a && id < b && (all || row.sensor == s) {
				delete(r.m.rows, id)
			}
		}
		return
	}
	if r.rng.IntN(2) == 0 {
		// A range of whole hours.
		from := r.clock.Now().UnixNano() - int64(r.rng.IntN(8))*modelHour
		lo, hi = from, from+int64(1+r.rng.IntN(3))*modelHour
		filter = fmt.Sprintf(`{"sensor": "s%d", "t": {"$gte": {"$date": %q}, "$lt": {"$date": %q}}}`, s,
			time.Unix(0, lo).UTC().Format(time.RFC3339), time.Unix(0, hi).UTC().Format(time.RFC3339))
	}
	n, err := r.db.Delete(ctx, modelTS, mustFilter(r.t, filter), DeleteOptions{})
	r.note("delete rows %s: %d %v", filter, n, err)
	if err != nil {
		r.fatalf("delete rows %s: %v", filter, err)
	}
	for id, row := range r.m.rows {
		if row.sensor == s && row.t >= lo && row.t < hi {
			delete(r.m.rows, id)
		}
	}
}

// updateMeta moves the rows of one sensor, or two, to another (updateMany
// of the meta field), at times cutting the power while the update's
// checkpoint writes: the update is logged before, so it stays.
func (r *modelRun) updateMeta() {
	a, b, to := r.rng.IntN(modelSensor), r.rng.IntN(modelSensor), r.rng.IntN(modelSensor)
	filter := fmt.Sprintf(`{"sensor": {"$in": ["s%d", "s%d"]}}`, a, b)
	op := fmt.Sprintf(`{"$set": {"sensor": "s%d"}}`, to)
	cut := r.rng.IntN(4) == 0
	if cut {
		r.db.hooks.checkpointWrite = func() error { r.fs.SetIgnoreSyncs(true); return nil }
	}
	res, err := r.db.Update(ctx, modelTS, Update{Filter: mustFilter(r.t, filter), Operators: mustUpdate(r.t, op), Multi: true})
	r.db.hooks.checkpointWrite = nil
	r.note("update %s %s (power cut in its checkpoint: %v): %+v %v", filter, op, cut, res, err)
	if err != nil {
		r.fatalf("update %s %s: %v", filter, op, err)
	}
	for _, row := range r.m.rows {
		if row.sensor == a || row.sensor == b {
			row.sensor = to
		}
	}
	if res.Modified > 0 && !cut {
		r.checkpointed() // the update made a checkpoint
	}
	if cut {
		r.note("power cut")
		r.restart()
	}
}

func (r *modelRun) deleteDocs() {
	g := r.rng.IntN(5)
	filter := fmt.Sprintf(`{"g": %d}`, g)
	n, err := r.db.Delete(ctx, modelDocs, mustFilter(r.t, filter), DeleteOptions{})
	r.note("delete docs %s: %d %v", filter, n, err)
	if err != nil {
		r.fatalf("delete docs %s: %v", filter, err)
	}
	// A delete of a plain collection passes over documents that have
	// expired but are not removed yet (reads hide them): they stay, and a
	// TTL index dropped or lengthened later shows them again. The model
	// keeps them as the store does.
	now := r.clock.Now().UnixNano()
	for id, d := range r.m.docs {
		if d.g == g && !d.ttlGone && !r.m.docExpired(d, now) {
			delete(r.m.docs, id)
		}
	}
}

// ttlPass moves the clock on by 0..2 hours and runs every TTL rule to the
// end, as the monitor does.
func (r *modelRun) ttlPass() {
	r.clock.Advance(time.Duration(r.rng.IntN(3)) * time.Hour)
	r.note("ttl pass at %s", r.clock.Now().Format(time.RFC3339))
	r.expireAll()
}

func (r *modelRun) expireAll() {
	now := r.clock.Now()
	targets, err := r.db.Targets(ctx)
	if err != nil {
		r.fatalf("targets: %v", err)
	}
	for _, tg := range targets {
		for {
			b, err := r.db.Expire(ctx, tg, now, ttl.Budget{Docs: 50})
			if err != nil {
				r.fatalf("expire %v: %v", tg, err)
			}
			if !b.More {
				break
			}
		}
	}
	// A TTL pass logs nothing: the rows it removed from memory come back
	// when a crash replays the log before a checkpoint made the removal
	// durable. They are still expired, and hidden, while the rules stand;
	// a catalog change, which may relax them, checkpoints first. The model
	// accepts either after a crash (ttlGone turns into maybe), and forgets
	// the rows at the next checkpoint or catalog change.
	nowNS := now.UnixNano()
	for _, row := range r.m.rows {
		if r.m.rowExpired(row, nowNS) {
			row.ttlGone = true
		}
	}
	for _, d := range r.m.docs {
		if r.m.docExpired(d, nowNS) {
			d.ttlGone = true
		}
	}
}

// checkpointed forgets what TTL passes removed before a checkpoint.
func (r *modelRun) checkpointed() {
	for id, row := range r.m.rows {
		if row.ttlGone {
			delete(r.m.rows, id)
		}
	}
	for id, d := range r.m.docs {
		if d.ttlGone {
			delete(r.m.docs, id)
		}
	}
}

func (r *modelRun) collMod() {
	var m CollModOptions
	var want *int64
	if r.rng.IntN(3) == 0 {
		m.ExpireOff = true
	} else {
		v := int64(1+r.rng.IntN(8)) * 3600
		m.ExpireAfterSeconds, want = &v, &v
	}
	_, err := r.db.CollMod(ctx, modelTS, m)
	r.note("collMod expireAfterSeconds %s: %v", ptrString(want), err)
	if err != nil {
		r.fatalf("collMod: %v", err)
	}
	r.checkpointed()
	r.m.collTTL = want
}

// changeIndex creates one of the model's indexes, or drops it if it exists.
func (r *modelRun) changeIndex() {
	hours := int64(1+r.rng.IntN(8)) * 3600
	var coll, name string
	var spec IndexSpec
	var exists bool
	var apply func(created bool)
	switch r.rng.IntN(4) {
	case 0: // partial TTL index on the meta field
		s := r.rng.IntN(modelSensor)
		coll, name = modelTS, fmt.Sprintf("ttl_s%d", s)
		spec = IndexSpec{Name: name, Key: []IndexKey{{"t", 1}}, ExpireAfterSeconds: &hours,
			PartialFilterExpression: map[string]any{"sensor": fmt.Sprintf("s%d", s)}}
		_, exists = r.m.tsTTL[s]
		apply = func(created bool) {
			if created {
				r.m.tsTTL[s] = hours
			} else {
				delete(r.m.tsTTL, s)
			}
		}
	case 1: // secondary index on the meta field
		coll, name = modelTS, "sensor_1"
		spec = IndexSpec{Name: name, Key: []IndexKey{{"sensor", 1}}}
		exists = r.m.tsIndex
		apply = func(created bool) { r.m.tsIndex = created }
	case 2: // TTL index of the plain collection
		coll, name = modelDocs, "at_1"
		spec = IndexSpec{Name: name, Key: []IndexKey{{"at", 1}}, ExpireAfterSeconds: &hours}
		exists = r.m.docsTTL != nil
		apply = func(created bool) {
			if created {
				r.m.docsTTL = &hours
			} else {
				r.m.docsTTL = nil
			}
		}
	default: // secondary index of the plain collection
		coll, name = modelDocs, "g_1"
		spec = IndexSpec{Name: name, Key: []IndexKey{{"g", 1}}}
		exists = r.m.docsG
		apply = func(created bool) { r.m.docsG = created }
	}
	if exists {
		err := r.db.DropIndex(ctx, coll, name)
		r.note("drop index %s.%s: %v", coll, name, err)
		if err != nil {
			r.fatalf("drop index %s.%s: %v", coll, name, err)
		}
		r.checkpointed()
		apply(false)
		return
	}
	_, _, err := r.db.CreateIndex(ctx, coll, spec)
	r.note("create index %s.%s (expireAfterSeconds %s): %v", coll, name, ptrString(spec.ExpireAfterSeconds), err)
	if err != nil {
		r.fatalf("create index %s.%s: %v", coll, name, err)
	}
	r.checkpointed()
	apply(true)
}

// crash cuts the power: syncs stop reaching the disk, the store is closed
// (what it writes from then on is lost) and the file system goes back to
// what was synced. With duringInsert, an insert is running when the power
// goes: its rows may or may not survive.
func (r *modelRun) crash(duringInsert bool) {
	var done chan struct{}
	if duringInsert {
		done = make(chan struct{})
		db := r.db
		if r.rng.IntN(2) == 0 {
			ms, ids := r.newRows()
			r.note("insert %d rows n=%d..%d across the crash", len(ms), ids[0], ids[len(ids)-1])
			go func() { db.Insert(ctx, modelTS, Batch{Measurements: ms}, InsertOptions{}); close(done) }()
		} else {
			docs, ids := r.newDocs()
			r.note("insert %d docs d%d..d%d across the crash", len(docs), ids[0], ids[len(ids)-1])
			go func() { db.Insert(ctx, modelDocs, Batch{Documents: docs}, InsertOptions{}); close(done) }()
		}
		time.Sleep(time.Duration(r.rng.IntN(200)) * time.Microsecond)
	}
	r.note("power cut")
	r.fs.SetIgnoreSyncs(true)
	if done != nil {
		<-done
	}
	r.restart()
}

// mergeCrash checkpoints (which marks the small buckets it writes) and
// cuts the power during the merge pass: between its batch and the flush
// that makes it durable, or at a random point.
func (r *modelRun) mergeCrash() {
	if err := r.db.Checkpoint(); err != nil {
		r.fatalf("checkpoint: %v", err)
	}
	r.checkpointed()
	db := r.db
	if r.rng.IntN(2) == 0 {
		r.note("checkpoint, merge, power cut between its batch and the flush")
		db.hooks.mergeApplied = func() { r.fs.SetIgnoreSyncs(true) }
		db.MergeBuckets(ctx) // the error does not matter
		r.fs.SetIgnoreSyncs(true)
	} else {
		r.note("checkpoint, merge across the crash")
		done := make(chan struct{})
		go func() { db.MergeBuckets(ctx); close(done) }()
		time.Sleep(time.Duration(r.rng.IntN(500)) * time.Microsecond)
		r.fs.SetIgnoreSyncs(true)
		<-done
	}
	r.restart()
}

// restart closes the store after a power cut (syncs ignored), brings the
// file system back to what was synced, reopens and checks.
func (r *modelRun) restart() {
	r.merged += r.db.stats.merged.Load()
	r.db.Close() // its writes are not synced: the error does not matter
	r.fs.ResetToSyncedState()
	for _, row := range r.m.rows {
		if row.ttlGone {
			row.ttlGone, row.maybe = false, true
		}
	}
	for _, d := range r.m.docs {
		if d.ttlGone {
			d.ttlGone, d.maybe = false, true
		}
	}
	r.fs.SetIgnoreSyncs(false)
	r.open()
	r.check(false)
	r.note("ttl pass after reopen")
	r.expireAll()
	r.check(true)
}

// check compares the store with the model. With counts, a TTL pass has just
// run at the current time, so the stored counts equal what a scan returns.
// modelValue is the field v of row id, of the kinds of store format 4:
// an int32, an ObjectId, a Decimal128 (BSON bytes), or none.
func modelValue(id int64) (model.Value, bool) {
	switch id % 4 {
	case 0:
		return model.Int32(int32(id)), true
	case 1:
		var oid [12]byte
		binary.BigEndian.PutUint64(oid[4:], uint64(id))
		oid[0] = 0x65
		return model.ObjectID(oid), true
	case 2:
		var dec [16]byte
		binary.LittleEndian.PutUint64(dec[:], uint64(id))
		dec[15] = 0x30
		dec[14] = 0x40 // exponent 0: the decimal id
		return model.BSONValue(0x13, dec[:]), true
	}
	return model.Value{}, false
}

// checkValues reads every row's field v with its BSON type and checks it
// is what modelValue wrote.
func (r *modelRun) checkValues() {
	r.t.Helper()
	cur, err := r.db.Find(ctx, modelTS, FindOptions{Fields: []string{"n", "v"}, OmitTime: true, OmitMeta: true, ExactTypes: true})
	if err != nil {
		r.fatalf("find n, v: %v", err)
	}
	defer cur.Close()
	for cur.Next() {
		rec := cur.Record()
		ns, ok := rec.Column(0).(*array.Int64)
		if !ok {
			r.fatalf("column n is %s", rec.Column(0).DataType())
		}
		vs := rec.Column(1)
		for i := range int(rec.NumRows()) {
			id := ns.Value(i)
			want, has := modelValue(id)
			if vs.IsNull(i) != !has {
				r.fatalf("row n=%d: field v present %v, written %v", id, !vs.IsNull(i), has)
			}
			if !has {
				continue
			}
			var got []byte
			switch a := vs.(type) {
			case *array.Binary: // several types: each value's BSON bytes
				got = a.Value(i)
			case *array.Int32:
				got = bsoncore.AppendInt32([]byte{byte(bsoncore.TypeInt32)}, a.Value(i))
			case *array.FixedSizeBinary:
				got = append([]byte{byte(bsoncore.TypeObjectID)}, a.Value(i)...)
			default:
				r.fatalf("column v is %s", vs.DataType())
			}
			col := bucket.Column{Type: want.Kind}
			switch want.Kind {
			case model.KindInt32:
				col.Ints = []int64{want.I}
			case model.KindObjectID:
				col.IDs = []byte(want.S)
			default:
				col.Strings = []string{want.S}
			}
			if w := appendCellBSON(nil, &col, 0); !bytes.Equal(got, w) {
				r.fatalf("row n=%d: field v %x, written %x", id, got, w)
			}
		}
	}
	if err := cur.Err(); err != nil {
		r.fatalf("find n, v: %v", err)
	}
}

func (r *modelRun) check(counts bool) {
	r.t.Helper()
	now := r.clock.Now().UnixNano()
	m := &r.m
	r.checkValues()

	// Time-series rows.
	got := map[int64]int64{}
	for _, row := range findRows(r.t, r.db, modelTS, FindOptions{Fields: []string{"n"}}) {
		v, ok := strings.CutPrefix(strings.TrimSpace(row.vals), "n=")
		id, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			r.fatalf("row %v: no field n", row)
		}
		if _, dup := got[id]; dup {
			r.fatalf("row n=%d returned twice", id)
		}
		got[id] = row.t
		mr := m.rows[id]
		switch {
		case mr == nil:
			r.fatalf("row n=%d (t %d) returned: deleted, expired or never written", id, row.t)
		case mr.ttlGone:
			r.fatalf("row n=%d returned after a TTL pass removed it", id)
		case mr.t != row.t:
			r.fatalf("row n=%d at %d, written at %d", id, row.t, mr.t)
		case m.rowExpired(mr, now):
			r.fatalf("row n=%d (sensor s%d, t %s) returned, expired (TTL %d s)", id, mr.sensor,
				time.Unix(0, mr.t).UTC().Format(time.RFC3339), m.rowTTL(mr.sensor))
		}
	}
	for id, mr := range m.rows {
		if mr.ttlGone || m.rowExpired(mr, now) {
			continue // hidden whether or not it is still stored
		}
		_, there := got[id]
		switch {
		case mr.maybe && there:
			mr.maybe = false
		case mr.maybe:
			delete(m.rows, id)
		case !there:
			r.fatalf("acknowledged row n=%d (sensor s%d, t %s) lost", id, mr.sensor, time.Unix(0, mr.t).UTC().Format(time.RFC3339))
		}
	}

	// Documents.
	gotDocs := map[int64]bool{}
	if _, err := EachDoc(r.db.Find(ctx, modelDocs, FindOptions{}))(func(d document.Doc) error {
		v := renderValue(d["_id"])
		id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(v, `"d`), `"`), 10, 64)
		if err != nil {
			return fmt.Errorf("document _id %s", v)
		}
		if gotDocs[id] {
			return fmt.Errorf("document d%d returned twice", id)
		}
		gotDocs[id] = true
		return nil
	}); err != nil {
		r.fatalf("find documents: %v", err)
	}
	for id := range gotDocs {
		md := m.docs[id]
		switch {
		case md == nil:
			r.fatalf("document d%d returned: deleted, expired or never written", id)
		case md.ttlGone:
			r.fatalf("document d%d returned after a TTL pass removed it", id)
		case m.docExpired(md, now):
			r.fatalf("document d%d returned, expired", id)
		}
	}
	for id, md := range m.docs {
		if md.ttlGone || m.docExpired(md, now) {
			continue
		}
		switch {
		case md.maybe && gotDocs[id]:
			md.maybe = false
		case md.maybe:
			delete(m.docs, id)
		case !gotDocs[id]:
			r.fatalf("acknowledged document d%d lost", id)
		}
	}

	// Indexes and TTL settings.
	var wantTS, wantDocs []string
	for s, e := range m.tsTTL {
		wantTS = append(wantTS, fmt.Sprintf("ttl_s%d:%d", s, e))
	}
	if m.tsIndex {
		wantTS = append(wantTS, "sensor_1:-")
	}
	wantDocs = append(wantDocs, "_id_:-")
	if m.docsTTL != nil {
		wantDocs = append(wantDocs, fmt.Sprintf("at_1:%d", *m.docsTTL))
	}
	if m.docsG {
		wantDocs = append(wantDocs, "g_1:-")
	}
	for _, c := range []struct {
		coll string
		want []string
	}{{modelTS, wantTS}, {modelDocs, wantDocs}} {
		specs, err := r.db.ListIndexes(ctx, c.coll)
		if err != nil {
			r.fatalf("list indexes of %s: %v", c.coll, err)
		}
		var have []string
		for _, s := range specs {
			e := "-"
			if s.ExpireAfterSeconds != nil {
				e = strconv.FormatInt(*s.ExpireAfterSeconds, 10)
			}
			have = append(have, s.Name+":"+e)
		}
		sort.Strings(have)
		sort.Strings(c.want)
		if !slices.Equal(have, c.want) {
			r.fatalf("indexes of %s: %v, want %v", c.coll, have, c.want)
		}
	}
	info, err := r.db.Describe(ctx, modelTS)
	if err != nil {
		r.fatalf("describe %s: %v", modelTS, err)
	}
	if ptrString(info.Options.ExpireAfterSeconds) != ptrString(m.collTTL) {
		r.fatalf("%s expireAfterSeconds %s, want %s", modelTS, ptrString(info.Options.ExpireAfterSeconds), ptrString(m.collTTL))
	}
	if !counts {
		return
	}
	if info.Count != int64(len(got)) {
		r.fatalf("%s: count %d, a scan returns %d", modelTS, info.Count, len(got))
	}
	dinfo, err := r.db.Describe(ctx, modelDocs)
	if err != nil {
		r.fatalf("describe %s: %v", modelDocs, err)
	}
	if dinfo.Count != int64(len(gotDocs)) {
		r.fatalf("%s: count %d, a scan returns %d", modelDocs, dinfo.Count, len(gotDocs))
	}
}

func ptrString(p *int64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatInt(*p, 10)
}
