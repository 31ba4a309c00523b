package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strconv"
	"strings"
)

// On-disk format; docs/format/wal.md draws it.

const (
	// segmentMagic opens every segment file.
	segmentMagic = "HGWL"
	// formatVersion is the segment format written by this package.
	formatVersion = 1
	// segmentHeaderLen is magic, version byte and three zero bytes.
	segmentHeaderLen = 8

	// recordHeaderLen is type (1), stored length (4), raw length (4),
	// payload CRC (4) and header CRC (4).
	recordHeaderLen = 17

	// segmentNameLen is the number of digits of a segment file name.
	segmentNameLen = 20
	segmentExt     = ".wal"
)

// Record types, the first byte of a record header. 0 is never written, so
// a zero-filled region never reads as a record.
const (
	recordRaw byte = 1 // payload is the record
	recordS2  byte = 2 // payload is the record S2-compressed (block format)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordHeader is a decoded record header.
type recordHeader struct {
	typ     byte
	length  uint32 // payload bytes on disk
	rawLen  uint32 // record bytes after decompression
	dataCRC uint32 // CRC32C of the payload
}

// frameLen is the number of bytes the record takes in the segment.
func (h recordHeader) frameLen() int64 { return recordHeaderLen + int64(h.length) }

// putRecordHeader writes h into b[:recordHeaderLen] with its header CRC.
func putRecordHeader(b []byte, h recordHeader) {
	_ = b[recordHeaderLen-1]
	b[0] = h.typ
	binary.LittleEndian.PutUint32(b[1:], h.length)
	binary.LittleEndian.PutUint32(b[5:], h.rawLen)
	binary.LittleEndian.PutUint32(b[9:], h.dataCRC)
	binary.LittleEndian.PutUint32(b[13:], crc32.Checksum(b[:13], castagnoli))
}

// parseRecordHeader decodes and checks b[:recordHeaderLen]: header CRC,
// type, and lengths within MaxRecordSize and consistent with the type. It
// says nothing about whether the payload fits in the segment.
func parseRecordHeader(b []byte) (recordHeader, string) {
	_ = b[recordHeaderLen-1]
	if crc32.Checksum(b[:13], castagnoli) != binary.LittleEndian.Uint32(b[13:]) {
		return recordHeader{}, "record header checksum mismatch"
	}
	h := recordHeader{
		typ:     b[0],
		length:  binary.LittleEndian.Uint32(b[1:]),
		rawLen:  binary.LittleEndian.Uint32(b[5:]),
		dataCRC: binary.LittleEndian.Uint32(b[9:]),
	}
	if h.rawLen > MaxRecordSize {
		return h, fmt.Sprintf("record length %d over limit %d", h.rawLen, MaxRecordSize)
	}
	switch h.typ {
	case recordRaw:
		if h.length != h.rawLen {
			return h, fmt.Sprintf("raw record stores %d bytes of %d", h.length, h.rawLen)
		}
	case recordS2:
		// The writer keeps the compressed form only when it is smaller.
		if h.length >= h.rawLen {
			return h, fmt.Sprintf("compressed record of %d bytes not smaller than %d", h.length, h.rawLen)
		}
	default:
		return h, fmt.Sprintf("unknown record type %d", h.typ)
	}
	return h, ""
}

// appendSegmentHeader appends the header of a new segment file.
func appendSegmentHeader(dst []byte) []byte {
	dst = append(dst, segmentMagic...)
	return append(dst, formatVersion, 0, 0, 0)
}

// checkSegmentHeader verifies a segment header read from disk.
func checkSegmentHeader(b []byte) error {
	if len(b) < segmentHeaderLen || string(b[:4]) != segmentMagic {
		return fmt.Errorf("%w: bad segment magic %q", ErrCorrupt, b[:min(len(b), 4)])
	}
	if b[4] > formatVersion {
		return fmt.Errorf("%w: version %d, this build reads up to %d", ErrNewerFormat, b[4], formatVersion)
	}
	if b[4] != formatVersion || b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return fmt.Errorf("%w: bad segment header % x", ErrCorrupt, b[4:8])
	}
	return nil
}

// segmentName returns the file name of segment n.
func segmentName(n uint64) string {
	return fmt.Sprintf("%0*d%s", segmentNameLen, n, segmentExt)
}

func segmentPath(dir string, n uint64) string {
	return filepath.Join(dir, segmentName(n))
}

// parseSegmentName returns the number of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, segmentExt)
	if !ok || len(base) != segmentNameLen {
		return 0, false
	}
	for i := 0; i < len(base); i++ {
		if base[i] < '0' || base[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(base, 10, 64)
	return n, err == nil
}
