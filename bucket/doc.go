// Package bucket encodes the columnar compressed bucket format of Hourglass: the
// measurements of one series for a span of time, as one shared time column and up to a
// few hundred named field columns. It is pure: bytes in, values out, no I/O.
//
// Each column is encoded from its data: timestamps as delta-of-delta with runs of zeros
// length-encoded, or deltas, sorted ones of many rows in blocks that decode alone; ints and dates as deltas or offsets, entropy coded with FSE or Huffman
// (klauspost/compress) with an escape for large values; floats as decimal-scaled ints when
// every value has a short decimal form, otherwise as order-preserving integer deltas whose
// bit lengths are entropy coded; strings as a dictionary and indices; bools and presence
// as bitmaps or runs. A control block up front holds the row count, time range and each
// field's name (or its index in a shared name table), type, count and min/max, so pruning never touches the column data, and
// each column can be decoded alone. docs/format/bucket.md draws the byte layout.
//
// # Usage
//
//	var enc bucket.Encoder // reusable, one goroutine at a time
//	cols := bucket.Columns{
//		Times: []int64{0, 10e9, 20e9},
//		Fields: []bucket.Column{
//			{Name: "usage_user", Type: bucket.TypeFloat, Floats: []float64{1.5, 2, 2.5}},
//			{Name: "host", Type: bucket.TypeString, Strings: []string{"a", "", "a"},
//				Present: []uint64{0b101}}, // row 1 absent
//		},
//	}
//	buf, err := enc.Encode(nil, &cols)
//	if err != nil {
//		return err
//	}
//
//	var r bucket.Reader
//	if err := r.Reset(buf); err != nil { // header and control block only
//		return err
//	}
//	if r.MaxTime() < from || r.MinTime() > to {
//		return nil // prune without decoding
//	}
//	times, err := r.Times(nil)
//	var col bucket.Column
//	err = r.Column(r.FieldIndex("usage_user"), &col) // only this column is decoded
//
//	// The rows of [from, to] and their times, without decoding the others':
//	// a time column of many irregular rows is stored in blocks of 256.
//	first, last, err := r.RowRange(from, to) // count: last - first
//	times, err = r.TimesRange(first, last, times)
//
// Buckets of one collection share their field names: EncodeRefs stores each name as an
// index into a table the caller keeps, and ResetNames reads such a bucket with the table.
package bucket
