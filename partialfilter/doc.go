// Package partialfilter parses, validates and evaluates MongoDB query filters
// over plain Go values. It serves partial (TTL) index filters and the query
// path of time-series collections. The package is pure: values in, values
// out, no I/O.
//
// # Values
//
// Documents and literals use a closed set of Go types: nil (null), bool,
// int64, float64, string, time.Time (a BSON date), []any (array) and
// map[string]any (sub-document). A missing field is distinct from null.
// FromExtJSON converts what encoding/json produces, resolving Extended JSON
// wrappers ({"$date": ...}, {"$numberLong": ...}, ...), into that set.
//
// # Semantics
//
// Matching follows MongoDB: dotted paths descend into sub-documents and
// arrays (a numeric component also selects an array element); an operator
// matches a field holding an array when it matches any element or the
// array itself; comparisons only match values of the same type bracket
// (numbers with numbers, strings with strings, ...); {$eq: null} matches
// null and missing; $ne, $nin, $not and $exists: false are negations of the
// corresponding positive match. Compare gives MongoDB's total order.
//
// Known differences from MongoDB: sub-documents are Go maps, which keep no
// field order, so object equality and ordering compare fields in sorted key
// order; regular expressions use Go's RE2 engine, so PCRE-only syntax is
// refused; integers are int64 ($type "long"), also "int" when they fit in
// 32 bits; collations are not supported.
//
// # Usage
//
//	f, err := partialfilter.ParseJSON([]byte(`{"sensor.id": {"$in": [1, 2]}, "temp": {"$gt": 20}}`))
//	if err != nil {
//		return err // a *mongoerr.Error, code BadValue
//	}
//	if f.Match(doc) {
//		// ...
//	}
//
// A partial TTL index filter on a time-series collection is checked with
//
//	if err := f.ValidateForPartialIndex(); err != nil {
//		return err // CannotCreateIndex 67
//	}
//	if !f.RefersOnlyTo(metaField) {
//		// refuse: InvalidOptions 72
//	}
//
// and a query is split once, then evaluated per series and per measurement:
//
//	meta, tf, rest := f.Split(metaField, timeField)
//	tr, _ := tf.Range(timeField) // exact for tf: prune buckets, check rows
//	for each series s:  if !meta.Match(map[string]any{metaField: s.Meta}) { skip }
//	for each bucket b:  skip unless [b.Min, b.Max] meets tr
//	for each row r:     keep if tr.Contains(r[timeField]) && rest.Match(r)
package partialfilter
