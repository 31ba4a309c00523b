// Package lineproto decodes InfluxDB line protocol into time-series
// measurements.
//
// Each entry (one line, unless a string value spans lines) becomes one
// model.Measurement:
//
//	cpu,host=a,region=eu usage_user=1.5,usage_idle=90i,ok=true,note="x" 1714564800000000000
//
// has the time 1714564800000000000 ns, the meta value
//
//	{"_measurement": "cpu", "host": "a", "region": "eu"}
//
// and the fields usage_user (float), usage_idle (int), ok (bool) and note
// (string). Tag values are strings. Unsigned integers (42u) become ints
// when they fit in an int64 and are refused otherwise. Timestamps are
// scaled by the write's precision (ns, us, ms, s, and for v1 also m and h);
// an entry without one takes the decoder's clock, truncated to the
// precision, and one that overflows int64 nanoseconds once scaled is
// refused. As with the reference parser, a key given twice in one entry is
// no error: a tag keeps its last value, and so does a field, in the place
// of its first, so that a measurement never holds two fields of one name.
// The tag key _measurement is reserved.
//
// The meta value is handed over in its canonical encoding, a
// model.MetaKey, made once per series and cached, so that the store
// neither encodes nor allocates it again for every entry.
//
// Blank lines and comment lines ('#' after optional spaces) are skipped and
// not counted. Refused entries are counted and the first is described with
// its line number (counting every line of the body) and text; the other
// entries are still decoded.
//
// DecodeChunk decodes a body part by part, each part ending between
// entries, with the same entries, counts and line numbers as Decode, so
// that a large body can be stored a chunk at a time.
//
// # Fast path and reference parser
//
// The reference is github.com/influxdata/line-protocol/v2/lineprotocol,
// the parser of Telegraf and InfluxDB 2. Common entries take a hand-written
// fast path: printable ASCII, no backslashes, a single space between the
// sections, numbers, booleans, and strings without escapes. The fast path
// accepts an entry only if the reference parser reads it the same way;
// anything else, valid or not, is handed to the reference parser, one line
// at a time, or a few lines when a string value runs over the line's end.
// So the reference parser decides every entry and every error, and the fast
// path only makes the common ones cheap. FuzzDecode checks this contract on
// arbitrary bodies against the reference parser alone.
//
// A Decoder caches, in bounded maps, the meta values of the series it has
// seen, their field-name lists and field names, so that steady ingest of
// known series allocates nothing per entry. Decoders are meant to be
// pooled; one Decoder is not safe for concurrent use.
package lineproto
