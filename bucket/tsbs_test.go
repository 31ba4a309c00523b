package bucket

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// The TSBS cpu-only shape: 100 hosts, 10 fields, a random walk per field, 10 s interval,
// one day, one bucket per host and hour (360 rows, the "host layout").
var tsbsFields = []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
	"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}

const (
	tsbsHosts      = 100
	tsbsRowsPerDay = 8640
	tsbsBucketRows = 360
)

type tsbsVariant int

const (
	tsbsInt        tsbsVariant = iota // values rounded, TypeInt
	tsbsWholeFloat                    // values rounded, TypeFloat: the decimal path
	tsbsFloat                         // full-precision float64
)

// tsbsBuckets generates the workload's buckets for hosts hosts.
func tsbsBuckets(v tsbsVariant, hosts int) []Columns {
	rng := rand.New(rand.NewSource(42))
	start := time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var out []Columns
	for h := 0; h < hosts; h++ {
		walks := make([][]float64, len(tsbsFields))
		for f := range walks {
			w := make([]float64, tsbsRowsPerDay)
			x := rng.Float64() * 100
			for i := range w {
				w[i] = x
				x = math.Min(100, math.Max(0, x+rng.NormFloat64()))
			}
			walks[f] = w
		}
		for b := 0; b < tsbsRowsPerDay; b += tsbsBucketRows {
			cols := Columns{Times: regularTimes(tsbsBucketRows, start+int64(b)*10e9, 10e9)}
			for f, name := range tsbsFields {
				c := Column{Name: name}
				vals := walks[f][b : b+tsbsBucketRows]
				switch v {
				case tsbsInt:
					c.Type = TypeInt
					for _, x := range vals {
						c.Ints = append(c.Ints, int64(math.Round(x)))
					}
				case tsbsWholeFloat:
					c.Type = TypeFloat
					for _, x := range vals {
						c.Floats = append(c.Floats, math.Round(x))
					}
				case tsbsFloat:
					c.Type = TypeFloat
					c.Floats = append(c.Floats, vals...)
				}
				cols.Fields = append(cols.Fields, c)
			}
			out = append(out, cols)
		}
	}
	return out
}

func TestTSBSCompression(t *testing.T) {
	tests := []struct {
		name    string
		v       tsbsVariant
		max     float64 // bytes per field value, everything included
		maxData float64 // the same without the control block (names, types, min/max, lengths)
		wantEnc encoding
		// The same with a name table (EncodeRefs).
		maxTable, maxDataTable float64
	}{
		{"int", tsbsInt, 0.355, 0.30, encInt, 0.31, 0.285},
		{"whole float", tsbsWholeFloat, 0.36, 0.30, encDecimal, 0.31, 0.285},
		{"float", tsbsFloat, 6.4, 6.3, encFloat, 6.33, 6.3},
	}
	for _, tc := range tests {
		for _, table := range []bool{false, true} {
			name := tc.name
			if table {
				// As Hourglass writes buckets: names in the collection's table, a shared
				// symbol block when it is smaller.
				name += " with a name table"
				tc.max, tc.maxData = tc.maxTable, tc.maxDataTable
			}
			t.Run(name, func(t *testing.T) {
				testTSBSCompression(t, tc.v, table, tc.max, tc.maxData, tc.wantEnc)
			})
		}
	}
}

// tsbsRefs is the name table references of the TSBS fields, in order.
var tsbsRefs = []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}

func testTSBSCompression(t *testing.T, v tsbsVariant, table bool, maxBPP, maxData float64, wantEnc encoding) {
	{
		{
			hosts := tsbsHosts
			if testing.Short() {
				hosts = 10
			}
			var enc Encoder
			var r Reader
			var buf []byte
			total, data, points := 0, 0, 0
			for i, cols := range tsbsBuckets(v, hosts) {
				var err error
				if table {
					buf, err = enc.EncodeRefs(buf[:0], &cols, tsbsRefs)
				} else {
					buf, err = enc.Encode(buf[:0], &cols)
				}
				if err != nil {
					t.Fatal(err)
				}
				total += len(buf)
				points += len(cols.Times) * len(cols.Fields)
				if err := r.ResetNames(buf, tsbsFields); err != nil {
					t.Fatal(err)
				}
				data += len(buf) - r.timeOff
				if i%50 == 0 {
					checkDecoded(t, &r, &cols)
				}
				if e := r.fields[0].info.enc; e != wantEnc {
					t.Fatalf("encoding %v, want %v", e, wantEnc)
				}
			}
			bpp := float64(total) / float64(points)
			dpp := float64(data) / float64(points)
			t.Logf("%d points, %d bytes: %.4f bytes/point, %.4f without the control block", points, total, bpp, dpp)
			if bpp > maxBPP || dpp > maxData {
				t.Errorf("%.4f (%.4f) bytes/point, want <= %.3f (%.3f)", bpp, dpp, maxBPP, maxData)
			}
		}
	}
}

func encodeTSBS(enc *Encoder, dst []byte, cols *Columns, table bool) ([]byte, error) {
	if table {
		return enc.EncodeRefs(dst, cols, tsbsRefs)
	}
	return enc.Encode(dst, cols)
}

func benchmarkEncode(b *testing.B, v tsbsVariant, table bool) {
	buckets := tsbsBuckets(v, 10)
	var enc Encoder
	var buf []byte
	points, size := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cols := &buckets[i%len(buckets)]
		var err error
		if buf, err = encodeTSBS(&enc, buf[:0], cols, table); err != nil {
			b.Fatal(err)
		}
		points += len(cols.Times) * len(cols.Fields)
		size += len(buf)
	}
	b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(size)/float64(points), "B/point")
}

// benchmarkDecode decodes the time column and fields columns (all when fields is 0) of
// each bucket, and reports the points decoded per second.
func benchmarkDecode(b *testing.B, v tsbsVariant, table bool, fields int) {
	buckets := tsbsBuckets(v, 10)
	var enc Encoder
	encoded := make([][]byte, len(buckets))
	for i := range buckets {
		var err error
		if encoded[i], err = encodeTSBS(&enc, nil, &buckets[i], table); err != nil {
			b.Fatal(err)
		}
	}
	var r Reader
	var col Column
	var times []int64
	points := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.ResetNames(encoded[i%len(encoded)], tsbsFields); err != nil {
			b.Fatal(err)
		}
		var err error
		if times, err = r.Times(times); err != nil {
			b.Fatal(err)
		}
		n := r.NumFields()
		if fields > 0 {
			n = fields
		}
		for f := 0; f < n; f++ {
			if err := r.Column(f, &col); err != nil {
				b.Fatal(err)
			}
		}
		points += r.Rows() * n
	}
	b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
}

// Buckets with their names (Encode), and as Hourglass writes them: names in a table,
// a shared symbol block when smaller (EncodeRefs).
func BenchmarkEncodeInt(b *testing.B)             { benchmarkEncode(b, tsbsInt, false) }
func BenchmarkEncodeIntTable(b *testing.B)        { benchmarkEncode(b, tsbsInt, true) }
func BenchmarkEncodeWholeFloat(b *testing.B)      { benchmarkEncode(b, tsbsWholeFloat, false) }
func BenchmarkEncodeWholeFloatTable(b *testing.B) { benchmarkEncode(b, tsbsWholeFloat, true) }
func BenchmarkEncodeFloat(b *testing.B)           { benchmarkEncode(b, tsbsFloat, false) }
func BenchmarkEncodeFloatTable(b *testing.B)      { benchmarkEncode(b, tsbsFloat, true) }
func BenchmarkDecodeInt(b *testing.B)             { benchmarkDecode(b, tsbsInt, false, 0) }
func BenchmarkDecodeIntTable(b *testing.B)        { benchmarkDecode(b, tsbsInt, true, 0) }
func BenchmarkDecodeWholeFloat(b *testing.B)      { benchmarkDecode(b, tsbsWholeFloat, false, 0) }
func BenchmarkDecodeWholeFloatTable(b *testing.B) { benchmarkDecode(b, tsbsWholeFloat, true, 0) }
func BenchmarkDecodeFloat(b *testing.B)           { benchmarkDecode(b, tsbsFloat, false, 0) }
func BenchmarkDecodeFloatTable(b *testing.B)      { benchmarkDecode(b, tsbsFloat, true, 0) }

// One field of ten, as a query of one field reads: with a shared block, the symbols of
// every field are decoded.
func BenchmarkDecodeOneInt(b *testing.B)      { benchmarkDecode(b, tsbsInt, false, 1) }
func BenchmarkDecodeOneIntTable(b *testing.B) { benchmarkDecode(b, tsbsInt, true, 1) }

// BenchmarkDecodeTimes decodes only the time column of regular 10 s buckets.
func BenchmarkDecodeTimes(b *testing.B) {
	buckets := tsbsBuckets(tsbsInt, 1)
	var enc Encoder
	buf, err := enc.Encode(nil, &buckets[0])
	if err != nil {
		b.Fatal(err)
	}
	var r Reader
	var times []int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.Reset(buf); err != nil {
			b.Fatal(err)
		}
		if times, err = r.Times(times); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(times))/b.Elapsed().Seconds(), "points/s")
}
