// Package promstore serves the samples of a time-series collection to
// Prometheus: a storage.Queryable for Prometheus' own PromQL engine
// (github.com/prometheus/prometheus/promql), and the reads of remote read,
// both over the command layer.
//
// A collection holds Prometheus series as remote write stores them: the
// timeField (t) is the sample's time, the metaField (labels) a document of
// label name to value, __name__ included, and the float field value the
// sample's value, kept bit for bit (staleness markers included). Each
// label matcher becomes a condition on <metaField>.<name> that the engine
// answers from its series index, and the time range a condition on the
// timeField, so that a read decodes the buckets of the matching series in
// the range only; every series is checked against the matchers again, so
// a label name a path cannot name (one holding a dot) matches exactly.
//
// A collection of another shape gives its numeric fields as series (see
// API.md): line-protocol data as <measurement>_<field> with its tags as
// labels, any other collection's fields as <collection>_<field> with the
// meta document's fields as labels. Its names are known from its fields
// (and its series index's measurements): a read whose __name__ matchers
// none of them match does not read it.
//
// NewAll is the Queryable of every time-series collection at once, each
// mapped so, merged by Prometheus' merge querier (ChainedSeriesMerge),
// the limits bounding their sum.
//
// Usage:
//
//	q, err := promstore.New(svc, "prometheus", promstore.Options{Memory: svc.Bodies()})
//	if err != nil {
//		return err
//	}
//	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 50e6, Timeout: 2 * time.Minute})
//	qry, err := engine.NewInstantQuery(ctx, q, nil, `rate(up[5m])`, time.Now())
//	if err != nil {
//		return err
//	}
//	defer qry.Close()
//	res := qry.Exec(ctx)
//
// Every Querier holds the samples it read until it is closed; the engine
// closes those it opens when the query is closed.
package promstore
