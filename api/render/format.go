// Package render writes query results, given as Arrow records, in the
// output formats of the HTTP API: a JSON array, NDJSON, CSV or an Arrow IPC
// stream.
//
// Values are written the way docs/api.md describes: in JSON, dates are
// {"$date": "<RFC 3339 UTC>"} (bare strings with Options.FlatDates), NaN and
// infinities are {"$numberDouble": ...}, nulls are left out of the document,
// and columns marked as meta or mixed hold JSON texts that are embedded as
// they are. Writers append into one reused buffer: rendering allocates
// nothing per row.
package render

import (
	"errors"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"
)

// Format is an output format.
type Format int

// The output formats.
const (
	JSON Format = iota
	NDJSON
	CSV
	Arrow
)

var formatTypes = [...]string{
	JSON:   "application/json",
	NDJSON: "application/x-ndjson",
	CSV:    "text/csv",
	Arrow:  "application/vnd.apache.arrow.stream",
}

// ContentType is the media type of the format, as sent in Content-Type.
func (f Format) ContentType() string {
	if f == CSV {
		return "text/csv; charset=utf-8"
	}
	if f >= 0 && int(f) < len(formatTypes) {
		return formatTypes[f]
	}
	return "application/octet-stream"
}

func (f Format) String() string {
	if f >= 0 && int(f) < len(formatTypes) {
		return formatTypes[f]
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// ErrNotAcceptable is returned by Negotiate when Accept names no format this
// package writes.
var ErrNotAcceptable = errors.New("no acceptable output format")

// mediaFormats maps the media types Negotiate accepts to formats, including
// common aliases.
var mediaFormats = map[string]Format{
	"application/json":                    JSON,
	"application/x-ndjson":                NDJSON,
	"application/ndjson":                  NDJSON,
	"application/jsonl":                   NDJSON,
	"application/x-jsonlines":             NDJSON,
	"text/csv":                            CSV,
	"application/vnd.apache.arrow.stream": Arrow,
	"*/*":                                 JSON,
	"application/*":                       JSON,
	"text/*":                              CSV,
}

// maxAcceptRanges bounds the media ranges Negotiate looks at.
const maxAcceptRanges = 64

// Negotiate picks the format for an Accept header: the acceptable range
// with the highest q-value wins, the earlier one on a tie; an empty header
// means JSON. It returns ErrNotAcceptable (wrapped, with the supported types)
// when nothing matches.
func Negotiate(accept string) (Format, error) {
	return NegotiateAmong(accept, JSON, NDJSON, CSV, Arrow)
}

// NegotiateAmong is Negotiate for an endpoint that writes only offers (the
// first is what an empty header, or a wildcard that names none of the
// others, gets): a range naming a format not offered matches nothing.
func NegotiateAmong(accept string, offers ...Format) (Format, error) {
	if strings.TrimSpace(accept) == "" {
		return offers[0], nil
	}
	best, bestQ := offers[0], -1.0
	for i, r := range strings.Split(accept, ",") {
		if i == maxAcceptRanges {
			break
		}
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		mt, params, err := mime.ParseMediaType(r)
		if err != nil {
			continue
		}
		f, ok := mediaFormats[mt]
		if !ok || !slices.Contains(offers, f) {
			continue
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < 0 || v > 1 {
				continue
			}
			q = v
		}
		if q > bestQ && q > 0 {
			best, bestQ = f, q
		}
	}
	if bestQ < 0 {
		names := make([]string, len(offers))
		for i, f := range offers {
			names[i] = f.String()
		}
		return offers[0], fmt.Errorf("%w in Accept %q; supported: %s",
			ErrNotAcceptable, truncate(accept, 200), strings.Join(names, ", "))
	}
	return best, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
