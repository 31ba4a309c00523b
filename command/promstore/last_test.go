package promstore_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/command/promstore"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/timeseries"
)

// lastFixture holds what last_over_time's fast path must read as the
// whole range does: in prometheus, series of up ending in a staleness
// marker, a NaN that is not one, a sample exactly at a range's start,
// none in the range, two samples of one timestamp, and a series of two
// meta values ending in a marker; in mirror, up{a} again ending with a
// marker at the time of prometheus' last sample, a series of its own and
// one whose labels hold a's; in lp, line-protocol data (cpu_usage_user,
// cpu_usage_system) with two rows in one millisecond and a field missing
// from a series' last row.
func lastFixture(t *testing.T) *command.Service {
	svc := newService(t)
	createProm(t, svc, "mirror")
	stale := math.Float64frombits(staleNaN)
	up := func(coll, inst string, samples ...float64) {
		insert(t, svc, coll, []string{"__name__", "up", "instance", inst, "job", "node"}, samples...)
	}
	at := func(s int64) float64 { return float64(t0 + s*1000) }
	var a []float64
	for i := int64(0); i <= 6; i++ {
		a = append(a, at(10*i), float64(i+1))
	}
	up("prometheus", "a", a...)
	up("prometheus", "stale", at(0), 1, at(10), 2, at(20), stale)
	up("prometheus", "nan", at(0), 1, at(10), math.NaN())
	up("prometheus", "edge", at(0), 5, at(30), 6)
	up("prometheus", "old", at(-3600), 9)
	up("prometheus", "dup", at(40), 3, at(50), 1)
	up("prometheus", "dup", at(50), 2)
	insert(t, svc, "prometheus", []string{"__name__", "http_requests_total", "job", "node"}, at(0), 10, at(30), 20, at(60), 30)
	// One label set from two meta values, a number's and its text's,
	// ending with a marker.
	insert(t, svc, "prometheus", []string{"__name__", "http_requests_total", "code", "500", "job", "node"}, at(0), 1, at(10), stale)
	res0, err := svc.Writer().Insert(context.Background(), "prometheus", timeseries.Batch{Measurements: []model.Measurement{{
		Time: (t0 + 5000) * 1e6, Meta: map[string]any{"__name__": "http_requests_total", "code": 500, "job": "node"},
		Fields: []model.Field{{Name: promstore.ValueField, Value: model.Float(2)}}}}}, timeseries.InsertOptions{})
	if err != nil || len(res0.Errors) > 0 {
		t.Fatalf("insert: %v %v", err, res0.Errors)
	}
	up("mirror", "a", at(50), 6, at(60), stale)
	up("mirror", "m", at(40), 3)
	// Its labels hold a's and sort before them.
	insert(t, svc, "mirror", []string{"__name__", "up", "env", "x", "instance", "a", "job", "node"}, at(0), 4, at(30), 5)

	ctx := context.Background()
	opts := timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "time", MetaField: "tags"}}
	if _, err := svc.Writer().CreateCollection(ctx, "lp", opts); err != nil {
		t.Fatal(err)
	}
	row := func(ns int64, host string, kv ...any) model.Measurement {
		var fs []model.Field
		for i := 0; i+1 < len(kv); i += 2 {
			fs = append(fs, model.Field{Name: kv[i].(string), Value: model.Float(kv[i+1].(float64))})
		}
		return model.Measurement{Time: ns, Meta: map[string]any{"_measurement": "cpu", "host": host}, Fields: fs}
	}
	ms := func(s int64) int64 { return (t0 + s*1000) * 1e6 }
	rows := []model.Measurement{
		row(ms(0), "h1", "usage_user", 1.0, "usage_system", 2.0),
		row(ms(30), "h1", "usage_user", 3.0, "usage_system", 4.0),
		row(ms(60)+100, "h1", "usage_user", 5.0, "usage_system", 6.0),
		row(ms(60)+200, "h1", "usage_user", 7.0, "usage_system", 8.0),
		row(ms(0), "h2", "usage_user", 1.5, "usage_system", 2.5),
		row(ms(20), "h2", "usage_user", math.NaN(), "usage_system", 3.5),
		row(ms(50), "h2", "usage_system", 4.5),
		row(ms(-7200), "h3", "usage_user", 9.0),
	}
	res, err := svc.Writer().Insert(ctx, "lp", timeseries.Batch{Measurements: rows}, timeseries.InsertOptions{})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("insert: %v %v", err, res.Errors)
	}
	return svc
}

// lastQueries are asked at every time of lastTimes (seconds after t0).
var lastQueries = []string{
	`last_over_time(up[1m])`,
	`last_over_time(up[61s])`,
	`last_over_time(up[30s])`,
	`last_over_time(up[10s])`,
	`last_over_time(up[1m] offset 30s)`,
	`last_over_time(up[1m] offset -10s)`,
	fmt.Sprintf(`last_over_time(up[1m] @ %d)`, t0/1000+40),
	fmt.Sprintf(`last_over_time(up[20s] @ %d)`, t0/1000+50),
	`last_over_time(up{instance=~"a|dup|nan|edge"}[1m])`,
	`last_over_time(up{instance!="stale"}[1m])`,
	`last_over_time(up{instance="a"}[1m])`,
	`last_over_time(up{instance="dup"}[15s])`,
	`sum by (instance) (last_over_time(up{instance!="stale"}[5m]))`,
	`max(last_over_time({__name__=~"up|http_requests_total"}[1h]))`,
	`last_over_time(up[1m]) - last_over_time(up[2m])`,
	`last_over_time(last_over_time(up[1m])[2m:10s])`,
	`timestamp(last_over_time(up[1m]))`,
	`last_over_time(nothing[1m])`,
	`last_over_time(http_requests_total[1m])`,
	`last_over_time(cpu_usage_user[1m])`,
	`last_over_time(cpu_usage_user[30s])`,
	`last_over_time({__name__=~"cpu_.*"}[1m])`,
	`last_over_time({__name__=~"cpu_.*", host="h2"}[3h])`,
	`count(last_over_time({__name__=~".+"}[3h]))`,
}

var lastTimes = []int64{0, 20, 45, 50, 60, 61, 70, 90, 125, 3600}

// lastEngine is an engine set as the API's.
func lastEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true, EnableNegativeOffset: true})
}

// evalText is the answer to query at at (ms), or over [at, end] every 10
// s when end > at, with every value's bits.
func evalText(t *testing.T, eng *promql.Engine, q storage.Queryable, query string, at, end int64) string {
	t.Helper()
	var (
		qry promql.Query
		err error
	)
	if end > at {
		qry, err = eng.NewRangeQuery(context.Background(), q, nil, query, time.UnixMilli(at), time.UnixMilli(end), 10*time.Second)
	} else {
		qry, err = eng.NewInstantQuery(context.Background(), q, nil, query, time.UnixMilli(at))
	}
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		return "error: " + res.Err.Error()
	}
	var b strings.Builder
	switch v := res.Value.(type) {
	case promql.Vector:
		for _, s := range v {
			fmt.Fprintf(&b, "%s %d %x\n", s.Metric, s.T, math.Float64bits(s.F))
		}
	case promql.Matrix:
		for _, s := range v {
			fmt.Fprintf(&b, "%s", s.Metric)
			for _, p := range s.Floats {
				fmt.Fprintf(&b, " %d:%x", p.T, math.Float64bits(p.F))
			}
			b.WriteByte('\n')
		}
	default:
		fmt.Fprintf(&b, "%v\n", v)
	}
	return b.String()
}

// TestLastOverTimeFast: last_over_time at one instant reads only the last
// samples of each series, and answers every query as the whole range's
// read does, over one collection of each shape and over all of them.
func TestLastOverTimeFast(t *testing.T) {
	svc := lastFixture(t)
	eng := lastEngine()
	type pair struct {
		name       string
		fast, full storage.Queryable
	}
	var pairs []pair
	for _, name := range []string{"prometheus", "mirror", "lp"} {
		fast, err := promstore.New(svc, name, promstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		full, _ := promstore.New(svc, name, promstore.Options{})
		promstore.FullReads(full)
		pairs = append(pairs, pair{name, fast, full})
	}
	fast, err := promstore.NewAll(svc, promstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := promstore.NewAll(svc, promstore.Options{})
	promstore.FullReads(full)
	pairs = append(pairs, pair{"all", fast, full})

	answers := 0
	for _, p := range pairs {
		for _, query := range lastQueries {
			for _, s := range lastTimes {
				at := t0 + s*1000
				want := evalText(t, eng, p.full, query, at, 0)
				if got := evalText(t, eng, p.fast, query, at, 0); got != want {
					t.Errorf("%s: %s at t0+%ds:\n got %s\nwant %s", p.name, query, s, got, want)
				}
				if want != "" {
					answers++
				}
			}
			want := evalText(t, eng, p.full, query, t0-10000, t0+100000)
			if got := evalText(t, eng, p.fast, query, t0-10000, t0+100000); got != want {
				t.Errorf("%s: %s over a range:\n got %s\nwant %s", p.name, query, got, want)
			}
		}
	}
	if answers < 100 {
		t.Errorf("only %d answers were not empty", answers)
	}
}

// TestLastOverTimeReads: the fast path reads fewer samples than the
// range holds, and a series ending with a staleness marker whole; a
// range query reads them all.
func TestLastOverTimeReads(t *testing.T) {
	svc := lastFixture(t)
	eng := lastEngine()
	read := func(q string, at, end int64, full bool) int64 {
		var n atomic.Int64
		qa, err := promstore.New(svc, "prometheus", promstore.Options{Read: &n})
		if err != nil {
			t.Fatal(err)
		}
		if full {
			promstore.FullReads(qa)
		}
		evalText(t, eng, qa, q, at, end)
		return n.Load()
	}
	at := t0 + 60000
	// a's samples at 50 and 60 s, dup's two at 50 s; a's from 10 s
	// and dup's from 40 s are in the range.
	q := `last_over_time(up{instance=~"a|dup"}[1m])`
	if fast, full := read(q, at, 0, false), read(q, at, 0, true); fast != 4 || full != 9 {
		t.Errorf("%s: %d samples read, %d by the whole read", q, fast, full)
	}
	if fast, full := read(q, at-30000, at, false), read(q, at-30000, at, true); fast != full {
		t.Errorf("%s as a range query: %d samples read, %d by the whole read", q, fast, full)
	}
	// From 20 s (stale's last sample, a marker): a's 5 and dup's 3,
	// then stale whole (3); the whole range holds 7 + 3 + 3.
	q = `last_over_time(up{instance=~"a|dup|stale"}[5m])`
	if fast, full := read(q, at, 0, false), read(q, at, 0, true); fast != 12 || full != 13 {
		t.Errorf("%s: %d samples read, %d by the whole read", q, fast, full)
	}
}
