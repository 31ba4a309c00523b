package promstore_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/command/promstore"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/timeseries"
)

// insertFields stores one measurement of meta and the float fields kv
// (name, value pairs) at t (ms) in collection name.
func insertFields(t *testing.T, svc *command.Service, name string, at int64, meta any, kv ...any) {
	t.Helper()
	var fs []model.Field
	for i := 0; i+1 < len(kv); i += 2 {
		fs = append(fs, model.Field{Name: kv[i].(string), Value: model.Float(kv[i+1].(float64))})
	}
	ms := []model.Measurement{{Time: at * 1e6, Meta: meta, Fields: fs}}
	res, err := svc.Writer().Insert(context.Background(), name, timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("insert: %v %v", err, res.Errors)
	}
}

// allFixture: prometheus (remote write's shape) holds up and
// req_total; lp line-protocol data of measurement cpu; docs a field temp
// under a scalar meta value; plain a plain collection.
func allFixture(t *testing.T) *command.Service {
	svc := newService(t)
	insert(t, svc, "prometheus", []string{"__name__", "up", "job", "a"}, float64(t0), 1, float64(t0+15000), 1)
	insert(t, svc, "prometheus", []string{"__name__", "req_total", "job", "a"}, float64(t0), 7)
	ctx := context.Background()
	for name, meta := range map[string]string{"lp": "tags", "docs": "sensor"} {
		opts := timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "time", MetaField: meta}}
		if _, err := svc.Writer().CreateCollection(ctx, name, opts); err != nil {
			t.Fatal(err)
		}
	}
	insertFields(t, svc, "lp", t0, map[string]any{"_measurement": "cpu", "host": "h"}, "usage", 0.5, "idle", 99.5)
	insertFields(t, svc, "docs", t0, "s1", "temp", 20.0)
	if _, err := svc.Writer().CreateCollection(ctx, "plain", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestAllQueryable: the Querier of every collection merges their series
// in label set order, reads only the collections whose names can match
// the __name__ matchers, and leaves plain collections out.
func TestAllQueryable(t *testing.T) {
	svc := allFixture(t)
	insert(t, svc, "prometheus", []string{"job", "nameless"}, float64(t0), 3) // as the document API can write
	var scanned atomic.Int64
	a, err := promstore.NewAll(svc, promstore.Options{Scanned: &scanned})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Collections(context.Background()); err != nil || !slices.Equal(got, []string{"docs", "lp", "prometheus"}) {
		t.Fatalf("collections: %v %v", got, err)
	}
	q, err := a.Querier(t0-60000, t0+60000)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	all := names(selectAll(t, q, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")))
	want := []string{`{__name__="cpu_idle", host="h"}`, `{__name__="cpu_usage", host="h"}`, `{__name__="docs_temp", sensor="s1"}`,
		`{__name__="req_total", job="a"}`, `{__name__="up", job="a"}`}
	if !slices.Equal(all, want) || scanned.Load() != 3 {
		t.Fatalf("every series: %q, %d collections read", all, scanned.Load())
	}
	for _, tc := range []struct {
		m     *labels.Matcher
		want  []string
		reads int64
	}{
		{labels.MustNewMatcher(labels.MatchEqual, "__name__", "cpu_usage"), want[1:2], 1},
		{labels.MustNewMatcher(labels.MatchEqual, "__name__", "docs_temp"), want[2:3], 1},
		{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "docs_.*"), want[2:3], 1},
		{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "cpu_.+"), want[:2], 1},
		{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "up|cpu_idle"), []string{want[0], want[4]}, 2},
		{labels.MustNewMatcher(labels.MatchEqual, "__name__", "mem_usage"), nil, 0},
		{labels.MustNewMatcher(labels.MatchEqual, "__name__", "up"), want[4:], 1},
		// Matches a series without __name__ too: prometheus is read.
		{labels.MustNewMatcher(labels.MatchNotRegexp, "__name__", ".+_.+"), []string{`{__name__="up", job="a"}`, `{job="nameless"}`}, 1},
		{labels.MustNewMatcher(labels.MatchEqual, "__name__", ""), []string{`{job="nameless"}`}, 1},
	} {
		scanned.Store(0)
		if got := names(selectAll(t, q, nil, tc.m)); !slices.Equal(got, tc.want) || scanned.Load() != tc.reads {
			t.Errorf("%s: %q, %d collections read; want %q, %d", tc.m, got, scanned.Load(), tc.want, tc.reads)
		}
	}
	vals, _, err := q.LabelValues(context.Background(), "__name__", nil)
	if err != nil || !slices.Equal(vals, []string{"cpu_idle", "cpu_usage", "docs_temp", "req_total", "up"}) {
		t.Fatalf("names: %v %v", vals, err)
	}
}

// TestAllQueryableLimits: the max samples bound the samples all the
// collections read together.
func TestAllQueryableLimits(t *testing.T) {
	svc := allFixture(t) // 3 samples in prometheus, 2 in lp, 1 in docs
	a, err := promstore.NewAll(svc, promstore.Options{MaxSamples: 5})
	if err != nil {
		t.Fatal(err)
	}
	q, err := a.Querier(t0-60000, t0+60000)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+"))
	for ss.Next() {
	}
	if err := ss.Err(); !errors.Is(err, promstore.ErrSampleLimit) {
		t.Fatalf("6 samples over a limit of 5: %v", err)
	}
	ss = q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", "cpu_.+|docs_.+"))
	for ss.Next() {
	}
	if err := ss.Err(); !errors.Is(err, promstore.ErrSampleLimit) {
		t.Fatalf("the same Querier read 3 more samples past its limit: %v", err)
	}
}

// TestFieldsPushdown: label matchers that narrow a fields-shaped read in
// the engine give the same series as the check in Go alone: a label equal
// to a string picks series by their meta document, one whose text may be
// a number's or a boolean's (a meta value that is a number or a boolean
// gives it) is left to the check, and a name picks the fields that can
// make it.
func TestFieldsPushdown(t *testing.T) {
	svc := newService(t)
	ctx := context.Background()
	opts := timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "time", MetaField: "m"}}
	if _, err := svc.Writer().CreateCollection(ctx, "d", opts); err != nil {
		t.Fatal(err)
	}
	insertFields(t, svc, "d", t0, map[string]any{"id": int64(3), "site": "n", "ok": true}, "temp", 20.0, "rh", 50.0)
	insertFields(t, svc, "d", t0, map[string]any{"id": "3", "site": "s", "ok": "true"}, "temp", 21.0)
	insertFields(t, svc, "d", t0, map[string]any{"id": "x", "site": "n"}, "temp", 22.0)
	a, err := promstore.NewAll(svc, promstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := a.Querier(t0-60000, t0+60000)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	eq := func(n, v string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchEqual, n, v) }
	for _, tc := range []struct {
		ms   []*labels.Matcher
		want []string
	}{
		{[]*labels.Matcher{eq("__name__", "d_temp"), eq("id", "3")},
			[]string{`{__name__="d_temp", id="3", ok="true", site="n"}`, `{__name__="d_temp", id="3", ok="true", site="s"}`}},
		{[]*labels.Matcher{eq("__name__", "d_temp"), eq("site", "n")},
			[]string{`{__name__="d_temp", id="3", ok="true", site="n"}`, `{__name__="d_temp", id="x", site="n"}`}},
		{[]*labels.Matcher{eq("__name__", "d_temp"), eq("ok", "true")},
			[]string{`{__name__="d_temp", id="3", ok="true", site="n"}`, `{__name__="d_temp", id="3", ok="true", site="s"}`}},
		{[]*labels.Matcher{eq("__name__", "d_rh")}, []string{`{__name__="d_rh", id="3", ok="true", site="n"}`}},
		{[]*labels.Matcher{eq("__name__", "d_temp"), eq("site", "nowhere")}, nil},
		// A set of strings selects in the series index; one holding
		// the text of a number cannot.
		{[]*labels.Matcher{eq("__name__", "d_temp"), labels.MustNewMatcher(labels.MatchRegexp, "site", "s|nowhere")},
			[]string{`{__name__="d_temp", id="3", ok="true", site="s"}`}},
		{[]*labels.Matcher{eq("__name__", "d_temp"), labels.MustNewMatcher(labels.MatchRegexp, "id", "3|y")},
			[]string{`{__name__="d_temp", id="3", ok="true", site="n"}`, `{__name__="d_temp", id="3", ok="true", site="s"}`}},
	} {
		if got := names(selectAll(t, q, nil, tc.ms...)); !slices.Equal(got, tc.want) {
			t.Errorf("%v: %q, want %q", tc.ms, got, tc.want)
		}
	}
}
