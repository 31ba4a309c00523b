package s3test_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/internal/s3test"
)

// recorder is a testing.TB that notes a skip or a failure and ends the
// call there, as the real one does.
type recorder struct {
	testing.TB
	skipped, failed string
}

type stopped struct{}

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Cleanup(f func())    { r.TB.Cleanup(f) }
func (r *recorder) Skipf(f string, a ...any) {
	r.skipped = fmt.Sprintf(f, a...)
	panic(stopped{})
}
func (r *recorder) Fatalf(f string, a ...any) {
	r.failed = fmt.Sprintf(f, a...)
	panic(stopped{})
}

func startWith(t *testing.T) *recorder {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(stopped); !ok {
					panic(v)
				}
			}
		}()
		s3test.Start(r)
	}()
	return r
}

// TestStartWithoutWeed: with no binary in the cache and a go command that
// cannot build one, Start skips the test, and fails it when CI is set.
func TestStartWithoutWeed(t *testing.T) {
	t.Setenv("HOURGLASS_CACHE", t.TempDir())
	t.Setenv("GO", "false")

	t.Setenv("CI", "")
	r := startWith(t)
	if r.skipped == "" || r.failed != "" || !strings.Contains(r.skipped, "make deps") {
		t.Errorf("without CI: skipped %q, failed %q; want a skip that names make deps", r.skipped, r.failed)
	}

	t.Setenv("CI", "true")
	r = startWith(t)
	if r.failed == "" || r.skipped != "" {
		t.Errorf("with CI: skipped %q, failed %q; want a failure", r.skipped, r.failed)
	}
}
