package bench

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestDeterminism(t *testing.T) {
	w := Workload{Scale: 20, End: DefaultStart.Add(10 * time.Minute)}
	for _, k := range []ValueKind{ValuesInt, ValuesFloat} {
		w.Values = k
		a, b := generate(w), generate(w)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two generators of one workload differ", k)
		}
		other := w
		other.Seed = 124
		if c := generate(other); bytes.Equal(a, c) {
			t.Errorf("%s: seeds 123 and 124 give the same output", k)
		}
	}
	// Seed 0 stands for the default seed.
	if a, b := generate(Workload{Scale: 3, End: DefaultStart.Add(time.Minute)}),
		generate(Workload{Scale: 3, Seed: DefaultSeed, End: DefaultStart.Add(time.Minute)}); !bytes.Equal(a, b) {
		t.Error("seed 0 differs from DefaultSeed")
	}
}

// The integer workload is the float workload truncated: both draw the same
// numbers.
func TestIntsTruncateFloats(t *testing.T) {
	w := Workload{Scale: 5, Seed: 9, End: DefaultStart.Add(time.Hour)}
	gi := w.NewGenerator()
	w.Values = ValuesFloat
	gf := w.NewGenerator()
	var ri, rf Row
	n := 0
	for gi.Next(&ri) {
		if !gf.Next(&rf) {
			t.Fatalf("float generator ended after %d rows", n)
		}
		if ri.Host != rf.Host || ri.Time != rf.Time {
			t.Fatalf("row %d: host, time = %d, %d and %d, %d", n, ri.Host, ri.Time, rf.Host, rf.Time)
		}
		for j, f := range rf.Floats {
			if f < 0 || f > 100 {
				t.Fatalf("row %d: %s = %v outside [0,100]", n, FieldNames[j], f)
			}
			if ri.Ints[j] != int64(f) {
				t.Fatalf("row %d: %s = %d, float value %v", n, FieldNames[j], ri.Ints[j], f)
			}
		}
		if ri.Floats != ([NumFields]float64{}) || rf.Ints != ([NumFields]int64{}) {
			t.Fatalf("row %d: the unused value array is not zero", n)
		}
		n++
	}
	if gf.Next(&rf) {
		t.Fatal("float generator has more rows than the integer one")
	}
}

func TestRowOrder(t *testing.T) {
	w := Workload{Scale: 4, Start: time.Unix(-25, 0), End: time.Unix(10, 0), Interval: 10 * time.Second}
	g := w.NewGenerator()
	if len(g.Hosts()) != 4 {
		t.Fatalf("%d hosts, want 4", len(g.Hosts()))
	}
	for i, h := range g.Hosts() {
		if want := "host_" + string(rune('0'+i)); h.Name != want || h.Tags[0] != [2]string{"hostname", want} || len(h.Tags) != 10 {
			t.Errorf("host %d = %+v", i, h)
		}
	}
	var row Row
	for tick := range 4 { // -25, -15, -5, 5 s
		for host := range 4 {
			if !g.Next(&row) {
				t.Fatalf("ended at tick %d host %d", tick, host)
			}
			if want := int64(-25+10*tick) * 1e9; row.Host != host || row.Time != want {
				t.Fatalf("row = host %d time %d, want host %d time %d", row.Host, row.Time, host, want)
			}
		}
	}
	last := row
	for range 2 {
		if g.Next(&row) {
			t.Fatal("Next returned a row after the last one")
		}
	}
	if row != last {
		t.Error("Next changed the row after the last one")
	}
}

func TestRowsPoints(t *testing.T) {
	day := 24 * time.Hour
	s := DefaultStart
	cases := []struct {
		name        string
		w           Workload
		ticks, rows int
	}{
		{"zero", Workload{}, 8640, 864000},
		{"scale 1000", Workload{Scale: 1000}, 8640, 8640000},
		{"start only", Workload{Start: s.Add(365 * day)}, 8640, 864000},
		{"end only", Workload{End: s.Add(time.Hour)}, 360, 36000},
		{"empty", Workload{End: s}, 0, 0},
		{"reversed", Workload{End: s.Add(-time.Hour)}, 0, 0},
		{"one ns", Workload{Scale: 3, End: s.Add(1)}, 1, 3},
		{"partial tick", Workload{Scale: 2, End: s.Add(25 * time.Second)}, 3, 6},
		{"whole ticks", Workload{Scale: 2, End: s.Add(30 * time.Second)}, 3, 6},
		{"1 ns interval", Workload{Scale: 1, End: s.Add(100 * time.Microsecond), Interval: 1}, 1e5, 1e5},
		{"epoch span", Workload{Scale: 1, Start: time.Unix(-5, 0), End: time.Unix(5, 0), Interval: 3 * time.Second}, 4, 4},
		// 200,883 days at 1 s: the nanosecond span overflows an int64.
		{"wide span", Workload{Scale: 1, Start: time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2250, 1, 1, 0, 0, 0, 0, time.UTC), Interval: time.Second}, 200883 * 86400, 200883 * 86400},
	}
	for _, tc := range cases {
		if err := tc.w.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", tc.name, err)
		}
		if got := tc.w.Ticks(); got != tc.ticks {
			t.Errorf("%s: Ticks = %d, want %d", tc.name, got, tc.ticks)
		}
		if got := tc.w.Rows(); got != tc.rows {
			t.Errorf("%s: Rows = %d, want %d", tc.name, got, tc.rows)
		}
		if got := tc.w.Points(); got != tc.rows*NumFields {
			t.Errorf("%s: Points = %d, want %d", tc.name, got, tc.rows*NumFields)
		}
		if tc.rows <= 1e5 {
			n := 0
			g := tc.w.NewGenerator()
			for row := (Row{}); g.Next(&row); n++ {
			}
			if n != tc.rows {
				t.Errorf("%s: generator yields %d rows, Rows = %d", tc.name, n, tc.rows)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		w    Workload
	}{
		{"negative scale", Workload{Scale: -1}},
		{"negative interval", Workload{Interval: -time.Second}},
		{"unknown values", Workload{Values: 2}},
		{"start before 1678", Workload{Start: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"end after 2262", Workload{End: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"too many points", Workload{Scale: 1e6, Start: time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2250, 1, 1, 0, 0, 0, 0, time.UTC), Interval: 1}},
	}
	for _, tc := range cases {
		err := tc.w.Validate()
		if !errors.Is(err, ErrInvalidWorkload) {
			t.Errorf("%s: Validate = %v, want ErrInvalidWorkload", tc.name, err)
			continue
		}
		if tc.w.Rows() != 0 || tc.w.Points() != 0 || tc.w.Ticks() != 0 {
			t.Errorf("%s: Ticks, Rows, Points = %d, %d, %d, want 0", tc.name, tc.w.Ticks(), tc.w.Rows(), tc.w.Points())
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: NewGenerator did not panic", tc.name)
				}
			}()
			tc.w.NewGenerator()
		}()
	}
}

// The peers harness's query q1, max(usage_user) of host_0 over
// (12:00, 13:00] of the default workload, answers 68.
func TestPeersQ1(t *testing.T) {
	g := Workload{}.NewGenerator()
	from := DefaultStart.Add(12 * time.Hour).UnixNano()
	to := DefaultStart.Add(13 * time.Hour).UnixNano()
	var (
		row  Row
		best int64 = -1
		n    int
	)
	for g.Next(&row) && row.Time <= to {
		if row.Host == 0 && row.Time > from {
			best = max(best, row.Ints[0])
			n++
		}
	}
	if n != 360 || best != 68 {
		t.Errorf("q1 over %d rows = %d, want 68 over 360 rows", n, best)
	}
}

func BenchmarkGenerator(b *testing.B) {
	for _, k := range []ValueKind{ValuesInt, ValuesFloat} {
		b.Run(k.String(), func(b *testing.B) {
			// A default-shaped workload long enough for b.N rows.
			w := Workload{Values: k}
			w.EnsureDefaults()
			w.End = w.Start.Add(time.Duration((b.N+w.Scale-1)/w.Scale) * w.Interval)
			g := w.NewGenerator()
			var (
				row   Row
				buf   = make([]byte, 0, 512)
				total int
			)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if !g.Next(&row) {
					b.Fatal("workload ended early")
				}
				buf = g.AppendLine(buf[:0], &row)
				total += len(buf)
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/sec, "rows/s")
			b.ReportMetric(float64(b.N*NumFields)/sec, "points/s")
			b.ReportMetric(float64(total)/float64(b.N), "B/row")
		})
	}
}
