package timeseries

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/bucket"
)

// series is one meta value of a collection and its buckets in memory. Fields
// are guarded by DB.mu.
type series struct {
	id        uint64
	coll      *collection
	metaKey   string
	persisted bool
	// durable is persisted, for readers without DB.mu: set once a
	// checkpoint made the series' record durable (or the series was
	// loaded at open), after which an insert record names the series by
	// its id rather than by its meta key (recInsertByID).
	durable atomic.Bool
	// hot is set while the series is in collection.hot.
	hot bool
	// archive is set when the rule that gives the series its TTL moves
	// expiring data to the archive (collection.setSeriesTTL).
	archive bool
	// lastKnown is set while lastT, lastNum and everNum are exact (with
	// everNum all ones, "any", for a series read back: recoverLast).
	// lastLost is set once a delete or a meta update reached the series:
	// they are not made exact again until the store is opened again. A
	// series made since the store opened starts known; one loaded at
	// open, or whose TTL changed, neither (lastRows).
	lastKnown, lastLost bool
	// rowsHint is the most rows a bucket of the series has taken so far
	// (as seen when it opened the next): the capacity a new bucket's
	// columns start with, so that they do not grow by doubling.
	rowsHint int32
	// ord numbers the series within its collection, from 0 in the order
	// they were added (collection.addSeries): an index into per-series
	// bitsets (rollup marks) where a map would cost a lookup a row.
	ord uint32
	// group is 1 + the index of the group an insert grouping its batch
	// last gave the series (groupBatch), 0 for none; any insert's.
	group atomic.Uint32
	// ttl is the series' effective TTL in seconds, -1 for none
	// (collection.setSeriesTTL).
	ttl int64
	// storedMax bounds the measurement times of the series' stored
	// (checkpointed) buckets: none is later. math.MinInt64 when nothing
	// is stored, math.MaxInt64 when unknown (a series loaded at open). A
	// read whose range starts after it does not look in Pebble, so
	// reading the open hour of a fleet costs no seek per series. It only
	// grows: deletes, TTL passes and merges leave it an upper bound.
	storedMax int64
	// lastT is the time of the newest row of the series' buckets that
	// left memory (math.MinInt64: none), lastNum the fields, as bits by
	// index in the collection's name table, that hold a number
	// (numberKind) in a row at lastT, and everNum those that held one in
	// a row of those buckets (foldLast).
	lastT            int64
	lastNum, everNum uint32
	// buckets holds the open buckets and the sealed ones not yet written
	// by a checkpoint, in no particular order.
	buckets []*memBucket
}

// markHot puts s in c.hot unless it is there. DB.mu is held for writing.
func (c *collection) markHot(s *series) {
	if !s.hot {
		s.hot = true
		c.hot = append(c.hot, s)
	}
}

// coolHot takes out of c.hot the series that are persisted and hold no
// bucket. DB.mu is held for writing.
func (c *collection) coolHot() {
	kept := c.hot[:0]
	for _, s := range c.hot {
		if s.persisted && len(s.buckets) == 0 {
			s.hot = false
			if cap(s.buckets) > 0 {
				s.buckets = nil // an idle series keeps no slice
			}
			continue
		}
		kept = append(kept, s)
	}
	clear(c.hot[len(kept):])
	c.hot = kept
	if cap(c.hot) > 64 && len(c.hot) < cap(c.hot)/4 {
		c.hot = append([]*series(nil), c.hot...)
	}
}

// memBucket is a bucket in memory: open (taking measurements) or sealed and
// waiting for the next checkpoint. Its rows are its frozen rows, then its
// open rows or the rows of cols. Its columns, open rows and frozen rows
// only ever grow by appending, and every other change replaces the slices,
// so a reader that captured a prefix under DB.mu can read it after
// releasing the lock.
type memBucket struct {
	// The fields a write checks first (fits), at the front: a fleet's
	// write reaches another series' buckets at every row, and a bucket
	// it passes over then costs it one cache line, not three.
	minTime int64 // rounded minimum: the bucket covers [minTime, minTime+span)
	span    int64
	size    int // MongoDB-style data size, for the byte limit
	// frozenRows is the rows frozen holds.
	frozenRows int
	sealed     bool
	// unordered is set once a row came before an earlier one in time:
	// when it is clear, the rows are in time order.
	unordered bool
	// oor is set once the bucket holds a measurement outside the range TTL
	// works on; such a bucket counts in collection.oorBuckets.
	oor bool
	// snapshot is true when an open-bucket snapshot of this bucket is in
	// Pebble; dirty when the bucket changed since that snapshot.
	snapshot bool
	dirty    bool
	// snapFrozen is set when that snapshot is the bucket's frozen rows
	// (bucket.AppendSnapshot), clear when it is an encoded bucket.
	snapFrozen bool
	lastOver   bool
	hdrShared  bool
	// cols holds the header (name, type) of every column of the bucket,
	// in the order the frozen and open rows index them, and the plain rows
	// taken since the last freeze when the bucket takes plain rows (open,
	// below).
	cols bucket.Columns
	id   uint64
	// open holds the rows taken since the last freeze, openRows of them,
	// when cols holds none (openrows.go): cols.Fields then lists the
	// columns' names and types only, and is never written to (a column
	// added makes a new list), so that buckets share it (hdrShared: the
	// collection's copy, collection.shareHeaders) and a checkpoint takes
	// it as it is. Plain rows in cols are what a thaw, a delete or a
	// bucket read back at open leaves, and what a store that never
	// freezes takes (limits.freezeAt); a bucket holds open rows or plain
	// ones, never both.
	open     []byte
	openRows int
	// frozen holds the bucket's older rows, frozenRows of them, as chunks
	// compressed by bucket.AppendFrozen: an open bucket of a fleet costs a
	// few bytes a value, not 8 (freeze).
	frozen []byte
	// frozenMaxT is the latest time of the frozen rows (a read from a
	// later time takes the plain rows alone: captureFor).
	frozenMaxT int64
	capHint    int   // rows the columns are made for (series.rowsHint)
	minT       int64 // smallest measurement time
	maxT       int64 // largest measurement time (the control max)
	// lastNum has bit i set when column i holds a number (numberKind) in
	// a row at maxT (lastOver, below, when such a column is the 64th or
	// later, which lastNum cannot say; lastRows).
	lastNum uint64
	mem     int64 // bytes of memory held by cols, for the budget
	// snapRows is the rows of that snapshot (set with snapshot, under
	// maintMu: a TTL batch counts what it deletes without reading it).
	snapRows  int
	lastWrite uint64
	// sorted is the time-ordered copy of an open bucket's rows that came
	// out of order, made by a read and shared by the reads after it until
	// the next change drops it (reads hold DB.mu for reading only, hence
	// the atomic; changes hold it for writing).
	sorted atomic.Pointer[sortedRows]
}

// sortedRows is a memBucket's rows in time order. Its columns are never
// written to.
type sortedRows struct {
	cols  bucket.Columns
	bytes int64
	acct  *atomic.Int64 // DB.sortedMem, where bytes are counted
}

// changed records a change to b's columns, dropping its sorted copy. DB.mu
// is held for writing.
func (b *memBucket) changed() {
	if b.sorted.Load() != nil {
		if s := b.sorted.Swap(nil); s != nil {
			s.acct.Add(-s.bytes)
		}
	}
}

// sortedCapture returns the rows of b in time order: a capture when they
// are in order, else a sorted copy, shared with other reads until b
// changes, kept while DB.sortedMem stays under max bytes. copied reports a
// copy made by this call (the caller's query memory pays for it). DB.mu is
// held, for reading at least.
func (b *memBucket) sortedCapture(acct *atomic.Int64, max int64) (cols bucket.Columns, copied bool) {
	if s := b.sorted.Load(); s != nil {
		return s.cols, false
	}
	cp := b.capture()
	sorted := sortedColumns(&cp.cols)
	if len(sorted.Times) == 0 || &sorted.Times[0] == &cp.cols.Times[0] {
		return sorted, cp.thawed // in order: the capture itself
	}
	s := &sortedRows{cols: sorted, bytes: columnsBytes(&sorted), acct: acct}
	if acct.Add(s.bytes) > max {
		acct.Add(-s.bytes)
		return sorted, true
	}
	if old := b.sorted.Swap(s); old != nil {
		old.acct.Add(-old.bytes)
	}
	return sorted, true
}

func (b *memBucket) rows() int { return b.frozenRows + b.tailRows() }

// tailRows is the rows of b since its last freeze: open or plain.
func (b *memBucket) tailRows() int { return b.openRows + len(b.cols.Times) }

// presentColumns reports for each column of b whether it holds a value in
// some row, plain or frozen.
func (b *memBucket) presentColumns() []bool {
	present := make([]bool, len(b.cols.Fields))
	for i := range b.cols.Fields {
		f := &b.cols.Fields[i]
		for r := range b.cols.Times {
			if f.IsPresent(r) {
				present[i] = true
				break
			}
		}
	}
	if b.openRows > 0 {
		openPresent(b.open, b.cols.Fields, b.openRows, present)
	}
	if b.frozenRows > 0 {
		if err := bucket.FrozenPresent(b.frozen, present); err != nil {
			panic(fmt.Sprintf("timeseries: frozen rows do not decode: %v", err))
		}
	}
	return present
}

// freezeRows is how many rows an open bucket takes (as open rows, or
// plain ones) before they are frozen. Smaller costs more chunk headers (a
// sensor's rows freeze to 7.28 bytes a row in chunks of 64, 7.41 in chunks
// of 32, 7.88 in chunks of 16: go test ./bucket -bench Frozen); larger
// keeps more rows unfrozen, at 8 bytes a number, made with room for all of
// them (tailCap). At
// 32 a fleet 48 rows into its hour holds 24.6 budgeted bytes a row where
// 64 held 35.2 (TestOpenHourPlainRowsFew), and a whole hour 10.0 heap bytes a row
// where 64 held 12.7 (docs/benchmarks.md, "Open buckets freezing every 32
// rows").
const freezeRows = 32

// tailCap is the rows b's open rows or plain columns are made with room
// for: what the rest of the bucket is expected to need (series.rowsHint),
// up to freezeRows.
func (b *memBucket) tailCap() int {
	return max(min(freezeRows, b.capHint-b.frozenRows), minColumnRows)
}

// freezeScratch is what freezes reuse: the chunk they encode and the
// columns open rows are decoded into.
type freezeScratch struct {
	chunk []byte
	cols  bucket.Columns
}

// freeze compresses b's rows since its last freeze, open or plain, into
// b.frozen; the bucket takes open rows after it. It returns the change in
// memory held. The rows do not move in order, so a sorted copy stays
// valid. DB.mu is held for writing.
func (b *memBucket) freeze(fs *freezeScratch) int64 {
	var tail *bucket.Columns
	n := b.tailRows()
	switch {
	case b.openRows > 0:
		decodeOpenRows(&fs.cols, b.cols.Fields, b.open, b.openRows)
		tail = &fs.cols
	case n > 0:
		tail = &b.cols
	default:
		return 0
	}
	fs.chunk = bucket.AppendFrozen(fs.chunk[:0], tail, n)
	if len(b.frozen)+len(fs.chunk) <= frozenExact {
		// Made to measure, not grown by append: a fleet holds a million.
		frozen := make([]byte, len(b.frozen)+len(fs.chunk))
		copy(frozen[copy(frozen, b.frozen):], fs.chunk)
		b.frozen = frozen
	} else {
		// A large bucket grows by append, not by a copy a freeze: an
		// append past len writes no byte a capture holds.
		b.frozen = append(b.frozen, fs.chunk...)
	}
	b.frozenMaxT = b.maxT // every row is frozen now
	b.frozenRows += n
	b.open, b.openRows = nil, 0
	if len(b.cols.Times) > 0 {
		b.cols = bucket.Columns{Fields: headersOf(b.cols.Fields)}
		b.hdrShared = false
	}
	before := b.mem
	b.mem = b.openMem()
	return b.mem - before
}

// headersOf returns a new list of the names and types of cols, cut to its
// length (an append makes another).
func headersOf(cols []bucket.Column) []bucket.Column {
	hdr := make([]bucket.Column, len(cols))
	for i := range cols {
		hdr[i] = bucket.Column{Name: cols[i].Name, Type: cols[i].Type}
	}
	return hdr
}

// openMem is the memory held by b when it holds no plain rows: its
// struct, its frozen and open rows, and its column list unless shared.
func (b *memBucket) openMem() int64 {
	m := memBucketMem + int64(cap(b.frozen)) + int64(cap(b.open))
	if !b.hdrShared {
		m += columnHeaderMem * int64(len(b.cols.Fields))
	}
	return m
}

// frozenExact is the frozen bytes up to which a freeze copies them into an
// array of their exact size; past it they grow by append (amortized: a
// bucket of a million rows would otherwise copy its bytes a freeze).
const frozenExact = 16 << 10

// emptyColumn returns a column of no rows with room for c.
func emptyColumn(name string, k model.Kind, c int) bucket.Column { return zeroColumn(name, k, 0, c) }

// zeroColumn returns a column of n zero values with room for c.
func zeroColumn(name string, k model.Kind, n, c int) bucket.Column {
	col := bucket.Column{Name: name, Type: k}
	switch k {
	case model.KindFloat:
		col.Floats = make([]float64, n, c)
	case model.KindInt, model.KindDate, model.KindInt32:
		col.Ints = make([]int64, n, c)
	case model.KindString, model.KindBSON:
		col.Strings = make([]string, n, c)
	case model.KindObjectID:
		col.IDs = make([]byte, n*bucket.ObjectIDLen, c*bucket.ObjectIDLen)
	case model.KindBool:
		col.Bools = make([]bool, n, c)
	}
	return col
}

// thaw makes every row of b plain again, for a change that rewrites rows.
// It returns the change in memory held. DB.mu is held for writing.
func (b *memBucket) thaw() int64 {
	if b.frozenRows == 0 && b.openRows == 0 && len(b.cols.Times) > 0 {
		return 0
	}
	b.cols = b.capture().cols // new columns, the bucket's own
	b.frozen, b.frozenRows = nil, 0
	b.open, b.openRows, b.hdrShared = nil, 0, false
	before := b.mem
	b.mem = bucketMem(&b.cols)
	return b.mem - before
}

// fits reports whether a measurement at time t of size sz with fields fs can
// go into b under the rollover rules.
func (b *memBucket) fits(t int64, sz int, fs []model.Field, lim *limits) bool {
	if b.sealed || t < b.minTime || t-b.minTime >= b.span {
		return false
	}
	if b.rows() >= lim.maxCount || b.size+sz > lim.maxBytes {
		return false
	}
	return !b.typeChange(fs)
}

// typeChange reports whether a field of fs exists in b with another type.
func (b *memBucket) typeChange(fs []model.Field) bool {
	for i := range fs {
		if c := b.colIndex(fs[i].Name, i); c >= 0 && b.cols.Fields[c].Type != fs[i].Value.Kind {
			return true
		}
	}
	return false
}

// colIndex returns the index of the column named name, trying hint first
// (measurements of one series usually list their fields in the same order).
func (b *memBucket) colIndex(name string, hint int) int {
	return columnIndex(b.cols.Fields, name, hint)
}

// columnIndex returns the index of the column named name in fs, trying
// hint (0 or more) first, or -1.
func columnIndex(fs []bucket.Column, name string, hint int) int {
	if hint < len(fs) && fs[hint].Name == name {
		return hint
	}
	for i := range fs {
		if fs[i].Name == name {
			return i
		}
	}
	return -1
}

// appendRow adds one measurement; the caller checked fits. A bucket that
// holds no plain rows takes it as an open row when open is set (c shares
// its column list), as a plain one otherwise. It returns the change in
// memory held.
func (b *memBucket) appendRow(t int64, sz int, fs []model.Field, coll *collection, open bool) int64 {
	b.changed()
	n := len(b.cols.Times)
	if n == 0 && open {
		return b.appendOpen(t, sz, fs, coll)
	}
	before := b.mem
	if n == 0 && len(b.cols.Fields) > 0 {
		// A list of names and types (a freeze's, or one shared) is not
		// written to: the plain rows get columns of their own.
		b.cols.Fields = headersOf(b.cols.Fields)
		b.hdrShared = false
	}
	if b.cols.Times == nil && b.capHint > 0 {
		b.cols.Times = make([]int64, 0, b.tailCap())
	}
	if b.cols.Fields == nil {
		b.cols.Fields = make([]bucket.Column, 0, len(fs))
	}
	atMax := b.noteTime(t)
	b.cols.Times = append(b.cols.Times, t)
	b.mem += 8
	b.size += sz
	for i := range fs {
		f := &fs[i]
		c := b.colIndex(f.Name, i)
		if c < 0 {
			c = b.addColumn(f.Name, f.Value.Kind, n)
		}
		b.mem += appendValue(&b.cols.Fields[c], f.Value)
		if atMax && numberKind(f.Value.Kind) {
			b.markLast(c)
		}
	}
	// Columns the measurement did not set get an absent row.
	for c := range b.cols.Fields {
		col := &b.cols.Fields[c]
		if col.Len() == n+1 {
			if col.Present != nil {
				setBit(col, n)
			}
			continue
		}
		b.mem += appendZero(col)
		if col.Present == nil {
			col.Present = allPresent(n)
		}
		growBits(col, n+1)
	}
	return b.mem - before
}

// noteTime takes a new row's time t into b's bounds and order, before
// the row counts in b.rows, and reports whether t is b's latest time.
func (b *memBucket) noteTime(t int64) (atMax bool) {
	first := b.rows() == 0
	if first || t < b.minT {
		b.minT = t
	}
	if !first && t < b.maxT {
		b.unordered = true
	}
	if first || t > b.maxT {
		b.maxT = t
		b.lastNum, b.lastOver = 0, false
	}
	return t == b.maxT
}

// appendOpen is appendRow taking the measurement as an open row.
func (b *memBucket) appendOpen(t int64, sz int, fs []model.Field, c *collection) int64 {
	before := b.mem
	var ciBuf [8]int32
	ci := ciBuf[:0]
	if len(fs) > len(ciBuf) {
		ci = make([]int32, 0, len(fs))
	}
	missing := 0
	for i := range fs {
		x := b.colIndex(fs[i].Name, i)
		if x < 0 {
			missing++
		}
		ci = append(ci, int32(x))
	}
	if missing > 0 {
		// A new list: the old one may be shared, and a capture holds it.
		hdr := make([]bucket.Column, len(b.cols.Fields), len(b.cols.Fields)+missing)
		copy(hdr, b.cols.Fields)
		for i := range fs {
			if ci[i] >= 0 {
				continue
			}
			if x := columnIndex(hdr, fs[i].Name, i); x >= 0 {
				ci[i] = int32(x) // a field named twice in the measurement
				continue
			}
			ci[i] = int32(len(hdr))
			hdr = append(hdr, bucket.Column{Name: fs[i].Name, Type: fs[i].Value.Kind})
		}
		b.cols.Fields, b.hdrShared = c.shareHeaders(hdr)
	}
	atMax := b.noteTime(t)
	b.size += sz
	if atMax {
		for i := range fs {
			if numberKind(fs[i].Value.Kind) {
				b.markLast(int(ci[i]))
			}
		}
	}
	if b.open == nil {
		b.open = make([]byte, 0, min(b.tailCap(), openStartRows)*openRowBytes(fs))
	}
	b.open = appendOpenRow(b.open, t, fs, ci)
	b.openRows++
	b.mem = b.openMem()
	return b.mem - before
}

// openStartRows is how many rows a bucket's open rows are first made
// room for (at most tailCap); past them they grow by append. Room for all
// freezeRows at once held twice what a fleet's buckets use on average
// through their freezes (each fills from none to freezeRows rows).
const openStartRows = 8

// openRowBytes is the bytes an open row of the fields fs takes, but for
// strings and BSON values, counted at their BSON size (a few bytes more).
func openRowBytes(fs []model.Field) int {
	var buf [binary.MaxVarintLen64]byte
	n := 1 + 8
	for i := range fs {
		n++ // a column index below 128
		switch v := &fs[i].Value; v.Kind {
		case model.KindFloat:
			n += 8
		case model.KindInt, model.KindDate, model.KindInt32:
			n += len(binary.AppendVarint(buf[:0], v.I))
		default:
			n += valueBytes(v.Kind, v.S)
		}
	}
	return n
}

// minColumnRows is the room a column is made with beyond its rows when
// the series has no bucket history (capHint 0): a sensor of a large fleet
// may write a few rows to each bucket, and a dense series' columns grow by
// appending until its next bucket is made to its size.
const minColumnRows = 4

// addColumn adds a column whose first n plain rows are absent (and its
// frozen rows, which were frozen without it).
func (b *memBucket) addColumn(name string, k model.Kind, n int) int {
	col := zeroColumn(name, k, n, max(n+minColumnRows, min(b.capHint, b.tailCap())))
	if n > 0 {
		col.Present = make([]uint64, (n+63)/64, (n+64)/64+1)
	}
	b.cols.Fields = append(b.cols.Fields, col)
	b.mem += int64(8*n) + columnHeaderMem
	return len(b.cols.Fields) - 1
}

func appendValue(c *bucket.Column, v model.Value) int64 {
	switch c.Type {
	case model.KindFloat:
		c.Floats = append(c.Floats, v.F)
	case model.KindInt, model.KindDate, model.KindInt32:
		c.Ints = append(c.Ints, v.I)
	case model.KindString, model.KindBSON:
		c.Strings = append(c.Strings, v.S)
		return int64(16 + len(v.S))
	case model.KindObjectID:
		c.IDs = append(c.IDs, v.S...)
		return bucket.ObjectIDLen
	case model.KindBool:
		c.Bools = append(c.Bools, v.B)
		return 1
	}
	return 8
}

func appendZero(c *bucket.Column) int64 {
	switch c.Type {
	case model.KindFloat:
		c.Floats = append(c.Floats, 0)
	case model.KindInt, model.KindDate, model.KindInt32:
		c.Ints = append(c.Ints, 0)
	case model.KindString, model.KindBSON:
		c.Strings = append(c.Strings, "")
		return 16
	case model.KindObjectID:
		c.IDs = append(c.IDs, make([]byte, bucket.ObjectIDLen)...)
		return bucket.ObjectIDLen
	case model.KindBool:
		c.Bools = append(c.Bools, false)
		return 1
	}
	return 8
}

// allPresent returns a bitmap with the first n bits set.
func allPresent(n int) []uint64 {
	words := make([]uint64, (n+63)/64, (n+64)/64+1)
	for i := 0; i < n/64; i++ {
		words[i] = ^uint64(0)
	}
	if r := n % 64; r != 0 {
		words[n/64] = 1<<r - 1
	}
	return words
}

// growBits makes c.Present long enough for n rows (new bits are 0).
func growBits(c *bucket.Column, n int) {
	for len(c.Present) < (n+63)/64 {
		c.Present = append(c.Present, 0)
	}
}

func setBit(c *bucket.Column, i int) {
	growBits(c, i+1)
	c.Present[i/64] |= 1 << (i % 64)
}

// captured is a consistent prefix of a memBucket's columns, taken under
// DB.mu; it stays valid after the lock is released.
type captured struct {
	b    *memBucket
	cols bucket.Columns
	// thawed is set when cols are new columns holding the bucket's frozen
	// rows decoded (every value copied) rather than a prefix of its own.
	thawed bool
}

// capture takes a prefix of b's columns that later appends cannot change:
// value slices are cut to the row count and presence bitmaps are copied (an
// append may set bits in their last word). Frozen rows are decoded into
// new columns with the plain ones after them.
func (b *memBucket) capture() captured {
	cols := b.captureTail()
	if b.frozenRows == 0 {
		return captured{b: b, cols: cols, thawed: b.openRows > 0}
	}
	return captured{b: b, cols: thawColumns(b.frozen, b.frozenRows, &cols, nil), thawed: true}
}

// tailDecoded reports whether captureTail decodes b's rows since its last
// freeze into new columns (open rows), which a read holds alone, rather
// than capturing a prefix of b's own.
func (b *memBucket) tailDecoded() bool { return len(b.cols.Times) == 0 }

// captureTimes captures the times of b's rows since its last freeze.
func (b *memBucket) captureTimes() []int64 {
	if b.openRows > 0 {
		return openTimes(b.open, b.cols.Fields, b.openRows)
	}
	n := len(b.cols.Times)
	return b.cols.Times[:n:n]
}

// captureTail captures the rows of b since its last freeze: its open rows
// decoded into new columns, or its plain ones (appendCapture into columns
// of their own).
func (b *memBucket) captureTail() bucket.Columns {
	if len(b.cols.Times) == 0 {
		// Open rows decoded (none: the columns' names and types).
		var out bucket.Columns
		decodeOpenRows(&out, b.cols.Fields, b.open, b.openRows)
		return out
	}
	times, fields, _ := b.appendCapture(make([]bucket.Column, 0, len(b.cols.Fields)), nil)
	return bucket.Columns{Times: times, Fields: fields}
}

// thawColumns returns the frozenRows rows of frozen followed by the rows of
// tail, as new columns in the order of tail's (which lists every column
// of the bucket); with keep, only the columns it keeps are decoded.
func thawColumns(frozen []byte, frozenRows int, tail *bucket.Columns, keep func(name string) bool) bucket.Columns {
	var out bucket.Columns
	thawColumnsInto(&out, frozen, frozenRows, tail, keep)
	return out
}

// thawColumnsInto is thawColumns into out, whose slices it reuses: a
// checkpoint decodes a bucket after another into the same columns.
func thawColumnsInto(out *bucket.Columns, frozen []byte, frozenRows int, tail *bucket.Columns, keep func(name string) bool) {
	n := frozenRows + len(tail.Times)
	out.Times = zeroed(out.Times, n)
	if cap(out.Fields) < len(tail.Fields) {
		out.Fields = make([]bucket.Column, len(tail.Fields))
	}
	out.Fields = out.Fields[:len(tail.Fields)]
	for i := range tail.Fields {
		src, dst := &tail.Fields[i], &out.Fields[i]
		dst.Name, dst.Type, dst.Present = src.Name, src.Type, nil
		dst.Floats, dst.Ints, dst.Strings, dst.IDs, dst.Bools = dst.Floats[:0], dst.Ints[:0], dst.Strings[:0], dst.IDs[:0], dst.Bools[:0]
		if keep != nil && !keep(src.Name) {
			dst.Type = 0 // DecodeFrozen skips it
			continue
		}
		switch src.Type {
		case model.KindFloat:
			dst.Floats = zeroed(dst.Floats, n)
		case model.KindInt, model.KindDate, model.KindInt32:
			dst.Ints = zeroed(dst.Ints, n)
		case model.KindString, model.KindBSON:
			dst.Strings = zeroed(dst.Strings, n)
		case model.KindObjectID:
			dst.IDs = zeroed(dst.IDs, n*bucket.ObjectIDLen)
		case model.KindBool:
			dst.Bools = zeroed(dst.Bools, n)
		}
	}
	got, err := bucket.DecodeFrozen(frozen, out, func(ci int) { out.Fields[ci].Present = allPresent(n) })
	if err != nil || got != frozenRows {
		// Frozen rows are made by this process, or checked at open
		// (bucket.ReadSnapshot) before they are kept.
		panic(fmt.Sprintf("timeseries: frozen rows do not decode: %d of %d rows, %v", got, frozenRows, err))
	}
	copy(out.Times[frozenRows:], tail.Times)
	for i := range tail.Fields {
		src, dst := &tail.Fields[i], &out.Fields[i]
		if dst.Type == 0 {
			continue
		}
		switch src.Type {
		case model.KindFloat:
			copy(dst.Floats[frozenRows:], src.Floats)
		case model.KindInt, model.KindDate, model.KindInt32:
			copy(dst.Ints[frozenRows:], src.Ints)
		case model.KindString, model.KindBSON:
			copy(dst.Strings[frozenRows:], src.Strings)
		case model.KindObjectID:
			copy(dst.IDs[frozenRows*bucket.ObjectIDLen:], src.IDs)
		case model.KindBool:
			copy(dst.Bools[frozenRows:], src.Bools)
		}
		if src.Present == nil {
			continue
		}
		if dst.Present == nil {
			dst.Present = allPresent(n)
		}
		for r := range tail.Times {
			if !src.IsPresent(r) {
				dst.Present[(frozenRows+r)/64] &^= 1 << ((frozenRows + r) % 64)
			}
		}
	}
	if keep != nil {
		out.Fields = slices.DeleteFunc(out.Fields, func(c bucket.Column) bool { return c.Type == 0 })
	}
}

// zeroed returns s with length n and every element zero, reusing its
// array when it is large enough.
func zeroed[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// appendCapture is capture of b's plain rows with the column headers appended to fields and
// the presence words to present, so that a checkpoint of a million buckets
// captures them into a few large slices rather than allocating for each.
// The presence bitmaps it sets are cut to their length, so appends to
// present never write into them; a present grown by append leaves them in
// the old array, which nothing writes again.
func (b *memBucket) appendCapture(fields []bucket.Column, present []uint64) ([]int64, []bucket.Column, []uint64) {
	n := len(b.cols.Times)
	for i := range b.cols.Fields {
		src := &b.cols.Fields[i]
		dst := bucket.Column{Name: src.Name, Type: src.Type}
		switch src.Type {
		case model.KindFloat:
			dst.Floats = src.Floats[:n:n]
		case model.KindInt, model.KindDate, model.KindInt32:
			dst.Ints = src.Ints[:n:n]
		case model.KindObjectID:
			dst.IDs = src.IDs[: n*bucket.ObjectIDLen : n*bucket.ObjectIDLen]
		case model.KindString, model.KindBSON:
			dst.Strings = src.Strings[:n:n]
		case model.KindBool:
			dst.Bools = src.Bools[:n:n]
		}
		if src.Present != nil {
			w := (n + 63) / 64
			at := len(present)
			present = append(present, src.Present[:w]...)
			dst.Present = present[at : at+w : at+w]
			if w == 0 {
				dst.Present = nil
			} else if r := n % 64; r != 0 {
				dst.Present[w-1] &= 1<<r - 1
			}
		}
		fields = append(fields, dst)
	}
	return b.cols.Times[:n:n], fields, present
}

// presenceWords is how many presence words a capture of b copies.
func (b *memBucket) presenceWords() int {
	w := 0
	for i := range b.cols.Fields {
		if b.cols.Fields[i].Present != nil {
			w += (len(b.cols.Times) + 63) / 64
		}
	}
	return w
}

// sortedColumns returns cols with rows in time order (stable): cols itself
// when they are in order already (a capture is never written to), else
// new slices.
func sortedColumns(cols *bucket.Columns) bucket.Columns {
	var out bucket.Columns
	var perm []int32
	return *sortedColumnsInto(&out, cols, &perm)
}

// sortedColumnsInto is sortedColumns writing the sorted rows into dst,
// whose slices it reuses, and the order into *perm (reused too). It
// returns cols when they are in order, else dst.
func sortedColumnsInto(dst, cols *bucket.Columns, perm *[]int32) *bucket.Columns {
	n := len(cols.Times)
	sorted := true
	for i := 1; i < n; i++ {
		if cols.Times[i] < cols.Times[i-1] {
			sorted = false
			break
		}
	}
	if sorted {
		return cols
	}
	p := (*perm)[:0]
	for i := range n {
		p = append(p, int32(i))
	}
	slices.SortStableFunc(p, func(a, b int32) int { return cmp.Compare(cols.Times[a], cols.Times[b]) })
	*perm = p
	permuteColumnsInto(dst, cols, p)
	return dst
}

// permuteColumns returns the rows perm of cols, in that order, as new slices.
func permuteColumns(cols *bucket.Columns, perm []int32) bucket.Columns {
	var out bucket.Columns
	permuteColumnsInto(&out, cols, perm)
	return out
}

// permuteColumnsInto writes the rows perm of cols, in that order, into
// dst, reusing the capacity of its times and of its columns' presence,
// float and int slices (those of other types are made anew: a reused
// slice of strings would keep the strings it held alive).
func permuteColumnsInto(out, cols *bucket.Columns, perm []int32) {
	n := len(perm)
	out.Times = slices.Grow(out.Times[:0], n)[:n]
	for i, p := range perm {
		out.Times[i] = cols.Times[p]
	}
	old := out.Fields[:cap(out.Fields)]
	out.Fields = out.Fields[:0]
	for ci := range cols.Fields {
		src := &cols.Fields[ci]
		var reuse bucket.Column
		if j := len(out.Fields); j < len(old) {
			reuse = old[j]
		}
		dst := bucket.Column{Name: src.Name, Type: src.Type}
		kept := false
		if src.Present != nil {
			dst.Present = slices.Grow(reuse.Present[:0], (n+63)/64)[:(n+63)/64]
			clear(dst.Present)
		}
		for i, p := range perm {
			if src.Present == nil || src.Present[p/64]&(1<<(p%64)) != 0 {
				kept = true
				if dst.Present != nil {
					dst.Present[i/64] |= 1 << (i % 64)
				}
			}
		}
		if !kept {
			continue // a column with no row left disappears
		}
		switch src.Type {
		case model.KindFloat:
			dst.Floats = slices.Grow(reuse.Floats[:0], n)[:n]
			for i, p := range perm {
				dst.Floats[i] = src.Floats[p]
			}
		case model.KindInt, model.KindDate, model.KindInt32:
			dst.Ints = slices.Grow(reuse.Ints[:0], n)[:n]
			for i, p := range perm {
				dst.Ints[i] = src.Ints[p]
			}
		case model.KindString, model.KindBSON:
			dst.Strings = make([]string, n)
			for i, p := range perm {
				dst.Strings[i] = src.Strings[p]
			}
		case model.KindObjectID:
			dst.IDs = make([]byte, n*bucket.ObjectIDLen)
			for i, p := range perm {
				copy(dst.ID(i), src.ID(int(p)))
			}
		case model.KindBool:
			dst.Bools = make([]bool, n)
			for i, p := range perm {
				dst.Bools[i] = src.Bools[p]
			}
		}
		out.Fields = append(out.Fields, dst)
	}
}

// Memory a series and its buckets hold besides their column values, as
// counted in Options.MemoryBudget. The figures are the structs' sizes and
// what a Go map or slice spends per entry; the benchmark
// BenchmarkFleetMemory compares their sum with the heap in use.
const (
	// memBucketMem is a memBucket and its pointer in series.buckets.
	memBucketMem = int64(unsafe.Sizeof(memBucket{})) + 8
	// columnHeaderMem is a bucket.Column header.
	columnHeaderMem = int64(unsafe.Sizeof(bucket.Column{}))
	// seriesStructMem is a series, its slot in the collection's index
	// (8 bytes at the table's 3/8 to 3/4 load) and its pointers in the
	// index's byOrd, collection.byID and collection.hot.
	seriesStructMem = int64(unsafe.Sizeof(series{})) + 8*2 + 8 + 8 + 8
)

// bucketMem estimates the memory held by a memBucket with columns cols.
func bucketMem(cols *bucket.Columns) int64 { return memBucketMem + columnsMem(cols) }

// seriesMem estimates the memory a series holds whatever its buckets: its
// struct and map entries and its canonical meta key (the meta value is
// decoded from the key when a reader needs it: seriesMeta).
func seriesMem(s *series) int64 {
	return seriesStructMem + stringMem(len(s.metaKey))
}

// stringMem is the heap a string of n bytes takes (rounded to 8 bytes).
func stringMem(n int) int64 { return int64(n+7) &^ 7 }

// columnsMem estimates the memory held by cols.
func columnsMem(cols *bucket.Columns) int64 {
	m := int64(8 * len(cols.Times))
	for i := range cols.Fields {
		c := &cols.Fields[i]
		m += columnHeaderMem + int64(8*len(c.Present))
		switch c.Type {
		case model.KindString, model.KindBSON:
			for _, s := range c.Strings {
				m += int64(16 + len(s))
			}
		case model.KindObjectID:
			m += int64(len(c.IDs))
		case model.KindBool:
			m += int64(len(c.Bools))
		default:
			m += int64(8 * c.Len())
		}
	}
	return m
}

// limits are the rollover limits of buckets.
type limits struct {
	maxCount int
	maxBytes int
	maxOpen  int
	// freezeAt is the rows at which an open bucket freezes those it took
	// since its last freeze: freezeRows (tests compare with buckets that
	// never freeze, at math.MaxInt, which take plain rows, not open ones).
	freezeAt int
}

// floorDiv rounds t down (toward -inf) to a multiple of r.
func floorDiv(t, r int64) int64 {
	q := t / r
	if t%r != 0 && t < 0 {
		q--
	}
	return q * r
}

// seriesMeta is the decoded meta value of s: nil when the collection has
// no meta field or the series was written without one.
func seriesMeta(s *series) any { return model.MetaOfKey(s.metaKey) }
