package api

import (
	"encoding/json"
	"testing"
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
		if b[skipJSONSpace(b, 0)] != top {
			t.Fatalf("fastValid(%q, %c) accepts another kind of value", b, top)
		}
	}
}

func TestFastValid(t *testing.T) {
	for i, s := range fastSeeds {
		checkFastValid(t, []byte(s))
		want := i < 8 // the first eight are accepted by the one-pass check
		top := byte('{')
		if s[skipJSONSpace([]byte(s), 0)] == '[' {
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
