package wal

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/klauspost/compress/s2"
)

// Pos is the position of a record: the segment number and the byte offset
// of the record's header in that segment file.
type Pos struct {
	Segment uint64
	Offset  int64
}

// segmentInfo is a segment before the tail and its final size.
type segmentInfo struct {
	num  uint64
	size int64
}

// group is a set of frames written with one write and one fdatasync.
type group struct {
	seg    uint64   // segment the frames go to
	create bool     // segment seg is created before writing
	frames [][]byte // owned by the appenders until done is closed
	bytes  int64
	lead   chan struct{} // receives one token when the group is next to write
	done   chan struct{} // closed once written (or failed)
	err    error         // set before done is closed
}

// Log is a segmented append-only log of records. It is safe for concurrent
// use. Close it to sync and release the active segment file.
type Log struct {
	opts Options

	truncMu sync.Mutex // serialises Truncate so removals stay a prefix

	mu sync.Mutex
	// Guarded by mu.
	closed      bool
	err         error         // last write or sync failure, while broken
	broken      bool          // a group failed; the next append or Cut mends the tail first (mend)
	queue       []*group      // groups waiting to be written, oldest first; appenders join the last
	inflight    *group        // group being written, or nil
	writing     bool          // a leader owns the file; set while queue is non-empty or a group is being written
	tailSeg     uint64        // segment new records go to
	tailOff     int64         // logical size of tailSeg, pending frames included
	sealed      []segmentInfo // segments before tailSeg, ascending
	sealedBytes int64         // sum of sealed sizes
	fileSeg     uint64        // segment of the open file
	fileSize    int64         // bytes of fileSeg written and synced by successful groups

	// Owned by the leader (the goroutine writing a group), by Open before
	// the Log is shared, and by Close after the last group.
	f  vfs.File
	fw fileWriter // writes to f at the end of its records
	w  *bufio.Writer
}

// fileWriter writes to a file at increasing offsets (WriteAt), so that a
// reopened segment needs no seek and a file system's Write may not modify
// the caller's frames.
type fileWriter struct {
	f   vfs.File
	off int64
}

func (w *fileWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}

// Open opens the log in opts.Dir, creating the directory and a first
// segment if needed. It checks that segment numbers are contiguous and that
// every segment header is valid, verifies every record of the last segment
// and cuts a torn tail off it (see recoverLast). Records in earlier
// segments are verified by Replay. Appends continue in the last segment.
func Open(opts Options) (*Log, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := CreateDir(opts.FS, opts.Dir, opts.NoSync); err != nil {
		return nil, err
	}
	nums, err := listSegments(opts.FS, opts.Dir)
	if err != nil {
		return nil, err
	}
	l := &Log{opts: opts}
	if len(nums) == 0 {
		if err := l.createSegment(1); err != nil {
			return nil, err
		}
		l.tailSeg, l.tailOff = 1, segmentHeaderLen
		return l, nil
	}
	for i, n := range nums[:len(nums)-1] {
		if nums[i+1] != n+1 {
			return nil, fmt.Errorf("%w: segment %d missing (found %d and %d)", ErrCorrupt, n+1, n, nums[i+1])
		}
		size, err := statSegment(opts.FS, opts.Dir, n)
		if err != nil {
			return nil, err
		}
		l.sealed = append(l.sealed, segmentInfo{num: n, size: size})
		l.sealedBytes += size
	}
	last := nums[len(nums)-1]
	f, err := opts.FS.OpenReadWrite(segmentPath(opts.Dir, last))
	if err != nil {
		return nil, fmt.Errorf("wal: open segment %d: %w", last, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: stat segment %d: %w", last, err)
	}
	f, end, err := l.recoverLast(f, last, fi.Size())
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, err
	}
	l.f, l.fw = f, fileWriter{f: f, off: end}
	l.w = bufio.NewWriterSize(&l.fw, writeBufferSize)
	l.fileSeg, l.fileSize = last, end
	l.tailSeg, l.tailOff = last, end
	return l, nil
}

// writeBufferSize coalesces small frames of a group into few write calls;
// frames at least this large are written directly.
const writeBufferSize = 256 << 10

// listSegments returns the segment numbers in dir, ascending.
func listSegments(fs vfs.FS, dir string) ([]uint64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list dir: %w", err)
	}
	var nums []uint64
	for _, name := range names {
		n, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		fi, err := fs.Stat(fs.PathJoin(dir, name))
		if err != nil {
			return nil, fmt.Errorf("wal: stat segment %d: %w", n, err)
		}
		if fi.Mode().IsRegular() {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// statSegment checks the header of a segment before the last and returns
// its size.
func statSegment(fs vfs.FS, dir string, n uint64) (int64, error) {
	f, err := fs.Open(segmentPath(dir, n))
	if err != nil {
		return 0, fmt.Errorf("wal: open segment %d: %w", n, err)
	}
	defer f.Close()
	var hdr [segmentHeaderLen]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return 0, fmt.Errorf("%w: segment %d: header: %v", ErrCorrupt, n, err)
	}
	if err := checkSegmentHeader(hdr[:]); err != nil {
		return 0, fmt.Errorf("segment %d: %w", n, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("wal: stat segment %d: %w", n, err)
	}
	return fi.Size(), nil
}

// createSegment closes the current file and creates segment n with its
// header, synced together with the directory entry. Called by Open or by
// the leader.
func (l *Log) createSegment(n uint64) error {
	if l.f != nil {
		if err := l.w.Flush(); err != nil {
			return fmt.Errorf("wal: flush segment %d: %w", l.fileSeg, err)
		}
		if err := l.f.Close(); err != nil {
			return fmt.Errorf("wal: close segment %d: %w", l.fileSeg, err)
		}
		l.f = nil
	}
	path := segmentPath(l.opts.Dir, n)
	// vfs.FS.Create replaces an existing file; a segment is never
	// overwritten.
	if _, err := l.opts.FS.Stat(path); err == nil {
		return fmt.Errorf("wal: create segment %d: %w", n, os.ErrExist)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("wal: create segment %d: %w", n, err)
	}
	f, err := l.opts.FS.Create(path)
	if err != nil {
		return fmt.Errorf("wal: create segment %d: %w", n, err)
	}
	if _, err := f.WriteAt(appendSegmentHeader(nil), 0); err != nil {
		f.Close()
		return fmt.Errorf("wal: write segment %d header: %w", n, err)
	}
	if !l.opts.NoSync {
		if err := l.syncData(f, n); err != nil {
			f.Close()
			return err
		}
		if err := syncDir(l.opts.FS, l.opts.Dir); err != nil {
			f.Close()
			return err
		}
	}
	l.fw = fileWriter{f: f, off: segmentHeaderLen}
	if l.w == nil {
		l.w = bufio.NewWriterSize(&l.fw, writeBufferSize)
	} else {
		l.w.Reset(&l.fw)
	}
	l.f = f
	l.mu.Lock()
	l.fileSeg, l.fileSize = n, segmentHeaderLen
	l.mu.Unlock()
	return nil
}

// syncData makes the data written to f, segment n, durable: the
// fdatasync of sync_linux.go on the OS's files, the file system's SyncData
// on any other.
func (l *Log) syncData(f vfs.File, n uint64) error {
	if l.opts.FS == vfs.Default {
		return fdatasync(f, segmentPath(l.opts.Dir, n))
	}
	if err := f.SyncData(); err != nil {
		return fmt.Errorf("wal: sync segment %d: %w", n, err)
	}
	return nil
}

// CreateDir creates dir and its missing parents on fs, and syncs the
// directory holding each one it created (unless noSync), so that a crash
// cannot lose the new directory's entry. Open uses it for the log's
// directory; the store uses it for Pebble's, since Pebble syncs the
// directory it is given but never its parent.
func CreateDir(fs vfs.FS, dir string, noSync bool) error {
	var missing []string
	for d := dir; ; {
		_, err := fs.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		missing = append(missing, d)
		parent := fs.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if noSync {
		return nil
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if parent := fs.PathDir(missing[i]); parent != missing[i] {
			if err := syncDir(fs, parent); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncDir fsyncs a directory so that file creations and removals in it are
// durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("wal: open dir: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: sync dir: %w", err)
	}
	return nil
}

var framePool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledFrame keeps the pool from holding on to rare huge frames.
const maxPooledFrame = 8 << 20

// encodeFrame returns rec as a record frame (header and payload) in a
// pooled buffer.
func (l *Log) encodeFrame(rec []byte) *[]byte {
	bp := framePool.Get().(*[]byte)
	h := recordHeader{typ: recordRaw, length: uint32(len(rec)), rawLen: uint32(len(rec))}
	payload := rec
	if l.opts.Compression == CompressionS2 && len(rec) > 0 {
		need := recordHeaderLen + s2.MaxEncodedLen(len(rec))
		if cap(*bp) < need {
			*bp = make([]byte, need)
		}
		c := s2.Encode((*bp)[recordHeaderLen:need], rec)
		if len(c) < len(rec) {
			h.typ, h.length, payload = recordS2, uint32(len(c)), c
		}
	}
	need := recordHeaderLen + int(h.length)
	if cap(*bp) < need {
		*bp = make([]byte, need)
	}
	b := (*bp)[:need]
	if h.typ == recordRaw {
		copy(b[recordHeaderLen:], payload)
	}
	h.dataCRC = crc32.Checksum(b[recordHeaderLen:], castagnoli)
	putRecordHeader(b, h)
	*bp = b
	return bp
}

func putFrame(bp *[]byte) {
	if cap(*bp) <= maxPooledFrame {
		framePool.Put(bp)
	}
}

// Append writes rec as one record and returns its position once it is
// durable: fdatasync'd, or only written to the OS with Options.NoSync.
// rec is compressed or copied before Append returns and may be reused.
//
// Concurrent calls are written together and share one fdatasync (group
// commit). Their order in the log is the order in which they take the
// log's lock, after compression. A write or sync failure (a full disk, an
// I/O error) fails the group and every group queued behind it; the next
// Append or Cut first cuts the log back to the end of the last successful
// group (see mend), so appends resume by themselves once the cause is gone.
// A failed record may still be replayed after a crash, never acknowledged.
func (l *Log) Append(rec []byte) (Pos, error) {
	if len(rec) > MaxRecordSize {
		return Pos{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(rec), MaxRecordSize)
	}
	bp := l.encodeFrame(rec)
	var pos [1]Pos
	err := l.commit([][]byte{*bp}, pos[:])
	putFrame(bp)
	return pos[0], err
}

// AppendBatch writes recs as consecutive records, in order, and returns
// their positions once all are durable. It is one Append per record with
// one lock and one wait. On error none of the records is acknowledged (some
// may still be replayed after a reopen).
func (l *Log) AppendBatch(recs [][]byte) ([]Pos, error) {
	for i, rec := range recs {
		if len(rec) > MaxRecordSize {
			return nil, fmt.Errorf("%w: record %d: %d bytes, limit %d", ErrTooLarge, i, len(rec), MaxRecordSize)
		}
	}
	bps := make([]*[]byte, len(recs))
	frames := make([][]byte, len(recs))
	for i, rec := range recs {
		bps[i] = l.encodeFrame(rec)
		frames[i] = *bps[i]
	}
	pos := make([]Pos, len(recs))
	err := l.commit(frames, pos)
	for _, bp := range bps {
		putFrame(bp)
	}
	if err != nil {
		return nil, err
	}
	return pos, nil
}

// commit adds frames to the pending groups, fills pos and waits until they
// are written.
func (l *Log) commit(frames [][]byte, pos []Pos) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if err := l.mend(); err != nil {
		l.mu.Unlock()
		return err
	}
	lead := !l.writing
	l.writing = true
	var mine []*group
	for i, fr := range frames {
		n := int64(len(fr))
		if l.tailOff > segmentHeaderLen && l.tailOff+n > l.opts.SegmentSize {
			l.sealTail()
		}
		g := l.openGroup()
		if len(mine) == 0 || mine[len(mine)-1] != g {
			mine = append(mine, g)
		}
		pos[i] = Pos{Segment: l.tailSeg, Offset: l.tailOff}
		g.frames = append(g.frames, fr)
		g.bytes += n
		l.tailOff += n
	}
	l.mu.Unlock()
	return l.wait(mine, lead)
}

// sealTail ends the tail segment; the next group creates the next one.
// l.mu is held.
func (l *Log) sealTail() {
	l.sealed = append(l.sealed, segmentInfo{num: l.tailSeg, size: l.tailOff})
	l.sealedBytes += l.tailOff
	l.tailSeg++
	l.tailOff = segmentHeaderLen
	l.queue = append(l.queue, newGroup(l.tailSeg, true))
}

// openGroup returns the group that new frames for the tail segment join.
// l.mu is held.
func (l *Log) openGroup() *group {
	if n := len(l.queue); n > 0 && l.queue[n-1].seg == l.tailSeg {
		return l.queue[n-1]
	}
	g := newGroup(l.tailSeg, false)
	l.queue = append(l.queue, g)
	return g
}

// lastGroup returns the newest group queued or being written, as a
// slice of zero or one group for wait. l.mu is held.
func (l *Log) lastGroup() []*group {
	if n := len(l.queue); n > 0 {
		return l.queue[n-1:]
	}
	if l.inflight != nil {
		return []*group{l.inflight}
	}
	return nil
}

func newGroup(seg uint64, create bool) *group {
	return &group{seg: seg, create: create, lead: make(chan struct{}, 1), done: make(chan struct{})}
}

// wait waits until the groups are written, in order. The caller that found
// no leader (lead) writes the first group itself; a waiter handed the lead
// token writes its group. Either way it then hands the lead on.
func (l *Log) wait(groups []*group, lead bool) error {
	for _, g := range groups {
		if lead {
			l.writeHead()
			lead = false
		} else {
			select {
			case <-g.done:
			case <-g.lead:
				l.writeHead()
			}
		}
		<-g.done
		if g.err != nil {
			return g.err
		}
	}
	return nil
}

// writeHead writes the oldest group, then passes the lead to the next one
// or, if none is queued, gives it up.
func (l *Log) writeHead() {
	l.mu.Lock()
	g := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	l.inflight = g
	l.mu.Unlock()

	err := l.writeGroup(g)

	l.mu.Lock()
	defer l.mu.Unlock()
	g.err = err
	close(g.done)
	l.inflight = nil
	if err != nil {
		l.err, l.broken = err, true
		for _, q := range l.queue {
			q.err = err
			close(q.done)
		}
		l.queue = nil
		l.writing = false
		l.opts.Logger.Error("wal: write failed; the next append cuts the log back to its last synced record and retries",
			"segment", g.seg, "err", err)
		return
	}
	l.fileSize += g.bytes
	if len(l.queue) > 0 {
		l.queue[0].lead <- struct{}{}
	} else {
		l.writing = false
	}
}

// writeGroup writes and syncs g without holding l.mu.
func (l *Log) writeGroup(g *group) error {
	if g.create {
		if err := l.createSegment(g.seg); err != nil {
			return err
		}
	}
	if len(g.frames) == 0 {
		return nil
	}
	for _, fr := range g.frames {
		if _, err := l.w.Write(fr); err != nil {
			return fmt.Errorf("wal: write segment %d: %w", g.seg, err)
		}
	}
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("wal: write segment %d: %w", g.seg, err)
	}
	if !l.opts.NoSync {
		return l.syncData(l.f, g.seg)
	}
	return nil
}

// mend repairs the tail after a failed group, so that the next group writes
// where the last successful one ended. Called with l.mu held; returns with
// it held. While another caller mends, it returns the failure.
//
// After a failed write or fdatasync the state of the pages written since the
// last successful sync is unknown: Linux reports a writeback error once and
// may then mark the pages clean although they never reached the disk, so a
// second fdatasync can succeed without making them durable (PostgreSQL's
// "fsyncgate", 2018). Retrying the sync, or appending after those pages,
// could therefore acknowledge records that a power loss takes. mend never
// trusts them: it closes the file, removes any segment a failed roll
// created, truncates the last good segment to the end of the last
// successful group (dropping the doubtful pages from the page cache), syncs
// that, and reopens the file. The failed groups were never acknowledged;
// appends go on in the same segment. If mending fails (the disk is still
// full, say), the log stays broken and the next call tries again.
func (l *Log) mend() error {
	if !l.broken {
		return nil
	}
	if l.writing {
		return l.err
	}
	l.writing = true
	seg, size := l.fileSeg, l.fileSize
	l.mu.Unlock()
	err := l.cutBack(seg, size)
	l.mu.Lock()
	l.writing = false
	if err != nil {
		return fmt.Errorf("%w (after %w)", err, l.err)
	}
	for n := len(l.sealed); n > 0 && l.sealed[n-1].num >= seg; n = len(l.sealed) {
		l.sealedBytes -= l.sealed[n-1].size
		l.sealed = l.sealed[:n-1]
	}
	l.tailSeg, l.tailOff = seg, size
	l.broken, l.err = false, nil
	l.opts.Logger.Info("wal: log cut back after a write failure; appends resume", "segment", seg, "offset", size)
	return nil
}

// cutBack makes segment seg, cut to size, the open file, and removes the
// segments after it. Called by the leader.
func (l *Log) cutBack(seg uint64, size int64) error {
	if l.f != nil {
		l.f.Close() // its error is the one the failed group reported
		l.f = nil
	}
	fs := l.opts.FS
	nums, err := listSegments(fs, l.opts.Dir)
	if err != nil {
		return err
	}
	removed := false
	for _, n := range nums {
		if n > seg {
			if err := fs.Remove(segmentPath(l.opts.Dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("wal: remove segment %d: %w", n, err)
			}
			removed = true
		}
	}
	if removed && !l.opts.NoSync {
		if err := syncDir(fs, l.opts.Dir); err != nil {
			return err
		}
	}
	f, err := fs.OpenReadWrite(segmentPath(l.opts.Dir, seg))
	if err != nil {
		return fmt.Errorf("wal: open segment %d: %w", seg, err)
	}
	// truncateSegment syncs what it keeps (unless NoSync).
	f, err = l.truncateSegment(f, seg, size)
	if err != nil {
		if f != nil {
			f.Close()
		}
		return err
	}
	l.f, l.fw = f, fileWriter{f: f, off: size}
	l.w.Reset(&l.fw)
	return nil
}

// Cut ends the current segment and returns the number of the segment
// appends go to from now on. Every record whose Append returned before Cut
// was called is in a segment below that number; every record appended after
// Cut returns is in that segment or a later one. Cut waits for pending
// appends and the new segment's creation. If the current segment holds no
// record, Cut keeps it and returns its number.
func (l *Log) Cut() (uint64, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	if err := l.mend(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	if l.tailOff > segmentHeaderLen {
		l.sealTail()
	}
	n := l.tailSeg
	g := l.lastGroup()
	lead := !l.writing && len(g) > 0
	if lead {
		l.writing = true
	}
	l.mu.Unlock()
	return n, l.wait(g, lead)
}

// Truncate removes the segment files numbered below before, oldest first,
// and syncs the directory. It never removes the segment appends go to, nor
// one still being written. Truncating below the first segment does nothing.
func (l *Log) Truncate(before uint64) error {
	l.truncMu.Lock()
	defer l.truncMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	limit := min(before, l.fileSeg)
	var victims []segmentInfo
	for _, s := range l.sealed {
		if s.num >= limit {
			break
		}
		victims = append(victims, s)
	}
	l.mu.Unlock()

	removed := 0
	var err error
	for _, s := range victims {
		if rerr := l.opts.FS.Remove(segmentPath(l.opts.Dir, s.num)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = fmt.Errorf("wal: remove segment %d: %w", s.num, rerr)
			break
		}
		removed++
	}
	if removed > 0 {
		if serr := syncDir(l.opts.FS, l.opts.Dir); err == nil {
			err = serr
		}
		l.mu.Lock()
		for _, s := range l.sealed[:removed] {
			l.sealedBytes -= s.size
		}
		l.sealed = slices.Delete(l.sealed, 0, removed)
		l.mu.Unlock()
	}
	return err
}

// Segments returns the numbers of the segment files, ascending. The last
// one is where appends go.
func (l *Log) Segments() ([]uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	var nums []uint64
	for _, s := range l.sealed {
		if s.num <= l.fileSeg {
			nums = append(nums, s.num)
		}
	}
	if l.tailSeg <= l.fileSeg {
		nums = append(nums, l.tailSeg)
	}
	return nums, nil
}

// Size returns the bytes in the live segments, headers included; records
// being appended count as soon as Append has queued them.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sealedBytes + l.tailOff
}

// Replay calls fn for every record in segments numbered from and up, in log
// order, with the record's position. rec is valid only during the call;
// fn's error stops Replay and is returned. A record that does not verify
// stops Replay with ErrCorrupt naming segment and offset. Replay is meant
// to run after Open and before the first Append; records appended while it
// runs may or may not be seen.
func (l *Log) Replay(from uint64, fn func(pos Pos, rec []byte) error) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	var segs []segmentInfo
	for _, s := range l.sealed {
		if s.num >= from && s.num < l.fileSeg {
			segs = append(segs, s)
		}
	}
	if l.fileSeg >= from {
		segs = append(segs, segmentInfo{num: l.fileSeg, size: l.fileSize})
	}
	l.mu.Unlock()

	for _, s := range segs {
		if err := replaySegment(l.opts.FS, l.opts.Dir, s, fn); err != nil {
			return err
		}
	}
	return nil
}

func replaySegment(fs vfs.FS, dir string, s segmentInfo, fn func(pos Pos, rec []byte) error) error {
	f, err := fs.Open(segmentPath(dir, s.num))
	if err != nil {
		return fmt.Errorf("wal: open segment %d: %w", s.num, err)
	}
	defer f.Close()
	var hdr [segmentHeaderLen]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return fmt.Errorf("%w: segment %d: header: %v", ErrCorrupt, s.num, err)
	}
	if err := checkSegmentHeader(hdr[:]); err != nil {
		return fmt.Errorf("segment %d: %w", s.num, err)
	}
	r := newSegmentReader(s.num, f, s.size)
	for {
		pos, rec, err := r.next(true)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(pos, rec); err != nil {
			return err
		}
	}
}

// Close waits for pending appends, flushes, syncs (unless NoSync) and
// closes the active segment.
// Later calls on the Log return ErrClosed; Close itself is idempotent and
// returns nil after the first call.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	g := l.lastGroup()
	l.mu.Unlock()
	werr := l.wait(g, false)

	// No leader remains and none can start.
	l.mu.Lock()
	failed := l.broken
	seg, size := l.fileSeg, l.fileSize
	l.mu.Unlock()
	var err error
	if failed {
		// Leave no doubtful tail behind for Open to find.
		if cerr := l.cutBack(seg, size); cerr != nil {
			l.opts.Logger.Warn("wal: cannot cut the log back on close", "segment", seg, "err", cerr)
		}
	}
	if l.f != nil {
		if !failed {
			if ferr := l.w.Flush(); ferr != nil {
				err = fmt.Errorf("wal: flush segment %d: %w", l.fileSeg, ferr)
			} else if !l.opts.NoSync {
				err = l.syncData(l.f, l.fileSeg)
			}
		}
		if cerr := l.f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("wal: close segment %d: %w", l.fileSeg, cerr)
		}
		l.f = nil
	}
	if err == nil {
		err = werr
	}
	return err
}
