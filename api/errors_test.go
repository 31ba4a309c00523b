package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/timeseries/wal"
)

// TestClassifyCorruption checks that corruption from any layer, and Pebble's,
// is a logged 500 DataCorruptionDetected naming what was found, and that other
// faults keep their mapping.
func TestClassifyCorruption(t *testing.T) {
	for _, sentinel := range []error{bucket.ErrCorrupt, wal.ErrCorrupt, timeseries.ErrCorrupt, pebble.ErrCorruption} {
		err := fmt.Errorf("find %q: series 3 bucket 7: %w: field 2", "cpu", sentinel)
		status, code, msg, internal := classify(err)
		if status != http.StatusInternalServerError || code != mongoerr.DataCorruptionDetected || msg != err.Error() || !internal {
			t.Errorf("%v: %d %d %q internal %v", err, status, code, msg, internal)
		}
		if code.Name() != "DataCorruptionDetected" {
			t.Errorf("code name %q", code.Name())
		}
	}
	status, code, msg, internal := classify(errors.New("disk on fire"))
	if status != http.StatusInternalServerError || code != mongoerr.InternalError || msg != "internal error; see the server log" || !internal {
		t.Errorf("untyped error: %d %d %q internal %v", status, code, msg, internal)
	}
	status, code, _, internal = classify(mongoerr.New(mongoerr.BadValue, "bad"))
	if status != http.StatusBadRequest || code != mongoerr.BadValue || internal {
		t.Errorf("BadValue: %d %d internal %v", status, code, internal)
	}
	if s := statusOf(mongoerr.DataCorruptionDetected); s != http.StatusInternalServerError {
		t.Errorf("statusOf(DataCorruptionDetected) = %d", s)
	}
}

// TestClassifyCanceled checks that a request whose client went away is a
// 499 for the log, not an internal fault, unless a typed error says more.
func TestClassifyCanceled(t *testing.T) {
	for _, err := range []error{context.Canceled, fmt.Errorf("find: %w", context.DeadlineExceeded)} {
		if status, _, msg, internal := classify(err); status != 499 || msg != "request canceled" || internal {
			t.Errorf("%v: %d %q internal %v", err, status, msg, internal)
		}
	}
	err := fmt.Errorf("%w: %w", mongoerr.New(mongoerr.OutOfDiskSpace, "full"), context.Canceled)
	if status, code, _, _ := classify(err); status != http.StatusInsufficientStorage || code != mongoerr.OutOfDiskSpace {
		t.Errorf("%v: %d %d", err, status, code)
	}
	if status, code, msg, internal := classify(fmt.Errorf("x: %w", timeseries.ErrClosed)); status != 503 || code != mongoerr.ShutdownInProgress || msg == "" || internal {
		t.Errorf("closed: %d %d %q %v", status, code, msg, internal)
	}
}
