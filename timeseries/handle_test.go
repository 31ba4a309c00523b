package timeseries

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
)

// plainDocs creates the plain collection name and inserts n documents,
// doc(i) each.
func plainDocs(t *testing.T, db *DB, name string, n int, doc func(i int) document.Doc) {
	t.Helper()
	if _, err := db.CreateCollection(ctx, name, CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	docs := make([]document.Doc, n)
	for i := range docs {
		docs[i] = doc(i)
	}
	if _, err := db.Insert(ctx, name, Batch{Documents: docs}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
}

// findRowIDs runs a find on a time-series collection whose field v numbers
// its measurements and returns the v of each row, in order.
func findRowIDs(t *testing.T, db *DB, name string, opts FindOptions) []int64 {
	t.Helper()
	cur, err := db.Find(ctx, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []int64
	for cur.Next() {
		rec := cur.Record()
		col := rec.Column(int(rec.Schema().FieldIndices("v")[0])).(*array.Int64)
		for i := range col.Len() {
			out = append(out, col.Value(i))
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFindSkip: a time-series find's skip leaves out the first rows of the
// result in every order, across records and series, before its limit; a
// sort names the timeField alone.
func TestFindSkip(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var ms []model.Measurement
	for i := range 300 {
		ms = append(ms, model.Measurement{Time: base + int64(i)*1e9, Meta: sensor(fmt.Sprint(i % 3)),
			Fields: []model.Field{{Name: "v", Value: model.Int(int64(i))}}})
	}
	insertMeasurements(t, db, "m", ms)
	for _, sort := range [][]SortKey{nil, {{Field: "ts"}}, {{Field: "ts", Desc: true}}} {
		all := findRowIDs(t, db, "m", FindOptions{Sort: sort, BatchRows: 7})
		if len(all) != 300 {
			t.Fatalf("sort %v: %d rows, want 300", sort, len(all))
		}
		if sort != nil && sort[0].Desc && all[0] != 299 || sort != nil && !sort[0].Desc && all[0] != 0 {
			t.Fatalf("sort %v: first row %d", sort, all[0])
		}
		for _, c := range []struct{ skip, limit int64 }{{1, 0}, {7, 0}, {100, 10}, {299, 5}, {300, 0}, {400, 1}, {0, 3}} {
			got := findRowIDs(t, db, "m", FindOptions{Sort: sort, Skip: c.skip, Limit: c.limit, BatchRows: 7})
			want := all[min(c.skip, 300):]
			if c.limit > 0 {
				want = want[:min(int64(len(want)), c.limit)]
			}
			if !slices.Equal(got, want) {
				t.Errorf("sort %v skip %d limit %d: %v, want %v", sort, c.skip, c.limit, got, want)
			}
		}
	}
	if _, err := db.Find(ctx, "m", FindOptions{Sort: []SortKey{{Field: "v"}}}); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Errorf("a sort on a measurement field: %v, want BadValue", err)
	}
	if _, err := db.Find(ctx, "m", FindOptions{Skip: -1}); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Errorf("a negative skip: %v, want BadValue", err)
	}
}

// TestCollectionHandle: one handle and one Find for both kinds; each kind
// refuses what shapes the other's results; a handle outlives a drop.
func TestCollectionHandle(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	insertMeasurements(t, db, "m", []model.Measurement{{Time: 1e9, Meta: sensor("a"), Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}})
	plainDocs(t, db, "p", 50, func(i int) document.Doc { return document.Doc{"_id": int64(i), "v": int64(i % 10)} })

	m, err := db.Collection("m")
	if err != nil || m.TimeSeries() == nil || m.TimeSeries().TimeField != "ts" || m.Name() != "m" {
		t.Fatalf("handle on m: %v, %v", m, err)
	}
	p, err := db.Collection("p")
	if err != nil || p.TimeSeries() != nil {
		t.Fatalf("handle on p: %v", err)
	}
	if _, err := db.Collection("nosuch"); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Fatalf("handle on a missing collection: %v", err)
	}

	// A plain find yields documents, sorted, skipped, limited and
	// projected, then its plan.
	proj, err := document.ParseProjection(map[string]any{"v": int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := p.Find(ctx, FindOptions{Sort: []SortKey{{Field: "v", Desc: true}, {Field: "_id"}}, Skip: 2, Limit: 3, Projection: proj})
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Documents() || cur.Schema() != nil {
		t.Fatal("a plain collection's cursor does not yield documents")
	}
	var got []string
	for cur.Next() {
		got = append(got, fmt.Sprint(cur.Doc()))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"map[_id:29 v:9]", "map[_id:39 v:9]", "map[_id:49 v:9]"}
	if !slices.Equal(got, want) {
		t.Errorf("plain find: %v, want %v", got, want)
	}
	if plan := cur.Plan(); plan.Stage != "COLLSCAN" || plan.Returned != 3 || !plan.SortInMemory {
		t.Errorf("plan %+v", plan)
	}
	cur.Close()

	if _, err := m.Find(ctx, FindOptions{Projection: proj}); mongoerr.CodeOf(err) != mongoerr.IllegalOperation {
		t.Errorf("a document projection on a time series: %v", err)
	}
	if _, err := p.Find(ctx, FindOptions{Fields: []string{"v"}}); mongoerr.CodeOf(err) != mongoerr.IllegalOperation {
		t.Errorf("time-series columns on a plain collection: %v", err)
	}
	if _, err := p.Find(ctx, FindOptions{Order: SortAscending}); mongoerr.CodeOf(err) != mongoerr.IllegalOperation {
		t.Errorf("a time order on a plain collection: %v", err)
	}
	if n, err := p.Count(ctx, nil, CountOptions{Skip: 45, Limit: 10}); err != nil || n != 5 {
		t.Errorf("count through the handle: %d, %v", n, err)
	}
	if n, err := m.Count(ctx, nil, CountOptions{}); err != nil || n != 1 {
		t.Errorf("count through the handle: %d, %v", n, err)
	}

	if err := db.DropCollection(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Insert(ctx, Batch{Documents: []document.Doc{{"_id": int64(1)}}}, InsertOptions{}); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Errorf("insert through a dropped collection's handle: %v", err)
	}
}

// TestPlainCursorClosedEarly: a plain find closed before its end stops its
// scan and lets go of it (the coroutine that holds its snapshot), and a
// closed cursor yields nothing more.
func TestPlainCursorClosedEarly(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	plainDocs(t, db, "p", 1000, func(i int) document.Doc { return document.Doc{"_id": int64(i)} })
	before := runtime.NumGoroutine()
	var open []*Cursor
	for range 50 {
		cur, err := db.Find(ctx, "p", FindOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if !cur.Next() {
				t.Fatalf("a find of 1000 documents ended early: %v", cur.Err())
			}
		}
		open = append(open, cur)
	}
	for _, cur := range open {
		if err := cur.Close(); err != nil {
			t.Fatal(err)
		}
		if cur.Next() || cur.Doc() != nil {
			t.Fatal("a closed cursor yields a document")
		}
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before+5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after closing 50 cursors, %d before: the scans were not stopped", runtime.NumGoroutine(), before)
		}
	}
}

// TestPlainCursorForEach: ForEach hands over every remaining document,
// whether the cursor was pulled before or not, and stops at fn's error.
func TestPlainCursorForEach(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	plainDocs(t, db, "p", 100, func(i int) document.Doc { return document.Doc{"_id": int64(i)} })
	ids := func(pulled int, stopAt int64) ([]int64, error) {
		cur, err := db.Find(ctx, "p", FindOptions{Sort: []SortKey{{Field: "_id", Desc: true}}})
		if err != nil {
			t.Fatal(err)
		}
		defer cur.Close()
		var out []int64
		for range pulled {
			cur.Next()
			out = append(out, cur.Doc()["_id"].(int64))
		}
		err = cur.ForEach(func(d document.Doc) error {
			id := d["_id"].(int64)
			if id == stopAt {
				return fmt.Errorf("stop at %d", id)
			}
			out = append(out, id)
			return nil
		})
		if cur.Next() {
			t.Fatal("a cursor yields documents after ForEach")
		}
		return out, err
	}
	for _, pulled := range []int{0, 3} {
		got, err := ids(pulled, -1)
		if err != nil || len(got) != 100 || got[0] != 99 || got[99] != 0 {
			t.Errorf("pulled %d, then ForEach: %d documents %v, %v", pulled, len(got), got, err)
		}
		got, err = ids(pulled, 50)
		if err == nil || err.Error() != "stop at 50" || len(got) != 49 {
			t.Errorf("pulled %d, ForEach stopped at 50: %d documents, %v", pulled, len(got), err)
		}
	}
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts"})
	cur, err := db.Find(ctx, "m", FindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if err := cur.ForEach(func(document.Doc) error { return nil }); mongoerr.CodeOf(err) != mongoerr.IllegalOperation {
		t.Errorf("ForEach on a time series: %v", err)
	}
}

// TestDropIndexLeavesNoEntries: dropping a plain collection's index
// removes its entries from the store (a time series' index has none).
func TestDropIndexLeavesNoEntries(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	plainDocs(t, db, "p", 50, func(i int) document.Doc { return document.Doc{"_id": int64(i), "a": int64(i % 7)} })
	if _, _, err := db.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{Field: "a", Direction: 1}}}); err != nil {
		t.Fatal(err)
	}
	c, err := db.lookup("p")
	if err != nil {
		t.Fatal(err)
	}
	db.mu.RLock()
	id := c.indexes[0].ID
	db.mu.RUnlock()
	entries := func() int {
		p := indexPrefix(c.id, id)
		it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		n := 0
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		return n
	}
	if n := entries(); n != 50 {
		t.Fatalf("%d entries in the new index, want 50", n)
	}
	if err := db.DropIndex(ctx, "p", "a_1"); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 0 {
		t.Fatalf("%d entries left by the dropped index", n)
	}
	if err := db.DropIndex(ctx, "p", IDIndexName); mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("dropping the _id index: %v", err)
	}
}

// TestDropIndexDuringWrites: writers that insert while an index is
// dropped never leave entries of it behind (DDL holds them off: the
// kind's lockWriters).
func TestDropIndexDuringWrites(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	if _, err := db.CreateCollection(ctx, "p", CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := db.lookup("p")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := document.Doc{"_id": int64(w*1_000_000 + i), "a": int64(i)}
				if _, err := db.Insert(ctx, "p", Batch{Documents: []document.Doc{d}}, InsertOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var dropped []uint32
	for range 30 {
		if _, _, err := db.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{Field: "a", Direction: 1}}}); err != nil {
			t.Fatal(err)
		}
		db.mu.RLock()
		dropped = append(dropped, c.indexes[0].ID)
		db.mu.RUnlock()
		time.Sleep(time.Millisecond)
		if err := db.DropIndex(ctx, "p", "a_1"); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	for _, id := range dropped {
		p := indexPrefix(c.id, id)
		it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			t.Fatal(err)
		}
		if it.First() {
			t.Errorf("dropped index %d has entries", id)
		}
		it.Close()
	}
}

// TestLegacyNameOrderDocument: a document stored in name order by an
// earlier version (a field sorting before _id) reads back _id first, is
// not handed out as its stored bytes, and an update stores it _id first.
func TestLegacyNameOrderDocument(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	plainDocs(t, db, "p", 1, func(int) document.Doc { return document.Doc{"_id": int32(1), "A": int32(2)} })
	c, err := db.lookup("p")
	if err != nil {
		t.Fatal(err)
	}
	idKey, _ := document.AppendKey(nil, int32(1))
	legacy, _ := document.Encode(nil, document.Doc{"_id": int32(1), "A": int32(2)}) // name order: A, _id
	if err := db.pdb.Set(docKey(c.id, idKey), append([]byte{0}, legacy...), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	read := func() (string, bool) {
		cur, err := db.Find(ctx, "p", FindOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer cur.Close()
		if !cur.Next() {
			t.Fatalf("no document: %v", cur.Err())
		}
		return string(document.AppendJSONOrdered(nil, cur.Doc(), cur.Order())), cur.Encoded() != nil
	}
	if got, raw := read(); got != `{"_id":1,"A":2}` || raw {
		t.Fatalf("a name-order document reads %s (stored bytes handed out: %v)", got, raw)
	}
	u, err := document.ParseUpdate(map[string]any{"$set": map[string]any{"B": int32(3)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Update(ctx, "p", Update{Operators: u}); err != nil {
		t.Fatal(err)
	}
	if got, raw := read(); got != `{"_id":1,"A":2,"B":3}` || !raw {
		t.Fatalf("after an update: %s (stored bytes handed out: %v)", got, raw)
	}
}

// TestMetaValuesDistinct: series whose meta values compare equal (1 and
// 1.0, at the top or inside a document) are found; distinct ones are not.
func TestMetaValuesDistinct(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	ins := func(meta any) {
		insertMeasurements(t, db, "m", []model.Measurement{{Time: 1e9, Meta: meta, Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}})
	}
	check := func(want bool) {
		t.Helper()
		if got, err := db.MetaValuesDistinct(ctx, "m", nil); err != nil || got != want {
			t.Fatalf("MetaValuesDistinct = %v, %v; want %v", got, err, want)
		}
	}
	ins(map[string]any{"id": int64(1), "k": "a"})
	ins(map[string]any{"id": int64(2), "k": "a"})
	check(true)
	ins(map[string]any{"id": 1.0, "k": "a"}) // the first series' value, as a double
	check(false)
	mustCreate(t, db, "top", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	for _, meta := range []any{int64(1), 1.0} {
		insertMeasurements(t, db, "top", []model.Measurement{{Time: 1e9, Meta: meta, Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}})
	}
	if got, err := db.MetaValuesDistinct(ctx, "top", nil); err != nil || got {
		t.Fatalf("1 and 1.0 as whole meta values: %v, %v", got, err)
	}
}
