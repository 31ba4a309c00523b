package bucket

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// roundTrip encodes cols, decodes every column back and fails on any difference.
func roundTrip(t testing.TB, cols *Columns) []byte {
	t.Helper()
	var enc Encoder
	buf, err := enc.Encode(nil, cols)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	var r Reader
	if err := r.Reset(buf); err != nil {
		t.Fatalf("reset: %v", err)
	}
	checkDecoded(t, &r, cols)
	// The same columns with their names in a table: references from the end.
	table := make([]string, len(cols.Fields)+1)
	refs := make([]uint32, len(cols.Fields))
	for i := range cols.Fields {
		refs[i] = uint32(len(table) - 1 - i)
		table[refs[i]] = cols.Fields[i].Name
	}
	table[0] = "not in the bucket"
	rbuf, err := enc.EncodeRefs(nil, cols, refs)
	if err != nil {
		t.Fatalf("encode with name references: %v", err)
	}
	if err := r.ResetNames(rbuf, table); err != nil {
		t.Fatalf("reset with names: %v", err)
	}
	checkDecoded(t, &r, cols)
	if err := r.ResetNames(buf, table); err != nil { // a table does not hurt names inline
		t.Fatalf("reset with names, names inline: %v", err)
	}
	checkDecoded(t, &r, cols)
	return buf
}

func checkDecoded(t testing.TB, r *Reader, cols *Columns) {
	t.Helper()
	rows := len(cols.Times)
	if r.Rows() != rows || r.NumFields() != len(cols.Fields) {
		t.Fatalf("rows %d fields %d, want %d %d", r.Rows(), r.NumFields(), rows, len(cols.Fields))
	}
	times, err := r.Times([]int64{1, 2, 3})
	if err != nil {
		t.Fatalf("times: %v", err)
	}
	lo, hi := cols.Times[0], cols.Times[0]
	for i, ts := range cols.Times {
		if times[i] != ts {
			t.Fatalf("time %d: %d, want %d", i, times[i], ts)
		}
		lo, hi = min(lo, ts), max(hi, ts)
	}
	if r.MinTime() != lo || r.MaxTime() != hi {
		t.Fatalf("time range [%d %d], want [%d %d]", r.MinTime(), r.MaxTime(), lo, hi)
	}
	if n, a, b, err := Peek(r.data); err != nil || n != rows || a != lo || b != hi {
		t.Fatalf("Peek: %d [%d %d] %v, want %d [%d %d]", n, a, b, err, rows, lo, hi)
	}
	var got Column
	for i := range cols.Fields {
		want := &cols.Fields[i]
		if err := r.Column(i, &got); err != nil {
			t.Fatalf("column %q: %v", want.Name, err)
		}
		if j := r.FieldIndex(want.Name); j != i {
			t.Fatalf("FieldIndex(%q) = %d, want %d", want.Name, j, i)
		}
		checkColumn(t, &got, want, rows)
		checkInfo(t, r.Field(i), want, rows)
		// Presence alone: the same rows present, no values.
		p := Column{Floats: []float64{1}, Ints: []int64{1}, Strings: []string{"x"}, Bools: []bool{true}, IDs: make([]byte, 12)}
		if err := r.Presence(i, &p); err != nil {
			t.Fatalf("presence of %q: %v", want.Name, err)
		}
		if p.Name != want.Name || p.Type != want.Type || len(p.Floats)+len(p.Ints)+len(p.Strings)+len(p.Bools)+len(p.IDs) != 0 {
			t.Fatalf("presence of %q: name %q type %v, %d values", want.Name, p.Name, p.Type, len(p.Floats)+len(p.Ints)+len(p.Strings)+len(p.Bools))
		}
		for row := 0; row < rows; row++ {
			if p.IsPresent(row) != want.IsPresent(row) {
				t.Fatalf("presence of %q row %d: %v, want %v", want.Name, row, p.IsPresent(row), want.IsPresent(row))
			}
		}
	}
}

func checkColumn(t testing.TB, got, want *Column, rows int) {
	t.Helper()
	if got.Name != want.Name || got.Type != want.Type || got.Len() != rows {
		t.Fatalf("column %q %v len %d, want %q %v %d", got.Name, got.Type, got.Len(), want.Name, want.Type, rows)
	}
	for i := 0; i < rows; i++ {
		p := want.IsPresent(i)
		if got.IsPresent(i) != p {
			t.Fatalf("column %q row %d: present %v, want %v", want.Name, i, !p, p)
		}
		switch want.Type {
		case TypeFloat:
			g, w := math.Float64bits(got.Floats[i]), math.Float64bits(want.Floats[i])
			if !p {
				w = 0
			}
			if g != w {
				t.Fatalf("column %q row %d: %x (%v), want %x (%v)", want.Name, i, g, got.Floats[i], w, want.Floats[i])
			}
		case TypeInt, TypeDate, TypeInt32:
			w := want.Ints[i]
			if !p {
				w = 0
			}
			if got.Ints[i] != w {
				t.Fatalf("column %q row %d: %d, want %d", want.Name, i, got.Ints[i], w)
			}
		case TypeObjectID:
			w := string(want.ID(i))
			if !p {
				w = string(make([]byte, ObjectIDLen))
			}
			if string(got.ID(i)) != w {
				t.Fatalf("column %q row %d: %x, want %x", want.Name, i, got.ID(i), w)
			}
		case TypeString, TypeBSON:
			w := want.Strings[i]
			if !p {
				w = ""
			}
			if got.Strings[i] != w {
				t.Fatalf("column %q row %d: %q, want %q", want.Name, i, got.Strings[i], w)
			}
		case TypeBool:
			w := want.Bools[i] && p
			if got.Bools[i] != w {
				t.Fatalf("column %q row %d: %v, want %v", want.Name, i, got.Bools[i], w)
			}
		}
	}
}

func checkInfo(t testing.TB, fi FieldInfo, c *Column, rows int) {
	t.Helper()
	want := FieldInfo{Name: c.Name, Type: c.Type}
	first := true
	allNaN := true
	for i := 0; i < rows; i++ {
		if !c.IsPresent(i) {
			continue
		}
		want.Count++
		switch c.Type {
		case TypeInt, TypeDate, TypeInt32:
			v := c.Ints[i]
			if first || v < want.MinInt {
				want.MinInt = v
			}
			if first || v > want.MaxInt {
				want.MaxInt = v
			}
		case TypeFloat:
			v := c.Floats[i]
			if v != v {
				want.HasNaN = true
				break
			}
			if allNaN || v < want.MinFloat || (v == 0 && math.Signbit(v)) && want.MinFloat == 0 {
				want.MinFloat = v
			}
			if allNaN || v > want.MaxFloat {
				want.MaxFloat = v
			}
			allNaN = false
		}
		first = false
	}
	if c.Type == TypeFloat && want.Count > 0 && allNaN {
		if !math.IsNaN(fi.MinFloat) || !math.IsNaN(fi.MaxFloat) || !fi.HasNaN {
			t.Fatalf("field %q: info %+v, want NaN bounds", c.Name, fi)
		}
		return
	}
	// -0 and +0 compare equal: bounds are compared numerically.
	if fi.Name != want.Name || fi.Type != want.Type || fi.Count != want.Count || fi.HasNaN != want.HasNaN ||
		fi.MinInt != want.MinInt || fi.MaxInt != want.MaxInt || fi.MinFloat != want.MinFloat || fi.MaxFloat != want.MaxFloat {
		t.Fatalf("field %q: info %+v, want %+v", c.Name, fi, want)
	}
}

func regularTimes(n int, start, step int64) []int64 {
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = start + int64(i)*step
	}
	return ts
}

func bitmap(n int, present func(i int) bool) []uint64 {
	w := make([]uint64, (n+63)/64)
	for i := 0; i < n; i++ {
		if present(i) {
			w[i/64] |= 1 << (i % 64)
		}
	}
	return w
}

func floatCol(name string, vs ...float64) Column {
	return Column{Name: name, Type: TypeFloat, Floats: vs}
}
func intCol(name string, vs ...int64) Column { return Column{Name: name, Type: TypeInt, Ints: vs} }

func TestRoundTripBoundaries(t *testing.T) {
	nan1 := math.Float64frombits(0x7ff8000000000001)
	nan2 := math.Float64frombits(0xfff0000000000001) // negative signalling payload
	nan3 := math.Float64frombits(0x7fffffffffffffff)
	sub := math.Float64frombits(1)
	negZero := math.Copysign(0, -1)
	const minI, maxI = math.MinInt64, math.MaxInt64
	tests := []struct {
		name string
		cols Columns
	}{
		{"one row", Columns{Times: []int64{42}, Fields: []Column{floatCol("f", 1.5), intCol("i", -7)}}},
		{"one row no fields", Columns{Times: []int64{-1}}},
		{"nan payloads", Columns{Times: regularTimes(6, 0, 1), Fields: []Column{
			floatCol("f", math.NaN(), nan1, nan2, nan3, 1, nan1)}}},
		{"all nan", Columns{Times: regularTimes(3, 0, 1), Fields: []Column{floatCol("f", nan1, nan2, nan3)}}},
		{"zeros and infinities", Columns{Times: regularTimes(6, 0, 1), Fields: []Column{
			floatCol("f", negZero, 0, math.Inf(1), math.Inf(-1), negZero, 0)}}},
		{"negative zero only", Columns{Times: regularTimes(2, 0, 1), Fields: []Column{floatCol("f", negZero, negZero)}}},
		{"subnormals", Columns{Times: regularTimes(5, 0, 1), Fields: []Column{
			floatCol("f", sub, -sub, math.SmallestNonzeroFloat64*3, 0x1p-1060, math.Float64frombits(0x000fffffffffffff))}}},
		{"extreme floats", Columns{Times: regularTimes(4, 0, 1), Fields: []Column{
			floatCol("f", math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1e308)}}},
		{"decimals", Columns{Times: regularTimes(5, 0, 1), Fields: []Column{
			floatCol("f", 0.1, 0.25, -3.125, 99.999, 1e9), floatCol("whole", 1, 2, 3, -4e15, 0)}}},
		{"extreme ints", Columns{Times: regularTimes(5, 0, 1), Fields: []Column{
			intCol("i", minI, maxI, 0, minI, maxI), {Name: "d", Type: TypeDate, Ints: []int64{maxI, maxI, minI, -1, 1}}}}},
		{"constant ints", Columns{Times: regularTimes(100, 0, 1), Fields: []Column{intCol("i", make([]int64, 100)...)}}},
		{"extreme times", Columns{Times: []int64{minI, maxI, 0, minI, maxI, -1}, Fields: []Column{intCol("i", 1, 2, 3, 4, 5, 6)}}},
		{"equal times", Columns{Times: []int64{5, 5, 5, 5, 5}}},
		{"unsorted negative times", Columns{Times: []int64{-10, -30, -20, -1e18, 7, -10}}},
		{"empty strings", Columns{Times: regularTimes(4, 0, 1), Fields: []Column{
			{Name: "s", Type: TypeString, Strings: []string{"", "", "", ""}},
			{Name: "t", Type: TypeString, Strings: []string{"", "a", "", "bc"}}}}},
		{"bools", Columns{Times: regularTimes(5, 0, 1), Fields: []Column{
			{Name: "t", Type: TypeBool, Bools: []bool{true, true, true, true, true}},
			{Name: "f", Type: TypeBool, Bools: []bool{false, false, false, false, false}},
			{Name: "m", Type: TypeBool, Bools: []bool{true, false, false, true, true}}}}},
		{"all absent", Columns{Times: regularTimes(70, 0, 1), Fields: []Column{
			{Name: "f", Type: TypeFloat, Floats: make([]float64, 70), Present: make([]uint64, 2)},
			{Name: "s", Type: TypeString, Strings: make([]string, 70), Present: make([]uint64, 2)},
			{Name: "b", Type: TypeBool, Bools: make([]bool, 70), Present: make([]uint64, 2)}}}},
		{"sparse", Columns{Times: regularTimes(200, 1e18, 1e9), Fields: []Column{
			{Name: "f", Type: TypeFloat, Floats: make([]float64, 200), Present: bitmap(200, func(i int) bool { return i == 7 || i == 199 })},
			{Name: "i", Type: TypeInt, Ints: regularTimes(200, 0, 3), Present: bitmap(200, func(i int) bool { return i%3 == 0 })},
			{Name: "s", Type: TypeString, Strings: make([]string, 200), Present: bitmap(200, func(i int) bool { return i < 100 })},
			{Name: "b", Type: TypeBool, Bools: make([]bool, 200), Present: bitmap(200, func(i int) bool { return i >= 150 })}}}},
		{"garbage past last row", Columns{Times: regularTimes(3, 0, 1), Fields: []Column{
			{Name: "i", Type: TypeInt, Ints: []int64{1, 2, 3}, Present: []uint64{^uint64(0) &^ 2}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { roundTrip(t, &tc.cols) })
	}
}

func TestManyFields(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	cols := Columns{Times: regularTimes(50, 0, 1e9)}
	for i := range 500 {
		cols.Fields = append(cols.Fields, randomColumn(rng, "field_"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+itoa(i), 50))
	}
	roundTrip(t, &cols)
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestMaxRows(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	n := MaxRows
	cols := Columns{Times: regularTimes(n, 0, 10e9), Fields: []Column{
		{Name: "i", Type: TypeInt, Ints: regularTimes(n, 5, -3)},
		{Name: "b", Type: TypeBool, Bools: make([]bool, n), Present: bitmap(n, func(i int) bool { return i%5 != 0 })},
	}}
	roundTrip(t, &cols)
	cols.Times = append(cols.Times, 1)
	var enc Encoder
	if _, err := enc.Encode(nil, &cols); !errors.Is(err, ErrTooManyRows) {
		t.Fatalf("encode %d rows: %v, want ErrTooManyRows", n+1, err)
	}
}

func TestEncodeErrors(t *testing.T) {
	tests := []struct {
		name string
		cols Columns
		want error
	}{
		{"no rows", Columns{}, ErrNoRows},
		{"short values", Columns{Times: []int64{1, 2}, Fields: []Column{intCol("i", 1)}}, ErrColumnLength},
		{"wrong type slice", Columns{Times: []int64{1}, Fields: []Column{{Name: "i", Type: TypeInt, Floats: []float64{1}}}}, ErrColumnLength},
		{"presence length", Columns{Times: []int64{1}, Fields: []Column{{Name: "i", Type: TypeInt, Ints: []int64{1}, Present: []uint64{1, 0}}}}, ErrColumnLength},
		{"empty name", Columns{Times: []int64{1}, Fields: []Column{intCol("", 1)}}, ErrFieldName},
		{"duplicate name", Columns{Times: []int64{1}, Fields: []Column{intCol("a", 1), intCol("a", 2)}}, ErrFieldName},
		{"unknown type", Columns{Times: []int64{1}, Fields: []Column{{Name: "x", Type: 9}}}, ErrType},
		{"zero type", Columns{Times: []int64{1}, Fields: []Column{{Name: "x"}}}, ErrType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var enc Encoder
			dst := []byte("prefix")
			out, err := enc.Encode(dst, &tc.cols)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if string(out) != "prefix" {
				t.Fatalf("dst changed on error")
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	var r Reader
	if err := r.Reset(nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("empty: %v", err)
	}
	// Reset(nil) is how a scan lets go of its last bucket: it builds no error.
	if n := testing.AllocsPerRun(100, func() { _ = r.Reset(nil) }); n != 0 {
		t.Fatalf("Reset(nil) allocates %v times", n)
	}
	if err := r.Reset([]byte{4, 1}); !errors.Is(err, ErrVersion) {
		t.Fatalf("version 4: %v", err)
	}
	var enc Encoder
	buf, err := enc.Encode(nil, &Columns{Times: regularTimes(10, 0, 1), Fields: []Column{intCol("i", regularTimes(10, 3, 7)...)}})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(buf); n++ {
		if err := r.Reset(buf[:n]); err == nil {
			t.Fatalf("truncated to %d of %d: no error", n, len(buf))
		}
	}
	if err := r.Reset(append(buf, 0)); err == nil {
		t.Fatalf("trailing byte: no error")
	}
	if err := r.Reset(buf); err != nil {
		t.Fatal(err)
	}
	if err := r.Column(1, &Column{}); !errors.Is(err, ErrFieldIndex) {
		t.Fatalf("column 1: %v", err)
	}
	if r.FieldIndex("nope") != -1 {
		t.Fatalf("FieldIndex of a missing field")
	}

	// Name references.
	two := &Columns{Times: regularTimes(10, 0, 1), Fields: []Column{intCol("i", regularTimes(10, 3, 7)...), intCol("j", regularTimes(10, 3, 7)...)}}
	if _, err := enc.EncodeRefs(nil, two, []uint32{1, 1}); !errors.Is(err, ErrFieldName) {
		t.Fatalf("a reference used twice: %v", err)
	}
	if _, err := enc.EncodeRefs(nil, two, []uint32{1}); !errors.Is(err, ErrFieldName) {
		t.Fatalf("a reference missing: %v", err)
	}
	rbuf, err := enc.EncodeRefs(nil, two, []uint32{2, 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reset(rbuf); !errors.Is(err, ErrNoNames) {
		t.Fatalf("references without a table: %v", err)
	}
	if err := r.ResetNames(rbuf, []string{"j", "x"}); !errors.Is(err, ErrNoNames) {
		t.Fatalf("a reference past the table: %v", err)
	}
	if err := r.ResetNames(rbuf, []string{"j", "x", "i"}); err != nil || r.Field(0).Name != "i" || r.Field(1).Name != "j" {
		t.Fatalf("names %v: %v", r.fields, err)
	}
	for n := 0; n < len(rbuf); n++ {
		if err := r.ResetNames(rbuf[:n], []string{"j", "x", "i"}); err == nil {
			t.Fatalf("truncated to %d of %d: no error", n, len(rbuf))
		}
	}
	dup := slices.Clone(rbuf)
	if dup[5] != 2 || dup[10] != 0 { // the two references, after a 5-byte header and a 5-byte entry
		t.Fatalf("layout changed: %x", dup)
	}
	dup[10] = 2
	if err := r.ResetNames(dup, []string{"j", "x", "i"}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a reference used twice: %v", err)
	}
}

// randomColumn makes a column of a random type, value shape and presence pattern.
func randomColumn(rng *rand.Rand, name string, rows int) Column {
	c := Column{Name: name, Type: Type(1 + rng.Intn(5))}
	switch rng.Intn(5) {
	case 0: // all present
	case 1:
		c.Present = bitmap(rows, func(int) bool { return rng.Intn(2) == 0 })
	case 2:
		c.Present = bitmap(rows, func(int) bool { return rng.Intn(50) == 0 })
	case 3:
		cut := rng.Intn(rows + 1)
		c.Present = bitmap(rows, func(i int) bool { return i >= cut })
	case 4:
		c.Present = make([]uint64, (rows+63)/64)
		for i := range c.Present {
			c.Present[i] = rng.Uint64()
		}
	}
	shape := rng.Intn(6)
	switch c.Type {
	case TypeFloat:
		c.Floats = make([]float64, rows)
		v := rng.Float64() * 100
		for i := range c.Floats {
			switch shape {
			case 0:
				c.Floats[i] = math.Float64frombits(rng.Uint64())
			case 1:
				v += rng.NormFloat64()
				c.Floats[i] = v
			case 2:
				c.Floats[i] = float64(rng.Intn(10000)) / 100
			case 3:
				c.Floats[i] = math.Round(v) + float64(i)
			case 4:
				c.Floats[i] = []float64{0, math.NaN(), math.Inf(1), math.Copysign(0, -1), 1}[rng.Intn(5)]
			default:
				c.Floats[i] = 3.25
			}
		}
	case TypeInt, TypeDate:
		c.Ints = make([]int64, rows)
		v := rng.Int63n(1000)
		for i := range c.Ints {
			switch shape {
			case 0:
				c.Ints[i] = int64(rng.Uint64())
			case 1:
				v += int64(rng.NormFloat64() * 3)
				c.Ints[i] = v
			case 2:
				c.Ints[i] = rng.Int63n(4)
			case 3:
				c.Ints[i] = v + int64(i)*1000
			case 4:
				c.Ints[i] = []int64{math.MinInt64, math.MaxInt64, 0, -1}[rng.Intn(4)]
			default:
				c.Ints[i] = -5
			}
		}
	case TypeString:
		c.Strings = make([]string, rows)
		words := []string{"", "a", "host_1", "us-west-2", strings.Repeat("long value ", 20)}
		for i := range c.Strings {
			switch shape {
			case 0, 1:
				c.Strings[i] = words[rng.Intn(len(words))]
			case 2:
				c.Strings[i] = "id-" + itoa(rng.Intn(1e6))
			case 3:
				c.Strings[i] = strings.Repeat("z", rng.Intn(300))
			default:
				c.Strings[i] = "same"
			}
		}
	case TypeBool:
		c.Bools = make([]bool, rows)
		for i := range c.Bools {
			switch shape {
			case 0, 1:
				c.Bools[i] = rng.Intn(2) == 0
			case 2:
				c.Bools[i] = i >= rows/2
			default:
				c.Bools[i] = shape == 3
			}
		}
	}
	return c
}

func TestRandomRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var enc Encoder
	var r Reader
	for iter := range 400 {
		rows := 1 + rng.Intn(1500)
		if iter%10 == 0 {
			rows = 1 + rng.Intn(3)
		}
		cols := Columns{Times: make([]int64, rows)}
		step := []int64{10e9, 1, 0, -1e9}[rng.Intn(4)]
		t0 := rng.Int63() - rng.Int63()
		for i := range cols.Times {
			cols.Times[i] = t0 + int64(i)*step
			if rng.Intn(4) == 0 {
				cols.Times[i] += rng.Int63n(1e6) - 5e5
			}
		}
		for f := range rng.Intn(12) {
			cols.Fields = append(cols.Fields, randomColumn(rng, "f"+itoa(f), rows))
		}
		buf, err := enc.Encode(nil, &cols)
		if err != nil {
			t.Fatalf("iter %d: encode: %v", iter, err)
		}
		if err := r.Reset(buf); err != nil {
			t.Fatalf("iter %d: reset: %v", iter, err)
		}
		checkDecoded(t, &r, &cols)
	}
}

// TestSharedBlock checks buckets whose int streams share one symbol block: columns read
// alone in any order, columns that do not share next to ones that do, and damage to the
// block.
func TestSharedBlock(t *testing.T) {
	cols := tsbsBuckets(tsbsInt, 1)[3]
	rows := len(cols.Times)
	// Around the shared columns: a constant column (no symbols), a sparse one (not
	// sharable), strings, and a float column.
	rng := rand.New(rand.NewSource(3))
	sparse := randomColumn(rng, "sparse", rows)
	sparse.Type, sparse.Ints, sparse.Floats, sparse.Strings, sparse.Bools = TypeInt, make([]int64, rows), nil, nil, nil
	for i := range sparse.Ints {
		sparse.Ints[i] = rng.Int63n(5)
	}
	sparse.Present = bitmap(rows, func(i int) bool { return i%3 != 0 })
	strs := Column{Name: "s", Type: TypeString, Strings: make([]string, rows)}
	for i := range strs.Strings {
		strs.Strings[i] = itoa(i % 4)
	}
	fl := Column{Name: "fl", Type: TypeFloat, Floats: make([]float64, rows)}
	for i := range fl.Floats {
		fl.Floats[i] = float64(i%7) / 4
	}
	cols.Fields = append([]Column{intCol("const", make([]int64, rows)...), sparse}, append(cols.Fields[:5:5], append([]Column{strs, fl}, cols.Fields[5:]...)...)...)
	table := make([]string, len(cols.Fields))
	refs := make([]uint32, len(cols.Fields))
	for i := range cols.Fields {
		table[i], refs[i] = cols.Fields[i].Name, uint32(i)
	}
	var enc Encoder
	buf, err := enc.EncodeRefs(nil, &cols, refs)
	if err != nil {
		t.Fatal(err)
	}
	if buf[0] != VersionShared {
		t.Fatalf("version %d, want a shared block", buf[0])
	}
	plain, _ := enc.Encode(nil, &cols)
	t.Logf("%d bytes with a name table and a shared block, %d with names", len(buf), len(plain))
	var r Reader
	for _, order := range [][]int{{9, 2, 0, 13}, {13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}} {
		if err := r.ResetNames(buf, table); err != nil {
			t.Fatal(err)
		}
		for _, i := range order {
			var c Column
			if err := r.Column(i, &c); err != nil {
				t.Fatalf("column %d: %v", i, err)
			}
			checkColumn(t, &c, &cols.Fields[i], rows)
		}
	}
	shared := 0
	for i := range r.fields {
		if r.sharedPos[i] >= 0 {
			shared++
		}
	}
	if shared < 10 || r.sharedPos[0] >= 0 || r.sharedPos[1] >= 0 || r.sharedPos[7] >= 0 {
		t.Fatalf("shared runs at %v", r.sharedPos)
	}
	// Damage: every byte of the bucket changed in turn must give an error or the
	// right values, never a panic or silently wrong columns of the shared block.
	for i := 1; i < len(buf); i++ {
		bad := slices.Clone(buf)
		bad[i] ^= 0x55
		if err := r.ResetNames(bad, table); err != nil {
			continue
		}
		for f := range cols.Fields {
			var c Column
			_ = r.Column(f, &c)
		}
	}
}

// TestSharedBlockLimits checks that a shared block's symbol count must be what its
// columns take before anything is decoded, and that the encoder shares no more than
// MaxSharedSymbols symbols.
func TestSharedBlockLimits(t *testing.T) {
	cols := tsbsBuckets(tsbsInt, 1)[0]
	var enc Encoder
	buf, err := enc.EncodeRefs(nil, &cols, tsbsRefs)
	if err != nil || buf[0] != VersionShared {
		t.Fatalf("version %d: %v", buf[0], err)
	}
	var r Reader
	if err := r.ResetNames(buf, tsbsFields); err != nil {
		t.Fatal(err)
	}
	// The block starts right after the time column; its count is a uvarint.
	off := r.sharedOff
	n, k := binary.Uvarint(buf[off:])
	if n != uint64(10*(len(cols.Times)-1)) {
		t.Fatalf("shared block of %d symbols", n)
	}
	for _, bad := range []uint64{n - 1, n + 1, 1 << 40} {
		b := append(slices.Clone(buf[:off]), binary.AppendUvarint(nil, bad)...)
		b = append(b, buf[off+k:]...)
		// The shared length in the lengths section changes with the uvarint's size:
		// rebuild it only when the size is the same, else expect a length error.
		if err := r.ResetNames(b, tsbsFields); err != nil {
			continue
		}
		var c Column
		if err := r.Column(0, &c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("count %d: %v", bad, err)
		}
	}
	if testing.Short() {
		return
	}
	// MaxRows rows of five like int columns: 5 x 2^20 symbols, over the limit.
	rng := rand.New(rand.NewSource(1))
	big := Columns{Times: regularTimes(MaxRows, 0, 1e9)}
	for f := 0; f < 5; f++ {
		vals := make([]int64, MaxRows)
		for i := 1; i < len(vals); i++ {
			vals[i] = vals[i-1] + rng.Int63n(5) - 2
		}
		big.Fields = append(big.Fields, intCol(itoa(f), vals...))
	}
	buf, err = enc.EncodeRefs(nil, &big, []uint32{0, 1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	if buf[0] != VersionRefs {
		t.Fatalf("version %d: a shared block over %d symbols", buf[0], MaxSharedSymbols)
	}
}

// TestEncodingCheck checks the encodings a control entry may give each type, as
// docs/format/bucket.md lists them, and their names.
func TestEncodingCheck(t *testing.T) {
	allowed := map[Type][]encoding{
		TypeFloat:  {encDecimal, encFloat},
		TypeInt:    {encInt, encScaledInt},
		TypeString: {encString},
		TypeBool:   {encBool},
		TypeDate:   {encInt, encScaledInt},
		TypeInt32:  {encInt, encScaledInt},
		TypeBSON:   {encString},
		// ObjectIds: their parts (enc_objectid.go).
		TypeObjectID: {encObjectID},
	}
	for typ := TypeFloat; typ <= TypeObjectID; typ++ {
		for e := encoding(0); e < 16; e++ {
			if got := e.check(typ, 0); got != (e == encEmpty) {
				t.Errorf("%v with no value: check %v", e, got)
			}
			want := slices.Contains(allowed[typ], e)
			if got := e.check(typ, 3); got != want {
				t.Errorf("%v for %v: check %v, want %v", e, typ, got, want)
			}
		}
	}
	names := []string{"empty", "int", "decimal", "float", "string", "bool", "scaled int", "objectid", "encoding(8)"}
	for e, want := range names {
		if got := encoding(e).String(); got != want {
			t.Errorf("encoding %d is %q, want %q", e, got, want)
		}
	}
}

// TestCorruptIsCorruption checks that a bucket's corruption is corruption to every
// layer (mongoerr.ErrCorrupt), and a bad version is not.
func TestCorruptIsCorruption(t *testing.T) {
	var r Reader
	for _, bad := range [][]byte{nil, {Version}, {Version, 0}} {
		err := r.Reset(bad)
		if !errors.Is(err, ErrCorrupt) || !errors.Is(err, mongoerr.ErrCorrupt) {
			t.Errorf("% x: %v, want corruption", bad, err)
		}
	}
	if err := r.Reset([]byte{9, 1}); errors.Is(err, mongoerr.ErrCorrupt) {
		t.Errorf("version 9: %v is corruption", err)
	}
}

// Times in whole microseconds, milliseconds or seconds are stored divided
// by their unit (timeScaled), and decode to the same values.
func TestScaledTimes(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	jittered := func(unit int64, start int64) []int64 {
		ts := make([]int64, 360)
		for i := range ts {
			ts[i] = start + (int64(i)*10e9+rng.Int63n(2e9))/unit*unit
		}
		return ts
	}
	var enc Encoder
	var r Reader
	for _, tc := range []struct {
		name  string
		times []int64
		k     byte // the scale exponent written, 0: none
	}{
		{"ns", jittered(1, 1.7e18), 0},
		{"us", jittered(1e3, 1.7e18), 3},
		{"ms", jittered(1e6, 1.7e18), 6},
		{"s", jittered(1e9, 1.7e18), 9},
		{"ms before 1970", jittered(1e6, -1e18-1e6), 6},
		{"ms off a ms min", []int64{7, 7 + 2e6, 7 + 5e6, 7 + 1e6}, 6}, // multiples past the minimum
		{"unsorted s", []int64{30e9, 10e9, 20e9, 10e9, 0}, 9},
		{"one row", []int64{5e9}, 0},
		{"equal", []int64{5e9, 5e9, 5e9}, 9},
		{"extremes", []int64{math.MinInt64, math.MaxInt64 - 807}, 0},     // span 2^64-808: wraps to -808
		{"extremes ms", []int64{math.MinInt64, math.MinInt64 + 9e18}, 9}, // 9e18 fits
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols := Columns{Times: tc.times, Fields: []Column{intCol("i", regularTimes(len(tc.times), 0, 1)...)}}
			buf := roundTrip(t, &cols)
			if err := r.Reset(buf); err != nil {
				t.Fatal(err)
			}
			col := buf[r.timeOff : r.timeOff+r.timeLen]
			if k := byte(0); col[0] == timeScaled {
				k = col[1]
				if k != tc.k {
					t.Fatalf("scale 10^%d, want 10^%d", k, tc.k)
				}
			} else if tc.k != 0 {
				t.Fatalf("mode %d, want scaled by 10^%d", col[0], tc.k)
			}
		})
	}
	// Jittered milliseconds cost their milliseconds: under half the bytes
	// of the same times with nanoseconds kept.
	ms := jittered(1e6, 1.7e18)
	ns := slices.Clone(ms)
	for i := range ns {
		ns[i] += rng.Int63n(1e6)
	}
	size := func(ts []int64) int {
		buf, err := enc.Encode(nil, &Columns{Times: ts})
		if err != nil {
			t.Fatal(err)
		}
		return len(buf)
	}
	if a, b := size(ms), size(ns); a*2 > b {
		t.Fatalf("ms times %d bytes, ns times %d", a, b)
	}
}

// A scaled time column with a bad scale, a scale inside a scale, or values
// past the header's range is corrupt.
func TestScaledTimesCorrupt(t *testing.T) {
	var enc Encoder
	var r Reader
	buf, err := enc.Encode(nil, &Columns{Times: []int64{0, 3e6, 1e6, 7e6}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reset(buf); err != nil {
		t.Fatal(err)
	}
	off := r.timeOff
	if buf[off] != timeScaled || buf[off+1] != 6 {
		t.Fatalf("time column %x: not scaled by 10^6", buf[off:])
	}
	for _, tc := range []struct {
		name string
		at   int
		b    byte
	}{
		{"scale 10^4", 1, 4},
		{"scale 10^0", 1, 0},
		{"scale 10^12", 1, 12},
		{"scale 10^255", 1, 255},
		{"scaled twice", 2, timeScaled},
		{"unknown inner mode", 2, 7},
		{"scale 10^3: values short of the maximum", 1, 3},
		{"scale 10^9: values past the maximum", 1, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := slices.Clone(buf)
			bad[off+tc.at] = tc.b
			if err := r.Reset(bad); err != nil {
				return // refused on reset: fine
			}
			if _, err := r.Times(nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Times: %v, want ErrCorrupt", err)
			}
		})
	}
}

// The fixtures of each store format hold what that format added: scaled
// time columns from testdata/v4 (store format 2) on, scaled int columns
// from testdata/v5 (3) on, int32, bson and objectid columns from
// testdata/v6 (4) on, time columns in blocks (time mode 3), of nanoseconds
// and inside a scaled column, from testdata/v8 (6) on.
// TestFormatFixtures reads their values.
func TestFormatFixturesFeatures(t *testing.T) {
	scaledTimes := func(r *Reader, data []byte) bool { return data[r.timeOff] == timeScaled }
	scaledInts := func(r *Reader, _ []byte) bool {
		for i := range r.fields {
			if r.fields[i].info.enc == encScaledInt {
				return true
			}
		}
		return false
	}
	types4 := func(r *Reader, _ []byte) bool {
		var have uint16
		for i := range r.fields {
			have |= 1 << r.fields[i].typ
		}
		return have&(1<<TypeInt32|1<<TypeBSON|1<<TypeObjectID) == 1<<TypeInt32|1<<TypeBSON|1<<TypeObjectID
	}
	timeBlocksIn := func(scaled bool) func(r *Reader, data []byte) bool {
		return func(r *Reader, data []byte) bool {
			src, _, _, err := r.timeColumn()
			return err == nil && src[0] == timeBlocks && (data[r.timeOff] == timeScaled) == scaled
		}
	}
	for _, tc := range []struct {
		dir, what string
		has       func(r *Reader, data []byte) bool
	}{
		{"v4", "a scaled time column", scaledTimes},
		{"v5", "a scaled time column", scaledTimes},
		{"v5", "a scaled int column", scaledInts},
		{"v6", "int32, bson and objectid columns", types4},
		{"v8", "a time column in blocks", timeBlocksIn(false)},
		{"v8", "a scaled time column in blocks", timeBlocksIn(true)},
	} {
		dir := filepath.Join("..", "testdata", tc.dir, "buckets")
		b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
		if err != nil {
			t.Fatal(err)
		}
		var exp []struct {
			File  string   `json:"file"`
			Names []string `json:"names"`
		}
		if err := json.Unmarshal(b, &exp); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range exp {
			data, err := os.ReadFile(filepath.Join(dir, e.File))
			if err != nil {
				t.Fatal(err)
			}
			var r Reader
			if err := r.ResetNames(data, e.Names); err != nil {
				t.Fatalf("%s/%s: %v", tc.dir, e.File, err)
			}
			found = found || tc.has(&r, data)
		}
		if !found {
			t.Errorf("no %s fixture bucket has %s", tc.dir, tc.what)
		}
	}
}

// Int and date columns whose values are all multiples of a power of ten are
// stored divided by it (encScaledInt), decode to the same values and
// bounds, and take fewer bytes.
func TestScaledInts(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	msDates := make([]int64, 300)
	for i := range msDates {
		msDates[i] = (1.7e12 + rng.Int63n(1e9)) * 1e6 // whole milliseconds, in ns
	}
	round := make([]int64, 300)
	for i := range round {
		round[i] = (rng.Int63n(2000) - 1000) * 100
	}
	present := bitmap(300, func(i int) bool { return i%3 != 0 })
	for _, tc := range []struct {
		name string
		col  Column
		k    byte // 0: not scaled
	}{
		{"ms dates", Column{Name: "d", Type: TypeDate, Ints: msDates}, 6},
		{"round ints", intCol("i", round...), 2},
		{"round ints, some absent", Column{Name: "i", Type: TypeInt, Ints: round, Present: present}, 2},
		{"zeros and a thousand", intCol("i", 0, 0, 1000, 0, -3000), 3},
		{"all zero", intCol("i", 0, 0, 0), 0},
		{"one value", intCol("i", 5e17), 17},
		{"extremes", intCol("i", 9e18, -9e18, 0), 18},
		{"min and max int", intCol("i", math.MinInt64, math.MaxInt64), 0},
		{"not round", intCol("i", 10, 20, 25), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols := Columns{Times: regularTimes(tc.col.Len(), 0, 1e9), Fields: []Column{tc.col}}
			buf := roundTrip(t, &cols)
			var r Reader
			if err := r.Reset(buf); err != nil {
				t.Fatal(err)
			}
			m := &r.fields[0].info
			switch {
			case tc.k == 0 && m.enc == encScaledInt:
				t.Fatalf("scaled by 10^%d, want not scaled", m.k)
			case tc.k != 0 && (m.enc != encScaledInt || m.k != tc.k):
				t.Fatalf("encoding %v k %d, want scaled int k %d", m.enc, m.k, tc.k)
			}
		})
	}
	// Dates in whole milliseconds cost their milliseconds: 20 bits a value
	// less than the same column unscaled.
	var enc Encoder
	scaled, err := enc.Encode(nil, &Columns{Times: regularTimes(300, 0, 1e9), Fields: []Column{{Name: "d", Type: TypeDate, Ints: msDates}}})
	if err != nil {
		t.Fatal(err)
	}
	ns := slices.Clone(msDates)
	ns[0]++ // one value off the millisecond: not scalable
	plain, err := enc.Encode(nil, &Columns{Times: regularTimes(300, 0, 1e9), Fields: []Column{{Name: "d", Type: TypeDate, Ints: ns}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(scaled)+300*19/8 > len(plain) {
		t.Fatalf("ms dates scaled %d bytes, unscaled %d", len(scaled), len(plain))
	}
}

// A scaled int column with a bad scale, bounds that overflow once scaled,
// or a value that does is corrupt.
func TestScaledIntsCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stats []byte
	}{
		{"scale 0", appendIntStats([]byte{0}, &fieldMeta{minI: 1, maxI: 2})},
		{"scale 19", appendIntStats([]byte{19}, &fieldMeta{minI: 1, maxI: 2})},
		{"max overflows", appendIntStats([]byte{18}, &fieldMeta{minI: 1, maxI: 10})},
		{"min overflows", appendIntStats([]byte{3}, &fieldMeta{minI: math.MinInt64 / 100, maxI: 0})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cursor{data: tc.stats, p: tc.stats}
			var m fieldMeta
			if err := readScaledIntStats(c, &m); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("stats %x: %v, want ErrCorrupt", tc.stats, err)
			}
		})
	}
	// A value past the bounds that overflows once scaled.
	var ie intEncoder
	src := ie.appendInts(nil, []int64{1, 10})
	r := Reader{rows: 2}
	m := &fieldMeta{enc: encScaledInt, k: 18, count: 2}
	if _, err := r.readScaledIntColumn(src, m, &Column{Type: TypeInt}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a value of 10 x 10^18: %v, want ErrCorrupt", err)
	}
	m.k = 17
	col := Column{Type: TypeInt}
	if _, err := r.readScaledIntColumn(src, m, &col); err != nil || col.Ints[1] != 1e18 {
		t.Fatalf("10 x 10^17: %v, %v", err, col.Ints)
	}
}

// BenchmarkScaledColumns reports the bytes a value of columns in whole
// units take scaled (encScaledInt) and, with one value off the unit, not:
//
//	go test ./bucket -run '^$' -bench ScaledColumns -benchtime 1x
func BenchmarkScaledColumns(b *testing.B) {
	var enc Encoder
	size := func(ints []int64, typ Type) int {
		buf, err := enc.Encode(nil, &Columns{Times: regularTimes(len(ints), 0, 10e9), Fields: []Column{{Name: "x", Type: typ, Ints: ints}}})
		if err != nil {
			b.Fatal(err)
		}
		return len(buf)
	}
	base := size(make([]int64, 360), TypeInt) // the times and the header
	for _, c := range []struct {
		name string
		typ  Type
		gen  func(rng *rand.Rand, i int) int64
	}{
		{"ms-reading-times", TypeDate, func(rng *rand.Rand, i int) int64 { return (1.7e12 + int64(i)*10000 + rng.Int63n(2000)) * 1e6 }},
		{"ms-dates-in-a-year", TypeDate, func(rng *rand.Rand, i int) int64 { return (1.7e12 + rng.Int63n(365*86400e3)) * 1e6 }},
		{"watts-by-10", TypeInt, func(rng *rand.Rand, i int) int64 { return (100 + rng.Int63n(300)) * 10 }},
		{"pascals-by-100", TypeInt, func(rng *rand.Rand, i int) int64 { return 101300 + (rng.Int63n(21)-10)*100 }},
	} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewSource(1))
			vals := make([]int64, 360)
			for i := range vals {
				vals[i] = c.gen(rng, i)
			}
			var scaled, plain int
			for i := 0; i < b.N; i++ {
				scaled = size(vals, c.typ)
				off := slices.Clone(vals)
				off[0]++
				plain = size(off, c.typ)
			}
			b.ReportMetric(float64(scaled-base)/360, "B/value")
			b.ReportMetric(float64(plain-base)/360, "B/value-unscaled")
		})
	}
}

// A symbol block takes Huffman coding over FSE when it is at most slack
// bytes larger, never when it is larger than the raw symbols, and the
// smallest mode without slack.
func TestSymbolSlack(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	var e entropyEncoder
	found := false
	for try := 0; try < 200 && !found; try++ {
		// Skewed symbols, a few hundred: both coders apply, FSE often smaller.
		syms := make([]byte, 200+rng.Intn(400))
		for i := range syms {
			syms[i] = byte(min(rng.ExpFloat64()*2, 20))
		}
		strict := e.appendSymbols(nil, syms, 0)
		if strict[0] != symFSE {
			continue
		}
		found = true
		loose := e.appendSymbols(nil, syms, 1<<20)
		if loose[0] != symHuff {
			t.Fatalf("mode %d with any slack, want Huffman (%d symbols)", loose[0], len(syms))
		}
		if len(loose) > len(syms)+1 {
			t.Fatalf("Huffman block of %d bytes for %d symbols: larger than raw", len(loose), len(syms))
		}
		if len(loose) <= len(strict) {
			t.Fatalf("Huffman %d bytes, FSE %d: FSE should have won without slack", len(loose), len(strict))
		}
		exact := e.appendSymbols(nil, syms, len(loose)-len(strict)-1)
		if exact[0] != symFSE {
			t.Fatalf("slack one byte short of the difference: mode %d, want FSE", exact[0])
		}
		var d entropyDecoder
		for _, b := range [][]byte{strict, loose} {
			got, rest, err := d.readSymbols(b[0], b[1:], len(syms))
			if err != nil || len(rest) != 0 || !slices.Equal(got, syms) {
				t.Fatalf("mode %d: %v, %d bytes left, equal %v", b[0], err, len(rest), slices.Equal(got, syms))
			}
		}
	}
	if !found {
		t.Fatal("no input where FSE is smaller")
	}
}

// BenchmarkDecodeJitteredTimes decodes time columns of 360 rows 10 s apart
// with up to 2 s of jitter in nanoseconds and 1% late by up to 5 minutes
// (the iot workload's):
//
//	go test ./bucket -run '^$' -bench DecodeJitteredTimes
func BenchmarkDecodeJitteredTimes(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	var enc Encoder
	var bufs [][]byte
	total := 0
	for s := 0; s < 100; s++ {
		ts := make([]int64, 360)
		for i := range ts {
			ts[i] = 1.7e18 + int64(i)*10e9 + rng.Int63n(2e9)
			if rng.Float64() < 0.01 {
				ts[i] -= rng.Int63n(300e9)
			}
		}
		buf, err := enc.Encode(nil, &Columns{Times: ts})
		if err != nil {
			b.Fatal(err)
		}
		bufs = append(bufs, buf)
		total += len(buf)
	}
	var r Reader
	var out []int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.Reset(bufs[i%len(bufs)]); err != nil {
			b.Fatal(err)
		}
		var err error
		if out, err = r.Times(out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total)/float64(len(bufs)), "bytes/bucket")
}

// TestObjectIDColumnSize checks that the ObjectIds one process makes for a
// series (seconds and counter stepping, one process part) take a few bits
// each, and that arbitrary ids round-trip.
func TestObjectIDColumnSize(t *testing.T) {
	const rows = 1000
	cols := &Columns{Times: make([]int64, rows), Fields: []Column{{Name: "_id", Type: TypeObjectID}}}
	proc := []byte{0xde, 0xad, 0xbe, 0xef, 0x42}
	for i := range rows {
		cols.Times[i] = int64(i) * 10e9
		var id [12]byte
		binary.BigEndian.PutUint32(id[:], uint32(1_700_000_000+i/50)) // a batch of 50 a second
		copy(id[4:9], proc)
		c := 0xfffff0 + 100*i // every 100th id of the process: 100 series; wraps past 2^24
		id[9], id[10], id[11] = byte(c>>16), byte(c>>8), byte(c)
		cols.Fields[0].IDs = append(cols.Fields[0].IDs, id[:]...)
	}
	var enc Encoder
	base, err := enc.Encode(nil, &Columns{Times: cols.Times})
	if err != nil {
		t.Fatal(err)
	}
	buf := roundTrip(t, cols)
	per := float64(len(buf)-len(base)) / rows
	t.Logf("%.3f bytes per ObjectId", per)
	if per > 0.25 {
		t.Errorf("%.3f bytes per ObjectId, want <= 0.25", per)
	}
	// Ids made for batches of 100 series, 50 rows each: the counter steps
	// by 100 and jumps between batches (a steps block of mode 2).
	batches := &Columns{Times: cols.Times[:320], Fields: []Column{{Name: "_id", Type: TypeObjectID}}}
	c := 5000
	for i := range 320 {
		var id [12]byte
		binary.BigEndian.PutUint32(id[:], uint32(1_700_000_000+i/200))
		copy(id[4:9], proc)
		if i%50 == 0 {
			c += 100*50 + 3
		} else {
			c += 100
		}
		id[9], id[10], id[11] = byte(c>>16), byte(c>>8), byte(c)
		batches.Fields[0].IDs = append(batches.Fields[0].IDs, id[:]...)
	}
	base320, _ := enc.Encode(nil, &Columns{Times: batches.Times})
	if per := float64(len(roundTrip(t, batches))-len(base320)) / 320; per > 0.15 {
		t.Errorf("%.3f bytes per ObjectId made in batches, want <= 0.15", per)
	}
	// Pairs swapped (two writers racing): counters step up and down.
	for i := 0; i+1 < rows; i += 2 {
		a, b := cols.Fields[0].ID(i), cols.Fields[0].ID(i+1)
		var t [12]byte
		copy(t[:], a)
		copy(a, b)
		copy(b, t[:])
	}
	if back := float64(len(roundTrip(t, cols))-len(base)) / rows; back > 1.5 {
		t.Errorf("%.3f bytes per ObjectId, pairs swapped, want <= 1.5", back)
	}
	// Two processes interleaved, and a short id refused.
	for i := range rows {
		if i%3 == 0 {
			cols.Fields[0].ID(i)[6] ^= 0xff
		}
	}
	roundTrip(t, cols)
	// Some rows absent.
	cols.Fields[0].Present = make([]uint64, (rows+63)/64)
	for i := range cols.Fields[0].Present {
		cols.Fields[0].Present[i] = 0x5555_0f0f_ffff_0001
	}
	roundTrip(t, cols)
	cols.Fields[0].IDs = cols.Fields[0].IDs[:len(cols.Fields[0].IDs)-5]
	if _, err := enc.Encode(nil, cols); !errors.Is(err, ErrColumnLength) {
		t.Errorf("ids of 12*rows-5 bytes: %v, want ErrColumnLength", err)
	}
}
