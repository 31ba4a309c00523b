package timeseries

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/ttl"
)

func mustPlain(t testing.TB, db *DB, name string, opts CollectionOptions) {
	t.Helper()
	if _, err := db.CreateCollection(ctx, name, opts); err != nil {
		t.Fatal(err)
	}
}

func jsonDoc(t testing.TB, s string) document.Doc {
	t.Helper()
	var raw map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	d, err := document.FromJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return d
}

func insertDocs(t testing.TB, db *DB, name string, docs ...string) {
	t.Helper()
	ds := make([]document.Doc, len(docs))
	for i, s := range docs {
		ds[i] = jsonDoc(t, s)
	}
	res, err := db.Insert(ctx, name, Batch{Documents: ds}, InsertOptions{})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("insert: %v %+v", err, res.Errors)
	}
}

// findIDs returns the _id values of a find, rendered, in result order.
func findIDs(t testing.TB, db *DB, name string, q FindOptions) ([]string, DocPlan) {
	t.Helper()
	var ids []string
	plan, err := EachDoc(db.Find(ctx, name, q))(func(d document.Doc) error {
		ids = append(ids, renderValue(d["_id"]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, plan
}

func codeOf(err error) mongoerr.Code { return mongoerr.CodeOf(err) }

func TestPlainInsertFindDuplicate(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustPlain(t, db, "p", CollectionOptions{})
	insertDocs(t, db, "p", `{"_id": 1, "a": "x"}`, `{"_id": 2, "a": "y"}`, `{"a": "z"}`)
	ds := []document.Doc{jsonDoc(t, `{"_id": 3}`), jsonDoc(t, `{"_id": 1}`), jsonDoc(t, `{"_id": 4}`), jsonDoc(t, `{"_id": 4}`)}
	res, err := db.Insert(ctx, "p", Batch{Documents: ds}, InsertOptions{})
	if err != nil || res.Inserted != 1 || len(res.Errors) != 1 || codeOf(res.Errors[0].Err) != mongoerr.DuplicateKey || res.Errors[0].Index != 1 {
		t.Fatalf("ordered: %+v %v", res, err)
	}
	ds = []document.Doc{jsonDoc(t, `{"_id": 3}`), jsonDoc(t, `{"_id": 4}`), jsonDoc(t, `{"_id": 4}`), jsonDoc(t, `{"_id": 5}`)}
	res, err = db.Insert(ctx, "p", Batch{Documents: ds}, InsertOptions{Unordered: true})
	if err != nil || res.Inserted != 2 || len(res.Errors) != 2 || res.Errors[0].Index != 0 || res.Errors[1].Index != 2 {
		t.Fatalf("unordered: %+v %v", res, err)
	}
	ids, plan := findIDs(t, db, "p", FindOptions{})
	if len(ids) != 6 || ids[0] != "1" || plan.Stage != "COLLSCAN" {
		t.Fatalf("all: %v %+v", ids, plan)
	}
	ids, plan = findIDs(t, db, "p", FindOptions{Filter: mustFilter(t, `{"_id": 2}`)})
	if !slices.Equal(ids, []string{"2"}) || plan.Stage != "IDHACK" || plan.DocsExamined != 1 {
		t.Fatalf("by _id: %v %+v", ids, plan)
	}
	ids, _ = findIDs(t, db, "p", FindOptions{Sort: []SortKey{{Field: "_id", Desc: true}}, Skip: 1, Limit: 2})
	if !slices.Equal(ids, []string{"5", "4"}) { // the ObjectId sorts after numbers
		t.Fatalf("sorted by _id descending, skip 1, limit 2: %v", ids)
	}
	if info, _ := db.Describe(ctx, "p"); info.Count != 6 {
		t.Fatalf("count %d", info.Count)
	}
}

// Random documents and random filters: every find answers exactly what a
// full scan with the filter answers, whichever index it uses.
func TestPlainIndexesMatchFullScan(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustPlain(t, db, "p", CollectionOptions{})
	r := rand.New(rand.NewPCG(7, 8))
	val := func() any {
		switch r.IntN(8) {
		case 0:
			return nil
		case 1:
			return fmt.Sprintf("s%d", r.IntN(5))
		case 2:
			return float64(r.IntN(10)) / 2
		case 3:
			return []any{int64(r.IntN(10)), int64(r.IntN(10))}
		case 4:
			return map[string]any{"d": int64(r.IntN(10))}
		case 5:
			return time.Unix(int64(r.IntN(10)), 0).UTC()
		}
		return int64(r.IntN(10))
	}
	var all []document.Doc
	add := func(n int) {
		var batch []document.Doc
		for i := 0; i < n; i++ {
			d := document.Doc{"_id": int64(len(all))}
			for _, f := range []string{"a", "b", "c"} {
				if r.IntN(5) > 0 {
					d[f] = val()
				}
			}
			if r.IntN(2) == 0 {
				if _, isArr := d["a"].([]any); isArr {
					if _, isArr := d["b"].([]any); isArr {
						delete(d, "b") // parallel arrays cannot be indexed by {a, b}
					}
				}
			}
			if _, isArr := d["a"].([]any); isArr {
				if _, isArr := d["b"].([]any); isArr {
					delete(d, "b")
				}
			}
			all = append(all, d)
			batch = append(batch, d)
		}
		res, err := db.Insert(ctx, "p", Batch{Documents: batch}, InsertOptions{})
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("%v %+v", err, res.Errors)
		}
	}
	add(300)
	// Indexes built over existing documents, then maintained by writes.
	for _, spec := range []IndexSpec{
		{Key: []IndexKey{{"a", 1}}},
		{Key: []IndexKey{{"b", -1}, {"a", 1}}},
		{Key: []IndexKey{{"c.d", 1}}},
		{Key: []IndexKey{{"c", -1}}, Name: "c_partial", PartialFilterExpression: map[string]any{"b": map[string]any{"$gte": int64(3)}}},
	} {
		if _, _, err := db.CreateIndex(ctx, "p", spec); err != nil {
			t.Fatal(err)
		}
	}
	add(300)
	// Updates and deletes change index entries.
	u, err := document.ParseUpdate(map[string]any{"$inc": map[string]any{"n": int64(1)}, "$set": map[string]any{"b": int64(5), "c": map[string]any{"d": int64(4)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Update(ctx, "p", Update{Filter: mustFilter(t, `{"a": {"$lt": 3}}`), Operators: u, Multi: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "p", mustFilter(t, `{"b": "s1"}`), DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The oracle: the store's documents, read whole.
	var stored []document.Doc
	if _, err := EachDoc(db.Find(ctx, "p", FindOptions{}))(func(d document.Doc) error {
		stored = append(stored, d)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	scalar := func() string {
		switch r.IntN(5) {
		case 0:
			return fmt.Sprintf(`"s%d"`, r.IntN(5))
		case 1:
			return fmt.Sprintf(`{"$date": "1970-01-01T00:00:0%dZ"}`, r.IntN(10))
		case 2:
			return fmt.Sprintf("%g", float64(r.IntN(10))/2)
		}
		return fmt.Sprint(r.IntN(10))
	}
	ops := []string{"$eq", "$gt", "$gte", "$lt", "$lte", "$ne"}
	term := func() string {
		f := []string{"a", "b", "c", "c.d"}[r.IntN(4)]
		switch r.IntN(6) {
		case 0:
			return fmt.Sprintf(`{%q: %s}`, f, scalar())
		case 1:
			return fmt.Sprintf(`{%q: {"$in": [%s, %s]}}`, f, scalar(), scalar())
		case 2:
			return fmt.Sprintf(`{%q: {"$gt": %s, "$lt": %s}}`, f, scalar(), scalar())
		}
		return fmt.Sprintf(`{%q: {%q: %s}}`, f, ops[r.IntN(len(ops))], scalar())
	}
	usedIndex := map[string]int{}
	for i := 0; i < 3000; i++ {
		terms := []string{term()}
		for r.IntN(2) == 0 {
			terms = append(terms, term())
		}
		if r.IntN(4) == 0 {
			terms = append(terms, `{"b": {"$gte": 3}}`)
		}
		text := `{"$and": [` + strings.Join(terms, ", ") + `]}`
		f := mustFilter(t, text)
		var want []string
		for _, d := range stored {
			if f.Match(d) {
				want = append(want, renderValue(d["_id"]))
			}
		}
		got, plan := findIDs(t, db, "p", FindOptions{Filter: f, Sort: []SortKey{{Field: "_id"}}})
		if !slices.Equal(got, want) {
			t.Fatalf("%s (plan %+v):\n got %v\nwant %v", text, plan, got, want)
		}
		usedIndex[plan.Index]++
	}
	for _, name := range []string{"a_1", "b_-1_a_1", "c.d_1", "c_partial"} {
		if usedIndex[name] == 0 {
			t.Errorf("index %s never used: %v", name, usedIndex)
		}
	}
}

func TestPlainUpdateReplace(t *testing.T) {
	clock := newTestClock(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
	db := openTest(t, t.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	mustPlain(t, db, "s", CollectionOptions{})
	insertDocs(t, db, "s", `{"_id": "a", "n": 1, "user": {"name": "x"}}`, `{"_id": "b", "n": 2.5}`, `{"_id": "c", "s": "str"}`)
	upd := func(filter, update string, multi bool) (UpdateResult, error) {
		dec := json.NewDecoder(strings.NewReader(update))
		dec.UseNumber()
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		u, err := document.ParseUpdate(raw)
		if err != nil {
			return UpdateResult{}, err
		}
		return db.Update(ctx, "s", Update{Filter: mustFilter(t, filter), Operators: u, Multi: multi})
	}
	if res, err := upd(`{}`, `{"$inc": {"n": 1}, "$currentDate": {"lastModifiedDate": true}, "$set": {"user.age": 3}, "$unset": {"s": ""}}`, false); err != nil || res != (UpdateResult{1, 1}) {
		t.Fatalf("%+v %v", res, err)
	}
	var got []string
	EachDoc(db.Find(ctx, "s", FindOptions{}))(func(d document.Doc) error {
		got = append(got, string(document.AppendJSON(nil, d)))
		return nil
	})
	want := []string{
		`{"_id":"a","lastModifiedDate":{"$date":"2024-05-01T12:00:00Z"},"n":2,"user":{"age":3,"name":"x"}}`,
		`{"_id":"b","n":2.5}`, `{"_id":"c","s":"str"}`}
	if !slices.Equal(got, want) {
		t.Fatalf("after update:\n%s", strings.Join(got, "\n"))
	}
	if res, err := upd(`{"n": {"$exists": true}}`, `{"$inc": {"n": 1}}`, true); err != nil || res != (UpdateResult{2, 2}) {
		t.Fatalf("multi: %+v %v", res, err)
	}
	if _, err := upd(`{"_id": "c"}`, `{"$inc": {"s": 1}}`, false); codeOf(err) != mongoerr.TypeMismatch {
		t.Fatalf("$inc of a string: %v", err)
	}
	if _, err := upd(`{}`, `{"$set": {"_id": 1}}`, false); codeOf(err) != mongoerr.ImmutableField {
		t.Fatalf("$set _id: %v", err)
	}
	if _, err := upd(`{}`, `{"$set": {"a": 1}, "$unset": {"a.b": ""}}`, false); codeOf(err) != mongoerr.ConflictingUpdateOperators {
		t.Fatalf("conflict: %v", err)
	}
	if _, err := upd(`{}`, `{"x": 1}`, false); codeOf(err) != mongoerr.FailedToParse {
		t.Fatalf("replacement as update: %v", err)
	}
	res, err := db.Update(ctx, "s", Update{Filter: mustFilter(t, `{"_id": "b"}`), Replacement: jsonDoc(t, `{"z": true}`)})
	if err != nil || res != (UpdateResult{1, 1}) {
		t.Fatalf("replace: %+v %v", res, err)
	}
	if _, err := db.Update(ctx, "s", Update{Filter: mustFilter(t, `{"_id": "b"}`), Replacement: jsonDoc(t, `{"_id": "other"}`)}); codeOf(err) != mongoerr.ImmutableField {
		t.Fatalf("replace with another _id: %v", err)
	}
	ids, _ := findIDs(t, db, "s", FindOptions{Filter: mustFilter(t, `{"z": true}`)})
	if !slices.Equal(ids, []string{`"b"`}) {
		t.Fatalf("replaced: %v", ids)
	}
	if n, err := db.Delete(ctx, "s", mustFilter(t, `{"_id": {"$in": ["a", "c"]}}`), DeleteOptions{}); n != 2 || err != nil {
		t.Fatalf("delete: %d %v", n, err)
	}
	if info, _ := db.Describe(ctx, "s"); info.Count != 1 {
		t.Fatalf("count %d", info.Count)
	}
}

// SPEC 3.1: a document expires when its date plus expireAfterSeconds has
// passed; for an array the earliest date; never for strings, numbers,
// missing fields. Reads are exact before the monitor runs.
func TestPlainTTL(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := newTestClock(t0)
	dir := t.TempDir()
	db := openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	mustPlain(t, db, "log", CollectionOptions{})
	insertDocs(t, db, "log",
		`{"_id": "date", "at": {"$date": "2024-05-01T11:00:00Z"}}`,
		`{"_id": "newer", "at": {"$date": "2024-05-01T11:59:00Z"}}`,
		`{"_id": "array", "at": [{"$date": "2024-05-01T13:00:00Z"}, {"$date": "2024-05-01T10:00:00Z"}]}`,
		`{"_id": "string", "at": "2024-05-01T00:00:00Z"}`,
		`{"_id": "number", "at": 1}`,
		`{"_id": "missing"}`,
		`{"_id": "nodate", "at": ["x", 2]}`)
	if _, _, err := db.CreateIndex(ctx, "log", IndexSpec{Key: []IndexKey{{"at", 1}}, ExpireAfterSeconds: int64p(1800)}); err != nil {
		t.Fatal(err)
	}
	live := func() []string {
		ids, _ := findIDs(t, db, "log", FindOptions{})
		return ids
	}
	want := []string{`"missing"`, `"newer"`, `"nodate"`, `"number"`, `"string"`}
	if got := live(); !slices.Equal(got, want) {
		t.Fatalf("visible before the monitor: %v", got)
	}
	if info, _ := db.Describe(ctx, "log"); info.Count != 7 {
		t.Fatalf("count before the monitor %d (expired documents still count)", info.Count)
	}
	st, _ := db.TTLState(ctx, "log")
	if st.NextExpiry == nil || !st.NextExpiry.Equal(time.Date(2024, 5, 1, 10, 30, 0, 0, time.UTC)) {
		t.Fatalf("nextExpiry %v", st.NextExpiry)
	}
	targets, _ := db.Targets(ctx)
	if len(targets) != 1 || targets[0] != (ttl.Target{Collection: "log", Index: "at_1"}) {
		t.Fatalf("targets %v", targets)
	}
	b, err := db.Expire(ctx, targets[0], clock.Now(), ttl.Budget{Docs: 1})
	if err != nil || b.Docs != 1 || !b.More {
		t.Fatalf("budgeted batch: %+v %v", b, err)
	}
	b, err = db.Expire(ctx, targets[0], clock.Now(), ttl.Budget{})
	if err != nil || b.Docs != 1 || b.More {
		t.Fatalf("second batch: %+v %v", b, err)
	}
	if info, _ := db.Describe(ctx, "log"); info.Count != 5 {
		t.Fatalf("count after the monitor %d", info.Count)
	}
	clock.Advance(30 * time.Minute)
	if got := live(); !slices.Equal(got, []string{`"missing"`, `"nodate"`, `"number"`, `"string"`}) {
		t.Fatalf("visible later: %v", got)
	}
	// The deletes survive a restart; the expired document stays invisible.
	db.Close()
	db = openTest(t, dir, func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	if info, _ := db.Describe(ctx, "log"); info.Count != 5 {
		t.Fatalf("count after restart %d", info.Count)
	}
	if got := live(); len(got) != 4 {
		t.Fatalf("visible after restart: %v", got)
	}
}

// SPEC 3.2 and 3.3: the restrictions of TTL indexes on plain collections.
func TestPlainTTLRestrictions(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustPlain(t, db, "p", CollectionOptions{})
	mustPlain(t, db, "capped", CollectionOptions{Capped: true, Size: 4096})
	for _, c := range []struct {
		coll string
		spec IndexSpec
		code mongoerr.Code
	}{
		{"p", IndexSpec{Key: []IndexKey{{"_id", 1}}, ExpireAfterSeconds: int64p(10)}, mongoerr.InvalidIndexSpecification},
		{"p", IndexSpec{Key: []IndexKey{{"a", 1}, {"b", 1}}, ExpireAfterSeconds: int64p(10)}, mongoerr.CannotCreateIndex},
		{"p", IndexSpec{Key: []IndexKey{{"a", 1}}, ExpireAfterSeconds: int64p(-1)}, mongoerr.CannotCreateIndex},
		{"capped", IndexSpec{Key: []IndexKey{{"a", 1}}, ExpireAfterSeconds: int64p(10)}, mongoerr.CannotCreateIndex},
	} {
		if _, _, err := db.CreateIndex(ctx, c.coll, c.spec); codeOf(err) != c.code {
			t.Errorf("%s %+v: %v, want code %d", c.coll, c.spec, err, c.code)
		}
	}
	// A non-TTL index on the key: creating a TTL one is 85; collMod converts it.
	if _, _, err := db.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{"at", 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{"at", 1}}, ExpireAfterSeconds: int64p(10)}); codeOf(err) != mongoerr.IndexOptionsConflict {
		t.Fatalf("TTL over a non-TTL index: %v", err)
	}
	res, err := db.CollModIndex(ctx, "p", IndexMod{KeyPattern: []IndexKey{{"at", 1}}, ExpireAfterSeconds: 10})
	if err != nil || res.OldExpireAfterSeconds != nil || res.NewExpireAfterSeconds != 10 {
		t.Fatalf("collMod conversion: %+v %v", res, err)
	}
	// Same spec again: a no-op. A changed value: 85.
	if created, _, err := db.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{"at", 1}}, ExpireAfterSeconds: int64p(10)}); created || err != nil {
		t.Fatalf("identical: %v %v", created, err)
	}
	if _, _, err := db.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{"at", 1}}, ExpireAfterSeconds: int64p(20)}); codeOf(err) != mongoerr.IndexOptionsConflict {
		t.Fatalf("changed expireAfterSeconds: %v", err)
	}
	if _, _, err := db.CreateIndex(ctx, "p", IndexSpec{Name: "at_1", Key: []IndexKey{{"other", 1}}}); codeOf(err) != mongoerr.IndexKeySpecsConflict {
		t.Fatalf("same name, other key: %v", err)
	}
	// collMod on a capped collection: 72.
	if _, _, err := db.CreateIndex(ctx, "capped", IndexSpec{Key: []IndexKey{{"at", 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CollModIndex(ctx, "capped", IndexMod{Name: "at_1", ExpireAfterSeconds: 10}); codeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("collMod TTL on capped: %v", err)
	}
	// The _id index is listed and cannot be dropped.
	specs, _ := db.ListIndexes(ctx, "p")
	if specs[0].Name != IDIndexName {
		t.Fatalf("indexes %+v", specs)
	}
	if err := db.DropIndex(ctx, "p", IDIndexName); codeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("drop _id_: %v", err)
	}
	if err := db.DropIndex(ctx, "p", "at_1"); err != nil {
		t.Fatal(err)
	}
}

func TestCappedEviction(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	mustPlain(t, db, "c", CollectionOptions{Capped: true, Size: 1 << 20, Max: 5})
	for i := 0; i < 8; i++ {
		// _id order differs from insertion order.
		insertDocs(t, db, "c", fmt.Sprintf(`{"_id": %d, "i": %d}`, 100-i, i))
	}
	ids, _ := findIDs(t, db, "c", FindOptions{})
	if !slices.Equal(ids, []string{"97", "96", "95", "94", "93"}) {
		t.Fatalf("after max: %v", ids)
	}
	// A batch larger than the collection keeps its newest documents.
	var batch []string
	for i := 0; i < 7; i++ {
		batch = append(batch, fmt.Sprintf(`{"_id": %d}`, i))
	}
	insertDocs(t, db, "c", batch...)
	ids, _ = findIDs(t, db, "c", FindOptions{})
	if !slices.Equal(ids, []string{"2", "3", "4", "5", "6"}) {
		t.Fatalf("after a large batch: %v", ids)
	}
	// Size: documents of ~1 KiB in a 4 KiB collection.
	mustPlain(t, db, "s", CollectionOptions{Capped: true, Size: 4096})
	big := strings.Repeat("x", 1000)
	for i := 0; i < 10; i++ {
		insertDocs(t, db, "s", fmt.Sprintf(`{"_id": %d, "pad": %q}`, i, big))
	}
	info, _ := db.Describe(ctx, "s")
	if info.DataBytes > 4096 || info.Count != 4 {
		t.Fatalf("size-capped: %d documents, %d bytes", info.Count, info.DataBytes)
	}
	db.Close()
	db = openTest(t, dir, nil)
	defer db.Close()
	ids, _ = findIDs(t, db, "s", FindOptions{})
	if !slices.Equal(ids, []string{"6", "7", "8", "9"}) {
		t.Fatalf("after restart: %v", ids)
	}
	insertDocs(t, db, "s", fmt.Sprintf(`{"_id": 10, "pad": %q}`, big))
	if ids, _ = findIDs(t, db, "s", FindOptions{}); !slices.Equal(ids, []string{"7", "8", "9", "10"}) {
		t.Fatalf("insertion order after restart: %v", ids)
	}
}

func TestPlainIndexRefusesParallelArrays(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustPlain(t, db, "p", CollectionOptions{})
	if _, _, err := db.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{"a", 1}, {"b", 1}}}); err != nil {
		t.Fatal(err)
	}
	res, err := db.Insert(ctx, "p", Batch{Documents: []document.Doc{jsonDoc(t, `{"a": [1], "b": [2]}`)}}, InsertOptions{})
	if err != nil || res.Inserted != 0 || len(res.Errors) != 1 || codeOf(res.Errors[0].Err) != mongoerr.CannotIndexParallelArrays {
		t.Fatalf("%+v %v", res, err)
	}
	if info, _ := db.Describe(ctx, "p"); info.Count != 0 {
		t.Fatalf("count %d", info.Count)
	}
}

var _ = partialfilter.Compare

// An index built while writers insert and update is consistent with every
// write: queries through it answer what a scan answers.
// buildGate is the context of an index build. The build checks it once per
// document, with the collection's write lock held: at its first check it
// starts a write and waits until that write is blocked on the lock, so that
// the write has to wait for the build.
type buildGate struct {
	context.Context
	mu       *sync.Mutex // the collection's write lock
	write    func()      // started at the first check: calls insertDuringBuild
	first    sync.Once
	unlocked bool // the write lock was free at the first check
	timedOut bool // the write was not seen waiting for the lock within a minute
}

func (g *buildGate) Err() error {
	g.first.Do(func() {
		if g.mu.TryLock() {
			g.unlocked = true
			g.mu.Unlock()
			return
		}
		go g.write()
		buf := make([]byte, 1<<20)
		for deadline := time.Now().Add(time.Minute); ; {
			n := runtime.Stack(buf, true)
			for gr := range strings.SplitSeq(string(buf[:n]), "\n\n") {
				header, _, _ := strings.Cut(gr, "\n")
				if strings.Contains(header, "[sync.Mutex.Lock") && strings.Contains(gr, "timeseries.insertDuringBuild(") {
					return
				}
			}
			if time.Now().After(deadline) {
				g.timedOut = true
				return
			}
			time.Sleep(time.Millisecond) // between polls, not for correctness
		}
	})
	return g.Context.Err()
}

// insertDuringBuild is the write buildGate starts; its name marks it in
// goroutine stacks.
func insertDuringBuild(db *DB, doc document.Doc) error {
	_, err := db.Insert(ctx, "p", Batch{Documents: []document.Doc{doc}}, InsertOptions{})
	return err
}

func TestPlainIndexBuildDuringWrites(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustPlain(t, db, "p", CollectionOptions{})
	var batch []document.Doc
	for i := 0; i < 5000; i++ {
		batch = append(batch, document.Doc{"_id": int64(i), "k": int64(i % 13)})
	}
	if _, err := db.Insert(ctx, "p", Batch{Documents: batch}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	overlapped := make(chan error, 1)
	gate := &buildGate{Context: ctx, mu: &db.coll.byName["p"].plain.mu,
		write: func() { overlapped <- insertDuringBuild(db, document.Doc{"_id": int64(-1), "k": int64(5)}) }}
	// Writers insert and update all along; once the build is done, each
	// makes afterBuild more writes, through the index, and stops.
	const afterBuild = 50
	built := make(chan struct{})
	writer := func(write func(i int) error) error {
		counted := 0
		for i := 0; ; i++ {
			select {
			case <-built:
				if counted++; counted > afterBuild {
					return nil
				}
			default:
			}
			if err := write(i); err != nil {
				return err
			}
		}
	}
	inc, _ := document.ParseUpdate(map[string]any{"$inc": map[string]any{"k": int64(1)}})
	errc := make(chan error, 2)
	go func() {
		errc <- writer(func(i int) error {
			_, err := db.Insert(ctx, "p", Batch{Documents: []document.Doc{{"_id": int64(5000 + i), "k": int64(i % 13)}}}, InsertOptions{})
			return err
		})
	}()
	go func() {
		errc <- writer(func(i int) error {
			f := partialfilter.MustParseJSON(fmt.Sprintf(`{"_id": %d}`, i%5000))
			_, err := db.Update(ctx, "p", Update{Filter: f, Operators: inc, Multi: false})
			return err
		})
	}()
	if _, _, err := db.CreateIndex(gate, "p", IndexSpec{Key: []IndexKey{{"k", 1}}}); err != nil {
		t.Fatal(err)
	}
	close(built)
	if gate.unlocked || gate.timedOut {
		t.Fatalf("no write waited for the build (write lock free during the build: %v; write not seen waiting within a minute: %v)",
			gate.unlocked, gate.timedOut)
	}
	if err := <-overlapped; err != nil {
		t.Fatalf("the write made during the build: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	var all []document.Doc
	if _, err := EachDoc(db.Find(ctx, "p", FindOptions{}))(func(d document.Doc) error { all = append(all, d); return nil }); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 20; k++ {
		f := mustFilter(t, fmt.Sprintf(`{"k": %d}`, k))
		got, plan := findIDs(t, db, "p", FindOptions{Filter: f, Sort: []SortKey{{Field: "_id"}}})
		var want []string
		for _, d := range all {
			if f.Match(d) {
				want = append(want, renderValue(d["_id"]))
			}
		}
		if plan.Index != "k_1" || !slices.Equal(got, want) {
			t.Fatalf("k=%d through %q: %d documents, a scan finds %d", k, plan.Index, len(got), len(want))
		}
	}
}

// A document the new index cannot hold refuses the build, and nothing of
// it stays; a converted index expires documents; a partial TTL index
// expires only the documents it holds.
func TestPlainIndexBuildRefusalAndTTLKinds(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := newTestClock(t0)
	db := openTest(t, t.TempDir(), func(o *Options) { o.Now = clock.Now })
	defer db.Close()
	mustPlain(t, db, "p", CollectionOptions{})
	insertDocs(t, db, "p", `{"_id": 1, "a": [1, 2], "b": [3, 4]}`)
	if _, _, err := db.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{"a", 1}, {"b", 1}}}); codeOf(err) != mongoerr.CannotIndexParallelArrays {
		t.Fatalf("build over parallel arrays: %v", err)
	}
	if specs, _ := db.ListIndexes(ctx, "p"); len(specs) != 1 {
		t.Fatalf("indexes after a refused build: %+v", specs)
	}
	mustPlain(t, db, "t", CollectionOptions{})
	insertDocs(t, db, "t",
		`{"_id": "old-deletable", "at": {"$date": "2024-05-01T10:00:00Z"}, "canDelete": true}`,
		`{"_id": "old-kept", "at": {"$date": "2024-05-01T10:00:00Z"}, "canDelete": false}`,
		`{"_id": "new", "at": {"$date": "2024-05-01T11:59:00Z"}, "canDelete": true}`)
	if _, _, err := db.CreateIndex(ctx, "t", IndexSpec{Key: []IndexKey{{"at", 1}}, Name: "partial", ExpireAfterSeconds: int64p(3600),
		PartialFilterExpression: map[string]any{"canDelete": true}}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := findIDs(t, db, "t", FindOptions{}); !slices.Equal(ids, []string{`"new"`, `"old-kept"`}) {
		t.Fatalf("partial TTL: %v", ids)
	}
	// A plain index on another field, converted by collMod.
	if _, _, err := db.CreateIndex(ctx, "t", IndexSpec{Key: []IndexKey{{"at", -1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CollModIndex(ctx, "t", IndexMod{Name: "at_-1", ExpireAfterSeconds: 30}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := findIDs(t, db, "t", FindOptions{}); len(ids) != 0 {
		t.Fatalf("after the conversion: %v", ids)
	}
	res, err := ttlPass(db, clock.Now())
	if err != nil || res != 3 {
		t.Fatalf("pass deleted %d: %v", res, err)
	}
}

// ttlPass runs every target's batches until nothing is left and returns
// the documents deleted.
func ttlPass(db *DB, now time.Time) (int64, error) {
	targets, err := db.Targets(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, tg := range targets {
		for {
			b, err := db.Expire(ctx, tg, now, ttl.Budget{Docs: 1})
			if err != nil {
				return n, err
			}
			n += b.Docs
			if !b.More {
				break
			}
		}
	}
	return n, nil
}
