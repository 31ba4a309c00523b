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
		wantEnc byte
	}{
		{"int", tsbsInt, 0.355, 0.30, encInt},
		{"whole float", tsbsWholeFloat, 0.36, 0.30, encDecimal},
		{"float", tsbsFloat, 6.4, 6.3, encFloat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hosts := tsbsHosts
			if testing.Short() {
				hosts = 10
			}
			var enc Encoder
			var r Reader
			var buf []byte
			total, data, points := 0, 0, 0
			for i, cols := range tsbsBuckets(tc.v, hosts) {
				var err error
				if buf, err = enc.Encode(buf[:0], &cols); err != nil {
					t.Fatal(err)
				}
				total += len(buf)
				points += len(cols.Times) * len(cols.Fields)
				if err := r.Reset(buf); err != nil {
					t.Fatal(err)
				}
				data += len(buf) - r.timeOff
				if i%50 == 0 {
					checkDecoded(t, &r, &cols)
				}
				if e := r.fields[0].info.enc; e != tc.wantEnc {
					t.Fatalf("encoding %d, want %d", e, tc.wantEnc)
				}
			}
			bpp := float64(total) / float64(points)
			dpp := float64(data) / float64(points)
			t.Logf("%s: %d points, %d bytes: %.4f bytes/point, %.4f without the control block", tc.name, points, total, bpp, dpp)
			if bpp > tc.max || dpp > tc.maxData {
				t.Errorf("%.4f (%.4f) bytes/point, want <= %.3f (%.3f)", bpp, dpp, tc.max, tc.maxData)
			}
		})
	}
}

func benchmarkEncode(b *testing.B, v tsbsVariant) {
	buckets := tsbsBuckets(v, 10)
	var enc Encoder
	var buf []byte
	points, size := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cols := &buckets[i%len(buckets)]
		buf, _ = enc.Encode(buf[:0], cols)
		points += len(cols.Times) * len(cols.Fields)
		size += len(buf)
	}
	b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(size)/float64(points), "B/point")
}

func benchmarkDecode(b *testing.B, v tsbsVariant) {
	buckets := tsbsBuckets(v, 10)
	var enc Encoder
	encoded := make([][]byte, len(buckets))
	for i := range buckets {
		encoded[i], _ = enc.Encode(nil, &buckets[i])
	}
	var r Reader
	var col Column
	var times []int64
	points := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.Reset(encoded[i%len(encoded)]); err != nil {
			b.Fatal(err)
		}
		times, _ = r.Times(times)
		for f := 0; f < r.NumFields(); f++ {
			if err := r.Column(f, &col); err != nil {
				b.Fatal(err)
			}
		}
		points += r.Rows() * r.NumFields()
	}
	b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
}

func BenchmarkEncodeInt(b *testing.B)        { benchmarkEncode(b, tsbsInt) }
func BenchmarkEncodeWholeFloat(b *testing.B) { benchmarkEncode(b, tsbsWholeFloat) }
func BenchmarkEncodeFloat(b *testing.B)      { benchmarkEncode(b, tsbsFloat) }
func BenchmarkDecodeInt(b *testing.B)        { benchmarkDecode(b, tsbsInt) }
func BenchmarkDecodeWholeFloat(b *testing.B) { benchmarkDecode(b, tsbsWholeFloat) }
func BenchmarkDecodeFloat(b *testing.B)      { benchmarkDecode(b, tsbsFloat) }

// BenchmarkDecodeTimes decodes only the time column of regular 10 s buckets.
func BenchmarkDecodeTimes(b *testing.B) {
	buckets := tsbsBuckets(tsbsInt, 1)
	var enc Encoder
	buf, _ := enc.Encode(nil, &buckets[0])
	var r Reader
	var times []int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = r.Reset(buf)
		times, _ = r.Times(times)
	}
	b.ReportMetric(float64(b.N*len(times))/b.Elapsed().Seconds(), "points/s")
}
