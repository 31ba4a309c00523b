package lineproto

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

var fuzzSeeds = []string{
	tsbsLine,
	"cpu,host=a,region=eu usage_user=1.5,usage_idle=90i,ok=true,note=\"x\" 1714564800000000000",
	"m v=1\nm v=2 2\n\n# c\nm,t=1 v=3u",
	"m v=1.5e3,w=-.5,x=1e400,y=0x10,z=1_0,a=0x1p-2,b=0x_1p0,c=1e,d=.e1,e=-",
	"m v=-,w=--1i,x=1i2,y=+1,z=. 5",
	"m v=inf,w=-Inf,x=NaN,y=infinity,z=1e-400",
	"m v=tru,w=T,x=false,y=FaLsE,z=TRUE 1",
	"m v=00012i,w=-0i,x=+1i,y=1_000i,z=0x10i",
	"m v=18446744073709551615u,w=18446744073709551616u,x=-0u,y=01u",
	"m\\ x,a\\,b=c\\=d v=\"q\\\"\\\\\\n\" -1",
	"m,t=\"a\" v=1\nm v=\"multi\nline\" 3\nm v=1",
	"m s=\"a\n\nb\n# not a comment\n\" 1\nm v=2 2",
	"m s=\"never closed\nm v=1 1\nm v=2 2",
	"m s=\"x\xff\ny\" 1\nm v=1 2",
	"m v=1 1 \nm v=1  1\n m v=1\nm  v=1\nm v=1 1x\nm v=1 -\n",
	"m,=a v=1\nm,a= v=1\nm,a v=1\nm, v=1\n,m v=1\nm v\nm =1\nm v=",
	"m v=1,v=2,v=\"s\" 9\nm,t=1,t=2 v=1",
	"m,_measurement=x v=1\n_measurement v=1",
	"m v=9223372036854775808i,w=9223372036854775808u,x=18446744073709551616u",
	"m v=1 9223372036854775807\nm v=1 -9223372036854775808\nm v=1 9223372036854775808",
	"m v=1 9223372036\nm v=1 -9223372036\nm v=1 2562047\nm v=1 153722867",
	"#\r\n  \r\n\r\nm v=1\r\nm v=2\r",
	"m\x00 v=1\nm v=\"\xff\"\nm,é=ü v=1\n#\x01\n \r x",
	"m v=1 1\n\n\nbad line here\nm v=\"unterminated\n",
	"m\"q,t\"=v\" f\"=1,g=\"\" 1",
	"m,t=a=b v=1\nm v==1\nm v=1,\nm v=1, 1\nm,t=a,v=1",
	"m\t v=1\nm v=1\t1\nm\x7f v=1\nm v=\"\x7f\"",
	"m,t=a\\ v=1\nm,t=a\\\\ v=1\nm v=\"\\\\\"\nm v=\"\\a\"\nm\\ v=1",
}

var fuzzPrecisions = []string{"ns", "us", "ms", "s", "m", "h"}

// FuzzDecode checks the fast path against the reference parser: for every
// body, Decode and a decode by the reference parser alone give the same
// measurements (series, fields with their types, times), the same counts
// and the same first refused line.
func FuzzDecode(f *testing.F) {
	seeds := slices.Clone(fuzzSeeds)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		seeds = append(seeds, genBody(rng))
	}
	for i, s := range seeds {
		f.Add(s, uint8(i))
	}
	f.Fuzz(func(t *testing.T, body string, p uint8) {
		checkDecode(t, body, fuzzPrecisions[int(p)%len(fuzzPrecisions)])
	})
}

// TestDecodeMatchesReference checks the fast path against the reference
// parser on bodies made of the tokens where the two could differ, which
// random bytes seldom hit.
func TestDecodeMatchesReference(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := range n {
		checkDecode(t, genBody(rng), fuzzPrecisions[i%len(fuzzPrecisions)])
		if t.Failed() {
			return
		}
	}
}

// checkDecode decodes body by Decode and by the reference parser alone
// and fails t where they differ.
func checkDecode(t *testing.T, body, precision string) {
	t.Helper()
	prec, err := ParsePrecision(precision, false)
	if err != nil {
		t.Fatal(err)
	}
	fast, ref := NewDecoder(), NewDecoder()
	ref.referenceOnly = true
	var got, want Result
	in := []byte(body)
	fast.Decode(in, prec, testNow, &got)
	if string(in) != body {
		t.Fatalf("body %q changed to %q", body, in)
	}
	ref.Decode(in, prec, testNow, &want)
	if got.Lines != want.Lines || got.Dropped != want.Dropped || len(got.Measurements) != len(want.Measurements) {
		t.Fatalf("body %q, precision %s:\nfast: lines %d dropped %d measurements %d first %v\nref:  lines %d dropped %d measurements %d first %v",
			body, precision, got.Lines, got.Dropped, len(got.Measurements), got.First, want.Lines, want.Dropped, len(want.Measurements), want.First)
	}
	if (got.First == nil) != (want.First == nil) || (got.First != nil && (got.First.Line != want.First.Line || got.First.Text != want.First.Text)) {
		t.Fatalf("body %q: first refused %+v, reference %+v", body, got.First, want.First)
	}
	lines := strings.Split(body, "\n")
	for i := range got.Measurements {
		g, w := got.Measurements[i], want.Measurements[i]
		if !sameMeasurement(g, w) {
			t.Fatalf("body %q, precision %s: measurement %d:\nfast %+v\nref  %+v", body, precision, i, g, w)
		}
		// The reference alone cannot place an entry all of whose parts
		// it unescaped; Decode hands it the line alone and can.
		if g, w := got.LineOf(i), want.LineOf(i); g != w && !strings.Contains(lines[g-1], `\`) {
			t.Fatalf("body %q: measurement %d on line %d, reference %d", body, i, g, w)
		}
		if l := got.LineOf(i); l < 1 || l > len(lines) {
			t.Fatalf("body %q: measurement %d on line %d", body, i, l)
		}
		if err := validMeasurement(g); err != nil {
			t.Fatalf("body %q: measurement %d: %v", body, i, err)
		}
	}
	// Decoded a few bytes at a time, the body gives the same entries on
	// the same lines, the same counts and the same first refusal.
	for _, size := range []int{1, 7, 64} {
		var chunked Result
		d := NewDecoder()
		for pos, line, n := 0, 0, 0; pos < len(in); n++ {
			if n > len(in) {
				t.Fatalf("body %q, chunks of %d bytes: no progress at offset %d", body, size, pos)
			}
			pos, line = d.DecodeChunk(in, pos, line, size, prec, testNow, &chunked)
		}
		if chunked.Lines != got.Lines || chunked.Dropped != got.Dropped || len(chunked.Measurements) != len(got.Measurements) ||
			(chunked.First == nil) != (got.First == nil) || (got.First != nil && (chunked.First.Line != got.First.Line || chunked.First.Text != got.First.Text)) {
			t.Fatalf("body %q, chunks of %d bytes: lines %d dropped %d measurements %d first %v; whole: lines %d dropped %d measurements %d first %v",
				body, size, chunked.Lines, chunked.Dropped, len(chunked.Measurements), chunked.First, got.Lines, got.Dropped, len(got.Measurements), got.First)
		}
		for i := range got.Measurements {
			if !sameMeasurement(chunked.Measurements[i], got.Measurements[i]) || chunked.LineOf(i) != got.LineOf(i) {
				t.Fatalf("body %q, chunks of %d bytes: measurement %d on line %d %+v; whole: line %d %+v",
					body, size, i, chunked.LineOf(i), chunked.Measurements[i], got.LineOf(i), got.Measurements[i])
			}
		}
	}
	// A second decode by the same decoder, its caches warm, agrees.
	var again Result
	fast.Decode(in, prec, testNow, &again)
	if len(again.Measurements) != len(got.Measurements) || again.Dropped != got.Dropped {
		t.Fatalf("body %q: second decode differs", body)
	}
	for i := range again.Measurements {
		if !sameMeasurement(again.Measurements[i], got.Measurements[i]) {
			t.Fatalf("body %q: second decode, measurement %d:\n%+v\n%+v", body, i, again.Measurements[i], got.Measurements[i])
		}
	}
}

// Tokens of generated bodies: common ones, and the odd ones where a fast
// path is likely to go wrong.
var (
	genNames = []string{"m", "cpu", "m", "cpu", "m\\ x", "m\\,x", "m\\=x", "m=x", "m\"q", "#m", "é", "m\\", "m\\\\", "_measurement", "m\x7f", "m\x00"}
	genKeys  = []string{"t", "host", "t", "host", "t\\ k", "t\\,k", "t\\=k", "_measurement", "t\"", "", "é", "k\\", "#", "t\t"}
	genTagVs = []string{"a", "eu-west-1", "a", "1", "a\\ b", "a\\,b", "a\\=b", "a=b", "\"v\"", "", "é", "a\\", "\xff", "#"}
	genFKeys = []string{"v", "f", "v", "usage_idle", "v\\ x", "v\\,x", "v\\=x", "\"f", "é", "", "_measurement", "v\\", "f=", "#"}
	genVals  = []string{
		"1", "-1", "1.5", "0", "58i", "2u", "t", "false", "\"s\"",
		"+1", ".5", "5.", "-.5", "-.", ".", "-", "1e3", "1E-3", "1e+3", "1e", "e1", "1e400", "1e-400", "-0", "00.1",
		"0x1p-2", "0x10", "0X1P4", "1_0", "0x_1p0", "inf", "-Inf", "+Inf", "NaN", "nan", "infinity", "Infinity",
		"1i", "-1i", "+1i", "-0i", "007i", "1.5i", "1e3i", "0x10i", "1_0i", "i", "-i", "1i2", "1ii",
		"9223372036854775807i", "9223372036854775808i", "-9223372036854775808i", "-9223372036854775809i", "99999999999999999999i",
		"1u", "-1u", "+1u", "0u", "u", "18446744073709551615u", "18446744073709551616u", "9223372036854775807u", "9223372036854775808u",
		"t", "T", "true", "True", "TRUE", "tRUE", "tru", "f", "F", "false", "False", "FALSE", "fAlse", "fals", "truee",
		"\"\"", "\"a b,c=d\"", "\"say \\\"hi\\\"\"", "\"x\\\\\"", "\"\\n\\t\\r\"", "\"\\a\"", "\"multi\nline\"", "\"open",
		"\"é\"", "\"\xff\"", "\"a\rb\"", "\"\r\n\"", "\"#\"", "", "\"a\"b", "\"a\"\"",
	}
	genTimes = []string{
		"", "", "1", "-1", "0", "-0", "1714564800000000000", "1451606400000000000", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "9223372036", "-9223372036", "9223372037", "2562047", "2562048", "153722867",
		"+1", "1.5", "--1", "-", "1x", "1-2", "00001",
	}
	genSpaces = []string{" ", " ", " ", " ", "  ", "\t", ""}
	genEnds   = []string{"\n", "\n", "\n", "\r\n", "\r", " \n", "  \n", "\n\n", "\n# comment\n", "\n  \n", "\n#\x01\n", "\n \r\n", " \r\n", "\r \n", "\r\r\n", ""}
)

// genBody returns a body of one to four entries made of generated tokens:
// mostly the common ones, so that entries get to the later sections.
func genBody(rng *rand.Rand) string {
	pick := func(toks []string) string {
		if rng.IntN(3) > 0 {
			return toks[rng.IntN(min(4, len(toks)))]
		}
		return toks[rng.IntN(len(toks))]
	}
	var b strings.Builder
	for range 1 + rng.IntN(4) {
		b.WriteString(pick(genNames))
		for range rng.IntN(3) {
			b.WriteString(",")
			b.WriteString(pick(genKeys))
			b.WriteString("=")
			b.WriteString(pick(genTagVs))
		}
		b.WriteString(pick(genSpaces))
		for i := range 1 + rng.IntN(3) {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(pick(genFKeys))
			b.WriteString("=")
			b.WriteString(pick(genVals))
		}
		if ts := pick(genTimes); ts != "" {
			b.WriteString(pick(genSpaces))
			b.WriteString(ts)
		}
		b.WriteString(pick(genEnds))
	}
	return b.String()
}

func sameMeasurement(a, b model.Measurement) bool {
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
// holding the measurement, unique field names, values of known kinds.
func validMeasurement(m model.Measurement) error {
	k, ok := m.Meta.(model.MetaKey)
	if !ok {
		return errString("meta is not a MetaKey")
	}
	v, err := model.DecodeMeta(string(k))
	if err != nil {
		return err
	}
	if c, err := model.CanonicalMeta(v); err != nil || c != string(k) {
		return errString("meta not canonical")
	}
	tags, ok := v.(map[string]any)
	if !ok {
		return errString("meta is not a document")
	}
	if name, ok := tags["_measurement"].(string); !ok || name == "" {
		return errString("meta without _measurement")
	}
	for k, v := range tags {
		if s, ok := v.(string); !ok || s == "" || k == "" {
			return errString("bad tag " + k)
		}
	}
	if len(m.Fields) == 0 {
		return errString("no fields")
	}
	seen := map[string]bool{}
	for _, f := range m.Fields {
		if seen[f.Name] || f.Name == "" {
			return errString("duplicate or empty field name " + strconv.Quote(f.Name))
		}
		seen[f.Name] = true
		switch f.Value.Kind {
		case model.KindFloat, model.KindInt, model.KindString, model.KindBool:
		default:
			return errString("field " + f.Name + " of unknown kind")
		}
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

// FuzzCanonicalTags checks that the canonical key the decoder builds from
// a tag set is CanonicalMeta's of the same document.
func FuzzCanonicalTags(f *testing.F) {
	f.Add("cpu", "host\x00a\x00region\x00b\x00host\x00c")
	f.Add("m", "z\x00\"q\\\x00a\x00<&>\x00\xff\x00é")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, measurement, pairs string) {
		parts := strings.Split(pairs, "\x00")
		var tags []tag
		doc := map[string]any{"_measurement": measurement}
		for i := 0; i+1 < len(parts); i += 2 {
			if parts[i] == "_measurement" {
				continue
			}
			tags = append(tags, tag{k: []byte(parts[i]), v: []byte(parts[i+1])})
			doc[parts[i]] = parts[i+1]
		}
		want, err := model.CanonicalMeta(doc)
		if err != nil {
			return
		}
		var scratch []tag
		if got := canonicalTags(nil, &scratch, []byte(measurement), tags); string(got) != want {
			t.Fatalf("canonicalTags = %s, want %s", got, want)
		}
	})
}
