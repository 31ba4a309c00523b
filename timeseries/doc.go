// Package timeseries is the storage engine of Hourglass: the catalog of
// collections, the write path (validation, the write-ahead log, open buckets
// in memory, checkpoints to Pebble), recovery, streaming scans to Arrow
// records, windowed aggregates, deletes and the expiry the TTL monitor asks
// for. Time-series collections follow MongoDB's model: measurements of one
// meta value (a series) are grouped into buckets of at most 1000
// measurements, 128000 bytes and one span of time, stored column by column
// (package bucket). Plain document collections, with secondary and TTL
// indexes, share the same catalog, log and store (files plain*.go).
//
// It is the only package that imports Pebble (the log uses Pebble's vfs
// file-system interface only). A DB is safe for concurrent
// use; docs/architecture.md describes its locks, its files and the write,
// read and recovery paths.
//
// # Usage
//
//	db, err := timeseries.Open(timeseries.Options{Dir: dir})
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//	_, err = db.CreateCollection(ctx, "weather", timeseries.CollectionOptions{
//		TimeSeries: &model.TimeSeriesOptions{TimeField: "time", MetaField: "sensor"}})
//	if err != nil {
//		return err
//	}
//	// Insert returns once the measurements are in the log (durable) and visible.
//	_, err = db.Insert(ctx, "weather", timeseries.Batch{Measurements: []model.Measurement{
//		{Time: t0, Meta: "north", Fields: []model.Field{{Name: "temp", Value: model.Float(20.5)}}},
//	}}, timeseries.InsertOptions{})
//	if err != nil {
//		return err
//	}
//	cur, err := db.Find(ctx, "weather", timeseries.FindOptions{Sort: []timeseries.SortKey{{Field: "time"}}})
//	if err != nil {
//		return err
//	}
//	defer cur.Close()
//	for cur.Next() {
//		rec := cur.Record() // valid until the next call to Next
//		_ = rec
//	}
//	return cur.Err()
//
// A plain collection's find is the same call; its cursor yields documents
// (Cursor.Doc) instead of records. db.Collection(name) is a handle on a
// collection of either kind: Find, Count, Insert and Delete through it.
package timeseries
