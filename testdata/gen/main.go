//go:build ignore

// Command gen writes the format fixtures of one version into a directory of
// testdata/ (testdata/README.md says what each file is). Run from the module
// root:
//
//	go run testdata/gen/main.go -out testdata/vN [-wal testdata/wal]
//
// The same program, with the bucket encoding call adapted to what the
// commit had, was run at the commit that introduced each format version;
// its sources are kept beside it as vN.go.txt. Fixtures of an old version
// are never regenerated.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/timeseries/wal"
)

// useRefs is false for format version 1 (names in the bucket), true from
// version 2 on (names in a table the caller keeps).
const useRefs = true

func main() {
	out := flag.String("out", "", "directory to write the fixtures of this version into")
	walOut := flag.String("wal", "", "directory to write the log segment fixture into (optional)")
	child := flag.String("child", "", "internal: write the log-only store into this directory and exit without closing")
	flag.Parse()
	if *child != "" {
		writeLogOnly(*child)
		return
	}
	if *out == "" {
		log.Fatal("-out is required")
	}
	must(os.MkdirAll(*out, 0o755))
	writeBuckets(filepath.Join(*out, "buckets"))
	writeStore(filepath.Join(*out, "store"))
	dir := filepath.Join(*out, "logonly")
	cmd := exec.Command(os.Args[0], "-child", dir)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	must(cmd.Run())
	describeLog(dir)
	if *walOut != "" {
		writeWAL(*walOut)
	}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// writeJSON writes v indented, each value that fits in 250 bytes on one
// line.
func writeJSON(path string, v any) {
	b, err := json.Marshal(v)
	must(err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	must(dec.Decode(&x))
	var out bytes.Buffer
	pretty(&out, x, "")
	out.WriteByte('\n')
	must(os.WriteFile(path, out.Bytes(), 0o644))
}

func pretty(out *bytes.Buffer, v any, indent string) {
	b, err := json.Marshal(v)
	must(err)
	if len(b) <= 250 {
		out.Write(b)
		return
	}
	in := indent + "  "
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				out.WriteString(",")
			}
			kb, _ := json.Marshal(k)
			out.WriteString("\n" + in)
			out.Write(kb)
			out.WriteString(": ")
			pretty(out, v[k], in)
		}
		out.WriteString("\n" + indent + "}")
	case []any:
		if scalarsOnly(v) {
			// Scalars fill lines of about 100 bytes.
			out.WriteString("[")
			col := 100
			for i := range v {
				eb, err := json.Marshal(v[i])
				must(err)
				if col+len(eb) > 100 {
					out.WriteString("\n" + in)
					col = len(in)
				}
				out.Write(eb)
				col += len(eb)
				if i < len(v)-1 {
					out.WriteString(", ")
					col += 2
				}
			}
			out.WriteString("\n" + indent + "]")
			return
		}
		out.WriteString("[")
		for i := range v {
			if i > 0 {
				out.WriteString(",")
			}
			out.WriteString("\n" + in)
			pretty(out, v[i], in)
		}
		out.WriteString("\n" + indent + "]")
	default:
		out.Write(b)
	}
}

func scalarsOnly(v []any) bool {
	for _, x := range v {
		switch x.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

// Buckets.

// expColumn is one field of a bucket as the expected file holds it. Floats
// are float64 bit patterns in hex, so NaN payloads and -0 are exact.
type expColumn struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Present []bool   `json:"present,omitempty"` // nil: every row
	Floats  []string `json:"floats,omitempty"`
	Ints    []int64  `json:"ints,omitempty"`
	Strings []string `json:"strings,omitempty"`
	Bools   []bool   `json:"bools,omitempty"`
	// Hex holds a bson or objectid column's values, hex-encoded (from
	// store format 4; the absent rows' empty).
	Hex []string `json:"hex,omitempty"`
	// From the control block, as the writing version read it back.
	Count    int    `json:"count"`
	MinInt   int64  `json:"minInt"`
	MaxInt   int64  `json:"maxInt"`
	MinFloat string `json:"minFloat"`
	MaxFloat string `json:"maxFloat"`
	HasNaN   bool   `json:"hasNaN"`
}

type expBucket struct {
	File    string      `json:"file"`
	Version int         `json:"version"` // first byte
	Names   []string    `json:"names,omitempty"`
	Rows    int         `json:"rows"`
	MinTime int64       `json:"minTime"`
	MaxTime int64       `json:"maxTime"`
	Times   []int64     `json:"times"`
	Fields  []expColumn `json:"fields"`
}

func fbits(f float64) string { return fmt.Sprintf("%016x", math.Float64bits(f)) }

func presence(rows int, present func(i int) bool) []uint64 {
	words := make([]uint64, (rows+63)/64)
	for i := 0; i < rows; i++ {
		if present(i) {
			words[i/64] |= 1 << (i % 64)
		}
	}
	return words
}

// bucketCases returns the buckets to write, by file name.
func bucketCases() (names []string, cases []bucket.Columns) {
	const t0 = int64(1893456000) * 1e9 // 2030-01-01T00:00:00Z
	add := func(name string, c bucket.Columns) {
		names = append(names, name)
		cases = append(cases, c)
	}

	// types4 (store format 4): int32, bson (a Decimal128, an array, a
	// sub-document, binary) and objectid columns: ids of one process whose
	// counter steps by 3 and jumps every 10 rows (a steps block of mode 2)
	// and, with some rows absent, ids of two processes (mode 1 or 0).
	{
		const n = 50
		c := bucket.Columns{}
		var i32 []int64
		var bsons []string
		var ids, ids2 []byte
		cnt := 0x00fffff0
		for i := 0; i < n; i++ {
			c.Times = append(c.Times, t0+int64(i)*10e9)
			i32 = append(i32, int64(int32(i*i*1000-math.MaxInt32/2)))
			switch i % 4 {
			case 0:
				bsons = append(bsons, "\x13"+string(make([]byte, 15))+string([]byte{byte(i)}))
			case 1:
				bsons = append(bsons, "\x04\x0d\x00\x00\x00\x10\x30\x00"+string([]byte{byte(i), 0, 0, 0})+"\x00")
			case 2:
				bsons = append(bsons, "\x03\x0d\x00\x00\x00\x08\x7a\x00\x01\x10\x00\x00\x00\x00"[:14]+"\x00")
			default:
				bsons = append(bsons, "\x05\x02\x00\x00\x00\x00"+string([]byte{byte(i), 0xff}))
			}
			if i%10 == 0 {
				cnt += 997
			} else {
				cnt += 3
			}
			id := []byte{0x70, 0xdb, 0xca, byte(0x70 + i/20), 0xde, 0xad, 0xbe, 0xef, 0x42, byte(cnt >> 16), byte(cnt >> 8), byte(cnt)}
			ids = append(ids, id...)
			if i%3 == 0 {
				id[5] ^= 0xff
			}
			ids2 = append(ids2, id...)
		}
		c.Fields = []bucket.Column{
			{Name: "i32", Type: bucket.TypeInt32, Ints: i32},
			{Name: "val", Type: bucket.TypeBSON, Strings: bsons},
			{Name: "_id", Type: bucket.TypeObjectID, IDs: ids},
			{Name: "ref", Type: bucket.TypeObjectID, IDs: ids2, Present: presence(n, func(i int) bool { return i%5 != 2 })},
		}
		add("types4.bkt", c)
	}

	// kinds: every column type, a sparse field, NaN and infinities,
	// MinInt64 and MaxInt64, a zstd string dictionary.
	{
		const n = 40
		c := bucket.Columns{}
		for i := 0; i < n; i++ {
			c.Times = append(c.Times, t0+int64(i)*10e9)
		}
		var ints, dates, extreme []int64
		var dec, raw, odd []float64
		var strs, long []string
		var bools []bool
		for i := 0; i < n; i++ {
			ints = append(ints, int64(i*i)-300)
			dates = append(dates, t0-int64(i)*86400e9)
			dec = append(dec, float64(200+i*3)/10)
			raw = append(raw, math.Pi*float64(i)+1.0/3)
			strs = append(strs, []string{"ok", "warn", "ok", "fail"}[i%4])
			long = append(long, fmt.Sprintf("device-firmware-build-%03d-with-a-long-name", i%9))
			bools = append(bools, i%3 == 0)
			switch i % 5 {
			case 0:
				extreme = append(extreme, math.MinInt64)
			case 1:
				extreme = append(extreme, math.MaxInt64)
			default:
				extreme = append(extreme, int64(i))
			}
			switch i % 6 {
			case 0:
				odd = append(odd, math.NaN())
			case 1:
				odd = append(odd, math.Inf(1))
			case 2:
				odd = append(odd, math.Inf(-1))
			case 3:
				odd = append(odd, math.Copysign(0, -1))
			case 4:
				odd = append(odd, 5e-324)
			default:
				odd = append(odd, -1.5e300)
			}
		}
		sparse := make([]int64, n)
		for i := range sparse {
			if i%7 == 3 {
				sparse[i] = int64(1000 + i)
			}
		}
		c.Fields = []bucket.Column{
			{Name: "hum", Type: bucket.TypeInt, Ints: ints},
			{Name: "temp", Type: bucket.TypeFloat, Floats: dec},
			{Name: "phase", Type: bucket.TypeFloat, Floats: raw},
			{Name: "odd", Type: bucket.TypeFloat, Floats: odd},
			{Name: "extreme", Type: bucket.TypeInt, Ints: extreme},
			{Name: "status", Type: bucket.TypeString, Strings: strs},
			{Name: "firmware", Type: bucket.TypeString, Strings: long},
			{Name: "on", Type: bucket.TypeBool, Bools: bools},
			{Name: "seen", Type: bucket.TypeDate, Ints: dates},
			{Name: "err", Type: bucket.TypeInt, Ints: sparse,
				Present: presence(n, func(i int) bool { return i%7 == 3 })},
		}
		add("kinds.bkt", c)
	}

	// onerow: a single row, one field of each type.
	add("onerow.bkt", bucket.Columns{
		Times: []int64{-1},
		Fields: []bucket.Column{
			{Name: "f", Type: bucket.TypeFloat, Floats: []float64{math.NaN()}},
			{Name: "i", Type: bucket.TypeInt, Ints: []int64{math.MinInt64}},
			{Name: "s", Type: bucket.TypeString, Strings: []string{""}},
			{Name: "b", Type: bucket.TypeBool, Bools: []bool{false}},
			{Name: "d", Type: bucket.TypeDate, Ints: []int64{0}},
		},
	})

	// unordered: times out of order with duplicates, a field absent from
	// every row but one and a field present in no row.
	{
		times := []int64{t0 + 5e9, t0, t0, t0 + 3e9, t0 + 1, t0 + 5e9, t0 - 7e9}
		n := len(times)
		c := bucket.Columns{Times: times}
		c.Fields = []bucket.Column{
			{Name: "v", Type: bucket.TypeFloat, Floats: []float64{1, 2, 3, 4, 5, 6, 7}},
			{Name: "once", Type: bucket.TypeString, Strings: []string{"", "", "", "x\x00y", "", "", ""},
				Present: presence(n, func(i int) bool { return i == 3 })},
			{Name: "never", Type: bucket.TypeBool, Bools: make([]bool, n),
				Present: presence(n, func(int) bool { return false })},
		}
		add("unordered.bkt", c)
	}

	// wide: many int columns of like values, the shape whose int streams a
	// shared symbol block codes together (format version 3).
	{
		const n, nf = 200, 8
		rng := rand.New(rand.NewSource(14))
		c := bucket.Columns{}
		for i := 0; i < n; i++ {
			c.Times = append(c.Times, t0+int64(i)*10e9)
		}
		for f := 0; f < nf; f++ {
			v := make([]int64, n)
			x := int64(50)
			for i := range v {
				x += int64(rng.Intn(9)) - 4
				v[i] = x
			}
			c.Fields = append(c.Fields, bucket.Column{Name: fmt.Sprintf("usage_%02d", f), Type: bucket.TypeInt, Ints: v})
		}
		add("wide.bkt", c)
	}

	// blocks, blocksms (store format 6): 1,000 sorted irregular rows, the
	// shape whose time column the encoder writes in blocks of 256 rows
	// (time mode 3): every 10 s up to 5 ms late in nanoseconds, and up to
	// 50 ms late in whole milliseconds (scaled, time mode 2, holding a
	// column in blocks).
	{
		const n = 1000
		rng := rand.New(rand.NewSource(8))
		ns, ms := bucket.Columns{}, bucket.Columns{}
		var temp []float64
		var hum []int64
		for i := 0; i < n; i++ {
			ns.Times = append(ns.Times, t0+int64(i)*10e9+rng.Int63n(5e6))
			ms.Times = append(ms.Times, t0+int64(i)*10e9+rng.Int63n(50)*1e6)
			temp = append(temp, float64(200+(i*7)%61)/10)
			hum = append(hum, int64(40+(i*13)%30))
		}
		ns.Fields = []bucket.Column{{Name: "temp", Type: bucket.TypeFloat, Floats: temp}}
		ms.Fields = []bucket.Column{{Name: "hum", Type: bucket.TypeInt, Ints: hum}}
		add("blocks.bkt", ns)
		add("blocksms.bkt", ms)
	}
	return names, cases
}

func writeBuckets(dir string) {
	must(os.MkdirAll(dir, 0o755))
	names, cases := bucketCases()
	var enc bucket.Encoder
	var exp []expBucket
	for ci := range cases {
		c := &cases[ci]
		var table []string
		var buf []byte
		var err error
		if useRefs {
			// The table holds the names in another order than the
			// bucket, with names the bucket does not use, as a
			// collection's table does.
			table = []string{"unused"}
			refs := make([]uint32, len(c.Fields))
			for i := len(c.Fields) - 1; i >= 0; i-- {
				refs[i] = uint32(len(table))
				table = append(table, c.Fields[i].Name)
			}
			table = append(table, "later")
			buf, err = enc.EncodeRefs(nil, c, refs)
		} else {
			buf, err = enc.Encode(nil, c)
		}
		must(err)
		must(os.WriteFile(filepath.Join(dir, names[ci]), buf, 0o644))

		var r bucket.Reader
		if useRefs {
			must(r.ResetNames(buf, table))
		} else {
			must(r.Reset(buf))
		}
		e := expBucket{File: names[ci], Version: int(buf[0]), Names: table, Rows: r.Rows(),
			MinTime: r.MinTime(), MaxTime: r.MaxTime(), Times: c.Times}
		if r.NumFields() != len(c.Fields) {
			log.Fatalf("%s: %d fields read back, %d written", names[ci], r.NumFields(), len(c.Fields))
		}
		for fi := range c.Fields {
			in := &c.Fields[fi]
			i := r.FieldIndex(in.Name)
			info := r.Field(i)
			var col bucket.Column
			must(r.Column(i, &col))
			rows := len(c.Times)
			ec := expColumn{Name: in.Name, Type: in.Type.String(), Count: info.Count,
				MinInt: info.MinInt, MaxInt: info.MaxInt, MinFloat: fbits(info.MinFloat),
				MaxFloat: fbits(info.MaxFloat), HasNaN: info.HasNaN}
			count := 0
			if in.Present != nil {
				ec.Present = make([]bool, rows)
			}
			for j := 0; j < rows; j++ {
				p := in.IsPresent(j)
				if p {
					count++
				}
				if ec.Present != nil {
					ec.Present[j] = p
				}
				if p != col.IsPresent(j) {
					log.Fatalf("%s %s row %d: presence read back %v", names[ci], in.Name, j, col.IsPresent(j))
				}
				switch in.Type {
				case bucket.TypeFloat:
					v := 0.0
					if p {
						v = in.Floats[j]
					}
					if math.Float64bits(v) != math.Float64bits(col.Floats[j]) {
						log.Fatalf("%s %s row %d: %v read back as %v", names[ci], in.Name, j, v, col.Floats[j])
					}
					ec.Floats = append(ec.Floats, fbits(v))
				case bucket.TypeBSON:
					v := ""
					if p {
						v = in.Strings[j]
					}
					if v != col.Strings[j] {
						log.Fatalf("%s %s row %d: %x read back as %x", names[ci], in.Name, j, v, col.Strings[j])
					}
					ec.Hex = append(ec.Hex, hex.EncodeToString([]byte(v)))
				case bucket.TypeObjectID:
					v := make([]byte, bucket.ObjectIDLen)
					if p {
						v = in.ID(j)
					}
					if !bytes.Equal(v, col.ID(j)) {
						log.Fatalf("%s %s row %d: %x read back as %x", names[ci], in.Name, j, v, col.ID(j))
					}
					ec.Hex = append(ec.Hex, hex.EncodeToString(v))
				case bucket.TypeInt, bucket.TypeDate, bucket.TypeInt32:
					v := int64(0)
					if p {
						v = in.Ints[j]
					}
					if v != col.Ints[j] {
						log.Fatalf("%s %s row %d: %v read back as %v", names[ci], in.Name, j, v, col.Ints[j])
					}
					ec.Ints = append(ec.Ints, v)
				case bucket.TypeString:
					v := ""
					if p {
						v = in.Strings[j]
					}
					if v != col.Strings[j] {
						log.Fatalf("%s %s row %d: %q read back as %q", names[ci], in.Name, j, v, col.Strings[j])
					}
					ec.Strings = append(ec.Strings, v)
				case bucket.TypeBool:
					v := p && in.Bools[j]
					if v != col.Bools[j] {
						log.Fatalf("%s %s row %d: %v read back as %v", names[ci], in.Name, j, v, col.Bools[j])
					}
					ec.Bools = append(ec.Bools, v)
				}
			}
			if count != info.Count {
				log.Fatalf("%s %s: count %d, control block says %d", names[ci], in.Name, count, info.Count)
			}
			e.Fields = append(e.Fields, ec)
		}
		exp = append(exp, e)
		fmt.Printf("%s/%s: version %d, %d bytes\n", dir, names[ci], buf[0], len(buf))
	}
	writeJSON(filepath.Join(dir, "expected.json"), exp)
}

// Stores.

// t0 is the time of the first measurement. It lies in the future of when
// the fixtures were written so that expiry depends only on the clock a test
// passes in.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// storeModel is what a store holds, kept beside the writes to it.
type storeModel struct {
	rows []model.Measurement
	docs map[string]document.Doc
}

func sensorMeta(i int) map[string]any {
	site := "north"
	if i%2 == 0 {
		site = "south"
	}
	return map[string]any{"sensor": fmt.Sprintf("s%d", i), "site": site}
}

// measurements returns n measurements of sensor i from minute start, two
// minutes apart, with a late one (an hour before start) last.
func measurements(i, start, n int, extra bool) []model.Measurement {
	var ms []model.Measurement
	for k := start; k < start+n; k++ {
		t := t0.Add(time.Duration(2*k) * time.Minute)
		if k == start+n-1 {
			t = t0.Add(time.Duration(2*start-60) * time.Minute) // late
		}
		fs := []model.Field{
			{Name: "temp", Value: model.Float(float64(150+i*10+k%17) / 10)},
			{Name: "hum", Value: model.Int(int64(40 + (k*7+i)%30))},
			{Name: "status", Value: model.String([]string{"ok", "ok", "warn", "ok", "fail"}[(k+i)%5])},
			{Name: "on", Value: model.Bool((k+i)%3 != 0)},
			{Name: "seen", Value: model.Date(t.Add(-time.Duration(k%4) * time.Second).UnixNano())},
			{Name: "phase", Value: model.Float(math.Sin(float64(k)) * 1e3)},
		}
		if k%7 == 0 {
			fs = append(fs, model.Field{Name: "err", Value: model.Int(int64(k))})
		}
		if extra {
			fs = append(fs, model.Field{Name: "volt", Value: model.Float(3.3 - float64(k%5)/100)})
		}
		ms = append(ms, model.Measurement{Time: t.UnixNano(), Meta: sensorMeta(i), Fields: fs})
	}
	return ms
}

func device(k int) document.Doc {
	return document.Doc{
		"_id":      fmt.Sprintf("dev-%02d", k),
		"site":     []string{"north", "south", "east"}[k%3],
		"n":        int64(k),
		"model":    fmt.Sprintf("m%d", k%4),
		"score":    float64(k) / 4,
		"active":   k%2 == 0,
		"tags":     []any{"a", int64(k % 3)},
		"lastSeen": t0.Add(time.Duration(k) * time.Hour),
		"loc":      map[string]any{"x": int64(k), "y": "r" + fmt.Sprint(k%2)},
	}
}

func openDB(dir string) *timeseries.DB {
	db, err := timeseries.Open(timeseries.Options{
		Dir:                dir,
		CheckpointInterval: time.Hour,
		BucketMaxCount:     25,
		Now:                func() time.Time { return t0 },
	})
	must(err)
	return db
}

// phaseA creates the collections and writes the first data.
func phaseA(db *timeseries.DB, m *storeModel) {
	ctx := context.Background()
	exp := int64(30 * 86400)
	_, err := db.CreateCollection(ctx, "weather", timeseries.CollectionOptions{
		TimeSeries:         &model.TimeSeriesOptions{TimeField: "t", MetaField: "m", Granularity: model.GranularitySeconds},
		ExpireAfterSeconds: &exp,
	})
	must(err)
	for i := 1; i <= 3; i++ {
		ms := measurements(i, 0, 30, false)
		_, err := db.Insert(ctx, "weather", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{})
		must(err)
		m.rows = append(m.rows, ms...)
	}
	hour := int64(3600)
	_, _, err = db.CreateIndex(ctx, "weather", timeseries.IndexSpec{
		Name:                    "south_1h",
		Key:                     []timeseries.IndexKey{{Field: "t", Direction: 1}},
		ExpireAfterSeconds:      &hour,
		PartialFilterExpression: map[string]any{"m.site": "south"},
	})
	must(err)
	// A delete of one sensor's first half hour.
	f, err := partialfilter.Parse(map[string]any{"m.sensor": "s3", "t": map[string]any{"$lt": t0.Add(30 * time.Minute)}})
	must(err)
	_, err = db.Delete(ctx, "weather", f, timeseries.DeleteOptions{})
	must(err)
	m.deleteRows(func(r model.Measurement) bool {
		return r.Meta.(map[string]any)["sensor"] == "s3" && r.Time < t0.Add(30*time.Minute).UnixNano()
	})

	_, err = db.CreateCollection(ctx, "devices", timeseries.CollectionOptions{})
	must(err)
	var docs []document.Doc
	for k := 0; k < 20; k++ {
		docs = append(docs, device(k))
	}
	_, err = db.Insert(ctx, "devices", timeseries.Batch{Documents: docs}, timeseries.InsertOptions{})
	must(err)
	for k := range docs {
		m.docs[fmt.Sprintf("dev-%02d", k)] = device(k)
	}
	_, _, err = db.CreateIndex(ctx, "devices", timeseries.IndexSpec{
		Key: []timeseries.IndexKey{{Field: "site", Direction: 1}, {Field: "n", Direction: -1}}})
	must(err)
	day := int64(86400)
	_, _, err = db.CreateIndex(ctx, "devices", timeseries.IndexSpec{
		Key: []timeseries.IndexKey{{Field: "lastSeen", Direction: 1}}, ExpireAfterSeconds: &day})
	must(err)
	f, err = partialfilter.Parse(map[string]any{"n": map[string]any{"$gte": int64(17)}})
	must(err)
	_, err = db.Delete(ctx, "devices", f, timeseries.DeleteOptions{})
	must(err)
	for k := 17; k < 20; k++ {
		delete(m.docs, fmt.Sprintf("dev-%02d", k))
	}
}

// phaseB writes after the first checkpoint: a new sensor with a new field,
// a whole series deleted, documents added, updated and deleted, an index.
func phaseB(db *timeseries.DB, m *storeModel) {
	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		ms := measurements(i, 30, 10, i == 4)
		_, err := db.Insert(ctx, "weather", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{})
		must(err)
		m.rows = append(m.rows, ms...)
	}
	f, err := partialfilter.Parse(map[string]any{"m.sensor": "s2"})
	must(err)
	_, err = db.Delete(ctx, "weather", f, timeseries.DeleteOptions{})
	must(err)
	m.deleteRows(func(r model.Measurement) bool { return r.Meta.(map[string]any)["sensor"] == "s2" })

	var docs []document.Doc
	for k := 30; k < 35; k++ {
		docs = append(docs, device(k))
		m.docs[fmt.Sprintf("dev-%02d", k)] = device(k)
	}
	_, err = db.Insert(ctx, "devices", timeseries.Batch{Documents: docs}, timeseries.InsertOptions{})
	must(err)
	f, err = partialfilter.Parse(map[string]any{"_id": "dev-31"})
	must(err)
	_, err = db.Delete(ctx, "devices", f, timeseries.DeleteOptions{})
	must(err)
	delete(m.docs, "dev-31")
	_, _, err = db.CreateIndex(ctx, "devices", timeseries.IndexSpec{
		Key: []timeseries.IndexKey{{Field: "model", Direction: 1}}})
	must(err)
}

func (m *storeModel) deleteRows(match func(model.Measurement) bool) {
	kept := m.rows[:0]
	for _, r := range m.rows {
		if !match(r) {
			kept = append(kept, r)
		}
	}
	m.rows = kept
}

// expRow is one measurement as the expected file holds it.
type expRow struct {
	T int64             `json:"t"`
	M string            `json:"m"` // model.CanonicalMeta
	F map[string]expVal `json:"f"`
}

type expVal struct {
	Type string  `json:"type"`
	F    float64 `json:"f,omitempty"`
	I    int64   `json:"i,omitempty"`
	S    string  `json:"s,omitempty"`
	B    bool    `json:"b,omitempty"`
}

type expCollection struct {
	Name    string                 `json:"name"`
	Options map[string]any         `json:"options"`
	Count   int64                  `json:"count"`
	Buckets int64                  `json:"buckets,omitempty"`
	Fields  map[string][]string    `json:"fields,omitempty"`
	Indexes []timeseries.IndexSpec `json:"indexes"`
	TTL     *timeseries.TTLState   `json:"ttl,omitempty"`
	Rows    []expRow               `json:"rows,omitempty"`
	Docs    []any                  `json:"docs,omitempty"` // tagged (tag), by _id
}

type expStore struct {
	// Now is the clock the store was written with.
	Now         time.Time       `json:"now"`
	Collections []expCollection `json:"collections"`
}

// tag turns a document value into JSON that keeps its type: ints, floats
// and dates as one-key objects.
func tag(v any) any {
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
			out[i] = tag(v[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = tag(x)
		}
		return out
	default:
		return v
	}
}

func expected(db *timeseries.DB, m *storeModel) expStore {
	ctx := context.Background()
	var out expStore
	out.Now = t0
	for _, name := range []string{"devices", "weather"} {
		info, err := db.Describe(ctx, name)
		must(err)
		idx, err := db.ListIndexes(ctx, name)
		must(err)
		b, err := json.Marshal(info.Options)
		must(err)
		var opts map[string]any
		must(json.Unmarshal(b, &opts))
		c := expCollection{Name: name, Options: opts, Count: info.Count, Buckets: info.Buckets, Fields: info.Fields, Indexes: idx}
		if name == "weather" {
			st, err := db.TTLState(ctx, name)
			must(err)
			c.TTL = st
			for _, r := range m.rows {
				meta, err := model.CanonicalMeta(r.Meta)
				must(err)
				e := expRow{T: r.Time, M: meta, F: map[string]expVal{}}
				for _, f := range r.Fields {
					e.F[f.Name] = expVal{Type: f.Value.Kind.String(), F: f.Value.F, I: f.Value.I, S: f.Value.S, B: f.Value.B}
				}
				c.Rows = append(c.Rows, e)
			}
			sort.SliceStable(c.Rows, func(i, j int) bool {
				if c.Rows[i].M != c.Rows[j].M {
					return c.Rows[i].M < c.Rows[j].M
				}
				return c.Rows[i].T < c.Rows[j].T
			})
			if info.Count != int64(len(c.Rows)) {
				log.Fatalf("weather: Describe counts %d, %d written", info.Count, len(c.Rows))
			}
		} else {
			ids := make([]string, 0, len(m.docs))
			for id := range m.docs {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				c.Docs = append(c.Docs, tag(m.docs[id]))
			}
			n := 0
			_, err := timeseries.EachDoc(db.Find(ctx, name, timeseries.FindOptions{}))(func(document.Doc) error { n++; return nil })
			must(err)
			if n != len(ids) || info.Count != int64(n) {
				log.Fatalf("devices: %d found, Describe counts %d, %d written", n, info.Count, len(ids))
			}
		}
		out.Collections = append(out.Collections, c)
	}
	return out
}

// writeStore writes a store through every phase, checkpointed and closed,
// then compacts its Pebble files.
func writeStore(dir string) {
	must(os.RemoveAll(dir))
	db := openDB(dir)
	m := &storeModel{docs: map[string]document.Doc{}}
	phaseA(db, m)
	must(db.Checkpoint())
	phaseB(db, m)
	must(db.Checkpoint())
	exp := expected(db, m)
	must(db.Close())
	writeJSON(dir+".json", exp)
	report(dir)
}

// writeLogOnly writes phase A, checkpoints, writes phase B and exits
// without closing: phase B is only in the log.
func writeLogOnly(dir string) {
	must(os.RemoveAll(dir))
	db := openDB(dir)
	m := &storeModel{docs: map[string]document.Doc{}}
	phaseA(db, m)
	must(db.Checkpoint())
	phaseB(db, m)
	writeJSON(dir+".json", expected(db, m))
	os.Exit(0)
}

func report(dir string) {
	var n int64
	must(filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, err := d.Info()
			if err == nil {
				n += fi.Size()
			}
		}
		return err
	}))
	fmt.Printf("%s: %d bytes\n", dir, n)
}

// Log segments.

// expRecord is one log record as the expected file holds it.
type expRecord struct {
	Segment uint64 `json:"segment"`
	Offset  int64  `json:"offset"`
	Len     int    `json:"len"`
	SHA256  string `json:"sha256"`
	Kind    int    `json:"kind,omitempty"` // first byte: the store's record kind
}

// describeLog lists the records of a store's log, read from a copy.
func describeLog(dir string) {
	tmp, err := os.MkdirTemp("", "walcopy")
	must(err)
	defer os.RemoveAll(tmp)
	src := filepath.Join(dir, "wal")
	ents, err := os.ReadDir(src)
	must(err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		must(err)
		must(os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o644))
	}
	l, err := wal.Open(wal.Options{Dir: tmp})
	must(err)
	var recs []expRecord
	must(l.Replay(0, func(pos wal.Pos, rec []byte) error {
		sum := sha256.Sum256(rec)
		r := expRecord{Segment: pos.Segment, Offset: pos.Offset, Len: len(rec), SHA256: hex.EncodeToString(sum[:])}
		if len(rec) > 0 {
			r.Kind = int(rec[0])
		}
		recs = append(recs, r)
		return nil
	}))
	must(l.Close())
	writeJSON(dir+".wal.json", recs)
	fmt.Printf("%s: %d log records\n", dir, len(recs))
}

// writeWAL writes a log of records of every storage kind over several
// segments: empty, raw (incompressible), S2, and one larger than a segment.
func writeWAL(dir string) {
	must(os.RemoveAll(dir))
	l, err := wal.Open(wal.Options{Dir: dir, SegmentSize: 4096})
	must(err)
	rng := rand.New(rand.NewSource(7))
	var recs [][]byte
	recs = append(recs, nil, []byte("x"))
	for i := 0; i < 12; i++ {
		r := make([]byte, 100+i*97)
		if i%2 == 0 {
			rng.Read(r) // incompressible: stored raw
		} else {
			for j := range r {
				r[j] = "hourglass "[j%10] // compressible: stored S2
			}
		}
		recs = append(recs, r)
	}
	big := make([]byte, 5000) // larger than a segment
	rng.Read(big)
	recs = append(recs, big, []byte("last"))
	var exp []expRecord
	for _, r := range recs {
		pos, err := l.Append(r)
		must(err)
		sum := sha256.Sum256(r)
		exp = append(exp, expRecord{Segment: pos.Segment, Offset: pos.Offset, Len: len(r), SHA256: hex.EncodeToString(sum[:])})
	}
	must(l.Close())
	writeJSON(dir+".json", exp)
	report(dir)
}
