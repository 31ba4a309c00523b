package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/timeseries"
)

// iotPoint is one line of the iot workload as the test reads it back.
type iotPoint struct {
	ns    int64
	tags  map[string]string
	value float64
}

func iotPoints(t *testing.T, lines []byte) []iotPoint {
	var out []iotPoint
	for line := range bytes.Lines(lines) {
		f := strings.Fields(string(line))
		tags := map[string]string{}
		for _, kv := range strings.Split(f[0], ",")[1:] {
			k, v, _ := strings.Cut(kv, "=")
			tags[k] = v
		}
		vs, _, _ := strings.Cut(strings.TrimPrefix(f[1], "value="), ",")
		v, err1 := strconv.ParseFloat(vs, 64)
		ns, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("line %q: %v %v", line, err1, err2)
		}
		out = append(out, iotPoint{ns, tags, v})
	}
	slices.SortStableFunc(out, func(a, b iotPoint) int { return cmp.Compare(a.ns, b.ns) })
	return out
}

// promAnswer evaluates q on points as a Prometheus API does: times kept in
// milliseconds, each evaluation time t of q.PromArgs taking the points of
// its series selector in (t-d, t], d the query's range (for a series
// query, end - start). It returns, per evaluation time and group (the
// label by, or "" for one group), the matching points in time order.
func promAnswer(t *testing.T, q Query, points []iotPoint, by string) map[int64]map[string][]iotPoint {
	args := map[string]int64{}
	for _, a := range q.PromArgs {
		n, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", q.Name, err)
		}
		args[a[0]] = n * 1000
	}
	var evals []int64
	var d int64
	switch {
	case q.PromSeries:
		evals, d = []int64{args["end"]}, args["end"]-args["start"]
	case args["step"] == 0:
		evals = []int64{args["time"]}
	default:
		for e := args["start"]; e <= args["end"]; e += args["step"] {
			evals = append(evals, e)
		}
	}
	if !q.PromSeries {
		m := regexp.MustCompile(`\[(\d+[mh])\]`).FindStringSubmatch(q.Prom)
		r, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatalf("%s: range %q: %v", q.Name, m[1], err)
		}
		d = r.Milliseconds()
	}
	sel := q.Prom
	if i := strings.Index(sel, "{"); i >= 0 {
		sel = sel[i:strings.Index(sel, "}")]
	} else {
		sel = ""
	}
	type matcher struct {
		label string
		re    *regexp.Regexp
	}
	var ms []matcher
	for _, m := range regexp.MustCompile(`(\w+)(=~|=)"([^"]*)"`).FindAllStringSubmatch(sel, -1) {
		pat := regexp.QuoteMeta(m[3])
		if m[2] == "=~" {
			pat = m[3]
		}
		ms = append(ms, matcher{m[1], regexp.MustCompile("^(?:" + pat + ")$")})
	}
	out := map[int64]map[string][]iotPoint{}
	for _, e := range evals {
		for _, p := range points {
			if at := p.ns / 1e6; at <= e-d || at > e {
				continue
			}
			if !slices.ContainsFunc(ms, func(m matcher) bool { return !m.re.MatchString(p.tags[m.label]) }) {
				if out[e] == nil {
					out[e] = map[string][]iotPoint{}
				}
				out[e][p.tags[by]] = append(out[e][p.tags[by]], p)
			}
		}
	}
	return out
}

// group is the group column of an aggregate row grouped by the meta path
// tags.<by>: the server names it after the meta field.
func group(row map[string]any, by string) string {
	g, ok := row["tags"].(string)
	if !ok {
		g, _ = row["tags."+by].(string)
	}
	return g
}

// TestFleetQueriesAgree loads a small iot workload into a Hourglass server
// over line protocol and checks every fleet query's answer against the
// same query evaluated on the generated points the way a Prometheus API
// (VictoriaMetrics) evaluates its PromQL form: both targets give the same
// answer, and none is empty.
func TestFleetQueriesAgree(t *testing.T) {
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h, err := api.New(api.Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	w := IoT{Sensors: 200, Span: 2 * time.Hour, Late: 0.05}
	w.EnsureDefaults()
	ctx := context.Background()
	res, err := Load(ctx, LoadConfig{Source: w, URL: srv.URL + "/write?db=fleet"})
	if err != nil || res.Errors > 0 || res.Rows != int64(w.Rows()) {
		t.Fatalf("load: %+v %v", res, err)
	}
	// Points on the edges of windows and ranges, where a millisecond
	// either way changes the answers.
	end := w.Start.Add(w.Span)
	var edges []byte
	for i, e := range []struct {
		tags string
		at   time.Time
	}{
		{"sensor=s000042,site=site-42,kind=pressure", w.Start.Add(30 * time.Minute)},
		{"sensor=s000042,site=site-42,kind=pressure", w.Start.Add(30*time.Minute + time.Millisecond + 1)},
		{"sensor=s000042,site=site-42,kind=pressure", end},
		{"sensor=s000007,site=site-7,kind=vibration", w.Start.Add(time.Hour)},
		{"sensor=s000001,site=site-1,kind=humidity", end.Add(-10 * time.Minute)},
		{"sensor=s000001,site=site-1,kind=humidity", end.Add(-10*time.Minute + time.Millisecond)},
	} {
		edges = fmt.Appendf(edges, "iot,%s value=%d,battery=1i %d\n", e.tags, 1000+i, e.at.UnixNano())
	}
	resp, err := http.Post(srv.URL+"/write?db=fleet", "text/plain", bytes.NewReader(edges))
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("edge points: %v %v", resp, err)
	}
	resp.Body.Close()
	points := iotPoints(t, append(iotBytes(w), edges...))
	cfg := QueryConfig{Dialect: Hourglass, Base: srv.URL, Collection: "fleet", Client: srv.Client()}
	for _, q := range w.Queries() {
		req, err := cfg.request(ctx, &q)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cfg.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s: %s", q.Name, resp.Status, body)
		}
		var rows []map[string]any
		if q.Endpoint == "distinct" {
			// {"values": [...]}: a row of each value.
			var d struct{ Values []any }
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatalf("%s: %v: %.300s", q.Name, err, body)
			}
			for _, v := range d.Values {
				rows = append(rows, map[string]any{"tags": v})
			}
		} else if err := json.Unmarshal(body, &rows); err != nil {
			t.Fatalf("%s: %v: %.300s", q.Name, err, body)
		}
		// got and want: one value per key (a window start in ms, a
		// sensor, or a position in the raw series).
		got, want := map[string]float64{}, map[string]float64{}
		switch q.Name {
		case "sensor-raw-3h":
			for i, r := range rows {
				got[strconv.Itoa(i)] = r["value"].(float64)
			}
			for _, g := range promAnswer(t, q, points, "") {
				for i, p := range g[""] {
					want[strconv.Itoa(i)] = p.value
				}
			}
		case "sensor-avg-1m", "site-avg-1h":
			col, by, d := "value_avg", "", time.Minute
			if q.Name == "site-avg-1h" {
				by, d = "site", time.Hour
			}
			for _, r := range rows {
				ts, err := time.Parse(time.RFC3339Nano, r["time"].(string))
				if err != nil {
					t.Fatal(err)
				}
				// A window starting at s is Prometheus' evaluation at
				// s - 1ms + d.
				key := strconv.FormatInt(ts.Add(d-time.Millisecond).UnixMilli(), 10)
				if by != "" {
					key += "/" + group(r, by)
				}
				got[key] = r[col].(float64)
			}
			for e, groups := range promAnswer(t, q, points, by) {
				for g, ps := range groups {
					key := strconv.FormatInt(e, 10)
					if by != "" {
						key += "/" + g
					}
					sum := 0.0
					for _, p := range ps {
						sum += p.value
					}
					want[key] = sum / float64(len(ps))
				}
			}
		case "lastpoint", "sensors-by-meta":
			for _, r := range rows {
				s := group(r, "sensor")
				if _, dup := got[s]; dup {
					t.Fatalf("%s: sensor %s twice", q.Name, s)
				}
				got[s] = 1 // sensors-by-meta: the sensor is listed
				if q.Name == "lastpoint" {
					got[s] = r["value_last"].(float64)
				}
			}
			for _, groups := range promAnswer(t, q, points, "sensor") {
				for s, ps := range groups {
					want[s] = 1
					if q.Name == "lastpoint" {
						want[s] = ps[len(ps)-1].value
					}
				}
			}
		default:
			t.Fatalf("no check for query %s", q.Name)
		}
		if len(want) == 0 || len(got) != len(want) {
			t.Errorf("%s: %d rows from the server, %d from the points", q.Name, len(got), len(want))
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || math.Abs(g-v) > 1e-9*math.Max(1, math.Abs(v)) {
				t.Errorf("%s: %s: server %v (present %v), points %v", q.Name, k, g, ok, v)
			}
		}
		t.Logf("%s: %d rows, %d bytes", q.Name, len(rows), len(body))
	}
	// Every query runs through RunQueries, and Only names them.
	cfg.Queries, cfg.Runs, cfg.Warmup = w.Queries(), 1, -1
	if res, err := RunQueries(ctx, cfg); err != nil || len(res) != 5 {
		t.Fatalf("RunQueries: %+v %v", res, err)
	}
	cfg.Only = []string{"q1"}
	if _, err := RunQueries(ctx, cfg); err == nil || !strings.Contains(err.Error(), `no query "q1"`) {
		t.Fatalf("q1 among the iot queries: %v", err)
	}
}

// TestFleetQueriesProm checks the PromQL requests of the fleet queries: the
// series list goes to /api/v1/series with match[], start and end; the
// others to /api/v1/query or query_range, times from the workload.
func TestFleetQueriesProm(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.Write([]byte(`{"status":"success"}`))
	}))
	defer srv.Close()
	w := IoT{Span: 3 * time.Hour}
	if _, err := RunQueries(context.Background(), QueryConfig{Dialect: PromQL, Base: srv.URL, Runs: 1, Warmup: -1, Queries: w.Queries()}); err != nil {
		t.Fatal(err)
	}
	// 2024-01-01T00:00:00Z is 1704067200; the load ends 3 h later.
	want := []string{
		"/api/v1/query?nocache=1&query=iot_value%7Bsensor%3D%22s000042%22%7D%5B3h%5D&time=1704078000",
		"/api/v1/query_range?end=1704078000&nocache=1&query=avg_over_time%28iot_value%7Bsensor%3D%22s000042%22%7D%5B1m%5D%29&start=1704066900&step=60",
		"/api/v1/query?nocache=1&query=last_over_time%28iot_value%5B1h%5D%29&time=1704078000",
		"/api/v1/query_range?end=1704078000&nocache=1&query=sum+by+%28site%29+%28sum_over_time%28iot_value%7Bsite%3D%22site-7%22%7D%5B1h%5D%29%29+%2F+sum+by+%28site%29+%28count_over_time%28iot_value%7Bsite%3D%22site-7%22%7D%5B1h%5D%29%29&start=1704067200&step=3600",
		"/api/v1/series?end=1704078000&match%5B%5D=iot_value%7Bkind%3D%22humidity%22%2Csite%3D~%22site-1%7Csite-2%7Csite-5%22%7D&start=1704077400",
	}
	if !slices.Equal(seen, want) {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	// They have no InfluxQL form: an InfluxQL target is refused, not sent
	// an empty statement.
	_, err := RunQueries(context.Background(), QueryConfig{Dialect: InfluxQL, Base: srv.URL + "/query?db=b", Queries: w.Queries()})
	if err == nil || !strings.Contains(err.Error(), "no InfluxQL form") || len(seen) != len(want) {
		t.Errorf("InfluxQL target: %v, %d requests", err, len(seen))
	}
}
