package timeseries

import (
	"fmt"
	"strings"
	"testing"
)

// MetaRuns gives each record's rows by series, in row order, with the
// meta column left out: the runs cover every row, their keys are the
// series', and a series that spans records starts each with a run.
func TestFindMetaRuns(t *testing.T) {
	clock := newTestClock(t0)
	db := openTTL(t, t.TempDir(), clock, nil)
	defer db.Close()
	insertMinutes(t, db, t0, 7, "a", "b", "c")
	cur, err := db.Find(ctx, "s", FindOptions{MetaRuns: true, BatchRows: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var got []string
	for cur.Next() {
		rec := cur.Record()
		for _, f := range rec.Schema().Fields() {
			if f.Name == "sensor" {
				t.Fatal("the meta column is in the record")
			}
		}
		n := 0
		for _, r := range cur.MetaRuns() {
			got = append(got, fmt.Sprintf("%s*%d", r.Key, r.Rows))
			n += r.Rows
		}
		if n != int(rec.NumRows()) {
			t.Fatalf("runs cover %d rows of %d", n, rec.NumRows())
		}
		got = append(got, "|")
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	want := `"a"*5 | "a"*2 "b"*3 | "b"*4 "c"*1 | "c"*5 | "c"*1 |`
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("runs %s, want %s", g, want)
	}
}
