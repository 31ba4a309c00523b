package timeseries

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// IndexKey is one field of an index key pattern, in order.
type IndexKey struct {
	Field     string `json:"field"`
	Direction int    `json:"direction"`
}

// IndexSpec is an index definition as stored in the catalog. The TTL rules
// that apply to it live in package ttl.
type IndexSpec struct {
	Name                    string         `json:"name"`
	Key                     []IndexKey     `json:"key"`
	ExpireAfterSeconds      *int64         `json:"expireAfterSeconds,omitempty"`
	PartialFilterExpression map[string]any `json:"partialFilterExpression,omitempty"`
	// Archive makes the TTL index move expiring data to the archive
	// instead of deleting it (time-series collections).
	Archive bool `json:"archive,omitempty"`
	// ID numbers the index's entries in the store (plain collections);
	// ids are never reused within a collection.
	ID uint32 `json:"id,omitempty"`
}

// collectionRecord is the catalog entry of a collection in Pebble (JSON).
type collectionRecord struct {
	ID         uint32              `json:"id"`
	Name       string              `json:"name"`
	Options    CollectionOptions   `json:"options"`
	Indexes    []IndexSpec         `json:"indexes,omitempty"`
	FieldTypes map[string][]string `json:"fieldTypes,omitempty"`
	// FieldNames is the collection's name table: the buckets it writes
	// store a field's index here instead of its name (bucket.VersionRefs).
	// It only grows.
	FieldNames []string  `json:"fieldNames,omitempty"`
	MaxSpan    int64     `json:"maxSpan"`
	Created    time.Time `json:"created"`
	// NextIndexID is the id the next index of a plain collection gets.
	NextIndexID uint32 `json:"nextIndexID,omitempty"`
	// Count and Buckets are those of the buckets Pebble holds (sealed
	// buckets and open-bucket snapshots) when the record is durable: every
	// batch that changes a collection's stored buckets writes its record
	// too, so that replaying the log from the last checkpoint adds and
	// removes the rest exactly once.
	Count   int64 `json:"count"`
	Buckets int64 `json:"buckets"`
	// CountExact marks records written with that rule. Older ones missed
	// the deletes Pebble made durable after their checkpoint: Open
	// recounts such a time-series collection from its stored buckets.
	CountExact bool `json:"countExact,omitempty"`
	// Archived counts what archive passes moved out of the collection.
	Archived *ArchiveStats `json:"archived,omitempty"`
}

// CollectionInfo describes a collection.
type CollectionInfo struct {
	Name    string            `json:"name"`
	Options CollectionOptions `json:"options"`
	Indexes []IndexSpec       `json:"indexes,omitempty"`
	// Count is the number of measurements stored, including expired ones
	// not yet removed.
	Count int64 `json:"count"`
	// Buckets counts open and sealed buckets.
	Buckets int64 `json:"buckets"`
	// StorageBytes estimates the bytes on disk of the collection's data.
	StorageBytes int64 `json:"storageBytes"`
	// DataBytes is the encoded size of a plain collection's documents
	// (what a capped collection's size limits).
	DataBytes int64 `json:"dataBytes,omitempty"`
	// Fields maps each measurement field to the value types it was seen
	// with.
	Fields map[string][]string `json:"fields,omitempty"`
	// OutOfRangeBuckets counts buckets holding measurements outside
	// 1970..2038; while it is above 0 nothing in the collection expires.
	OutOfRangeBuckets int64 `json:"outOfRangeBuckets"`
	// Archived counts what archive passes moved out; nil when the
	// collection never archived and has no rule that archives.
	Archived *ArchiveStats `json:"archived,omitempty"`
	// MinTime and MaxTime bound the measurement times of the collection;
	// zero when empty. They are exact for data in memory and come from
	// bucket control blocks for data on disk.
	Created time.Time `json:"created"`
}

var kindNames = map[model.Kind]string{model.KindFloat: "double", model.KindInt: "long", model.KindString: "string", model.KindBool: "bool", model.KindDate: "date",
	model.KindInt32: "int", model.KindBSON: "bson", model.KindObjectID: "objectId"}

func kindByName(s string) (model.Kind, bool) {
	for k, n := range kindNames {
		if n == s {
			return k, true
		}
	}
	return 0, false
}

func (c *collection) record() ([]byte, error) { return c.recordWith(nil) }

// recordWith is record with the options and indexes of ch instead of c's
// (nil: c's own), for a change persisted before it is installed.
func (c *collection) recordWith(ch *catalogChange) ([]byte, error) {
	r := collectionRecord{ID: c.id, Name: c.name, Options: c.opts, Indexes: c.indexes, MaxSpan: c.maxSpan,
		Created: c.created, Count: c.ckptCount, Buckets: c.ckptBuckets, CountExact: true, NextIndexID: c.nextIndexID}
	if ch != nil {
		r.Options, r.Indexes, r.NextIndexID, r.MaxSpan = ch.opts, ch.indexes, ch.nextIndexID, ch.maxSpan(c)
	}
	r.FieldNames = c.names
	if c.archived != (ArchiveStats{}) {
		a := c.archived
		r.Archived = &a
	}
	if len(c.fieldTypes) > 0 {
		r.FieldTypes = make(map[string][]string, len(c.fieldTypes))
		for f, ts := range c.fieldTypes {
			for _, t := range ts.types() {
				r.FieldTypes[f] = append(r.FieldTypes[f], kindNames[t])
			}
		}
	}
	return json.Marshal(r)
}

func decodeCollectionRecord(b []byte) (*collectionRecord, error) {
	var r collectionRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: catalog record: %v", ErrCorrupt, err)
	}
	return &r, nil
}

func (r *collectionRecord) toCollection() (*collection, error) {
	c := &collection{
		id: r.ID, name: r.Name, opts: r.Options, indexes: r.Indexes, maxSpan: r.MaxSpan,
		oldestMin: math.MinInt64, newMin: math.MaxInt64,
		fieldTypes: make(map[string]typeSet, len(r.FieldTypes)),
		created:    r.Created, count: r.Count, buckets: r.Buckets, ckptCount: r.Count, ckptBuckets: r.Buckets,
		nextIndexID: r.NextIndexID,
	}
	if r.Options.TimeSeries == nil {
		c.plain = &plainState{}
	}
	if r.Archived != nil {
		c.archived = *r.Archived
	}
	for f, names := range r.FieldTypes {
		for _, n := range names {
			k, ok := kindByName(n)
			if !ok {
				return nil, fmt.Errorf("%w: collection %q: field %q has unknown type %q", ErrCorrupt, r.Name, f, n)
			}
			c.fieldTypes[f] |= 1 << k
		}
	}
	for _, n := range r.FieldNames {
		if _, dup := c.nameIdx[n]; dup {
			return nil, fmt.Errorf("%w: collection %q: field name %q twice in the name table", ErrCorrupt, r.Name, n)
		}
		c.addName(n)
	}
	// Fields of records written before the name table existed.
	var missing []string
	for f := range c.fieldTypes {
		if _, ok := c.nameIdx[f]; !ok {
			missing = append(missing, f)
		}
	}
	sort.Strings(missing)
	for _, f := range missing {
		c.addName(f)
	}
	return c, nil
}

func fieldTypeNames(m map[string]typeSet) map[string][]string {
	out := make(map[string][]string, len(m))
	for f, ts := range m {
		for _, t := range ts.types() {
			out[f] = append(out[f], kindNames[t])
		}
		sort.Strings(out[f])
	}
	return out
}
