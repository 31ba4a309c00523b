package timeseries

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
)

// whereRow is a measurement of the model TestDeleteByFilter keeps.
type whereRow struct {
	site string
	t    int64
	v    any // int64, or a string
	flag bool
}

func (r whereRow) key() string { return fmt.Sprintf(`{"site":%q} %d`, r.site, r.t) }

// whereRows is what a find returns of collection name, as whereRow keys,
// sorted.
func whereRows(t *testing.T, db *DB, name string) []string {
	t.Helper()
	var out []string
	for _, r := range findRows(t, db, name, FindOptions{}) {
		out = append(out, fmt.Sprintf("%s %d", r.meta, r.t))
	}
	slices.Sort(out)
	return out
}

// checkBucketBounds checks that collection name's bucket count is the buckets
// it holds (in memory, and stored without a newer copy in memory), and
// that every bucket's time bounds are those of its rows: the bounds that
// scans prune by and expiry goes by.
func checkBucketBounds(t *testing.T, db *DB, name string) {
	t.Helper()
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	db.mu.RLock()
	c := db.coll.byName[name]
	inMem := map[uint64]bool{}
	var n int64
	for _, s := range c.byID {
		for _, b := range s.buckets {
			inMem[b.id] = true
			if b.rows() == 0 {
				t.Fatalf("series %s: an empty bucket in memory", s.metaKey)
			}
			n++
			all := b.capture().cols.Times
			lo, hi := slices.Min(all), slices.Max(all)
			if b.minT != lo || b.maxT != hi {
				t.Fatalf("series %s bucket %d: bounds [%d, %d], rows [%d, %d]", s.metaKey, b.id, b.minT, b.maxT, lo, hi)
			}
		}
	}
	want := c.buckets
	names := c.names
	db.mu.RUnlock()
	p := collPrefix(spaceBucket, c.id)
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var r bucket.Reader
	for it.First(); it.Valid(); it.Next() {
		kp, err := parseBucketKey(it.Key())
		if err != nil {
			t.Fatal(err)
		}
		if inMem[kp.id] {
			continue
		}
		if err := r.ResetNames(it.Value(), names); err != nil {
			t.Fatal(err)
		}
		times, err := r.Times(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(times) == 0 {
			t.Fatalf("stored bucket %d is empty", kp.id)
		}
		n++
		if lo, hi := slices.Min(times), slices.Max(times); r.MinTime() != lo || r.MaxTime() != hi {
			t.Fatalf("stored bucket %d: bounds [%d, %d], rows [%d, %d]", kp.id, r.MinTime(), r.MaxTime(), lo, hi)
		}
	}
	if n != want {
		t.Fatalf("%s: %d buckets held, the collection counts %d", name, n, want)
	}
}

// TestDeleteByFilter deletes by conditions on measurement fields, alone
// and with the metaField and the timeField, from buckets in memory and
// stored: the rows left are those of a model, the count and the bucket
// count are exact, bucket bounds follow their rows, a type whose last
// value went is no longer listed, and a crash right after replays the
// deletes to the same state.
func TestDeleteByFilter(t *testing.T) {
	for _, stored := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "stored"}[stored], func(t *testing.T) {
			dir := t.TempDir()
			db := openTest(t, dir, func(o *Options) { o.BucketMaxCount = 10 })
			defer func() { db.Close() }()
			mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "meta"})
			t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			var rows []whereRow
			var ms []model.Measurement
			for _, site := range []string{"x", "y", "z"} {
				for i := range 100 {
					r := whereRow{site: site, t: t0.Add(time.Duration(i) * time.Minute).UnixNano(), v: int64(i - 50), flag: site == "z"}
					f := []model.Field{{Name: "v", Value: model.Int(int64(i - 50))}}
					if i%7 == 3 {
						r.v = "s"
						f[0].Value = model.String("s")
					}
					if r.flag {
						f = append(f, model.Field{Name: "flag", Value: model.Bool(true)})
					}
					rows = append(rows, r)
					ms = append(ms, model.Measurement{Time: r.t, Meta: map[string]any{"site": site}, Fields: f})
				}
			}
			if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
				t.Fatal(err)
			}
			if stored {
				if err := db.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			num := func(r whereRow) (int64, bool) { v, ok := r.v.(int64); return v, ok }
			steps := []struct {
				filter string
				match  func(r whereRow) bool
			}{
				{`{"v": {"$gte": 40}}`, func(r whereRow) bool { v, ok := num(r); return ok && v >= 40 }},
				{`{"meta.site": "x", "v": {"$lt": 0}}`, func(r whereRow) bool { v, ok := num(r); return ok && r.site == "x" && v < 0 }},
				{`{"v": {"$type": "string"}}`, func(r whereRow) bool { _, ok := r.v.(string); return ok }},
				// Every row of z: its buckets go.
				{`{"flag": true}`, func(r whereRow) bool { return r.flag }},
				{`{"$or": [{"meta.site": "y"}, {"v": {"$in": [1, 2, 3]}}], "t": {"$lt": {"$date": "2024-01-01T01:00:00Z"}}}`,
					func(r whereRow) bool {
						v, ok := num(r)
						return (r.site == "y" || ok && v >= 1 && v <= 3) && r.t < t0.Add(time.Hour).UnixNano()
					}},
				// Matches nothing.
				{`{"v": {"$gt": 1000}}`, func(whereRow) bool { return false }},
			}
			for _, st := range steps {
				var want int64
				kept := rows[:0]
				for _, r := range rows {
					if st.match(r) {
						want++
					} else {
						kept = append(kept, r)
					}
				}
				rows = kept
				n, err := db.Delete(ctx, "m", mustFilter(t, st.filter), DeleteOptions{})
				if err != nil || n != want {
					t.Fatalf("delete %s: %d, %v; want %d", st.filter, n, err, want)
				}
				checkCount(t, db, "m", len(rows))
				checkBucketBounds(t, db, "m")
			}
			var want []string
			for _, r := range rows {
				want = append(want, r.key())
			}
			slices.Sort(want)
			if got := whereRows(t, db, "m"); !reflect.DeepEqual(got, want) {
				t.Fatalf("rows left:\n got %v\nwant %v", got, want)
			}
			if got, wantFields := fieldsOf(t, db, "m"), map[string][]string{"v": {"long"}}; !reflect.DeepEqual(got, wantFields) {
				t.Fatalf("fields %v, want %v", got, wantFields)
			}
			// A crash: the deletes are replayed from the log.
			crash(db)
			db = openTest(t, dir, nil)
			if got := whereRows(t, db, "m"); !reflect.DeepEqual(got, want) {
				t.Fatalf("after a crash, rows:\n got %v\nwant %v", got, want)
			}
			checkCount(t, db, "m", len(rows))
			checkBucketBounds(t, db, "m")
			if got, wantFields := fieldsOf(t, db, "m"), map[string][]string{"v": {"long"}}; !reflect.DeepEqual(got, wantFields) {
				t.Fatalf("after a crash, fields %v, want %v", got, wantFields)
			}
			// And a clean reopen after a checkpoint.
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openTest(t, dir, nil)
			if got := whereRows(t, db, "m"); !reflect.DeepEqual(got, want) {
				t.Fatalf("reopened, rows:\n got %v\nwant %v", got, want)
			}
			checkCount(t, db, "m", len(rows))
		})
	}
}
