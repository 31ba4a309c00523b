package bench

import (
	"strconv"
	"time"
)

// Queries are the fleet queries on the workload w as loaded through line
// protocol: on Hourglass, the collection of `hourglass bench ingest
// --workload iot` (meta field "tags" holding sensor, site and kind; fields
// value and battery); on a Prometheus API, the metric iot_value with the
// labels sensor, site and kind, as VictoriaMetrics names what its
// influx /write receives. Their times follow w's Start and Span.
//
// Each query gives the same answer on both targets. A Prometheus API keeps
// milliseconds and its windows are (t-d, t]; a stored nanosecond time n
// falls in such a window when n is in [t-d+1ms, t+1ms), so every Hourglass
// range and window origin is moved by 1 ms. The sensor queried is s000042
// (42 modulo Sensors); the site queries need 100 sensors or more, so that
// every site (sensor number modulo 100) has sensors.
func (w IoT) Queries() []Query {
	w.EnsureDefaults()
	const ms = time.Millisecond
	end := w.Start.Add(w.Span)
	// The earliest point: the first tick jittered and sent late.
	first := w.Start.Add(-w.LateBy - w.Interval)
	lo1m, lo1h := first.Truncate(time.Minute), first.Truncate(time.Hour)
	sensor := "s" + string(appendPadded(nil, 42%w.Sensors, 6))
	date := func(t time.Time) string {
		return `{"$date": "` + t.UTC().Format(time.RFC3339Nano) + `"}`
	}
	// between is a time filter on [from+1ms, to+1ms): Prometheus' (from, to].
	between := func(from, to time.Time) string {
		return `"time": {"$gte": ` + date(from.Add(ms)) + `, "$lt": ` + date(to.Add(ms)) + `}`
	}
	unix := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	span := func(from time.Time, step time.Duration) [][2]string {
		return [][2]string{{"start", unix(from)}, {"end", unix(end)}, {"step", strconv.Itoa(int(step / time.Second))}}
	}
	at := [][2]string{{"time", unix(end)}}
	sites := `"site-1", "site-2", "site-5"`
	return []Query{
		{Name: "sensor-raw-3h", Description: "the raw values of one sensor over the last 3 hours",
			Hourglass: `{"filter": {"tags.sensor": "` + sensor + `", ` + between(end.Add(-3*time.Hour), end) + `}, "projection": {"time": 1, "value": 1}}`, Endpoint: "find",
			Prom: `iot_value{sensor="` + sensor + `"}[3h]`, PromArgs: at},
		{Name: "sensor-avg-1m", Description: "1-minute averages of one sensor over the whole load",
			Hourglass: `{"filter": {"tags.sensor": "` + sensor + `", ` + between(lo1m, end) + `}, "window": "1m", "origin": ` + date(lo1m.Add(ms)) + `, "groupBy": null, "fields": ["value"], "funcs": ["avg"]}`,
			Prom:      `avg_over_time(iot_value{sensor="` + sensor + `"}[1m])`, PromArgs: span(lo1m.Add(time.Minute), time.Minute)},
		{Name: "lastpoint", Description: "the last value of every sensor (in the last hour)",
			Hourglass: `{"filter": {` + between(end.Add(-time.Hour), end) + `}, "window": "1h", "origin": ` + date(end.Add(-time.Hour+ms)) + `, "groupBy": "tags.sensor", "fields": ["value"], "funcs": ["last"]}`,
			Prom:      `last_over_time(iot_value[1h])`, PromArgs: at},
		{Name: "site-avg-1h", Description: "hourly averages of site-7 (1% of the sensors, selected by tags.site) over the whole load",
			Hourglass: `{"filter": {"tags.site": "site-7", ` + between(lo1h, end) + `}, "window": "1h", "origin": ` + date(lo1h.Add(ms)) + `, "groupBy": "tags.site", "fields": ["value"], "funcs": ["avg"]}`,
			Prom:      `sum by (site) (sum_over_time(iot_value{site="site-7"}[1h])) / sum by (site) (count_over_time(iot_value{site="site-7"}[1h]))`,
			PromArgs:  span(lo1h.Add(time.Hour), time.Hour)},
		{Name: "sensors-by-meta", Description: "the humidity sensors of three sites reporting in the last 10 minutes",
			Hourglass: `{"key": "tags.sensor", "filter": {"tags.kind": "humidity", "tags.site": {"$in": [` + sites + `]}, ` + between(end.Add(-10*time.Minute), end) + `}}`, Endpoint: "distinct",
			Prom: `iot_value{kind="humidity",site=~"site-1|site-2|site-5"}`, PromSeries: true,
			PromArgs: [][2]string{{"start", unix(end.Add(-10 * time.Minute))}, {"end", unix(end)}}},
	}
}

// QueryNames lists the names of qs, comma-separated.
func QueryNames(qs []Query) string {
	b := make([]byte, 0, 16*len(qs))
	for i, q := range qs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, q.Name...)
	}
	return string(b)
}
