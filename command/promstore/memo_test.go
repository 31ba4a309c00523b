package promstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/hourglassdb/hourglass/command/promstore"
)

// TestSelectReadOnce: an expression naming one selector twice reads its
// samples once, by Prometheus' engine over a Queryable and over an
// AllQueryable, and answers as when each selector is read for itself;
// selectors that differ in matchers or range are read each.
func TestSelectReadOnce(t *testing.T) {
	svc := fixture(t)
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute,
		LookbackDelta: 5 * time.Minute, Parser: parser.NewParser(parser.Options{})})
	at := time.UnixMilli(t0 + 20000)
	type run struct {
		value string
		read  int64
	}
	eval := func(t *testing.T, all bool, q string) run {
		t.Helper()
		var read atomic.Int64
		opts := promstore.Options{Read: &read}
		var store storage.Queryable
		var err error
		if all {
			store, err = promstore.NewAll(svc, opts)
		} else {
			store, err = promstore.New(svc, "prometheus", opts)
		}
		if err != nil {
			t.Fatal(err)
		}
		qy, err := eng.NewInstantQuery(context.Background(), store, nil, q, at)
		if err != nil {
			t.Fatal(err)
		}
		defer qy.Close()
		res := qy.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: %v", q, res.Err)
		}
		return run{value: res.Value.String(), read: read.Load()}
	}
	for _, all := range []bool{false, true} {
		one := eval(t, all, `sum(up)`)
		if one.read == 0 {
			t.Fatalf("all %v: sum(up) read no sample", all)
		}
		twice := eval(t, all, `sum(up) / count(up)`)
		if twice.read != one.read {
			t.Errorf("all %v: sum(up) / count(up) read %d samples, sum(up) %d", all, twice.read, one.read)
		}
		if want := `{} => 1 @[` + strconv.FormatInt(at.UnixMilli(), 10) + `]`; twice.value != want {
			t.Errorf("all %v: sum(up) / count(up) = %s, want %s", all, twice.value, want)
		}
		// Another range (an offset, or another start) or other matchers
		// read again.
		if r := eval(t, all, `sum(up) / count(up offset 10s)`); r.read <= one.read {
			t.Errorf("all %v: an offset selector read %d, one selector %d", all, r.read, one.read)
		}
		if r := eval(t, all, `sum(up) / count(count_over_time(up[10s]))`); r.read <= one.read {
			t.Errorf("all %v: a range selector read %d, one selector %d", all, r.read, one.read)
		}
		if r := eval(t, all, `sum(up) / count(up{job="node"})`); r.read <= one.read {
			t.Errorf("all %v: other matchers read %d, one selector %d", all, r.read, one.read)
		}
	}
}
