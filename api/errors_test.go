package api

import (
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
