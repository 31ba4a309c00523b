package timeseries

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// lfRow is a row of the listing model: its sensor, time and the fields
// that hold a number.
type lfRow struct {
	sensor string
	t      int64
	nums   []string
	v      float64 // its v, when v is in nums
}

// TestSeriesFieldsDifferential lists series and their fields holding
// numbers (SeriesFields) and the sensors (DistinctMeta, HasRows) over random
// ranges after random inserts (late rows, fields missing, a field
// changing type), checkpoints, deletes by range and by field, meta
// updates and TTL changes and passes, and compares them with a model of
// the rows; then again after a reopen, when no series' newest row is
// known. The series' newest rows must settle some listings (lastKnown).
func TestSeriesFieldsDifferential(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { seriesFieldsRun(t, seed) })
	}
}

func seriesFieldsRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	clock := newTestClock(t0.Add(6 * time.Hour))
	dir := t.TempDir()
	db := openTTL(t, dir, clock, nil)
	defer func() { db.Close() }()
	// New sensors come as the steps go (a delete, a meta update or a TTL
	// change leaves a series' newest row unknown for good): the rows of
	// step n go to the sensors of [n/4, n/4+8).
	var sensors []string
	for i := range 90 {
		sensors = append(sensors, fmt.Sprintf("%c%d", 'a'+i%16, i))
	}
	step := 0
	sensor := func() string { return sensors[step/4+rng.IntN(8)] }
	var rows []lfRow
	ttl := int64(-1) // the collection's TTL, seconds; -1: none
	// floor is the latest cutoff of a TTL pass.
	floor := int64(-1 << 63)
	// Times are minutes of the 5 hours up to an hour before the clock,
	// which moves on: rows keep coming within the TTL.
	minute := func(n int) int64 {
		return clock.Now().Add(-6 * time.Hour).Truncate(time.Minute).Add(time.Duration(n) * time.Minute).UnixNano()
	}
	insert := func() {
		var ms []model.Measurement
		for range 1 + rng.IntN(12) {
			r := lfRow{sensor: sensor(), t: minute(rng.IntN(300))}
			var fs []model.Field
			add := func(name string, v model.Value) {
				fs = append(fs, model.Field{Name: name, Value: v})
				if numberKind(v.Kind) {
					r.nums = append(r.nums, name)
				}
				if name == "v" {
					r.v = max(v.F, float64(v.I))
				}
			}
			// Most rows of a sensor hold the same fields (by the
			// sensor's letter); one in five any.
			profile := int(r.sensor[0] - 'a')
			if rng.IntN(5) == 0 {
				profile = rng.IntN(16)
			}
			if profile&1 == 0 {
				add("v", model.Int(rng.Int64N(100)))
			}
			if profile&2 != 0 {
				add("w", model.Float(rng.Float64()))
			}
			if profile&4 != 0 {
				add("s", model.String("x"))
			}
			if profile&8 != 0 { // a number or a text
				if rng.IntN(2) == 0 {
					add("m", model.Int32(3))
				} else {
					add("m", model.String("three"))
				}
			}
			if len(fs) == 0 {
				add("v", model.Float(1.5))
			}
			ms = append(ms, model.Measurement{Time: r.t, Meta: r.sensor, Fields: fs})
			rows = append(rows, r)
		}
		if res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Fatalf("insert: %v %v", err, res.Errors)
		}
	}
	date := func(ns int64) string {
		return `{"$date": "` + time.Unix(0, ns).UTC().Format(time.RFC3339Nano) + `"}`
	}
	// check compares listings of random ranges and fields with the model.
	check := func(when string) {
		t.Helper()
		visible := int64(-1 << 63)
		if ttl >= 0 {
			visible = clock.Now().UnixNano() - ttl*1e9
		}
		for range 6 {
			lo, hi := minute(rng.IntN(320)-10), minute(rng.IntN(320)-10)
			if lo > hi {
				lo, hi = hi, lo
			}
			switch k := rng.IntN(3); {
			case k == 0:
				// The last minutes, as listings mostly ask.
				hi = minute(300 + rng.IntN(5))
				lo = hi - int64(rng.IntN(90))*int64(time.Minute)
			case k == 1 && len(rows) > 0:
				// Around a row: a series' newest row, or one just
				// before or after the range, decides more of them.
				at := rows[rng.IntN(len(rows))].t
				lo, hi = at-int64(rng.IntN(3))*int64(time.Minute), at+int64(rng.IntN(3)-1)*int64(time.Minute)
			}
			lo = max(lo, floor)
			var fields []string
			if rng.IntN(2) == 0 {
				fields = []string{[]string{"v", "w", "m", "s", "none"}[rng.IntN(5)]}
			}
			filter := fmt.Sprintf(`{"t": {"$gte": %s, "$lte": %s}}`, date(lo), date(hi))
			if rng.IntN(3) == 0 {
				filter = fmt.Sprintf(`{"sensor": {"$in": [%q, %q]}, "t": {"$gte": %s, "$lte": %s}}`, sensor(), sensor(), date(lo), date(hi))
			}
			want, wantSensors := map[string]bool{}, map[string]bool{}
			for _, r := range rows {
				if r.t < lo || r.t > hi || r.t < visible || strings.Contains(filter, "$in") && !strings.Contains(filter, strconv.Quote(r.sensor)) {
					continue
				}
				wantSensors[r.sensor] = true
				for _, f := range r.nums {
					if fields == nil || slices.Contains(fields, f) {
						want[r.sensor+"."+f] = true
					}
				}
			}
			// EarliestLast of fields that only ever hold numbers: the
			// earliest of each sensor's last row holding one. Asked first
			// or last: first, after a reopen, it reads series back itself.
			earliest := func() {
				ef := [][]string{{"v"}, {"w"}, {"v", "w"}}[rng.IntN(3)]
				lastOf := map[string]int64{}
				for _, r := range rows {
					if r.t < lo || r.t > hi || r.t < visible || strings.Contains(filter, "$in") && !strings.Contains(filter, strconv.Quote(r.sensor)) {
						continue
					}
					for _, f := range r.nums {
						if k := r.sensor + "." + f; slices.Contains(ef, f) && (lastOf[k] == 0 || r.t > lastOf[k]) {
							lastOf[k] = r.t
						}
					}
				}
				wantT, wantOK := int64(0), false
				for _, lt := range lastOf {
					if !wantOK || lt < wantT {
						wantT, wantOK = lt, true
					}
				}
				if gotT, ok, err := db.EarliestLast(ctx, "s", mustFilter(t, filter), ef); err != nil || ok != wantOK || ok && gotT != wantT {
					t.Fatalf("%s: EarliestLast %s %v: %v %v %v, want %v %v", when, filter, ef, time.Unix(0, gotT).UTC(), ok, err, time.Unix(0, wantT).UTC(), wantOK)
				}
			}
			first := rng.IntN(2) == 0
			if first {
				earliest()
			}
			list, err := db.SeriesFields(ctx, "s", mustFilter(t, filter), fields)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, s := range list {
				sensor, _ := model.MetaOfKey(s.Key).(string)
				for _, f := range s.Fields {
					if got[sensor+"."+f] {
						t.Errorf("%s: %s.%s listed twice", when, sensor, f)
					}
					got[sensor+"."+f] = true
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: SeriesFields %s %v:\n got %v\nwant %v", when, filter, fields, got, want)
			}
			vals, err := db.DistinctMeta(ctx, "s", "sensor", mustFilter(t, filter))
			if err != nil {
				t.Fatal(err)
			}
			gotSensors := map[string]bool{}
			for _, v := range vals {
				gotSensors[v.(string)] = true
			}
			if fmt.Sprint(gotSensors) != fmt.Sprint(wantSensors) {
				t.Fatalf("%s: DistinctMeta %s:\n got %v\nwant %v", when, filter, gotSensors, wantSensors)
			}
			if has, err := db.HasRows(ctx, "s", mustFilter(t, filter)); err != nil || has != (len(wantSensors) > 0) {
				t.Fatalf("%s: HasRows %s: %v %v, want %v", when, filter, has, err, len(wantSensors) > 0)
			}
			if !first {
				earliest()
			}
		}
	}
	known := readStats.lastKnown.Load()
	steps := func(n int) {
		for end := step + n; step < end; step++ {
			k := rng.IntN(20)
			t.Logf("step %d: op %d, clock %s, ttl %d", step, k, clock.Now().Format(time.TimeOnly), ttl)
			switch {
			case k < 10:
				insert()
			case k < 13:
				if err := db.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			case k < 14:
				// Idle buckets are sealed and leave memory.
				clock.Advance(time.Duration(1+rng.IntN(30)) * time.Minute)
				if err := db.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			case k < 16:
				s, lo, hi := sensor(), minute(rng.IntN(300)), minute(rng.IntN(300))
				filter := fmt.Sprintf(`{"sensor": %q, "t": {"$gte": %s, "$lt": %s}}`, s, date(lo), date(hi))
				byField := rng.IntN(2) == 0
				if byField {
					filter = fmt.Sprintf(`{"sensor": %q, "v": {"$lt": 50}}`, s)
				}
				if _, err := db.Delete(ctx, "s", mustFilter(t, filter), DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				rows = slices.DeleteFunc(rows, func(r lfRow) bool {
					if r.sensor != s {
						return false
					}
					if byField {
						// v < 50 on the rows whose v is a number below 50.
						return slices.Contains(r.nums, "v") && r.v < 50
					}
					return r.t >= lo && r.t < hi
				})
			case k < 17:
				from, to := sensor(), sensor()
				if _, err := db.Update(ctx, "s", Update{Filter: mustFilter(t, fmt.Sprintf(`{"sensor": %q}`, from)),
					Operators: mustUpdate(t, fmt.Sprintf(`{"$set": {"sensor": %q}}`, to)), Multi: true}); err != nil {
					t.Fatal(err)
				}
				for i := range rows {
					if rows[i].sensor == from {
						rows[i].sensor = to
					}
				}
			case k < 18:
				var m CollModOptions
				if rng.IntN(3) == 0 {
					m.ExpireOff, ttl = true, -1
				} else {
					ttl = int64(3600 * (2 + rng.IntN(6)))
					m.ExpireAfterSeconds = &ttl
				}
				if _, err := db.CollMod(ctx, "s", m); err != nil {
					t.Fatal(err)
				}
			default:
				if ttl >= 0 {
					// The pass deletes the buckets wholly before the cutoff:
					// which rows before it are left is the buckets' to say,
					// so no range reaches before it from now on
					// (TestSeriesFieldsTTLLonger checks those rows).
					now := clock.Now()
					expireAll(t, db, now)
					floor = max(floor, now.UnixNano()-ttl*1e9)
				}
			}
			check(fmt.Sprintf("step %d", step))
		}
	}
	steps(200)
	if n := readStats.lastKnown.Load() - known; n < 100 {
		t.Fatalf("%d series settled by their newest rows, want 100 or more", n)
	} else {
		t.Logf("%d series settled by their newest rows", n)
	}
	// Reopened, no series' newest row is known: the first reads read
	// back those of the stored ones, and later ones are settled by
	// them, through more steps.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	known, recovered := readStats.lastKnown.Load(), readStats.lastRecovered.Load()
	check("reopened")
	steps(100)
	if n, r := readStats.lastKnown.Load()-known, readStats.lastRecovered.Load()-recovered; n < 50 || r < 20 {
		t.Fatalf("reopened: %d series settled by their newest rows, %d read back; want 50 and 20 or more", n, r)
	} else {
		t.Logf("reopened: %d series settled by their newest rows, %d read back", n, r)
	}
}

// listFields returns a SeriesFields listing of [from, to] in collection s
// as "sensor.field" texts, sorted, and how many series their newest rows
// settled.
func listFields(t *testing.T, db *DB, from, to time.Time) (string, int64) {
	t.Helper()
	before := readStats.lastKnown.Load()
	f := mustFilter(t, fmt.Sprintf(`{"t": {"$gte": {"$date": %q}, "$lte": {"$date": %q}}}`, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano)))
	list, err := db.SeriesFields(ctx, "s", f, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list {
		for _, name := range s.Fields {
			out = append(out, fmt.Sprintf("%v.%s", model.MetaOfKey(s.Key), name))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " "), readStats.lastKnown.Load() - before
}

// A series' newest row stops settling listings when rows it does not see
// come or go: a longer TTL after a pass deleted its newest rows, another
// series' stored buckets moved into it by a meta update. Rows of one time
// in two buckets (a field changing type) settle it with both buckets'
// fields.
func TestSeriesFieldsNewestRowChanges(t *testing.T) {
	clock := newTestClock(t0)
	db := openTTL(t, t.TempDir(), clock, int64p(3600))
	defer db.Close()
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	ins := func(sensor string, m int, fs ...model.Field) {
		t.Helper()
		ms := []model.Measurement{{Time: at(m).UnixNano(), Meta: sensor, Fields: fs}}
		if res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Fatalf("insert: %v %v", err, res.Errors)
		}
	}
	v := model.Field{Name: "v", Value: model.Int(1)}
	ins("x", 10, v)
	ins("x", 20, v)
	// m as a number, then as text with v, at one time: two buckets.
	ins("tie", 20, model.Field{Name: "m", Value: model.Int32(3)})
	ins("tie", 20, model.Field{Name: "m", Value: model.String("three")}, v)
	ins("y", 5, model.Field{Name: "w", Value: model.Float(2)})
	clock.Set(at(30))
	if got, settled := listFields(t, db, at(0), at(30)); got != "tie.m tie.v x.v y.w" || settled != 3 {
		t.Fatalf("in memory: %q, %d settled", got, settled)
	}
	storeAll(t, db, clock)
	clock.Set(at(50))
	if got, settled := listFields(t, db, at(0), at(30)); got != "tie.m tie.v x.v y.w" || settled != 3 {
		t.Fatalf("stored: %q, %d settled", got, settled)
	}
	// y takes x's stored buckets: its rows after y's newest.
	if _, err := db.Update(ctx, "s", Update{Filter: mustFilter(t, `{"sensor": "x"}`), Operators: mustUpdate(t, `{"$set": {"sensor": "y"}}`), Multi: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := listFields(t, db, at(15), at(30)); got != "tie.m tie.v y.v" {
		t.Fatalf("after the meta update: %q", got)
	}
	// All but z's row is past the TTL, and deleted by a pass: a longer
	// TTL shows no more.
	ins("z", 190, v)
	clock.Set(at(200))
	expireAll(t, db, clock.Now())
	if _, err := db.CollMod(ctx, "s", CollModOptions{ExpireAfterSeconds: int64p(100 * 3600)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := listFields(t, db, at(0), at(200)); got != "z.v" {
		t.Fatalf("after a pass and a longer TTL: %q", got)
	}
}

// A bucket's lastNum is the columns holding a number in its rows at
// maxT, through appends in and out of time order and deletes.
func TestMemBucketLastNumbers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		b := &memBucket{span: int64(time.Hour)}
		c, open := &collection{}, rng.IntN(2) == 0 // open rows, or plain ones
		names := []string{"a", "b", "c"}
		for range 1 + rng.IntN(20) {
			var fs []model.Field
			for _, n := range names {
				switch rng.IntN(3) {
				case 0:
					fs = append(fs, model.Field{Name: n, Value: model.Float(1)})
				case 1:
					if n == "c" {
						fs = append(fs, model.Field{Name: n, Value: model.String("t")})
					}
				}
			}
			if b.typeChange(fs) {
				continue // the row goes to another bucket (fits)
			}
			b.appendRow(int64(rng.IntN(10)), 1, fs, c, open)
			if rng.IntN(4) == 0 {
				lo := int64(rng.IntN(10))
				b.deleteRows(lo, lo+int64(rng.IntN(3)), nil, "t")
			}
			all := b.capture().cols
			if num, _ := lastNumbers(&all, b.maxT); b.rows() > 0 && num != b.lastNum {
				t.Fatalf("lastNum %b, want %b: times %v", b.lastNum, num, all.Times)
			}
		}
	}
}

// A delete between the read of a series' newest stored row and its use
// leaves the series unknown: what was read is older than the delete.
func TestSeriesFieldsReadBackRace(t *testing.T) {
	clock := newTestClock(t0)
	dir := t.TempDir()
	db := openTTL(t, dir, clock, nil)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for m := range 30 {
		ms := []model.Measurement{{Time: at(m).UnixNano(), Meta: "x", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}
		if res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Fatalf("insert: %v %v", err, res.Errors)
		}
	}
	storeAll(t, db, clock)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	db.hooks.lastRead = func() {
		db.hooks.lastRead = nil
		f := mustFilter(t, fmt.Sprintf(`{"sensor": "x", "t": {"$gte": {"$date": %q}}}`, at(20).Format(time.RFC3339)))
		if _, err := db.Delete(ctx, "s", f, DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
	// The first listing reads the rows (and back the newest, 29),
	// before the delete; the later ones must not take 29 for newest.
	if got, _ := listFields(t, db, at(25), at(40)); got != "x.v" {
		t.Fatalf("the listing the delete came in: %q", got)
	}
	for range 2 {
		if got, _ := listFields(t, db, at(25), at(40)); got != "" {
			t.Fatalf("after the delete: %q", got)
		}
	}
}

// A TTL pass and a longer TTL between the read of a series' newest
// stored row and its use leave the series unknown: the row read was
// deleted, and the longer TTL would show its time.
func TestSeriesFieldsReadBackTTL(t *testing.T) {
	clock := newTestClock(t0)
	dir := t.TempDir()
	db := openTTL(t, dir, clock, int64p(3600))
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	ms := []model.Measurement{{Time: at(29).UnixNano(), Meta: "x", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}},
		{Time: at(500).UnixNano(), Meta: "y", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}
	if res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
		t.Fatalf("insert: %v %v", err, res.Errors)
	}
	storeAll(t, db, clock)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Set(at(85)) // x's row visible until 89
	db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	db.hooks.lastRead = func() {
		db.hooks.lastRead = nil
		clock.Set(at(95))
		expireAll(t, db, clock.Now()) // x's bucket goes
		if _, err := db.CollMod(ctx, "s", CollModOptions{ExpireAfterSeconds: int64p(100 * 3600)}); err != nil {
			t.Error(err)
		}
	}
	if got, _ := listFields(t, db, at(0), at(600)); got != "x.v y.v" {
		t.Fatalf("the listing the pass came in: %q", got)
	}
	for range 2 {
		if got, _ := listFields(t, db, at(0), at(600)); got != "y.v" {
			t.Fatalf("after the pass and a longer TTL: %q", got)
		}
	}
}

// Listings and number reads run beside inserts and checkpoints (the race
// detector watches the newest rows kept and read back), on a store
// reopened so that its series are read back.
func TestSeriesFieldsConcurrent(t *testing.T) {
	clock := newTestClock(t0)
	dir := t.TempDir()
	db := openTTL(t, dir, clock, nil)
	ins := func(db *DB, from, n int) {
		var ms []model.Measurement
		for i := range n {
			ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(from+i) * time.Second).UnixNano(), Meta: fmt.Sprintf("s%d", i%50),
				Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
		}
		if res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Errorf("insert: %v %v", err, res.Errors)
		}
	}
	ins(db, 0, 2000)
	storeAll(t, db, clock)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := range 40 {
			ins(db, 2000+50*k, 50)
			if k%10 == 0 {
				if err := db.Checkpoint(); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	f := mustFilter(t, `{"t": {"$gte": {"$date": "2024-05-01T00:00:00Z"}}}`)
	for {
		select {
		case <-done:
			return
		default:
		}
		list, err := db.SeriesFields(ctx, "s", f, nil)
		if err != nil || len(list) != 50 {
			t.Fatalf("SeriesFields: %d series, %v", len(list), err)
		}
		n := 0
		if err := db.ReadNumbers(ctx, "s", f, nil, func(_, _ string, ts []int64, _ []float64) error { n += len(ts); return nil }); err != nil || n < 2000 {
			t.Fatalf("ReadNumbers: %d numbers, %v", n, err)
		}
		if has, err := db.HasRows(ctx, "s", f); err != nil || !has {
			t.Fatalf("HasRows: %v %v", has, err)
		}
	}
}

// insertOne stores one measurement of sensor at t into collection s.
func insertOne(t *testing.T, db *DB, sensor any, at time.Time, fs ...model.Field) {
	t.Helper()
	ms := []model.Measurement{{Time: at.UnixNano(), Meta: sensor, Fields: fs}}
	if res, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
		t.Fatalf("insert: %v %v", err, res.Errors)
	}
}

// A TTL pass deleted x's rows; a measurement outside 1970..2038 then
// suspends expiry, so the read's bound no longer hides x's newest row,
// which the pass deleted: x is not listed from it.
func TestSeriesFieldsExpirySuspended(t *testing.T) {
	clock := newTestClock(t0)
	db := openTTL(t, t.TempDir(), clock, int64p(3600))
	defer db.Close()
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	v := model.Field{Name: "v", Value: model.Int(1)}
	insertOne(t, db, "x", at(10), v)
	storeAll(t, db, clock)
	clock.Set(at(200))
	expireAll(t, db, clock.Now())
	insertOne(t, db, "o", time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), v)
	if got, _ := listFields(t, db, at(0), at(300)); got != "" {
		t.Fatalf("listed from a deleted newest row: %q", got)
	}
	f := mustFilter(t, `{"sensor": "x"}`)
	if has, err := db.HasRows(ctx, "s", f); err != nil || has {
		t.Fatalf("HasRows of x: %v %v", has, err)
	}
	if vals, err := db.DistinctMeta(ctx, "s", "sensor", mustFilter(t, fmt.Sprintf(`{"t": {"$gte": {"$date": %q}}}`, at(0).Format(time.RFC3339)))); err != nil || len(vals) != 0 {
		t.Fatalf("DistinctMeta: %v %v", vals, err)
	}
}

// A field past the 32nd name, holding a number in an older row of x
// only, is listed after a reopen too, when x's newest row read back (it
// has no bit for it) does not hold it.
func TestSeriesFieldsNamesPast32(t *testing.T) {
	clock := newTestClock(t0)
	dir := t.TempDir()
	db := openTTL(t, dir, clock, nil)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	var filler []model.Field
	for i := range 40 {
		filler = append(filler, model.Field{Name: fmt.Sprintf("s%02d", i), Value: model.String("x")})
	}
	insertOne(t, db, "x", at(10), model.Field{Name: "v", Value: model.Int(1)})
	insertOne(t, db, "other", at(1), filler...)
	insertOne(t, db, "x", at(10), model.Field{Name: "far", Value: model.Int(1)})
	insertOne(t, db, "x", at(20), model.Field{Name: "v", Value: model.Int(2)})
	storeAll(t, db, clock)
	if got, _ := listFields(t, db, at(0), at(30)); got != "x.far x.v" {
		t.Fatalf("before a reopen: %q", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	for range 2 { // reading back, then read back
		if got, _ := listFields(t, db, at(0), at(30)); got != "x.far x.v" {
			t.Fatalf("after a reopen: %q", got)
		}
	}
	f := mustFilter(t, fmt.Sprintf(`{"t": {"$gte": {"$date": %q}}}`, at(0).Format(time.RFC3339)))
	if l, err := db.SeriesFields(ctx, "s", f, []string{"far"}); err != nil || len(l) != 1 || !slices.Equal(l[0].Fields, []string{"far"}) {
		t.Fatalf("far alone: %v %v", l, err)
	}
}

// HasRows counts the series of no meta value (missing or an empty array)
// too, which DistinctMeta gives no value for.
func TestHasRowsWithoutMeta(t *testing.T) {
	db := openTTL(t, t.TempDir(), newTestClock(t0), nil)
	defer db.Close()
	v := model.Field{Name: "v", Value: model.Int(1)}
	insertOne(t, db, nil, t0, v)
	insertOne(t, db, []any{}, t0, v)
	if has, err := db.HasRows(ctx, "s", nil); err != nil || !has {
		t.Fatalf("HasRows: %v %v", has, err)
	}
	if has, err := db.HasRows(ctx, "s", mustFilter(t, `{"sensor": "y"}`)); err != nil || has {
		t.Fatalf("HasRows of y: %v %v", has, err)
	}
	f := mustFilter(t, fmt.Sprintf(`{"t": {"$gte": {"$date": %q}}}`, t0.Format(time.RFC3339)))
	if l, err := db.SeriesFields(ctx, "s", f, nil); err != nil || len(l) != 2 || l[0].Key != "null" && l[1].Key != "null" {
		t.Fatalf("SeriesFields: %v %v", l, err)
	}
}
