package command

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/replset"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/timeseries/wal"
)

// TestClassify holds the one table from errors to what each door tells its
// clients: the MongoDB code and name, the HTTP status, the Prometheus
// errorType, whether the door logs it and whether the client should retry.
func TestClassify(t *testing.T) {
	corrupt := func(sentinel error) error {
		return fmt.Errorf("find %q: series 3 bucket 7: %w: field 2", "cpu", sentinel)
	}
	cases := []struct {
		err       error
		code      mongoerr.Code
		status    int
		errorType string
		msg       string // "" : the error's own
		internal  bool
		retry     bool
	}{
		{corrupt(bucket.ErrCorrupt), mongoerr.DataCorruptionDetected, 500, "internal", "", true, false},
		{corrupt(wal.ErrCorrupt), mongoerr.DataCorruptionDetected, 500, "internal", "", true, false},
		{corrupt(timeseries.ErrCorrupt), mongoerr.DataCorruptionDetected, 500, "internal", "", true, false},
		{corrupt(pebble.ErrCorruption), mongoerr.DataCorruptionDetected, 500, "internal", "", true, false},
		{errors.New("disk on fire"), mongoerr.InternalError, 500, "internal", InternalMessage, true, false},
		{mongoerr.New(mongoerr.InternalError, "broken"), mongoerr.InternalError, 500, "internal", "broken", true, false},
		{mongoerr.New(mongoerr.BadValue, "bad"), mongoerr.BadValue, 400, "bad_data", "bad", false, false},
		{mongoerr.New(mongoerr.NamespaceNotFound, "no"), mongoerr.NamespaceNotFound, 404, "not_found", "no", false, false},
		{mongoerr.New(mongoerr.DuplicateKey, "dup"), mongoerr.DuplicateKey, 409, "bad_data", "dup", false, false},
		{mongoerr.New(mongoerr.QueryExceededMemoryLimit, "big"), mongoerr.QueryExceededMemoryLimit, 400, "execution", "big", false, false},
		{mongoerr.New(mongoerr.MaxTimeMSExpired, "late"), mongoerr.MaxTimeMSExpired, 503, "timeout", "late", false, true},
		{mongoerr.New(mongoerr.IngressRequestRateLimitExceeded, "busy"), mongoerr.IngressRequestRateLimitExceeded, 429, "unavailable", "busy", false, true},
		{ErrIngestQueueFull, mongoerr.IngressRequestRateLimitExceeded, 429, "unavailable", ErrIngestQueueFull.Message, false, true},
		{ErrIngestTimeout, mongoerr.IngressRequestRateLimitExceeded, 503, "unavailable", ErrIngestTimeout.Error(), false, true},
		{context.Canceled, mongoerr.InternalError, 499, "canceled", "request canceled", false, false},
		{fmt.Errorf("find: %w", context.DeadlineExceeded), mongoerr.InternalError, 499, "canceled", "request canceled", false, false},
		{fmt.Errorf("%w: %w", mongoerr.New(mongoerr.OutOfDiskSpace, "full"), context.Canceled), mongoerr.OutOfDiskSpace, 507, "unavailable", "full", false, true},
		{fmt.Errorf("x: %w", timeseries.ErrClosed), mongoerr.ShutdownInProgress, 503, "unavailable", "the server is shutting down", false, true},
		{&replset.NotLeaderError{Leader: "10.0.0.1:7001", LeaderID: "n1"}, mongoerr.NotWritablePrimary, 421, "unavailable", "", false, false},
		{&replset.NotLeaderError{}, mongoerr.NotWritablePrimary, 503, "unavailable", "", false, true},
		{fmt.Errorf("insert: %w", replset.ErrLeadershipLost), mongoerr.InterruptedDueToReplStateChange, 503, "unavailable",
			"insert: replset: leadership lost before the write was committed: the set is electing a primary; retry (a retry may apply it twice)", false, true},
		{replset.ErrTimeout, mongoerr.InternalError, 503, "unavailable", "replset: write not committed in time (it may still be applied: a retry may apply it twice)", false, true},
		{fmt.Errorf("%w: disk", replset.ErrHalted), mongoerr.ShutdownInProgress, 503, "unavailable", "", false, true},
	}
	s := &Service{}
	for _, c := range cases {
		for _, door := range []Door{HTTP, MongoDB} {
			got := s.Classify(c.err, door)
			msg := c.msg
			if msg == "" {
				msg = c.err.Error()
			}
			if got.Code != c.code || got.CodeName != c.code.Name() || got.HTTPStatus != c.status || got.ErrorType != c.errorType ||
				got.Message != msg || got.Internal != c.internal || got.Retry != c.retry {
				t.Errorf("%v at door %d: %+v; want code %d, status %d %s, %q, internal %v, retry %v",
					c.err, door, got, c.code, c.status, c.errorType, msg, c.internal, c.retry)
			}
		}
	}
}
