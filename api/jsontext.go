package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// checkJSONText refuses what encoding/json accepts quietly in valid JSON
// text: bytes that are not UTF-8 (it would store U+FFFD instead), an object
// with two members of one name (it would keep the last: a document cannot
// hold two values for one field), and names holding NUL (MongoDB refuses
// them; they cut C strings short). b must be syntactically valid JSON (the
// decoder has accepted it); base is added to the byte offsets in errors.
func checkJSONText(b []byte, base int) error {
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return badRequest("invalid UTF-8 at byte %d: JSON text must be UTF-8", base+i)
	}
	if i := loneSurrogate(b); i >= 0 {
		return badRequest("the escape %s at byte %d is half of a UTF-16 surrogate pair: JSON strings must be valid Unicode", b[i:i+6], base+i)
	}
	if bytes.IndexByte(b, '{') < 0 {
		return nil
	}
	sc := jsonScanner{b: b}
	return sc.value(base)
}

// jsonScanner walks valid JSON text checking object member names.
type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str returns the raw string at s.i (without quotes) and whether it holds
// escapes, and moves past it.
func (s *jsonScanner) str() (raw []byte, escaped bool) {
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			s.i = j + 1
			return s.b[start:j], escaped
		}
	}
	s.i = len(s.b)
	return s.b[start:], escaped
}

func (s *jsonScanner) value(base int) error {
	s.skipSpace()
	if s.i >= len(s.b) {
		return nil
	}
	switch s.b[s.i] {
	case '{':
		s.i++
		var names []string
		var seen map[string]struct{}
		for {
			s.skipSpace()
			if s.i >= len(s.b) || s.b[s.i] == '}' {
				s.i++
				return nil
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			at := s.i
			raw, escaped := s.str()
			name := string(raw)
			if escaped {
				if err := json.Unmarshal(s.b[at:s.i], &name); err != nil {
					return badRequest("malformed JSON at byte %d: %v", base+at, err)
				}
			}
			if strings.IndexByte(name, 0) >= 0 {
				return badRequest("field name %.40q at byte %d holds a NUL character", name, base+at)
			}
			dup := false
			if seen != nil {
				_, dup = seen[name]
				seen[name] = struct{}{}
			} else {
				for _, n := range names {
					dup = dup || n == name
				}
				names = append(names, name)
				if len(names) > 16 {
					seen = make(map[string]struct{}, 2*len(names))
					for _, n := range names {
						seen[n] = struct{}{}
					}
				}
			}
			if dup {
				return badRequest("duplicate field name %.40q at byte %d: an object may name a field once", name, base+at)
			}
			s.skipSpace()
			s.i++ // ':'
			if err := s.value(base); err != nil {
				return err
			}
		}
	case '[':
		s.i++
		for {
			s.skipSpace()
			if s.i >= len(s.b) || s.b[s.i] == ']' {
				s.i++
				return nil
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			if err := s.value(base); err != nil {
				return err
			}
		}
	case '"':
		s.str()
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return nil
			}
			s.i++
		}
	}
	return nil
}

// loneSurrogate returns the offset of the first \u escape in b, valid
// JSON text, that is half of a UTF-16 surrogate pair without its other
// half (encoding/json would decode it to U+FFFD), or -1.
func loneSurrogate(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 >= len(b) || b[i+1] != 'u' {
			i++ // another escape: skip the escaped byte
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			return i
		}
		switch {
		case r < 0xd800 || r > 0xdfff:
		case r >= 0xdc00:
			return i
		default: // a high surrogate: a low one must follow
			if i+11 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
				return i
			}
			if lo, ok := hex4(b, i+8); !ok || lo < 0xdc00 || lo > 0xdfff {
				return i
			}
			i += 6
		}
		i += 5
	}
	return -1
}

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
