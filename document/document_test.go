package document

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// randValue makes a random value, biased to collide: small numbers that
// are equal as int and double, strings with NUL bytes and shared prefixes,
// dates in and around the epoch.
// randDecimals are decimals beside the doubles and integers randValue
// makes: equal to some, between others, and the special values.
var randDecimals = []string{"0", "-0", "0.0", "1.5", "1.50", "-3", "0.1", "0.10", "-0.1", "2.25", "3E+2",
	"9007199254740993", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
	"1E+400", "-1E+400", "NaN", "Infinity", "-Infinity", "1E-400"}

func randValue(r *rand.Rand, depth int) any {
	k := r.IntN(14)
	if depth > 2 && k >= 8 && k <= 10 {
		k = r.IntN(8)
	}
	switch k {
	case 11:
		return int32(r.IntN(7) - 3)
	case 12:
		d, err := partialfilter.ParseDecimal128(randDecimals[r.IntN(len(randDecimals))])
		if err != nil {
			panic(err)
		}
		return d
	case 13:
		return partialfilter.Binary{Subtype: byte(r.IntN(2)) * 4, Data: []byte("\x00\x01ab")[:r.IntN(5)]}
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return int64(r.IntN(7) - 3)
	case 3:
		switch r.IntN(6) {
		case 0:
			return math.NaN()
		case 1:
			return math.Inf(1 - 2*r.IntN(2))
		case 2:
			return math.Copysign(0, -1)
		case 3:
			return float64(int64(1)<<53) + float64(r.IntN(5))
		}
		return float64(r.IntN(13)-6) / 2
	case 4:
		switch r.IntN(4) {
		case 0:
			return int64(1)<<53 + int64(r.IntN(5)) - 2
		case 1:
			return math.MaxInt64 - int64(r.IntN(3))
		case 2:
			return math.MinInt64 + int64(r.IntN(3))
		}
		return r.Int64()
	case 5:
		return []string{"", "a", "a\x00", "a\x00b", "ab", "b", "\xff"}[r.IntN(7)]
	case 6:
		return time.Unix(int64(r.IntN(5)-2), int64(r.IntN(3))*5e8).UTC()
	case 7:
		var id partialfilter.ObjectID
		id[11] = byte(r.IntN(3))
		return id
	case 8:
		n := r.IntN(3)
		a := make([]any, n)
		for i := range a {
			a[i] = randValue(r, depth+1)
		}
		return a
	default:
		m := map[string]any{}
		for i := r.IntN(3); i > 0; i-- {
			m[[]string{"a", "b", "a\x00", ""}[r.IntN(4)]] = randValue(r, depth+1)
		}
		return m
	}
}

func sign(c int) int {
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

// Key forms order values exactly as partialfilter.Compare does, ascending
// and descending, and a pair of concatenated keys orders as the pair.
func TestKeyOrderMatchesCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		a, b := randValue(r, 0), randValue(r, 0)
		ka, err := AppendKey(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := AppendKey(nil, b)
		want := sign(partialfilter.Compare(a, b))
		if got := sign(bytes.Compare(ka, kb)); got != want {
			t.Fatalf("%#v vs %#v: keys compare %d, values %d\n%x\n%x", a, b, got, want, ka, kb)
		}
		da, _ := AppendKeyDesc(nil, a)
		db, _ := AppendKeyDesc(nil, b)
		if got := sign(bytes.Compare(da, db)); got != -want {
			t.Fatalf("%#v vs %#v descending: keys compare %d, values %d", a, b, got, want)
		}
		// Concatenation: (a, b) vs (b, a) orders by the first, then the second.
		ab := append(append([]byte(nil), ka...), kb...)
		ba := append(append([]byte(nil), kb...), ka...)
		wantPair := want
		if wantPair == 0 {
			wantPair = sign(partialfilter.Compare(b, a))
		}
		if got := sign(bytes.Compare(ab, ba)); got != wantPair {
			t.Fatalf("pair (%#v, %#v): %d, want %d", a, b, got, wantPair)
		}
	}
}

func equalValues(a, b any) bool {
	if fa, ok := a.(float64); ok {
		fb, ok := b.(float64)
		return ok && (fa == fb && math.Signbit(fa) == math.Signbit(fb) || fa != fa && fb != fb)
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalValues(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	}
	return reflect.DeepEqual(a, b)
}

func TestCodecAndJSONRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 50000; i++ {
		doc := map[string]any{"_id": randValue(r, 1), "x": randValue(r, 0), "y": randValue(r, 0)}
		if _, isArr := doc["_id"].([]any); isArr {
			delete(doc, "_id")
		}
		b, err := Encode(nil, doc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(b)
		if err != nil || !equalValues(doc, back) {
			t.Fatalf("codec: %#v -> %#v, %v", doc, back, err)
		}
		again, _ := Encode(nil, back)
		if !bytes.Equal(b, again) {
			t.Fatalf("encoding is not canonical for %#v", doc)
		}
		js := AppendJSON(nil, doc)
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.UseNumber()
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if unrepresentable(doc) {
			continue // empty names and NUL bytes in names are refused on input; JSON has no invalid UTF-8
		}
		fromJS, err := FromJSON(raw)
		if err != nil || !equalValues(doc, fromJS) {
			t.Fatalf("JSON: %#v -> %s -> %#v, %v", doc, js, fromJS, err)
		}
	}
}

func unrepresentable(v any) bool {
	switch t := v.(type) {
	case string:
		return !utf8.ValidString(t)
	case map[string]any:
		for k, e := range t {
			if k == "" || strings.IndexByte(k, 0) >= 0 || !utf8.ValidString(k) || unrepresentable(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if unrepresentable(e) {
				return true
			}
		}
	}
	return false
}

func TestJSONOutput(t *testing.T) {
	id, _ := partialfilter.ParseObjectID("65a1b2c3d4e5f60718293a4b")
	dec, _ := partialfilter.ParseDecimal128("1.10")
	doc := map[string]any{"z": 1.0, "_id": id, "a": int64(2), "d": time.Date(2024, 5, 1, 12, 0, 0, 123e6, time.UTC),
		"s": "<x>", "n": nil, "arr": []any{math.NaN(), false}, "sub": map[string]any{"b": 2.5},
		"i32": int32(-7), "l32": int64(5_000_000_000), "l53": int64(1<<53 + 1), "dec": dec,
		"bin": partialfilter.Binary{Subtype: 4, Data: []byte{1, 2, 3}}}
	want := `{"_id":{"$oid":"65a1b2c3d4e5f60718293a4b"},"a":{"$numberLong":"2"},"arr":[{"$numberDouble":"NaN"},false],` +
		`"bin":{"$binary":{"base64":"AQID","subType":"04"}},"d":{"$date":"2024-05-01T12:00:00.123Z"},"dec":{"$numberDecimal":"1.10"},` +
		`"i32":-7,"l32":5000000000,"l53":{"$numberLong":"9007199254740993"},"n":null,"s":"\u003cx\u003e","sub":{"b":2.5},"z":1.0}`
	got := AppendJSON(nil, doc)
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// It reads back to the same values and types.
	var raw map[string]any
	dj := json.NewDecoder(bytes.NewReader(got))
	dj.UseNumber()
	if err := dj.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	back, err := FromJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	back["arr"].([]any)[0], doc["arr"].([]any)[0] = nil, nil // NaN is not equal to itself
	if !reflect.DeepEqual(back, doc) {
		t.Fatalf("read back\n%#v\nwant\n%#v", back, doc)
	}
}

func TestFromJSONRefusals(t *testing.T) {
	for _, in := range []string{
		`{"$set": 1}`, `{"a": {"$bad": 1, "x": 2}}`, `{"": 1}`, `{"_id": [1, 2]}`,
		`{"a": {"$regularExpression": {"pattern": "x", "options": ""}}}`,
		`{"d": {"$date": "yesterday"}}`, `{"o": {"$oid": "12"}}`, `{"a": {"b\u0000": 1}}`,
		`{"n": {"$numberDecimal": "1.2.3"}}`, `{"b": {"$binary": {"base64": "!", "subType": "00"}}}`,
		`{"i": {"$numberInt": "4294967296"}}`,
	} {
		var raw map[string]any
		if err := json.Unmarshal([]byte(in), &raw); err != nil {
			t.Fatal(err)
		}
		if _, err := FromJSON(raw); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
}

func TestNewObjectIDIncreases(t *testing.T) {
	now := time.Now()
	prev := NewObjectID(now)
	for i := 0; i < 1000; i++ {
		id := NewObjectID(now.Add(time.Duration(i) * time.Second))
		if bytes.Compare(id[:4], prev[:4]) < 0 || id == prev {
			t.Fatalf("%x after %x", id, prev)
		}
		prev = id
	}
}

func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 20; i++ {
		b, _ := Encode(nil, map[string]any{"a": randValue(r, 0), "b": randValue(r, 0)})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(nil, doc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(again)
		if err != nil || !equalValues(doc, back) {
			t.Fatalf("re-encoded document differs: %v", err)
		}
		if _, err := AppendKey(nil, doc); err != nil {
			t.Fatal(err)
		}
		_ = AppendJSON(nil, doc)
	})
}

// Strings are quoted exactly as encoding/json quotes them.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\x00\x1f\n\r\t", "<&>", "\xff\xfe", "\u2028\u2029", "é日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// Update and projection parsers take any JSON: never a panic, and an
// update that applies yields a document that encodes.
func FuzzUpdateAndProjection(f *testing.F) {
	for _, s := range []string{
		`{"$set": {"a.b": 1, "c": {"$date": "2024-05-01T00:00:00Z"}}, "$inc": {"n": 2}, "$unset": {"x": ""}, "$currentDate": {"t": {"$type": "date"}}}`,
		`{"$set": {"a": 1}, "$unset": {"a.b": 1}}`, `{"$inc": {"n": "x"}}`, `{"x": 1}`, `{"a": 1, "b.c": 0}`, `{"_id": 0}`,
		`{"$rename": {"a.b": "z.y", "n": "m"}}`, `{"$rename": {"n": "a.b.c"}}`, `{"$rename": {"a": "a.b"}}`,
	} {
		f.Add([]byte(s), []byte(`{"_id": 1, "a": {"b": [1, {"c": 2}]}, "n": 9223372036854775807}`))
	}
	f.Fuzz(func(t *testing.T, spec, docText []byte) {
		var raw, rawDoc map[string]any
		dec := json.NewDecoder(bytes.NewReader(spec))
		dec.UseNumber()
		if dec.Decode(&raw) != nil {
			return
		}
		if p, err := ParseProjection(raw); err == nil {
			dec = json.NewDecoder(bytes.NewReader(docText))
			dec.UseNumber()
			if dec.Decode(&rawDoc) == nil {
				if doc, err := FromJSON(rawDoc); err == nil {
					if _, err := Encode(nil, p.Apply(doc)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		u, err := ParseUpdate(raw)
		if err != nil {
			return
		}
		dec = json.NewDecoder(bytes.NewReader(docText))
		dec.UseNumber()
		if dec.Decode(&rawDoc) != nil {
			return
		}
		doc, err := FromJSON(rawDoc)
		if err != nil {
			return
		}
		// The update's own text (what a replica set's log carries) reads
		// back into an update that changes the document alike.
		text := u.AppendJSON(nil)
		var again map[string]any
		dec = json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&again); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		u2, err := ParseUpdate(again)
		if err != nil {
			t.Fatalf("%s does not parse back: %v", text, err)
		}
		copyDoc, _ := FromJSON(rawDoc)
		_, err2 := u2.Apply(copyDoc, time.Unix(0, 0))
		before, _ := Encode(nil, doc)
		changed, err := u.Apply(doc, time.Unix(0, 0))
		if a, b := encoded(doc), encoded(copyDoc); (err == nil) != (err2 == nil) || !bytes.Equal(a, b) {
			t.Fatalf("%s: applied as %s, as its text %s: %v, %v", spec, a, b, err, err2)
		}
		after, encErr := Encode(nil, doc)
		if encErr != nil {
			t.Fatal(encErr)
		}
		if err != nil && !bytes.Equal(before, after) {
			t.Fatalf("a refused update changed the document")
		}
		if err == nil && !changed && !bytes.Equal(before, after) {
			t.Fatalf("an update reported no change but changed the document")
		}
	})
}

// TestRename: $rename moves a value to its target (made, with its parents,
// when missing; replaced when there), does nothing for a missing source,
// refuses a target under a non-document without changing anything, and
// refuses a target that is not a string, equal to the source, on its
// path, or in conflict with another operation.
func TestRename(t *testing.T) {
	apply := func(doc, update string) (string, bool, error) {
		t.Helper()
		u, err := ParseUpdate(jsonMap(t, update))
		if err != nil {
			return "", false, err
		}
		d, err := FromJSON(jsonMap(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		changed, err := u.Apply(d, time.Unix(0, 0))
		return string(AppendJSON(nil, d)), changed, err
	}
	for _, c := range []struct{ doc, update, want string }{
		{`{"a": {"b": 1, "c": 2}}`, `{"$rename": {"a.b": "a.d"}}`, `{"a":{"c":2,"d":1}}`},
		{`{"a": {"b": null}}`, `{"$rename": {"a.b": "x.y"}}`, `{"a":{},"x":{"y":null}}`},
		{`{"a": 1, "b": 2}`, `{"$rename": {"a": "b"}}`, `{"b":1}`},
		{`{"a": 1}`, `{"$rename": {"q": "r"}, "$set": {"s": 1}}`, `{"a":1,"s":1}`},
	} {
		got, changed, err := apply(c.doc, c.update)
		if err != nil || got != c.want || !changed {
			t.Errorf("%s on %s: %s (changed %v), %v; want %s", c.update, c.doc, got, changed, err, c.want)
		}
	}
	if got, changed, err := apply(`{"a": 1}`, `{"$rename": {"q": "r"}}`); err != nil || changed || got != `{"a":1}` {
		t.Errorf("rename of a missing field: %s, %v, %v", got, changed, err)
	}
	if _, _, err := apply(`{"a": 1, "b": 5}`, `{"$rename": {"a": "b.c"}}`); mongoerr.CodeOf(err) != mongoerr.BadValue {
		t.Errorf("rename under a number: %v, want BadValue", err)
	}
	for _, c := range []struct {
		update string
		code   mongoerr.Code
	}{
		{`{"$rename": {"a": 1}}`, mongoerr.BadValue},
		{`{"$rename": {"a": "a"}}`, mongoerr.BadValue},
		{`{"$rename": {"a": "a.b"}}`, mongoerr.BadValue},
		{`{"$rename": {"a.b": "a"}}`, mongoerr.BadValue},
		{`{"$rename": {"a": "_id"}}`, mongoerr.ImmutableField},
		{`{"$rename": {"a": "b"}, "$set": {"b.c": 1}}`, mongoerr.ConflictingUpdateOperators},
	} {
		if _, err := ParseUpdate(jsonMap(t, c.update)); mongoerr.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want code %d", c.update, err, c.code)
		}
	}
	u, err := ParseUpdate(jsonMap(t, `{"$rename": {"a.b": "c"}, "$set": {"x": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(u.Paths()); got != "[x a.b c]" {
		t.Errorf("paths %s, want [x a.b c]", got)
	}
}

// An update may not nest a document deeper than MaxDepth, by its path or
// by its path and value together: it is refused with BadValue, and what is
// accepted encodes.
func TestUpdateDepth(t *testing.T) {
	path := func(n int) string { return strings.TrimSuffix(strings.Repeat("a.", n), ".") }
	nested := func(n int) any {
		var v any = int64(1)
		for range n {
			v = map[string]any{"x": v}
		}
		return v
	}
	for _, c := range []struct {
		op    string
		path  int
		value int // levels of sub-documents in the $set value
		ok    bool
	}{
		{"$set", MaxDepth, 0, true},
		{"$set", MaxDepth + 1, 0, false},
		{"$set", 50, 50, true},
		{"$set", 50, 51, false},
		{"$inc", MaxDepth + 1, 0, false},
		{"$currentDate", MaxDepth + 1, 0, false},
		{"$unset", MaxDepth + 1, 0, false},
	} {
		var arg any = nested(c.value)
		switch c.op {
		case "$inc":
			arg = json.Number("1")
		case "$currentDate":
			arg = true
		case "$unset":
			arg = ""
		}
		u, err := ParseUpdate(map[string]any{c.op: map[string]any{path(c.path): arg}})
		if !c.ok {
			if mongoerr.CodeOf(err) != mongoerr.BadValue || !strings.Contains(err.Error(), "at most 100") && !strings.Contains(err.Error(), "exceeds 100") {
				t.Errorf("%s on %d levels with a value of %d: %v, want BadValue", c.op, c.path, c.value, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s on %d levels with a value of %d: %v", c.op, c.path, c.value, err)
		}
		doc := Doc{"_id": int64(1)}
		if _, err := u.Apply(doc, time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := Encode(nil, doc); err != nil {
			t.Fatalf("%s on %d levels with a value of %d: the result does not encode: %v", c.op, c.path, c.value, err)
		}
	}
}

// encoded is d encoded, for comparisons.
func encoded(d Doc) []byte {
	b, _ := Encode(nil, d)
	return b
}

// TestIncTypes: $inc keeps MongoDB's result types: int32 stays int32 until
// it overflows, a decimal sum is exact.
func TestIncTypes(t *testing.T) {
	dec := func(s string) partialfilter.Decimal128 {
		d, err := partialfilter.ParseDecimal128(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, c := range []struct {
		old, inc, want any
	}{
		{int32(1), int32(2), int32(3)},
		{int32(math.MaxInt32), int32(1), int64(math.MaxInt32) + 1},
		{int32(1), int64(2), int64(3)},
		{int64(1), int32(2), int64(3)},
		{int32(1), 0.5, 1.5},
		{dec("1.10"), int32(1), dec("2.10")},
		{int32(2), dec("0.25"), dec("2.25")},
		{dec("0.1"), 0.2, dec("0.300000000000000")},
		{dec("1E+3"), dec("1"), dec("1001")},
		{dec("NaN"), int32(1), dec("NaN")},
		{nil, dec("5"), dec("5")},
	} {
		u, err := ParseUpdate(map[string]any{"$inc": map[string]any{"v": c.inc}})
		if err != nil {
			t.Fatal(err)
		}
		doc := Doc{"v": c.old}
		if c.old == nil {
			delete(doc, "v")
		}
		if _, err := u.Apply(doc, time.Now()); err != nil {
			t.Fatalf("%#v + %#v: %v", c.old, c.inc, err)
		}
		got := doc["v"]
		if reflect.TypeOf(got) != reflect.TypeOf(c.want) || fmt.Sprint(got) != fmt.Sprint(c.want) {
			if gd, ok := got.(partialfilter.Decimal128); ok {
				got = gd.String()
			}
			t.Errorf("%#v + %#v = %#v (%T), want %v (%T)", c.old, c.inc, got, doc["v"], c.want, c.want)
		}
	}
}

// jsonMap decodes s, numbers kept exact.
func jsonMap(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}
