package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Dialect is the query language of a query target.
type Dialect int

// The query dialects.
const (
	// Hourglass is the aggregate endpoint of a Hourglass server.
	Hourglass Dialect = iota
	// PromQL is a Prometheus-compatible API (VictoriaMetrics, Prometheus),
	// with line-protocol fields stored as <measurement>_<field>.
	PromQL
	// InfluxQL is InfluxDB 1.x's /query.
	InfluxQL
)

// Query is one named query of a workload, in every dialect.
type Query struct {
	Name, Description string
	// Hourglass is the request body of Endpoint: "aggregate" (or empty),
	// "find" or "distinct".
	Hourglass string
	Endpoint  string
	// Prom is the PromQL query with its time parameters (time, or start,
	// end and step), URL-encoded by RunQueries. When PromSeries is set,
	// Prom is a series selector sent as match[] to /api/v1/series, with
	// start and end in PromArgs.
	Prom       string
	PromArgs   [][2]string
	PromSeries bool
	// InfluxQL is the InfluxQL statement.
	InfluxQL string
}

const (
	h0Hour   = `"tags.hostname": "host_0", "time": {"$gte": {"$date": "2016-01-01T12:00:00Z"}, "$lt": {"$date": "2016-01-01T13:00:00Z"}}`
	h0Day12  = `"tags.hostname": "host_0", "time": {"$gte": {"$date": "2016-01-01T00:00:00Z"}, "$lt": {"$date": "2016-01-01T12:00:00Z"}}`
	influx1h = `time >= '2016-01-01T12:00:00Z' AND time < '2016-01-01T13:00:00Z'`
	influx12 = `time >= '2016-01-01T00:00:00Z' AND time < '2016-01-01T12:00:00Z'`
)

var (
	prom1h  = [][2]string{{"start", "1451649660"}, {"end", "1451653200"}, {"step", "60"}}
	prom12h = [][2]string{{"start", "1451606460"}, {"end", "1451649600"}, {"step", "60"}}
)

// Queries are the peers harness's q1 and q2, and TSBS-style devops queries,
// on the cpu-only workload.
var Queries = []Query{
	{Name: "q1", Description: "max of usage_user for host_0 over one hour",
		Hourglass: `{"filter": {"tags.hostname": "host_0", "time": {"$gt": {"$date": "2016-01-01T12:00:00Z"}, "$lte": {"$date": "2016-01-01T13:00:00Z"}}}, "window": "1h", "origin": "2016-01-01T12:00:00.000000001Z", "groupBy": null, "fields": ["usage_user"], "funcs": ["max"]}`,
		Prom:      `max_over_time(cpu_usage_user{hostname="host_0"}[1h])`, PromArgs: [][2]string{{"time", "1451653200"}},
		InfluxQL: "SELECT max(usage_user) FROM cpu WHERE hostname='host_0' AND time > '2016-01-01T12:00:00Z' AND time <= '2016-01-01T13:00:00Z'"},
	{Name: "q2", Description: "1-minute averages of usage_user for host_0 over 12 hours (720 windows)",
		Hourglass: `{"filter": {` + h0Day12 + `}, "window": "1m", "groupBy": null, "fields": ["usage_user"], "funcs": ["avg"]}`,
		Prom:      `avg_over_time(cpu_usage_user{hostname="host_0"}[1m])`, PromArgs: prom12h,
		InfluxQL: "SELECT mean(usage_user) FROM cpu WHERE hostname='host_0' AND " + influx12 + " GROUP BY time(1m)"},
	{Name: "single-groupby-1-1-1", Description: "1-minute maxima of 1 field of 1 host over 1 hour",
		Hourglass: `{"filter": {` + h0Hour + `}, "window": "1m", "groupBy": null, "fields": ["usage_user"], "funcs": ["max"]}`,
		Prom:      `max_over_time(cpu_usage_user{hostname="host_0"}[1m])`, PromArgs: prom1h,
		InfluxQL: "SELECT max(usage_user) FROM cpu WHERE hostname='host_0' AND " + influx1h + " GROUP BY time(1m)"},
	{Name: "single-groupby-1-1-12", Description: "1-minute maxima of 1 field of 1 host over 12 hours",
		Hourglass: `{"filter": {` + h0Day12 + `}, "window": "1m", "groupBy": null, "fields": ["usage_user"], "funcs": ["max"]}`,
		Prom:      `max_over_time(cpu_usage_user{hostname="host_0"}[1m])`, PromArgs: prom12h,
		InfluxQL: "SELECT max(usage_user) FROM cpu WHERE hostname='host_0' AND " + influx12 + " GROUP BY time(1m)"},
	{Name: "single-groupby-5-1-1", Description: "1-minute maxima of 5 fields of 1 host over 1 hour",
		Hourglass: `{"filter": {` + h0Hour + `}, "window": "1m", "groupBy": null, "fields": ["usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait"], "funcs": ["max"]}`,
		Prom:      prom5Fields, PromArgs: prom1h,
		InfluxQL: "SELECT max(usage_user), max(usage_system), max(usage_idle), max(usage_nice), max(usage_iowait) FROM cpu WHERE hostname='host_0' AND " + influx1h + " GROUP BY time(1m)"},
	{Name: "lastpoint", Description: "the last usage_user of every host",
		Hourglass: `{"filter": {"time": {"$gte": {"$date": "2016-01-01T00:00:00Z"}}}, "window": "1d", "groupBy": "tags.hostname", "fields": ["usage_user"], "funcs": ["last"]}`,
		Prom:      `last_over_time(cpu_usage_user[1d])`, PromArgs: [][2]string{{"time", "1451692800"}},
		InfluxQL: "SELECT last(usage_user) FROM cpu GROUP BY hostname"},
	{Name: "high-cpu-1", Description: "the points of host_0 with usage_user over 90 in 12 hours",
		Hourglass: `{"filter": {` + h0Day12 + `, "usage_user": {"$gt": 90}}, "projection": {"time": 1, "usage_user": 1}}`, Endpoint: "find",
		Prom: `cpu_usage_user{hostname="host_0"} > 90`, PromArgs: [][2]string{{"start", "1451606400"}, {"end", "1451649590"}, {"step", "10"}},
		InfluxQL: "SELECT usage_user FROM cpu WHERE hostname='host_0' AND usage_user > 90 AND " + influx12},
}

// QueryConfig describes a query benchmark against one target.
type QueryConfig struct {
	Dialect Dialect
	// Base is the server's base URL (http://host:port) for Hourglass and
	// PromQL; for InfluxQL, the /query URL with its db parameter.
	Base string
	// Collection is the Hourglass collection the workload was loaded into.
	Collection string
	// Runs measured per query (default 20), after Warmup unmeasured ones
	// (default 2).
	Runs, Warmup int
	// Queries are the queries to time; nil means Queries (the cpu-only
	// workload's). IoT.Queries gives the iot workload's.
	Queries []Query
	// Only restricts the run to these queries; empty runs all. A name
	// that is not among the queries is an error.
	Only   []string
	Token  string
	Client *http.Client
}

// QueryResult reports one query.
type QueryResult struct {
	Name     string
	Runs     int
	Median   time.Duration
	P99      time.Duration
	Bytes    int // of the last response
	Response string
}

// request builds the HTTP request of q in the target's dialect.
func (c *QueryConfig) request(ctx context.Context, q *Query) (*http.Request, error) {
	var u string
	switch c.Dialect {
	case Hourglass:
		ep := q.Endpoint
		if ep == "" {
			ep = "aggregate"
		}
		u = strings.TrimRight(c.Base, "/") + "/v1/collections/" + url.PathEscape(c.Collection) + "/" + ep + "?q=" + url.QueryEscape(q.Hourglass)
	case PromQL:
		v := url.Values{"nocache": {"1"}, "query": {q.Prom}}
		ep := "/api/v1/query"
		if q.PromSeries {
			v = url.Values{"match[]": {q.Prom}}
			ep = "/api/v1/series"
		}
		for _, a := range q.PromArgs {
			v.Set(a[0], a[1])
			if a[0] == "step" && !q.PromSeries {
				ep = "/api/v1/query_range"
			}
		}
		u = strings.TrimRight(c.Base, "/") + ep + "?" + v.Encode()
	case InfluxQL:
		if q.InfluxQL == "" {
			return nil, fmt.Errorf("bench: query %s has no InfluxQL form", q.Name)
		}
		pu, err := url.Parse(c.Base)
		if err != nil {
			return nil, err
		}
		v := pu.Query()
		v.Set("q", q.InfluxQL)
		pu.RawQuery = v.Encode()
		u = pu.String()
	default:
		return nil, fmt.Errorf("bench: unknown dialect %d", c.Dialect)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		if c.Dialect == Hourglass {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		} else {
			req.Header.Set("Authorization", "Token "+c.Token)
		}
	}
	return req, nil
}

// RunQueries times every query of cfg.Queries (default Queries) against
// the target, sequentially.
func RunQueries(ctx context.Context, cfg QueryConfig) ([]QueryResult, error) {
	if cfg.Runs <= 0 {
		cfg.Runs = 20
	}
	if cfg.Warmup < 0 {
		cfg.Warmup = 0
	} else if cfg.Warmup == 0 {
		cfg.Warmup = 2
	}
	if cfg.Collection == "" {
		cfg.Collection = "bench_cpu"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: time.Minute}
	}
	if cfg.Queries == nil {
		cfg.Queries = Queries
	}
	for _, name := range cfg.Only {
		if !slices.ContainsFunc(cfg.Queries, func(q Query) bool { return q.Name == name }) {
			return nil, fmt.Errorf("bench: no query %q in this workload", name)
		}
	}
	var out []QueryResult
	for i := range cfg.Queries {
		q := &cfg.Queries[i]
		if len(cfg.Only) > 0 && !slices.Contains(cfg.Only, q.Name) {
			continue
		}
		res := QueryResult{Name: q.Name}
		var lats []time.Duration
		for i := 0; i < cfg.Warmup+cfg.Runs; i++ {
			req, err := cfg.request(ctx, q)
			if err != nil {
				return out, err
			}
			start := time.Now()
			resp, err := cfg.Client.Do(req)
			if err != nil {
				return out, fmt.Errorf("%s: %w", q.Name, err)
			}
			body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			resp.Body.Close()
			took := time.Since(start)
			if err != nil {
				return out, fmt.Errorf("%s: %w", q.Name, err)
			}
			if resp.StatusCode != http.StatusOK {
				return out, fmt.Errorf("%s: %s: %.300s", q.Name, resp.Status, body)
			}
			if i >= cfg.Warmup {
				lats = append(lats, took)
			}
			res.Bytes = len(body)
			res.Response = string(body[:min(len(body), 300)])
		}
		l := summarize(lats)
		res.Runs, res.Median, res.P99 = len(lats), l.P50, l.P99
		out = append(out, res)
	}
	return out, nil
}

// prom5Fields is single-groupby-5-1-1 in PromQL that Prometheus' own
// engine takes as well as VictoriaMetrics': max_over_time drops the metric
// name, and five series left with the same labels are an error there
// ("vector cannot contain metrics with the same labelset"), so each field
// names its result with a label instead.
var prom5Fields = func() string {
	var b strings.Builder
	for i, f := range []string{"user", "system", "idle", "nice", "iowait"} {
		if i > 0 {
			b.WriteString(" or ")
		}
		fmt.Fprintf(&b, `label_replace(max_over_time(cpu_usage_%s{hostname="host_0"}[1m]), "field", "usage_%s", "", "")`, f, f)
	}
	return b.String()
}()
