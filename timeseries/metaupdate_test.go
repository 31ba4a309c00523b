package timeseries

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// metaRows is what a find returns of collection name: meta key -> the
// times of its measurements, sorted.
func metaRows(t *testing.T, db *DB, name string) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	for _, r := range findRows(t, db, name, FindOptions{}) {
		out[r.meta] = append(out[r.meta], r.t)
	}
	for _, ts := range out {
		slices.Sort(ts)
	}
	return out
}

func mustUpdate(t *testing.T, op string) *document.Update {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(op))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	u, err := document.ParseUpdate(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func canonKey(t *testing.T, v any) string {
	t.Helper()
	k, err := model.CanonicalMeta(v)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestMetaUpdate changes meta values with updateMany's operators ($set,
// $inc, $unset, $rename), over
// series in memory and stored: series move, merge into a series of their
// new value, and move all at once (an $inc of a meta field, where one
// series takes another's value); counts are of measurements; refused
// updates change nothing; a crash right after replays the updates to the
// same state, and so does a second crash in the store that recovery left.
func TestMetaUpdate(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, func(o *Options) { o.BucketMaxCount = 10 })
	defer func() { db.Close() }()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "meta"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	want := map[string][]int64{}
	insert := func(site string, n int64, from, count int) {
		t.Helper()
		meta := map[string]any{"site": site, "n": n}
		key := canonKey(t, meta)
		var ms []model.Measurement
		for i := from; i < from+count; i++ {
			tm := t0.Add(time.Duration(i) * time.Minute).UnixNano()
			ms = append(ms, model.Measurement{Time: tm, Meta: meta, Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
			want[key] = append(want[key], tm)
		}
		if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	insert("a", 1, 0, 25)
	insert("a", 2, 0, 15)
	insert("b", 1, 5, 30)
	insert("b", 2, 100, 12)
	if err := db.Checkpoint(); err != nil { // sealed buckets stored, open ones snapshots
		t.Fatal(err)
	}
	insert("a", 1, 25, 3) // in memory only
	insert("b", 2, 112, 4)
	key := func(site string, n any) string {
		m := map[string]any{"site": site}
		if n != nil {
			m["n"] = n
		}
		return canonKey(t, m)
	}
	move := func(from, to string) {
		want[to] = append(want[to], want[from]...)
		slices.Sort(want[to])
		delete(want, from)
	}
	check := func(db *DB, when string) {
		t.Helper()
		got := metaRows(t, db, "m")
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: series %v, want %v", when, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		total := 0
		for _, ts := range want {
			total += len(ts)
		}
		checkCount(t, db, "m", total)
		checkBucketBounds(t, db, "m")
	}
	update := func(filter, op string, matched, modified int64) {
		t.Helper()
		res, err := db.Update(ctx, "m", Update{Filter: mustFilter(t, filter), Operators: mustUpdate(t, op), Multi: true})
		if err != nil || res.Matched != matched || res.Modified != modified {
			t.Fatalf("update %s %s: %+v, %v; want matched %d, modified %d", filter, op, res, err, matched, modified)
		}
	}

	// a's two series to site c.
	update(`{"meta.site": "a"}`, `{"$set": {"meta.site": "c"}}`, 43, 43)
	move(key("a", 1), key("c", 1))
	move(key("a", 2), key("c", 2))
	check(db, "site a to c")
	// c/2 joins c/1.
	// (An int64, as the series were written: a JSON 1 is an int32, which
	// would make a series of its own, as MongoDB buckets by type.)
	update(`{"meta": {"$eq": {"n": 2, "site": "c"}}}`, `{"$set": {"meta.n": {"$numberLong": "1"}}}`, 15, 15)
	move(key("c", 2), key("c", 1))
	check(db, "c/2 into c/1")
	// All at once: b/1 takes n 2 while b/2 takes n 3.
	update(`{"meta.site": "b"}`, `{"$inc": {"meta.n": 1}}`, 46, 46)
	move(key("b", 2), key("b", 3))
	move(key("b", 1), key("b", 2))
	check(db, "b's n + 1")
	// Nothing changes: matched, not modified.
	update(`{"meta.site": "b"}`, `{"$set": {"meta.site": "b"}}`, 46, 0)
	update(`{"meta.site": "nowhere"}`, `{"$set": {"meta.site": "b"}}`, 0, 0)
	// Measurements inserted with an old value make its series again.
	insert("b", 3, 200, 2)
	move(key("b", 3), key("b", 4)) // model: the new rows after the next update
	update(`{"meta.site": "b", "meta.n": {"$gte": 3}}`, `{"$unset": {"meta.n": ""}}`, 16+2, 16+2)
	move(key("b", 4), key("b", nil))
	check(db, "n unset")
	// A sub-field renamed.
	update(`{"meta.site": "b"}`, `{"$rename": {"meta.site": "meta.place"}}`, 30+18, 30+18)
	move(key("b", 2), canonKey(t, map[string]any{"place": "b", "n": int64(2)}))
	move(key("b", nil), canonKey(t, map[string]any{"place": "b"}))
	check(db, "site renamed place")

	// Refusals, with MongoDB's codes: nothing changes.
	refused := []struct {
		u    Update
		code mongoerr.Code
	}{
		{Update{Filter: mustFilter(t, `{"v": 3}`), Operators: mustUpdate(t, `{"$set": {"meta.x": 1}}`), Multi: true}, mongoerr.InvalidOptions},
		{Update{Filter: mustFilter(t, `{"meta.site": "b"}`), Operators: mustUpdate(t, `{"$set": {"v": 1}}`), Multi: true}, mongoerr.InvalidOptions},
		// Out of the metaField, into a measurement field.
		{Update{Filter: mustFilter(t, `{}`), Operators: mustUpdate(t, `{"$rename": {"meta.place": "place"}}`), Multi: true}, mongoerr.InvalidOptions},
		{Update{Filter: mustFilter(t, `{"meta.site": "b"}`), Operators: mustUpdate(t, `{"$set": {"meta.x": 1}}`)}, mongoerr.InvalidOptions},
		{Update{Filter: mustFilter(t, `{}`), Replacement: document.Doc{"meta": 1}}, mongoerr.InvalidOptions},
		// site is a string: no path goes through it.
		{Update{Filter: mustFilter(t, `{}`), Operators: mustUpdate(t, `{"$set": {"meta.site.x": 1}}`), Multi: true}, mongoerr.BadValue},
	}
	for _, r := range refused {
		if _, err := db.Update(ctx, "m", r.u); mongoerr.CodeOf(err) != r.code {
			t.Fatalf("update %+v: %v, want code %d", r.u, err, r.code)
		}
	}
	mustCreate(t, db, "nometa", model.TimeSeriesOptions{TimeField: "t"})
	if _, err := db.Update(ctx, "nometa", Update{Operators: mustUpdate(t, `{"$set": {"x": 1}}`), Multi: true}); mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("update without a metaField: %v", err)
	}
	check(db, "after the refusals")

	// A crash: replay makes the updates again, with a checkpoint each.
	crash(db)
	db = openTest(t, dir, nil)
	check(db, "after a crash")
	insert("c", 1, 300, 1) // more log after the recovery
	update(`{"meta.site": "c"}`, `{"$set": {"meta.site": "d"}}`, 44, 44)
	move(key("c", 1), key("d", 1))
	crash(db)
	db = openTest(t, dir, nil)
	check(db, "after a second crash")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	check(db, "reopened")
}

// TestMetaUpdateReplayed: a meta update whose checkpoint did not write
// (a failing store) is replayed from the log after a crash, with a
// checkpoint of its own during recovery; a second crash in the store that
// recovery left replays what was logged after the update, and makes the
// update no second time: the update moves a series onto a value another
// series leaves (n 1 -> 2, 2 -> 3), which made twice would move the
// measurements on. The DB that failed writes the update's stored part
// before its next delete reads the stored buckets.
func TestMetaUpdateReplayed(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, func(o *Options) { o.BucketMaxCount = 8 })
	defer func() { db.Close() }()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "n"})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var ms []model.Measurement
	for i := range 40 {
		ms = append(ms, model.Measurement{Time: t0 + int64(i)*int64(time.Minute), Meta: int64(i%2 + 1), Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil { // sealed and stored
		t.Fatal(err)
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms[:4]}, InsertOptions{}); err != nil { // log only
		t.Fatal(err)
	}
	db.hooks.checkpointWrite = func() error { return errors.New("injected: the store does not write") }
	if _, err := db.Update(ctx, "m", Update{Filter: mustFilter(t, `{}`), Operators: mustUpdate(t, `{"$inc": {"n": 1}}`), Multi: true}); err == nil {
		t.Fatal("the update's checkpoint failed, the update did not say so")
	}
	db.hooks.checkpointWrite = nil
	// More log after the update's record: replay goes on after it.
	late := []model.Measurement{ms[4], ms[5]}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: late}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{}
	for _, m := range append(ms, ms[:4]...) {
		k := fmt.Sprint(m.Meta.(int64) + 1)
		want[k] = append(want[k], m.Time)
	}
	for _, m := range late {
		k := fmt.Sprint(m.Meta.(int64))
		want[k] = append(want[k], m.Time)
	}
	for _, ts := range want {
		slices.Sort(ts)
	}
	re := openTest(t, crashCopy(t, db, dir), nil)
	defer func() { re.Close() }()
	if got := metaRows(t, re, "m"); !reflect.DeepEqual(got, want) {
		t.Fatalf("crash copy: %v, want %v", got, want)
	}
	re2 := openTest(t, crashCopy(t, re, re.opts.Dir), nil)
	defer func() { re2.Close() }()
	if got := metaRows(t, re2, "m"); !reflect.DeepEqual(got, want) {
		t.Fatalf("crash copy of the recovered store: %v, want %v", got, want)
	}
	checkCount(t, re2, "m", 46)
	// The DB that failed: a delete of a series the update moved
	// measurements to removes them all, stored ones included (it makes
	// the update's stored part first).
	n, err := db.Delete(ctx, "m", mustFilter(t, `{"n": 3}`), DeleteOptions{})
	if err != nil || n != int64(len(want["3"])) {
		t.Fatalf("delete of n 3 after the failed checkpoint: %d, %v; want %d", n, err, len(want["3"]))
	}
	delete(want, "3")
	if got := metaRows(t, db, "m"); !reflect.DeepEqual(got, want) {
		t.Fatalf("the DB that failed, after a delete: %v, want %v", got, want)
	}
	checkBucketBounds(t, db, "m")
}
