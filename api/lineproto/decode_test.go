package lineproto

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/timeseries"
)

var testNow = time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)

func decode(t testing.TB, body string, prec Precision) *Result {
	t.Helper()
	var res Result
	NewDecoder().Decode([]byte(body), prec, testNow, &res)
	return &res
}

func meta(t testing.TB, kv ...string) timeseries.MetaKey {
	t.Helper()
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	c, err := timeseries.CanonicalMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	return timeseries.MetaKey(c)
}

func TestDocumentedExample(t *testing.T) {
	res := decode(t, `cpu,host=a,region=eu usage_user=1.5,usage_idle=90i,ok=true,note="x" 1714564800000000000`, Nanosecond)
	want := timeseries.Measurement{
		Time: 1714564800000000000,
		Meta: meta(t, "_measurement", "cpu", "host", "a", "region", "eu"),
		Fields: []timeseries.Field{
			{Name: "usage_user", Value: timeseries.Float(1.5)},
			{Name: "usage_idle", Value: timeseries.Int(90)},
			{Name: "ok", Value: timeseries.Bool(true)},
			{Name: "note", Value: timeseries.String("x")},
		},
	}
	if len(res.Measurements) != 1 || !reflect.DeepEqual(res.Measurements[0], want) || res.Lines != 1 || res.Dropped != 0 {
		t.Fatalf("got %+v", res)
	}
}

func TestValues(t *testing.T) {
	for _, c := range []struct {
		line string
		want timeseries.Value
	}{
		{"m v=1", timeseries.Float(1)},
		{"m v=-0", timeseries.Float(math.Copysign(0, -1))},
		{"m v=.5", timeseries.Float(0.5)},
		{"m v=1e-3", timeseries.Float(0.001)},
		{"m v=1.7976931348623157e308", timeseries.Float(math.MaxFloat64)},
		{"m v=0x1p-2", timeseries.Float(0.25)}, // reference parser: hex float
		{"m v=-9223372036854775808i", timeseries.Int(math.MinInt64)},
		{"m v=9223372036854775807u", timeseries.Int(math.MaxInt64)},
		{"m v=0u", timeseries.Int(0)},
		{"m v=T", timeseries.Bool(true)},
		{"m v=FALSE", timeseries.Bool(false)},
		{`m v=""`, timeseries.String("")},
		{`m v="a b,c=d"`, timeseries.String("a b,c=d")},
		{`m v="say \"hi\" \\ ok"`, timeseries.String(`say "hi" \ ok`)},
		{`m v="é"`, timeseries.String("é")},
	} {
		res := decode(t, c.line, Nanosecond)
		if len(res.Measurements) != 1 || res.Measurements[0].Fields[0].Value != c.want {
			t.Errorf("%q: %+v (first error %v)", c.line, res.Measurements, res.First)
		}
	}
}

func TestPrecisionAndDefaultTime(t *testing.T) {
	for _, c := range []struct {
		prec string
		v2   bool
		ts   string
		want int64
	}{
		{"", false, "5", 5},
		{"n", false, "5", 5},
		{"u", false, "5", 5_000},
		{"us", true, "5", 5_000},
		{"ms", true, "5", 5_000_000},
		{"s", false, "-5", -5_000_000_000},
		{"m", false, "2", 120_000_000_000},
		{"h", false, "1", 3_600_000_000_000},
		{"s", false, "", testNow.Truncate(time.Second).UnixNano()},
		{"h", false, "", testNow.Truncate(time.Hour).UnixNano()},
		{"", true, "", testNow.UnixNano()},
	} {
		p, err := ParsePrecision(c.prec, c.v2)
		if err != nil {
			t.Fatal(err)
		}
		line := "m v=1 " + c.ts
		res := decode(t, strings.TrimSpace(line), p)
		if len(res.Measurements) != 1 || res.Measurements[0].Time != c.want {
			t.Errorf("precision %q %q: %+v %v, want time %d", c.prec, c.ts, res.Measurements, res.First, c.want)
		}
	}
	for _, c := range []struct {
		prec string
		v2   bool
	}{{"m", true}, {"h", true}, {"n", true}, {"x", false}, {"sec", true}, {"NS", false}} {
		if _, err := ParsePrecision(c.prec, c.v2); err == nil {
			t.Errorf("precision %q (v2 %v) accepted", c.prec, c.v2)
		}
	}
	res := decode(t, "m v=1 9223372036854775807", Precision{time.Second})
	if res.Dropped != 1 || res.First == nil || res.First.Err != errTimeRange {
		t.Fatalf("overflowing timestamp: %+v %v", res, res.First)
	}
}

func TestBadLinesKeepTheRest(t *testing.T) {
	body := "# comment\n" +
		"cpu,host=a v=1 1\n" + // line 2
		"\n" +
		"cpu,host=b v= 2\n" + // line 4: bad
		"   \r\n" +
		"cpu,host=c v=3 3\r\n" + // line 6 (CR LF: reference path)
		"my\\ cpu,ho\\,st=a\\=b f=\"say \\\"hi\\\"\" 4\n" + // line 7: escapes
		"cpu v=18446744073709551615u 5\n" + // line 8: refused (does not fit)
		"cpu,_measurement=x v=1 6\n" + // line 9: reserved tag
		"cpu v=1,v=2i,w=true 7" // line 10: duplicate key keeps last
	res := decode(t, body, Nanosecond)
	if res.Lines != 7 || res.Dropped != 3 || len(res.Measurements) != 4 {
		t.Fatalf("lines %d dropped %d measurements %d: %+v", res.Lines, res.Dropped, len(res.Measurements), res.First)
	}
	if res.First.Line != 4 || res.First.Text != "cpu,host=b v= 2" {
		t.Fatalf("first error %+v", res.First)
	}
	for i, want := range []int{2, 6, 7, 10} {
		if got := res.LineOf(i); got != want {
			t.Errorf("LineOf(%d) = %d, want %d", i, got, want)
		}
	}
	esc := res.Measurements[2]
	if esc.Meta != meta(t, "_measurement", "my cpu", "ho,st", "a=b") || esc.Fields[0].Value != timeseries.String(`say "hi"`) {
		t.Fatalf("escapes: %+v", esc)
	}
	dup := res.Measurements[3]
	if len(dup.Fields) != 2 || dup.Fields[0] != (timeseries.Field{Name: "v", Value: timeseries.Int(2)}) {
		t.Fatalf("duplicate key: %+v", dup.Fields)
	}
}

func TestMultiLineString(t *testing.T) {
	body := "m v=1 1\nm s=\"two\nlines\" 2\nm,t=\\  v=3 3\nbad\nm v=4 4\n"
	res := decode(t, body, Nanosecond)
	if len(res.Measurements) != 4 || res.Dropped != 1 || res.First.Line != 5 {
		t.Fatalf("%+v %+v", res.Measurements, res.First)
	}
	if res.Measurements[1].Fields[0].Value != timeseries.String("two\nlines") {
		t.Fatalf("string: %+v", res.Measurements[1])
	}
	for i, want := range []int{1, 2, 4, 6} {
		if got := res.LineOf(i); got != want {
			t.Errorf("LineOf(%d) = %d, want %d", i, got, want)
		}
	}
}

func TestCachesAreBounded(t *testing.T) {
	d := NewDecoder()
	var res Result
	var b strings.Builder
	for i := 0; i < maxSeries+10; i++ {
		fmt.Fprintf(&b, "m,host=h%d f%d=1 1\n", i, i)
	}
	d.Decode([]byte(b.String()), Nanosecond, testNow, &res)
	if len(res.Measurements) != maxSeries+10 || len(d.series) > maxSeries || len(d.names) > maxFieldNames {
		t.Fatalf("%d measurements, %d series, %d names cached", len(res.Measurements), len(d.series), len(d.names))
	}
	// Values decoded after a cache reset are still right.
	last := res.Measurements[maxSeries+9]
	if last.Meta != meta(t, "_measurement", "m", "host", fmt.Sprint("h", maxSeries+9)) || last.Fields[0].Name != fmt.Sprint("f", maxSeries+9) {
		t.Fatalf("last: %+v", last)
	}
	res.Reset()
	if len(res.Measurements) != 0 || res.Lines != 0 || res.First != nil || res.LineOf(0) != 0 {
		t.Fatalf("reset: %+v", res)
	}
}

func TestDecodeAllocations(t *testing.T) {
	body := []byte(strings.Repeat(tsbsLine+"\n", 1000))
	d := NewDecoder()
	var res Result
	d.Decode(body, Nanosecond, testNow, &res)
	allocs := testing.AllocsPerRun(20, func() {
		res.Reset()
		d.Decode(body, Nanosecond, testNow, &res)
	})
	if allocs > 5 {
		t.Fatalf("%.0f allocations for 1000 lines of known series", allocs)
	}
}
