package errcode

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

func TestOf(t *testing.T) {
	corrupt := fmt.Errorf("find %q: bucket 7: %w", "cpu", timeseries.ErrCorrupt)
	for _, c := range []struct {
		err   error
		want  Class
		known bool
	}{
		{corrupt, Class{mongoerr.DataCorruptionDetected, corrupt.Error(), true}, true},
		{fmt.Errorf("insert: %w", mongoerr.New(mongoerr.OutOfDiskSpace, "full")), Class{mongoerr.OutOfDiskSpace, "full", false}, true},
		{mongoerr.New(mongoerr.InternalError, "broken"), Class{mongoerr.InternalError, "broken", true}, true},
		{fmt.Errorf("find: %w", timeseries.ErrClosed), Class{mongoerr.ShutdownInProgress, "the server is shutting down", false}, true},
		{errors.New("disk on fire"), Class{mongoerr.InternalError, InternalMessage, true}, false},
		{context.Canceled, Class{mongoerr.InternalError, InternalMessage, true}, false},
	} {
		got, known := Of(c.err)
		if got != c.want || known != c.known {
			t.Errorf("Of(%v) = %+v, known %v; want %+v, known %v", c.err, got, known, c.want, c.known)
		}
	}
}
