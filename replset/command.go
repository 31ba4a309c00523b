package replset

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// Op is the kind of a replicated command. The values are written in the
// raft log and never change.
type Op uint8

// The commands the log carries.
const (
	OpCreateCollection Op = 1
	OpDropCollection   Op = 2
	OpInsert           Op = 3 // measurements of a time-series collection
	OpInsertDocuments  Op = 4 // documents of a plain collection
	OpDelete           Op = 5 // measurements matching a filter
	OpDeleteDocuments  Op = 6 // documents matching a filter
	OpCreateIndex      Op = 7
	OpExpireDocuments  Op = 8  // documents a TTL index expired at a time the leader chose
	OpCollMod          Op = 9  // a collection's options (expireAfterSeconds, bucketing)
	OpCollModIndex     Op = 10 // an index's expireAfterSeconds
	OpDropIndex        Op = 11 // an index, by name (Index.Name)
	OpMember           Op = 12 // a member's client addresses, or their removal (Member)
	// OpInsertKeyed is OpInsert with the meta values as the engine's
	// canonical keys and the field names, each written once a command
	// (what Node.Insert writes; OpInsert entries of older logs still
	// apply).
	OpInsertKeyed Op = 13
	// OpUpdateDocuments applies update operators (Update, JSON) to the
	// documents Filter matches, at the time Now the leader chose;
	// OpReplaceDocument replaces the first match with Replacement.
	OpUpdateDocuments Op = 14
	OpReplaceDocument Op = 15
	// OpDeleteOne deletes the first document Filter matches in _id order
	// (a plain collection's deleteOne), chosen where it is applied, so
	// that finding and deleting it is one step on every member.
	OpDeleteOne Op = 16
	// OpCreateIndexes creates Indexes, all or none; OpDropIndexes drops
	// the indexes IndexNames names, all or none; OpCollModIndexed is a
	// collMod with an index change (CollMod.Index) beside the collection's
	// own, applied as one change. Each is one entry, so that every member
	// applies the whole command or refuses it whole.
	OpCreateIndexes  Op = 17
	OpDropIndexes    Op = 18
	OpCollModIndexed Op = 19
)

func (o Op) String() string {
	switch o {
	case OpCreateCollection:
		return "create"
	case OpDropCollection:
		return "drop"
	case OpInsert, OpInsertKeyed:
		return "insert"
	case OpInsertDocuments:
		return "insertDocuments"
	case OpDelete:
		return "delete"
	case OpDeleteDocuments:
		return "deleteDocuments"
	case OpDeleteOne:
		return "deleteOne"
	case OpCreateIndex:
		return "createIndex"
	case OpExpireDocuments:
		return "expireDocuments"
	case OpCollMod:
		return "collMod"
	case OpCollModIndex:
		return "collModIndex"
	case OpDropIndex:
		return "dropIndex"
	case OpCreateIndexes:
		return "createIndexes"
	case OpDropIndexes:
		return "dropIndexes"
	case OpCollModIndexed:
		return "collModIndexed"
	case OpMember:
		return "member"
	case OpUpdateDocuments:
		return "update"
	case OpReplaceDocument:
		return "replace"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// commandFormat is the version byte every command starts with; a command
// of a retryable write (Session set) starts with commandFormatSession and
// carries its session key after the collection.
const (
	commandFormat        byte = 1
	commandFormatSession byte = 2
)

// Command is one state change, as the raft log carries it. Only the fields
// of its Op are meaningful.
type Command struct {
	Op         Op
	Collection string
	// Options of OpCreateCollection.
	Options timeseries.CollectionOptions
	// Unordered of OpInsert and OpInsertDocuments.
	Unordered bool
	// Measurements of OpInsert and OpInsertKeyed.
	Measurements []model.Measurement
	// Documents of OpInsertDocuments, and their field orders (Orders may
	// be shorter, or nil: name order); each travels encoded in its order.
	Documents []document.Doc
	Orders    []*document.Order
	// Filter of OpDelete, OpDeleteDocuments and OpDeleteOne: a MongoDB
	// filter in JSON, parsed by partialfilter.ParseJSON when the command is
	// applied.
	Filter []byte
	// Index of OpCreateIndex; of OpExpireDocuments and OpDropIndex, only
	// its Name.
	Index timeseries.IndexSpec
	// Indexes of OpCreateIndexes; IndexNames of OpDropIndexes.
	Indexes    []timeseries.IndexSpec
	IndexNames []string
	// Now of OpExpireDocuments: the time, in nanoseconds since the epoch,
	// at which the leader decided the expiry.
	Now int64
	// CollMod of OpCollMod and OpCollModIndexed; IndexMod of
	// OpCollModIndex.
	CollMod  timeseries.CollModOptions
	IndexMod timeseries.IndexMod
	// Member of OpMember: a member's addresses to record, or with Remove
	// to forget. Collection is empty.
	Member MemberAddrs
	// Update (JSON, as document.ParseUpdate takes it) and Multi of
	// OpUpdateDocuments, with Filter and Now; Replacement of
	// OpReplaceDocument, with Filter.
	Update           []byte
	Multi            bool
	Replacement      document.Doc
	ReplacementOrder *document.Order
	// Session identifies a retryable write's statement (WithSession): a
	// command whose session key was applied before is not applied again,
	// and answers the result the first one had. Only the writes that are
	// not idempotent carry one (retryable).
	Session string
}

// encode appends the command's encoding to dst (docs/replication.md):
//
//	version (1) | op (1) | collection (uvarint length, bytes) | body
//	version (2) | op (1) | collection | session (uvarint length, bytes) | body
//
// The body of create is the options in JSON; of insert, a flags byte and a
// uvarint count of measurements, each: time (varint ns), meta (uvarint
// length, document.Encode of {"m": meta}), a uvarint count of fields, each:
// name (uvarint length, bytes), kind (1), value (float: 8 bytes little
// endian; int and date: varint; string: uvarint length, bytes; bool: 1);
// of insertDocuments, a flags byte, a uvarint count, each document
// (uvarint length, document.Encode); of the deletes, the filter's JSON; of
// createIndex, the spec in JSON without its partial filter, then the
// partial filter (uvarint length, document.Encode; length 0 for none), so
// that its dates and integers keep their types; of expireDocuments, the
// index name (uvarint length, bytes) and the time (varint ns); of collMod
// and collModIndex, the changes in JSON (uvarint length, bytes); of
// dropIndex, the index name (uvarint length, bytes); of createIndexes, a
// uvarint count of indexes, each as createIndex's body; of dropIndexes, a
// uvarint count of names, each (uvarint length, bytes); of collModIndexed,
// as collMod's; of member, the MemberAddrs in JSON (uvarint length,
// bytes). The body of insertKeyed is
// a flags byte, the distinct meta keys (uvarint count, each uvarint length
// and bytes: model.MetaKey, the canonical encoding), the distinct
// field names (the same), a uvarint count of measurements, each: time
// (varint ns), meta (uvarint: 0 none, 1 a value follows as in insert, k
// the key k-2), a uvarint count of fields, each: name (uvarint index),
// kind and value as in insert. Of update: the filter and the update (each
// uvarint length, JSON), a flags byte (1: multi), the time (varint ns); of
// replace: the filter (uvarint length, JSON) and the replacement (uvarint
// length, document.Encode).
func (c *Command) encode(dst []byte) ([]byte, error) {
	dst, _, err := c.encodeOwn(dst, false)
	return dst, err
}

// encodeOwn is encode; with own, for an OpInsertKeyed whose meta values
// all became canonical keys, it also returns the command a member decodes
// from the encoding, built without decoding it: c's measurements with
// those keys as their meta values (c's own slice when they already were).
// It shares c's fields. Otherwise, or without own, the command is nil.
func (c *Command) encodeOwn(dst []byte, own bool) ([]byte, *Command, error) {
	var ownCmd *Command
	if c.Session != "" {
		dst = append(dst, commandFormatSession, byte(c.Op))
		dst = appendBytes(dst, []byte(c.Collection))
		dst = appendBytes(dst, []byte(c.Session))
	} else {
		dst = append(dst, commandFormat, byte(c.Op))
		dst = appendBytes(dst, []byte(c.Collection))
	}
	switch c.Op {
	case OpCreateCollection:
		js, err := json.Marshal(c.Options)
		if err != nil {
			return nil, nil, fmt.Errorf("replset: encode options of %q: %w", c.Collection, err)
		}
		dst = appendBytes(dst, js)
	case OpDropCollection:
	case OpInsert:
		dst = append(dst, flags(c.Unordered))
		dst = binary.AppendUvarint(dst, uint64(len(c.Measurements)))
		for i := range c.Measurements {
			var err error
			if dst, err = appendMeasurement(dst, &c.Measurements[i]); err != nil {
				return nil, nil, fmt.Errorf("replset: encode measurement %d of %q: %w", i, c.Collection, err)
			}
		}
	case OpInsertKeyed:
		dst = append(dst, flags(c.Unordered))
		var (
			ms  []model.Measurement
			err error
		)
		if dst, ms, err = appendKeyed(dst, c.Measurements, own); err != nil {
			return nil, nil, fmt.Errorf("replset: encode measurements of %q: %w", c.Collection, err)
		}
		if ms != nil {
			ownCmd = &Command{Op: c.Op, Collection: c.Collection, Unordered: c.Unordered, Measurements: ms, Session: c.Session}
		}
	case OpInsertDocuments:
		dst = append(dst, flags(c.Unordered))
		dst = binary.AppendUvarint(dst, uint64(len(c.Documents)))
		var buf []byte
		for i, d := range c.Documents {
			var err error
			var o *document.Order
			if i < len(c.Orders) {
				o = c.Orders[i]
			}
			if buf, err = document.EncodeOrdered(buf[:0], d, o); err != nil {
				return nil, nil, fmt.Errorf("replset: encode document %d of %q: %w", i, c.Collection, err)
			}
			dst = appendBytes(dst, buf)
		}
	case OpDelete, OpDeleteDocuments, OpDeleteOne:
		dst = appendBytes(dst, c.Filter)
	case OpDropIndex:
		dst = appendBytes(dst, []byte(c.Index.Name))
	case OpUpdateDocuments:
		dst = appendBytes(dst, c.Filter)
		dst = appendBytes(dst, c.Update)
		dst = append(dst, flags(c.Multi))
		dst = binary.AppendVarint(dst, c.Now)
	case OpReplaceDocument:
		dst = appendBytes(dst, c.Filter)
		repl, err := document.EncodeOrdered(nil, c.Replacement, c.ReplacementOrder)
		if err != nil {
			return nil, nil, fmt.Errorf("replset: encode the replacement in %q: %w", c.Collection, err)
		}
		dst = appendBytes(dst, repl)
	case OpCreateIndexes:
		dst = binary.AppendUvarint(dst, uint64(len(c.Indexes)))
		for i := range c.Indexes {
			var err error
			if dst, err = appendIndexSpec(dst, &c.Indexes[i]); err != nil {
				return nil, nil, fmt.Errorf("replset: encode index %d of %q: %w", i, c.Collection, err)
			}
		}
	case OpDropIndexes:
		dst = binary.AppendUvarint(dst, uint64(len(c.IndexNames)))
		for _, n := range c.IndexNames {
			dst = appendBytes(dst, []byte(n))
		}
	case OpCollMod, OpCollModIndexed, OpCollModIndex, OpMember:
		var v any = c.CollMod
		switch c.Op {
		case OpCollModIndex:
			v = c.IndexMod
		case OpMember:
			v = c.Member
		}
		js, err := json.Marshal(v)
		if err != nil {
			return nil, nil, fmt.Errorf("replset: encode %s of %q: %w", c.Op, c.Collection, err)
		}
		dst = appendBytes(dst, js)
	case OpCreateIndex:
		var err error
		if dst, err = appendIndexSpec(dst, &c.Index); err != nil {
			return nil, nil, fmt.Errorf("replset: encode index of %q: %w", c.Collection, err)
		}
	case OpExpireDocuments:
		dst = appendBytes(dst, []byte(c.Index.Name))
		dst = binary.AppendVarint(dst, c.Now)
	default:
		return nil, nil, fmt.Errorf("replset: encode: unknown command %s", c.Op)
	}
	return dst, ownCmd, nil
}

// appendIndexSpec appends an index spec: in JSON without its partial
// filter, then the partial filter (uvarint length, document.Encode; length
// 0 for none), so that its dates and integers keep their types.
func appendIndexSpec(dst []byte, spec *timeseries.IndexSpec) ([]byte, error) {
	s := *spec
	s.PartialFilterExpression = nil
	js, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	dst = appendBytes(dst, js)
	var pf []byte
	if spec.PartialFilterExpression != nil {
		if pf, err = document.Encode(nil, spec.PartialFilterExpression); err != nil {
			return nil, fmt.Errorf("partial filter of index %q: %w", spec.Name, err)
		}
	}
	return appendBytes(dst, pf), nil
}

func flags(unordered bool) byte {
	if unordered {
		return 1
	}
	return 0
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Meta references of insertKeyed.
const (
	metaNone  = 0
	metaValue = 1
	metaKeys  = 2 // key k is written k+metaKeys
)

// appendKeyed appends the body of insertKeyed after its flags byte. A
// meta value that has a canonical key is written as that key, which the
// engine takes as it is (a line-protocol series' key already is one); one
// that has none (the engine will refuse it) is written as a value, so
// that every member refuses it alike. With own, when every meta value was
// written as a key (or is nil), it also returns the measurements a member
// decodes: ms itself when their meta values are keys already, else a copy
// with the keys as meta values; nil otherwise.
func appendKeyed(dst []byte, ms []model.Measurement, own bool) ([]byte, []model.Measurement, error) {
	keyIdx := map[model.MetaKey]uint64{}
	var keys []model.MetaKey
	nameIdx := map[string]uint64{}
	var names []string
	// The field names' indexes, per measurement: a measurement with the
	// same names as the one before (most of a batch) shares its list.
	var prevFields []model.Field
	var prevNames []uint64
	nameRefs := make([][]uint64, len(ms))
	refs := make([]uint64, len(ms))
	allKeys := true // every meta value is a MetaKey or nil
	for i := range ms {
		m := &ms[i]
		switch v := m.Meta.(type) {
		case nil:
			refs[i] = metaNone
		case model.MetaKey:
			refs[i] = keyRef(keyIdx, &keys, v)
		default:
			allKeys = false
			c, err := model.CanonicalMeta(v)
			if err != nil {
				refs[i] = metaValue
				break
			}
			refs[i] = keyRef(keyIdx, &keys, model.MetaKey(c))
		}
		if i > 0 && model.SameFieldNames(m.Fields, prevFields) {
			nameRefs[i] = prevNames
			continue
		}
		idx := make([]uint64, len(m.Fields))
		for j, f := range m.Fields {
			n, ok := nameIdx[f.Name]
			if !ok {
				n = uint64(len(names))
				nameIdx[f.Name] = n
				names = append(names, f.Name)
			}
			idx[j] = n
		}
		nameRefs[i], prevFields, prevNames = idx, m.Fields, idx
	}
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for _, k := range keys {
		dst = appendBytes(dst, []byte(k))
	}
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, n := range names {
		dst = appendBytes(dst, []byte(n))
	}
	dst = binary.AppendUvarint(dst, uint64(len(ms)))
	for i := range ms {
		m := &ms[i]
		dst = binary.AppendVarint(dst, m.Time)
		dst = binary.AppendUvarint(dst, refs[i])
		if refs[i] == metaValue {
			own = false
			meta, err := document.Encode(nil, document.Doc{"m": m.Meta})
			if err != nil {
				return nil, nil, fmt.Errorf("measurement %d: %w", i, err)
			}
			dst = appendBytes(dst, meta)
		}
		dst = binary.AppendUvarint(dst, uint64(len(m.Fields)))
		for j, f := range m.Fields {
			dst = binary.AppendUvarint(dst, nameRefs[i][j])
			var err error
			if dst, err = appendValue(dst, f); err != nil {
				return nil, nil, err
			}
		}
	}
	switch {
	case !own:
		return dst, nil, nil
	case allKeys:
		return dst, ms, nil
	}
	keyed := make([]model.Measurement, len(ms))
	for i, m := range ms {
		if refs[i] >= metaKeys {
			m.Meta = keys[refs[i]-metaKeys]
		}
		keyed[i] = m
	}
	return dst, keyed, nil
}

// keyRef returns the reference of meta key k in keys, adding it.
func keyRef(idx map[model.MetaKey]uint64, keys *[]model.MetaKey, k model.MetaKey) uint64 {
	i, ok := idx[k]
	if !ok {
		i = uint64(len(*keys))
		idx[k] = i
		*keys = append(*keys, k)
	}
	return i + metaKeys
}

// appendValue appends a field's kind and value.
func appendValue(dst []byte, f model.Field) ([]byte, error) {
	dst = append(dst, byte(f.Value.Kind))
	switch f.Value.Kind {
	case model.KindFloat:
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(f.Value.F))
	case model.KindInt, model.KindDate, model.KindInt32:
		dst = binary.AppendVarint(dst, f.Value.I)
	case model.KindString, model.KindBSON, model.KindObjectID:
		dst = appendBytes(dst, []byte(f.Value.S))
	case model.KindBool:
		dst = append(dst, flags(f.Value.B))
	default:
		return nil, fmt.Errorf("field %q has unknown kind %d", f.Name, f.Value.Kind)
	}
	return dst, nil
}

func appendMeasurement(dst []byte, m *model.Measurement) ([]byte, error) {
	dst = binary.AppendVarint(dst, m.Time)
	v := m.Meta
	if k, ok := v.(model.MetaKey); ok {
		// Already encoded (line protocol): carried as the value it
		// encodes, which every member's engine encodes to k again.
		var err error
		if v, err = model.DecodeMeta(string(k)); err != nil {
			return nil, mongoerr.New(mongoerr.BadValue, "invalid meta key: %v", err)
		}
	}
	meta, err := document.Encode(nil, document.Doc{"m": v})
	if err != nil {
		return nil, err
	}
	dst = appendBytes(dst, meta)
	dst = binary.AppendUvarint(dst, uint64(len(m.Fields)))
	for _, f := range m.Fields {
		dst = appendBytes(dst, []byte(f.Name))
		var err error
		if dst, err = appendValue(dst, f); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// decodeCommand decodes b. The command's slices do not alias b.
func decodeCommand(b []byte) (*Command, error) {
	d := decoder{b: b}
	format := d.byte1()
	if d.err == nil && format != commandFormat && format != commandFormatSession {
		return nil, fmt.Errorf("%w: command format %d, want %d or %d", ErrCorrupt, format, commandFormat, commandFormatSession)
	}
	c := &Command{Op: Op(d.byte1()), Collection: string(d.bytes())}
	if format == commandFormatSession {
		if c.Session = string(d.bytes()); d.err == nil && c.Session == "" {
			d.err = fmt.Errorf("%w: an empty session key", ErrCorrupt)
		}
	}
	switch c.Op {
	case OpCreateCollection:
		js := d.bytes()
		if d.err == nil {
			if err := json.Unmarshal(js, &c.Options); err != nil {
				d.err = fmt.Errorf("%w: options of create %q: %v", ErrCorrupt, c.Collection, err)
			}
		}
	case OpDropCollection:
	case OpInsert:
		c.Unordered = d.byte1() == 1
		n := d.count(2)
		if n > 0 {
			c.Measurements = make([]model.Measurement, n)
		}
		for i := range c.Measurements {
			d.measurement(&c.Measurements[i])
		}
	case OpInsertKeyed:
		c.Unordered = d.byte1() == 1
		d.keyed(c)
	case OpInsertDocuments:
		c.Unordered = d.byte1() == 1
		n := d.count(2)
		if n > 0 {
			c.Documents = make([]document.Doc, n)
			c.Orders = make([]*document.Order, n)
		}
		for i := range c.Documents {
			raw := d.bytes()
			if d.err != nil {
				break
			}
			doc, order, err := document.DecodeWithOrder(raw)
			if err != nil {
				d.err = fmt.Errorf("%w: document %d: %v", ErrCorrupt, i, err)
				break
			}
			c.Documents[i], c.Orders[i] = doc, order
		}
	case OpDelete, OpDeleteDocuments, OpDeleteOne:
		c.Filter = d.bytes()
	case OpDropIndex:
		c.Index.Name = string(d.bytes())
	case OpUpdateDocuments:
		c.Filter, c.Update = d.bytes(), d.bytes()
		c.Multi = d.byte1() == 1
		c.Now = d.varint()
	case OpReplaceDocument:
		c.Filter = d.bytes()
		raw := d.bytes()
		if d.err != nil {
			break
		}
		doc, order, err := document.DecodeWithOrder(raw)
		if err != nil {
			d.err = fmt.Errorf("%w: replacement: %v", ErrCorrupt, err)
			break
		}
		c.Replacement, c.ReplacementOrder = doc, order
	case OpCreateIndexes:
		n := d.count(2)
		if n > 0 {
			c.Indexes = make([]timeseries.IndexSpec, n)
		}
		for i := range c.Indexes {
			d.indexSpec(&c.Indexes[i])
		}
	case OpDropIndexes:
		n := d.count(1)
		if n > 0 {
			c.IndexNames = make([]string, n)
		}
		for i := range c.IndexNames {
			c.IndexNames[i] = string(d.bytes())
		}
	case OpCollMod, OpCollModIndexed, OpCollModIndex, OpMember:
		js := d.bytes()
		if d.err != nil {
			break
		}
		var v any = &c.CollMod
		switch c.Op {
		case OpCollModIndex:
			v = &c.IndexMod
		case OpMember:
			v = &c.Member
		}
		if err := json.Unmarshal(js, v); err != nil {
			d.err = fmt.Errorf("%w: %s of %q: %v", ErrCorrupt, c.Op, c.Collection, err)
		}
	case OpCreateIndex:
		d.indexSpec(&c.Index)
	case OpExpireDocuments:
		c.Index.Name = string(d.bytes())
		c.Now = d.varint()
	default:
		if d.err == nil {
			d.err = fmt.Errorf("%w: unknown command %s", ErrCorrupt, c.Op)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d bytes after a %s command", ErrCorrupt, len(d.b), c.Op)
	}
	if d.err != nil {
		return nil, d.err
	}
	return c, nil
}

// indexSpec decodes an index spec (appendIndexSpec).
func (d *decoder) indexSpec(spec *timeseries.IndexSpec) {
	js, pf := d.bytes(), d.bytes()
	if d.err != nil {
		return
	}
	if err := json.Unmarshal(js, spec); err != nil {
		d.err = fmt.Errorf("%w: index: %v", ErrCorrupt, err)
		return
	}
	if len(pf) > 0 {
		doc, err := document.Decode(pf)
		if err != nil {
			d.err = fmt.Errorf("%w: partial filter of index %q: %v", ErrCorrupt, spec.Name, err)
			return
		}
		spec.PartialFilterExpression = doc
	}
}

// decoder reads the encodings of this package. The first failure sticks in
// err; later reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or invalid %s", ErrCorrupt, what)
	}
	d.b = nil
}

func (d *decoder) byte1() byte {
	if len(d.b) < 1 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes reads a uvarint length and that many bytes, copied.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("length")
		return nil
	}
	if n == 0 {
		return nil
	}
	v := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return v
}

// count reads a count of items of at least min bytes each, so that a
// damaged count cannot make the decoder allocate more than the input
// could hold.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail("count")
		return 0
	}
	return int(n)
}

func (d *decoder) measurement(m *model.Measurement) {
	m.Time = d.varint()
	meta := d.bytes()
	if d.err != nil {
		return
	}
	doc, err := document.Decode(meta)
	if err != nil {
		d.err = fmt.Errorf("%w: meta: %v", ErrCorrupt, err)
		return
	}
	m.Meta = doc["m"]
	n := d.count(3)
	if n > 0 {
		m.Fields = make([]model.Field, n)
	}
	for i := range m.Fields {
		f := &m.Fields[i]
		f.Name = string(d.bytes())
		if !d.value(f) {
			return
		}
	}
}

// maxFieldSlab bounds the fields keyed decodes into one slice.
const maxFieldSlab = 1 << 16

// keyed decodes the body of insertKeyed after its flags byte.
func (d *decoder) keyed(c *Command) {
	keys := make([]model.MetaKey, d.count(1))
	for i := range keys {
		keys[i] = model.MetaKey(d.bytes())
	}
	names := make([]string, d.count(1))
	for i := range names {
		names[i] = string(d.bytes())
	}
	n := d.count(3)
	if d.err != nil {
		return
	}
	if n > 0 {
		c.Measurements = make([]model.Measurement, n)
	}
	// The fields of all measurements are cut from a few large slices:
	// one allocation per command where the measurements have as many
	// fields each, not one per measurement.
	var slab []model.Field
	for i := range c.Measurements {
		m := &c.Measurements[i]
		m.Time = d.varint()
		switch ref := d.uvarint(); {
		case d.err != nil:
			return
		case ref == metaNone:
		case ref == metaValue:
			meta := d.bytes()
			if d.err != nil {
				return
			}
			doc, err := document.Decode(meta)
			if err != nil {
				d.err = fmt.Errorf("%w: meta: %v", ErrCorrupt, err)
				return
			}
			m.Meta = doc["m"]
		case ref-metaKeys < uint64(len(keys)):
			m.Meta = keys[ref-metaKeys]
		default:
			d.err = fmt.Errorf("%w: meta key %d of %d", ErrCorrupt, ref-metaKeys, len(keys))
			return
		}
		nf := d.count(2)
		if nf > 0 {
			if len(slab) < nf {
				slab = make([]model.Field, max(nf, min(nf*(n-i), maxFieldSlab)))
			}
			m.Fields, slab = slab[:nf:nf], slab[nf:]
		}
		for j := range m.Fields {
			f := &m.Fields[j]
			ni := d.uvarint()
			if d.err == nil && ni >= uint64(len(names)) {
				d.err = fmt.Errorf("%w: field name %d of %d", ErrCorrupt, ni, len(names))
			}
			if d.err != nil {
				return
			}
			f.Name = names[ni]
			if !d.value(f) {
				return
			}
		}
	}
}

// value decodes a field's kind and value; false on an error (in d.err).
func (d *decoder) value(f *model.Field) bool {
	f.Value.Kind = model.Kind(d.byte1())
	switch f.Value.Kind {
	case model.KindFloat:
		if len(d.b) < 8 {
			d.fail("float")
			return false
		}
		f.Value.F = math.Float64frombits(binary.LittleEndian.Uint64(d.b))
		d.b = d.b[8:]
	case model.KindInt, model.KindDate, model.KindInt32:
		f.Value.I = d.varint()
	case model.KindString, model.KindBSON, model.KindObjectID:
		f.Value.S = string(d.bytes())
	case model.KindBool:
		f.Value.B = d.byte1() == 1
	default:
		if d.err == nil {
			d.err = fmt.Errorf("%w: field %q has unknown kind %d", ErrCorrupt, f.Name, f.Value.Kind)
		}
		return false
	}
	return d.err == nil
}
