package bucket

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// frozenPart returns rows [at, at+n) of the first k columns of cols, their
// presence bitmaps moved to start at row 0.
func frozenPart(cols *Columns, at, n, k int) *Columns {
	part := &Columns{Times: cols.Times[at : at+n]}
	for ci := 0; ci < k; ci++ {
		c := &cols.Fields[ci]
		p := Column{Name: c.Name, Type: c.Type}
		if c.Present != nil {
			p.Present = make([]uint64, (n+63)/64)
			for i := 0; i < n; i++ {
				if c.IsPresent(at + i) {
					p.Present[i/64] |= 1 << (i % 64)
				}
			}
		}
		switch c.Type {
		case TypeFloat:
			p.Floats = c.Floats[at : at+n]
		case TypeInt, TypeDate, TypeInt32:
			p.Ints = c.Ints[at : at+n]
		case TypeString, TypeBSON:
			p.Strings = c.Strings[at : at+n]
		case TypeObjectID:
			p.IDs = c.IDs[at*ObjectIDLen : (at+n)*ObjectIDLen]
		case TypeBool:
			p.Bools = c.Bools[at : at+n]
		}
		part.Fields = append(part.Fields, p)
	}
	return part
}

// frozenRoundTrip freezes cols in chunks of size rows (each chunk with
// one more column than the last when grow is set, as a bucket whose
// columns come one by one), decodes them and compares.
func frozenRoundTrip(t *testing.T, cols *Columns, size int, grow bool) {
	t.Helper()
	rows, nf := len(cols.Times), len(cols.Fields)
	absent := make([][]bool, nf) // rows a chunk left out of a column
	for ci := range absent {
		absent[ci] = make([]bool, rows)
	}
	var buf []byte
	for at, j := 0, 0; at < rows; at, j = at+size, j+1 {
		n, k := min(size, rows-at), nf
		if grow {
			k = min(nf, j)
		}
		buf = AppendFrozen(buf, frozenPart(cols, at, n, k), n)
		for ci := k; ci < nf; ci++ {
			for i := at; i < at+n; i++ {
				absent[ci][i] = true
			}
		}
	}
	if n, err := frozenRows(buf); err != nil || n != rows {
		t.Fatalf("frozenRows = %d, %v; want %d", n, err, rows)
	}
	dst := &Columns{Times: make([]int64, rows)}
	for ci := range cols.Fields {
		c := &cols.Fields[ci]
		d := Column{Name: c.Name, Type: c.Type}
		switch c.Type {
		case TypeFloat:
			d.Floats = make([]float64, rows)
		case TypeInt, TypeDate, TypeInt32:
			d.Ints = make([]int64, rows)
		case TypeString, TypeBSON:
			d.Strings = make([]string, rows)
		case TypeObjectID:
			d.IDs = make([]byte, rows*ObjectIDLen)
		case TypeBool:
			d.Bools = make([]bool, rows)
		}
		dst.Fields = append(dst.Fields, d)
	}
	need := func(ci int) {
		p := make([]uint64, (rows+63)/64)
		for i := range p {
			p[i] = ^uint64(0)
		}
		dst.Fields[ci].Present = p
	}
	n, err := DecodeFrozen(buf, dst, need)
	if err != nil || n != rows {
		t.Fatalf("DecodeFrozen = %d, %v; want %d rows", n, err, rows)
	}
	for i, ts := range cols.Times {
		if dst.Times[i] != ts {
			t.Fatalf("time %d: %d, want %d", i, dst.Times[i], ts)
		}
	}
	for ci := range cols.Fields {
		c, d := &cols.Fields[ci], &dst.Fields[ci]
		any := false
		for i := 0; i < rows; i++ {
			any = any || c.IsPresent(i) && !absent[ci][i]
		}
		got := make([]bool, nf)
		if err := FrozenPresent(buf, got); err != nil || got[ci] != any {
			t.Fatalf("FrozenPresent: column %d %v, want %v (%v)", ci, got[ci], any, err)
		}
		for i := 0; i < rows; i++ {
			want := c.IsPresent(i) && !absent[ci][i]
			if d.IsPresent(i) != want {
				t.Fatalf("column %d row %d: present %v, want %v", ci, i, d.IsPresent(i), want)
			}
			if !want {
				continue
			}
			same := true
			switch c.Type {
			case TypeFloat:
				same = math.Float64bits(c.Floats[i]) == math.Float64bits(d.Floats[i])
			case TypeInt, TypeDate, TypeInt32:
				same = c.Ints[i] == d.Ints[i]
			case TypeString, TypeBSON:
				same = c.Strings[i] == d.Strings[i]
			case TypeObjectID:
				same = string(c.ID(i)) == string(d.ID(i))
			case TypeBool:
				same = c.Bools[i] == d.Bools[i]
			}
			if !same {
				t.Fatalf("column %d (%v) row %d differs", ci, c.Type, i)
			}
		}
	}
}

// roundToUnit rounds every time of cols toward zero to a multiple of the unit
// of code u (10^(3u) nanoseconds), so that chunks of them take that unit.
func roundToUnit(cols *Columns, u int) *Columns {
	for i := range cols.Times {
		cols.Times[i] -= cols.Times[i] % pow10Int[3*u]
	}
	return cols
}

// frozenUnits is the number of time units a chunk may take.
const frozenUnits = 4

func TestFrozenRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 300; i++ {
		b := make([]byte, 64+rng.Intn(6000))
		rng.Read(b)
		cols := roundToUnit(fuzzColumns(b), i/2%frozenUnits)
		frozenRoundTrip(t, cols, 1+rng.Intn(130), i%2 == 1)
	}
	// Floats the decimal form must not take: -0, NaN, infinities, and
	// values beyond its range.
	cols := &Columns{Times: []int64{1, 2, 3, 4, 5, 6, 7}, Fields: []Column{{Name: "f", Type: TypeFloat,
		Floats: []float64{1.5, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1e300, 2.25}}}}
	frozenRoundTrip(t, cols, 7, false)
	frozenRoundTrip(t, cols, 2, false)
}

// TestFrozenSmaller checks that a sensor's rows take a few bytes each:
// what freezing an open bucket is for.
func TestFrozenSmaller(t *testing.T) {
	cols := sensorChunk(64)
	b := AppendFrozen(nil, cols, 64)
	// 8 bytes a time and a value each: 32 bytes a row plain.
	if per := float64(len(b)) / 64; per > 10 {
		t.Fatalf("%.1f bytes a row frozen; want <= 10", per)
	}
}

// TestFrozenUnits checks the unit a chunk takes for its times (the
// largest that divides them all), at the ends of the time range too, that
// whole milliseconds take fewer bytes than nanoseconds, and that a chunk
// whose times in its unit would overflow nanoseconds is refused.
func TestFrozenUnits(t *testing.T) {
	for _, tc := range []struct {
		times []int64
		unit  int
	}{
		{[]int64{1704067200e9, 1704067210e9 + 1}, 0},
		{[]int64{1704067200e9, 1704067210e9 + 1e3}, 1},
		{[]int64{1704067200e9, 1704067210e9 + 5e6, -3e6}, 2},
		{[]int64{-1704067200e9, 0, 1704067210e9}, 3},
		{[]int64{math.MaxInt64 - math.MaxInt64%int64(1e9), math.MinInt64 + 775808, 0}, 2},
		{[]int64{math.MaxInt64, math.MinInt64}, 0},
		{[]int64{math.MinInt64 + 854775808}, 3},
	} {
		if u := int(timeScale(tc.times, 0) / 3); u != tc.unit {
			t.Fatalf("%v: unit %d, want %d", tc.times, u, tc.unit)
		}
		cols := &Columns{Times: tc.times}
		b := AppendFrozen(nil, cols, len(tc.times))
		if _, _, unit, _, err := frozenHeader(b); err != nil || unit != pow10Int[3*tc.unit] {
			t.Fatalf("%v: header unit %d, %v", tc.times, unit, err)
		}
		frozenRoundTrip(t, cols, len(tc.times), false)
	}

	ns := sensorChunk(64)
	ms := roundToUnit(sensorChunk(64), 2)
	nb, mb := len(AppendFrozen(nil, ns, 64)), len(AppendFrozen(nil, ms, 64))
	if mb >= nb-64 {
		t.Fatalf("rows in whole milliseconds take %d bytes, %d in nanoseconds", mb, nb)
	}

	// Seconds past what nanoseconds hold, and the last in range.
	const maxSec = int64(math.MaxInt64) / int64(1e9)
	chunk := func(sec int64) []byte {
		b := binary.AppendUvarint(nil, 1)
		b = binary.AppendUvarint(b, 3<<frozenUnitShift)
		return binary.AppendVarint(b, sec)
	}
	if _, err := frozenRows(chunk(maxSec + 1)); err == nil {
		t.Fatal("a time past the range of nanoseconds decoded")
	}
	if _, err := frozenRows(chunk(-maxSec - 1)); err == nil {
		t.Fatal("a time before the range of nanoseconds decoded")
	}
	if n, err := frozenRows(chunk(maxSec)); err != nil || n != 1 {
		t.Fatalf("the last second in range: %d, %v", n, err)
	}
	// An unknown unit.
	bad := binary.AppendUvarint(binary.AppendUvarint(nil, 1), 4<<frozenUnitShift)
	if _, err := frozenRows(binary.AppendVarint(bad, 1)); err == nil {
		t.Fatal("a chunk of unit code 4 decoded")
	}
}

func TestFrozenCorrupt(t *testing.T) {
	b := AppendFrozen(nil, sensorChunk(64), 64)
	for cut := 0; cut < len(b); cut++ {
		if _, err := frozenRows(b[:cut]); cut > 0 && err == nil {
			t.Fatalf("a chunk cut to %d of %d bytes decoded", cut, len(b))
		}
	}
}

// sensorChunk is rows of a sensor: jittered nanosecond times, a reading
// with two decimals and two small integers.
func sensorChunk(n int) *Columns {
	rng := rand.New(rand.NewSource(1))
	c := &Columns{Fields: []Column{{Name: "value", Type: TypeFloat}, {Name: "battery", Type: TypeInt}, {Name: "rssi", Type: TypeInt}}}
	t, v := int64(1704067200e9), 25.0
	for i := 0; i < n; i++ {
		t += 10e9 + int64(rng.Intn(2e8)) - 1e8
		v += rng.Float64() - 0.5
		c.Times = append(c.Times, t)
		c.Fields[0].Floats = append(c.Fields[0].Floats, math.Round(v*100)/100)
		c.Fields[1].Ints = append(c.Fields[1].Ints, 100-int64(i/50))
		c.Fields[2].Ints = append(c.Fields[2].Ints, -60-int64(rng.Intn(20)))
	}
	return c
}

func FuzzFrozen(f *testing.F) {
	f.Add([]byte{}, uint8(5), false)
	f.Add([]byte{200, 1, 7, 3, 3, 3, 3, 3, 3, 3, 3, 0x41, 0x42, 0xff, 0xfe, 0, 1, 2, 7, 8, 9, 10}, uint8(64), true)
	f.Fuzz(func(t *testing.T, data []byte, size uint8, grow bool) {
		frozenRoundTrip(t, roundToUnit(fuzzColumns(data), int(size)%frozenUnits), 1+int(size)%130, grow)
		// Arbitrary bytes as chunks: an error or rows, never a panic.
		if n, err := frozenRows(data); err == nil && n > 0 && n < 1<<16 {
			dst := &Columns{Times: make([]int64, n)}
			DecodeFrozen(data, dst, func(int) {})
		}
	})
}

func BenchmarkFrozen(b *testing.B) {
	// Chunks of 32 rows are what an open bucket freezes
	// (timeseries.freezeRows); 16 and 64 are the sizes either side.
	for _, rows := range []int{16, 32, 64} {
		cols := sensorChunk(rows)
		var buf []byte
		b.Run(fmt.Sprintf("append/rows=%d", rows), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				buf = AppendFrozen(buf[:0], cols, rows)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
			b.ReportMetric(float64(len(buf))/float64(rows), "B/row")
		})
		b.Run(fmt.Sprintf("decode/rows=%d", rows), func(b *testing.B) {
			buf = AppendFrozen(buf[:0], cols, rows) // when run without append
			dst := &Columns{Times: make([]int64, rows), Fields: []Column{{Type: TypeFloat, Floats: make([]float64, rows)},
				{Type: TypeInt, Ints: make([]int64, rows)}, {Type: TypeInt, Ints: make([]int64, rows)}}}
			for i := 0; i < b.N; i++ {
				if _, err := DecodeFrozen(buf, dst, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
		})
	}
}

// TestSnapshot: an open bucket's snapshot holds its frozen rows and its
// plain rows frozen; Peek and ReadSnapshot read its header, and
// ReadSnapshot refuses one cut short or with a column of another type.
func TestSnapshot(t *testing.T) {
	cols := sensorChunk(100)
	frozen := AppendFrozen(nil, frozenPart(cols, 0, 64, 3), 64)
	tail := frozenPart(cols, 64, 36, 3)
	snap := AppendSnapshot(nil, cols.Times[0], cols.Times[99], []uint32{4, 0, 9}, frozen, 64, tail)
	rows, lo, hi, err := Peek(snap)
	if err != nil || rows != 100 || lo != cols.Times[0] || hi != cols.Times[99] {
		t.Fatalf("Peek = %d [%d, %d] %v", rows, lo, hi, err)
	}
	var s Snapshot
	if err := ReadSnapshot(snap, &s); err != nil {
		t.Fatal(err)
	}
	if s.Rows != 100 || !slices.Equal(s.Refs, []uint32{4, 0, 9}) || !slices.Equal(s.Types, []Type{TypeFloat, TypeInt, TypeInt}) {
		t.Fatalf("snapshot %+v", s)
	}
	dst := &Columns{Times: make([]int64, 100), Fields: []Column{{Type: TypeFloat, Floats: make([]float64, 100)},
		{Type: TypeInt, Ints: make([]int64, 100)}, {Type: TypeInt, Ints: make([]int64, 100)}}}
	if n, err := DecodeFrozen(s.Frozen, dst, nil); err != nil || n != 100 || !slices.Equal(dst.Times, cols.Times) ||
		!slices.Equal(dst.Fields[2].Ints, cols.Fields[2].Ints) {
		t.Fatalf("the snapshot's rows: %d, %v", n, err)
	}
	for cut := 1; cut < len(snap); cut++ {
		if ReadSnapshot(snap[:cut], &s) == nil {
			t.Fatalf("a snapshot cut to %d of %d bytes read", cut, len(snap))
		}
	}
	if ReadSnapshot(AppendSnapshot(nil, cols.Times[0], cols.Times[99], []uint32{4, 4, 9}, frozen, 64, tail), &s) == nil {
		t.Fatal("a snapshot naming one reference for two columns read")
	}
	bad := slices.Clone(snap)
	bad[1+1+len(binary.AppendUvarint(nil, zigzag(cols.Times[0])))+len(binary.AppendUvarint(nil, uint64(cols.Times[99]-cols.Times[0])))+1+1] = byte(TypeString)
	if ReadSnapshot(bad, &s) == nil {
		t.Fatal("a snapshot whose float column says string read")
	}
}

func FuzzSnapshot(f *testing.F) {
	cols := sensorChunk(70)
	f.Add(AppendSnapshot(nil, cols.Times[0], cols.Times[69], []uint32{0, 1, 2}, nil, 0, cols))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Snapshot
		if ReadSnapshot(data, &s) != nil {
			return
		}
		// What ReadSnapshot accepts decodes into columns of its types.
		dst := &Columns{Times: make([]int64, s.Rows)}
		for _, typ := range s.Types {
			c := Column{Type: typ}
			switch typ {
			case TypeFloat:
				c.Floats = make([]float64, s.Rows)
			case TypeInt, TypeDate, TypeInt32:
				c.Ints = make([]int64, s.Rows)
			case TypeString, TypeBSON:
				c.Strings = make([]string, s.Rows)
			case TypeObjectID:
				c.IDs = make([]byte, s.Rows*ObjectIDLen)
			case TypeBool:
				c.Bools = make([]bool, s.Rows)
			}
			dst.Fields = append(dst.Fields, c)
		}
		need := func(ci int) { dst.Fields[ci].Present = make([]uint64, (s.Rows+63)/64) }
		if n, err := DecodeFrozen(s.Frozen, dst, need); err != nil || n != s.Rows {
			t.Fatalf("an accepted snapshot decodes %d of %d rows: %v", n, s.Rows, err)
		}
	})
}

// frozenRows returns the rows of the frozen chunks in src, checking each
// chunk's body.
func frozenRows(src []byte) (int, error) {
	n := 0
	for len(src) > 0 {
		rows, ncols, unit, rest, err := frozenHeader(src)
		if err != nil {
			return 0, err
		}
		// Walk the chunk to find the next: a chunk holds no length.
		if rest, err = decodeFrozenBody(rest, rows, ncols, unit, nil, 0, nil, nil); err != nil {
			return 0, err
		}
		n += rows
		src = rest
	}
	return n, nil
}
