package lineproto

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/timeseries"
)

const tsbsLine = "cpu,hostname=host_0,region=eu-west-1,datacenter=eu-west-1a,rack=87,os=Ubuntu16.04LTS,arch=x64,team=NYC,service=18,service_version=1,service_environment=production usage_user=58i,usage_system=2i,usage_idle=24i,usage_nice=61i,usage_iowait=22i,usage_irq=63i,usage_softirq=6i,usage_steal=44i,usage_guest=80i,usage_guest_nice=38i 1451606400000000000"

var fuzzSeeds = []string{
	tsbsLine,
	"cpu,host=a,region=eu usage_user=1.5,usage_idle=90i,ok=true,note=\"x\" 1714564800000000000",
	"m v=1\nm v=2 2\n\n# c\nm,t=1 v=3u",
	"m v=1.5e3,w=-.5,x=1e400,y=0x10,z=1_0",
	"m v=-,w=--1i,x=1i2,y=+1,z=. 5",
	"m v=tru,w=T,x=false 1",
	"m\\ x,a\\,b=c\\=d v=\"q\\\"\\\\\\n\" -1",
	"m,t=\"a\" v=1\nm v=\"multi\nline\" 3\nm v=1",
	"m v=1 1 \nm v=1  1\n m v=1\nm  v=1\nm v=1 1x\nm v=1 -\n",
	"m,=a v=1\nm,a= v=1\nm,a v=1\nm, v=1\n,m v=1\nm v\nm =1\nm v=",
	"m v=1,v=2,v=\"s\" 9\nm,t=1,t=2 v=1",
	"m,_measurement=x v=1",
	"m v=9223372036854775808i,w=9223372036854775808u,x=18446744073709551616u",
	"m v=1 9223372036854775807\nm v=1 -9223372036854775808\nm v=1 9223372036854775808",
	"#\r\n  \r\n\r\nm v=1\r\nm v=2\r",
	"m\x00 v=1\nm v=\"\xff\"\nm,é=ü v=1\n#\x01\n \r x",
	"m v=1 1\n\n\nbad line here\nm v=\"unterminated\n",
}

// FuzzDecode checks the fast path against the reference parser: for every
// body, Decode and a decode by the reference parser alone give the same
// measurements, the same counts and the same first refused line.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, uint8(0))
	}
	precs := []string{"ns", "us", "ms", "s", "m", "h"}
	f.Fuzz(func(t *testing.T, body string, p uint8) {
		prec, err := ParsePrecision(precs[int(p)%len(precs)], false)
		if err != nil {
			t.Fatal(err)
		}
		fast, ref := NewDecoder(), NewDecoder()
		ref.referenceOnly = true
		var got, want Result
		fast.Decode([]byte(body), prec, testNow, &got)
		ref.Decode([]byte(body), prec, testNow, &want)
		if got.Lines != want.Lines || got.Dropped != want.Dropped || len(got.Measurements) != len(want.Measurements) {
			t.Fatalf("body %q:\nfast: lines %d dropped %d measurements %d first %v\nref:  lines %d dropped %d measurements %d first %v",
				body, got.Lines, got.Dropped, len(got.Measurements), got.First, want.Lines, want.Dropped, len(want.Measurements), want.First)
		}
		if (got.First == nil) != (want.First == nil) || (got.First != nil && (got.First.Line != want.First.Line || got.First.Text != want.First.Text)) {
			t.Fatalf("body %q: first refused %+v, reference %+v", body, got.First, want.First)
		}
		lines := strings.Split(body, "\n")
		for i := range got.Measurements {
			g, w := got.Measurements[i], want.Measurements[i]
			if !sameMeasurement(g, w) {
				t.Fatalf("body %q: measurement %d:\nfast %+v\nref  %+v", body, i, g, w)
			}
			// The reference's line of an entry whose measurement was
			// unescaped into a copy is approximate.
			if l := want.LineOf(i); !strings.Contains(lines[l-1], `\`) && got.LineOf(i) != l {
				t.Fatalf("body %q: measurement %d on line %d, reference %d", body, i, got.LineOf(i), l)
			}
			if err := validMeasurement(g); err != nil {
				t.Fatalf("body %q: measurement %d: %v", body, i, err)
			}
		}
	})
}

func sameMeasurement(a, b timeseries.Measurement) bool {
	if a.Time != b.Time || a.Meta != b.Meta || len(a.Fields) != len(b.Fields) {
		return false
	}
	for i := range a.Fields {
		x, y := a.Fields[i], b.Fields[i]
		if x.Name != y.Name || x.Value.Kind != y.Value.Kind || x.Value.I != y.Value.I || x.Value.S != y.Value.S ||
			x.Value.B != y.Value.B || math.Float64bits(x.Value.F) != math.Float64bits(y.Value.F) {
			return false
		}
	}
	return true
}

// validMeasurement checks what the store relies on: a canonical meta value
// and unique field names.
func validMeasurement(m timeseries.Measurement) error {
	k, ok := m.Meta.(timeseries.MetaKey)
	if !ok {
		return errString("meta is not a MetaKey")
	}
	v, err := timeseries.DecodeMeta(string(k))
	if err != nil {
		return err
	}
	if c, err := timeseries.CanonicalMeta(v); err != nil || c != string(k) {
		return errString("meta not canonical")
	}
	seen := map[string]bool{}
	for _, f := range m.Fields {
		if seen[f.Name] {
			return errString("duplicate field " + f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

func BenchmarkDecode(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; i < 5000; i++ {
		buf.WriteString(strings.Replace(tsbsLine, "host_0", "host_"+string(rune('0'+i%10)), 1))
		buf.WriteByte('\n')
	}
	body := buf.Bytes()
	for _, c := range []struct {
		name string
		ref  bool
	}{{"fast", false}, {"reference", true}} {
		b.Run(c.name, func(b *testing.B) {
			d := NewDecoder()
			d.referenceOnly = c.ref
			var res Result
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				res.Reset()
				d.Decode(body, Nanosecond, testNow, &res)
			}
			if len(res.Measurements) != 5000 {
				b.Fatalf("%d measurements: %v", len(res.Measurements), res.First)
			}
			b.ReportMetric(float64(b.N)*5000/b.Elapsed().Seconds(), "lines/s")
		})
	}
}
