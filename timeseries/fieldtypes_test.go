package timeseries

import (
	"reflect"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// aggregateV aggregates field v of collection name and returns the error.
func aggregateV(t *testing.T, db *DB, name string) error {
	t.Helper()
	rec, err := db.Aggregate(ctx, name, AggregateOptions{Window: time.Hour, Fields: []string{"v"}, Funcs: []AggFunc{AggCount}})
	if err == nil {
		rec.Release()
	}
	return err
}

func fieldsOf(t *testing.T, db *DB, name string) map[string][]string {
	t.Helper()
	info, err := db.Describe(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return info.Fields
}

// TestFieldTypesAfterDelete: once the only string value of field v is
// deleted, v is numeric again (aggregates accept it, Describe says so),
// whether the string was in memory or stored, and over a reopen; a field
// whose every value is deleted is no longer listed.
func TestFieldTypesAfterDelete(t *testing.T) {
	for _, stored := range []bool{false, true} {
		name := map[bool]string{false: "memory", true: "stored"}[stored]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db := openTest(t, dir, func(o *Options) { o.BucketMaxCount = 10 })
			defer func() { db.Close() }()
			mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
			t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			var ms []model.Measurement
			for i := range 50 {
				v := model.Int(int64(i))
				if i == 17 {
					v = model.String("oops")
				}
				ms = append(ms, model.Measurement{Time: t0.Add(time.Duration(i) * time.Minute).UnixNano(), Meta: "a",
					Fields: []model.Field{{Name: "v", Value: v}}})
			}
			ms = append(ms, model.Measurement{Time: t0.Add(90 * time.Minute).UnixNano(), Meta: "b", Fields: []model.Field{{Name: "w", Value: model.Bool(true)}}},
				// Seals a's buckets, so that a checkpoint stores them all.
				model.Measurement{Time: t0.Add(5 * time.Hour).UnixNano(), Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(99)}}})
			if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
				t.Fatal(err)
			}
			if stored {
				if err := db.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			if err := aggregateV(t, db, "m"); mongoerr.CodeOf(err) != mongoerr.TypeMismatch {
				t.Fatalf("before the delete: %v, want TypeMismatch", err)
			}
			if n, err := db.Delete(ctx, "m", mustFilter(t, `{"t": {"$gte": {"$date": "2024-01-01T00:17:00Z"}, "$lt": {"$date": "2024-01-01T00:18:00Z"}}}`), DeleteOptions{}); err != nil || n != 1 {
				t.Fatalf("delete: %d, %v", n, err)
			}
			if n, err := db.Delete(ctx, "m", mustFilter(t, `{"s": "b"}`), DeleteOptions{}); err != nil || n != 1 {
				t.Fatalf("delete b: %d, %v", n, err)
			}
			want := map[string][]string{"v": {"long"}}
			if err := aggregateV(t, db, "m"); err != nil {
				t.Fatalf("after the delete: %v", err)
			}
			if got := fieldsOf(t, db, "m"); !reflect.DeepEqual(got, want) {
				t.Fatalf("fields %v, want %v", got, want)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openTest(t, dir, nil)
			if got := fieldsOf(t, db, "m"); !reflect.DeepEqual(got, want) {
				t.Fatalf("reopened: fields %v, want %v", got, want)
			}
			// A type that is still held elsewhere stays.
			if _, err := db.Insert(ctx, "m", Batch{Measurements: []model.Measurement{{Time: t0.Add(3 * time.Hour).UnixNano(), Meta: "c", Fields: []model.Field{{Name: "v", Value: model.String("x")}}},
				{Time: t0.Add(4 * time.Hour).UnixNano(), Meta: "c", Fields: []model.Field{{Name: "v", Value: model.String("y")}}}}}, InsertOptions{}); err != nil {
				t.Fatal(err)
			}
			if n, err := db.Delete(ctx, "m", mustFilter(t, `{"t": {"$gte": {"$date": "2024-01-01T03:00:00Z"}, "$lt": {"$date": "2024-01-01T03:30:00Z"}}}`), DeleteOptions{}); err != nil || n != 1 {
				t.Fatalf("delete x: %d, %v", n, err)
			}
			if err := aggregateV(t, db, "m"); mongoerr.CodeOf(err) != mongoerr.TypeMismatch {
				t.Fatalf("with a string left: %v, want TypeMismatch", err)
			}
		})
	}
}

// TestFieldTypesAfterExpiry: a TTL pass that removes the only string value
// of v makes v numeric again.
func TestFieldTypesAfterExpiry(t *testing.T) {
	for _, stored := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "stored"}[stored], func(t *testing.T) {
			clock := newTestClock(t0)
			db := openTTL(t, t.TempDir(), clock, int64p(3600))
			defer db.Close()
			ms := []model.Measurement{{Time: t0.UnixNano(), Meta: "s0", Fields: []model.Field{{Name: "v", Value: model.String("old")}}},
				{Time: t0.Add(3 * time.Hour).UnixNano(), Meta: "s0", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}
			if _, err := db.Insert(ctx, "s", Batch{Measurements: ms}, InsertOptions{}); err != nil {
				t.Fatal(err)
			}
			if stored {
				if err := db.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			if err := aggregateV(t, db, "s"); mongoerr.CodeOf(err) != mongoerr.TypeMismatch {
				t.Fatalf("before expiry: %v, want TypeMismatch", err)
			}
			clock.Set(t0.Add(3 * time.Hour))
			if b := expireAll(t, db, clock.Now()); b.Docs != 1 {
				t.Fatalf("expired %d, want 1", b.Docs)
			}
			if err := aggregateV(t, db, "s"); err != nil {
				t.Fatalf("after expiry: %v", err)
			}
			if got, want := fieldsOf(t, db, "s"), map[string][]string{"v": {"long"}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("fields %v, want %v", got, want)
			}
		})
	}
}
