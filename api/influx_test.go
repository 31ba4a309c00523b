package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestInfluxWrite(t *testing.T) {
	s := newTestServer(t, nil)
	body := "cpu,host=a,region=eu usage_user=1.5,usage_idle=90i,ok=true,note=\"x y\" 1714564800\n" +
		"cpu,region=eu,host=a usage_user=2.5 1714564810\n" +
		"mem,host=a used=7i 1714564800\n"
	s.mustDo(204, "POST", "/write?db=telegraf&precision=s", body)
	r := s.mustDo(200, "GET", "/v1/collections/telegraf", "")
	desc := r.json(t)
	ts := desc["options"].(map[string]any)["timeseries"].(map[string]any)
	if ts["timeField"] != "time" || ts["metaField"] != "tags" || desc["count"].(float64) != 3 {
		t.Fatalf("created collection: %s", r.body)
	}
	rows := s.findRows("telegraf", `{"filter": {"tags._measurement": "cpu"}, "sort": {"time": 1}}`)
	if len(rows) != 2 {
		t.Fatalf("rows: %v", rows)
	}
	tags := rows[0]["tags"].(map[string]any)
	if tags["_measurement"] != "cpu" || tags["host"] != "a" || tags["region"] != "eu" {
		t.Fatalf("tags: %v", tags)
	}
	if rows[0]["time"].(map[string]any)["$date"] != "2024-05-01T12:00:00Z" || rows[0]["usage_user"].(float64) != 1.5 ||
		rows[0]["usage_idle"].(float64) != 90 || rows[0]["ok"] != true || rows[0]["note"] != "x y" {
		t.Fatalf("row: %v", rows[0])
	}
	// Both tag orders are one series: the second row has the same tags.
	if !equalJSON(rows[0]["tags"], rows[1]["tags"]) {
		t.Fatalf("tag order split a series: %v vs %v", rows[0]["tags"], rows[1]["tags"])
	}

	// v2 with ms precision, gzip.
	s.mustDo(204, "POST", "/api/v2/write?org=o&bucket=telegraf&precision=ms",
		string(gzipped(t, []byte("cpu,host=b usage_user=3 1714564800000\n"))), "Content-Encoding", "gzip")
	rows = s.findRows("telegraf", `{"filter": {"tags.host": "b"}}`)
	if len(rows) != 1 || rows[0]["time"].(map[string]any)["$date"] != "2024-05-01T12:00:00Z" {
		t.Fatalf("v2 rows: %v", rows)
	}

	// Partial write: good lines are kept; the first bad line is named.
	r = s.mustDo(400, "POST", "/write?db=telegraf&precision=s", "cpu,host=c v=1 1714564800\ncpu,host=c v= 1714564801\ncpu,host=c v=3 1714564802\ncpu,host=c bad\n")
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Line    int    `json:"line"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Code != "invalid" || e.Line != 2 || !strings.Contains(e.Message, "dropped 2") {
		t.Fatalf("partial write reply: %s", r.body)
	}
	if rows := s.findRows("telegraf", `{"filter": {"tags.host": "c"}}`); len(rows) != 2 {
		t.Fatalf("good lines of a partial write: %v", rows)
	}
	// A line the collection refuses (a field named like the timeField).
	r = s.mustDo(400, "POST", "/write?db=telegraf&precision=s", "cpu,host=d v=1 1714564800\ncpu,host=d time=2 1714564801\n")
	if err := json.Unmarshal(r.body, &e); err != nil || e.Line != 2 {
		t.Fatalf("refused line reply: %s", r.body)
	}

	for _, c := range []struct{ path, body string }{
		{"/write", "cpu v=1"},
		{"/api/v2/write?org=o", "cpu v=1"},
		{"/write?db=x&precision=fortnights", "cpu v=1"},
		{"/api/v2/write?bucket=x&precision=h", "cpu v=1"}, // v2 has no h
		{"/write?db=" + url.QueryEscape("bad name"), "cpu v=1"},
	} {
		r := s.mustDo(400, "POST", c.path, c.body)
		if !strings.Contains(string(r.body), `"code":"invalid"`) {
			t.Errorf("%s: %s", c.path, r.body)
		}
	}
	s.mustDo(201, "PUT", "/v1/collections/plain", "")
	s.mustDo(400, "POST", "/write?db=plain", "cpu v=1")
	s.mustDo(404, "GET", "/v1/collections/x", "") // refused writes create nothing
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestInfluxQuery(t *testing.T) {
	s := newTestServer(t, nil)
	r := s.mustDo(200, "POST", "/query?q="+url.QueryEscape(`CREATE DATABASE "telegraf"`), "")
	if !strings.Contains(string(r.body), `"statement_id":0`) || strings.Contains(string(r.body), "error") {
		t.Fatalf("create database: %s", r.body)
	}
	s.mustDo(200, "POST", "/query", "q="+url.QueryEscape("CREATE DATABASE metrics WITH DURATION 1d"), "Content-Type", "application/x-www-form-urlencoded")
	r = s.mustDo(200, "GET", "/query?q="+url.QueryEscape("SHOW DATABASES"), "")
	var res struct {
		Results []struct {
			Series []struct {
				Values [][]string `json:"values"`
			} `json:"series"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &res); err != nil || len(res.Results) != 1 || len(res.Results[0].Series) != 1 {
		t.Fatalf("show databases: %v %s", err, r.body)
	}
	if v := res.Results[0].Series[0].Values; len(v) != 2 || v[0][0] != "metrics" || v[1][0] != "telegraf" {
		t.Fatalf("databases: %v", v)
	}
	s.mustDo(400, "POST", "/query?q="+url.QueryEscape("SELECT * FROM cpu"), "")
	s.mustDo(400, "POST", "/query", "")
}

// TestInfluxWriteInChunks checks a body of more entries than one chunk
// holds: every good line is stored, and the reply names the first bad
// line of the body (a parse failure or a refusal by the collection,
// whichever comes first) and counts the lines of every chunk.
func TestInfluxWriteInChunks(t *testing.T) {
	s := newTestServer(t, nil)
	const n = 150_000 // three chunks
	body := func(parseErr, refused int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			switch i {
			case parseErr:
				b.WriteString("cpu,host=a bad\n")
			case refused:
				fmt.Fprintf(&b, "cpu,host=a time=1 %d\n", 1714564800+i)
			default:
				fmt.Fprintf(&b, "cpu,host=a v=%d %d\n", i, 1714564800+i)
			}
		}
		return b.String()
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Line    int    `json:"line"`
	}
	for _, c := range []struct {
		db                string
		parseErr, refused int
		line              int
	}{
		{"a", 130_001, 90_000, 90_000},
		{"b", 70_500, 120_000, 70_500},
	} {
		r := s.mustDo(400, "POST", "/write?db="+c.db+"&precision=s", body(c.parseErr, c.refused))
		if err := json.Unmarshal(r.body, &e); err != nil || e.Line != c.line ||
			!strings.Contains(e.Message, fmt.Sprintf("dropped 2 of %d lines, wrote %d", n, n-2)) {
			t.Fatalf("%s: reply %s, want line %d", c.db, r.body, c.line)
		}
		desc := s.mustDo(200, "GET", "/v1/collections/"+c.db, "").json(t)
		if got := desc["count"].(float64); got != n-2 {
			t.Fatalf("%s: count %v, want %d", c.db, got, n-2)
		}
	}
}
