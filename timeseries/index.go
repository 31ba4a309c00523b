package timeseries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/ttl"
)

// MaxIndexes bounds the indexes of a collection (MongoDB's limit).
const MaxIndexes = 64

// DefaultIndexName is MongoDB's name for an index key: field_direction
// pairs joined by underscores ("timestamp_1", "a_1_b_-1").
func DefaultIndexName(key []IndexKey) string {
	parts := make([]string, 0, 2*len(key))
	for _, k := range key {
		parts = append(parts, k.Field, strconv.Itoa(k.Direction))
	}
	return strings.Join(parts, "_")
}

// IsTTL reports whether the index carries expireAfterSeconds.
func (s *IndexSpec) IsTTL() bool { return s.ExpireAfterSeconds != nil }

func sameKey(a, b []IndexKey) bool { return reflect.DeepEqual(a, b) }

func sameFilter(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func sameExpire(a, b *int64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// validateIndex checks an index definition against the collection's
// options: the rules of SPEC 2.2 and 3.2. It returns the parsed partial
// filter (nil when there is none).
func validateIndex(opts *CollectionOptions, spec *IndexSpec) (*partialfilter.Filter, error) {
	if spec.Name == "" {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "index name cannot be empty")
	}
	if strings.ContainsRune(spec.Name, 0) || len(spec.Name) > 1024 {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "invalid index name %.40q", spec.Name)
	}
	if len(spec.Key) == 0 {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "index key pattern cannot be empty")
	}
	if len(spec.Key) > 32 {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "index key pattern has %d fields; at most 32 are allowed", len(spec.Key))
	}
	seen := map[string]bool{}
	for _, k := range spec.Key {
		if k.Field == "" || strings.HasPrefix(k.Field, "$") || strings.Contains(k.Field, "..") ||
			strings.HasPrefix(k.Field, ".") || strings.HasSuffix(k.Field, ".") {
			return nil, mongoerr.New(mongoerr.CannotCreateIndex, "invalid index key field %q", k.Field)
		}
		if k.Direction != 1 && k.Direction != -1 {
			return nil, mongoerr.New(mongoerr.CannotCreateIndex, "index key %q: the direction must be 1 or -1; got %d", k.Field, k.Direction)
		}
		if seen[k.Field] {
			return nil, mongoerr.New(mongoerr.CannotCreateIndex, "index key field %q appears twice", k.Field)
		}
		seen[k.Field] = true
	}
	if v := spec.ExpireAfterSeconds; v != nil && (*v < 0 || *v > MaxExpireAfterSeconds) {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "'expireAfterSeconds' must be within [0, %d]; got %d", MaxExpireAfterSeconds, *v)
	}
	var f *partialfilter.Filter
	if spec.PartialFilterExpression != nil {
		var err error
		if f, err = partialfilter.Parse(spec.PartialFilterExpression); err != nil {
			return nil, mongoerr.New(mongoerr.CannotCreateIndex, "invalid partialFilterExpression: %v", mongoerr.MessageOf(err))
		}
		if err := f.ValidateForPartialIndex(); err != nil {
			return nil, err
		}
	}
	if spec.Archive && (!spec.IsTTL() || opts.TimeSeries == nil) {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "'archive' applies to a TTL index ('expireAfterSeconds') of a time-series collection")
	}
	if !spec.IsTTL() {
		return f, nil
	}
	if opts.Capped {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "a capped collection cannot have a TTL index")
	}
	// TTL indexes are single-field.
	if len(spec.Key) > 1 {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "TTL indexes are single-field indexes; compound indexes do not support TTL (key %s)", keyString(spec.Key))
	}
	field := spec.Key[0].Field
	ts := opts.TimeSeries
	if ts == nil {
		if field == "_id" {
			return nil, mongoerr.New(mongoerr.CannotCreateIndex, "the _id field does not support TTL indexes")
		}
		return f, nil
	}
	if field != ts.TimeField {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"TTL indexes on time-series collections must be on the timeField %q; got %q", ts.TimeField, field)
	}
	if f == nil {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"TTL indexes on time-series collections require a partialFilterExpression on the metaField; use the collection's expireAfterSeconds for all data")
	}
	if ts.MetaField == "" || !f.RefersOnlyTo(ts.MetaField) {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"the partialFilterExpression of a TTL index on a time-series collection may only refer to the metaField %q", ts.MetaField)
	}
	return f, nil
}

func keyString(key []IndexKey) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range key {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %d", k.Field, k.Direction)
	}
	b.WriteByte('}')
	return b.String()
}

// CreateIndex adds one index: CreateIndexes of a list of one. It returns
// the index name.
func (db *DB) CreateIndex(ctx context.Context, name string, spec IndexSpec) (created bool, indexName string, err error) {
	res, err := db.CreateIndexes(ctx, name, []IndexSpec{spec})
	if err != nil {
		if spec.Name == "" && len(spec.Key) > 0 {
			spec.Name = DefaultIndexName(spec.Key)
		}
		return false, spec.Name, err
	}
	return res[0].Created, res[0].Name, nil
}

// IndexCreated is what CreateIndexes did with one index of its list.
type IndexCreated struct {
	// Name is the index's name: MongoDB's default (DefaultIndexName) when
	// the spec had none.
	Name string
	// Created is false when an identical index existed (the built-in _id
	// index among them), or comes earlier in the list.
	Created bool
}

// CreateIndexes adds indexes to a collection, all or none, with MongoDB's
// conflict rules: an identical index is a no-op (created false); the same
// name with another key is IndexKeySpecsConflict (86); the same name or
// the same key and filter with other options is IndexOptionsConflict (85),
// including a changed expireAfterSeconds (collMod changes it) and a TTL
// index over an existing non-TTL one. Indexes with the same key but
// different partial filters coexist: one per sensor, say.
//
// Every spec is checked first, against the collection's indexes and the
// specs before it in the list, and a refusal of any creates none. The new
// indexes are then published in one catalog record, on a plain collection
// once their entries are built (one pass over the documents, writers held
// off), so that a crash leaves all of them or none.
func (db *DB) CreateIndexes(ctx context.Context, name string, specs []IndexSpec) ([]IndexCreated, error) {
	if err := db.checkWritable(); err != nil {
		return nil, err
	}
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one index")
	}
	for _, spec := range specs {
		if spec.Archive {
			if err := db.archiveServed(mongoerr.CannotCreateIndex); err != nil {
				return nil, err
			}
		}
	}
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	db.mu.RLock()
	opts := c.opts
	existing := append([]IndexSpec(nil), c.indexes...)
	dropped := c.gone.Load()
	db.mu.RUnlock()
	if dropped {
		return nil, notFound(name)
	}
	k := c.kind()
	out, add, err := planIndexes(k, &opts, existing, specs)
	if err != nil || len(add) == 0 {
		return out, err
	}
	if err := k.addIndexes(ctx, db, c, add); err != nil {
		return nil, err
	}
	return out, nil
}

// ValidateIndexSpecs checks specs as CreateIndexes would on a new plain
// collection, creating nothing: what a createIndexes that creates its
// collection checks before it does.
func ValidateIndexSpecs(specs []IndexSpec) error {
	if len(specs) == 0 {
		return mongoerr.New(mongoerr.BadValue, "Must specify at least one index")
	}
	_, _, err := planIndexes(plainKind{}, &CollectionOptions{}, nil, specs)
	return err
}

// planIndexes checks specs, in order, against the options and existing
// indexes of a collection of kind k and against the specs before them,
// with CreateIndexes' rules. It returns what each spec comes to and the
// indexes to add, in order.
func planIndexes(k kind, opts *CollectionOptions, existing, specs []IndexSpec) ([]IndexCreated, []IndexSpec, error) {
	out := make([]IndexCreated, len(specs))
	var add []IndexSpec
	for i, spec := range specs {
		if spec.Name == "" && len(spec.Key) > 0 {
			spec.Name = DefaultIndexName(spec.Key)
		}
		if done, name, err := k.builtinIndex(spec); err != nil {
			return nil, nil, err
		} else if done {
			out[i].Name = name
			continue
		}
		spec.ID = 0
		if _, err := validateIndex(opts, &spec); err != nil {
			return nil, nil, err
		}
		exists, err := indexConflict(existing, &spec)
		if err != nil {
			return nil, nil, err
		}
		out[i].Name = spec.Name
		if exists {
			continue
		}
		if len(existing) >= MaxIndexes {
			return nil, nil, mongoerr.New(mongoerr.CannotCreateIndex, "a collection holds at most %d indexes", MaxIndexes)
		}
		existing = append(existing, spec)
		add = append(add, spec)
		out[i].Created = true
	}
	return out, add, nil
}

// indexConflict reports whether an index identical to spec is among
// existing, and refuses spec when one conflicts with it.
func indexConflict(existing []IndexSpec, spec *IndexSpec) (exists bool, err error) {
	for _, old := range existing {
		if old.Name == spec.Name {
			if !sameKey(old.Key, spec.Key) {
				return false, mongoerr.New(mongoerr.IndexKeySpecsConflict,
					"an index named %q exists with a different key %s", spec.Name, keyString(old.Key))
			}
			if sameExpire(old.ExpireAfterSeconds, spec.ExpireAfterSeconds) && sameFilter(old.PartialFilterExpression, spec.PartialFilterExpression) {
				return true, nil
			}
			return false, indexOptionsConflict(&old)
		}
		if sameKey(old.Key, spec.Key) && sameFilter(old.PartialFilterExpression, spec.PartialFilterExpression) {
			if !old.IsTTL() && spec.IsTTL() {
				return false, mongoerr.New(mongoerr.IndexOptionsConflict,
					"index %q exists on %s without TTL; turn it into a TTL index with collMod", old.Name, keyString(old.Key))
			}
			return false, mongoerr.New(mongoerr.IndexOptionsConflict,
				"index %q already exists with the same key and filter and different options or name", old.Name)
		}
	}
	return false, nil
}

// builtinIndex is createIndex of the _id index, which a plain collection
// always has: it exists already, or the request is refused.
func (plainKind) builtinIndex(spec IndexSpec) (done bool, name string, err error) {
	switch {
	case len(spec.Key) == 1 && spec.Key[0].Field == "_id" && spec.IsTTL():
		// MongoDB's code for a TTL option on the _id index.
		return true, spec.Name, mongoerr.New(mongoerr.InvalidIndexSpecification, "the field '_id' cannot have a TTL index (expireAfterSeconds)")
	case sameKey(spec.Key, idKeyPattern) && spec.PartialFilterExpression == nil &&
		(spec.Name == IDIndexName || spec.Name == DefaultIndexName(idKeyPattern)):
		return true, IDIndexName, nil // the _id index exists always
	case spec.Name == IDIndexName:
		return true, spec.Name, mongoerr.New(mongoerr.IndexKeySpecsConflict, "the name %q belongs to the _id index", IDIndexName)
	}
	return false, spec.Name, nil
}

// builtinIndex: a time series has no index of its own.
func (timeSeriesKind) builtinIndex(spec IndexSpec) (bool, string, error) {
	return false, spec.Name, nil
}

// addIndexes records a time series' new indexes: definitions in its
// catalog record (TTL rules, or hints), with no entries to build. maintMu
// is held.
func (timeSeriesKind) addIndexes(ctx context.Context, db *DB, c *collection, specs []IndexSpec) error {
	ch := db.catalogChangeOf(c)
	ch.indexes = append(ch.indexes, specs...)
	return db.changeCatalog(c, ch)
}

// addIndexes builds a plain collection's new indexes (createPlainIndexes).
func (plainKind) addIndexes(ctx context.Context, db *DB, c *collection, specs []IndexSpec) error {
	return db.createPlainIndexes(ctx, c, specs)
}

// idKeyPattern is the key of the _id index.
var idKeyPattern = []IndexKey{{Field: "_id", Direction: 1}}

// createPlainIndexes builds new indexes of a plain collection with writers
// held off, then publishes them in one catalog record. maintMu is held.
// Their ids are persisted before any entry is written, so that entries
// left by a crash during the build, or by a build whose publishing record
// could not be written, belong to ids no later index gets.
func (db *DB) createPlainIndexes(ctx context.Context, c *collection, specs []IndexSpec) error {
	p := c.plain
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := db.catalogChangeOf(c)
	specs = slices.Clone(specs)
	for i := range specs {
		specs[i].ID = ch.nextIndexID
		ch.nextIndexID++
	}
	if err := db.changeCatalog(c, ch); err != nil {
		return err
	}
	if err := db.buildIndexes(ctx, c, specs); err != nil {
		for _, s := range specs {
			if derr := db.dropIndexEntries(c, s.ID); derr != nil {
				err = errors.Join(err, derr)
			}
		}
		return err
	}
	db.ddlStep("indexes built")
	ch = db.catalogChangeOf(c)
	ch.indexes = append(ch.indexes, specs...)
	return db.changeCatalog(c, ch)
}

func indexOptionsConflict(old *IndexSpec) error {
	if old.IsTTL() {
		return mongoerr.New(mongoerr.IndexOptionsConflict,
			"index %q exists with expireAfterSeconds %d and other options; change expireAfterSeconds with collMod", old.Name, *old.ExpireAfterSeconds)
	}
	return mongoerr.New(mongoerr.IndexOptionsConflict, "index %q exists with different options", old.Name)
}

// ListIndexes returns a collection's index definitions in creation order.
func (db *DB) ListIndexes(ctx context.Context, name string) ([]IndexSpec, error) {
	c, err := db.lookup(name)
	if err != nil {
		return nil, err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	return append(c.kind().builtinIndexes(), c.indexes...), nil
}

// DropIndex removes an index by name: DropIndexes of a list of one.
func (db *DB) DropIndex(ctx context.Context, name, index string) error {
	return db.DropIndexes(ctx, name, []string{index})
}

// DropIndexes removes indexes by name, all or none. Every name is checked
// first, in order: the built-in _id index cannot be dropped
// (InvalidOptions, 72), a name no index has is IndexNotFound (27); a
// refusal drops none. The definitions leave in one catalog record, so that
// a crash leaves all of them or none; a plain collection's entries are
// removed after it, with its writers held off (entries a crash leaves
// belong to ids no later index gets).
func (db *DB) DropIndexes(ctx context.Context, name string, indexes []string) error {
	if err := db.checkWritable(); err != nil {
		return err
	}
	c, err := db.lookup(name)
	if err != nil {
		return err
	}
	k := c.kind()
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	defer k.lockWriters(c)()
	ch := db.catalogChangeOf(c)
	var ids []uint32
	var gone []string
	for _, index := range indexes {
		for _, b := range k.builtinIndexes() {
			if b.Name == index {
				return mongoerr.New(mongoerr.InvalidOptions, "cannot drop _id index")
			}
		}
		i := indexByName(ch.indexes, index)
		switch {
		case i >= 0:
			ids = append(ids, ch.indexes[i].ID)
			gone = append(gone, index)
			ch.indexes = slices.Delete(ch.indexes, i, i+1)
		case !slices.Contains(gone, index): // a name given twice goes once
			return mongoerr.New(mongoerr.IndexNotFound, "index not found with name [%s]", index)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := db.changeCatalog(c, ch); err != nil {
		return err
	}
	db.ddlStep("indexes unlisted")
	var errs error
	for _, id := range ids {
		errs = errors.Join(errs, k.indexDropped(db, c, id))
	}
	return errs
}

// builtinIndexes lists the indexes a collection of the kind has without
// creating them: a plain collection's _id index.
func (plainKind) builtinIndexes() []IndexSpec {
	return []IndexSpec{{Name: IDIndexName, Key: idKeyPattern}}
}

func (timeSeriesKind) builtinIndexes() []IndexSpec { return nil }

// indexDropped removes the entries of a dropped index of a plain
// collection; its writers are held off (lockWriters).
func (plainKind) indexDropped(db *DB, c *collection, id uint32) error {
	return db.dropIndexEntries(c, id)
}

// indexDropped: a time series' index has no entries.
func (timeSeriesKind) indexDropped(*DB, *collection, uint32) error { return nil }

func indexByName(specs []IndexSpec, name string) int {
	for i := range specs {
		if specs[i].Name == name {
			return i
		}
	}
	return -1
}

// IndexMod is the index part of a collMod: the index named Name, or the
// one whose key is KeyPattern, gets ExpireAfterSeconds.
type IndexMod struct {
	Name               string
	KeyPattern         []IndexKey
	ExpireAfterSeconds int64
}

// IndexModResult reports an index collMod.
type IndexModResult struct {
	Name                  string
	OldExpireAfterSeconds *int64 // nil: the index had no TTL
	NewExpireAfterSeconds int64
}

// CollModIndex changes the expireAfterSeconds of an index, or turns a
// single-field index into a TTL index (SPEC 3.3): CollMod with the index
// alone.
func (db *DB) CollModIndex(ctx context.Context, name string, m IndexMod) (IndexModResult, error) {
	res, err := db.CollMod(ctx, name, CollModOptions{Index: &m})
	if err != nil {
		return IndexModResult{}, err
	}
	return *res.Index, nil
}

// modIndex checks the index part of a collMod against c's indexes and
// options in ch, and makes the change in ch. The caller holds maintMu.
func modIndex(c *collection, ch *catalogChange, m IndexMod) (IndexModResult, error) {
	if m.ExpireAfterSeconds < 0 || m.ExpireAfterSeconds > MaxExpireAfterSeconds {
		return IndexModResult{}, invalid("'expireAfterSeconds' must be within [0, %d]; got %d", MaxExpireAfterSeconds, m.ExpireAfterSeconds)
	}
	specs := ch.indexes
	i := -1
	switch {
	case m.Name != "" && m.KeyPattern != nil:
		return IndexModResult{}, invalid("name the index by 'name' or by 'keyPattern', not both")
	case m.Name != "":
		i = indexByName(specs, m.Name)
	case m.KeyPattern != nil:
		for j := range specs {
			if sameKey(specs[j].Key, m.KeyPattern) {
				if i >= 0 {
					return IndexModResult{}, mongoerr.New(mongoerr.BadValue,
						"several indexes have the key pattern %s (%q, %q); name the index", keyString(m.KeyPattern), specs[i].Name, specs[j].Name)
				}
				i = j
			}
		}
	default:
		return IndexModResult{}, invalid("the index to change needs a 'name' or a 'keyPattern'")
	}
	for _, b := range c.kind().builtinIndexes() {
		if i < 0 && (m.Name == b.Name || (m.KeyPattern != nil && sameKey(b.Key, m.KeyPattern))) {
			// The _id index is listed but cannot expire (MongoDB answers
			// the same).
			return IndexModResult{}, mongoerr.New(mongoerr.InvalidOptions, "the _id field does not support TTL indexes")
		}
	}
	if i < 0 {
		return IndexModResult{}, mongoerr.New(mongoerr.IndexNotFound, "cannot find index %s for collection %q", indexDesc(m), c.name)
	}
	next := specs[i]
	v := m.ExpireAfterSeconds
	next.ExpireAfterSeconds = &v
	if _, err := validateIndex(&ch.opts, &next); err != nil {
		// A collMod refusal is InvalidOptions, whatever createIndex says.
		return IndexModResult{}, mongoerr.New(mongoerr.InvalidOptions, "%s", mongoerr.MessageOf(err))
	}
	res := IndexModResult{Name: next.Name, OldExpireAfterSeconds: specs[i].ExpireAfterSeconds, NewExpireAfterSeconds: v}
	specs[i] = next
	return res, nil
}

func indexDesc(m IndexMod) string {
	if m.Name != "" {
		return strconv.Quote(m.Name)
	}
	return keyString(m.KeyPattern)
}

// compileRules builds c.rules from the options and indexes and sets the
// TTL of every series. DB.mu is held for writing.
func (c *collection) compileRules() {
	c.rulesVer++
	c.rules = nil // a new slice: Expire may hold a rule of the old one
	if ts := c.opts.TimeSeries; ts != nil {
		if c.opts.ExpireAfterSeconds != nil {
			c.rules = append(c.rules, ttl.Rule{ExpireAfterSeconds: *c.opts.ExpireAfterSeconds, Archive: c.opts.Archive})
		}
		for i := range c.indexes {
			spec := &c.indexes[i]
			if !spec.IsTTL() || len(spec.Key) != 1 || spec.Key[0].Field != ts.TimeField {
				continue
			}
			f, err := partialfilter.Parse(spec.PartialFilterExpression)
			if err != nil || spec.PartialFilterExpression == nil {
				continue // validated when created; a stored one always parses
			}
			c.rules = append(c.rules, ttl.Rule{Index: spec.Name, ExpireAfterSeconds: *spec.ExpireAfterSeconds, Filter: f, Archive: spec.Archive})
		}
	}
	// Each rule's required strings, quoted as meta keys hold them.
	c.ruleQuoted = make([][][]string, len(c.rules))
	for i := range c.rules {
		if f := c.rules[i].Filter; f != nil {
			plan := filterPlan{meta: f}
			c.ruleQuoted[i] = plan.requiredQuoted()
		}
	}
	c.plainRules, c.live = nil, nil
	if c.plain != nil {
		for i := range c.indexes {
			spec := &c.indexes[i]
			ix := newLiveIndex(*spec)
			c.live = append(c.live, ix)
			if spec.IsTTL() && len(spec.Key) == 1 {
				c.plainRules = append(c.plainRules, plainRule{index: ix, seconds: *spec.ExpireAfterSeconds})
			}
		}
	}
	for _, s := range c.series.byOrd {
		ttl := s.ttl
		c.setSeriesTTL(s)
		if s.ttl != ttl {
			// Rows a shorter TTL expired and deleted would be visible
			// again under a longer one, for all lastT says: the newest
			// row is read back again, by a read that starts after this
			// (lastForgets).
			s.forgetLast()
			c.lastForgets++
		}
	}
}

// setSeriesTTL computes the TTL of s from c.rules. DB.mu is held for
// writing.
func (c *collection) setSeriesTTL(s *series) {
	s.ttl, s.archive = -1, false
	if len(c.rules) == 0 {
		return
	}
	var m seriesMetaDoc
	for i := range c.rules {
		r := &c.rules[i]
		if !c.ruleMatches(i, s, &m) {
			continue
		}
		// The shortest TTL cuts the series; of rules with the same TTL,
		// one that archives wins: nothing is lost for a tie.
		if s.ttl < 0 || r.ExpireAfterSeconds < s.ttl {
			s.ttl, s.archive = r.ExpireAfterSeconds, r.Archive
		} else if r.ExpireAfterSeconds == s.ttl && r.Archive {
			s.archive = true
		}
	}
}

// seriesMetaDoc is a series' meta document (collection.metaDoc), made on
// first use by collection.ruleMatches.
type seriesMetaDoc struct {
	doc  map[string]any
	made bool
}

// ruleMatches reports whether rule i of c applies to s, decoding s's meta
// value only when the rule has a filter its key may pass (its required
// strings are in the key): with a million series, a rule on the whole
// collection, or one naming a site, decodes few or none. DB.mu is held.
func (c *collection) ruleMatches(i int, s *series, m *seriesMetaDoc) bool {
	r := &c.rules[i]
	if r.Filter == nil {
		return true
	}
	if i < len(c.ruleQuoted) && !keyMayMatch(s.metaKey, c.ruleQuoted[i]) {
		return false
	}
	if !m.made {
		m.doc, m.made = c.metaDoc(seriesMeta(s)), true
	}
	return r.Matches(m.doc)
}

// metaDoc is the document a partial filter sees for a series:
// {metaField: meta}, or {} when the series has no meta value.
func (c *collection) metaDoc(meta any) map[string]any {
	doc := map[string]any{}
	if ts := c.opts.TimeSeries; ts != nil && ts.MetaField != "" && meta != nil {
		doc[ts.MetaField] = meta
	}
	return doc
}
