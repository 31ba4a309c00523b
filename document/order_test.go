package document

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// tokenOrder reads a JSON object's field order with encoding/json's tokens: the
// oracle of ParseJSONOrdered's order.
func tokenOrder(t testing.TB, dec *json.Decoder) *Order {
	tok, err := dec.Token()
	if err != nil {
		t.Fatal(err)
	}
	switch tok {
	case json.Delim('{'):
		o := &Order{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			o.Keys = append(o.Keys, k.(string))
			if so := tokenOrder(t, dec); so != nil {
				if o.Sub == nil {
					o.Sub = map[string]*Order{}
				}
				o.Sub[k.(string)] = so
			} else if o.Sub != nil {
				delete(o.Sub, k.(string))
			}
		}
		dec.Token()
		if len(o.Sub) == 0 {
			o.Sub = nil
		}
		o.Keys = DistinctKeys(o.Keys)
		return o
	case json.Delim('['):
		var o *Order
		for j := 0; dec.More(); j++ {
			if so := tokenOrder(t, dec); so != nil {
				if o == nil {
					o = &Order{}
				}
				for len(o.Elems) < j {
					o.Elems = append(o.Elems, nil)
				}
				o.Elems = append(o.Elems, so)
			}
		}
		dec.Token()
		return o
	}
	return nil
}

func FuzzJSONOrder(f *testing.F) {
	for _, s := range []string{`{}`, `{"b": 1, "a": {"z": [1, {"y": 2, "x": "\""}], "c": null}}`, `{"\u00e9\\": [[{"k": true}], 1e5, -0.5]}`,
		`{"a":"}","b":"\\\"{"}`, ` { "x" : [ ] , "w" : { } } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if !json.Valid(text) || bytes.TrimSpace(text)[0] != '{' {
			return
		}
		_, got, err := ParseJSONOrdered(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		want := tokenOrder(t, json.NewDecoder(bytes.NewReader(text)))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, want %+v", text, got, want)
		}
	})
}

// shuffledDoc returns a random document, a random order of its fields at
// every depth, and its encoding in that order.
func shuffledDoc(t *testing.T, r *rand.Rand) (Doc, *Order, []byte) {
	t.Helper()
	doc := map[string]any{"_id": randValue(r, 1), "x": randValue(r, 0), "y": randValue(r, 0), "b": randValue(r, 0)}
	_, o, err := DecodeWithOrder(mustEncode(t, doc, nil))
	if err != nil {
		t.Fatal(err)
	}
	shuffle(r, o)
	return doc, o, mustEncode(t, doc, o)
}

// TestEncodeOrdered: a document encoded in an order decodes in it, at every
// depth, and DecodeOrder reads the same order without the values; keys the
// order does not name follow in name order, and names it lacks are skipped.
func TestEncodeOrdered(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		doc, o, enc := shuffledDoc(t, r)
		back, bo, err := DecodeWithOrder(enc)
		if err != nil || !equalValues(doc, back) {
			t.Fatalf("%#v: %#v, %v", doc, back, err)
		}
		if !reflect.DeepEqual(bo, o) {
			t.Fatalf("order %+v read back as %+v", o, bo)
		}
		if only, err := DecodeOrder(enc); err != nil || !reflect.DeepEqual(only, o) {
			t.Fatalf("DecodeOrder: %+v, %v; want %+v", only, err, o)
		}
	}
	doc := Doc{"a": int32(1), "b": int32(2), "c": int32(3)}
	if got := string(AppendJSONOrdered(nil, doc, &Order{Keys: []string{"c", "gone", "a"}})); got != `{"c":3,"a":1,"b":2}` {
		t.Fatalf("a partial order: %s", got)
	}
}

func mustEncode(t *testing.T, doc Doc, o *Order) []byte {
	t.Helper()
	b, err := EncodeOrdered(nil, doc, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shuffle permutes the keys of o at every depth.
func shuffle(r *rand.Rand, o *Order) {
	if o == nil {
		return
	}
	r.Shuffle(len(o.Keys), func(i, j int) { o.Keys[i], o.Keys[j] = o.Keys[j], o.Keys[i] })
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range o.Sub {
			if !yield(k) {
				return
			}
		}
	}) {
		shuffle(r, o.Sub[k])
	}
	for _, e := range o.Elems {
		shuffle(r, e)
	}
}

// TestAppendJSONEncoded: transcoding a stored document writes what
// AppendJSONOrdered writes of it decoded, in its order.
func TestAppendJSONEncoded(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 20000 {
		doc, o, enc := shuffledDoc(t, r)
		got, err := AppendJSONEncoded(nil, enc)
		if err != nil {
			t.Fatal(err)
		}
		if want := AppendJSONOrdered(nil, doc, o); !bytes.Equal(got, want) {
			t.Fatalf("transcoded %s\nwant       %s", got, want)
		}
	}
}

func FuzzTranscode(f *testing.F) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 20 {
		b, _ := Encode(nil, map[string]any{"a": randValue(r, 0), "b": randValue(r, 0)})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, decErr := Decode(b)
		_, jsErr := AppendJSONEncoded(nil, b)
		bs, bsErr := AppendBSON(nil, b)
		if decErr == nil && (jsErr != nil || bsErr != nil) {
			t.Fatalf("decodes, but transcoding fails: %v, %v", jsErr, bsErr)
		}
		if bsErr == nil {
			if err := bsoncore.Document(bs).Validate(); err != nil {
				t.Fatalf("invalid BSON %x: %v", bs, err)
			}
		}
	})
}

// FuzzParseJSONOrdered: the one-walk decode gives what encoding/json (with
// UseNumber) gives; FuzzJSONOrder checks its order.
func FuzzParseJSONOrdered(f *testing.F) {
	for _, s := range []string{`{}`, `{"b": 1, "a": {"z": [1, {"y": 2, "x": "\""}], "c": null}}`, `{"\u00e9\\": [[{"k": true}], 1e5, -0.5, false]}`,
		`{"a":"}","b":"\\\"{","a":2}`, ` { "x" : [ ] , "w" : { } } `, `{"s": "\ud83d\ude00 \u0000", "n": -0, "e": 1E-7}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if !json.Valid(text) || bytes.TrimSpace(text)[0] != '{' {
			return
		}
		m, o, err := ParseJSONOrdered(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		var want map[string]any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("%s: %#v, want %#v", text, m, want)
		}
		_ = o
	})
}
