package timeseries

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// checkpointMargin is the free space a checkpoint keeps beyond what it
// writes: Pebble's manifest edit, OPTIONS file and table indexes.
const checkpointMargin = 1 << 20

// freeSpace returns the bytes available to the DB on the filesystem of its
// directory, or -1 when the filesystem does not say.
func (db *DB) freeSpace() int64 {
	u, err := db.opts.FS.GetDiskUsage(db.opts.Dir)
	if err != nil {
		return -1
	}
	return int64(u.AvailBytes)
}

// checkWritable refuses a write with OutOfDiskSpace when the DB was opened
// read-only or when less than Options.DiskReserve is free.
func (db *DB) checkWritable() error {
	return db.checkSpace(db.opts.DiskReserve)
}

// checkSpace is checkWritable with a reserve of reserve bytes; negative
// checks only that the DB is not read-only.
func (db *DB) checkSpace(reserve int64) error {
	if db.readOnly {
		return mongoerr.New(mongoerr.OutOfDiskSpace,
			"the data directory %s was opened read-only because its filesystem was full (less than %s free); free space and restart to write",
			db.opts.Dir, mib(db.opts.DiskReserve))
	}
	if reserve < 0 {
		return nil
	}
	if free := db.freeSpace(); free >= 0 && free < reserve {
		return mongoerr.New(mongoerr.OutOfDiskSpace,
			"not enough disk space in %s: %s free, writes need %s; writes resume once space is freed",
			db.opts.Dir, mib(free), mib(reserve))
	}
	return nil
}

// flushStore flushes Pebble's memtables and waits for the flush, or until
// abort is closed (nil: no abort). Pebble retries a flush that fails until
// it succeeds: on a full disk the wait goes on (the flush completes once
// space is freed; abort ends it), on any other failure that persists
// (failuresToGiveUp in a row: a filesystem remounted read-only, failing,
// or the directory removed) flushStore gives up with the error. Either way
// the data stays in the log, which is truncated only after a flush
// completes.
func (db *DB) flushStore(abort <-chan struct{}) error {
	if h := db.hooks.storeFlush; h != nil {
		if err := h(); err != nil {
			return err
		}
	}
	failed := db.storeFail.watch()
	done, err := db.pdb.AsyncFlush()
	if err != nil {
		return db.diskErr(err)
	}
	select {
	case <-done:
		return nil
	default:
	}
	for {
		select {
		case <-done:
			return nil
		case <-abort:
			return errFlushAbandoned
		case <-failed:
			failed = db.storeFail.watch()
			if err := db.storeFailure(); err != nil {
				return err
			}
		}
	}
}

// storeFailure returns an error when the store's flushes or compactions
// have failed failuresToGiveUp times in a row for another reason than a
// full disk, nil otherwise.
func (db *DB) storeFailure() error {
	if n, err := db.storeFail.state(); n >= failuresToGiveUp && err != nil && !isDiskFull(err) {
		return fmt.Errorf("timeseries: the store cannot write its files in %s (%d attempts failed; every write stays in the log): %w",
			db.opts.Dir, n, err)
	}
	return nil
}

// diskErr turns an error caused by a full disk (ENOSPC, EDQUOT) into
// OutOfDiskSpace naming the directory; it keeps both errors in the chain.
// Other errors are returned as they are.
func (db *DB) diskErr(err error) error {
	if err == nil || !isDiskFull(err) {
		return err
	}
	var me *mongoerr.Error
	if errors.As(err, &me) && me.Code == mongoerr.OutOfDiskSpace {
		return err
	}
	return fmt.Errorf("%w: %w", mongoerr.New(mongoerr.OutOfDiskSpace,
		"no space left on the filesystem of %s; the write was not stored and writes resume once space is freed", db.opts.Dir), err)
}

// isDiskFull reports whether err comes from a full filesystem or quota.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, errQuota)
}

// mib formats a byte count for messages.
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
