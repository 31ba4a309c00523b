package timeseries

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/ttl"
)

// collection is the in-memory state of one collection. Fields below mu are
// guarded by DB.mu.
type collection struct {
	id   uint32
	name string

	// guarded by DB.mu; opts and series also by lookupMu, for the readers
	// that do not hold DB.mu (an insert before it applies its batch), and
	// their writers hold both.
	lookupMu sync.RWMutex
	opts     CollectionOptions
	indexes  []IndexSpec
	series   seriesIndex // canonical meta -> series
	// slab holds the series and their meta keys (newSeries).
	slab seriesSlab
	// headers holds the column lists the buckets taking open rows share,
	// by headerHash (shareHeaders). Guarded by DB.mu.
	headers map[uint64][]bucket.Column
	// byID holds the series in ascending id order (collection.addSeries):
	// a slice rather than a second map, 8 bytes a series. Its writer
	// holds lookupMu too (seriesFor reads it under that lock alone).
	byID []*series
	// reorders counts the series put into byID out of id order (never,
	// in practice): the series-match cache starts over when it changes.
	reorders int
	// hot lists the series that hold a bucket in memory or are not yet
	// persisted, each once (series.hot): the only ones a checkpoint or
	// sealForBudget visits, so that their cost follows the series written
	// lately, not all of them. A checkpoint drops the series it leaves
	// persisted with no bucket.
	hot        []*series
	fieldTypes map[string]typeSet
	// names is the collection's field name table (bucket.VersionRefs):
	// append-only, so a slice of it taken under DB.mu stays valid; nameIdx
	// maps a name to its index. Both change under DB.mu held for writing.
	names   []string
	nameIdx map[string]uint32
	// lastForgets counts the series whose newest row a change of their
	// TTL made unknown (series.forgetLast): a read that started before
	// one does not make any known (recoverChunk).
	lastForgets uint64
	// matches caches the series meta filters select.
	matches seriesMatches
	// maxSpan is the largest bucket span the collection ever used, so that
	// a time-range scan knows how far before its start a bucket may begin.
	maxSpan int64
	created time.Time
	count   int64 // measurements stored
	buckets int64 // buckets stored, open and sealed
	// ckptCount and ckptBuckets are count and buckets as of the last
	// checkpoint capture: the values the catalog record persists, so that
	// replaying the log after a crash adds the rest exactly once.
	ckptCount, ckptBuckets int64
	dirty                  bool // catalog record changed since the last checkpoint
	// mergeMarks holds, per series, the ranges of min times of the small
	// sealed buckets checkpoints wrote since the last merge pass (merge.go).
	// Appended in checkpoint order; 32 bytes each, at most maxMarks.
	mergeMarks []mergeMark
	// marksSorted is the length of the prefix of mergeMarks sorted by
	// series with one range each (collection.addMergeMark).
	marksSorted int
	// marksFull: the last fold left mergeMarks over half full; until a
	// merge pass takes marks, only series marked already widen theirs.
	marksFull bool
	// marksAt and marksHi are at most the mark time and the range end of
	// every mark (takeRipe passes over marks none of which is ripe
	// without reading them).
	marksAt uint32
	marksHi int64
	// newest is the newest measurement time applied (merge marks wait
	// until their range is done: collection.ripe).
	newest int64
	// oldestMin is at most the min time of every bucket of c, in memory
	// or stored: a TTL pass whose cutoff is not past it has nothing to
	// delete and visits no series (DB.Expire). math.MinInt64 until the
	// count at open (recountOutOfRange) sets it. newMin is the least min
	// time of the buckets opened since that count began. A bucket's min
	// time never goes down: merges pack rows from buckets starting no
	// earlier, and deletes only remove.
	oldestMin, newMin int64
	dropped           bool
	// gone is set, with the log's cut held, once the collection has left
	// the DB: dropped (with dropped, so dropped implies gone) or replaced
	// by ReplaceFrom (which leaves dropped alone: plain collections'
	// writers read it under their own lock). A write that takes the cut's
	// lock after it finds it, and logs nothing: a record logged after
	// ReplaceFrom's cut would be replayed over the new content.
	gone atomic.Bool
	// rollups are the rollups of this collection being maintained
	// (relinkRollups).
	rollups []*rollup
	// marked caches, per series (by ord), what the rollups' marks cover
	// already (markRollups); markedGen invalidates it all at once.
	marked    []markedRange
	markedGen uint64
	// rules are the TTL rules, compiled from opts and indexes
	// (compileRules).
	rules ttl.Rules
	// ruleQuoted holds, per rule, its filter's required strings as meta
	// keys quote them (collection.ruleMatches).
	ruleQuoted [][][]string
	// oorBuckets counts the buckets holding a measurement outside the
	// 1970-2038 range; while it is above 0, nothing expires (SPEC 2.4).
	oorBuckets int64
	// ttlResume is, per TTL rule (index name, "" for the collection's),
	// the series id the monitor's next batch starts after.
	ttlResume map[string]uint64
	// archived counts what archive passes moved out (archive.go); it is
	// in the catalog record. archiveFail is the last pass's failure, ""
	// after a success; archiveRetry is when the next may run.
	archived     ArchiveStats
	archiveFail  string
	archiveRetry time.Time
	archiveWait  time.Duration
	archiveLog   time.Time
	// rulesVer counts rule changes (compileRules). ruleCache holds, per
	// rule, the sorted ids of the series it applies to, as of rulesVer
	// ruleCacheVer and ruleCacheSeries series (series are only added).
	rulesVer        uint64
	ruleCache       map[string][]uint64
	ruleCacheVer    uint64
	ruleCacheSeries int
	// plain is the state of a plain collection; nil for time series.
	plain *plainState
	// nextIndexID is the id of the next index of a plain collection.
	nextIndexID uint32
	// plainRules are the TTL indexes of a plain collection, and live all
	// its secondary indexes, compiled (compileRules).
	plainRules []plainRule
	live       []liveIndex
}

// typeSet is a set of bucket.Types seen for a field, bit t for Type t.
type typeSet uint16

func (s typeSet) has(t bucket.Type) bool { return s&(1<<t) != 0 }

// types lists the members of s in Type order.
func (s typeSet) types() []bucket.Type {
	var out []bucket.Type
	for t := bucket.Type(1); t < 16; t++ {
		if s.has(t) {
			out = append(out, t)
		}
	}
	return out
}

// addName appends a field name to the collection's name table, unless it
// is there already. DB.mu is held for writing (or the collection is not
// yet shared).
func (c *collection) addName(n string) {
	if c.nameIdx == nil {
		c.nameIdx = make(map[string]uint32)
	}
	if _, ok := c.nameIdx[n]; ok {
		return
	}
	c.nameIdx[n] = uint32(len(c.names))
	c.names = append(c.names, n)
}

// nameRefs returns the name-table indexes of cols' fields, appended to
// dst. A name not yet in the table (apply adds every new field, so none
// should be) is added, and the catalog record marked for writing. DB.mu is
// held for writing.
func (c *collection) nameRefs(dst []uint32, cols *bucket.Columns) []uint32 {
	for i := range cols.Fields {
		n := cols.Fields[i].Name
		ref, ok := c.nameIdx[n]
		if !ok {
			c.addName(n)
			c.dirty = true
			ref = c.nameIdx[n]
		}
		dst = append(dst, ref)
	}
	return dst
}

// addSeries adds s to c's maps. Series ids are handed out in ascending
// order, so s goes last in c.byID but for an id out of order, which is
// put in its place. DB.mu is held for writing.
func (c *collection) addSeries(s *series) {
	s.ord = uint32(c.series.len())
	// byID changes under lookupMu too: inserts read it through their
	// measurements' slots holding only that lock (seriesFor).
	c.lookupMu.Lock()
	defer c.lookupMu.Unlock()
	c.series.add(s)
	if n := len(c.byID); n == 0 || c.byID[n-1].id < s.id {
		c.byID = append(c.byID, s)
		return
	}
	i, _ := slices.BinarySearchFunc(c.byID, s.id, func(x *series, id uint64) int { return cmp.Compare(x.id, id) })
	c.byID = slices.Insert(c.byID, i, s)
	c.reorders++
}

// seriesFor returns the series of c with meta key key, of measurement m,
// nil if there is none: through m's slot when it names the series (a
// writer's cache entry for the key keeps it), from the series map
// otherwise, then kept in the slot. A slot holds the collection's id and
// the series' place in byID, which is its ord while series come in id
// order (always, in practice); what it names is taken only if it has the
// key. c.lookupMu is held for reading.
func (c *collection) seriesFor(m *model.Measurement, key string) *series {
	if m.Slot == nil {
		return c.series.get(key)
	}
	if v := m.Slot.Load(); uint32(v>>32) == c.id {
		if i := int(uint32(v)) - 1; i >= 0 && i < len(c.byID) {
			if s := c.byID[i]; s.metaKey == key {
				return s
			}
		}
	}
	s := c.series.get(key)
	if s != nil {
		m.Slot.Store(uint64(c.id)<<32 | uint64(s.ord+1))
	}
	return s
}

// seriesOf returns the series of c with id, nil if there is none. DB.mu
// is held.
func (c *collection) seriesOf(id uint64) *series {
	i, ok := slices.BinarySearchFunc(c.byID, id, func(x *series, id uint64) int { return cmp.Compare(x.id, id) })
	if !ok {
		return nil
	}
	return c.byID[i]
}
