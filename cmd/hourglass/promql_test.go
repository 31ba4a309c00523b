package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestPromQLFlags checks that --promql-max-samples and --promql-timeout
// reach the query API of the binary: the same query answers 200 by
// default, 422 execution past the samples, 503 timeout past the time.
func TestPromQLFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the binary")
	}
	var docs strings.Builder
	docs.WriteString("[")
	for i := range 10 {
		if i > 0 {
			docs.WriteString(",")
		}
		fmt.Fprintf(&docs, `{"t": {"$date": "2024-05-01T12:00:%02dZ"}, "labels": {"__name__": "m", "job": "x"}, "value": %d}`, i, i)
	}
	docs.WriteString("]")
	query := "/api/v1/query?query=count_over_time(m%5B1m%5D)&time=1714564810"
	for _, c := range []struct {
		flags  []string
		status int
		want   string
	}{
		{nil, 200, `"value":[1714564810,"10"]`},
		{[]string{"--promql-max-samples", "3"}, 422, `"errorType":"execution"`},
		{[]string{"--promql-timeout", "1ns"}, 503, `"errorType":"timeout"`},
	} {
		s := startServer(t, t.TempDir(), c.flags...)
		if st := s.put(t, "/v1/collections/prometheus", `{"timeseries": {"timeField": "t", "metaField": "labels"}}`); st != 201 {
			t.Fatalf("create: %d", st)
		}
		if st, b, err := s.post(t, "/v1/collections/prometheus/documents", "application/json", docs.String()); err != nil || st != 200 {
			t.Fatalf("insert: %d %v %s", st, err, b)
		}
		st, b, err := s.post(t, query, "application/x-www-form-urlencoded", "")
		if err != nil || st != c.status || !strings.Contains(string(b), c.want) {
			t.Fatalf("%v: %d %v %.300s", c.flags, st, err, b)
		}
		s.cmd.Process.Kill()
		<-s.done
	}
}
