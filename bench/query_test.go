package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestQueryRequests checks each dialect's requests on a fake server and the
// run counts.
func TestQueryRequests(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path+"?"+r.URL.RawQuery]++
		mu.Unlock()
		w.Write([]byte(`{"ok":1}`))
	}))
	defer srv.Close()
	for _, c := range []struct {
		cfg  QueryConfig
		want []string
	}{
		{QueryConfig{Dialect: Hourglass, Base: srv.URL, Collection: "c"}, []string{"/v1/collections/c/aggregate?q=", "%22window%22%3A+%221m%22"}},
		{QueryConfig{Dialect: PromQL, Base: srv.URL}, []string{"/api/v1/query?", "/api/v1/query_range?", "step=60"}},
		{QueryConfig{Dialect: InfluxQL, Base: srv.URL + "/query?db=benchmark"}, []string{"/query?db=benchmark&q=SELECT+max", "GROUP+BY+time%281m%29"}},
	} {
		mu.Lock()
		clear(seen)
		mu.Unlock()
		c.cfg.Runs, c.cfg.Warmup = 3, 1
		res, err := RunQueries(context.Background(), c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(Queries) || res[0].Runs != 3 || res[1].Runs != 3 || res[0].Median <= 0 || res[1].P99 < res[1].Median || res[0].Bytes != 8 {
			t.Fatalf("dialect %d: %+v", c.cfg.Dialect, res)
		}
		mu.Lock()
		var all []string
		total := 0
		for u, n := range seen {
			all = append(all, u)
			total += n
		}
		mu.Unlock()
		if total != 4*len(Queries) {
			t.Fatalf("dialect %d: %d requests, want %d (every query: 1 warm-up + 3)", c.cfg.Dialect, total, 4*len(Queries))
		}
		joined := strings.Join(all, " ")
		for _, w := range c.want {
			if !strings.Contains(joined, w) {
				t.Errorf("dialect %d: no request with %q in %s", c.cfg.Dialect, w, joined)
			}
		}
	}
	// Only some queries.
	res, err := RunQueries(context.Background(), QueryConfig{Dialect: PromQL, Base: srv.URL, Runs: 1, Only: []string{"lastpoint"}})
	if err != nil || len(res) != 1 || res[0].Name != "lastpoint" {
		t.Fatalf("only lastpoint: %+v %v", res, err)
	}
	// A failing query is an error naming it.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 500) }))
	defer bad.Close()
	if _, err := RunQueries(context.Background(), QueryConfig{Dialect: PromQL, Base: bad.URL}); err == nil || !strings.Contains(err.Error(), "q1") {
		t.Fatalf("failing target: %v", err)
	}
}
