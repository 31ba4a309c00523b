package bucket_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hourglassdb/hourglass/bucket"
)

// The buckets in ../testdata/v*/buckets were written by the encoder of each
// format version (testdata/README.md); every later reader must decode them
// to exactly the values in their expected.json.

type fixtureColumn struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Present  []bool   `json:"present"`
	Floats   []string `json:"floats"`
	Ints     []int64  `json:"ints"`
	Strings  []string `json:"strings"`
	Bools    []bool   `json:"bools"`
	Hex      []string `json:"hex"` // bson and objectid values, hex-encoded
	Count    int      `json:"count"`
	MinInt   int64    `json:"minInt"`
	MaxInt   int64    `json:"maxInt"`
	MinFloat string   `json:"minFloat"`
	MaxFloat string   `json:"maxFloat"`
	HasNaN   bool     `json:"hasNaN"`
}

type fixtureBucket struct {
	File    string          `json:"file"`
	Version int             `json:"version"`
	Names   []string        `json:"names"`
	Rows    int             `json:"rows"`
	MinTime int64           `json:"minTime"`
	MaxTime int64           `json:"maxTime"`
	Times   []int64         `json:"times"`
	Fields  []fixtureColumn `json:"fields"`
}

var fixtureVersions = []struct {
	dir     string
	version byte
}{{"v1", bucket.Version}, {"v2", bucket.VersionRefs}, {"v3", bucket.VersionShared}, {"v4", bucket.VersionShared}, {"v5", bucket.VersionShared}, {"v6", bucket.VersionShared}, {"v7", bucket.VersionShared}, {"v8", bucket.VersionShared}, {"v9", bucket.VersionShared}, {"v10", bucket.VersionShared}, {"v11", bucket.VersionShared}}

func loadBucketFixtures(t *testing.T, dir string) []fixtureBucket {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", dir, "buckets", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp []fixtureBucket
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp) == 0 {
		t.Fatalf("%s: no buckets in expected.json", dir)
	}
	return exp
}

func floatBits(t *testing.T, s string) uint64 {
	t.Helper()
	u, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// sameFloat reports whether got has the bits want, or both are NaN (the
// bounds of an all-NaN column are a NaN of no particular payload).
func sameFloat(got float64, want uint64) bool {
	w := math.Float64frombits(want)
	return math.Float64bits(got) == want || (math.IsNaN(got) && math.IsNaN(w))
}

// checkBucket decodes data and compares it with e.
func checkBucket(t *testing.T, data []byte, e *fixtureBucket) {
	t.Helper()
	var r bucket.Reader
	if err := r.ResetNames(data, e.Names); err != nil {
		t.Fatalf("ResetNames: %v", err)
	}
	if r.Rows() != e.Rows || r.MinTime() != e.MinTime || r.MaxTime() != e.MaxTime {
		t.Fatalf("rows %d time %d..%d, want %d %d..%d", r.Rows(), r.MinTime(), r.MaxTime(), e.Rows, e.MinTime, e.MaxTime)
	}
	rows, minT, maxT, err := bucket.Peek(data)
	if err != nil || rows != e.Rows || minT != e.MinTime || maxT != e.MaxTime {
		t.Fatalf("Peek: %d %d..%d %v, want %d %d..%d", rows, minT, maxT, err, e.Rows, e.MinTime, e.MaxTime)
	}
	times, err := r.Times(nil)
	if err != nil {
		t.Fatalf("Times: %v", err)
	}
	if fmt.Sprint(times) != fmt.Sprint(e.Times) {
		t.Fatalf("times %v, want %v", times, e.Times)
	}
	if r.NumFields() != len(e.Fields) {
		t.Fatalf("%d fields, want %d", r.NumFields(), len(e.Fields))
	}
	var col bucket.Column
	for _, f := range e.Fields {
		i := r.FieldIndex(f.Name)
		if i < 0 {
			t.Fatalf("field %q missing", f.Name)
		}
		info := r.Field(i)
		if info.Name != f.Name || info.Type.String() != f.Type || info.Count != f.Count || info.HasNaN != f.HasNaN ||
			info.MinInt != f.MinInt || info.MaxInt != f.MaxInt ||
			!sameFloat(info.MinFloat, floatBits(t, f.MinFloat)) || !sameFloat(info.MaxFloat, floatBits(t, f.MaxFloat)) {
			t.Errorf("field %q: control block %+v, want %+v", f.Name, info, f)
		}
		if err := r.Column(i, &col); err != nil {
			t.Fatalf("field %q: %v", f.Name, err)
		}
		if col.Name != f.Name || col.Type.String() != f.Type {
			t.Errorf("field %q: column %q of type %v", f.Name, col.Name, col.Type)
		}
		for j := 0; j < e.Rows; j++ {
			want := f.Present == nil || f.Present[j]
			if col.IsPresent(j) != want {
				t.Errorf("field %q row %d: present %v, want %v", f.Name, j, col.IsPresent(j), want)
			}
		}
		if f.Present == nil && col.Present != nil {
			t.Errorf("field %q: Present set, every row holds a value", f.Name)
		}
		switch col.Type {
		case bucket.TypeFloat:
			if len(col.Floats) != len(f.Floats) {
				t.Fatalf("field %q: %d floats, want %d", f.Name, len(col.Floats), len(f.Floats))
			}
			for j, s := range f.Floats {
				if w := floatBits(t, s); math.Float64bits(col.Floats[j]) != w {
					t.Errorf("field %q row %d: %v (%016x), want %016x", f.Name, j, col.Floats[j], math.Float64bits(col.Floats[j]), w)
				}
			}
		case bucket.TypeBSON:
			var got []string
			for _, s := range col.Strings {
				got = append(got, hex.EncodeToString([]byte(s)))
			}
			if fmt.Sprint(got) != fmt.Sprint(f.Hex) {
				t.Errorf("field %q: %v, want %v", f.Name, got, f.Hex)
			}
		case bucket.TypeObjectID:
			var got []string
			for i := range len(col.IDs) / bucket.ObjectIDLen {
				got = append(got, hex.EncodeToString(col.ID(i)))
			}
			if fmt.Sprint(got) != fmt.Sprint(f.Hex) {
				t.Errorf("field %q: %v, want %v", f.Name, got, f.Hex)
			}
		case bucket.TypeInt, bucket.TypeDate, bucket.TypeInt32:
			if fmt.Sprint(col.Ints) != fmt.Sprint(f.Ints) {
				t.Errorf("field %q: %v, want %v", f.Name, col.Ints, f.Ints)
			}
		case bucket.TypeString:
			if fmt.Sprintf("%q", col.Strings) != fmt.Sprintf("%q", f.Strings) {
				t.Errorf("field %q: %q, want %q", f.Name, col.Strings, f.Strings)
			}
		case bucket.TypeBool:
			if fmt.Sprint(col.Bools) != fmt.Sprint(f.Bools) {
				t.Errorf("field %q: %v, want %v", f.Name, col.Bools, f.Bools)
			}
		default:
			t.Errorf("field %q: type %v", f.Name, col.Type)
		}
	}
}

func TestFormatFixtures(t *testing.T) {
	for _, v := range fixtureVersions {
		for _, e := range loadBucketFixtures(t, v.dir) {
			t.Run(v.dir+"/"+e.File, func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join("..", "testdata", v.dir, "buckets", e.File))
				if err != nil {
					t.Fatal(err)
				}
				if int(data[0]) != e.Version {
					t.Fatalf("version byte %d, expected.json says %d", data[0], e.Version)
				}
				if e.Version > int(v.version) {
					t.Fatalf("a %s fixture of version %d", v.dir, e.Version)
				}
				checkBucket(t, data, &e)
				if e.Version == int(bucket.Version) {
					// Version 1 holds its names: no table needed.
					var r bucket.Reader
					if err := r.Reset(data); err != nil {
						t.Fatalf("Reset: %v", err)
					}
				}
			})
		}
	}
	// Each version's own feature is in its fixtures: otherwise the test
	// above would not cover it.
	for _, v := range fixtureVersions {
		found := false
		for _, e := range loadBucketFixtures(t, v.dir) {
			found = found || e.Version == int(v.version)
		}
		if !found {
			t.Errorf("%s: no bucket of version %d", v.dir, v.version)
		}
	}
}

// TestFixturesReencode encodes the values of every fixture with the current
// encoder and decodes them back.
func TestFormatFixturesReencode(t *testing.T) {
	var enc bucket.Encoder
	for _, v := range fixtureVersions {
		for _, e := range loadBucketFixtures(t, v.dir) {
			t.Run(v.dir+"/"+e.File, func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join("..", "testdata", v.dir, "buckets", e.File))
				if err != nil {
					t.Fatal(err)
				}
				var r bucket.Reader
				if err := r.ResetNames(data, e.Names); err != nil {
					t.Fatal(err)
				}
				cols := bucket.Columns{}
				if cols.Times, err = r.Times(nil); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < r.NumFields(); i++ {
					var c bucket.Column
					if err := r.Column(i, &c); err != nil {
						t.Fatal(err)
					}
					cols.Fields = append(cols.Fields, c)
				}
				out, err := enc.Encode(nil, &cols)
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
				names := e.Names
				e.Names = nil
				checkBucket(t, out, &e)
				if names == nil {
					return
				}
				e.Names = names
				refs := make([]uint32, len(cols.Fields))
				for i := range cols.Fields {
					refs[i] = ^uint32(0)
					for j, n := range names {
						if n == cols.Fields[i].Name {
							refs[i] = uint32(j)
						}
					}
				}
				out, err = enc.EncodeRefs(nil, &cols, refs)
				if err != nil {
					t.Fatalf("EncodeRefs: %v", err)
				}
				if out[0] != bucket.VersionRefs && out[0] != bucket.VersionShared {
					t.Fatalf("EncodeRefs wrote version %d", out[0])
				}
				checkBucket(t, out, &e)
			})
		}
	}
}
