package timeseries_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/timeseries"
)

// The stores in ../testdata were written by earlier versions
// (testdata/README.md); the current code must open them and find exactly
// what their expected files list.

type fixtureVal struct {
	Type string  `json:"type"`
	F    float64 `json:"f,omitempty"`
	I    int64   `json:"i,omitempty"`
	S    string  `json:"s,omitempty"`
	B    bool    `json:"b,omitempty"`
}

type fixtureRow struct {
	T int64                 `json:"t"`
	M string                `json:"m"`
	F map[string]fixtureVal `json:"f"`
}

type fixtureCollection struct {
	Name    string                 `json:"name"`
	Options map[string]any         `json:"options"`
	Count   int64                  `json:"count"`
	Buckets int64                  `json:"buckets"`
	Fields  map[string][]string    `json:"fields"`
	Indexes []timeseries.IndexSpec `json:"indexes"`
	TTL     *timeseries.TTLState   `json:"ttl"`
	Rows    []fixtureRow           `json:"rows"`
	Docs    []any                  `json:"docs"`
}

type fixtureStore struct {
	Now         time.Time           `json:"now"`
	Collections []fixtureCollection `json:"collections"`
}

// fixtureTag is the tagging of document values in the expected files.
func fixtureTag(v any) any {
	switch v := v.(type) {
	case int64:
		return map[string]any{"$int": v}
	case float64:
		return map[string]any{"$float": v}
	case time.Time:
		return map[string]any{"$date": v.UnixNano()}
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = fixtureTag(v[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = fixtureTag(x)
		}
		return out
	default:
		return v
	}
}

// jsonOf is v as generic JSON, for comparisons that ignore Go types.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func copyFixtureStore(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join("..", "testdata", dir)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// findRows returns every measurement of a time-series collection in the
// expected files' form, sorted as they are.
func findRows(t *testing.T, db *timeseries.DB, name, timeField, metaField string) []fixtureRow {
	t.Helper()
	cur, err := db.Find(context.Background(), name, timeseries.FindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var rows []fixtureRow
	for cur.Next() {
		rec := cur.Record()
		sch := rec.Schema()
		for i := 0; i < int(rec.NumRows()); i++ {
			r := fixtureRow{F: map[string]fixtureVal{}}
			for c := 0; c < int(rec.NumCols()); c++ {
				col, f := rec.Column(c), sch.Field(c)
				if col.IsNull(i) {
					continue
				}
				switch {
				case f.Name == timeField:
					r.T = int64(col.(*array.Timestamp).Value(i))
				case f.Name == metaField:
					r.M = col.(*array.String).Value(i)
				default:
					var v fixtureVal
					switch col := col.(type) {
					case *array.Float64:
						v = fixtureVal{Type: "float", F: col.Value(i)}
					case *array.Int64:
						v = fixtureVal{Type: "int", I: col.Value(i)}
					case *array.String:
						v = fixtureVal{Type: "string", S: col.Value(i)}
					case *array.Boolean:
						v = fixtureVal{Type: "bool", B: col.Value(i)}
					case *array.Timestamp:
						v = fixtureVal{Type: "date", I: int64(col.Value(i))}
					case *array.FixedSizeBinary:
						if madeFor(col.Value(i), r.T) {
							continue // the _id of a measurement written without one
						}
						v = fixtureVal{Type: "objectid", S: hex.EncodeToString(col.Value(i))}
					default:
						t.Fatalf("column %s: %v", f.Name, f.Type)
					}
					r.F[f.Name] = v
				}
			}
			rows = append(rows, r)
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	sortFixtureRows(t, rows)
	return rows
}

// sortFixtureRows orders rows by meta, time and then fields: measurements
// of a series may share a time.
func sortFixtureRows(t *testing.T, rows []fixtureRow) {
	key := func(r fixtureRow) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].M != rows[j].M {
			return rows[i].M < rows[j].M
		}
		if rows[i].T != rows[j].T {
			return rows[i].T < rows[j].T
		}
		return key(rows[i]) < key(rows[j])
	})
}

func findDocs(t *testing.T, db *timeseries.DB, name string) []any {
	t.Helper()
	var docs []document.Doc
	_, err := timeseries.EachDoc(db.Find(context.Background(), name, timeseries.FindOptions{}))(func(d document.Doc) error {
		docs = append(docs, d)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(docs, func(i, j int) bool { return fmt.Sprint(docs[i]["_id"]) < fmt.Sprint(docs[j]["_id"]) })
	out := make([]any, len(docs))
	for i, d := range docs {
		out[i] = fixtureTag(d)
	}
	return out
}

// checkFixtureStore compares an open store with its expected file.
func checkFixtureStore(t *testing.T, db *timeseries.DB, exp *fixtureStore) {
	t.Helper()
	ctx := context.Background()
	infos, err := db.ListCollections(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(exp.Collections) {
		t.Fatalf("%d collections, want %d", len(infos), len(exp.Collections))
	}
	for _, c := range exp.Collections {
		info, err := db.Describe(ctx, c.Name)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if info.Count != c.Count {
			t.Errorf("%s: count %d, want %d", c.Name, info.Count, c.Count)
		}
		if got := jsonOf(t, info.Options); !reflect.DeepEqual(got, jsonOf(t, c.Options)) {
			t.Errorf("%s: options %v, want %v", c.Name, got, c.Options)
		}
		if (len(info.Fields) > 0 || len(c.Fields) > 0) && !reflect.DeepEqual(info.Fields, c.Fields) {
			t.Errorf("%s: fields %v, want %v", c.Name, info.Fields, c.Fields)
		}
		idx, err := db.ListIndexes(ctx, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonOf(t, idx); !reflect.DeepEqual(got, jsonOf(t, c.Indexes)) {
			t.Errorf("%s: indexes %v, want %v", c.Name, got, jsonOf(t, c.Indexes))
		}
		if info.Options.TimeSeries == nil {
			if got := findDocs(t, db, c.Name); !reflect.DeepEqual(jsonOf(t, got), jsonOf(t, c.Docs)) {
				t.Errorf("%s: documents\n%v\nwant\n%v", c.Name, jsonOf(t, got), jsonOf(t, c.Docs))
			}
			continue
		}
		ttl, err := db.TTLState(ctx, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonOf(t, ttl); !reflect.DeepEqual(got, jsonOf(t, c.TTL)) {
			t.Errorf("%s: TTL state %v, want %v", c.Name, got, jsonOf(t, c.TTL))
		}
		ts := info.Options.TimeSeries
		got := findRows(t, db, c.Name, ts.TimeField, ts.MetaField)
		sortFixtureRows(t, c.Rows)
		if len(got) != len(c.Rows) {
			t.Errorf("%s: %d measurements found, want %d", c.Name, len(got), len(c.Rows))
		}
		for i := range min(len(got), len(c.Rows)) {
			if !reflect.DeepEqual(got[i], c.Rows[i]) {
				t.Errorf("%s: measurement %d: %+v, want %+v", c.Name, i, got[i], c.Rows[i])
				break
			}
		}
	}
}

func TestFormatFixtures(t *testing.T) {
	for _, v := range []string{"v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11"} {
		for _, s := range []string{"store", "logonly"} {
			t.Run(v+"/"+s, func(t *testing.T) {
				b, err := os.ReadFile(filepath.Join("..", "testdata", v, s+".json"))
				if err != nil {
					t.Fatal(err)
				}
				var exp fixtureStore
				if err := json.Unmarshal(b, &exp); err != nil {
					t.Fatal(err)
				}
				dir := copyFixtureStore(t, filepath.Join(v, s))
				opts := timeseries.Options{Dir: dir, NoSync: true, Now: func() time.Time { return exp.Now }}
				db, err := timeseries.Open(opts)
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				checkFixtureStore(t, db, &exp)

				// Writes after the old ones, kept over a reopen.
				ctx := context.Background()
				m := model.Measurement{Time: exp.Now.Add(-time.Hour).UnixNano(),
					Meta:   map[string]any{"sensor": "s1", "site": "north"},
					Fields: []model.Field{{Name: "temp", Value: model.Float(-1.5)}, {Name: "added", Value: model.Int(7)}}}
				// Measurements written from now on have an _id: an old store
				// takes them.
				id := [12]byte{0x65, 0x1, 0x2, 0x3, 4, 5, 6, 7, 8, 9, 10, 11}
				m.Fields = append(m.Fields, model.Field{Name: "_id", Value: model.ObjectID(id)})
				if _, err := db.Insert(ctx, "weather", timeseries.Batch{Measurements: []model.Measurement{m}}, timeseries.InsertOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := db.Insert(ctx, "devices", timeseries.Batch{Documents: []document.Doc{{"_id": "new", "n": int64(99)}}}, timeseries.InsertOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				for i := range exp.Collections {
					c := &exp.Collections[i]
					c.Count++
					switch c.Name {
					case "weather":
						c.Fields["added"] = []string{"long"}
						c.Fields["_id"] = []string{"objectId"}
						c.Rows = append(c.Rows, fixtureRow{T: m.Time, M: `{"sensor":"s1","site":"north"}`,
							F: map[string]fixtureVal{"temp": {Type: "float", F: -1.5}, "added": {Type: "int", I: 7},
								"_id": {Type: "objectid", S: hex.EncodeToString(id[:])}}})
					case "devices":
						c.Docs = append(c.Docs, map[string]any{"_id": "new", "n": map[string]any{"$int": 99}})
					}
				}
				db, err = timeseries.Open(opts)
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer db.Close()
				checkFixtureStore(t, db, &exp)
			})
		}
	}
}

// madeFor reports whether id is the ObjectId made for a measurement at
// time t written without one: t's second, then the series, then t's
// sub-second in 100 ns (the time column comes first in a find).
func madeFor(id []byte, t int64) bool {
	sec, sub := t/1e9, t%1e9
	if sub < 0 {
		sec, sub = sec-1, sub+1e9
	}
	u := sub / 100
	return binary.BigEndian.Uint32(id) == uint32(sec) && id[9] == byte(u>>16) && id[10] == byte(u>>8) && id[11] == byte(u)
}
