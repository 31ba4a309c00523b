// Package archive encodes expiring time-series data as Apache Parquet
// files (docs/archive.md) and reads them back. It is pure: rows in, file
// bytes out; where files go is package objstore's, when data expires is
// the engine's.
//
// A file holds the rows of one UTC day of one collection: a column for
// the timeField (timestamp, UTC), one per meta path ("sensor" for a
// scalar meta value, "tags.host" inside a meta document) and one per
// measurement field, each typed from the values it holds (Columns), rows
// sorted by meta value then time, zstd, statistics per row group. Any
// Parquet reader (DuckDB, pyarrow, Spark) reads it as it is.
//
// Usage:
//
//	b := archive.NewBatch("ts", "sensor")
//	b.Add(metaKey, meta, &cols) // every expiring bucket
//	files, err := b.Encode()    // one File per day
package archive
