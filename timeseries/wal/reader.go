package wal

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/klauspost/compress/s2"
)

// corruptf returns an ErrCorrupt error for the record at seg/off.
func corruptf(seg uint64, off int64, format string, args ...any) error {
	return fmt.Errorf("%w: segment %d offset %d: %s", ErrCorrupt, seg, off, fmt.Sprintf(format, args...))
}

// segmentReader reads the records of one segment file in order. Every
// length read from the file is checked against the bytes left in the
// segment before anything is allocated for it.
type segmentReader struct {
	seg     uint64
	r       *bufio.Reader
	off     int64 // offset of the next record
	end     int64 // offset where reading stops
	hdr     [recordHeaderLen]byte
	payload []byte // reused
	raw     []byte // reused
}

func newSegmentReader(seg uint64, r io.Reader, end int64) *segmentReader {
	return &segmentReader{seg: seg, r: bufio.NewReaderSize(r, 256<<10), off: segmentHeaderLen, end: end}
}

// next returns the next record and its position, io.EOF after the last, or
// an error wrapping ErrCorrupt for a record that does not verify (the
// reader's off is then that record's offset). With decode false the record
// is only verified and rec is nil. rec is valid until the next call.
func (r *segmentReader) next(decode bool) (Pos, []byte, error) {
	pos := Pos{Segment: r.seg, Offset: r.off}
	left := r.end - r.off
	if left == 0 {
		return pos, nil, io.EOF
	}
	if left < recordHeaderLen {
		return pos, nil, corruptf(r.seg, r.off, "%d bytes left, less than a record header", left)
	}
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return pos, nil, r.readErr(err)
	}
	h, bad := parseRecordHeader(r.hdr[:])
	if bad != "" {
		return pos, nil, corruptf(r.seg, r.off, "%s", bad)
	}
	if h.frameLen() > left {
		return pos, nil, corruptf(r.seg, r.off, "record of %d bytes extends past end of segment (%d bytes left)", h.frameLen(), left)
	}
	if cap(r.payload) < int(h.length) {
		r.payload = make([]byte, h.length)
	}
	p := r.payload[:h.length]
	if _, err := io.ReadFull(r.r, p); err != nil {
		return pos, nil, r.readErr(err)
	}
	if crc32.Checksum(p, castagnoli) != h.dataCRC {
		return pos, nil, corruptf(r.seg, r.off, "payload checksum mismatch (%d bytes)", h.length)
	}
	var rec []byte
	switch h.typ {
	case recordRaw:
		rec = p
	case recordS2:
		n, err := s2.DecodedLen(p)
		if err != nil || n != int(h.rawLen) {
			return pos, nil, corruptf(r.seg, r.off, "compressed record decodes to %d bytes, header says %d (%v)", n, h.rawLen, err)
		}
		if decode {
			if cap(r.raw) < n {
				r.raw = make([]byte, n)
			}
			rec, err = s2.Decode(r.raw[:n], p)
			if err != nil {
				return pos, nil, corruptf(r.seg, r.off, "decompress %d bytes: %v", h.length, err)
			}
		}
	}
	r.off += h.frameLen()
	if !decode {
		rec = nil
	}
	return pos, rec, nil
}

// readErr classifies a read failure: a file shorter than its size said is
// corruption, anything else an I/O error.
func (r *segmentReader) readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corruptf(r.seg, r.off, "segment shorter than %d bytes", r.end)
	}
	return fmt.Errorf("wal: read segment %d offset %d: %w", r.seg, r.off, err)
}

// findIntactRecord returns the first offset i >= from in b where a whole
// record with a valid header and payload CRC starts, or -1.
func findIntactRecord(b []byte, from int) int {
	for i := from; i+recordHeaderLen <= len(b); i++ {
		if t := b[i]; t != recordRaw && t != recordS2 {
			continue
		}
		h, bad := parseRecordHeader(b[i:])
		if bad != "" || int64(i)+h.frameLen() > int64(len(b)) {
			continue
		}
		if crc32.Checksum(b[i+recordHeaderLen:i+int(h.frameLen())], castagnoli) == h.dataCRC {
			return i
		}
	}
	return -1
}

// sectorSize is the unit in which a write that was cut short leaves
// zeros behind: a sector that never reached the disk reads back as zeros.
const sectorSize = 512

// hasZeroSector reports whether b, which starts at file offset base,
// contains a whole sector-aligned run of sectorSize zero bytes.
func hasZeroSector(b []byte, base int64) bool {
	start := (sectorSize - base%sectorSize) % sectorSize
outer:
	for i := start; i+sectorSize <= int64(len(b)); i += sectorSize {
		for _, c := range b[i : i+sectorSize] {
			if c != 0 {
				continue outer
			}
		}
		return true
	}
	return false
}

// recoverLast verifies the last segment, f, whose size is size, and cuts a
// torn tail off it. It returns the offset where appends continue.
//
// At the first record that does not verify:
//   - if no intact record follows in the segment, the rest is a torn tail
//     and is dropped;
//   - if an intact record follows but the damaged bytes before it hold a
//     zero-filled sector, the tail is a write cut short by a crash whose
//     pages reached the disk out of order; none of it was synced (a sync
//     would have written the zero sector), so it is dropped too;
//   - otherwise the damage is in the middle of acknowledged data: ErrCorrupt.
//
// It returns the file to append to: f, or f reopened when the file system
// cannot truncate a file in place (see truncateSegment).
func (l *Log) recoverLast(f vfs.File, seg uint64, size int64) (vfs.File, int64, error) {
	logger := l.opts.Logger
	var hdr [segmentHeaderLen]byte
	n, err := f.ReadAt(hdr[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return f, 0, fmt.Errorf("wal: read segment %d header: %w", seg, err)
	}
	if n < segmentHeaderLen || hdr == [segmentHeaderLen]byte{} {
		// The header never reached the disk; neither did any synced record.
		rest := make([]byte, max(size-int64(n), 0))
		if _, err := f.ReadAt(rest, int64(n)); err != nil && !errors.Is(err, io.EOF) {
			return f, 0, fmt.Errorf("wal: read segment %d: %w", seg, err)
		}
		if i := findIntactRecord(rest, 0); i >= 0 {
			return f, 0, fmt.Errorf("%w: segment %d: missing header before intact record at offset %d", ErrCorrupt, seg, int64(n)+int64(i))
		}
		logger.Warn("wal: rewriting torn segment header", "segment", seg, "size", size)
		f, err := l.truncateSegment(f, seg, 0)
		if err != nil {
			return f, 0, err
		}
		if _, err := f.WriteAt(appendSegmentHeader(nil), 0); err != nil {
			return f, 0, fmt.Errorf("wal: write segment %d header: %w", seg, err)
		}
		if !l.opts.NoSync {
			if err := l.syncData(f, seg); err != nil {
				return f, 0, err
			}
		}
		return f, segmentHeaderLen, nil
	}
	if err := checkSegmentHeader(hdr[:]); err != nil {
		return f, 0, fmt.Errorf("segment %d: %w", seg, err)
	}

	r := newSegmentReader(seg, io.NewSectionReader(f, segmentHeaderLen, size-segmentHeaderLen), size)
	records := 0
	var damage error
	for {
		_, _, err := r.next(false)
		if err == io.EOF {
			return f, size, nil
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return f, 0, err
			}
			damage = err
			break
		}
		records++
	}

	// r.off is the first record that does not verify.
	bad := r.off
	tail := make([]byte, size-bad)
	if _, err := f.ReadAt(tail, bad); err != nil && !errors.Is(err, io.EOF) {
		return f, 0, fmt.Errorf("wal: read segment %d tail: %w", seg, err)
	}
	if next := findIntactRecord(tail, 1); next >= 0 {
		if !hasZeroSector(tail[:next], bad) {
			return f, 0, fmt.Errorf("%w; an intact record follows at offset %d, so this is not a torn tail",
				damage, bad+int64(next))
		}
		logger.Warn("wal: dropping torn write with intact records after a zero-filled sector",
			"segment", seg, "offset", bad, "intactAt", bad+int64(next))
	}
	logger.Warn("wal: dropping torn tail of last segment",
		"segment", seg, "offset", bad, "bytes", size-bad, "recordsKept", records)
	f, err = l.truncateSegment(f, seg, bad)
	return f, bad, err
}

// truncateSegment cuts segment seg, open as f, to size bytes and syncs it
// (unless NoSync). The OS's files are truncated in place. A file system
// whose files cannot be shortened gets the kept bytes written to a new
// file that is synced and renamed over the segment, the directory synced
// after; f is then closed and the new file returned, open for writing.
func (l *Log) truncateSegment(f vfs.File, seg uint64, size int64) (vfs.File, error) {
	if t, ok := f.(interface{ Truncate(int64) error }); ok {
		if err := t.Truncate(size); err != nil {
			return f, fmt.Errorf("wal: truncate segment %d to %d: %w", seg, size, err)
		}
		if l.opts.NoSync {
			return f, nil
		}
		return f, l.syncData(f, seg)
	}
	keep := make([]byte, size)
	if _, err := f.ReadAt(keep, 0); err != nil && !errors.Is(err, io.EOF) {
		return f, fmt.Errorf("wal: read segment %d: %w", seg, err)
	}
	fs, path := l.opts.FS, segmentPath(l.opts.Dir, seg)
	tmp := path + ".truncate"
	nf, err := fs.Create(tmp)
	if err != nil {
		return f, fmt.Errorf("wal: truncate segment %d to %d: %w", seg, size, err)
	}
	_, err = nf.WriteAt(keep, 0)
	if err == nil && !l.opts.NoSync {
		err = l.syncData(nf, seg)
	}
	if cerr := nf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil && !l.opts.NoSync {
		err = syncDir(fs, l.opts.Dir)
	}
	if err != nil {
		return f, fmt.Errorf("wal: truncate segment %d to %d: %w", seg, size, err)
	}
	f.Close()
	nf, err = fs.OpenReadWrite(path)
	if err != nil {
		return nil, fmt.Errorf("wal: reopen segment %d: %w", seg, err)
	}
	return nf, nil
}
