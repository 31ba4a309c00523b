package model

// MetaColumnMetadataKey marks the meta column in a result schema: its
// values are the canonical Extended JSON of the meta values (CanonicalMeta),
// so that writers can render them as JSON rather than as strings.
const MetaColumnMetadataKey = "hourglass.meta"

// MixedColumnMetadataKey marks a column of a field seen with several value
// types that are not all numbers: its values are JSON texts.
const MixedColumnMetadataKey = "hourglass.mixed"

// BSONColumnMetadataKey marks a column of BSON values (Arrow binary): each
// value its BSON type byte then its BSON bytes, so that a value of any
// type reads back as written (timeseries.FindOptions.ExactTypes).
const BSONColumnMetadataKey = "hourglass.bson"
