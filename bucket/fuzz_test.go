package bucket

import (
	"encoding/binary"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// fuzzSeeds returns encoded buckets covering every encoding.
func fuzzSeeds() [][]byte {
	rng := rand.New(rand.NewSource(7))
	var enc Encoder
	var out [][]byte
	for i := 0; i < 12; i++ {
		rows := 1 + rng.Intn(300)
		cols := Columns{Times: regularTimes(rows, rng.Int63()-rng.Int63(), int64(rng.Intn(3))*10e9)}
		if i%3 == 0 {
			for j := range cols.Times {
				cols.Times[j] += rng.Int63n(1000)
			}
		}
		for f := 0; f < 1+i%5; f++ {
			cols.Fields = append(cols.Fields, randomColumn(rng, "f"+itoa(f), rows))
		}
		buf, err := enc.Encode(nil, &cols)
		if err != nil {
			panic(err)
		}
		out = append(out, buf)
	}
	tsbs := tsbsBuckets(tsbsFloat, 1)[0]
	buf, _ := enc.Encode(nil, &tsbs)
	out = append(out, buf)
	tsbs = tsbsBuckets(tsbsInt, 1)[0]
	buf, _ = enc.Encode(nil, &tsbs)
	out = append(out, buf)
	// Name references into fuzzNames.
	refs := make([]uint32, len(tsbs.Fields))
	for i := range refs {
		refs[i] = uint32(5 + i)
	}
	buf, _ = enc.EncodeRefs(nil, &tsbs, refs)
	if buf[0] != VersionShared {
		panic("no shared block in the TSBS seed")
	}
	out = append(out, buf)
	tsbs = tsbsBuckets(tsbsWholeFloat, 1)[0]
	buf, _ = enc.EncodeRefs(nil, &tsbs, refs)
	out = append(out, buf)
	// Times and dates in whole milliseconds: scaled.
	ms := Columns{Times: make([]int64, 50), Fields: []Column{{Name: "d", Type: TypeDate, Ints: make([]int64, 50)}}}
	for i := range ms.Times {
		ms.Times[i] = (1.7e12 + int64(i)*1000 + rng.Int63n(100)) * 1e6
		ms.Fields[0].Ints[i] = (1.6e12 + rng.Int63n(1e9)) * 1e6
	}
	buf, _ = enc.Encode(nil, &ms)
	return append(out, buf)
}

// fuzzNames is the name table FuzzReader reads buckets with: f0..f4, then the TSBS fields.
var fuzzNames = append([]string{"f0", "f1", "f2", "f3", "f4"}, tsbsFields...)

// FuzzReader feeds arbitrary bytes to Reader: it must return errors, never panic, hang or
// allocate beyond what MaxRows allows.
func FuzzReader(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add([]byte{Version})
	f.Add([]byte{Version, 0x80, 0x80, 0x40, 0, 0, 0})
	var r Reader
	var col Column
	var times []int64
	f.Add([]byte{VersionRefs, 1, 0, 0, 1, 3, 0x21, 0, 0, 0, 1, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := r.ResetNames(data, fuzzNames); err != nil {
			return
		}
		var err error
		times, err = r.Times(times)
		if err == nil && (len(times) != r.Rows()) {
			t.Fatalf("%d times for %d rows", len(times), r.Rows())
		}
		for i := 0; i < r.NumFields(); i++ {
			fi := r.Field(i)
			if err := r.Column(i, &col); err != nil {
				continue
			}
			if col.Len() != r.Rows() || col.Name != fi.Name || col.Type != fi.Type {
				t.Fatalf("column %d: %q %v len %d, info %+v", i, col.Name, col.Type, col.Len(), fi)
			}
		}
	})
}

// fuzzColumns builds columns from arbitrary bytes: a few header bytes choose rows and field
// types, the rest feeds the values.
func fuzzColumns(data []byte) *Columns {
	next := func(n int) []byte {
		if len(data) < n {
			b := make([]byte, n)
			copy(b, data)
			data = nil
			return b
		}
		b := data[:n]
		data = data[n:]
		return b
	}
	u64 := func() uint64 { return binary.LittleEndian.Uint64(next(8)) }
	hdr := next(3)
	rows := 1 + int(binary.LittleEndian.Uint16(hdr[:2]))%2000
	nf := int(hdr[2] % 8)
	cols := &Columns{Times: make([]int64, rows)}
	step := int64(u64() % 4 * 5e9)
	t0 := int64(u64())
	jitter := next(1)[0]
	for i := range cols.Times {
		cols.Times[i] = t0 + int64(i)*step
		if jitter&1 != 0 {
			cols.Times[i] += int64(next(1)[0]) << (jitter >> 2 & 63)
		}
	}
	for f := 0; f < nf; f++ {
		h := next(2)
		c := Column{Name: "f" + itoa(f), Type: Type(1 + h[0]%8)}
		switch h[1] % 3 {
		case 1:
			c.Present = make([]uint64, (rows+63)/64)
			for i := range c.Present {
				c.Present[i] = u64()
			}
		case 2:
			c.Present = make([]uint64, (rows+63)/64)
			c.Present[0] = u64()
		}
		mode := h[1] / 3 % 4
		switch c.Type {
		case TypeFloat:
			c.Floats = make([]float64, rows)
			for i := range c.Floats {
				switch mode {
				case 0:
					c.Floats[i] = math.Float64frombits(u64())
				case 1:
					c.Floats[i] = float64(int8(next(1)[0])) / 10
				default:
					c.Floats[i] = float64(int64(u64())>>int(mode*8)) / math.Pow10(int(next(1)[0]%12))
				}
			}
		case TypeInt32:
			c.Ints = make([]int64, rows)
			for i := range c.Ints {
				c.Ints[i] = int64(int32(u64() >> (mode * 8)))
			}
		case TypeObjectID:
			// A driver's ids: seconds and counter stepping, one or a few
			// process parts; or arbitrary bytes.
			base := next(12)
			for i := range rows {
				id := append([]byte(nil), base...)
				if mode == 0 {
					id = append(id[:0], next(12)...)
				} else {
					id[11] += byte(i)
					id[10] += byte(i >> 8)
					id[3] += byte(i / 100)
					id[5] += byte(i % int(mode))
				}
				c.IDs = append(c.IDs, id...)
			}
		case TypeInt, TypeDate:
			c.Ints = make([]int64, rows)
			for i := range c.Ints {
				switch mode {
				case 0:
					c.Ints[i] = int64(u64())
				case 3:
					c.Ints[i] = int64(int8(next(1)[0])) * 1e6 // whole milliseconds: scaled
				default:
					c.Ints[i] = int64(int8(next(1)[0])) << (mode * 8)
				}
			}
		case TypeString, TypeBSON:
			c.Strings = make([]string, rows)
			for i := range c.Strings {
				c.Strings[i] = string(next(int(next(1)[0] % (8 << mode))))
			}
		case TypeBool:
			c.Bools = make([]bool, rows)
			for i := range c.Bools {
				c.Bools[i] = next(1)[0]&(1<<mode) != 0
			}
		}
		cols.Fields = append(cols.Fields, c)
	}
	return cols
}

// FuzzRoundTrip checks that columns built from arbitrary bytes decode to themselves.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{10, 0, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{200, 1, 7, 3, 3, 3, 3, 3, 3, 3, 3, 0x41, 0x42, 0xff, 0xfe, 0, 1, 2, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17})
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 8; i++ {
		b := make([]byte, 64+rng.Intn(4000))
		rng.Read(b)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, fuzzColumns(data))
	})
}

// FuzzTimeRange feeds arbitrary bytes to RowRange and TimesRange, with a
// range and rows taken from the input's last bytes: they must return
// errors, never panic or read past the bucket; and on a bucket whose
// times decode whole and sorted they must agree with searching and
// slicing those times.
func FuzzTimeRange(f *testing.F) {
	rng := rand.New(rand.NewSource(11))
	var enc Encoder
	tail := func(buf []byte) []byte {
		var t [20]byte
		rng.Read(t[:])
		return append(buf, t[:]...)
	}
	for i, kind := range indexKinds {
		for _, n := range []int{1, 5, 40, 600} {
			times := indexTimes(kind, n, int64(i))
			enc.blockRows, enc.forceBlocks = 4+i, i%2 == 0
			buf, err := enc.Encode(nil, &Columns{Times: times})
			if err != nil {
				f.Fatal(err)
			}
			f.Add(tail(buf))
		}
	}
	var r Reader
	var times, got []int64
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 20 {
			return
		}
		q := data[len(data)-20:]
		data = data[:len(data)-20]
		if err := r.Reset(data); err != nil {
			return
		}
		lo := int64(binary.LittleEndian.Uint64(q))
		hi := int64(binary.LittleEndian.Uint64(q[8:]))
		if q[16]&1 != 0 { // a range within the bucket's
			span := uint64(r.MaxTime()-r.MinTime()) + 1
			if span == 0 {
				span = math.MaxUint64
			}
			lo = r.MinTime() + int64(uint64(lo)%span)
			hi = r.MinTime() + int64(uint64(hi)%span)
		}
		a := int(q[18]) * r.Rows() / 256
		b := a + int(q[19])*(r.Rows()-a)/255
		first, last, rangeErr := r.RowRange(lo, hi)
		got, gotErr := r.TimesRange(a, b, got)
		var err error
		times, err = r.Times(times)
		if err != nil {
			return
		}
		if rangeErr == nil && (first < 0 || first > last || last > r.Rows()) {
			t.Fatalf("RowRange(%d, %d) = [%d, %d) of %d rows", lo, hi, first, last, r.Rows())
		}
		if gotErr != nil || !slices.Equal(got, times[a:b]) {
			t.Fatalf("TimesRange(%d, %d) = %v %v, want %v", a, b, got, gotErr, times[a:b])
		}
		if !slices.IsSorted(times) {
			return
		}
		wf, wl := searchRange(times, lo, hi)
		if lo > hi {
			wl = wf
		}
		if rangeErr != nil || first != wf || last != wl {
			t.Fatalf("RowRange(%d, %d) = [%d, %d) %v, want [%d, %d)", lo, hi, first, last, rangeErr, wf, wl)
		}
	})
}
