package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// The sample sensor data in ../testdata/sensors holds the same measurements
// as a JSON array, as NDJSON and as line protocol (testdata/README.md).
// Ingested each through its own endpoint into its own collection, the three
// collections must hold exactly what the files say, and answer find and
// aggregate alike. The JSON documents name their time field "time" and
// their meta field "tags" (with the "_measurement" tag), as a collection
// created by /write does, so that the three are the same collection in all
// but the way the data came in.

// sample is one measurement as the test reads it, independently of the
// server: its time, its meta sub-document and its fields by kind.
type sample struct {
	t      time.Time
	tags   map[string]string
	fields map[string]sampleValue
}

// sampleValue is a field value; kind is 'f' (double), 'i' (integer), 's'
// (string) or 'b' (bool).
type sampleValue struct {
	kind byte
	f    float64
	i    int64
	s    string
	b    bool
}

func (v sampleValue) String() string {
	switch v.kind {
	case 'f':
		return strconv.FormatFloat(v.f, 'g', -1, 64) + " (double)"
	case 'i':
		return strconv.FormatInt(v.i, 10) + " (int)"
	case 's':
		return strconv.Quote(v.s)
	}
	return strconv.FormatBool(v.b)
}

func (m sample) sensor() string { return m.tags["sensor"] }

func (m sample) String() string {
	return fmt.Sprintf("%v at %s", m.tags, m.t.Format(time.RFC3339Nano))
}

// sortSamples orders by sensor, then time; equal times keep their order.
func sortSamples(ms []sample) {
	slices.SortStableFunc(ms, func(a, b sample) int {
		if c := strings.Compare(a.sensor(), b.sensor()); c != 0 {
			return c
		}
		return a.t.Compare(b.t)
	})
}

func readSample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "sensors", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeJSONDocs decodes a JSON array (or, with ndjson, one document a
// line) with numbers kept as written.
func decodeJSONDocs(t *testing.T, b []byte, ndjson bool) []map[string]any {
	t.Helper()
	var docs []map[string]any
	if !ndjson {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&docs); err != nil {
			t.Fatalf("not a JSON array: %v", err)
		}
		return docs
	}
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var d map[string]any
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("NDJSON line %d: %v", i+1, err)
		}
		docs = append(docs, d)
	}
	return docs
}

// sampleOfJSON reads a document of the sample files or of a find reply:
// the time as {"$date": "<RFC 3339>"} or {"$date": {"$numberLong": "<ms>"}},
// numbers with a fraction or exponent as doubles, others as integers.
func sampleOfJSON(d map[string]any) (sample, error) {
	m := sample{tags: map[string]string{}, fields: map[string]sampleValue{}}
	for k, v := range d {
		switch k {
		case "time":
			w, _ := v.(map[string]any)
			switch date := w["$date"].(type) {
			case string:
				tm, err := time.Parse(time.RFC3339Nano, date)
				if err != nil {
					return m, err
				}
				m.t = tm
			case map[string]any:
				ms, err := strconv.ParseInt(fmt.Sprint(date["$numberLong"]), 10, 64)
				if err != nil {
					return m, err
				}
				m.t = time.UnixMilli(ms)
			default:
				return m, fmt.Errorf("time is not a date: %v", v)
			}
		case "_id":
			continue // made of each collection's series and time
		case "tags":
			tags, ok := v.(map[string]any)
			if !ok {
				return m, fmt.Errorf("tags is not a sub-document: %v", v)
			}
			for tk, tv := range tags {
				s, ok := tv.(string)
				if !ok {
					return m, fmt.Errorf("tag %s is not a string: %v", tk, tv)
				}
				m.tags[tk] = s
			}
		default:
			switch x := v.(type) {
			case json.Number:
				if strings.ContainsAny(string(x), ".eE") {
					f, err := x.Float64()
					if err != nil {
						return m, err
					}
					m.fields[k] = sampleValue{kind: 'f', f: f}
				} else {
					i, err := x.Int64()
					if err != nil {
						return m, err
					}
					m.fields[k] = sampleValue{kind: 'i', i: i}
				}
			case string:
				m.fields[k] = sampleValue{kind: 's', s: x}
			case bool:
				m.fields[k] = sampleValue{kind: 'b', b: x}
			default:
				return m, fmt.Errorf("field %s: unexpected value %v", k, v)
			}
		}
	}
	if m.t.IsZero() {
		return m, fmt.Errorf("no time: %v", d)
	}
	return m, nil
}

func samplesOfJSON(t *testing.T, docs []map[string]any) []sample {
	t.Helper()
	out := make([]sample, 0, len(docs))
	for i, d := range docs {
		m, err := sampleOfJSON(d)
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		out = append(out, m)
	}
	return out
}

// samplesOfLineProtocol parses line protocol in ms with the reference
// parser, the measurement becoming the "_measurement" tag.
func samplesOfLineProtocol(t *testing.T, b []byte) []sample {
	t.Helper()
	var out []sample
	dec := lineprotocol.NewDecoderWithBytes(b)
	for dec.Next() {
		name, err := dec.Measurement()
		if err != nil {
			t.Fatal(err)
		}
		m := sample{tags: map[string]string{"_measurement": string(name)}, fields: map[string]sampleValue{}}
		for {
			k, v, err := dec.NextTag()
			if err != nil {
				t.Fatal(err)
			}
			if k == nil {
				break
			}
			m.tags[string(k)] = string(v)
		}
		for {
			k, v, err := dec.NextField()
			if err != nil {
				t.Fatal(err)
			}
			if k == nil {
				break
			}
			switch v.Kind() {
			case lineprotocol.Float:
				m.fields[string(k)] = sampleValue{kind: 'f', f: v.FloatV()}
			case lineprotocol.Int:
				m.fields[string(k)] = sampleValue{kind: 'i', i: v.IntV()}
			case lineprotocol.String:
				m.fields[string(k)] = sampleValue{kind: 's', s: v.StringV()}
			case lineprotocol.Bool:
				m.fields[string(k)] = sampleValue{kind: 'b', b: v.BoolV()}
			default:
				t.Fatalf("line %d: field %s of kind %v", len(out)+1, k, v.Kind())
			}
		}
		if m.t, err = dec.Time(lineprotocol.Millisecond, time.Time{}); err != nil || m.t.IsZero() {
			t.Fatalf("line %d: time %v, %v", len(out)+1, m.t, err)
		}
		out = append(out, m)
	}
	return out
}

// samplesOfArrow reads a find reply in Arrow: the time column "time", the
// meta column "tags" (canonical JSON), each other column by its type, a
// null being an absent field.
func samplesOfArrow(t *testing.T, b []byte) []sample {
	t.Helper()
	rd, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	sc := rd.Schema()
	var out []sample
	for rd.Next() {
		rec := rd.Record()
		for j := range int(rec.NumRows()) {
			m := sample{tags: map[string]string{}, fields: map[string]sampleValue{}}
			for c, f := range sc.Fields() {
				col := rec.Column(c)
				if col.IsNull(j) {
					continue
				}
				switch a := col.(type) {
				case *array.Timestamp:
					if f.Name != "time" {
						t.Fatalf("Arrow: date column %q: the samples have no date fields", f.Name)
					}
					m.t = time.Unix(0, int64(a.Value(j)))
				case *array.String:
					if f.Name != "tags" {
						m.fields[f.Name] = sampleValue{kind: 's', s: a.Value(j)}
						continue
					}
					if f.Metadata.FindKey(model.MetaColumnMetadataKey) < 0 {
						t.Fatalf("Arrow: meta column not marked: %s", sc)
					}
					if err := json.Unmarshal([]byte(a.Value(j)), &m.tags); err != nil {
						t.Fatalf("Arrow: meta %q: %v", a.Value(j), err)
					}
				case *array.Float64:
					m.fields[f.Name] = sampleValue{kind: 'f', f: a.Value(j)}
				case *array.Int64:
					m.fields[f.Name] = sampleValue{kind: 'i', i: a.Value(j)}
				case *array.Boolean:
					m.fields[f.Name] = sampleValue{kind: 'b', b: a.Value(j)}
				case *array.FixedSizeBinary: // _id, made of the series and time
				default:
					t.Fatalf("Arrow: column %q of type %s", f.Name, f.Type)
				}
			}
			out = append(out, m)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// diffSamples reports the first differences between want and got (both
// sorted), field by field. With wholeDoubles, got may hold a double that is
// a whole number as an integer: JSON find replies write doubles as
// encoding/json does (22, not 22.0), so only Arrow keeps the kinds apart.
func diffSamples(t *testing.T, what string, want, got []sample, wholeDoubles bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d measurements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range min(len(got), len(want)) {
		w, g := want[i], got[i]
		var diffs []string
		if !w.t.Equal(g.t) {
			diffs = append(diffs, fmt.Sprintf("time %s, want %s", g.t.Format(time.RFC3339Nano), w.t.Format(time.RFC3339Nano)))
		}
		if !maps.Equal(w.tags, g.tags) {
			diffs = append(diffs, fmt.Sprintf("tags %v, want %v", g.tags, w.tags))
		}
		for _, k := range slices.Sorted(maps.Keys(w.fields)) {
			if gv, ok := g.fields[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s missing, want %v", k, w.fields[k]))
			} else if gv != w.fields[k] && !(wholeDoubles && gv.kind == 'i' && w.fields[k].kind == 'f' && float64(gv.i) == w.fields[k].f) {
				diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", k, gv, w.fields[k]))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(g.fields)) {
			if _, ok := w.fields[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s = %v, want no such field", k, g.fields[k]))
			}
		}
		if len(diffs) > 0 {
			t.Errorf("%s: measurement %d (%v): %s", what, i, w, strings.Join(diffs, "; "))
			if bad++; bad == 5 {
				t.Fatalf("%s: more differences left out", what)
			}
		}
	}
}

func TestSampleFormatsAgree(t *testing.T) {
	fromArray := samplesOfJSON(t, decodeJSONDocs(t, readSample(t, "sensors.json"), false))
	fromNDJSON := samplesOfJSON(t, decodeJSONDocs(t, readSample(t, "sensors.ndjson"), true))
	fromLines := samplesOfLineProtocol(t, readSample(t, "sensors.lp"))
	for _, ms := range [][]sample{fromArray, fromNDJSON, fromLines} {
		sortSamples(ms)
	}
	// The files are the same measurements; what follows compares each
	// collection with the JSON array's.
	diffSamples(t, "sensors.ndjson against sensors.json", fromArray, fromNDJSON, false)
	diffSamples(t, "sensors.lp against sensors.json", fromArray, fromLines, false)
	if t.Failed() {
		t.FailNow()
	}
	want := fromArray

	s := newTestServer(t, nil)
	create := `{"timeseries": {"timeField": "time", "metaField": "tags"}}`
	s.mustDo(201, "PUT", "/v1/collections/fromjson", create)
	s.mustDo(201, "PUT", "/v1/collections/fromndjson", create)
	r := s.mustDo(200, "POST", "/v1/collections/fromjson/documents", string(readSample(t, "sensors.json")))
	if n := r.json(t)["inserted"]; n != float64(len(fromArray)) {
		t.Errorf("JSON array insert reply: %s, want %d inserted", r.body, len(fromArray))
	}
	r = s.mustDo(200, "POST", "/v1/collections/fromndjson/documents", string(readSample(t, "sensors.ndjson")),
		"Content-Type", "application/x-ndjson")
	if n := r.json(t)["inserted"]; n != float64(len(fromNDJSON)) {
		t.Errorf("NDJSON insert reply: %s, want %d inserted", r.body, len(fromNDJSON))
	}
	s.mustDo(204, "POST", "/write?db=fromlp&precision=ms", string(readSample(t, "sensors.lp")))

	colls := []struct {
		name string
		n    int // measurements in its file
	}{{"fromjson", len(fromArray)}, {"fromndjson", len(fromNDJSON)}, {"fromlp", len(fromLines)}}
	var firstOpts any
	for _, c := range colls {
		r := s.mustDo(200, "GET", "/v1/collections/"+c.name, "")
		desc := r.json(t)
		if desc["count"] != float64(c.n) {
			t.Errorf("%s: count %v, want %d (the measurements in its file)", c.name, desc["count"], c.n)
		}
		if firstOpts == nil {
			firstOpts = desc["options"]
		} else if !reflect.DeepEqual(desc["options"], firstOpts) {
			t.Errorf("%s: options %v, want %v", c.name, desc["options"], firstOpts)
		}
	}

	// find: every measurement, field by field, in JSON and in Arrow (whose
	// typed columns tell doubles from integers).
	for _, c := range colls {
		r := s.mustDo(200, "POST", "/v1/collections/"+c.name+"/find", `{"sort": {"time": 1}}`)
		got := samplesOfJSON(t, decodeJSONDocs(t, r.body, false))
		for i := 1; i < len(got); i++ {
			if got[i].t.Before(got[i-1].t) {
				t.Errorf("%s: find sorted by time returned %v before %v", c.name, got[i-1], got[i])
				break
			}
		}
		sortSamples(got)
		diffSamples(t, c.name+" find", want, got, true)

		r = s.mustDo(200, "POST", "/v1/collections/"+c.name+"/find", `{}`, "Accept", "application/vnd.apache.arrow.stream")
		got = samplesOfArrow(t, r.body)
		sortSamples(got)
		diffSamples(t, c.name+" find (Arrow)", want, got, false)
	}

	// aggregate: 1-minute windows per sensor, against each other and
	// against the windows computed here from the files. The group column is
	// named after the meta field ("tags"); a field without values in a
	// window has a count of 0 and no other columns.
	const agg = `{"window": "1m", "groupBy": "tags.sensor", "fields": ["temp", "hum", "batt"], "funcs": ["min", "max", "avg", "count"]}`
	var first []map[string]any
	for _, c := range colls {
		r := s.mustDo(200, "POST", "/v1/collections/"+c.name+"/aggregate", agg)
		rows := decodeJSONDocs(t, r.body, false)
		slices.SortStableFunc(rows, func(a, b map[string]any) int {
			if c := strings.Compare(fmt.Sprint(a["tags"]), fmt.Sprint(b["tags"])); c != 0 {
				return c
			}
			return strings.Compare(fmt.Sprint(a["time"]), fmt.Sprint(b["time"]))
		})
		if first == nil {
			first = rows
			checkSampleWindows(t, c.name, want, rows)
			continue
		}
		if len(rows) != len(first) {
			t.Errorf("%s: %d aggregate rows, fromjson %d", c.name, len(rows), len(first))
		}
		for i := range min(len(rows), len(first)) {
			if !reflect.DeepEqual(rows[i], first[i]) {
				t.Errorf("%s: aggregate row %d\n%v\nfromjson:\n%v", c.name, i, rows[i], first[i])
				break
			}
		}
	}
}

// checkSampleWindows compares aggregate rows (sorted by sensor and window)
// with the 1-minute windows of ms computed here.
func checkSampleWindows(t *testing.T, name string, ms []sample, rows []map[string]any) {
	t.Helper()
	type key struct {
		sensor string
		start  time.Time
	}
	type acc struct {
		n             int64
		sum, min, max float64
	}
	windows := map[key]map[string]*acc{}
	var keys []key
	for _, m := range ms {
		k := key{m.sensor(), m.t.Truncate(time.Minute)}
		w := windows[k]
		if w == nil {
			w = map[string]*acc{}
			windows[k] = w
			keys = append(keys, k)
		}
		for _, f := range []string{"temp", "hum", "batt"} {
			v, ok := m.fields[f]
			if !ok {
				continue
			}
			x := v.f
			if v.kind == 'i' {
				x = float64(v.i)
			}
			a := w[f]
			if a == nil {
				a = &acc{min: x, max: x}
				w[f] = a
			}
			a.n++
			a.sum += x
			a.min = math.Min(a.min, x)
			a.max = math.Max(a.max, x)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.sensor, b.sensor); c != 0 {
			return c
		}
		return a.start.Compare(b.start)
	})
	if len(rows) != len(keys) {
		t.Errorf("%s: %d aggregate rows, want %d (sensor, minute) windows", name, len(rows), len(keys))
		return
	}
	num := func(row map[string]any, col string) (float64, bool) {
		n, ok := row[col].(json.Number)
		if !ok {
			return 0, false
		}
		f, err := n.Float64()
		return f, err == nil
	}
	for i, k := range keys {
		row := rows[i]
		if row["tags"] != k.sensor || row["time"] != k.start.Format(time.RFC3339) {
			t.Errorf("%s: aggregate row %d is %v/%v, want %s/%s", name, i, row["tags"], row["time"], k.sensor, k.start.Format(time.RFC3339))
			return
		}
		for _, f := range []string{"temp", "hum", "batt"} {
			a := windows[k][f]
			if a == nil {
				a = &acc{}
			}
			if n, ok := row[f+"_count"].(json.Number); !ok || string(n) != strconv.FormatInt(a.n, 10) {
				t.Errorf("%s: %s %v: %s_count = %v, want %d", name, k.sensor, k.start, f, row[f+"_count"], a.n)
			}
			if a.n == 0 {
				for _, fn := range []string{"min", "max", "avg"} {
					if v, ok := row[f+"_"+fn]; ok {
						t.Errorf("%s: %s %v: %s_%s = %v, want none (no values)", name, k.sensor, k.start, f, fn, v)
					}
				}
				continue
			}
			for _, c := range []struct {
				fn   string
				want float64
			}{{"min", a.min}, {"max", a.max}, {"avg", a.sum / float64(a.n)}} {
				got, ok := num(row, f+"_"+c.fn)
				if !ok || math.Abs(got-c.want) > 1e-9*math.Max(1, math.Abs(c.want)) {
					t.Errorf("%s: %s %v: %s_%s = %v, want %v", name, k.sensor, k.start, f, c.fn, row[f+"_"+c.fn], c.want)
				}
			}
		}
	}
}
