package lineproto

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/internal/sendorder"
	"github.com/hourglassdb/hourglass/model"
)

var testNow = time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)

func decode(t testing.TB, body string, prec Precision) *Result {
	t.Helper()
	var res Result
	NewDecoder().Decode([]byte(body), prec, testNow, &res)
	// The engine's series slots (TestSeriesSlots) are left out of the
	// measurements compared.
	for i := range res.Measurements {
		res.Measurements[i].Slot = nil
	}
	return &res
}

// meta returns the meta value of a series: the measurement and the tags.
func meta(t testing.TB, kv ...string) model.MetaKey {
	t.Helper()
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	c, err := model.CanonicalMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	return model.MetaKey(c)
}

func TestDocumentedExample(t *testing.T) {
	res := decode(t, `cpu,host=a,region=eu usage_user=1.5,usage_idle=90i,ok=true,note="x" 1714564800000000000`, Nanosecond)
	want := model.Measurement{
		Time: 1714564800000000000,
		Meta: meta(t, "_measurement", "cpu", "host", "a", "region", "eu"),
		Fields: []model.Field{
			{Name: "usage_user", Value: model.Float(1.5)},
			{Name: "usage_idle", Value: model.Int(90)},
			{Name: "ok", Value: model.Bool(true)},
			{Name: "note", Value: model.String("x")},
		},
	}
	if len(res.Measurements) != 1 || !reflect.DeepEqual(res.Measurements[0], want) || res.Lines != 1 || res.Dropped != 0 || res.LineOf(0) != 1 {
		t.Fatalf("got %+v", res)
	}
	// The meta value decodes to the map the store keeps.
	v, err := model.DecodeMeta(string(res.Measurements[0].Meta.(model.MetaKey)))
	if err != nil || !reflect.DeepEqual(v, map[string]any{"_measurement": "cpu", "host": "a", "region": "eu"}) {
		t.Fatalf("meta %v, %v", v, err)
	}
}

func TestValues(t *testing.T) {
	for _, c := range []struct {
		line string
		want model.Value
	}{
		{"m v=1", model.Float(1)},
		{"m v=-0", model.Float(math.Copysign(0, -1))},
		{"m v=.5", model.Float(0.5)},
		{"m v=5.", model.Float(5)},
		{"m v=1e-3", model.Float(0.001)},
		{"m v=-1.5E+2", model.Float(-150)},
		{"m v=1.7976931348623157e308", model.Float(math.MaxFloat64)},
		{"m v=4.9e-324", model.Float(math.SmallestNonzeroFloat64)},
		{"m v=0x1p-2", model.Float(0.25)}, // the reference parser takes hex floats
		{"m v=0.1", model.Float(0.1)},
		{"m v=007i", model.Int(7)},
		{"m v=-9223372036854775808i", model.Int(math.MinInt64)},
		{"m v=9223372036854775807i", model.Int(math.MaxInt64)},
		{"m v=9223372036854775807u", model.Int(math.MaxInt64)},
		{"m v=0u", model.Int(0)},
		{"m v=t", model.Bool(true)},
		{"m v=T", model.Bool(true)},
		{"m v=True", model.Bool(true)},
		{"m v=FALSE", model.Bool(false)},
		{"m v=f", model.Bool(false)},
		{`m v=""`, model.String("")},
		{`m v="a b,c=d"`, model.String("a b,c=d")},
		{`m v="say \"hi\" \\ ok"`, model.String(`say "hi" \ ok`)},
		{`m v="tab\tnew\nline"`, model.String("tab\tnew\nline")},
		{`m v="é"`, model.String("é")},
	} {
		res := decode(t, c.line, Nanosecond)
		if len(res.Measurements) != 1 || res.Measurements[0].Fields[0].Value != c.want {
			t.Errorf("%q: %+v (first error %v)", c.line, res.Measurements, res.First)
		}
	}
}

func TestRefusedValues(t *testing.T) {
	for _, c := range []struct{ line, err string }{
		{"m v=NaN", "field value has unrecognized type"},
		{"m v=-Inf", "non-number"},
		{"m v=1e400", "value out of range"},
		{"m v=+1", "unrecognized type"},
		{"m v=1.5i", "invalid integer value syntax"},
		{"m v=9223372036854775808i", "out of range"},
		{"m v=-1u", "cannot parse value"},
		{"m v=18446744073709551616u", "out of range"},
		{"m v=9223372036854775808u", `field "v": unsigned value 9223372036854775808 overflows int64`},
		{"m v=18446744073709551615u", `unsigned value 18446744073709551615 overflows int64`},
		{"m v=yes", "field value has unrecognized type"},
		{"m v=tru", "invalid bool value"},
		{"m v=truE", "invalid bool value"},
		{`m v="unterminated`, "expected closing quote"},
		{"m v=1 1.5", "invalid timestamp"},
		{"m v=1 1 2", "unexpected text after timestamp"},
		{"m", "no field"},
		{"m ", "expected field key"},
		{",t=1 v=1", "invalid character ',' found at start of measurement name"},
		{"m,t v=1", "expected '=' after tag key"},
		{"m,t= v=1", "expected tag value"},
		{"m,_measurement=x v=1", "reserved"},
		{"m,$where=x v=1", `tag key "$where" starts with '$'`},
		{"m,a=1,$gt=x v=1", `tag key "$gt" starts with '$'`},
		{"m v=\"\xff\"", "invalid utf-8"},
	} {
		res := decode(t, c.line, Nanosecond)
		if len(res.Measurements) != 0 || res.Dropped != 1 || res.Lines != 1 || res.First == nil || res.First.Line != 1 || res.First.Text != c.line {
			t.Errorf("%q: %d measurements, %d dropped, first %+v", c.line, len(res.Measurements), res.Dropped, res.First)
			continue
		}
		if !strings.Contains(res.First.Err.Error(), c.err) && !(c.err == "no field" && res.First.Err != nil) {
			t.Errorf("%q: error %q, want it to mention %q", c.line, res.First.Err, c.err)
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
		{"ns", true, "5", 5},
		{"u", false, "5", 5_000},
		{"µ", false, "5", 5_000},
		{"us", true, "5", 5_000},
		{"ms", true, "5", 5_000_000},
		{"s", false, "-5", -5_000_000_000},
		{"s", true, "1714564800", 1714564800_000_000_000},
		{"m", false, "2", 120_000_000_000},
		{"h", false, "1", 3_600_000_000_000},
		{"s", false, "", testNow.Truncate(time.Second).UnixNano()},
		{"h", false, "", testNow.Truncate(time.Hour).UnixNano()},
		{"", true, "", testNow.UnixNano()},
		{"ms", false, "-9223372036854", -9223372036854_000_000},
	} {
		p, err := ParsePrecision(c.prec, c.v2)
		if err != nil {
			t.Fatal(err)
		}
		line := strings.TrimSpace("m v=1 " + c.ts)
		for _, body := range []string{line, line + "\n" + `m\ x v=1 ` + c.ts} { // fast and reference paths
			res := decode(t, body, p)
			for i := range res.Measurements {
				if res.Measurements[i].Time != c.want {
					t.Errorf("precision %q, timestamp %q: time %d, want %d", c.prec, c.ts, res.Measurements[i].Time, c.want)
				}
			}
			if res.Dropped != 0 {
				t.Errorf("precision %q, timestamp %q: %v", c.prec, c.ts, res.First)
			}
		}
	}
	for _, c := range []struct {
		prec string
		v2   bool
	}{{"m", true}, {"h", true}, {"n", true}, {"u", true}, {"µ", true}, {"x", false}, {"sec", true}, {"NS", false}, {" s", false}} {
		_, err := ParsePrecision(c.prec, c.v2)
		if err == nil {
			t.Errorf("precision %q (v2 %v) accepted", c.prec, c.v2)
			continue
		}
		want := "accepted values are n, ns, u, us, µ, ms, s, m and h"
		if c.v2 {
			want = "accepted values are ns, us, ms and s"
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("precision %q (v2 %v): %v", c.prec, c.v2, err)
		}
	}
	for _, c := range []struct {
		prec Precision
		ts   string
	}{
		{Precision{time.Second}, "9223372036854775807"},
		{Precision{time.Second}, "9223372037"},
		{Precision{time.Second}, "-9223372037"},
		{Precision{time.Hour}, "2562048"},
		{Nanosecond, "9223372036854775808"},
	} {
		for _, body := range []string{"m v=1 " + c.ts, `m\ x v=1 ` + c.ts} {
			res := decode(t, body, c.prec)
			if res.Dropped != 1 || res.First == nil || !errors.Is(res.First.Err, errTimeRange) {
				t.Errorf("%q at precision %v: %+v %v", body, c.prec, res.Measurements, res.First)
			}
		}
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
		"  # indented comment\n" +
		"cpu v=1,v=2i,w=true 7" // line 11: a key given twice keeps its last value
	res := decode(t, body, Nanosecond)
	if res.Lines != 7 || res.Dropped != 3 || len(res.Measurements) != 4 {
		t.Fatalf("lines %d dropped %d measurements %d: %+v", res.Lines, res.Dropped, len(res.Measurements), res.First)
	}
	if res.First.Line != 4 || res.First.Text != "cpu,host=b v= 2" {
		t.Fatalf("first error %+v", res.First)
	}
	for i, want := range []int{2, 6, 7, 11} {
		if got := res.LineOf(i); got != want {
			t.Errorf("LineOf(%d) = %d, want %d", i, got, want)
		}
	}
	if res.LineOf(-1) != 0 || res.LineOf(4) != 0 {
		t.Errorf("LineOf out of range: %d, %d", res.LineOf(-1), res.LineOf(4))
	}
	esc := res.Measurements[2]
	if esc.Meta != meta(t, "_measurement", "my cpu", "ho,st", "a=b") || len(esc.Fields) != 1 ||
		esc.Fields[0] != (model.Field{Name: "f", Value: model.String(`say "hi"`)}) || esc.Time != 4 {
		t.Fatalf("escapes: %+v", esc)
	}
	dup := res.Measurements[3]
	want := []model.Field{{Name: "v", Value: model.Int(2)}, {Name: "w", Value: model.Bool(true)}}
	if !reflect.DeepEqual(dup.Fields, want) {
		t.Fatalf("duplicate key: %+v", dup.Fields)
	}
}

func TestFirstErrorAfterGoodLines(t *testing.T) {
	body := "m v=1 1\n\nm v=2 2\nm,t=a v=fals 3\nm v=4 4\nm v=\n"
	res := decode(t, body, Nanosecond)
	if res.Lines != 5 || res.Dropped != 2 || len(res.Measurements) != 3 || res.First.Line != 4 || res.First.Text != "m,t=a v=fals 3" {
		t.Fatalf("%+v, first %+v", res, res.First)
	}
	if !strings.Contains(res.First.Error(), "line 4: ") || !strings.Contains(res.First.Err.Error(), "invalid bool value") {
		t.Fatalf("error text %q", res.First.Error())
	}
	for i, want := range []int{1, 3, 5} {
		if res.LineOf(i) != want {
			t.Errorf("LineOf(%d) = %d, want %d", i, res.LineOf(i), want)
		}
	}
}

func TestDuplicateTags(t *testing.T) {
	// The reference parser passes both; the last one wins, as for fields.
	for _, body := range []string{"m,t=1,t=2 v=1", `m,t=1,t=2,e\ x=y v=1`} {
		res := decode(t, body, Nanosecond)
		if len(res.Measurements) != 1 {
			t.Fatalf("%q: %v", body, res.First)
		}
		want := meta(t, "_measurement", "m", "t", "2")
		if strings.Contains(body, "e\\ x") {
			want = meta(t, "_measurement", "m", "t", "2", "e x", "y")
		}
		if res.Measurements[0].Meta != want {
			t.Errorf("%q: meta %v, want %v", body, res.Measurements[0].Meta, want)
		}
	}
}

func TestDuplicateFieldsNeverReachTheStore(t *testing.T) {
	d := NewDecoder()
	var res Result
	// The same series, first with distinct keys (cached field list),
	// then with a repeated key, then distinct again.
	d.Decode([]byte("m a=1,b=2 1\nm a=1,b=2,a=3 2\nm\\ x a=1,a=\"s\" 3\nm a=1,b=2 4\n"), Nanosecond, testNow, &res)
	if len(res.Measurements) != 4 {
		t.Fatalf("%d measurements, %v", len(res.Measurements), res.First)
	}
	want := [][]model.Field{
		{{Name: "a", Value: model.Float(1)}, {Name: "b", Value: model.Float(2)}},
		{{Name: "a", Value: model.Float(3)}, {Name: "b", Value: model.Float(2)}},
		{{Name: "a", Value: model.String("s")}},
		{{Name: "a", Value: model.Float(1)}, {Name: "b", Value: model.Float(2)}},
	}
	for i := range want {
		if !reflect.DeepEqual(res.Measurements[i].Fields, want[i]) {
			t.Errorf("measurement %d: %+v, want %+v", i, res.Measurements[i].Fields, want[i])
		}
	}
}

func TestMultiLineString(t *testing.T) {
	body := "m v=1 1\nm s=\"two\nlines\" 2\nm,t=\\  v=3 3\nbad\nm v=4 4\n"
	res := decode(t, body, Nanosecond)
	if len(res.Measurements) != 4 || res.Dropped != 1 || res.First.Line != 5 || res.Lines != 5 {
		t.Fatalf("%+v %+v", res.Measurements, res.First)
	}
	if res.Measurements[1].Fields[0].Value != model.String("two\nlines") {
		t.Fatalf("string: %+v", res.Measurements[1])
	}
	for i, want := range []int{1, 2, 4, 6} {
		if got := res.LineOf(i); got != want {
			t.Errorf("LineOf(%d) = %d, want %d", i, got, want)
		}
	}
}

// TestFallbackStaysLocal checks that a line the fast path leaves to the
// reference parser does not send the rest of the body there too, even
// when a string value runs over many lines.
func TestFallbackStaysLocal(t *testing.T) {
	var b strings.Builder
	b.WriteString("m,host=a msg=\"say \\\"hi\\\"\" 1\n") // escaped quotes: reference path
	b.WriteString("m,host=a msg=\"a story\n")
	for i := 0; i < 20; i++ {
		b.WriteString("in many lines\n")
	}
	b.WriteString("the end\" 2\n")
	b.WriteString("m,host=a v=1 3 x\"\n") // bad, with a quote
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "m,host=a v=%d %d\n", i, i+4)
	}
	d := NewDecoder()
	var res Result
	d.Decode([]byte(b.String()), Nanosecond, testNow, &res)
	if len(res.Measurements) != 1002 || res.Dropped != 1 || res.First.Line != 24 {
		t.Fatalf("%d measurements, first error %+v", len(res.Measurements), res.First)
	}
	if s := res.Measurements[1].Fields[0].Value.S; !strings.HasPrefix(s, "a story\nin many") || strings.Count(s, "\n") != 21 {
		t.Fatalf("multi-line string %q", s)
	}
	if res.LineOf(0) != 1 || res.LineOf(1) != 2 || res.LineOf(2) != 25 || res.LineOf(1001) != 1024 {
		t.Fatalf("lines %d %d %d %d", res.LineOf(0), res.LineOf(1), res.LineOf(2), res.LineOf(1001))
	}
	// 1 + 32 (the chunk doubles until the string closes) + 1; the rest is
	// the fast path's.
	if d.slowLines > 40 {
		t.Fatalf("%d lines went to the reference parser", d.slowLines)
	}
}

func TestFastPathTakesCommonLines(t *testing.T) {
	d := NewDecoder()
	for _, l := range []string{
		tsbsLine,
		`cpu,host=a,region=eu usage_user=1.5,usage_idle=90i,ok=true,note="x" 1714564800000000000`,
		"m v=1",
		"m v=1u,w=-2i,x=1e-3,y=F,z=\"a b=c,d\" -1",
		"disk,path=/var/lib,fstype=ext4 used_percent=12.5,free=1024u",
		`syslog,appname=sshd message="Accepted publickey for root from 10.0.0.1 port 22" 1`,
	} {
		if !d.fast([]byte(l)) {
			t.Errorf("fast path refused %q", l)
		}
	}
	for _, l := range []string{
		`m\ x v=1`, `m,t=a\,b v=1`, `m v="a\"b"`, "m  v=1", "m v=1  1", "m v=1 1 ",
		"m v=1\r", "m,t=é v=1", "m v=\"é\"", "m v=+1", "m v=1 +1", "m v=NaN", "m v=1e999",
	} {
		if d.fast([]byte(l)) {
			t.Errorf("fast path took %q", l)
		}
	}
}

func TestErrorTextIsCut(t *testing.T) {
	long := "m,t=" + strings.Repeat("é", 200) + " v=oops"
	res := decode(t, long, Nanosecond)
	if res.First == nil || len(res.First.Text) > maxErrorText+3 || !strings.HasSuffix(res.First.Text, "...") ||
		!strings.HasPrefix(long, strings.TrimSuffix(res.First.Text, "...")) || strings.ContainsRune(res.First.Text, '\uFFFD') {
		t.Fatalf("text %q", res.First.Text)
	}
}

func TestCachesAreBounded(t *testing.T) {
	const maxBytes = 256 << 10
	d := NewDecoderSharing(NewSeriesCache(maxBytes))
	var res Result
	var b strings.Builder
	n := maxPending + maxFieldSets + maxFieldNames
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "m,host=h%d f%d=1,g=2 1\n", i, i)
	}
	d.Decode([]byte(b.String()), Nanosecond, testNow, &res)
	entries, bytes := d.cache.size()
	if len(res.Measurements) != n || bytes > maxBytes || entries == 0 || len(d.sets) > maxFieldSets || len(d.names) > maxFieldNames {
		t.Fatalf("%d measurements, %d series in %d bytes, %d field sets, %d names cached", len(res.Measurements), entries, bytes, len(d.sets), len(d.names))
	}
	// Values decoded after the caches were emptied are still right.
	for _, i := range []int{0, maxPending - 1, maxPending, n - 1} {
		m := res.Measurements[i]
		want := []model.Field{{Name: fmt.Sprint("f", i), Value: model.Float(1)}, {Name: "g", Value: model.Float(2)}}
		if m.Meta != meta(t, "_measurement", "m", "host", fmt.Sprint("h", i)) || !reflect.DeepEqual(m.Fields, want) {
			t.Fatalf("measurement %d: %+v", i, m)
		}
	}
}

// seriesLines returns lines of the series h<from> to h<to>, every key and
// meta value of one length.
func seriesLines(from, to int) []byte {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "m,host=h%06d v=%d 1\n", i, i)
	}
	return []byte(b.String())
}

// checkSeries checks the measurements of seriesLines(from, ...).
func checkSeries(t *testing.T, res *Result, from int) {
	t.Helper()
	for j, m := range res.Measurements {
		i := from + j
		if m.Meta != meta(t, "_measurement", "m", "host", fmt.Sprintf("h%06d", i)) || m.Fields[0].Value != model.Float(float64(i)) {
			t.Fatalf("line %d: %+v", i, m)
		}
	}
}

// cacheOf returns a series cache whose generations hold gen series of
// seriesLines.
func cacheOf(t *testing.T, gen int) *SeriesCache {
	c := NewSeriesCache(1 << 20)
	var res Result
	NewDecoderSharing(c).Decode(seriesLines(0, 1), Nanosecond, testNow, &res)
	_, one := c.size()
	return NewSeriesCache(2 * gen * one)
}

// decodeSeries decodes seriesLines(from, to) with d, checks them, and
// returns the lookups the cache answered.
func decodeSeries(t *testing.T, d *Decoder, from, to int) int {
	t.Helper()
	var res Result
	hits := d.seriesHits
	d.Decode(seriesLines(from, to), Nanosecond, testNow, &res)
	checkSeries(t, &res, from)
	return d.seriesHits - hits
}

// TestSeriesCacheThrash checks that a full series cache that answered
// (almost) no lookup is kept rather than refilled, and that one that did
// starts a new generation and keeps the series of the last one that come
// again.
func TestSeriesCacheThrash(t *testing.T) {
	// A fleet larger than the cache, in turn: the cache fills, answers
	// nothing, and is kept as it is.
	c := cacheOf(t, 100)
	d := NewDecoderSharing(c)
	decodeSeries(t, d, 0, 100)
	decodeSeries(t, d, 100, 150)
	if n, _ := c.size(); n != 100 || len(c.cur) != 100 || c.prev != nil || c.skip.Load() != 100 {
		t.Fatalf("after 150 series in turn: %d cached (%d current), %d misses left uncached; want 100 and 100", n, len(c.cur), c.skip.Load())
	}
	if h := decodeSeries(t, d, 0, 10); h != 10 {
		t.Fatalf("%d hits on series kept in the cache; want 10", h)
	}
	decodeSeries(t, d, 150, 160)
	if n, _ := c.size(); n != 100 || c.skip.Load() != 90 {
		t.Fatalf("misses while skipping: %d cached, %d left uncached; want 100, 90", n, c.skip.Load())
	}

	// A cache that answered its lookups starts a new generation; the
	// series of the old one that come again are found and moved to it.
	c = cacheOf(t, 100)
	d = NewDecoderSharing(c)
	decodeSeries(t, d, 0, 100)
	decodeSeries(t, d, 0, 100)
	if h := decodeSeries(t, d, 100, 110); h != 0 || len(c.cur) != 10 || len(c.prev) != 100 || c.skip.Load() != 0 {
		t.Fatalf("a cache that answered every lookup, full: %d hits, %d current, %d previous, %d skipped; want 0, 10, 100, 0",
			h, len(c.cur), len(c.prev), c.skip.Load())
	}
	if h := decodeSeries(t, d, 0, 5); h != 5 || len(c.cur) != 15 {
		t.Fatalf("series of the previous generation: %d hits, %d current; want 5, 15", h, len(c.cur))
	}
	// A series of the previous generation repeated more than a decoder
	// holds, then another: both move.
	var b []byte
	for range 2 * maxPending {
		b = append(b, seriesLines(5, 6)...)
	}
	var res Result
	d.Decode(append(b, seriesLines(6, 7)...), Nanosecond, testNow, &res)
	if _, ok := c.cur["m,host=h000006"]; !ok || len(c.cur) != 17 {
		t.Fatalf("after a series repeated and another: %d current, h000006 in them: %v; want 17, true", len(c.cur), ok)
	}

	// A new generation that answers nothing is kept, without the last.
	decodeSeries(t, d, 200, 283) // cur full: 100
	decodeSeries(t, d, 300, 400) // a new generation, full
	if len(c.cur) != 100 || len(c.prev) != 100 {
		t.Fatalf("%d current, %d previous; want 100, 100", len(c.cur), len(c.prev))
	}
	decodeSeries(t, d, 400, 450)
	if len(c.cur) != 100 || c.prev != nil || c.skip.Load() != 100 {
		t.Fatalf("a full generation that answered nothing: %d current, previous kept: %v, %d skipped; want 100, false, 100",
			len(c.cur), c.prev != nil, c.skip.Load())
	}
}

// TestSeriesPromotedAcrossRotation checks that series found in the older
// generation move to the new one even when moving the first of them
// starts a generation.
func TestSeriesPromotedAcrossRotation(t *testing.T) {
	c := cacheOf(t, 100)
	d := NewDecoderSharing(c)
	decodeSeries(t, d, 0, 100)
	decodeSeries(t, d, 0, 100)
	decodeSeries(t, d, 100, 200) // a new generation, full
	if h := decodeSeries(t, d, 100, 200); h != 100 || len(c.cur) != 100 || len(c.prev) != 100 {
		t.Fatalf("%d hits, %d current, %d previous; want 100, 100, 100", h, len(c.cur), len(c.prev))
	}
	// h000000 and h000001 are in the previous generation; moving the
	// first fills the current one, which becomes the previous.
	if h := decodeSeries(t, d, 0, 2); h != 2 {
		t.Fatalf("%d hits; want 2", h)
	}
	_, ok0 := c.cur["m,host=h000000"]
	_, ok1 := c.cur["m,host=h000001"]
	if len(c.cur) != 2 || !ok0 || !ok1 || len(c.prev) != 100 {
		t.Fatalf("%d current (h000000 %v, h000001 %v), %d previous; want both of 2, 100", len(c.cur), ok0, ok1, len(c.prev))
	}
}

// TestSeriesPendingBounded checks that a decoder that cannot add to the
// cache (another reads it) holds at most maxPending series, and
// maxPendingBytes of their keys and metas, and adds them later.
func TestSeriesPendingBounded(t *testing.T) {
	// Alone, a decoder adds what it made as it goes (relock), beyond
	// what it may hold.
	c := NewSeriesCache(DefaultSeriesCacheBytes)
	d := NewDecoderSharing(c)
	decodeSeries(t, d, 0, maxPending+100)
	if n, _ := c.size(); n != maxPending+100 {
		t.Fatalf("%d series cached from one chunk of %d; want all", n, maxPending+100)
	}
	c = NewSeriesCache(DefaultSeriesCacheBytes)
	d = NewDecoderSharing(c)
	var res Result
	c.mu.RLock()
	decodeSeries(t, d, 0, maxPending+100)
	c.mu.RUnlock()
	if n, _ := c.size(); n != 0 || len(d.made) != maxPending {
		t.Fatalf("while another decoder reads: %d series cached, %d held; want 0, %d", n, len(d.made), maxPending)
	}
	d.Decode(nil, Nanosecond, testNow, &res)
	if n, _ := c.size(); n != maxPending || len(d.made) != 0 {
		t.Fatalf("after: %d series cached, %d held; want %d, 0", n, len(d.made), maxPending)
	}
	c = NewSeriesCache(DefaultSeriesCacheBytes)
	d = NewDecoderSharing(c)
	c.mu.RLock()
	defer c.mu.RUnlock()
	long := strings.Repeat("x", 4000)
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "m,host=%s%04d v=1 1\n", long, i)
	}
	res.Reset()
	d.Decode([]byte(b.String()), Nanosecond, testNow, &res)
	key := len("m,host=") + len(long) + 4
	meta := len(`{"_measurement":"m","host":""}`) + len(long) + 4
	if len(res.Measurements) != 300 || len(d.made) != maxPendingBytes/(key+meta) {
		t.Fatalf("%d series of %d bytes held; want %d", len(d.made), key+meta, maxPendingBytes/(key+meta))
	}
}

// TestSeriesFieldBytes checks that the cache counts a series' field names,
// and that a series in it takes no longer list than it counted.
func TestSeriesFieldBytes(t *testing.T) {
	c := NewSeriesCache(DefaultSeriesCacheBytes)
	d := NewDecoderSharing(c)
	line := func(fields int) []byte {
		b := []byte("m,host=a ")
		for i := range fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, "field_%02d=1", i)
		}
		return append(b, " 1\n"...)
	}
	var res Result
	d.Decode(line(10), Nanosecond, testNow, &res)
	want := len("m,host=a") + len(`{"_measurement":"m","host":"a"}`) + seriesEntryBytes + 24 + 10*16 + 10*len("field_00")
	if n, bytes := c.size(); n != 1 || bytes != want {
		t.Fatalf("%d series, %d bytes; want 1, %d", n, bytes, want)
	}
	s := c.cur["m,host=a"]
	for _, c := range []struct{ fields, kept int }{{20, 10}, {3, 3}, {10, 10}} {
		res.Reset()
		d.Decode(line(c.fields), Nanosecond, testNow, &res)
		if got := len(s.fields.Load().names); len(res.Measurements[0].Fields) != c.fields || got != c.kept {
			t.Fatalf("a line of %d fields: %d decoded, the series keeps %d names; want %d", c.fields, len(res.Measurements[0].Fields), got, c.kept)
		}
	}
}

// TestSeriesCacheShared checks that decoders sharing a cache find the
// series one another made, and decode right when they run at once.
func TestSeriesCacheShared(t *testing.T) {
	c := NewSeriesCache(DefaultSeriesCacheBytes)
	a, b := NewDecoderSharing(c), NewDecoderSharing(c)
	decodeSeries(t, a, 0, 1000)
	if h := decodeSeries(t, b, 0, 1000); h != 1000 {
		t.Fatalf("%d of 1000 series made by one decoder found by the other", h)
	}
	inDecoders(c, 4, func(g int, d *Decoder) {
		for i := range 20 {
			// Each goroutine and round its own field name, so
			// that shared series change their field names.
			from, field := (g*20+i)*500%5000, fmt.Sprint("v", (g+i)%3)
			var b []byte
			for j := from; j < from+500; j++ {
				b = fmt.Appendf(b, "m,host=h%06d %s=%d 1\n", j, field, j)
			}
			var res Result
			d.Decode(b, Nanosecond, testNow, &res)
			for j, m := range res.Measurements {
				if m.Meta != model.MetaKey(fmt.Sprintf(`{"_measurement":"m","host":"h%06d"}`, from+j)) ||
					len(m.Fields) != 1 || m.Fields[0].Name != field || m.Fields[0].Value != model.Float(float64(from+j)) {
					t.Errorf("line %d: %+v", from+j, m)
					return
				}
			}
		}
	})
	if n, _ := c.size(); n != 5000 {
		t.Fatalf("%d series cached; want 5000", n)
	}
}

func TestReset(t *testing.T) {
	var res Result
	d := NewDecoder()
	d.Decode([]byte("m v=1\nm v=\n"), Nanosecond, testNow, &res)
	res.Reset()
	if len(res.Measurements) != 0 || res.Lines != 0 || res.Dropped != 0 || res.First != nil || res.LineOf(0) != 0 || cap(res.Measurements) == 0 {
		t.Fatalf("reset: %+v", res)
	}
	// A huge body does not pin its buffers.
	body := strings.Repeat("m v=1\n", retainCap+1)
	d.Decode([]byte(body), Nanosecond, testNow, &res)
	if len(res.Measurements) != retainCap+1 {
		t.Fatalf("%d measurements", len(res.Measurements))
	}
	res.Reset()
	if cap(res.Measurements) > retainCap || cap(res.lines) > retainCap {
		t.Fatalf("capacity kept: %d measurements, %d lines", cap(res.Measurements), cap(res.lines))
	}
	// Decoding into a reset Result starts afresh.
	d.Decode([]byte("m v=2 7"), Nanosecond, testNow, &res)
	if len(res.Measurements) != 1 || res.Measurements[0].Time != 7 || res.LineOf(0) != 1 {
		t.Fatalf("after reset: %+v", res)
	}
}

func TestDecodeAppends(t *testing.T) {
	// Fields of earlier measurements survive the growth of the backing
	// store.
	d := NewDecoder()
	var res Result
	var b strings.Builder
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&b, "m,i=%d a=%di,b=\"%d\"\n", i%7, i, i)
	}
	d.Decode([]byte(b.String()), Nanosecond, testNow, &res)
	for i, m := range res.Measurements {
		if len(m.Fields) != 2 || m.Fields[0].Value.I != int64(i) || m.Fields[1].Value.S != fmt.Sprint(i) {
			t.Fatalf("measurement %d: %+v", i, m)
		}
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
	if allocs > 0 {
		t.Fatalf("%.0f allocations for 1000 lines of a known series", allocs)
	}
}

func TestParseNumbersMatchStrconv(t *testing.T) {
	floats := []string{
		"0", "-0", "0.0", "-0.0", "00", "000.5", "0.001", "1", "1.", ".5", "-.5", "5.0e0", "1.50", "100", "1e5", "1E-5", "1e+5",
		"1e22", "1e23", "1e-22", "1e-23", "9007199254740992", "9007199254740993", "9007199254740991.5", "123456789012345678",
		"1234567890123456789", "12345678901234567890", "0.1", "0.2", "0.3", "2.4752475247524752", "92.07920792079207",
		"5.346534653465347", "0.09900990099009901", "1.7976931348623157e308", "4.9e-324", "1e-400", "1e400", "0e9999",
		"0e99999", "1e0005", "1e00005", "", "-", ".", "-.", "e1", ".e1", "1e", "1e+", "1e-", "+1", "--1", "1.2.3", "1e1.5",
		"0x1p-2", "1_0", "inf", "NaN", "1i", " 1", "1 ", "0.00000000000000000000000001", "100000000000000000000000",
	}
	for _, s := range floats {
		checkParseFloat(t, s)
	}
	for _, s := range []string{"0", "-0", "1", "-1", "007", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"-9223372036854775809", "18446744073709551615", "18446744073709551616", "99999999999999999999", "", "-", "+1", "1_0", "0x10", " 1"} {
		x, err := parseInt([]byte(s))
		y, yerr := strconv.ParseInt(s, 10, 64)
		if x != y || (err == nil) != (yerr == nil) {
			t.Errorf("parseInt(%q) = %d, %v; strconv: %d, %v", s, x, err, y, yerr)
		}
		u, err := parseUint([]byte(s))
		v, verr := strconv.ParseUint(s, 10, 64)
		if u != v || (err == nil) != (verr == nil) {
			t.Errorf("parseUint(%q) = %d, %v; strconv: %d, %v", s, u, err, v, verr)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		var b strings.Builder
		if rng.IntN(4) == 0 {
			b.WriteByte('-')
		}
		b.WriteString(strconv.FormatUint(rng.Uint64()>>rng.IntN(64), 10))
		if rng.IntN(2) == 0 {
			s := b.String()
			p := rng.IntN(len(s) + 1)
			b.Reset()
			b.WriteString(s[:p] + "." + s[p:])
		}
		if rng.IntN(3) == 0 {
			fmt.Fprintf(&b, "e%d", rng.IntN(60)-30)
		}
		checkParseFloat(t, b.String())
	}
}

func checkParseFloat(t *testing.T, s string) {
	t.Helper()
	x, err := parseFloat([]byte(s))
	y, yerr := strconv.ParseFloat(s, 64)
	if math.Float64bits(x) != math.Float64bits(y) || (err == nil) != (yerr == nil) {
		t.Errorf("parseFloat(%q) = %v, %v; strconv: %v, %v", s, x, err, y, yerr)
	}
}

func FuzzParseFloat(f *testing.F) {
	for _, s := range []string{"0", "-0.5", "1e22", "9007199254740993", "1.7976931348623157e308", "1e", ".5e-3", "0x1p-2"} {
		f.Add(s)
	}
	f.Fuzz(checkParseFloat)
}

// TestSeriesSlots: the measurements of a series the cache keeps carry its
// slot for the engine (model.Measurement.Slot), the same one each time;
// a series too large to keep carries none.
func TestSeriesSlots(t *testing.T) {
	d := NewDecoder()
	slots := func(body string) []*model.SeriesSlot {
		t.Helper()
		var res Result
		d.Decode([]byte(body), Nanosecond, testNow, &res)
		if res.First != nil {
			t.Fatal(res.First)
		}
		var out []*model.SeriesSlot
		for _, m := range res.Measurements {
			out = append(out, m.Slot)
		}
		return out
	}
	body := "cpu,host=a v=1 1\ncpu,host=b v=2 1\ncpu,host=a v=3 2\n"
	first, again := slots(body), slots(body)
	for i, s := range first {
		if s == nil || s != again[i] {
			t.Fatalf("line %d: slots %p then %p; want one, the same", i+1, s, again[i])
		}
	}
	if first[0] != first[2] || first[0] == first[1] {
		t.Fatalf("slots %p; want the first and last lines' the same, the second's another", first)
	}
	big := "cpu,host=" + strings.Repeat("x", maxSeriesEntry) + " v=1 1\n"
	if s := slots(big); s[0] != nil {
		t.Fatal("a series too large to cache carries a slot")
	}
}

// TestSeriesCacheOrder: series found by their place in the cache's order
// (the series after the one of the line before) are the lines' own
// whatever order later bodies send them in: the same, reversed, shuffled,
// shifted with new series, with repeats, across turnovers of a small
// cache's generations, and by decoders sharing the cache at once. Keys
// are of one length and differ in one byte in the middle.
func TestSeriesCacheOrder(t *testing.T) {
	body := func(ids []int) []byte {
		var b []byte
		for _, i := range ids {
			b = fmt.Appendf(b, "m,host=h%04d,z=same v=%d 1\n", i, i)
		}
		return b
	}
	check := func(d *Decoder, ids []int) error {
		var res Result
		d.Decode(body(ids), Nanosecond, testNow, &res)
		if len(res.Measurements) != len(ids) {
			return fmt.Errorf("%d measurements of %d lines: %v", len(res.Measurements), len(ids), res.First)
		}
		for j, m := range res.Measurements {
			if want := model.MetaKey(fmt.Sprintf(`{"_measurement":"m","host":"h%04d","z":"same"}`, ids[j])); m.Meta != want {
				return fmt.Errorf("line %d (h%04d): meta %v", j, ids[j], m.Meta)
			}
		}
		return nil
	}
	c := cacheOf(t, 150) // generations of about 150 series
	d := NewDecoderSharing(c)
	for round, sent := range sendorder.Rounds(5, 200, 60) {
		if err := check(d, sent); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if d.seriesHits == 0 {
		t.Fatal("no line's series was found in the cache")
	}
	inDecoders(c, 4, func(g int, d *Decoder) {
		rng := rand.New(rand.NewPCG(uint64(g), 9))
		ids := make([]int, 150)
		for i := range ids {
			ids[i] = g*100 + i
		}
		for range 30 {
			if rng.IntN(2) == 0 {
				rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			}
			if err := check(d, ids); err != nil {
				t.Error(err)
				return
			}
		}
	})
}

// inDecoders runs f in n goroutines at once, each with its own decoder
// sharing c, and waits for them.
func inDecoders(c *SeriesCache, n int, f func(g int, d *Decoder)) {
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(g, NewDecoderSharing(c))
		}()
	}
	wg.Wait()
}
