// Package model is Hourglass's data model, below every other package but
// the pure codecs: what a measurement is (Measurement, Field, Value, Kind),
// the canonical encoding of meta values that groups measurements into
// series (MetaKey, CanonicalMeta, DecodeMeta, DecodeMetaKey), the limits
// on one measurement, the shape of a time-series collection
// (TimeSeriesOptions), the decoders that turn client documents into
// measurements (MeasurementDecoder from JSON text, BSONDecoder from BSON,
// MeasurementFromDocument from decoded values), BSON's values in the value
// set package partialfilter evaluates (FromBSON, ValidateBSON), and the
// metadata keys of the Arrow result schemas (MetaColumnMetadataKey).
//
// It imports nothing of the engine: the line-protocol decoder, the result
// renderers and the front doors stand on it without the storage engine.
//
// Usage:
//
//	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor"}
//	dec := model.NewMeasurementDecoder()
//	m, err := dec.Decode(ts, []byte(`{"t": {"$date": "2026-01-01T00:00:00Z"}, "sensor": "a", "temp": 20.5}`))
//	// m.Meta is the MetaKey of "a"; m.Fields holds temp as a float.
package model
