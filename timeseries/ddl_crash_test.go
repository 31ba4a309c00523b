package timeseries

import (
	"testing"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
)

// TestMultiPartDDLCrash: a crash at any step of a multi-part DDL (a list
// of indexes created or dropped, a collMod of the collection's options and
// an index) leaves the collection as it was before or as it is after,
// never in between. At each step the DDL takes (the ddlStep hook: each
// catalog record applied to the store and made durable, a plain
// collection's entries built, its dropped entries still there) the store
// is copied as a crash there leaves it (crashCopy); each copy is opened
// and its state compared.
func TestMultiPartDDLCrash(t *testing.T) {
	day := int64(86400)
	for _, tc := range []struct {
		name string
		coll string
		ddl  func(db *DB) error
	}{
		{"createIndexes of a time series", "ts", func(db *DB) error {
			_, err := db.CreateIndexes(ctx, "ts", []IndexSpec{ttlIndex("ttl_b", "b", 60), {Key: key1("x")}, ttlIndex("ttl_c", "c", 600)})
			return err
		}},
		{"createIndexes of a plain collection", "p", func(db *DB) error {
			_, err := db.CreateIndexes(ctx, "p", []IndexSpec{{Key: key1("b")}, {Key: key1("c")}})
			return err
		}},
		{"dropIndexes of a time series", "ts", func(db *DB) error {
			return db.DropIndexes(ctx, "ts", []string{"ttl_a", "y_1"})
		}},
		{"dropIndexes of a plain collection", "p", func(db *DB) error {
			return db.DropIndexes(ctx, "p", []string{"a_1", "y_1"})
		}},
		{"collMod of a time series", "ts", func(db *DB) error {
			_, err := db.CollMod(ctx, "ts", CollModOptions{ExpireAfterSeconds: &day, Index: &IndexMod{Name: "ttl_a", ExpireAfterSeconds: 7},
				TimeSeries: &model.TimeSeriesOptions{Granularity: model.GranularityHours}})
			return err
		}},
		{"collMod of a plain collection", "p", func(db *DB) error {
			_, err := db.CollMod(ctx, "p", CollModOptions{Index: &IndexMod{Name: "a_1", ExpireAfterSeconds: 60}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := openTest(t, dir, nil)
			defer func() { db.Close() }()
			mustCreate(t, db, "ts", model.TimeSeriesOptions{TimeField: "t", MetaField: "m"})
			plainDocs(t, db, "p", 60, func(i int) document.Doc {
				return document.Doc{"_id": int64(i), "a": int64(i % 4), "b": int64(i), "c": int64(-i), "y": int64(i % 2)}
			})
			if _, err := db.CreateIndexes(ctx, "ts", []IndexSpec{ttlIndex("ttl_a", "a", 3600), {Key: key1("y")}}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.CreateIndexes(ctx, "p", []IndexSpec{{Key: key1("a")}, {Key: key1("y")}}); err != nil {
				t.Fatal(err)
			}
			// Writes after the setup reach the store's files, as a
			// process that ran a while has.
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			before := ddlState(t, db, tc.coll)
			var copies []string
			var steps []string
			db.hooks.ddlStep = func(step string) {
				steps = append(steps, step)
				copies = append(copies, crashCopy(t, db, dir))
			}
			if err := tc.ddl(db); err != nil {
				t.Fatal(err)
			}
			db.hooks.ddlStep = nil
			after := ddlState(t, db, tc.coll)
			if after == before {
				t.Fatal("the DDL changed nothing")
			}
			steps = append(steps, "returned")
			copies = append(copies, crashCopy(t, db, dir))
			seen := map[string]bool{}
			for i, dir := range copies {
				re := openTest(t, dir, nil)
				got := ddlState(t, re, tc.coll)
				if err := re.Close(); err != nil {
					t.Fatal(err)
				}
				switch got {
				case before:
					seen["before"] = true
				case after:
					seen["after"] = true
				default:
					t.Fatalf("a crash at step %d (%s of %v) left neither the state before nor after:\nbefore %s\nafter  %s\ngot    %s",
						i, steps[i], steps, before, after, got)
				}
				if i == len(copies)-1 && got != after {
					t.Fatalf("a crash once the DDL returned lost it:\nwant %s\ngot  %s", after, got)
				}
			}
			if !seen["before"] {
				t.Fatalf("no crash point before the change (steps %v): the test saw only one side", steps)
			}
		})
	}
}
