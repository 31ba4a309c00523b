// Package lineproto decodes InfluxDB line protocol into time-series
// measurements.
//
// Each entry becomes one measurement:
//
//	cpu,host=a,region=eu usage=1.5,idle=90i,ok=true,note="x" 1714564800000000000
//
// has the time 1714564800000000000 ns (scaled by the request's precision;
// the decoder's clock when the entry has none), the meta value
// {"_measurement": "cpu", "host": "a", "region": "eu"} and the fields
// usage (double), idle (long), ok (bool) and note (string). Unsigned
// integers (42u) are longs when they fit and refused otherwise. A key given
// twice in one entry keeps its last value. The tag key _measurement is
// reserved.
//
// The reference is github.com/influxdata/line-protocol/v2/lineprotocol,
// the parser of Telegraf and InfluxDB. Common entries (printable ASCII,
// no escapes, numbers in plain decimal) take a hand-written fast path;
// anything else is handed to the reference parser. FuzzDecode checks that
// both give the same values, or both refuse, for every input.
//
// A Decoder caches the meta values of the series it has seen, and field
// names, in bounded maps, so that steady ingest of known series allocates
// nothing for them.
package lineproto
