// Package wal is an append-only, segmented write-ahead log of opaque
// records: the durable half of the time-series write path.
//
// The write path appends one record per insert batch and acknowledges the
// client once Append returns: by then the record is fdatasync'd. Concurrent
// appends share one write and one fdatasync (group commit): the first
// appender to find the log idle writes every frame queued so far, while the
// next group gathers behind it. Records are compressed with S2 before the
// log's lock is taken, so compression runs in parallel.
//
// The log is a directory of segment files numbered 1, 2, ... with
// fixed-width names. Periodically the write path checkpoints its state
// elsewhere (Pebble), calls Cut to start a new segment, remembers the
// number Cut returned with the checkpoint, and once the checkpoint is
// durable calls Truncate with that number. On start it opens the log and
// replays from that number.
//
// Recovery: Open verifies the last segment and drops a torn tail (a record
// cut short or damaged by a crash during its write, and anything after it
// that was not acknowledged). Damage anywhere else is ErrCorrupt, from Open
// for the last segment and from Replay for the others. The byte layout and
// the recovery rules are in docs/format/wal.md.
//
// Files: the log reads and writes through Options.FS, Pebble's vfs.FS
// (the OS's by default, synced with fdatasync). With vfs.NewStrictMem,
// which forgets whatever was not synced, tests cut the power at any point.
//
// # Usage
//
//	l, err := wal.Open(wal.Options{Dir: filepath.Join(dataDir, "wal")})
//	if err != nil {
//		return err
//	}
//	defer l.Close()
//
//	// Start: replay what the last checkpoint does not hold.
//	err = l.Replay(checkpoint.LogSegment, func(pos wal.Pos, rec []byte) error {
//		return head.Apply(rec) // rec is valid only during the call
//	})
//
//	// Write path, from many goroutines: acknowledge after Append returns.
//	if _, err := l.Append(body); err != nil {
//		return err
//	}
//
//	// Checkpoint: records before seg are in the checkpoint.
//	seg, err := l.Cut()
//	// ... write the checkpoint with seg, durably ...
//	err = l.Truncate(seg)
package wal
