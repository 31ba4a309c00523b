package api

import (
	"encoding/json"
	"testing"

	"github.com/hourglassdb/hourglass/model"
)

var fastSeeds = []string{
	`{"time":{"$date":"2024-01-01T00:00:00.123456789Z"},"sensor":{"id":"s000042","site":"site-42","kind":"humidity","floor":2},"value":21.375,"battery":87}`,
	`{}`, `[]`, `[{}]`, `[{"a":1},{"b":[1,2,{"c":null}]}]`, ` { "a" : -0.5e+10 , "b" : true , "c" : false } `,
	`{"s":"\u00e9\n\t\"\\\/\b\f\r"}`, `{"a":"é","b":"日本"}`,
	// Refused or left to the full checks:
	`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `{"\u0061":1,"a":2}`, `{"a\u0000":1}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`,
	`{"a":1e}`, `{"a":-}`, `{"a":tru}`, `{"a":truex}`, `{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}",
	`{"a":1,}`, `{,"a":1}`, `[1,]`, `{"a" 1}`, `{"a":1}{}`, `{"a":1} x`, `[{"a":1}`, `{"a":[1}`, `"x"`, `1`, `{"a":1`, `{"a":"x`,
}

// fastValid accepts only what the full checks accept, and accepts the
// documents sensors send.
func checkFastValid(t *testing.T, b []byte) {
	t.Helper()
	for _, top := range []byte{'{', '['} {
		if !fastValid(b, top) {
			continue
		}
		if !json.Valid(b) {
			t.Fatalf("fastValid(%q, %c) accepts text json.Valid refuses", b, top)
		}
		if err := checkJSONText(b, 0); err != nil {
			t.Fatalf("fastValid(%q, %c) accepts text checkJSONText refuses: %v", b, top, err)
		}
		if b[model.SkipJSONSpace(b, 0)] != top {
			t.Fatalf("fastValid(%q, %c) accepts another kind of value", b, top)
		}
	}
}

func TestFastValid(t *testing.T) {
	for i, s := range fastSeeds {
		checkFastValid(t, []byte(s))
		want := i < 8 // the first eight are accepted by the one-pass check
		top := byte('{')
		if s[model.SkipJSONSpace([]byte(s), 0)] == '[' {
			top = '['
		}
		if got := fastValid([]byte(s), top); got != want {
			t.Errorf("fastValid(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzFastValid(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFastValid(t, b)
	})
}

// TestLoneSurrogate: \u escapes of half a UTF-16 surrogate pair are found
// wherever they stand; a whole pair, an escaped backslash before "u" and
// other escapes are not.
func TestLoneSurrogate(t *testing.T) {
	for _, c := range []struct {
		text string
		at   int
	}{
		{`{"a":"x"}`, -1},
		{`{"a":"\ud83d\ude00"}`, -1},
		{`{"a":"\uD83D\uDE00 \u00e9 \n \\ud800"}`, -1},
		{`{"a":"\ud83d"}`, 6},
		{`{"a":"\ud83dx\ude00"}`, 6},
		{`{"a":"\ude00"}`, 6},
		{`{"a":"\ud83d\u0041"}`, 6},
		{`{"a":"ok","\udbff":1}`, 11},
		{`["\\\ud800"]`, 4},
	} {
		if got := loneSurrogate([]byte(c.text)); got != c.at {
			t.Errorf("loneSurrogate(%s) = %d, want %d", c.text, got, c.at)
		}
		if c.at < 0 {
			if !fastValid([]byte(c.text), c.text[0]) && checkJSONText([]byte(c.text), 0) != nil {
				t.Errorf("%s refused", c.text)
			}
		} else if fastValid([]byte(c.text), c.text[0]) || checkJSONText([]byte(c.text), 0) == nil {
			t.Errorf("%s accepted", c.text)
		}
	}
}
