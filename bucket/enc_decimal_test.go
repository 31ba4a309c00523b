package bucket

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

// scaleDecimalTwoPass is the scaling scaleDecimal replaced: the scale found
// over every value first, then each value scaled at it.
func scaleDecimalTwoPass(ints []int64) (int, bool) {
	k := 0
	for _, b := range ints {
		v := math.Float64frombits(uint64(b))
		_, fit := decimalScale(v, k)
		for !fit && k < maxDecimalScale {
			k++
			_, fit = decimalScale(v, k)
		}
		if !fit {
			return 0, false
		}
	}
	for j, b := range ints {
		i, fit := decimalScale(math.Float64frombits(uint64(b)), k)
		if !fit {
			for jj := 0; jj < j; jj++ {
				ints[jj] = int64(math.Float64bits(float64(ints[jj]) / pow10[k]))
			}
			return 0, false
		}
		ints[j] = i
	}
	return k, true
}

// TestScaleDecimal checks the one-pass scaling against the two passes, on
// columns whose values need scales that grow along the column, with
// values that fit no scale, values that fit a scale but not a larger one
// (large mantissas), and values that a scale found early no longer fits:
// the same scale and mantissas, or the same refusal with the values as
// they were.
func TestScaleDecimal(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	value := func() float64 {
		switch rng.Intn(10) {
		case 0:
			return rng.NormFloat64() * 1e3 // full precision: no scale
		case 1:
			return float64(rng.Int63n(1<<53)) / 10 // a large mantissa
		case 2:
			return float64(rng.Int63n(1 << 62)) // fits at 0, overflows at larger scales
		default:
			k := rng.Intn(maxDecimalScale + 1)
			return float64(rng.Int63n(2_000_000)-1_000_000) / pow10[k]
		}
	}
	refused := 0
	for round := 0; round < 20000; round++ {
		n := 1 + rng.Intn(12)
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = int64(math.Float64bits(value()))
		}
		got, want := slices.Clone(vals), slices.Clone(vals)
		gk, gok := scaleDecimal(got)
		wk, wok := scaleDecimalTwoPass(want)
		if gok != wok || gk != wk || !slices.Equal(got, want) {
			t.Fatalf("round %d: %v: scale %d %v %v, want %d %v %v", round, vals, gk, gok, got, wk, wok, want)
		}
		if !gok {
			refused++
		}
	}
	if refused < 1000 || refused > 19000 {
		t.Fatalf("%d of 20000 columns refused: the cases are not mixed", refused)
	}
}

// BenchmarkScaleDecimal times the scaling of a column of 360 readings of
// three decimals (an iot sensor's hour), one pass against two:
//
//	go test ./bucket -run '^$' -bench ScaleDecimal
func BenchmarkScaleDecimal(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	vals := make([]int64, 360)
	v := 20.0
	for i := range vals {
		v += rng.NormFloat64() * 0.1
		vals[i] = int64(math.Float64bits(math.Round(v*1000) / 1000))
	}
	for _, c := range []struct {
		name  string
		scale func([]int64) (int, bool)
	}{{"one-pass", scaleDecimal}, {"two-pass", scaleDecimalTwoPass}} {
		b.Run(c.name, func(b *testing.B) {
			ints := make([]int64, len(vals))
			for i := 0; i < b.N; i++ {
				copy(ints, vals)
				if k, ok := c.scale(ints); !ok || k != 3 {
					b.Fatalf("scale %d, %v", k, ok)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/value")
		})
	}
}
