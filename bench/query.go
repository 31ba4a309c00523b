package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// Query is one named query of the peers harness, in every dialect.
type Query struct {
	Name, Description string
}

// Queries are the harness's q1 and q2 on the cpu-only workload.
var Queries = []Query{
	{"q1", "max of usage_user for host_0 over one hour"},
	{"q2", "1-minute averages of usage_user for host_0 over 12 hours (720 windows)"},
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
	Token        string
	Client       *http.Client
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

// request builds the HTTP request of query q in dialect d.
func (c *QueryConfig) request(ctx context.Context, q string) (*http.Request, error) {
	var u string
	switch c.Dialect {
	case Hourglass:
		var body string
		switch q {
		case "q1":
			body = `{"filter": {"tags.hostname": "host_0", "time": {"$gt": {"$date": "2016-01-01T12:00:00Z"}, "$lte": {"$date": "2016-01-01T13:00:00Z"}}}, "window": "1h", "origin": "2016-01-01T12:00:00.000000001Z", "groupBy": null, "fields": ["usage_user"], "funcs": ["max"]}`
		case "q2":
			body = `{"filter": {"tags.hostname": "host_0", "time": {"$gte": {"$date": "2016-01-01T00:00:00Z"}, "$lt": {"$date": "2016-01-01T12:00:00Z"}}}, "window": "1m", "groupBy": null, "fields": ["usage_user"], "funcs": ["avg"]}`
		}
		u = strings.TrimRight(c.Base, "/") + "/v1/collections/" + url.PathEscape(c.Collection) + "/aggregate?q=" + url.QueryEscape(body)
	case PromQL:
		v := url.Values{"nocache": {"1"}}
		switch q {
		case "q1":
			v.Set("query", `max_over_time(cpu_usage_user{hostname="host_0"}[1h])`)
			v.Set("time", "1451653200")
			u = strings.TrimRight(c.Base, "/") + "/api/v1/query?" + v.Encode()
		case "q2":
			v.Set("query", `avg_over_time(cpu_usage_user{hostname="host_0"}[1m])`)
			v.Set("start", "1451606460")
			v.Set("end", "1451649600")
			v.Set("step", "60")
			u = strings.TrimRight(c.Base, "/") + "/api/v1/query_range?" + v.Encode()
		}
	case InfluxQL:
		pu, err := url.Parse(c.Base)
		if err != nil {
			return nil, err
		}
		v := pu.Query()
		switch q {
		case "q1":
			v.Set("q", "SELECT max(usage_user) FROM cpu WHERE hostname='host_0' AND time > '2016-01-01T12:00:00Z' AND time <= '2016-01-01T13:00:00Z'")
		case "q2":
			v.Set("q", "SELECT mean(usage_user) FROM cpu WHERE hostname='host_0' AND time >= '2016-01-01T00:00:00Z' AND time < '2016-01-01T12:00:00Z' GROUP BY time(1m)")
		}
		pu.RawQuery = v.Encode()
		u = pu.String()
	}
	if u == "" {
		return nil, fmt.Errorf("bench: unknown query %q", q)
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

// RunQueries times every query of Queries against the target, sequentially.
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
	var out []QueryResult
	for _, q := range Queries {
		res := QueryResult{Name: q.Name}
		var lats []time.Duration
		for i := 0; i < cfg.Warmup+cfg.Runs; i++ {
			req, err := cfg.request(ctx, q.Name)
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
