package promstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/hourglassdb/hourglass/command/promstore"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/timeseries"
)

// TestSeriesListingMatchesSamples: on collections of the fields shape
// (line-protocol data, documents under a meta document or a scalar), the
// series API (Select with Func "series": the engine's listing, from each
// series' newest row where it can) gives exactly the series that a read
// of samples gives over the same range and matchers, for random data,
// ranges and matchers, in memory and once stored.
func TestSeriesListingMatchesSamples(t *testing.T) {
	svc := newService(t)
	ctx := context.Background()
	for name, meta := range map[string]string{"lp": "tags", "docs": "sensor"} {
		opts := timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "time", MetaField: meta}}
		if _, err := svc.Writer().CreateCollection(ctx, name, opts); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var ms, docs []model.Measurement
	for range 600 {
		at := (t0 + rng.Int64N(3600)*1000) * 1e6
		var fs []model.Field
		for _, f := range []string{"value", "battery", "state"} {
			switch rng.IntN(3) {
			case 0:
				fs = append(fs, model.Field{Name: f, Value: model.Float(rng.Float64())})
			case 1:
				if f == "state" {
					fs = append(fs, model.Field{Name: f, Value: model.String("ok")})
				} else {
					fs = append(fs, model.Field{Name: f, Value: model.Int(rng.Int64N(9))})
				}
			}
		}
		if len(fs) == 0 {
			continue
		}
		k := rng.IntN(12)
		meta := map[string]any{"_measurement": []string{"iot", "env"}[k%2], "sensor": fmt.Sprintf("s%d", k),
			"site": fmt.Sprintf("site-%d", k%3), "n": int64(k % 4)}
		ms = append(ms, model.Measurement{Time: at, Meta: meta, Fields: fs})
		docs = append(docs, model.Measurement{Time: at, Meta: fmt.Sprintf("d%d", k), Fields: fs})
	}
	for name, batch := range map[string][]model.Measurement{"lp": ms, "docs": docs} {
		if res, err := svc.Writer().Insert(ctx, name, timeseries.Batch{Measurements: batch}, timeseries.InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Fatalf("insert: %v %v", err, res.Errors)
		}
	}
	eq := func(n, v string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchEqual, n, v) }
	re := func(n, v string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchRegexp, n, v) }
	matchers := [][]*labels.Matcher{
		{re("__name__", ".+")},
		{eq("__name__", "iot_value")},
		{eq("__name__", "env_battery"), eq("site", "site-1")},
		{re("__name__", "iot_.*"), re("site", "site-1|site-2")},
		{eq("sensor", "s4")},
		{eq("n", "2")},
		{eq("__name__", "docs_value")},
		{re("sensor", "d1.*")},
		{eq("__name__", "iot_state")},
	}
	check := func(when string) {
		for range 40 {
			start := t0 + rng.Int64N(3700)*1000 - 50000
			end := start + rng.Int64N(1200)*1000
			m := matchers[rng.IntN(len(matchers))]
			for _, coll := range []string{"lp", "docs"} {
				qa, err := promstore.New(svc, coll, promstore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				q, err := qa.Querier(start, end)
				if err != nil {
					t.Fatal(err)
				}
				listed := names(selectAll(t, q, &storage.SelectHints{Start: start, End: end, Func: "series"}, m...))
				var read []string
				for _, g := range selectAll(t, q, &storage.SelectHints{Start: start, End: end}, m...) {
					if len(g.t) > 0 {
						read = append(read, g.labels)
					}
				}
				q.Close()
				if !slices.Equal(listed, read) {
					t.Fatalf("%s: %s %v [%d, %d]:\nlisted %q\n  read %q", when, coll, m, start, end, listed, read)
				}
			}
		}
	}
	check("in memory")
	if err := svc.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	check("stored")
}
